"""Seeing into a tenant's memory (seed 002 §13 and phase 6): graph metrics for
``memory_stats``, a fact's provenance chain (:func:`explain_fact`) and the weak facts report
(:func:`weak_facts`).

Core operations (run by the sync and async engines like those of ``_core``). Each is a few
set-based statements over the tenant's rows, run in its tenant transaction as the
application role; they read and write nothing else, so they journal nothing.

Example::

    with engine.tenant({"user_id": "u-1"}) as mem:
        chain = mem.explain_fact(fact_id)       # derived_from, supersedes, episodes
        weak = mem.weak_facts(limit=20)         # low confidence, single source, fading
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any
from uuid import UUID

from psycopg import sql

from primitives.compile import Tables
from primitives.engine._consolidate import CONSOLIDATED_EVENT, extraction_rules
from primitives.engine._core import Context, Op, Step, get_step
from primitives.engine._queries import ACTIVE, _returning_m
from primitives.engine._records import Memory
from primitives.errors import PolicyViolation, TenancyError
from primitives.lifecycle._decay import DecayModels, decay_models
from primitives.spec import AgentSpec

__all__ = ["FactProvenance", "SessionEpisodes", "WeakFact", "explain_fact", "graph_stats",
           "session_episodes", "weak_facts"]

DECAY_ARCHIVED_EVENT = "decay_archived"
PROVENANCE_EDGES = ("derived_from", "supersedes")
"""The edges a provenance chain follows, from a memory to what it rests on or replaced."""
MAX_PROVENANCE_DEPTH = 8
WEAK_BELOW = 0.5
"""The weak facts report's default bar: an effective confidence under it is low."""
WEAK_HORIZON = timedelta(days=7)
"""How far ahead the report looks for a fact decaying below its typology's threshold."""
_VALID_EDGE = sql.SQL("(e.valid_until IS NULL OR e.valid_until > now())")


# memory_stats: graph metrics (seed 002 §13) ----------------------------------------------------
@lru_cache(maxsize=64)
def graph_stats_statement(tables: Tables) -> sql.Composed:
    """One row of the tenant's graph metrics: edges valid now by relation type (jsonb),
    entities, active memories with no valid edge and no entity mention (orphans), active
    memories, sessions with source rows the consolidation ledger has not seen, the last
    ``consolidated`` and ``decay_archived`` events, the bytes of the tenant's rows, and when
    maintain last completed a decay pass over all the agent's tenants
    (``primitives.last_maintenance_run``: the runtime role reads no other maintenance data).
    Params: ``tenant``, ``agent``, ``rules``, ``tiers``, ``typologies`` (the extraction rules
    and their sources, parallel text arrays)."""
    assert tables.edges is not None and tables.entities is not None
    assert tables.node_entities is not None
    t = tables.tenant
    return sql.SQL(
        "SELECT (SELECT coalesce(jsonb_object_agg(x.relation_type, x.n), '{{}}'::jsonb) FROM "
        "(SELECT e.relation_type, count(*) AS n FROM {edges} AS e WHERE e.{t} = %(tenant)s "
        "AND {valid} GROUP BY 1) AS x), "
        "(SELECT count(*) FROM {entities} WHERE {t} = %(tenant)s), "
        "(SELECT count(*) FROM {mem} AS m WHERE m.{t} = %(tenant)s AND {active} "
        "AND NOT EXISTS (SELECT 1 FROM {edges} AS e WHERE e.{t} = m.{t} "
        "AND e.source_id = m.id AND {valid}) "
        "AND NOT EXISTS (SELECT 1 FROM {edges} AS e WHERE e.{t} = m.{t} "
        "AND e.target_id = m.id AND {valid}) "
        "AND NOT EXISTS (SELECT 1 FROM {ne} AS n WHERE n.{t} = m.{t} AND n.memory_id = m.id)), "
        "(SELECT count(*) FROM {mem} AS m WHERE m.{t} = %(tenant)s AND {active}), "
        "(SELECT count(DISTINCT m.scope_id) FROM {mem} AS m "
        "JOIN unnest(%(rules)s::text[], %(tiers)s::text[], %(typologies)s::text[]) "
        "AS r(rule, tier, typology) ON r.tier = m.tier AND r.typology = m.typology "
        "WHERE m.{t} = %(tenant)s AND m.scope_id IS NOT NULL AND m.erased_at IS NULL "
        "AND {active} AND NOT EXISTS (SELECT 1 FROM {led} AS p WHERE p.{t} = m.{t} "
        "AND p.rule = r.rule AND p.source_id = m.id)), "
        "(SELECT max(occurred_at) FROM {events} WHERE {t} = %(tenant)s AND kind = {consolidated}), "
        "(SELECT max(occurred_at) FROM {events} WHERE {t} = %(tenant)s AND kind = {archived}), "
        "(SELECT coalesce(sum(pg_column_size(m.*)), 0) FROM {mem} AS m WHERE m.{t} = %(tenant)s) "
        "+ (SELECT coalesce(sum(pg_column_size(e.*)), 0) FROM {edges} AS e "
        "WHERE e.{t} = %(tenant)s) "
        "+ (SELECT coalesce(sum(pg_column_size(x.*)), 0) FROM {entities} AS x "
        "WHERE x.{t} = %(tenant)s) "
        "+ (SELECT coalesce(sum(pg_column_size(j.*)), 0) FROM {events} AS j "
        "WHERE j.{t} = %(tenant)s), "
        "primitives.last_maintenance_run(%(agent)s, 'decay')"
    ).format(t=t, edges=tables.edges.ident, entities=tables.entities.ident,
             mem=tables.memories.ident, ne=tables.node_entities.ident,
             led=tables.promotions.ident, events=tables.events.ident, valid=_VALID_EDGE,
             active=ACTIVE, consolidated=sql.Literal(CONSOLIDATED_EVENT),
             archived=sql.Literal(DECAY_ARCHIVED_EVENT))


