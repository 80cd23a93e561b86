"""Consolidation: a closed scope's episodes become facts, procedures and preferences.

Core operations (run by the sync and async engines like those of ``_core``). The spec's
promotion rules with criteria ``extraction`` name a source (``long_term.episodic``) and the
typologies extracted from it; rules of one source form one :class:`ExtractionRule`, one
extractor call per scope. :func:`consolidate_scope`, in the caller's transaction:

1. **Claims** the scope's active source rows not yet consolidated: one ledger row each in
   ``<prefix>_promotions`` (rule ``extraction:<tier>.<typology>``), inserted in this
   transaction. The ledger is what makes a run idempotent: a second run claims nothing and
   changes nothing; a run that fails rolls its claims back with everything else, so running
   it again does the whole work; two concurrent runs of a scope claim each row once.
2. Reads the memories the decisions may touch (the targets' active rows, latest first) and
   the tenant's entities, and asks the extractor (a :class:`~primitives.engine._core.Compute`
   step) for its :class:`~primitives.extraction.Extraction`: one call, or with the source
   typology's ``episodes_per_chunk`` one per chunk of that many rows, each call seeing what
   the earlier ones wrote.
3. Applies each decision through the engine's write path, journalled with ``via:
   consolidation``: ``ADD`` writes a row (a ``merge`` typology first looks for an active row
   saying the same, ``dedup_similarity`` close, and adds the evidence to it instead);
   ``UPDATE`` writes a new version of the target under its key, so the typology's conflict
   policy applies (``update_with_validity``: the old row's validity ends, confidence 0.3 and
   a ``supersedes`` edge); ``DELETE`` invalidates the target; ``NOOP`` changes nothing.
   Decisions below the typology's ``write_policy.extract_threshold`` are skipped, and so
   are those that would replace an active row at less than the typology's
   ``conflict.min_confidence``. Written rows carry ``provenance.derived_from`` (the evidence
   episodes), the decision's confidence (at most ``graph.confidence.extraction`` where
   declared) and, in graph specs, ``derived_from`` edges to the episodes and entity
   mentions. A causal pair across two chunks is seen by neither call.
4. Records the entities each episode mentions (graph specs) and one ``consolidated`` event.

A write-path agent (seed 002 §10) does the extractor's part itself, through two operations:
:func:`save_extracted` applies its decisions as step 3 does, without claiming, and
:func:`mark_consolidated` claims the session's rows (step 1) once all is saved.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from functools import lru_cache
from typing import Any
from uuid import UUID

from psycopg import sql
from psycopg.types.json import Jsonb

from primitives.compile import Tables
from primitives.compile._expr import active_predicate
from primitives.engine import _graph as graph
from primitives.engine import _queries as q
from primitives.engine._core import (
    Compute,
    Context,
    Op,
    Step,
    _event,
    _write,
    change_state,
    checked_write,
    get_step,
)
from primitives.engine._ids import new_uuid
from primitives.engine._records import Memory
from primitives.errors import PolicyViolation
from primitives.extraction import (
    Decision,
    EntityMention,
    Episode,
    ExistingMemory,
    Extraction,
    ExtractionRequest,
    Extractor,
    KnownEntity,
    RuleBasedExtractor,
)
from primitives.lifecycle._boundary import BOUNDARY_CRITERIA_AT, DEFAULT_DEDUP
from primitives.spec import AgentSpec
from primitives.spec._common import split_ref

__all__ = ["AGENT_EXTRACTOR", "CONSOLIDATED_EVENT", "NODES_SAVED_EVENT", "Consolidation",
           "Extract", "ExtractionRule", "consolidate", "consolidate_scope", "default_extractor",
           "extraction_rules", "mark_consolidated", "missed_scopes_statement", "save_extracted"]

CONSOLIDATED_EVENT = "consolidated"
"""The journal event closing one scope's consolidation (its counts)."""
NODES_SAVED_EVENT = "nodes_saved"
"""The journal event closing one batch of a write-path agent's extracted memories."""
AGENT_EXTRACTOR = "write_path_agent"
"""The extractor name the write-path agent's own decisions are journalled with."""
VIA = "consolidation"
"""The write path consolidation's writes are journalled with."""
EXISTING_LIMIT = 200
"""Active target memories an extractor is shown (latest first)."""
ENTITY_LIMIT = 1000
"""Known entities an extractor is shown (most mentioned first): its alias dictionary."""


