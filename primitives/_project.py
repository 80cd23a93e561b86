"""Project-level operations shared by the CLI and the demo: migrate specs onto a server."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import psycopg

from primitives._evolve import check_allowed, plan_record, plan_spec, refuse
from primitives.compile import (
    Capabilities,
    Plan,
    compile_citus,
    compile_plan,
    require_server_version,
)
from primitives.compile._evolution import Evolution, spec_shape
from primitives.db import (
    TEXT_MATCH_OPCLASS,
    apply_migrations,
    apply_plan,
    ensure_text_match,
    has_text_match,
    resolve_dsn,
)
from primitives.db._citus import (
    apply_distributed_plan,
    cluster_nodes,
    is_citus_coordinator,
    migrate_cluster,
)
from primitives.db._connect import connect_failure, with_timeout
from primitives.db._migrate import recorded_plan
from primitives.discipline._canonical import canonical_problems
from primitives.errors import MigrationError, StorageError
from primitives.spec import AgentSpec

__all__ = ["MigrateReport", "PlanResult", "SpecPlan", "canonical_capabilities",
           "detect_capabilities", "migrate", "plan_specs"]

_log = logging.getLogger("primitives")

Target = Literal["auto", "single", "citus"]

_CAPABILITIES = """
SELECT current_setting('server_version_num')::int,
       coalesce(bool_or(extname = 'vector'), false),
       coalesce(bool_or(extname = 'pg_trgm'), false),
       coalesce(bool_or(extname = 'btree_gin'), false),
       coalesce((SELECT n.nspname::text FROM pg_catalog.pg_extension AS x
                 JOIN pg_catalog.pg_namespace AS n ON n.oid = x.extnamespace
                 WHERE x.extname = 'pg_trgm'), 'public')
FROM pg_catalog.pg_extension
"""


def detect_capabilities(conn: psycopg.Connection[Any]) -> Capabilities:
    """What the connected server offers: its version, the extensions installed and the
    leakproof full-text match."""
    row = conn.execute(_CAPABILITIES).fetchone()
    assert row is not None
    version, vector, trigram, btree_gin, trigram_schema = row
    return Capabilities(vector=vector, trigram=trigram, btree_gin=btree_gin,
                        text_match=has_text_match(conn), server_version=version,
                        trigram_schema=trigram_schema)


def canonical_capabilities(conn: psycopg.Connection[Any], spec: AgentSpec,
                           caps: Capabilities) -> tuple[Capabilities, list[str]]:
    """``caps`` with the spec's referable canonical tables (``canonical_keys``), and a
    warning for each thing about its non-mirror canonical sources that is not as the guard
    and the references need (:func:`~primitives.discipline._canonical.canonical_problems`)."""
    keys, notes = canonical_problems(conn, spec, caps)
    return replace(caps, canonical_keys=keys), notes


@dataclass(frozen=True)
class PlanResult:
    agent: str
    schema: str
    prefix: str
    statements: int
    applied: bool


def _resolve_target(conn: psycopg.Connection[Any], target: Target) -> bool:
    """True for a distributed migration; ``MigrationError`` when ``target`` does not fit."""
    if target not in ("auto", "single", "citus"):
        raise MigrationError(f"unknown migrate target {target!r}: auto, single or citus")
    coordinator = is_citus_coordinator(conn)
    if target == "citus" and not coordinator:
        raise MigrationError("--target citus: this server is not a Citus coordinator (no "
                             "citus extension, or citus_is_coordinator() is false)")
    return coordinator if target == "auto" else target == "citus"


@dataclass
class SpecPlan:
    """One spec's classified changes (``primitives plan``), and whether its plan is unchanged."""

    evolution: Evolution
    plan: Plan
    unchanged: bool


@dataclass
class MigrateReport:
    target: str = "single"
    migrations: list[str] = field(default_factory=list)
    plans: list[PlanResult] = field(default_factory=list)
    capabilities: Capabilities = field(default_factory=Capabilities)
    warnings: list[str] = field(default_factory=list)
    specs: list[SpecPlan] = field(default_factory=list)

    def summary(self) -> str:
        applied = sum(p.applied for p in self.plans)
        return (f"{len(self.migrations)} framework migration(s) applied, {applied} agent plan(s) "
                f"applied, {len(self.plans) - applied} unchanged")


