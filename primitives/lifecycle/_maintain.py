"""``primitives maintain``: the periodic lifecycle job, set-based per batch of tenants.

For each spec, the compiled maintenance passes (idle scope closes, corroboration promotion,
decay archiving, the dispositions report) run over the agent's tenants in batches. Each
batch is one short READ COMMITTED transaction as ``primitives_maintainer`` (the journal's
hash chain appends under READ COMMITTED only), so live writers wait at most one batch for a
tenant's journal lock. Every pass journals its own changes and is idempotent: a second run
changes nothing, and a run that was stopped is finished by running it again (tenants are
visited in order; what the stopped run committed stays done). Two runs at once over the same
tenants take turns per batch (:func:`tenant_lock_statement`), so they never close, compound or
promote anything twice.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql

from primitives.compile import Tables, agent_tables
from primitives.compile._non_mirror import refresh_function
from primitives.db._names import MAINTAINER_ROLE
from primitives.lifecycle._boundary import maintain_lock_scope
from primitives.lifecycle._decay import dispositions_statement
from primitives.lifecycle._passes import (
    ClusterForm,
    JobContext,
    MaintenancePass,
    Similarity,
    jobs_for,
    passes_for,
)
from primitives.spec import AgentSpec
from primitives.spec import _cron as cron

__all__ = ["MaintainReport", "maintain", "tenant_lock_statement"]


@dataclass
class MaintainReport:
    """What one run did, per agent and pass (rows changed), and how long it took."""

    agents: dict[str, dict[str, int]] = field(default_factory=dict)
    reported: dict[str, dict[str, int]] = field(default_factory=dict)
    """What report-only passes counted (``dispositions``: forcing-function rows past their
    horizon, awaiting promotion, exemption or archive)."""
    awaiting: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """With ``list_dispositions``: rows awaiting disposition, the oldest of each batch first,
    at most that many per agent: tenant, id, tier, typology, event_time."""
    tenants: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Scheduled passes that did not run because their ``behavior.decay.<typology>.schedule``
    had not fired since their last run: pass, typologies, schedule, last_run, next_due."""
    batches: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"agents": self.agents, "reported": self.reported, "awaiting": self.awaiting,
                "tenants": self.tenants, "skipped": self.skipped,
                "batches": self.batches, "seconds": round(self.seconds, 3)}

    @property
    def changed(self) -> int:
        return sum(n for passes in self.agents.values() for n in passes.values())


_FEATURES = sql.SQL(
    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute WHERE attrelid = %s::regclass "
    "AND attname = 'embedding' AND NOT attisdropped), "
    "EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'pg_trgm'), "
    "EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')")


def _tenants(conn: psycopg.Connection[Any], tables: Tables, *,
             citus: bool = False) -> list[str]:
    """Every tenant with memory rows or scopes, in order (a loose index scan per table; on a
    Citus coordinator, which runs a recursive CTE over a distributed table only with a
    filter on the tenant, the distinct tenants of each table's shards)."""
    if citus:
        return [row[0] for row in conn.execute(sql.SQL(
            "SELECT {t} FROM {mem} UNION SELECT {t} FROM {scopes} ORDER BY 1").format(
            t=tables.tenant, mem=tables.memories.ident, scopes=tables.scopes.ident)).fetchall()]
    statement = sql.SQL(
        "WITH RECURSIVE m(t) AS ("
        "(SELECT {t} FROM {mem} ORDER BY 1 LIMIT 1) UNION ALL "
        "SELECT (SELECT x.{t} FROM {mem} AS x WHERE x.{t} > m.t ORDER BY 1 LIMIT 1) "
        "FROM m WHERE m.t IS NOT NULL), "
        "s(t) AS ("
        "(SELECT {t} FROM {scopes} ORDER BY 1 LIMIT 1) UNION ALL "
        "SELECT (SELECT x.{t} FROM {scopes} AS x WHERE x.{t} > s.t ORDER BY 1 LIMIT 1) "
        "FROM s WHERE s.t IS NOT NULL) "
        "SELECT t FROM m WHERE t IS NOT NULL UNION SELECT t FROM s WHERE t IS NOT NULL "
        "ORDER BY 1").format(t=tables.tenant, mem=tables.memories.ident,
                             scopes=tables.scopes.ident)
    return [row[0] for row in conn.execute(statement).fetchall()]


def _run_cluster_form(conn: psycopg.Connection[Any], form: ClusterForm,
                      params: dict[str, Any]) -> Any:
    """A pass's cluster form for one tenant: its statement, then its writes; the
    statement's count, ``(changed,)``."""
    params = {**params, "nonce": uuid.uuid4().hex}
    row = conn.execute(form.statement, params).fetchone()
    if row is None:
        return None
    for statement, values in form.writes(row, params):
        conn.execute(statement, values)
    return row[:1]