def _rule_params(spec: AgentSpec) -> dict[str, list[str]]:
    rules = extraction_rules(spec)
    return {"rules": [r.name for r in rules], "tiers": [r.source_tier for r in rules],
            "typologies": [r.source_typology for r in rules]}


def graph_stats(ctx: Context) -> Op[dict[str, Any]]:
    """The graph part of ``memory_stats`` in seed 002 §13's shape: ``edges`` (valid now, by
    relation type, every declared type present), ``entities``, ``orphan_nodes``,
    ``avg_edges_per_node`` (each edge counted at both ends, over active memories),
    ``unconsolidated_sessions`` (sessions with episodes consolidation has not taken, the
    open one included), ``last_consolidation`` (this tenant's latest ``consolidated`` event:
    a session consolidated, by the engine or marked by a write-path agent),
    ``last_decay_run`` (when ``primitives maintain`` last completed a decay pass over all the
    agent's tenants, recorded in ``primitives.maintenance_runs``; None before the first),
    ``last_decay_archive`` (the latest row the decay pass archived for this tenant) and
    ``storage_bytes`` / ``storage_size_mb`` (the tenant's rows: memories, edges, entities,
    journal)."""
    graph = ctx.spec.graph
    assert graph is not None
    row = yield Step(graph_stats_statement(ctx.tables),
                     {"tenant": ctx.tenant, "agent": ctx.spec.agent, **_rule_params(ctx.spec)},
                     "one")
    by_type, entities, orphans, active, pending, consolidated, archived, size, decayed = row
    edges = {**dict.fromkeys(graph.edges, 0), **{k: int(v) for k, v in by_type.items()}}
    return {
        "edges": edges, "entities": int(entities), "orphan_nodes": int(orphans),
        "avg_edges_per_node": round(2 * sum(edges.values()) / active, 2) if active else 0.0,
        "unconsolidated_sessions": int(pending),
        "last_consolidation": _iso(consolidated), "last_decay_run": _iso(decayed),
        "last_decay_archive": _iso(archived),
        "storage_bytes": int(size), "storage_size_mb": round(int(size) / 1_048_576, 3),
    }


def _iso(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).isoformat() if moment is not None else None


