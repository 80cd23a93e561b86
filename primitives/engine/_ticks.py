"""Tick-based transient tiers (seed 001 §1.A-B, §2): time to live counted in workflow ticks.

A tier that declares ``ttl_ticks`` (the spec must say ``determinism: {clock: ticks}``) gives
each new row that many ticks to live (or the write's own ``ttl_ticks``). Three operations of
the core work on such rows, each journalled:

* :func:`reference` (``TenantMemory.use``) marks rows as used by a decision: it appends the
  row's age (the ticks it has lived) to ``reference_ticks``, one statement for all the ids,
  one ``referenced`` event per row. A row of a tier that a ``references`` promotion fills
  (the consolidated tier, CWM) gets its tier's full ``ttl_ticks`` back: a re-referenced row
  stays. A reference never extends the time of the source tier (WM).
* :func:`tick`, one statement per ticked tier and per rule: every row of a ticked tier loses
  one tick and ages by one, and a row whose time reaches 0 is removed (``expired`` event;
  action-linked rows stay). Each ``behavior.promotion`` rule with criteria ``references``
  (``at: tick``) runs after its target tier aged and before its source tier ages: a row
  referenced ``min_references`` times within its last ``window_ticks`` ticks becomes a new
  row of the target tier with that tier's full ``ttl_ticks`` (``provenance.derived_from``
  names it; a ``promoted`` event), leaves its own tier (``removed_at_promotion``), and the
  promotion ledger records it, so a row is promoted at most once: once between the
  ``references`` rules of its source keyed ``source_id`` (the default), once per rule keyed
  ``source_and_target`` (``behavior.promotion[].idempotency_key``; an action-linked row
  stays in its tier, and the ledger keeps a later tick from promoting it again). One ``ticked`` event closes the tick.
* :func:`ticked_rows` reads a ticked tier's rows, newest first.

Rows of a tier that a ``references`` promotion fills are written only by that promotion: a
direct write is refused (:func:`primitives.engine._core.check_write_policy`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple
from uuid import UUID

from psycopg import sql

from primitives.compile import Tables
from primitives.compile._definer import transient_delete_function
from primitives.compile._expr import active_predicate
from primitives.compile._seeded import SEED_SETTING, uuid_fn
from primitives.engine._core import Context, Op, Step, _event, _memory_id
from primitives.engine._ids import seeded_uuid
from primitives.errors import PolicyViolation
from primitives.lifecycle._boundary import ledger_rules, rule_name
from primitives.spec import AgentSpec
from primitives.spec._common import split_ref

__all__ = ["ReferenceRule", "TickResult", "TickedRow", "reference", "reference_rules",
           "tick", "ticked_rows", "write_ttl"]

TICKED_EVENT = "ticked"
EXPIRED_EVENT = "expired"
REFERENCED_EVENT = "referenced"
PROMOTED_EVENT = "promoted"
LEFT_EVENT = "removed_at_promotion"


@dataclass(frozen=True)
class ReferenceRule:
    """A ``behavior.promotion`` rule with criteria ``references``, at ``tick``."""

    name: str
    from_tier: str
    from_typology: str
    to_tier: str
    to_typology: str
    min_references: int
    window_ticks: int
    ledger: tuple[str, ...] = ()
    """The ledger rules whose record of a row refuses this rule's promotion of it
    (``behavior.promotion[].idempotency_key``, :func:`~primitives.lifecycle._boundary.
    ledger_rules`): this rule alone (``source_and_target``), or every ``references`` rule of
    the same source keyed ``source_id``."""


class TickResult(NamedTuple):
    """What one :func:`tick` did: rows promoted, rows removed at 0, rows aged by one."""

    promoted: int
    expired: int
    aged: int


class TickedRow(NamedTuple):
    """A row of a ticked tier as :func:`ticked_rows` reads it."""

    id: UUID
    tier: str
    typology: str
    scope_id: str | None
    content: str
    ttl_ticks: int
    age_ticks: int
    references: int
    derived_from: list[str]


def reference_rules(spec: AgentSpec) -> list[ReferenceRule]:
    """The spec's ``references`` promotion rules, in declaration order."""
    rules = []
    for rule in spec.behavior.promotion:
        if rule.criteria != "references" or rule.at != "tick":
            continue
        assert rule.min_references is not None and rule.window_ticks is not None
        (ft, fy), (tt, ty) = split_ref(rule.from_), split_ref(rule.to)
        rules.append(ReferenceRule(rule_name(rule.from_, rule.to), ft, fy, tt, ty,
                                   rule.min_references, rule.window_ticks,
                                   ledger_rules(spec, rule)))
    return rules