@dataclass(frozen=True)
class Extract(Compute):
    """Ask ``extractor`` for the decisions on ``request``: sent back an Extraction."""

    extractor: Extractor
    request: ExtractionRequest

    def compute(self) -> Extraction:
        try:
            return self.extractor.extract(self.request)
        except StopIteration as err:
            # sent into the operation, StopIteration would end it as if it had finished
            raise RuntimeError(f"extractor {self.extractor.name!r} failed: "
                               f"StopIteration {err.value!r}") from err


@dataclass(frozen=True)
class ExtractionRule:
    """The spec's extraction rules out of one source, as one consolidation pass."""

    name: str
    """The ledger's rule: ``extraction:<tier>.<typology>`` of the source."""
    source_tier: str
    source_typology: str
    targets: tuple[tuple[str, str], ...]
    """``(typology, tier)`` of each typology extracted."""
    boundary_tiers: tuple[str, ...]
    """Tiers whose scope end closes a scope of the source (its session)."""
    at_scope_end: bool
    """Runs when such a scope ends (else only in ``primitives maintain``)."""
    idle_after: timedelta | None
    """Inactivity after which maintain treats an open scope as ended (the boundary tier's
    ``idle_after``)."""
    extractor: str
    """``rule_based`` or ``llm``: what the typologies' ``consolidation.extractor`` asks for."""
    chunk: int | None = None
    """Source rows per extractor call (the source typology's ``episodes_per_chunk``)."""

    def runs_at_end_of(self, tier: str) -> bool:
        return self.at_scope_end and tier in self.boundary_tiers

    def tier_of(self, typology: str) -> str | None:
        return next((t for typ, t in self.targets if typ == typology), None)

    @property
    def typologies(self) -> tuple[str, ...]:
        return tuple(typ for typ, _ in self.targets)


def extraction_rules(spec: AgentSpec) -> list[ExtractionRule]:
    """The spec's extraction rules, one per source, in spec order."""
    groups: dict[str, list[Any]] = {}
    for rule in spec.behavior.promotion:
        if rule.criteria == "extraction":
            groups.setdefault(rule.from_, []).append(rule)
    consolidation = spec.behavior.consolidation
    out: list[ExtractionRule] = []
    for source, rules in groups.items():
        tier, typology = split_ref(source)
        targets: list[tuple[str, str]] = []
        for rule in rules:
            to_tier, to_typ = split_ref(rule.to)
            if all(typ != to_typ for typ, _ in targets):
                targets.append((to_typ, to_tier))
        at = {rule.at for rule in rules}
        bounds: tuple[str, ...]
        if not spec.tier(tier).persistent:
            bounds = (tier,)
        else:
            bounds = tuple(t.name for t in spec.tiers if not t.persistent and (
                "tier_boundary" in at or t.boundary.lifecycle in at))
        policies = [consolidation.get(typ) for typ, _ in targets]  # type: ignore[call-overload]
        triggers = [p.trigger for p in policies if p is not None]
        ends = {t for t in triggers if t in ("session_end", "job_end")}
        if ends and len(ends) == len(triggers) and spec.tier(tier).persistent:
            # every target names the lifecycle end it is consolidated at: only those scopes
            bounds = tuple(t for t in bounds if spec.tier(t).boundary.lifecycle in ends)
        nightly = bool(triggers) and all(t == "nightly" for t in triggers)
        idle = [t.boundary.idle_after for t in spec.tiers
                if t.name in bounds and t.boundary.idle_after is not None]
        source_policy = consolidation.get(typology)  # type: ignore[call-overload]
        llm = any(p is not None and p.extractor == "llm" for p in [*policies, source_policy])
        out.append(ExtractionRule(
            name=f"extraction:{source}", source_tier=tier, source_typology=typology,
            targets=tuple(targets), boundary_tiers=bounds,
            at_scope_end=bool(at & set(BOUNDARY_CRITERIA_AT)) and not nightly,
            idle_after=min(idle) if idle else None,
            extractor="llm" if llm else "rule_based",
            chunk=source_policy.episodes_per_chunk if source_policy is not None else None))
    return out


def default_extractor(spec: AgentSpec, rule: ExtractionRule) -> Extractor:
    """The extractor a rule runs with when the caller gives none: the rule-based one; a
    spec that asks for ``llm`` needs the caller's (a PolicyViolation says so)."""
    if rule.extractor == "llm":
        raise PolicyViolation(
            f"agent '{spec.agent}' consolidates {rule.source_tier}.{rule.source_typology} "
            "with an LLM (behavior.consolidation.*.extractor: llm): pass "
            "extractor=LLMExtractor(chat_model) (primitives.extraction) to end_scope, "
            "consolidate or maintain", field="extractor")
    return RuleBasedExtractor()