# explain_fact: the provenance chain ---------------------------------------------------------------
@dataclass(frozen=True)
class FactProvenance:
    """How a memory came to be: the memories it rests on (``derived_from`` and
    ``supersedes`` edges followed outward, recursively: ``(depth, relation, memory)``),
    the newer versions that replaced it (``superseded_by``, nearest first), the episodes
    at the end of its chain, and its journal (``kind``, ``occurred_at``, ``actor``)."""

    memory: Memory
    chain: tuple[tuple[int, str, Memory], ...] = ()
    superseded_by: tuple[Memory, ...] = ()
    episodes: tuple[Memory, ...] = ()
    journal: tuple[dict[str, Any], ...] = field(default=())


@lru_cache(maxsize=64)
def _walk(tables: Tables, *, forward: bool) -> sql.Composed:
    """Memories reachable from ``%(id)s`` over provenance edges (any validity: the chain is
    history), by ``forward`` edges (from a memory to what it rests on) or backward ones
    (``supersedes`` only: to the versions that replaced it); each at its least depth, no
    tombstoned or erased row. Rows: depth, relation, then the memory's columns."""
    assert tables.edges is not None
    near, far = ("source_id", "target_id") if forward else ("target_id", "source_id")
    relations = list(PROVENANCE_EDGES) if forward else ["supersedes"]
    return sql.SQL(
        "WITH RECURSIVE walk(id, depth, relation, path) AS ("
        "SELECT e.{far}, 1, e.relation_type, ARRAY[e.{near}, e.{far}] FROM {edges} AS e "
        "WHERE e.{t} = %(tenant)s AND e.{near} = %(id)s AND e.relation_type = ANY({rel}) "
        "UNION ALL SELECT e.{far}, w.depth + 1, e.relation_type, w.path || e.{far} "
        "FROM walk AS w JOIN {edges} AS e ON e.{t} = %(tenant)s AND e.{near} = w.id "
        "AND e.relation_type = ANY({rel}) WHERE w.depth < %(depth)s "
        "AND NOT e.{far} = ANY(w.path)) "
        "SELECT w.depth, w.relation, {cols} FROM (SELECT DISTINCT ON (id) id, depth, relation "
        "FROM walk ORDER BY id, depth) AS w JOIN {mem} AS m ON m.{t} = %(tenant)s "
        "AND m.id = w.id WHERE m.tombstoned_at IS NULL AND m.erased_at IS NULL "
        "ORDER BY w.depth, m.event_time, m.id"
    ).format(near=sql.Identifier(near), far=sql.Identifier(far), edges=tables.edges.ident,
             t=tables.tenant, rel=sql.Literal(relations), cols=_returning_m(),
             mem=tables.memories.ident)


@lru_cache(maxsize=64)
def _journal(tables: Tables) -> sql.Composed:
    return sql.SQL(
        "SELECT kind, occurred_at, actor FROM {} WHERE {} = %(tenant)s AND memory_id = %(id)s "
        "ORDER BY occurred_at, event_id LIMIT 100"
    ).format(tables.events.ident, tables.tenant)


def explain_fact(ctx: Context, memory_id: UUID, *,
                 depth: int = MAX_PROVENANCE_DEPTH) -> Op[FactProvenance]:
    """The provenance chain of ``memory_id`` (seed 002: "how do you know that?"): what it
    was derived from and what it superseded, recursively up to ``depth`` edges, the newer
    versions that superseded it, the episodes it came from and its journal. A
    :class:`TenancyError` when the tenant has no such memory; a spec without ``graph:`` has
    no edges to follow, so it is refused."""
    if ctx.spec.graph is None or ctx.tables.edges is None:
        raise PolicyViolation(f"agent '{ctx.spec.agent}' declares no graph: a provenance "
                              "chain follows graph edges (add graph: to the spec)")
    if not 1 <= depth <= MAX_PROVENANCE_DEPTH:
        raise PolicyViolation(f"depth is 1 to {MAX_PROVENANCE_DEPTH}, got {depth}",
                              field="depth")
    memory = Memory.from_row_or_none((yield get_step(ctx, memory_id)))
    if memory is None:
        raise TenancyError(f"no memory {memory_id} in this tenant", memory_id=str(memory_id))
    params = {"tenant": ctx.tenant, "id": memory_id, "depth": depth}
    back = yield Step(_walk(ctx.tables, forward=True), params, "all")
    newer = yield Step(_walk(ctx.tables, forward=False), params, "all")
    journal = yield Step(_journal(ctx.tables), params, "all")
    chain = tuple((int(r[0]), str(r[1]), Memory.from_row(r[2:])) for r in back)
    return FactProvenance(
        memory, chain, tuple(Memory.from_row(r[2:]) for r in newer),
        tuple(m for _, rel, m in chain if m.typology == "episodic" and rel == "derived_from"),
        tuple({"kind": k, "occurred_at": _iso(at), "actor": a} for k, at, a in journal))


