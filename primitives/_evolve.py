"""``primitives plan``: each spec against the store it was applied to, classified and rendered.

Reads the recorded shape (``primitives.agent_plans.shape``) and the facts a change depends
on (rows per tier, columns of each table), then :func:`primitives.compile._evolution.evolve`
classifies the differences. ``migrate`` applies exactly that: the rebuild steps, then the
plan, refusing what is destructive or weakening unless allowed with a reason.

Example::

    with psycopg.connect(resolve_dsn(), autocommit=True) as conn:
        evolution = plan_spec(conn, spec, compile_plan(spec))
    print(render_evolution(evolution))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from primitives.compile import Plan
from primitives.compile._evolution import ALLOWABLE_KINDS, Evolution, Facts, evolve, spec_shape
from primitives.db._migrate import PlanRecord, recorded_plan
from primitives.errors import MigrationError, SpecChangeRefused
from primitives.spec import AgentSpec

__all__ = ["check_allowed", "plan_record", "plan_spec", "refuse", "render_evolution"]

_COLUMNS = sql.SQL(
    "SELECT c.relname::text, array_agg(a.attname::text) FROM pg_catalog.pg_class AS c"
    " JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace"
    " JOIN pg_catalog.pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0"
    " AND NOT a.attisdropped"
    " WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND c.relname LIKE %s"
    " GROUP BY c.relname")
_TABLE_EXISTS = sql.SQL("SELECT to_regclass(%s) IS NOT NULL")
_SERVER_VERSION = sql.SQL("SELECT current_setting('server_version_num')::int")

_MARKS = {"additive": "+", "rebuild": "~", "destructive": "!", "weakening": "!"}


def _facts(conn: psycopg.Connection[Any], spec: AgentSpec, plan: Plan,
           shape: dict[str, Any]) -> Facts:
    tables = plan.tables
    columns = {str(name): frozenset(cols) for name, cols in conn.execute(
        _COLUMNS, (tables.schema, f"{tables.prefix}\\_%")).fetchall()}
    rows: dict[str, int] = {}
    # only the tiers that disappear or are renamed are counted (a scan: not on every migrate)
    gone = [t for t in shape.get("tiers", ()) if t not in spec.tier_names]
    exists = conn.execute(_TABLE_EXISTS, (tables.memories.qualified,)).fetchone()
    if gone and exists is not None and exists[0]:
        rows = {str(tier): int(count) for tier, count in conn.execute(
            sql.SQL("SELECT tier, count(*) FROM {} WHERE tier = ANY(%s) GROUP BY tier").format(
                tables.memories.ident), (gone,)).fetchall()}
    version = conn.execute(_SERVER_VERSION).fetchone()
    return Facts(rows_by_tier=rows, columns=columns,
                 server_version=int(version[0]) if version else 0)


def plan_spec(conn: psycopg.Connection[Any], spec: AgentSpec, plan: Plan) -> Evolution:
    """Classify the changes between ``spec`` and the store its agent was last applied to."""
    recorded = recorded_plan(conn, spec.agent)
    shape = recorded[1] if recorded is not None else None
    if recorded is not None and shape is None:
        # applied before shapes were recorded: the spec's own shape stands in
        shape = spec_shape(spec, plan)
    return evolve(shape, spec, plan, _facts(conn, spec, plan, shape) if shape else Facts())


def check_allowed(allowed: Sequence[str], reason: str | None) -> frozenset[str]:
    """Validate ``--allow`` kinds and their ``--reason``."""
    unknown = sorted(set(allowed) - set(ALLOWABLE_KINDS))
    if unknown:
        raise MigrationError(f"--allow {unknown[0]}: the kinds that can be allowed are "
                             f"{', '.join(ALLOWABLE_KINDS)}")
    if allowed and not (reason and reason.strip()):
        raise MigrationError("--allow needs --reason TEXT: the reason is journalled for the "
                             "auditor (primitives.plan_history)")
    return frozenset(allowed)


def refuse(evolution: Evolution, allowed: frozenset[str]) -> None:
    """Raise :class:`SpecChangeRefused` naming each refused change's file and line."""
    refused = evolution.refused(allowed)
    if not refused:
        return
    lines = [f"agent {evolution.agent}: {len(refused)} change(s) refused, nothing applied"]
    for change in refused:
        cannot = "" if change.allowable else " (cannot be allowed)"
        lines.append(f"  {evolution.where(change)}: {change.field}: {change.kind}{cannot}: "
                     f"{change.summary}")
        if change.way_forward:
            lines.append(f"    way forward: {change.way_forward}")
    first = refused[0]
    raise SpecChangeRefused("\n".join(lines), agent=evolution.agent, file=evolution.source,
                            line=first.line, field=first.field, kind=first.kind)


def plan_record(spec: AgentSpec, plan: Plan, evolution: Evolution,
                allowed: frozenset[str], reason: str | None) -> PlanRecord:
    """What ``apply_plan`` runs before the plan and journals with it."""
    used = sorted({c.kind for c in evolution.changes} & allowed)
    return PlanRecord(shape=spec_shape(spec, plan),
                      changes=[c.as_json() for c in evolution.changes],
                      before=tuple(step.statement for step in evolution.before),
                      allowed=tuple(used), reason=reason if used else None,
                      validations=tuple(step.statement for step in plan.validations))


def render_evolution(evolution: Evolution, plan: Plan, *, unchanged: bool = False,
                     allowed: frozenset[str] = frozenset()) -> str:
    """The plan of one agent as text: one line per change, its steps, refusals last."""
    store = f"{plan.tables.schema}.{plan.tables.prefix}_*"
    if unchanged:
        return f"agent {evolution.agent} ({store}): no changes\n"
    out = [f"agent {evolution.agent} ({store}):"]
    for change in evolution.changes:
        state = "refused" if change.refused(allowed) else "applied"
        where = f" [{evolution.where(change)}]" if change.line else ""
        out.append(f"  {_MARKS[change.kind]} {change.kind:<11} {change.summary}{where}"
                   f" -> {state}")
        out += [f"      step: {step}" for step in change.steps]
        if change.refused(allowed) and change.way_forward:
            out.append(f"      way forward: {change.way_forward}")
    refused = evolution.refused(allowed)
    out.append(f"  plan: {len(evolution.before)} rebuild statement(s) + {len(plan.steps)} "
               f"plan statements; {len(refused)} refused")
    return "\n".join(out) + "\n"