@dataclass(frozen=True)
class Consolidation:
    """What consolidating one scope did."""

    rule: str
    scope_id: str
    extractor: str = ""
    episodes: int = 0
    """Episodes claimed (0: already consolidated, or none)."""
    added: int = 0
    updated: int = 0
    deleted: int = 0
    merged: int = 0
    """ADDs folded into an active row saying the same (``method: merge``)."""
    unchanged: int = 0
    """ADDs and UPDATEs whose key already held that text."""
    skipped: int = 0
    """NOOPs, and decisions below the typology's ``extract_threshold``."""
    mentions: int = 0
    edges: int = 0
    memory_ids: tuple[UUID, ...] = field(default=())
    """Rows written, in decision order."""
    calls: int = 0
    """Extractor calls made: one per chunk of ``episodes_per_chunk`` source rows."""

    @property
    def changed(self) -> int:
        return self.added + self.updated + self.deleted + self.merged

    def counts(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in ("episodes", "added", "updated", "deleted",
                                              "merged", "unchanged", "skipped", "mentions",
                                              "edges")}


# statements -------------------------------------------------------------------------------------
@lru_cache(maxsize=64)
def _claim(tables: Tables) -> sql.Composed:
    """Ledger rows for the scope's active, unerased source rows not yet claimed; returns
    the claimed rows (id, content, event_time) in event order."""
    return sql.SQL(
        "WITH claimed AS (INSERT INTO {led} ({t}, rule, source_id) "
        "SELECT m.{t}, %(rule)s, m.id FROM {mem} AS m WHERE m.{t} = %(tenant)s "
        "AND m.tier = %(tier)s AND m.typology = %(typology)s AND m.scope_id = %(scope_id)s "
        "AND m.erased_at IS NULL AND {active} ON CONFLICT DO NOTHING RETURNING source_id) "
        "SELECT m.id, m.content, m.event_time FROM {mem} AS m JOIN claimed AS c "
        "ON m.id = c.source_id WHERE m.{t} = %(tenant)s ORDER BY m.event_time, m.created_at, m.id"
    ).format(led=tables.promotions.ident, mem=tables.memories.ident, t=tables.tenant,
             active=active_predicate("m"))


@lru_cache(maxsize=64)
def _scope_sources(tables: Tables) -> sql.Composed:
    """The scope's active, unerased source rows (id, content, event_time) in event order,
    claimed or not: what a write-path agent's decisions may name as evidence."""
    return sql.SQL(
        "SELECT m.id, m.content, m.event_time FROM {mem} AS m WHERE m.{t} = %(tenant)s "
        "AND m.tier = %(tier)s AND m.typology = %(typology)s AND m.scope_id = %(scope_id)s "
        "AND m.erased_at IS NULL AND {active} ORDER BY m.event_time, m.created_at, m.id"
    ).format(mem=tables.memories.ident, t=tables.tenant, active=active_predicate("m"))


@lru_cache(maxsize=64)
def _existing(tables: Tables) -> sql.Composed:
    return sql.SQL(
        "SELECT m.id, m.typology, m.key, m.content, m.confidence FROM {mem} AS m "
        "WHERE m.{t} = %(tenant)s AND m.tier = ANY(%(tiers)s::text[]) "
        "AND m.typology = ANY(%(typologies)s::text[]) AND m.erased_at IS NULL AND {active} "
        "ORDER BY m.event_time DESC, m.id LIMIT %(limit)s"
    ).format(mem=tables.memories.ident, t=tables.tenant, active=active_predicate("m"))


@lru_cache(maxsize=64)
def _known_entities(tables: Tables) -> sql.Composed:
    assert tables.entities is not None
    return sql.SQL(
        "SELECT canonical_name, type, aliases FROM {e} WHERE {t} = %(tenant)s "
        "ORDER BY mention_count DESC, id LIMIT %(limit)s"
    ).format(e=tables.entities.ident, t=tables.tenant)


@lru_cache(maxsize=64)
def _same_memory(tables: Tables, trigram: bool) -> sql.Composed:
    """The active row of the tier and typology saying what ``%(content)s`` says: the same
    text (any case), or with pg_trgm at least ``%(threshold)s`` similar; locked."""
    near = sql.SQL(" OR similarity(m.content, %(content)s) >= %(threshold)s") if trigram \
        else sql.SQL("")
    rank = sql.SQL("similarity(m.content, %(content)s) DESC, ") if trigram else sql.SQL("")
    return sql.SQL(
        "SELECT m.id, m.provenance FROM {mem} AS m WHERE m.{t} = %(tenant)s "
        "AND m.tier = %(tier)s AND m.typology = %(typology)s AND m.erased_at IS NULL "
        "AND {active} AND (lower(m.content) = lower(%(content)s){near}) "
        "ORDER BY lower(m.content) = lower(%(content)s) DESC, {rank}m.created_at, m.id "
        "LIMIT 1 FOR UPDATE OF m"
    ).format(mem=tables.memories.ident, t=tables.tenant, active=active_predicate("m"),
             near=near, rank=rank)