# weak facts report ------------------------------------------------------------------------------
@dataclass(frozen=True)
class WeakFact:
    """A fact the report names, with why: ``low_confidence`` (effective confidence under
    the bar), ``single_source`` (extracted from one episode only), ``fading`` (decaying
    below its typology's threshold within the horizon, when decay would archive it)."""

    id: UUID
    typology: str
    content: str
    stored_confidence: float
    confidence: float
    confidence_at_horizon: float
    threshold: float | None
    sources: int
    reasons: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"id": str(self.id), "type": self.typology, "content": self.content,
                "stored_confidence": self.stored_confidence,
                "confidence": round(self.confidence, 4),
                "confidence_at_horizon": round(self.confidence_at_horizon, 4),
                "threshold": self.threshold, "sources": self.sources,
                "reasons": list(self.reasons)}


def _decaying(spec: AgentSpec) -> list[tuple[str, float | None]]:
    """The typologies the report covers (those that decay) and their archive threshold."""
    archiving = {t for t, life in spec.behavior.lifecycle.items()
                 if "decay_threshold" in life.archive_on}
    return sorted((t, float(p.threshold) if p.threshold is not None and t in archiving
                   else None)
                  for t, p in spec.behavior.decay.items()
                  if p.model in ("ebbinghaus", "validity_window"))


@lru_cache(maxsize=64)
def _weak_statement(models: DecayModels, tables: Tables,
                    thresholds: tuple[tuple[str, float], ...]) -> sql.Composed:
    tenants = sql.SQL("= %(tenant)s")
    now = models.confidence_sql(tables, sql.SQL("%(now)s::timestamptz"), tenants)
    soon = models.confidence_sql(tables, sql.SQL("%(soon)s::timestamptz"), tenants)
    threshold: sql.Composable = sql.SQL("NULL::float8")
    if thresholds:
        threshold = sql.SQL("CASE m.typology {} END").format(sql.SQL(" ").join(
            sql.SQL("WHEN {} THEN {}::float8").format(sql.Literal(t), sql.Literal(v))
            for t, v in thresholds))
    return sql.SQL(
        "SELECT c.* FROM (SELECT m.id, m.typology, m.content, m.confidence::float8 AS stored, "
        "{now} AS confidence, {soon} AS soon, {threshold} AS threshold, "
        "CASE WHEN jsonb_typeof(m.provenance -> 'derived_from') = 'array' "
        "THEN jsonb_array_length(m.provenance -> 'derived_from') ELSE 0 END AS sources "
        "FROM {mem} AS m WHERE m.{t} = %(tenant)s AND m.typology = ANY(%(typologies)s::text[]) "
        "AND {active}) AS c WHERE c.confidence < %(below)s OR c.sources = 1 "
        "OR c.soon < c.threshold ORDER BY c.confidence, c.id LIMIT %(limit)s"
    ).format(now=now, soon=soon, threshold=threshold, mem=tables.memories.ident,
             t=tables.tenant, active=ACTIVE)


