"""The context pack of one turn: the transient tiers' current rows and a search, into the
spec's context blocks (``primitives.retrieval.assemble_context`` does the budgeting).

- Always present: the active rows of every transient (non-persistent) tier, latest first,
  at most ``per_tier`` per tier, of one scope per tier when ``scopes`` names it;
- on demand: the hybrid search's hits for ``query`` (none for a blank query), over the
  searched persistent tiers (``retrieval.scope``; the transient tiers are already present),
  or over the ``tiers`` the caller names;
- entity profiles (specs with ``graph:`` and an ``entity_profiles`` block): the entities the
  query names, then those the memories above mention, most mentioned first;
- evidence (specs with ``derived_from`` edges and an ``evidence`` block): the source
  memories of the memories above, in their order.

When the search abstains (``retrieval.abstain``), the pack says so: ``abstained`` and the
spec's ``message``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from primitives import retrieval
from primitives.compile import Tables
from primitives.engine._core import Context, Op, Step, explain_search, search_scope
from primitives.engine._graph import context_entities, context_evidence
from primitives.engine._queries import ACTIVE, _returning
from primitives.engine._records import Entity, Hit, Memory
from primitives.errors import PolicyViolation, TenancyError
from primitives.spec import AgentSpec

__all__ = ["DEFAULT_CANDIDATES", "MAX_EVIDENCE", "MAX_PROFILES", "context"]

DEFAULT_CANDIDATES = 50
"""Search hits offered to the blocks when the caller gives no ``limit``."""

MAX_PROFILES = 50
"""Entities offered to ``entity_profiles`` blocks."""

MAX_EVIDENCE = 100
"""Source memories offered to ``evidence`` blocks."""


@lru_cache(maxsize=64)
def _current_rows(tables: Tables) -> sql.Composed:
    """Active rows of ``tiers``, the latest ``per_tier`` of each, of the scope ``scopes``
    (jsonb: tier -> scope id) names for a tier, latest first."""
    return sql.SQL(
        "SELECT {cols} FROM (SELECT m.*, row_number() OVER (PARTITION BY m.tier "
        "ORDER BY m.event_time DESC, m.id) AS n FROM {mem} AS m WHERE m.{t} = %(tenant)s "
        "AND m.tier = ANY(%(tiers)s::text[]) AND {active} "
        "AND (%(scopes)s::jsonb ->> m.tier IS NULL "
        "OR m.scope_id = %(scopes)s::jsonb ->> m.tier)) AS m "
        "WHERE m.n <= %(per_tier)s ORDER BY m.event_time DESC, m.id"
    ).format(cols=_returning(), mem=tables.memories.ident, t=tables.tenant, active=ACTIVE)


def context(ctx: Context, query: str = "", *, complexity: str | None = None,
            include_on_demand: bool = True, scopes: Mapping[str, str] | None = None,
            limit: int | None = None, per_tier: int = 100, final: bool = False,
            **search: Any) -> Op[retrieval.ContextPack]:
    """The spec's context blocks filled for this tenant (see the module docstring).
    ``complexity`` (``simple``/``complex``) picks the total budget the spec gives for it
    (inferred from the query where the spec routes by intent and the caller names none);
    ``search`` passes on to the search (``envelope``, ``tiers``, ``as_of``). ``final``: the
    operation is the whole transaction."""
    spec = ctx.spec
    if complexity not in (None, "simple", "complex"):
        raise PolicyViolation(f"complexity is 'simple' or 'complex', got {complexity!r}")
    if complexity is None and query.strip() and spec.retrieval.intents is not None:
        complexity = retrieval.classify_query_complexity(query)  # seed 002 §11.5
    if not 1 <= per_tier <= 1000:
        raise PolicyViolation(f"per_tier must be between 1 and 1000, got {per_tier}")
    transient = [tier.name for tier in spec.tiers if not tier.persistent]
    for tier in scopes or {}:
        if tier not in transient:
            raise TenancyError(f"scopes names '{tier}', which is not a transient tier of agent "
                               f"'{spec.agent}' (transient tiers: {', '.join(transient)})",
                               tier=tier)
    searching = bool(query.strip())
    if "tiers" not in search:
        search["tiers"] = [t for t in search_scope(spec) if t not in transient]
        searching = searching and bool(search["tiers"])
    profiles = spec.graph is not None and _wants(spec, "entity_profiles", include_on_demand)
    sources = (spec.graph is not None and "derived_from" in spec.graph.edges
               and _wants(spec, "evidence", include_on_demand))
    always: list[Memory] = []
    if transient:
        rows = yield Step(_current_rows(ctx.tables), {
            "tenant": ctx.tenant, "tiers": transient, "scopes": Jsonb(dict(scopes or {})),
            "per_tier": per_tier}, "all", last=final and not (searching or profiles or sources))
        always = [Memory.from_row(row) for row in rows]
    hits: list[Hit] = []
    abstained: str | None = None
    if searching:
        found = yield from explain_search(ctx, query, limit=limit or DEFAULT_CANDIDATES,
                                          final=final and not (profiles or sources),
                                          **search)
        hits = found.hits
        abstained = found.message if found.abstained else None
    offered = [m.id for m in always] + [h.memory.id for h in hits]
    entities: list[Entity] = []
    if profiles:
        rows = yield Step(context_entities(ctx.tables), {
            "tenant": ctx.tenant, "query": query, "ids": offered, "limit": MAX_PROFILES},
            "all", last=final and not sources)
        entities = [Entity.from_row(row) for row in rows]
    evidence: list[Memory] = []
    if sources:
        rows = yield Step(context_evidence(ctx.tables), {
            "tenant": ctx.tenant, "ids": offered, "limit": MAX_EVIDENCE}, "all", last=final)
        evidence = [Memory.from_row(row) for row in rows]
    pack = retrieval.assemble_context(
        spec, hits, always=always, entities=entities, evidence=evidence,
        complexity=complexity,  # type: ignore[arg-type]
        include_on_demand=include_on_demand)
    if abstained is not None:  # the search's "I don't know", said in the pack
        pack = replace(pack, abstained=True, message=abstained)
    return pack


def _wants(spec: AgentSpec, content: str, include_on_demand: bool) -> bool:
    budget = spec.behavior.context
    return budget is not None and any(
        block.content == content and (block.presence == "always" or include_on_demand)
        for block in budget.blocks)