def ticked_tiers(spec: AgentSpec) -> list[tuple[str, int]]:
    """(tier, ttl_ticks) of every tier that declares ``ttl_ticks``."""
    return [(t.name, t.ttl_ticks) for t in spec.tiers if t.ttl_ticks is not None]


def write_ttl(spec: AgentSpec, tier: str, ttl_ticks: int | None) -> int | None:
    """The ``ttl_ticks`` a new row of ``tier`` gets: the write's, else the tier's; None on a
    tier without ticks (where a write's value is refused)."""
    declared = spec.tier(tier).ttl_ticks
    if ttl_ticks is None:
        return declared
    if declared is None:
        raise PolicyViolation(
            f"tier '{tier}' declares no ttl_ticks: its rows do not live in ticks "
            f"(ticked tiers: {', '.join(n for n, _ in ticked_tiers(spec)) or 'none'})",
            tier=tier, field="ttl_ticks")
    if type(ttl_ticks) is not int or ttl_ticks < 1:
        raise PolicyViolation(f"ttl_ticks must be a positive integer, not {ttl_ticks!r}",
                              field="ttl_ticks")
    return ttl_ticks


def set_ttl_step(ctx: Context, memory_id: UUID, ttl_ticks: int) -> Step:
    """The new row's ticks: ``ttl_ticks`` to live, age 0, no references yet."""
    return Step(_set_ttl(ctx.tables), {"tenant": ctx.tenant, "id": memory_id,
                                       "ttl": ttl_ticks})


@lru_cache(maxsize=64)
def _set_ttl(tables: Tables) -> sql.Composed:
    return sql.SQL(
        "UPDATE {} AS m SET ttl_ticks = %(ttl)s, age_ticks = 0, reference_ticks = '{{}}' "
        "WHERE m.{} = %(tenant)s AND m.id = %(id)s"
    ).format(tables.memories.ident, tables.tenant)


def _renewals(spec: AgentSpec) -> sql.Composable:
    """The ``ttl_ticks`` a reference restores: the tier's own on tiers a references promotion
    fills, the row's current one elsewhere."""
    ttl = dict(ticked_tiers(spec))
    targets = sorted({r.to_tier for r in reference_rules(spec) if r.to_tier in ttl})
    if not targets:
        return sql.SQL("m.ttl_ticks")
    return sql.SQL("CASE m.tier {} ELSE m.ttl_ticks END").format(sql.SQL(" ").join(
        sql.SQL("WHEN {} THEN {}").format(sql.Literal(t), sql.Literal(ttl[t]))
        for t in targets))


def reference_statement(spec: AgentSpec, tables: Tables) -> sql.Composed:
    """Reference the live ticked rows ``%(ids)s`` of ``%(tenant)s``: their age is appended to
    ``reference_ticks`` (a target tier's TTL renewed), one ``referenced`` event each. Returns
    one row: the ids referenced."""
    t, mem = tables.tenant, tables.memories.ident
    return sql.SQL("""\
WITH hit AS (
  UPDATE {mem} AS m SET
    reference_ticks = coalesce(m.reference_ticks, '{{}}') || coalesce(m.age_ticks, 0),
    ttl_ticks = {renew}
  WHERE m.{t} = %(tenant)s AND m.id = ANY(%(ids)s::uuid[]) AND m.ttl_ticks IS NOT NULL
    AND {active}
  RETURNING m.{t} AS tenant, m.id, m.tier, m.ttl_ticks, m.age_ticks,
            cardinality(m.reference_ticks) AS refs),
journal AS (
  INSERT INTO {events} ({t}, event_id, kind, memory_id, actor, payload)
  SELECT h.tenant, gen_random_uuid(), {kind}, h.id, %(actor)s,
         jsonb_build_object('tier', h.tier, 'references', h.refs, 'age_ticks', h.age_ticks,
                            'ttl_ticks', h.ttl_ticks)
  FROM hit AS h ORDER BY h.id
  RETURNING 1)
SELECT array(SELECT h.id FROM hit AS h ORDER BY h.id), (SELECT count(*) FROM journal)""").format(
        mem=mem, t=t, events=tables.events.ident, kind=sql.Literal(REFERENCED_EVENT),
        renew=_renewals(spec), active=active_predicate("m"))