@lru_cache(maxsize=64)
def _set_provenance(tables: Tables) -> sql.Composed:
    return sql.SQL(
        "UPDATE {} SET provenance = coalesce(provenance, '{{}}'::jsonb) || %(provenance)s, "
        "corroborated_at = now(), updated_at = now() WHERE {} = %(tenant)s AND id = %(id)s"
    ).format(tables.memories.ident, tables.tenant)


def missed_scopes_statement(tables: Tables, *, citus: bool = False) -> sql.Composed:
    """Scopes of ``%(tenants)s`` with source rows the ledger has not seen whose session is
    over: its boundary tier's scope is closed, or (``%(idle)s`` not NULL) nothing was
    written to it for that long before ``%(now)s``. Rows (tenant, scope_id), in order.
    Params: ``rule``, ``tier``, ``typology``, ``boundary_tiers`` (text[]), ``idle``.
    ``citus``: every table also filtered by ``%(tenant)s`` (the one tenant of the batch on a
    Citus coordinator, which then sends the statement whole to that tenant's worker; planned
    there, the correlated subquery in ``HAVING`` is refused)."""
    def only(alias: str) -> sql.Composable:
        return sql.SQL(" AND {}.{} = %(tenant)s").format(
            sql.Identifier(alias), tables.tenant) if citus else sql.SQL("")
    return sql.SQL(
        "SELECT m.{t}, m.scope_id FROM {mem} AS m WHERE m.{t} = ANY(%(tenants)s::text[]){m} "
        "AND m.tier = %(tier)s AND m.typology = %(typology)s AND m.scope_id IS NOT NULL "
        "AND m.erased_at IS NULL AND {active} AND NOT EXISTS (SELECT 1 FROM {led} AS p "
        "WHERE p.{t} = m.{t}{p} AND p.rule = %(rule)s AND p.source_id = m.id) "
        "GROUP BY m.{t}, m.scope_id HAVING EXISTS (SELECT 1 FROM {scopes} AS s "
        "WHERE s.{t} = m.{t}{s} AND s.scope_id = m.scope_id "
        "AND s.tier = ANY(%(boundary_tiers)s::text[]) AND s.closed_at IS NOT NULL) "
        "OR (%(idle)s::interval IS NOT NULL "
        "AND max(m.created_at) < %(now)s::timestamptz - %(idle)s::interval) "
        "ORDER BY 1, 2"
    ).format(t=tables.tenant, mem=tables.memories.ident, led=tables.promotions.ident,
             scopes=tables.scopes.ident, active=active_predicate("m"),
             m=only("m"), p=only("p"), s=only("s"))


# operations -------------------------------------------------------------------------------------
def consolidate(ctx: Context, scope_id: str, *,
                extractor: Extractor | None = None) -> Op[list[Consolidation]]:
    """Consolidate one scope by every extraction rule of the spec, whatever its ``at``
    (what ``primitives maintain`` does for a missed session)."""
    rules = _rules(ctx, scope_id)
    done = []
    for rule in rules:
        done.append((yield from consolidate_scope(ctx, rule, scope_id, extractor)))
    return done


def _rules(ctx: Context, scope_id: str) -> list[ExtractionRule]:
    if not isinstance(scope_id, str) or not scope_id:
        raise PolicyViolation("scope_id must be a non-empty string", field="scope_id")
    rules = extraction_rules(ctx.spec)
    if not rules:
        raise PolicyViolation(f"agent '{ctx.spec.agent}' has no extraction rules "
                              "(behavior.promotion with criteria: extraction)")
    return rules