def _refresh_canonical_index(conn: psycopg.Connection[Any], tables: Tables) -> int:
    """Bring the non-mirror guard's index of the canonical texts up to date (see
    :mod:`primitives.compile._non_mirror`); 0 where the guard was not compiled (no pg_trgm)."""
    function = refresh_function(tables)
    row = conn.execute(sql.SQL("SELECT to_regprocedure(%s)"),
                       (f"{tables.schema}.{tables.object_name('refresh_canonical_index')}()",)
                       ).fetchone()
    if row is None or row[0] is None:
        return 0
    changed = conn.execute(sql.SQL("SELECT {}()").format(function)).fetchone()
    return int(changed[0]) if changed else 0


def tenant_lock_statement(tables: Tables) -> sql.Composed:
    """Take the maintain lock of each tenant of ``%(tenants)s`` for the rest of the
    transaction: ``primitives.tenant_xact_lock(tenant, 'maintain:<memories table>')`` (the
    runtime roles may not take advisory locks themselves), in tenant order so two
    maintainers never deadlock. A second ``maintain`` over the same tenants waits for the
    first one's batch to commit, then its passes read what that batch did (READ COMMITTED:
    each statement sees what committed before it began), so no scope is closed, compounded
    or promoted twice. ``end_scope`` takes the same lock for its tenant
    (:func:`~primitives.lifecycle._boundary.scope_end_lock_statement`); writers never do."""
    return sql.SQL(
        "SELECT primitives.tenant_xact_lock(k.tenant, {scope}) FROM ("
        "SELECT DISTINCT u.t COLLATE \"C\" AS tenant FROM unnest(%(tenants)s::text[]) AS u(t) "
        "ORDER BY 1) AS k"
    ).format(scope=sql.Literal(maintain_lock_scope(tables)))


_LAST_RUNS = sql.SQL(
    "SELECT typology, last_run_at FROM primitives.maintenance_runs "
    "WHERE agent = %s AND job = 'decay'")
_RECORD_RUN = sql.SQL(
    "INSERT INTO primitives.maintenance_runs (agent, job, typology, schedule, last_run_at) "
    "SELECT %(agent)s, 'decay', t.typology, t.schedule, %(now)s "
    "FROM unnest(%(typologies)s::text[], %(schedules)s::text[]) AS t(typology, schedule) "
    "ON CONFLICT (agent, job, typology) DO UPDATE SET schedule = EXCLUDED.schedule, "
    "last_run_at = EXCLUDED.last_run_at, "
    "recorded_at = now()")


def _scheduled(conn: psycopg.Connection[Any], spec: AgentSpec, passes: list[MaintenancePass],
               now: datetime, force: bool,
               ) -> tuple[list[MaintenancePass], list[dict[str, Any]]]:
    """The passes to run (unscheduled ones, and scheduled ones due at ``now`` or forced) and
    a description of each scheduled pass that is not due."""
    if not any(p.schedule for p in passes):
        return passes, []
    now = now.astimezone(UTC)                   # schedules are read in UTC
    last = {t: r.astimezone(UTC) for t, r in conn.execute(_LAST_RUNS, (spec.agent,))}
    running: list[MaintenancePass] = []
    skipped: list[dict[str, Any]] = []
    for step in passes:
        if step.schedule is None or force:
            running.append(step)
            continue
        runs = [last.get(t) for t in step.typologies]
        last_run = None if any(r is None for r in runs) else min(r for r in runs if r)
        if cron.due(step.schedule, last_run, now):
            running.append(step)
            continue
        assert last_run is not None
        upcoming = cron.next_after(step.schedule, last_run)
        skipped.append({"pass": step.name, "typologies": list(step.typologies),
                        "schedule": step.schedule, "last_run": last_run.isoformat(),
                        "next_due": upcoming.isoformat() if upcoming else None})
    return running, skipped