def promotion_statement(spec: AgentSpec, tables: Tables, rule: ReferenceRule, *,
                        scoped: bool) -> sql.Composed:
    """Promote the rows of ``%(tenant)s`` (of scope ``%(scope_id)s`` when ``scoped``) that
    ``rule`` qualifies and its ledger has not seen, into scope ``%(into)s`` (NULL: the
    source row's scope); the source leaves its tier. Returns one row: the number promoted."""
    t, mem = tables.tenant, tables.memories.ident
    anchors = [c for c in tables.anchor_columns if c != tables.tenant_column]
    anchor_cols = sql.SQL("").join(sql.SQL(", {}").format(sql.Identifier(c)) for c in anchors)
    anchor_select = sql.SQL("").join(sql.SQL(", c.{}").format(sql.Identifier(c))
                                     for c in anchors)
    to_ttl = spec.tier(rule.to_tier).ttl_ticks
    return sql.SQL("""\
WITH candidates AS (
  SELECT c.*, {new_id} AS new_id,
         (SELECT count(*) FROM unnest(c.reference_ticks) AS r(age)
          WHERE r.age > coalesce(c.age_ticks, 0) - {window}) AS refs,
         EXISTS (SELECT 1 FROM {links} AS l WHERE l.{t} = c.{t} AND l.memory_id = c.id)
           AS linked
  FROM {mem} AS c
  WHERE c.{t} = %(tenant)s AND c.tier = {from_tier} AND c.typology = {from_typ}{scope}
    AND {active} AND cardinality(c.reference_ticks) >= {n}
    AND (SELECT count(*) FROM unnest(c.reference_ticks) AS r(age)
         WHERE r.age > coalesce(c.age_ticks, 0) - {window}) >= {n}
    AND NOT EXISTS (SELECT 1 FROM {promotions} AS p WHERE p.{t} = c.{t}
                    AND p.rule IN ({ledger}) AND p.source_id = c.id)
  ORDER BY c.id
  FOR UPDATE OF c),
promoted AS (
  INSERT INTO {mem} ({t}{anchor_cols}, id, tier, typology, scope_id, key, namespace, content,
                     value, envelope, tags, provenance, event_time, source, actor,
                     ttl_ticks, age_ticks, reference_ticks)
  SELECT c.{t}{anchor_select}, c.new_id, {to_tier}, {to_typ},
         coalesce(%(into)s::text, c.scope_id), c.new_id::text, c.namespace, c.content,
         c.value, c.envelope, c.tags,
         c.provenance || jsonb_build_object('derived_from', jsonb_build_array(c.id::text),
                                            'rule', {rule}),
         c.event_time, c.source, %(actor)s, {to_ttl}, 0, '{{}}'
  FROM candidates AS c
  RETURNING id),
ledger AS (
  INSERT INTO {promotions} ({t}, rule, source_id, target_id)
  SELECT c.{t}, {rule}, c.id, c.new_id FROM candidates AS c
  ON CONFLICT DO NOTHING RETURNING 1),
removed AS (
  SELECT c.{t} AS tenant, c.id, c.new_id FROM candidates AS c
  WHERE NOT c.linked AND {delete}(c.id)),
journal AS (
  INSERT INTO {events} ({t}, event_id, kind, memory_id, actor, payload)
  SELECT e.tenant, gen_random_uuid(), e.kind, e.memory_id, %(actor)s, e.payload FROM (
    SELECT c.{t} AS tenant, {promoted_kind} AS kind, c.new_id AS memory_id,
           jsonb_build_object('rule', {rule}, 'derived_from', jsonb_build_array(c.id::text),
                              'references', c.refs, 'age_ticks', coalesce(c.age_ticks, 0),
                              'tier', {to_tier}, 'scope_id',
                              coalesce(%(into)s::text, c.scope_id)) AS payload,
           c.id AS source, 1 AS o
    FROM candidates AS c
    UNION ALL
    SELECT r.tenant, {left_kind}, r.id,
           jsonb_build_object('rule', {rule}, 'promoted', r.new_id::text), r.id, 2
    FROM removed AS r) AS e ORDER BY e.source, e.o
  RETURNING 1)
SELECT (SELECT count(*) FROM promoted) + 0 * ((SELECT count(*) FROM ledger)
       + (SELECT count(*) FROM journal))""").format(
        mem=mem, t=t, links=tables.action_links.ident, promotions=tables.promotions.ident,
        events=tables.events.ident, delete=transient_delete_function(tables),
        from_tier=sql.Literal(rule.from_tier), from_typ=sql.Literal(rule.from_typology),
        to_tier=sql.Literal(rule.to_tier), to_typ=sql.Literal(rule.to_typology),
        to_ttl=sql.Literal(to_ttl), rule=sql.Literal(rule.name),
        ledger=sql.SQL(", ").join(map(sql.Literal, rule.ledger or (rule.name,))),
        n=sql.Literal(rule.min_references), window=sql.Literal(rule.window_ticks),
        scope=sql.SQL(" AND c.scope_id = %(scope_id)s") if scoped else sql.SQL(""),
        active=active_predicate("c"), anchor_cols=anchor_cols, anchor_select=anchor_select,
        promoted_kind=sql.Literal(PROMOTED_EVENT), left_kind=sql.Literal(LEFT_EVENT),
        new_id=_promoted_id(spec, tables, rule))


