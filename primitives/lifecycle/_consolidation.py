"""The maintain job that consolidates the sessions nobody ended (seed 002 §10.2, §15).

A session whose end was never signalled (the process stopped after the last message, no
later message came) still has episodes the ledger has not seen. For each of the spec's
extraction rules, the job finds, as ``primitives_maintainer``, the scopes of the batch's
tenants whose session is over (the boundary tier's scope is closed, or nothing was written
to it for the boundary tier's ``idle_after``) and consolidates each in a tenant transaction
of its own as the application role, under row-level security: what
:func:`~primitives.engine._consolidate.consolidate_scope` does at a session's end. A scope
the ledger already covers is never found again, so a second run changes nothing.

The extractor is the one ``maintain`` was handed (``extractor=``), else the rule-based
default; rules whose spec asks for ``extractor: llm`` are left for a run handed one.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql

from primitives.compile import Tables
from primitives.db._names import MAINTAINER_ROLE
from primitives.lifecycle._passes import JobContext, MaintenanceJob
from primitives.spec import AgentSpec

if TYPE_CHECKING:
    from primitives.engine._consolidate import ExtractionRule

__all__ = ["consolidation_jobs"]


def consolidation_jobs(spec: AgentSpec, tables: Tables) -> list[MaintenanceJob]:
    """The ``consolidation`` job when the spec has extraction rules."""
    from primitives.engine._consolidate import extraction_rules

    if not extraction_rules(spec):
        return []
    return [MaintenanceJob("consolidation", _run)]


def _run(ctx: JobContext) -> int:
    from primitives.db import app_dsn
    from primitives.engine import Engine
    from primitives.engine._consolidate import (
        consolidate_scope,
        extraction_rules,
        missed_scopes_statement,
    )
    from primitives.engine._sync import run_op

    # a rule whose spec asks for an LLM waits for a run that is handed one (its count: 0)
    rules = [r for r in extraction_rules(ctx.spec)
             if ctx.extractor is not None or r.extractor != "llm"]
    missed: list[tuple[ExtractionRule, str, str]] = []
    with psycopg.connect(ctx.dsn, autocommit=True) as conn, conn.transaction():
        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(MAINTAINER_ROLE)))
        for rule in rules:
            rows = conn.execute(missed_scopes_statement(ctx.tables, citus=ctx.citus), {
                "tenants": list(ctx.tenants), "tenant": ctx.tenants[0] if ctx.tenants else None,
                "now": ctx.now, "rule": rule.name,
                "tier": rule.source_tier, "typology": rule.source_typology,
                "boundary_tiers": list(rule.boundary_tiers),
                "idle": rule.idle_after}).fetchall()
            missed += [(rule, row[0], row[1]) for row in rows]
    if not missed:
        return 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # no embedder: semantic stands down
        engine = Engine.connect(ctx.spec, app_dsn(ctx.dsn), max_connections=1,
                                embedder=ctx.embedder)
    changed = 0
    with engine:
        for rule, tenant, scope_id in missed:
            anchor = {ctx.spec.anchor.tenant_key: tenant}
            with engine.tenant(anchor, actor=ctx.actor) as mem:
                done = run_op(mem.connection, consolidate_scope(
                    mem.ctx, rule, scope_id, ctx.extractor))
            changed += done.changed
    return changed