def save_extracted(ctx: Context, scope_id: str, decisions: Sequence[Decision], *,
                   extractor: str = AGENT_EXTRACTOR) -> Op[list[Consolidation]]:
    """A write-path agent's own extraction from session ``scope_id`` (seed 002 §10.3
    ``save_nodes_batch``): each decision, which must name its ``typology``, is applied as
    consolidation applies an extractor's (module docstring, step 3: thresholds, merge,
    supersession, ``conflict.min_confidence``, ``derived_from`` edges to its evidence, entity
    mentions), journalled ``extracted`` / ``merged`` with ``extractor``, and one
    ``nodes_saved`` event per extraction rule closes the batch. Evidence must be active
    episodes of the scope (claimed or not). Nothing is claimed: the session stays
    unconsolidated until :func:`mark_consolidated`. A refused decision refuses the batch
    (the caller's transaction rolls back; nothing of it is kept)."""
    rules = _rules(ctx, scope_id)
    if not decisions:
        raise PolicyViolation("no decisions to save", field="decisions")
    groups: dict[str, list[tuple[int, Decision]]] = {}
    for index, decision in enumerate(decisions):
        rule = next((r for r in rules if decision.typology in r.typologies), None)
        if rule is None:
            written = sorted({t for r in rules for t in r.typologies})
            raise PolicyViolation(
                f"decision {index}: typology {decision.typology!r} is not one consolidation "
                f"writes ({', '.join(written)}); nothing of this batch was written",
                field=f"decisions[{index}]")
        groups.setdefault(rule.name, []).append((index, decision))
    done: list[Consolidation] = []
    for rule in rules:
        if rule.name not in groups:
            continue
        rows = yield Step(_scope_sources(ctx.tables), {
            "tenant": ctx.tenant, "tier": rule.source_tier, "typology": rule.source_typology,
            "scope_id": scope_id}, "all")
        if not rows:
            raise PolicyViolation(f"session '{scope_id}' has no active "
                                  f"{rule.source_tier}.{rule.source_typology} rows to derive "
                                  "memories from; nothing of this batch was written",
                                  field="scope_id")
        apply = _Apply(ctx, rule, scope_id, extractor,
                       [Episode(r[0], r[1], r[2]) for r in rows])
        for index, decision in groups[rule.name]:
            yield from apply.decision(index, decision)
        result = replace(apply.result(), episodes=0, calls=0)
        yield _event(ctx, NODES_SAVED_EVENT, None, {
            "rule": rule.name, "scope_id": scope_id, "extractor": extractor,
            **result.counts(), "memory_ids": [str(i) for i in result.memory_ids]})
        done.append(result)
    return done


def mark_consolidated(ctx: Context, scope_id: str, *,
                      extractor: str = AGENT_EXTRACTOR) -> Op[list[Consolidation]]:
    """Mark session ``scope_id`` consolidated by a write-path agent (seed 002 §10.1 step 7,
    ``mark_session_consolidated``): for each extraction rule, the scope's active source rows
    not yet consolidated are claimed in the ledger, as :func:`consolidate_scope` claims them,
    with no extractor call, and a ``consolidated`` event (``extractor``, ``episodes``
    claimed) is journalled. A second call claims nothing and journals nothing (``episodes``
    0); rows written to the session later are unclaimed again. A session with no source rows
    at all is refused."""
    rules = _rules(ctx, scope_id)
    done: list[Consolidation] = []
    seen = False
    for rule in rules:
        rows = yield Step(_claim(ctx.tables), {
            "tenant": ctx.tenant, "rule": rule.name, "tier": rule.source_tier,
            "typology": rule.source_typology, "scope_id": scope_id}, "all")
        result = Consolidation(rule.name, scope_id, extractor, episodes=len(rows), calls=0)
        if rows:
            yield _event(ctx, CONSOLIDATED_EVENT, None, {
                "rule": rule.name, "scope_id": scope_id, "extractor": extractor,
                **result.counts(), "calls": 0, "memory_ids": []})
        seen = seen or bool(rows) or bool((yield Step(_scope_sources(ctx.tables), {
            "tenant": ctx.tenant, "tier": rule.source_tier, "typology": rule.source_typology,
            "scope_id": scope_id}, "all")))
        done.append(result)
    if not seen:
        sources = ", ".join(f"{r.source_tier}.{r.source_typology}" for r in rules)
        raise PolicyViolation(f"session '{scope_id}' has no active {sources} rows: nothing "
                              "to mark consolidated", field="scope_id")
    return done