def _promoted_id(spec: AgentSpec, tables: Tables, rule: ReferenceRule) -> sql.Composable:
    """A promoted row's id: random, or inside a job of a seeded spec the seeded id of
    ``<seed>:<rule>:<source id>`` (the ledger promotes a source once per rule, so it is
    new)."""
    if spec.determinism.ids != "seeded":
        return sql.SQL("gen_random_uuid()")
    return sql.SQL(
        "coalesce({}(nullif(current_setting({}, true), '') || ':' || {} || ':' || c.id::text), "
        "gen_random_uuid())").format(uuid_fn(tables), sql.Literal(SEED_SETTING),
                                     sql.Literal(rule.name))


def age_statement(tables: Tables, tier: str, *, scoped: bool) -> sql.Composed:
    """One tick of ``tier`` for ``%(tenant)s`` (scope ``%(scope_id)s`` when ``scoped``), one
    statement: rows with one tick left are removed (``expired`` events; action-linked rows
    stay), the others lose a tick and age by one. Returns (expired, aged)."""
    t, mem = tables.tenant, tables.memories.ident
    scope = sql.SQL(" AND m.scope_id = %(scope_id)s") if scoped else sql.SQL("")
    return sql.SQL("""\
WITH going AS (
  SELECT m.{t} AS tenant, m.id, m.scope_id,
         encode(sha256(convert_to(m.content, 'UTF8')), 'hex') AS content_sha256
  FROM {mem} AS m
  WHERE m.{t} = %(tenant)s AND m.tier = {tier}{scope} AND m.ttl_ticks <= 1
    AND NOT EXISTS (SELECT 1 FROM {links} AS l WHERE l.{t} = m.{t} AND l.memory_id = m.id)
  FOR UPDATE OF m),
removed AS (SELECT g.* FROM going AS g WHERE {delete}(g.id)),
aged AS (
  UPDATE {mem} AS m SET ttl_ticks = m.ttl_ticks - 1, age_ticks = coalesce(m.age_ticks, 0) + 1
  WHERE m.{t} = %(tenant)s AND m.tier = {tier}{scope} AND m.ttl_ticks > 1
  RETURNING 1),
journal AS (
  INSERT INTO {events} ({t}, event_id, kind, memory_id, actor, payload)
  SELECT r.tenant, gen_random_uuid(), {kind}, r.id, %(actor)s,
         jsonb_build_object('tier', {tier}, 'scope_id', r.scope_id,
                            'content_sha256', r.content_sha256)
  FROM removed AS r ORDER BY r.id
  RETURNING 1)
SELECT (SELECT count(*) FROM removed), (SELECT count(*) FROM aged)
       + 0 * (SELECT count(*) FROM journal)""").format(
        mem=mem, t=t, tier=sql.Literal(tier), scope=scope, links=tables.action_links.ident,
        delete=transient_delete_function(tables), events=tables.events.ident,
        kind=sql.Literal(EXPIRED_EVENT))