def migrate(
    specs: Sequence[AgentSpec],
    *,
    dsn: str | None = None,
    progress: Callable[[str], object] = _log.info,
    target: Target = "auto",
    allow: Sequence[str] = (),
    reason: str | None = None,
    dry_run: bool = False,
) -> MigrateReport:
    """Apply pending framework migrations, then each spec's compiled plan (idempotent).

    ``target``: ``"single"`` (one server), ``"citus"`` (a Citus coordinator: migrations on
    every node, distributed plans) or ``"auto"`` (``"citus"`` when the server is a
    coordinator). A single-node plan is refused on a server with the citus extension.

    On a single node each spec is first compared with the shape its store was applied with
    (``primitives plan``): a destructive or weakening change raises
    :class:`~primitives.errors.SpecChangeRefused` before any plan is applied, unless its
    kind is in ``allow`` with a ``reason`` (journalled in ``primitives.plan_history``).
    ``dry_run``: classify and report, apply nothing (framework migrations included).
    """
    allowed = check_allowed(allow, reason)
    admin = dsn or resolve_dsn()
    report = MigrateReport()
    try:
        conn = psycopg.connect(with_timeout(admin), autocommit=True)
    except psycopg.Error as err:
        raise StorageError(connect_failure(err, admin, "the admin (to migrate)")) from err
    with conn:
        citus = _resolve_target(conn, target)
        report.target = "citus" if citus else "single"
        if citus:
            report.migrations = migrate_cluster(conn, admin)
            progress(f"Citus coordinator: framework migrations on each of "
                     f"{len(cluster_nodes(conn))} nodes")
        elif dry_run:
            report.migrations = []
        else:
            report.migrations = apply_migrations(conn)
        for name in report.migrations:
            progress(f"applied framework migration {name}")
        if not citus and not dry_run and ensure_text_match(conn) == "installed":
            progress(f"installed the leakproof full-text match ({TEXT_MATCH_OPCLASS})")
        caps = detect_capabilities(conn)
        require_server_version(caps)
        report.capabilities = caps
        if not caps.vector:
            note = ("pgvector is not installed on this server: embedding columns are omitted "
                    "and the semantic signal is dropped from retrieval")
            report.warnings.append(note)
            progress(f"warning: {note}")
        if not caps.text_match and not citus:
            note = ("the leakproof full-text match is not installed (it needs a superuser's "
                    "migrate once): the lexical signal reads every row of a tenant instead "
                    "of its full-text index")
            report.warnings.append(note)
            progress(f"warning: {note}")
        compiled: list[tuple[AgentSpec, Capabilities]] = []
        for spec in specs:
            spec_caps, notes = canonical_capabilities(conn, spec, caps)
            for note in notes:
                report.warnings.append(note)
                progress(f"warning: {note}")
            compiled.append((spec, spec_caps))
        if not citus:
            report.specs = _plan_specs(conn, compiled)
            for each in report.specs:
                refuse(each.evolution, allowed)
            if dry_run:
                return report
        planned: list[SpecPlan | None] = [*report.specs] or [None] * len(compiled)
        for (spec, spec_caps), spec_plan in zip(compiled, planned, strict=True):
            if spec_plan is None:
                plan = compile_citus(spec, capabilities=spec_caps)
                applied = apply_distributed_plan(conn, spec.agent, plan.checksum, plan.steps)
            else:
                plan = spec_plan.plan
                applied = apply_plan(conn, spec.agent, plan.checksum, plan.statements,
                                     plan_record(spec, plan, spec_plan.evolution, allowed, reason))
            store = spec.persistence.store
            report.plans.append(PlanResult(spec.agent, store.schema_, store.prefix,
                                           len(plan.steps), applied))
            state = "applied" if applied else "unchanged"
            progress(f"agent {spec.agent}: {store.schema_}.{store.prefix}_* {state} "
                     f"({len(plan.steps)} statements)")
    return report


def _plan_specs(conn: psycopg.Connection[Any],
                compiled: Sequence[tuple[AgentSpec, Capabilities]]) -> list[SpecPlan]:
    planned = []
    for spec, spec_caps in compiled:
        plan = compile_plan(spec, capabilities=spec_caps)
        recorded = recorded_plan(conn, spec.agent)
        evolution = plan_spec(conn, spec, plan)
        unchanged = (recorded is not None and recorded[0] == plan.checksum
                     and recorded[1] == spec_shape(spec, plan))
        planned.append(SpecPlan(evolution, plan, unchanged))
    return planned


def plan_specs(specs: Sequence[AgentSpec], *, dsn: str | None = None) -> list[SpecPlan]:
    """``primitives plan``: each spec's classified changes against the live database."""
    admin = dsn or resolve_dsn()
    try:
        conn = psycopg.connect(with_timeout(admin), autocommit=True)
    except psycopg.Error as err:
        raise StorageError(connect_failure(err, admin, "the admin (to plan)")) from err
    with conn:
        caps = detect_capabilities(conn)
        require_server_version(caps)
        compiled = [(spec, canonical_capabilities(conn, spec, caps)[0]) for spec in specs]
        return _plan_specs(conn, compiled)