def consolidate_scope(ctx: Context, rule: ExtractionRule, scope_id: str,
                      extractor: Extractor | None) -> Op[Consolidation]:
    """Consolidate the rows of ``scope_id`` that ``rule`` reads (see the module docstring)."""
    tables, tenant = ctx.tables, ctx.tenant
    extractor = extractor if extractor is not None else default_extractor(ctx.spec, rule)
    rows = yield Step(_claim(tables), {
        "tenant": tenant, "rule": rule.name, "tier": rule.source_tier,
        "typology": rule.source_typology, "scope_id": scope_id}, "all")
    if not rows:
        return Consolidation(rule.name, scope_id)
    episodes = tuple(Episode(r[0], r[1], r[2]) for r in rows)
    graph_spec = ctx.spec.graph if tables.entities is not None else None
    size = rule.chunk or len(episodes)
    chunks = [episodes[i:i + size] for i in range(0, len(episodes), size)]
    apply = _Apply(ctx, rule, scope_id, extractor.name, episodes)
    offset = 0
    for chunk in chunks:
        # each chunk is its own extractor call and sees what the earlier chunks wrote
        existing = yield Step(_existing(tables), {
            "tenant": tenant, "tiers": sorted({t for _, t in rule.targets}),
            "typologies": list(rule.typologies), "limit": EXISTING_LIMIT}, "all")
        known = [] if graph_spec is None else (yield Step(_known_entities(tables), {
            "tenant": tenant, "limit": ENTITY_LIMIT}, "all"))
        request = ExtractionRequest(
            chunk, rule.typologies,
            tuple(ExistingMemory(r[0], r[1], r[2], r[3], float(r[4])) for r in existing),
            tuple(KnownEntity(r[0], r[1], tuple(r[2] or ())) for r in known),
            tuple(graph_spec.entity_types) if graph_spec is not None else ())
        extraction = yield Extract(extractor, request)
        if not isinstance(extraction, Extraction):
            raise PolicyViolation(f"extractor {extractor.name!r} returned "
                                  f"{type(extraction).__name__}, not an Extraction",
                                  field="extractor")
        for index, decision in enumerate(extraction.decisions):
            yield from apply.decision(offset + index, decision)
        offset += len(extraction.decisions)
        if graph_spec is not None:
            yield from apply.mentions(extraction.mentions)
            yield from apply.causes(extraction.causes)
    apply.calls = len(chunks)
    result = apply.result()
    yield _event(ctx, CONSOLIDATED_EVENT, None, {
        "rule": rule.name, "scope_id": scope_id, "extractor": extractor.name,
        **result.counts(), "calls": result.calls,
        "memory_ids": [str(i) for i in result.memory_ids]})
    return result