def weak_facts(ctx: Context, *, below: float = WEAK_BELOW, horizon: timedelta = WEAK_HORIZON,
               limit: int = 50, now: datetime | None = None) -> Op[list[WeakFact]]:
    """The tenant's weak facts, weakest first: active rows of the typologies that decay
    whose effective confidence now is under ``below``, that were extracted from a single
    episode, or whose confidence falls below their typology's decay threshold within
    ``horizon`` (so the next decay pass after it archives them). ``now``: the clock (default:
    the database's). Nothing is changed."""
    if not 0 < below <= 1:
        raise PolicyViolation(f"below is a confidence in (0, 1], got {below}", field="below")
    if not 1 <= limit <= 1000:
        raise PolicyViolation(f"limit is 1 to 1000, got {limit}", field="limit")
    if horizon < timedelta(0):
        raise PolicyViolation("horizon is a duration of zero or more", field="horizon")
    covered = _decaying(ctx.spec)
    if not covered:
        return []
    at = now or datetime.now(UTC)
    thresholds = tuple((t, v) for t, v in covered if v is not None)
    rows = yield Step(_weak_statement(decay_models(ctx.spec), ctx.tables, thresholds), {
        "tenant": ctx.tenant, "typologies": [t for t, _ in covered], "below": below,
        "now": at, "soon": at + horizon, "limit": limit}, "all")
    out = []
    for mid, typology, content, stored, conf, soon, threshold, sources in rows:
        reasons = tuple(r for r, hit in (
            ("low_confidence", conf < below), ("single_source", sources == 1),
            ("fading", threshold is not None and soon < threshold)) if hit)
        out.append(WeakFact(mid, typology, content, float(stored), float(conf), float(soon),
                            threshold, int(sources), reasons))
    return out


# the write-path agent's view of a session (seed 002 §10.3) -------------------------------------
@dataclass(frozen=True)
class SessionEpisodes:
    """A page of a session's episodes (event order) and whether consolidation has taken all
    of the session's source rows (``consolidated``: none left unclaimed)."""

    episodes: tuple[Memory, ...]
    consolidated: bool


@lru_cache(maxsize=64)
def _session_page(tables: Tables) -> sql.Composed:
    return sql.SQL(
        "SELECT {cols} FROM {mem} AS m WHERE m.{t} = %(tenant)s AND m.scope_id = %(scope)s "
        "AND m.typology = 'episodic' AND m.erased_at IS NULL AND {active} "
        "ORDER BY m.event_time, m.id LIMIT %(limit)s OFFSET %(offset)s"
    ).format(cols=_returning_m(), mem=tables.memories.ident, t=tables.tenant, active=ACTIVE)


@lru_cache(maxsize=64)
def _unclaimed(tables: Tables) -> sql.Composed:
    return sql.SQL(
        "SELECT count(*) FROM {mem} AS m "
        "JOIN unnest(%(rules)s::text[], %(tiers)s::text[], %(typologies)s::text[]) "
        "AS r(rule, tier, typology) ON r.tier = m.tier AND r.typology = m.typology "
        "WHERE m.{t} = %(tenant)s AND m.scope_id = %(scope)s AND m.erased_at IS NULL "
        "AND {active} AND NOT EXISTS (SELECT 1 FROM {led} AS p WHERE p.{t} = m.{t} "
        "AND p.rule = r.rule AND p.source_id = m.id)"
    ).format(mem=tables.memories.ident, t=tables.tenant, active=ACTIVE,
             led=tables.promotions.ident)


def session_episodes(ctx: Context, scope_id: str, *, limit: int = 50,
                     offset: int = 0) -> Op[SessionEpisodes]:
    """The active episodes of session ``scope_id``, in event order, ``limit`` from
    ``offset``, and whether consolidation has claimed every source row of the session."""
    if not 1 <= limit <= 1000 or offset < 0:
        raise PolicyViolation(f"limit is 1 to 1000 and offset 0 or more, got {limit} and "
                              f"{offset}", field="limit")
    rows = yield Step(_session_page(ctx.tables), {
        "tenant": ctx.tenant, "scope": scope_id, "limit": limit, "offset": offset}, "all")
    left = yield Step(_unclaimed(ctx.tables), {
        "tenant": ctx.tenant, "scope": scope_id, **_rule_params(ctx.spec)}, "one")
    return SessionEpisodes(tuple(Memory.from_row(r) for r in rows), int(left[0]) == 0)