def _ticked(ctx: Context) -> list[tuple[str, int]]:
    tiers = ticked_tiers(ctx.spec)
    if not tiers:
        raise PolicyViolation(
            f"agent '{ctx.spec.agent}' has no tier with ttl_ticks: nothing lives in ticks "
            "(declare tiers[].ttl_ticks with determinism: {clock: ticks})", field="ttl_ticks")
    return tiers


def tick(ctx: Context, *, scope_id: str | None = None,
         into_scope: str | None = None) -> Op[TickResult]:
    """One workflow tick for the tenant (only scope ``scope_id`` of each ticked tier when
    given): references promotions first, then every ticked tier ages (module docstring).
    ``into_scope``: the scope promoted rows land in (their source's scope when None)."""
    tiers = _ticked(ctx)
    params: dict[str, Any] = {"tenant": ctx.tenant, "actor": ctx.actor, "scope_id": scope_id,
                              "into": into_scope}
    rules = reference_rules(ctx.spec)
    targets = {rule.to_tier for rule in rules}
    promoted = expired = aged = 0
    # the tiers promotions fill age first, so a row promoted now starts with its full time;
    # the promotions run before their sources age, so a row qualifying on its last tick
    # is promoted rather than expired
    order = [t for t, _ in tiers if t in targets] + [None] + [t for t, _ in tiers
                                                             if t not in targets]
    for tier in order:
        if tier is None:
            for rule in rules:
                row = yield Step(promotion_statement(ctx.spec, ctx.tables, rule,
                                                     scoped=scope_id is not None),
                                 params, "one")
                promoted += int(row[0]) if row else 0
            # tiers.capacity on_full: evict (CWM's token budget): right after the promotions
            from primitives.engine._capacity import evict
            yield from evict(ctx)
            continue
        row = yield Step(age_statement(ctx.tables, tier, scoped=scope_id is not None),
                         params, "one")
        assert row is not None
        expired, aged = expired + int(row[0]), aged + int(row[1])
    yield _event(ctx, TICKED_EVENT, None, {
        "scope_id": scope_id, "into_scope": into_scope, "promoted": promoted,
        "expired": expired, "aged": aged})
    return TickResult(promoted, expired, aged)


def reference(ctx: Context, memory_ids: Sequence[UUID | str]) -> Op[list[UUID]]:
    """Reference ``memory_ids`` (live rows of ticked tiers) once each: see the module
    docstring. An id that is not such a row is refused, and nothing is referenced."""
    _ticked(ctx)
    ids = sorted({_memory_id(i) for i in memory_ids})
    if not ids:
        return []
    row = yield Step(reference_statement(ctx.spec, ctx.tables),
                     {"tenant": ctx.tenant, "ids": ids, "actor": ctx.actor}, "one")
    assert row is not None
    hit = list(row[0])
    missing = [str(i) for i in ids if i not in set(hit)]
    if missing:
        raise PolicyViolation(
            f"reference: {', '.join(missing)} is not a live row of a ticked tier of this "
            "tenant (expired, promoted, or never written); nothing was referenced",
            field="memory_ids")
    return hit


def ticked_rows(ctx: Context, tier: str, *, scope_id: str | None = None) -> Op[list[TickedRow]]:
    """The live rows of ticked ``tier``, newest first (seed 001: WM is an ordered list)."""
    if tier not in dict(_ticked(ctx)):
        raise PolicyViolation(f"tier '{tier}' declares no ttl_ticks", tier=tier)
    t, mem = ctx.tables.tenant, ctx.tables.memories.ident
    rows = yield Step(sql.SQL(
        "SELECT m.id, m.tier, m.typology, m.scope_id, m.content, m.ttl_ticks, "
        "coalesce(m.age_ticks, 0), coalesce(cardinality(m.reference_ticks), 0), "
        "coalesce(ARRAY(SELECT jsonb_array_elements_text(m.provenance -> 'derived_from')), "
        "'{{}}') FROM {} AS m WHERE m.{} = %(tenant)s AND m.tier = %(tier)s AND {} "
        "AND (%(scope_id)s::text IS NULL OR m.scope_id = %(scope_id)s) "
        "ORDER BY m.created_at DESC, m.id DESC").format(mem, t, active_predicate("m")),
        {"tenant": ctx.tenant, "tier": tier, "scope_id": scope_id}, "all")
    return [TickedRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], list(r[8]))
            for r in rows]