class _Apply:
    """Applies one extraction's decisions, counting what each did."""

    def __init__(self, ctx: Context, rule: ExtractionRule, scope_id: str, extractor: str,
                 episodes: Sequence[Episode]) -> None:
        self.ctx, self.rule, self.scope_id, self.extractor = ctx, rule, scope_id, extractor
        self.episodes = [e.id for e in episodes]
        self.counts = dict.fromkeys(("added", "updated", "deleted", "merged", "unchanged",
                                     "skipped", "mentions", "edges"), 0)
        self.written: list[UUID] = []
        self.calls = 1
        graph_spec = ctx.spec.graph
        self.graph = graph_spec is not None and ctx.tables.entities is not None
        self.derived_edges = self.graph and graph_spec is not None and (
            "derived_from" in graph_spec.edges)

    def result(self) -> Consolidation:
        return Consolidation(self.rule.name, self.scope_id, self.extractor,
                             len(self.episodes), memory_ids=tuple(self.written),
                             calls=self.calls,
                             **self.counts)

    def _refuse(self, index: int, why: str) -> PolicyViolation:
        return PolicyViolation(f"consolidation decision {index} ({self.extractor}): {why}; "
                               "nothing of this consolidation was written",
                               field=f"decisions[{index}]")

    def _evidence(self, index: int, decision: Decision) -> list[UUID]:
        unknown = [e for e in decision.evidence if e not in self.episodes]
        if unknown:
            raise self._refuse(index, f"evidence {unknown[0]} is not an episode of scope "
                                      f"'{self.scope_id}'")
        return list(dict.fromkeys(decision.evidence)) or list(self.episodes)

    def _target(self, index: int, decision: Decision) -> Op[Memory]:
        if decision.target_id is None:
            raise self._refuse(index, f"{decision.action} needs a target_id")
        row = yield Step(q.select_memory_for_update(self.ctx.tables), {
            "tenant": self.ctx.tenant, "id": decision.target_id}, "one")
        target = Memory.from_row_or_none(row)
        if target is None or not target.active or target.typology not in self.rule.typologies:
            raise self._refuse(index, f"target {decision.target_id} is not an active "
                                      f"{' / '.join(self.rule.typologies)} memory of this tenant")
        if decision.typology is not None and decision.typology != target.typology:
            raise self._refuse(index, f"target {target.id} is {target.typology}, not "
                                      f"{decision.typology}")
        return target

    def _below_threshold(self, typology: str, confidence: float) -> bool:
        policy = self.ctx.spec.behavior.write_policy.get(typology)  # type: ignore[call-overload]
        threshold = policy.extract_threshold if policy is not None else None
        return threshold is not None and confidence < threshold

    def decision(self, index: int, decision: Decision) -> Op[None]:
        action = decision.action
        if action not in ("ADD", "UPDATE", "DELETE", "NOOP"):
            raise self._refuse(index, f"unknown action {action!r}")
        if not 0 <= decision.confidence <= 1:
            raise self._refuse(index, f"confidence {decision.confidence} is not in [0, 1]")
        evidence = self._evidence(index, decision)
        if action == "NOOP":
            self.counts["skipped"] += 1
            return
        if action == "DELETE":
            gone = yield from self._target(index, decision)
            yield from change_state(self.ctx, "invalidate", gone.id, reason=None, cause=VIA)
            self.counts["deleted"] += 1
            return
        target: Memory | None = None
        if action == "UPDATE":
            target = yield from self._target(index, decision)
            typology, tier = target.typology, target.tier
        else:
            typology = decision.typology or ""
            found = self.rule.tier_of(typology)
            if found is None:
                raise self._refuse(index, f"typology {decision.typology!r} is not one this "
                                          f"consolidation writes ({', '.join(self.rule.typologies)})")
            tier = found
        if self._below_threshold(typology, decision.confidence):
            self.counts["skipped"] += 1
            return
        if target is None and (yield from self._merged(typology, tier, decision, evidence)):
            return
        if target is None:
            target = yield from self._replaced(typology, tier, decision)
        if target is not None and self._too_weak_to_replace(typology, decision.confidence):
            self.counts["skipped"] += 1  # the memory it would replace stays
            return
        try:
            w = checked_write(
                self.ctx.spec, tier, decision.content, typology=typology,
                key=target.key if target is not None else decision.key,
                namespace=target.namespace if target is not None else (),
                value=target.value if target is not None else None,
                envelope=target.envelope if target is not None else None,
                tags=target.tags if target is not None else (), scope_id=None,
                promotion=True)
        except PolicyViolation as err:
            raise self._refuse(index, str(err)) from err
        provenance = {"derived_from": [str(e) for e in evidence], "extractor": self.extractor,
                      "rule": self.rule.name, "scope_id": self.scope_id}
        new_id = new_uuid()
        confidence = self._confidence(decision.confidence)
        memory = yield from _write(self.ctx, w, event_time=None, source=None,
                                   memory_id=new_id, embedding=None, final=False, via=VIA,
                                   provenance=provenance, confidence=confidence)
        if memory.id != new_id:
            self.counts["unchanged"] += 1  # the key already held this text
            return
        yield _event(self.ctx, "extracted", memory.id, {
            "rule": self.rule.name, "action": action, "scope_id": self.scope_id,
            "extractor": self.extractor, "confidence": confidence,
            "derived_from": provenance["derived_from"],
            "target": str(target.id) if target is not None else None})
        self.counts["updated" if target is not None else "added"] += 1
        self.written.append(memory.id)
        yield from self._linked(memory.id, evidence, decision.entities)

    def _too_weak_to_replace(self, typology: str, stated: float) -> bool:
        """``conflict.<typology>.min_confidence``: the row this decision would start at is
        below the bar an extraction must meet to replace an active memory."""
        policy = self.ctx.spec.behavior.conflict.get(typology)  # type: ignore[call-overload]
        bar = policy.min_confidence if policy is not None else None
        return bar is not None and self._confidence(stated) < bar

    def _confidence(self, stated: float) -> float:
        """An extracted row's initial confidence: the decision's, at most the
        ``graph.confidence`` of ``extraction`` where the spec declares it (seed 002 §12.1:
        what an extractor says is never as sure as what the user said)."""
        declared = dict(self.ctx.spec.graph.confidence) if self.ctx.spec.graph else {}
        ceiling = declared.get("extraction")
        return stated if ceiling is None else min(stated, float(ceiling))

    def _merged(self, typology: str, tier: str, decision: Decision,
                evidence: list[UUID]) -> Op[bool]:
        """``method: merge``: the evidence joins an active row saying the same thing."""
        near = yield from self._near("merge", typology, tier, decision.content)
        if near is None:
            return False
        row, threshold = near
        memory_id, provenance = row[0], dict(row[1] or {})
        before = [str(x) for x in provenance.get("derived_from") or []]
        added = [str(e) for e in evidence if str(e) not in before]
        yield Step(_set_provenance(self.ctx.tables), {
            "tenant": self.ctx.tenant, "id": memory_id,
            "provenance": Jsonb({"derived_from": before + added})})
        yield _event(self.ctx, "merged", memory_id, {
            "rule": self.rule.name, "scope_id": self.scope_id, "extractor": self.extractor,
            "derived_from": added, "threshold": threshold})
        self.counts["merged"] += 1
        yield from self._linked(memory_id, [UUID(a) for a in added], decision.entities)
        return True

    def _replaced(self, typology: str, tier: str, decision: Decision) -> Op[Memory | None]:
        """``method: append_with_supersession``: the active row an ADD says nearly the same
        as (same text in any case, or at least ``dedup_similarity`` similar), which the new
        row then supersedes through its key, as an UPDATE of it would; None otherwise."""
        if decision.key:
            return None
        near = yield from self._near("append_with_supersession", typology, tier,
                                     decision.content)
        if near is None:
            return None
        return Memory.from_row_or_none((yield get_step(self.ctx, near[0][0])))

    def _near(self, method: str, typology: str, tier: str,
              content: str) -> Op[tuple[Any, float] | None]:
        """When ``typology`` consolidates by ``method``: the active row of the tier and
        typology saying nearly what ``content`` says (:func:`_same_memory`, locked) and the
        threshold it met; None for another method or no such row."""
        policy = self.ctx.spec.behavior.consolidation.get(typology)  # type: ignore[call-overload]
        if policy is None or policy.method != method:
            return None
        threshold = policy.dedup_similarity or DEFAULT_DEDUP
        row = yield Step(_same_memory(self.ctx.tables, self.ctx.trigram), {
            "tenant": self.ctx.tenant, "tier": tier, "typology": typology,
            "content": content, "threshold": threshold}, "one")
        return None if row is None else (row, threshold)

    def _linked(self, memory_id: UUID, evidence: Sequence[UUID],
                entities: Sequence[EntityMention]) -> Op[None]:
        """``derived_from`` edges to the evidence and the memory's entity mentions."""
        if self.derived_edges:
            for episode in evidence:
                yield from graph.relate(self.ctx, memory_id, episode, "derived_from",
                                        source=self._source(), evidence=[
                                            {"rule": self.rule.name, "scope_id": self.scope_id}])
                self.counts["edges"] += 1
        if self.graph and entities:
            refs: list[graph.EntityRef] = [(e.name, e.type) for e in dict.fromkeys(entities)]
            yield from graph.mention(self.ctx, memory_id, refs)
            self.counts["mentions"] += len(refs)

    def _source(self) -> str | None:
        """The ``graph.confidence`` source of an edge: ``extraction`` when declared."""
        declared = self.ctx.spec.graph.confidence if self.ctx.spec.graph else {}
        return "extraction" if "extraction" in dict(declared) else None

    def causes(self, causes: Sequence[tuple[UUID, UUID]]) -> Op[None]:
        """A ``causal`` edge, cause -> effect, for each inferred pair of this scope's
        episodes, at the ``inference`` confidence where ``graph.confidence`` declares it
        (specs whose ``graph.edges`` lack ``causal`` record none)."""
        graph_spec = self.ctx.spec.graph
        if graph_spec is None or "causal" not in graph_spec.edges:
            return
        source = "inference" if "inference" in dict(graph_spec.confidence) else None
        for index, (cause, effect) in enumerate(dict.fromkeys(causes)):
            for episode in (cause, effect):
                if episode not in self.episodes:
                    raise PolicyViolation(f"consolidation cause {index} ({self.extractor}): "
                                          f"{episode} is not an episode of scope "
                                          f"'{self.scope_id}'", field=f"causes[{index}]")
            yield from graph.relate(self.ctx, cause, effect, "causal", source=source,
                                    confidence=None if source else 0.6, evidence=[
                                        {"rule": self.rule.name, "scope_id": self.scope_id,
                                         "extractor": self.extractor}])
            self.counts["edges"] += 1

    def mentions(self, mentions: Sequence[tuple[UUID, EntityMention]]) -> Op[None]:
        """The entities each episode mentions, created when new."""
        by_episode: dict[UUID, list[graph.EntityRef]] = {}
        for index, (episode, mention) in enumerate(mentions):
            if episode not in self.episodes:
                raise PolicyViolation(f"consolidation mention {index} ({self.extractor}): "
                                      f"{episode} is not an episode of scope "
                                      f"'{self.scope_id}'", field=f"mentions[{index}]")
            refs = by_episode.setdefault(episode, [])
            if (mention.name, mention.type) not in refs:
                refs.append((mention.name, mention.type))
        for episode, refs in by_episode.items():
            yield from graph.mention(self.ctx, episode, refs)
            self.counts["mentions"] += len(refs)