def maintain(specs: Sequence[AgentSpec], dsn: str, *, batch_tenants: int = 100,
             now: datetime | None = None, actor: str = "maintain",
             progress: Callable[[str, int, int], None] | None = None,
             duty: float = 1.0, list_dispositions: int = 0, embedder: Any = None,
             extractor: Any = None, force: bool = False) -> MaintainReport:
    """Run every spec's maintenance passes over all its tenants, ``batch_tenants`` per
    transaction, through ``dsn`` (the admin connection: it must be allowed to
    ``SET ROLE primitives_maintainer``). ``now`` fixes the clock the passes compare with
    (default: the current time). ``progress(agent, done, total)`` is called after each batch.
    ``duty`` (0 < duty <= 1) is the share of wall time the job may be busy: after each batch
    it sleeps ``batch time x (1 / duty - 1)``, leaving the rest to live traffic.
    ``list_dispositions`` (> 0): also name that many of the rows awaiting disposition per
    agent (``report.awaiting``), at about a fifth more time for the run; only rows of
    typologies whose ``dispositions`` pass runs in this run (one skipped as not due lists
    nothing).
    ``embedder`` and ``extractor`` are handed to the spec's Python jobs
    (:class:`~primitives.lifecycle._passes.MaintenanceJob`), which run after each batch's
    passes have committed.
    A pass carrying a ``schedule`` (a typology's ``behavior.decay.<typology>.schedule``) runs
    only when the schedule fired since the pass last completed over all the agent's tenants
    (recorded in ``primitives.maintenance_runs`` at ``now``); the others are named in
    ``report.skipped``. ``force`` runs them anyway.
    """
    if batch_tenants < 1:
        raise ValueError("batch_tenants must be at least 1")
    if not 0 < duty <= 1:
        raise ValueError("duty must be in (0, 1]")
    report = MaintainReport()
    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET default_transaction_isolation = 'read committed'")
        for spec in specs:
            tables = agent_tables(spec)
            row = conn.execute(_FEATURES, (tables.memories.qualified,)).fetchone()
            embedding, trigram = bool(row and row[0]), bool(row and row[1])
            # on a Citus coordinator each batch is one tenant, its statements routed whole
            # to the tenant's shards (``tenant``: the passes' cluster forms filter by it)
            citus = bool(row and row[2])
            size = 1 if citus else batch_tenants
            similarity: Similarity = "embedding" if embedding and trigram else (
                "trigram" if trigram else "exact")
            run_now = now or datetime.now(UTC)
            passes = passes_for(spec, tables, embedding=embedding, similarity=similarity)
            with conn.transaction():
                conn.execute(sql.SQL("SET LOCAL ROLE {}").format(
                    sql.Identifier(MAINTAINER_ROLE)))
                passes, skipped = _scheduled(conn, spec, passes, run_now, force)
            if skipped:
                report.skipped[spec.agent] = skipped
            # name only rows of typologies whose dispositions pass runs now: a pass skipped
            # as not due lists nothing (``force`` runs, and lists, it)
            listed_typologies = {t for p in passes if p.name == "dispositions"
                                 for t in p.typologies}
            listing = dispositions_statement(spec, tables, listed=list_dispositions,
                                             typologies=listed_typologies) \
                if list_dispositions > 0 and listed_typologies else None
            jobs = jobs_for(spec, tables)
            lock = tenant_lock_statement(tables)
            counts = report.agents.setdefault(
                spec.agent, {name: 0 for name in [p.name for p in passes] +
                             [j.name for j in jobs]})
            with conn.transaction():
                conn.execute(sql.SQL("SET LOCAL ROLE {}").format(
                    sql.Identifier(MAINTAINER_ROLE)))
                tenants = _tenants(conn, tables, citus=citus)
                if any(item.trigram_guarded for item in spec.discipline.non_mirror):
                    counts.setdefault("canonical_index", 0)
                    counts["canonical_index"] += _refresh_canonical_index(conn, tables)
            report.tenants[spec.agent] = len(tenants)
            for start in range(0, len(tenants), size):
                batch = tenants[start:start + size]
                batch_now = now or datetime.now(UTC)
                params = {"tenants": batch, "now": batch_now, "actor": actor}
                if citus:
                    params["tenant"] = batch[0]
                batch_started = time.perf_counter()
                with conn.transaction():
                    conn.execute(sql.SQL("SET LOCAL ROLE {}").format(
                        sql.Identifier(MAINTAINER_ROLE)))
                    # another maintain on these tenants finishes its batch first
                    conn.execute(lock, params)
                    for step in passes:
                        if citus and step.cluster is not None:
                            changed = _run_cluster_form(conn, step.cluster, params)
                        else:
                            changed = conn.execute(step.statement, params).fetchone()
                        counts[step.name] += int(changed[0]) if changed else 0
                        if changed is not None and len(changed) > 1:
                            reported = report.reported.setdefault(spec.agent, {})
                            reported[step.name] = reported.get(step.name, 0) + int(changed[1])
                    if listing is not None:
                        row = conn.execute(listing, params).fetchone()
                        listed = report.awaiting.setdefault(spec.agent, [])
                        if row is not None:
                            listed.extend(row[2][:max(0, list_dispositions - len(listed))])
                if jobs:
                    job_ctx = JobContext(spec, tables, dsn, batch, batch_now, actor,
                                         embedding, similarity, embedder, extractor, citus)
                    for job in jobs:
                        counts[job.name] += job.run(job_ctx)
                report.batches += 1
                if duty < 1:
                    time.sleep((time.perf_counter() - batch_started) * (1 / duty - 1))
                if progress is not None:
                    progress(spec.agent, start + len(batch), len(tenants))
            # every decay pass that ran to completion, scheduled or not (memory_stats reads
            # the latest through primitives.last_maintenance_run)
            ran = sorted({(t, p.schedule) for p in passes for t in p.typologies},
                         key=lambda r: r[0])
            if ran:
                with conn.transaction():
                    conn.execute(sql.SQL("SET LOCAL ROLE {}").format(
                        sql.Identifier(MAINTAINER_ROLE)))
                    conn.execute(_RECORD_RUN, {"agent": spec.agent, "now": run_now,
                                               "typologies": [t for t, _ in ran],
                                               "schedules": [s for _, s in ran]})
    report.seconds = time.perf_counter() - started
    return report