# job end: CWM -> an episodic summary (seed 001 §2) -----------------------------------------------
SUMMARY_NAMESPACE = UUID("5b0c6e55-2f4a-4a36-9c3e-7d1a0f6b2c01")
"""The namespace of a job summary's id: uuid5 of tenant, job and rule, so ending a job again
writes no second summary (the write's idempotency key)."""


@dataclass(frozen=True)
class SummaryRule:
    """A ``behavior.promotion`` rule with criteria ``summary`` at ``job_end``."""

    name: str
    from_tier: str
    from_typology: str
    to_tier: str
    to_typology: str


def summary_rules(spec: AgentSpec, tier: str) -> list[SummaryRule]:
    """The summary rules that run when a scope of ``tier`` ends: ``at: job_end`` on a tier
    whose boundary is the job's end (``boundary: {lifecycle: job_end}``)."""
    if spec.tier(tier).boundary.lifecycle != "job_end":
        return []
    rules = []
    for rule in spec.behavior.promotion:
        if rule.criteria == "summary" and rule.at == "job_end":
            (ft, fy), (tt, ty) = split_ref(rule.from_), split_ref(rule.to)
            rules.append(SummaryRule(f"{rule.from_}->{rule.to}", ft, fy, tt, ty))
    return rules


def job_summaries(ctx: Context, tier: str, scope_id: str, *,
                  reflective_log_id: str | None) -> Op[list[Any]]:
    """At the end of job ``scope_id`` (a scope of ``tier``), each summary rule appends one
    row of its target (the append-only episodic store): the live rows of its source tier
    (CWM), oldest first (rows of one transaction by their text), as a deterministic summary text and, in ``value``, the snapshot of
    those rows with the SEM snapshot hash and ``reflective_log_id``; ``provenance`` names
    the CWM rows (``derived_from``) and the rule. Without ``reflective_log_id`` the anchor's
    provenance key of that name is taken, if given. The write is the engine's own (PII policy
    and limits apply; CWM is not SEM). No CWM rows: no summary. Returns the rows written."""
    from primitives.engine._core import _write, checked_write
    if reflective_log_id is None:
        reflective_log_id = dict(ctx.anchor.provenance).get("reflective_log_id")
    written = []
    for rule in summary_rules(ctx.spec, tier):
        rows = yield Step(sql.SQL(
            "SELECT m.id, m.content, m.value, "
            "coalesce(m.provenance -> 'derived_from', '[]'::jsonb) FROM {} AS m "
            "WHERE m.{} = %(tenant)s AND m.tier = %(tier)s AND m.typology = %(typ)s AND {} "
            "ORDER BY m.created_at, m.content, m.id").format(ctx.tables.memories.ident, ctx.tables.tenant,
                                                  active_predicate("m")),
            {"tenant": ctx.tenant, "tier": rule.from_tier, "typ": rule.from_typology}, "all")
        if not rows:
            continue
        from primitives.engine._determinism import sem_snapshot
        sem_hash = (yield from sem_snapshot(ctx)).hash
        items = [{"id": str(r[0]), "content": r[1], "value": r[2], "derived_from": r[3]}
                 for r in rows]
        content = f"job {scope_id}: " + "; ".join(r[1] for r in rows)
        value = {"summary_of": rule.from_tier, "job": scope_id, "items": items,
                 "sem_snapshot_hash": sem_hash, "reflective_log_id": reflective_log_id}
        w = checked_write(ctx.spec, rule.to_tier, content, typology=rule.to_typology,
                          key=None, namespace=(), value=value, envelope=None, tags=(),
                          scope_id=None, source="brainstate", promotion=True)
        from uuid import uuid5
        memory_id = (seeded_uuid(f"{ctx.job_seed}:{rule.name}:{scope_id}")
                     if ctx.job_seed is not None and ctx.spec.determinism.ids == "seeded"
                     else uuid5(SUMMARY_NAMESPACE, f"{ctx.tenant}\x00{scope_id}\x00{rule.name}"))
        written.append((yield from _write(
            ctx, w, event_time=None, source="brainstate", memory_id=memory_id,
            embedding=None, final=False, via="job_summary",
            provenance={"derived_from": [str(r[0]) for r in rows], "rule": rule.name,
                        "job": scope_id, "reflective_log_id": reflective_log_id,
                        "sem_snapshot_hash": sem_hash})))
    return written
