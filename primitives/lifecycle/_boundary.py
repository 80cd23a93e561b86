"""Tier boundaries: compounding, promotion and the end of a scope, as set-based SQL.

When a scope of a transient tier ends (its lifecycle event, ``idle_after`` inactivity, or the
maintain job closing it), one statement does, for every closing scope at once:

1. **Compounding.** The scope's active rows of each typology with a compounding rule
   (``behavior.promotion``, criteria ``compounding``) are grouped: each row joins the earliest
   row of its scope and typology at or above the rule's similarity threshold (embedding cosine
   where both rows have vectors, trigram similarity of the content otherwise, exact text
   without pg_trgm). Typologies whose consolidation method is not ``compounding`` keep one
   group per row. A row the rule's ledger rules already hold (:func:`ledger_rules`, the
   rule's ``idempotency_key``) is not compounded again: an action-linked row stays in its
   closed scope, and ending that scope again finds it there.
2. **Promotion upward.** Each group is matched against the active rows of the rule's target
   tier and typology. A match at or above the threshold is *corroborated*: its
   ``provenance.corroborated_by`` gains the group's independent evidence keys, its
   ``provenance.derived_from`` the group's ids, ``corroborated_at`` is now. Without a match a
   new row is *promoted* into the target (the content of the group's earliest row), with the
   same provenance and a ledger row in ``<prefix>_promotions``.
3. **Leaving.** The scope's rows then leave as the typology's ``lifecycle.transient`` says:
   removed (``drop_at_scope_end``, ``drop_unless_promoted``) or archived
   (``archive_at_scope_end``). Rows an action links always stay.
4. The scope is closed, with one event carrying the counts.

A spec whose ``graph.edges`` include ``derived_from`` also gets an edge from each promoted or
corroborated row to each of its evidence rows that stays (archived or action-linked).

Every change is a journal event in the same statement. Evidence keys name what makes two
observations independent: ``source:<source>`` when the row has a source, else
``scope:<tier>/<scope_id>``, else ``memory:<id>``; a promoted or corroborated row carries the
union of its evidence's keys, so corroboration accumulates up the tiers.

Corroboration promotion (criteria ``corroboration``: ``min_corroborations`` independent keys)
is :func:`corroboration_statement`, run at every boundary and by the maintain job.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

from psycopg import sql

from primitives.compile._definer import transient_delete_function
from primitives.compile._expr import active_predicate
from primitives.compile._gates import resolve_gate
from primitives.compile._maintenance_idx import evidence_count_sql
from primitives.compile._names import Tables
from primitives.compile._views import SANITIZED_EVENT_KIND
from primitives.lifecycle._cluster_writes import (
    corroboration_writes_citus,
    end_scope_writes_citus,
    memory_copy_columns,
)
from primitives.lifecycle._passes import ClusterForm, MaintenancePass, Similarity
from primitives.spec import AgentSpec
from primitives.spec._behavior import PromotionRule
from primitives.spec._common import split_ref

__all__ = [
    "BOUNDARY_CRITERIA_AT",
    "BoundaryRule",
    "CorroborationRule",
    "MaintenancePass",
    "ScopeEnd",
    "Similarity",
    "boundary_passes",
    "boundary_rules",
    "corroboration_rules",
    "corroboration_statement",
    "end_scopes_statement",
    "idle_scopes_statement",
    "ledger_rules",
    "maintain_lock_scope",
    "rule_name",
    "scope_end_lock_statement",
]

BOUNDARY_CRITERIA_AT = ("tier_boundary", "session_end", "job_end")
"""``at`` values of a compounding rule that run when a scope of its source tier ends."""

DEFAULT_DEDUP = 0.92
"""Similarity at which two observations are near-duplicates when neither the rule nor the
typology's consolidation names one (the seed's episodic default)."""


class ScopeEnd(tuple[int, int]):
    """What a scope's end did: a ``(removed, kept)`` pair, with the other counts as
    attributes (``archived``, ``compounded``, ``promoted``, ``corroborated`` at the boundary,
    and ``corroboration_promoted``: rows promoted by corroboration rules right after)."""

    removed: int
    kept: int
    archived: int
    compounded: int
    promoted: int
    corroborated: int
    corroboration_promoted: int

    def __new__(cls, *, removed: int, kept: int, archived: int = 0, compounded: int = 0,
                promoted: int = 0, corroborated: int = 0,
                corroboration_promoted: int = 0) -> ScopeEnd:
        self = super().__new__(cls, (int(removed), int(kept)))
        self.removed, self.kept = int(removed), int(kept)
        self.archived, self.compounded = int(archived), int(compounded)
        self.promoted, self.corroborated = int(promoted), int(corroborated)
        self.corroboration_promoted = int(corroboration_promoted)
        return self

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in (
            "removed", "kept", "archived", "compounded", "promoted", "corroborated",
            "corroboration_promoted")}

    def __repr__(self) -> str:
        return "ScopeEnd(" + ", ".join(f"{k}={v}" for k, v in self.as_dict().items()) + ")"


@dataclass(frozen=True)
class BoundaryRule:
    """A compounding rule as a boundary applies it."""

    name: str
    from_tier: str
    from_typology: str
    to_tier: str
    to_typology: str
    threshold: float
    """Similarity at or above which two rows are the same observation."""
    group_threshold: float
    """Similarity used to group the scope's own rows (above 1: no grouping)."""
    leave: str
    """What the scope's rows of this typology do once compounded: ``remove`` or ``archive``."""
    escalate_from: str | None
    """An anchor column the promoted row clears (anchor escalation), or None."""
    escalate_clear: tuple[str, ...] = ()
    """Every anchor column the promoted row clears (anchor escalation): ``from`` and, when
    ``to`` is an anchor key, each key listed after ``to`` (narrower than it), so the row
    lands in the scope ``to`` names."""
    ledger: tuple[str, ...] = ()
    """The ledger rules whose record of a row refuses this rule's compounding of it
    (:func:`ledger_rules`): a row compounded once is never compounded again (an
    action-linked row stays in its closed scope, and ending the scope again finds it)."""
    exclusive: bool = False
    """Keyed ``source_id``: where several such compounding rules read the same rows at one
    boundary, the first in spec order takes a row and the later ones do not."""


def maintain_lock_scope(tables: Tables) -> str:
    """The scope of the per-tenant lock (``primitives.tenant_xact_lock(tenant, scope)``) that
    each ``maintain`` batch takes for its tenants and ``end_scope`` for its own, so the
    boundary work of one tenant runs one transaction at a time and each reads what the one
    before it committed."""
    return f"maintain:{tables.memories.qualified}"


def scope_end_lock_statement(tables: Tables) -> sql.Composed:
    """Take the tenant's maintain lock (:func:`maintain_lock_scope`) for ``%(tenant)s``, the
    tenant of the transaction, until it ends."""
    return sql.SQL("SELECT primitives.tenant_xact_lock(%(tenant)s, {})").format(
        sql.Literal(maintain_lock_scope(tables)))


def rule_name(source: str, target: str) -> str:
    """The ledger's name of a promotion rule: ``<tier>.<typology>-><tier>.<typology>``."""
    return f"{source}->{target}"


def ledger_rules(spec: AgentSpec, rule: PromotionRule) -> tuple[str, ...]:
    """The ledger rules whose record of a source refuses ``rule``'s promotion of it
    (``behavior.promotion[].idempotency_key``): ``source_and_target``, ``rule`` alone (a
    source is promoted once per target); ``source_id``, every rule of the same source and
    criteria keyed ``source_id`` (a source is promoted once between them), ``rule`` first.

    The key binds rules of one criteria: a session episode that corroboration promotes into
    a fact is still compounded upward when its session ends."""
    own = rule_name(rule.from_, rule.to)
    if rule.idempotency_key == "source_and_target":
        return (own,)
    return (own, *(rule_name(o.from_, o.to) for o in spec.behavior.promotion
                   if o.from_ == rule.from_ and o.criteria == rule.criteria
                   and o.idempotency_key == "source_id" and rule_name(o.from_, o.to) != own))


def _leave(spec: AgentSpec, typology: str) -> str:
    policy = spec.behavior.lifecycle.get(typology)  # type: ignore[call-overload]
    transient = policy.transient if policy is not None else "drop_unless_promoted"
    return "archive" if transient == "archive_at_scope_end" else "remove"


def _dedup(spec: AgentSpec, source: str, target: str, typology: str, rule: float | None,
           consolidation: float | None) -> float:
    """The grouping threshold: the rule's ``dedup_similarity`` where the spec sets it, else
    the typology's consolidation ``dedup_similarity`` where the spec sets that, else the
    rule's default, the consolidation default, :data:`DEFAULT_DEDUP`."""
    declared = {(d.primitive, d.subject) for d in spec.deviations
                if d.field == "dedup_similarity"}
    if rule is not None and ("promotion", f"{source} -> {target}") in declared:
        return rule
    if consolidation is not None and ("consolidation", typology) in declared:
        return consolidation
    return rule or consolidation or DEFAULT_DEDUP


def boundary_rules(spec: AgentSpec) -> list[BoundaryRule]:
    """The spec's compounding rules that run at a scope's end, in spec order."""
    rules: list[BoundaryRule] = []
    for rule in spec.behavior.promotion:
        if rule.criteria != "compounding" or rule.at not in BOUNDARY_CRITERIA_AT:
            continue
        from_tier, from_typ = split_ref(rule.from_)
        to_tier, to_typ = split_ref(rule.to)
        lifecycle = spec.behavior.lifecycle.get(from_typ)  # type: ignore[call-overload]
        if lifecycle is not None and lifecycle.transient == "drop_at_scope_end":
            continue  # dropped at the end, never compounded upward
        consolidation = spec.behavior.consolidation.get(from_typ)  # type: ignore[call-overload]
        threshold = _dedup(spec, rule.from_, rule.to, from_typ, rule.dedup_similarity,
                           consolidation.dedup_similarity if consolidation else None)
        groups = consolidation is None or consolidation.method == "compounding"
        escalation = spec.tier(from_tier).boundary.anchor_escalation
        escalate = (escalation.from_ if escalation is not None
                    and escalation.from_ in spec.anchor.keys[1:] else None)
        clear: tuple[str, ...] = ()
        if escalation is not None and escalate is not None:
            keys = spec.anchor.keys
            wider = keys[keys.index(escalation.to) + 1:] if escalation.to in keys else []
            clear = tuple(k for k in keys[1:] if k == escalate or k in wider)
        rules.append(BoundaryRule(
            name=rule_name(rule.from_, rule.to), from_tier=from_tier, from_typology=from_typ,
            to_tier=to_tier, to_typology=to_typ, threshold=threshold,
            group_threshold=threshold if groups else 2.0, leave=_leave(spec, from_typ),
            escalate_from=escalate, escalate_clear=clear, ledger=ledger_rules(spec, rule),
            exclusive=rule.idempotency_key == "source_id"))
    return rules


def _similarity(a: str, b: str, similarity: Similarity) -> sql.Composable:
    """Similarity in [0, 1] of the rows aliased ``a`` and ``b``."""
    text = {
        "trigram": sql.SQL("similarity({a}.content, {b}.content)"),
        "exact": sql.SQL("CASE WHEN lower({a}.content) = lower({b}.content) THEN 1.0 ELSE 0.0 END"),
    }
    if similarity == "embedding":
        return sql.SQL(
            "CASE WHEN {a}.embedding IS NOT NULL AND {b}.embedding IS NOT NULL "
            "THEN 1 - ({a}.embedding <=> {b}.embedding) ELSE {text} END"
        ).format(a=sql.Identifier(a), b=sql.Identifier(b),
                 text=text["trigram"].format(a=sql.Identifier(a), b=sql.Identifier(b)))
    return text[similarity].format(a=sql.Identifier(a), b=sql.Identifier(b))


_EVIDENCE_KEY = sql.SQL(
    "CASE WHEN {r}.source IS NOT NULL THEN 'source:' || {r}.source "
    "WHEN {r}.scope_id IS NOT NULL THEN 'scope:' || {r}.tier || '/' || {r}.scope_id "
    "ELSE 'memory:' || {r}.id::text END")


def _evidence(alias: str) -> sql.Composed:
    """The row's evidence keys as a jsonb array: what it carries, or its own key."""
    return sql.SQL(
        "coalesce({r}.provenance -> 'corroborated_by', jsonb_build_array({key}))"
    ).format(r=sql.Identifier(alias), key=_EVIDENCE_KEY.format(r=sql.Identifier(alias)))


def _values(rows: Sequence[tuple[object, ...]], types: tuple[str, ...]) -> sql.Composed:
    """A typed VALUES list (one row of NULLs that matches nothing when ``rows`` is empty)."""
    if not rows:
        rows = [tuple(None for _ in types)]
    rows = list(rows)
    return sql.SQL(", ").join(
        sql.SQL("({})").format(sql.SQL(", ").join(
            sql.SQL("{}::{}").format(sql.Literal(v), sql.SQL(t)) for v, t in zip(row, types,
                                                                              strict=True)))
        for row in rows)


_CLOSING_ARRAYS = sql.SQL(
    "SELECT * FROM unnest(%(tenants)s::text[], %(tiers)s::text[], %(scope_ids)s::text[], "
    "%(into)s::text[])")
_PER_SCOPE = sql.SQL(
    "SELECT n.tenant, n.tier, n.scope_id, n.removed, n.kept, n.archived, n.compounded, "
    "n.promoted, n.corroborated, (SELECT count(*) FROM journal) AS events, "
    "(SELECT count(*) FROM ledger) AS ledger, (SELECT count(*) FROM closed) AS closed "
    "FROM counts AS n ORDER BY n.tenant, n.tier, n.scope_id")
_SUMMARY = sql.SQL(
    "SELECT count(*) + 0 * ((SELECT count(*) FROM journal) + (SELECT count(*) FROM ledger) "
    "+ (SELECT count(*) FROM closed)) FROM counts")


def end_scopes_statement(spec: AgentSpec, tables: Tables, *, embedding: bool,
                         similarity: Similarity, direct_delete: bool = False,
                         closing: sql.Composable | None = None,
                         summary: bool = False,
                         event: str = "scope_ended", citus: bool = False) -> sql.Composed:
    """End the scopes named by ``%(tenants)s``, ``%(tiers)s``, ``%(scope_ids)s`` (text[] of
    one length) with promoted rows of a transient target tier placed in ``%(into)s`` (text[],
    NULL: the target tier must be persistent); ``%(actor)s`` is the journal's actor and
    ``event`` the closing event kind (``scope_ended``, ``scope_idle_closed``). ``closing``
    replaces the arrays with a query of (tenant, tier, scope_id, into_scope) rows;
    ``summary`` returns one row, the number of scopes closed, instead of one per scope.

    Returns one row per closing scope: tenant, tier, scope_id, removed, kept, archived,
    compounded, promoted, corroborated. ``direct_delete``: remove rows with DELETE (the
    maintainer role) instead of the app role's SECURITY DEFINER function.

    ``citus``: the form a Citus coordinator routes whole to the shards of one tenant,
    ``%(tenant)s``, the only tenant of the arrays: every table in it is also filtered by that
    tenant (Citus plans a statement with ``FOR UPDATE`` only when it reaches one shard group),
    with ``%(nonce)s`` (a fresh text the new rows' ids are made from). It inserts nothing:
    Citus plans an ``INSERT`` in a common table expression on its own, through ``COPY``,
    which row-level security refuses. Its rows end with the columns
    :mod:`~primitives.lifecycle._cluster_writes` then writes (``CITUS_PARTS``); the rows to
    remove (without ``direct_delete``) are journalled and counted here and deleted last
    (``remove_statement_citus``: from a shard, the single-node delete function would
    query the distributed table again).
    """
    if citus:
        return _end_scopes_citus(spec, tables, embedding=embedding, similarity=similarity,
                                 direct_delete=direct_delete, closing=closing,
                                 summary=summary, event=event)
    return _end_scopes(spec, tables, embedding=embedding, similarity=similarity,
                       direct_delete=direct_delete, closing=closing, summary=summary,
                       event=event)


def _end_scopes(spec: AgentSpec, tables: Tables, *, embedding: bool, similarity: Similarity,
                direct_delete: bool, closing: sql.Composable | None, summary: bool,
                event: str, on: sql.Composable | None = None,
                result: sql.Composable | None = None) -> sql.Composed:
    """:func:`end_scopes_statement`; ``on``: an extra filter of every table reference by
    one tenant (the cluster form), formatted with ``{a}`` as the reference's alias."""
    t = tables.tenant
    mem, events, links = tables.memories.ident, tables.events.ident, tables.action_links.ident
    rules = boundary_rules(spec)
    rule_rows = [(r.name, r.from_tier, r.from_typology, r.to_tier, r.to_typology, r.threshold,
                  r.group_threshold, list(r.escalate_clear), n, list(r.ledger or (r.name,)),
                  r.exclusive) for n, r in enumerate(rules)]
    leave_rows = [(typ, _leave(spec, typ)) for typ in spec.typologies]
    persistent = spec.persistent_tier.name
    anchors = [c for c in tables.anchor_columns if c != tables.tenant_column]
    copy = memory_copy_columns(tables, embedding)
    anchor_select = sql.SQL("").join(
        sql.SQL(", CASE WHEN {n} = ANY(m.escalate_clear) THEN NULL ELSE h.{c} END").format(
            n=sql.Literal(c), c=sql.Identifier(c)) for c in anchors)
    anchor_cols = sql.SQL("").join(sql.SQL(", {}").format(sql.Identifier(c)) for c in anchors)
    copy_select = sql.SQL(", ").join(sql.SQL("h.{}").format(sql.Identifier(c)) for c in copy)
    copy_cols = sql.SQL(", ").join(map(sql.Identifier, copy))
    group_sim = _similarity("o", "c", similarity)
    target_sim = _similarity("x", "h", similarity)
    # the maintainer deletes directly; the app role through its SECURITY DEFINER function
    fn = transient_delete_function(tables)
    def only(alias: str) -> sql.Composable:
        return sql.SQL("") if on is None else sql.SQL(" AND {}.").format(
            sql.Identifier(alias)) + on
    remove = sql.SQL(
        "removed AS (DELETE FROM {mem} AS m USING going AS g WHERE m.{t} = g.tenant{on_m} "
        "AND m.id = g.id AND g.leave = 'remove' AND NOT g.linked "
        "RETURNING g.tenant, g.id, g.tier, g.scope_id, g.content_sha256, g.created_at)"
    ).format(mem=mem, t=t, on_m=only("m")) if direct_delete else sql.SQL(
        "removed AS (SELECT g.tenant, g.id, g.tier, g.scope_id, g.content_sha256, g.created_at "
        "FROM going AS g WHERE g.leave = 'remove' AND NOT g.linked{deleted})"
    ).format(deleted=sql.SQL("") if on is not None else sql.SQL(" AND {fn}(g.id)").format(fn=fn))
    return sql.SQL("""\
WITH closing (tenant, tier, scope_id, into_scope) AS ({closing}),
rules (rule, from_tier, from_typology, to_tier, to_typology, threshold, group_threshold,
       escalate_clear, ord, ledger, exclusive) AS (VALUES {rule_rows}),
leaving (typology, leave) AS (VALUES {leave_rows}),
closing_rows AS (
  SELECT c.*, s.into_scope, ({active}) AS is_active,
         EXISTS (SELECT 1 FROM {links} AS l WHERE l.{t} = c.{t}{on_l} AND l.memory_id = c.id) AS linked
  FROM {mem} AS c JOIN closing AS s ON c.{t} = s.tenant AND c.tier = s.tier
       AND c.scope_id = s.scope_id
  WHERE c.tier <> {persistent}{on_c} FOR UPDATE OF c),
grouped AS (
  SELECT c.id, c.{t} AS tenant, r.rule,
         (SELECT o.id FROM closing_rows AS o
          WHERE o.{t} = c.{t} AND o.tier = c.tier AND o.scope_id = c.scope_id
            AND o.typology = c.typology AND o.is_active
            AND (o.id = c.id OR {group_sim} >= r.group_threshold)
          ORDER BY o.event_time, o.created_at, o.id LIMIT 1) AS head
  FROM closing_rows AS c
  JOIN rules AS r ON r.from_tier = c.tier AND r.from_typology = c.typology
  WHERE c.is_active AND (c.into_scope IS NOT NULL OR r.to_tier = {persistent})
    AND NOT EXISTS (SELECT 1 FROM {promotions} AS p WHERE p.{t} = c.{t}{on_p}
                    AND p.rule = ANY(r.ledger) AND p.source_id = c.id)
    AND NOT (r.exclusive AND EXISTS (
      SELECT 1 FROM rules AS r2 WHERE r2.exclusive AND r2.ord < r.ord
        AND r2.from_tier = r.from_tier AND r2.from_typology = r.from_typology
        AND (c.into_scope IS NOT NULL OR r2.to_tier = {persistent})))),
groups AS (
  SELECT g.tenant, g.head, g.rule, array_agg(g.id ORDER BY g.id) AS members,
         (SELECT jsonb_agg(DISTINCT k ORDER BY k) FROM closing_rows AS e,
                 jsonb_array_elements_text({evidence_e}) AS k
          WHERE e.{t} = g.tenant AND e.id = ANY(array_agg(g.id))) AS evidence
  FROM grouped AS g GROUP BY g.tenant, g.head, g.rule),
matched AS (
  SELECT gr.*, r.to_tier, r.to_typology, r.escalate_clear, h.into_scope,
         (SELECT x.id FROM {mem} AS x
          WHERE x.{t} = gr.tenant{on_x} AND x.tier = r.to_tier AND x.typology = r.to_typology
            AND {active_x} AND (r.to_tier = {persistent} OR x.scope_id = h.into_scope)
            AND {target_sim} >= r.threshold
          ORDER BY {target_sim} DESC, x.created_at, x.id LIMIT 1) AS target,
         {new_id} AS new_id
  FROM groups AS gr JOIN rules AS r ON r.rule = gr.rule
  JOIN closing_rows AS h ON h.{t} = gr.tenant AND h.id = gr.head),
per_target AS (
  SELECT m.tenant, m.target, min(m.rule) AS rule,
    (SELECT array_agg(u ORDER BY u) FROM matched AS m2, unnest(m2.members) AS u
     WHERE m2.tenant = m.tenant AND m2.target = m.target) AS members,
    (SELECT jsonb_agg(DISTINCT k ORDER BY k) FROM matched AS m2,
            jsonb_array_elements_text(m2.evidence) AS k
     WHERE m2.tenant = m.tenant AND m2.target = m.target) AS evidence
  FROM matched AS m WHERE m.target IS NOT NULL GROUP BY m.tenant, m.target),
{corroborated}
{promoted},
{ledger},
{edges}going AS (
  SELECT c.{t} AS tenant, c.id, c.tier, c.scope_id, c.linked, c.archived_at IS NULL AS live,
         c.created_at,
         coalesce(l.leave, 'remove') AS leave,
         encode(sha256(convert_to(c.content, 'UTF8')), 'hex') AS content_sha256
  FROM closing_rows AS c LEFT JOIN leaving AS l ON l.typology = c.typology),
archived AS (
  UPDATE {mem} AS m SET archived_at = now(), updated_at = now()
  FROM going AS g WHERE m.{t} = g.tenant{on_m} AND m.id = g.id AND g.leave = 'archive'
    AND NOT g.linked AND g.live
  RETURNING g.tenant, g.id, g.tier, g.scope_id, g.created_at),
{remove},
{closed},
counts AS (
  SELECT s.tenant, s.tier, s.scope_id,
    (SELECT count(*) FROM removed AS x WHERE x.tenant = s.tenant AND x.tier = s.tier
       AND x.scope_id = s.scope_id) AS removed,
    (SELECT count(*) FROM going AS x WHERE x.tenant = s.tenant AND x.tier = s.tier
       AND x.scope_id = s.scope_id AND x.linked) AS kept,
    (SELECT count(*) FROM archived AS x WHERE x.tenant = s.tenant AND x.tier = s.tier
       AND x.scope_id = s.scope_id) AS archived,
    (SELECT count(*) FROM grouped AS x JOIN closing_rows AS c ON c.{t} = x.tenant
       AND c.id = x.id WHERE x.tenant = s.tenant AND c.tier = s.tier
       AND c.scope_id = s.scope_id) AS compounded,
    (SELECT count(*) FROM promoted AS p JOIN matched AS m ON m.tenant = p.tenant
       AND m.new_id = p.id JOIN closing_rows AS c ON c.{t} = m.tenant AND c.id = m.head
       WHERE c.{t} = s.tenant AND c.tier = s.tier AND c.scope_id = s.scope_id) AS promoted,
    (SELECT count(*) FROM matched AS m JOIN closing_rows AS c ON c.{t} = m.tenant
       AND c.id = m.head WHERE m.target IS NOT NULL AND c.{t} = s.tenant
       AND c.tier = s.tier AND c.scope_id = s.scope_id) AS corroborated
  FROM closing AS s),
journal AS (
  {journal_head} FROM (
    SELECT 1 AS o, now() AS at, c.tenant, 'corroborated' AS kind, c.id AS memory_id,
           jsonb_build_object('rule', c.rule, 'evidence', to_jsonb(c.members::text[]),
                              'corroborations', jsonb_array_length(c.evidence)) AS payload
    FROM corroborated AS c
    UNION ALL
    SELECT 2, now(), p.tenant, 'promoted', p.id,
           jsonb_build_object('rule', p.provenance -> 'rule',
                              'derived_from', p.provenance -> 'derived_from',
                              'corroborations',
                              jsonb_array_length(p.provenance -> 'corroborated_by'))
    FROM promoted AS p
    UNION ALL
    SELECT 3, (SELECT c.created_at FROM closing_rows AS c WHERE c.{t} = m.tenant
                 AND c.id = u.member), m.tenant, 'compounded', u.member,
           jsonb_build_object('rule', m.rule, 'into', coalesce(m.target, m.new_id)::text)
    FROM matched AS m, unnest(m.members) AS u(member)
    UNION ALL
    SELECT 4, a.created_at, a.tenant, 'archived_at_scope_end', a.id,
           jsonb_build_object('tier', a.tier, 'scope_id', a.scope_id)
    FROM archived AS a
    UNION ALL
    SELECT 5, r.created_at, r.tenant, 'removed_at_scope_end', r.id,
           jsonb_build_object('tier', r.tier, 'scope_id', r.scope_id,
                              'content_sha256', r.content_sha256)
    FROM removed AS r
    UNION ALL
    SELECT 5, g.created_at, g.tenant, 'retained_at_scope_end', g.id,
           jsonb_build_object('tier', g.tier, 'scope_id', g.scope_id, 'reason', 'action_linked')
    FROM going AS g WHERE g.linked
    UNION ALL
    SELECT 7, now(), n.tenant, {event}, NULL,
           jsonb_build_object('tier', n.tier, 'scope_id', n.scope_id, 'removed', n.removed,
                              'kept', n.kept, 'archived', n.archived,
                              'compounded', n.compounded, 'promoted', n.promoted,
                              'corroborated', n.corroborated)
    FROM counts AS n
  ) AS e ORDER BY e.tenant, e.o, e.at, e.memory_id
  {journal_tail})
{result}""").format(
        closing=closing or _CLOSING_ARRAYS, event=sql.Literal(event),
        result=result or (_SUMMARY if summary else _PER_SCOPE),
        rule_rows=_values(rule_rows, ("text", "text", "text", "text", "text", "float8",
                                      "float8", "text[]", "int4", "text[]", "bool")),
        leave_rows=_values(leave_rows, ("text", "text")),
        links=links, t=t, mem=mem, events=events, scopes=tables.scopes.ident,
        promotions=tables.promotions.ident,
        active=active_predicate("c"), active_x=active_predicate("x"),
        persistent=sql.Literal(persistent), group_sim=group_sim, target_sim=target_sim,
        evidence_e=_evidence("e"), evidence_x=_evidence("x"),
        anchor_cols=anchor_cols, anchor_select=anchor_select,
        copy_cols=copy_cols, copy_select=copy_select, remove=remove,
        edges=_boundary_edges(spec, tables, citus=on is not None),
        on_l=only("l"), on_c=only("c"), on_p=only("p"), on_x=only("x"), on_m=only("m"),
        corroborated=sql.SQL(_CORROBORATED if on is None else _CORROBORATED_CITUS).format(
            mem=mem, t=t, provenance=sql.SQL(_CORROBORATED_PROVENANCE).format(
                evidence_x=_evidence("x"))),
        new_id=sql.SQL("gen_random_uuid()") if on is None else sql.SQL(
            "md5(%(nonce)s::text || gr.head::text || gr.rule)::uuid"),
        promoted=sql.SQL(_PROMOTED if on is None else _PROMOTED_CITUS).format(
            mem=mem, t=t, anchor_cols=anchor_cols, anchor_select=anchor_select,
            copy_cols=copy_cols, copy_select=copy_select, persistent=sql.Literal(persistent),
            anchor_text=sql.SQL("").join(sql.SQL(
                "CASE WHEN {n} = ANY(p.escalate_clear) THEN NULL ELSE p.{c} END, ").format(
                n=sql.Literal(c), c=sql.Identifier(c)) for c in anchors),
            copy_text=sql.SQL(", ").join(sql.SQL("p.{}::text").format(sql.Identifier(c))
                                         for c in copy),
            h_columns=sql.SQL("").join(sql.SQL(", h.{}").format(sql.Identifier(c))
                                       for c in (*anchors, *copy))),
        ledger=sql.SQL(_LEDGER if on is None else _LEDGER_CITUS).format(
            promotions=tables.promotions.ident, t=t),
        closed=sql.SQL(_CLOSED if on is None else _CLOSED_CITUS).format(
            scopes=tables.scopes.ident, t=t),
        journal_head=sql.SQL(
            "INSERT INTO {events} ({t}, event_id, kind, memory_id, actor, payload)\n"
            "  SELECT e.tenant, gen_random_uuid(), e.kind, e.memory_id, %(actor)s, e.payload"
        ).format(events=events, t=t) if on is None else sql.SQL(
            "SELECT e.tenant, e.kind, e.memory_id, e.payload, e.o, e.at"),
        journal_tail=sql.SQL("RETURNING 1" if on is None else ""),
    )


_CITUS_PARTS = """\
  ARRAY(SELECT r.id FROM removed AS r ORDER BY r.id) AS removed_ids,
  (SELECT jsonb_agg(p.row ORDER BY p.id) FROM promoted AS p) AS promoted_rows,
  (SELECT jsonb_agg(jsonb_build_array(l.rule, l.source_id, l.target_id)
     ORDER BY l.target_id, l.source_id) FROM ledger AS l) AS ledger_rows,
  {edge_rows} AS edge_rows,
  (SELECT jsonb_agg(jsonb_build_array(c.tier, c.scope_id, now()::text)
     ORDER BY c.tier, c.scope_id) FROM closed AS c) AS closed_rows,
  (SELECT jsonb_agg(jsonb_build_array(j.kind, j.memory_id, j.payload)
     ORDER BY j.o, j.at, j.memory_id) FROM journal AS j) AS journal_rows"""
"""The end of the cluster form's result (``_cluster_writes.CITUS_PARTS`` columns), for one
tenant:
what the statements that follow write (:mod:`primitives.lifecycle._cluster_writes`): the ids of the
rows to remove, the promoted rows, the ledger's rows, the ``derived_from`` edges (NULL
without the graph's edges), the closed scopes and the journal's events in their order."""
_PER_SCOPE_CITUS = """\
SELECT n.tenant, n.tier, n.scope_id, n.removed, n.kept, n.archived, n.compounded,
  n.promoted, n.corroborated, (SELECT count(*) FROM journal) AS events,
  (SELECT count(*) FROM ledger) AS ledger, (SELECT count(*) FROM closed) AS closed,
{parts}
FROM counts AS n ORDER BY n.tenant, n.tier, n.scope_id"""
_SUMMARY_CITUS = """\
SELECT (SELECT count(*) FROM counts),
{parts}"""


def _end_scopes_citus(spec: AgentSpec, tables: Tables, *, embedding: bool,
                      similarity: Similarity, direct_delete: bool,
                      closing: sql.Composable | None, summary: bool,
                      event: str) -> sql.Composed:
    """:func:`end_scopes_statement`'s cluster form (``citus``)."""
    on = sql.SQL("{} = %(tenant)s").format(tables.tenant)
    parts = sql.SQL(_CITUS_PARTS).format(edge_rows=sql.SQL(
        "(SELECT jsonb_agg(jsonb_build_array(d.source_id, d.target_id) "
        "ORDER BY d.source_id, d.target_id) FROM derived_edges AS d)"
        if _derived_edges(spec, tables) else "NULL::jsonb"))
    result = sql.SQL(_SUMMARY_CITUS if summary else _PER_SCOPE_CITUS).format(parts=parts)
    return _end_scopes(spec, tables, embedding=embedding, similarity=similarity,
                       direct_delete=direct_delete, closing=closing, summary=summary,
                       event=event, on=on, result=result)


_PROMOTED = """\
promoted AS (
  INSERT INTO {mem} ({t}{anchor_cols}, id, tier, typology, scope_id, key, content,
                     provenance, corroborated_at, actor, {copy_cols})
  SELECT m.tenant{anchor_select}, m.new_id, m.to_tier, m.to_typology,
         CASE WHEN m.to_tier = {persistent} THEN NULL ELSE m.into_scope END,
         m.new_id::text, h.content,
         jsonb_build_object('derived_from', to_jsonb(m.members::text[]),
                            'corroborated_by', m.evidence, 'rule', m.rule),
         now(), %(actor)s, {copy_select}
  FROM matched AS m JOIN closing_rows AS h ON h.{t} = m.tenant AND h.id = m.head
  WHERE m.target IS NULL
  RETURNING {t} AS tenant, id, provenance)"""
_LEDGER = """\
ledger AS (
  INSERT INTO {promotions} ({t}, rule, source_id, target_id)
  SELECT m.tenant, m.rule, u.member, coalesce(m.target, m.new_id)
  FROM matched AS m, unnest(m.members) AS u(member)
  ON CONFLICT DO NOTHING RETURNING 1)"""
_CLOSED = """\
closed AS (
  INSERT INTO {scopes} ({t}, tier, scope_id, closed_at)
  SELECT tenant, tier, scope_id, now() FROM closing
  ON CONFLICT ({t}, tier, scope_id) DO UPDATE SET closed_at = EXCLUDED.closed_at
  RETURNING {t} AS tenant, tier, scope_id)"""
# The cluster form's parts (see _end_scopes_citus): what the single-node CTEs insert,
# selected instead, for the statements that follow to insert with VALUES.
_PROMOTED_CITUS = """\
promoted AS (
  SELECT p.tenant, p.id, p.provenance, jsonb_build_array({anchor_text}p.id::text, p.to_tier,
         p.to_typology, CASE WHEN p.to_tier = {persistent} THEN NULL ELSE p.into_scope END,
         p.id::text, p.content, p.provenance::text, now()::text, {copy_text}) AS row
  FROM (SELECT m.tenant, m.new_id AS id, m.to_tier, m.to_typology, m.into_scope,
               jsonb_build_object('derived_from', to_jsonb(m.members::text[]),
                                  'corroborated_by', m.evidence, 'rule', m.rule) AS provenance,
               m.escalate_clear, h.content{h_columns}
        FROM matched AS m JOIN closing_rows AS h ON h.{t} = m.tenant AND h.id = m.head
        WHERE m.target IS NULL) AS p)"""
_LEDGER_CITUS = """\
ledger AS (
  SELECT m.tenant, m.rule, u.member AS source_id, coalesce(m.target, m.new_id) AS target_id
  FROM matched AS m, unnest(m.members) AS u(member))"""
_CLOSED_CITUS = """\
closed AS (SELECT tenant, tier, scope_id FROM closing)"""
_CORROBORATED_PROVENANCE = """x.provenance || jsonb_build_object(
      'corroborated_by', (SELECT jsonb_agg(DISTINCT k ORDER BY k) FROM jsonb_array_elements_text(
          {evidence_x} || p.evidence) AS k),
      'derived_from', coalesce(x.provenance -> 'derived_from', '[]'::jsonb)
          || to_jsonb(p.members::text[]))"""
_CORROBORATED = """\
corroborated AS (
  UPDATE {mem} AS x SET
    provenance = {provenance},
    corroborated_at = now(), updated_at = now()
  FROM per_target AS p WHERE x.{t} = p.tenant AND x.id = p.target
  RETURNING p.tenant, x.id, p.rule, p.members, x.provenance -> 'corroborated_by' AS evidence),"""
# Citus refuses a stable function over a column in an UPDATE's SET (jsonb_build_object,
# to_jsonb): the new provenance is made in a subquery, the target row locked there.
_CORROBORATED_CITUS = """\
corroborated AS (
  UPDATE {mem} AS x SET provenance = n.provenance, corroborated_at = now(), updated_at = now()
  FROM (SELECT p.tenant, p.target, p.rule, p.members, {provenance}
        AS provenance FROM per_target AS p JOIN {mem} AS x ON x.{t} = p.tenant
        AND x.id = p.target WHERE x.{t} = %(tenant)s FOR UPDATE OF x) AS n
  WHERE x.{t} = n.tenant AND x.{t} = %(tenant)s AND x.id = n.target
  RETURNING n.tenant, x.id, n.rule, n.members, x.provenance -> 'corroborated_by' AS evidence),"""


def _derived_edges(spec: AgentSpec, tables: Tables) -> bool:
    """Whether the spec's graph records ``derived_from`` edges."""
    return (tables.edges is not None and spec.graph is not None
            and "derived_from" in spec.graph.edges)


def _boundary_edges(spec: AgentSpec, tables: Tables, *, citus: bool = False) -> sql.Composable:
    """A CTE adding a ``derived_from`` edge from each promoted or corroborated row to each
    of its evidence rows that stays (archived or action-linked; a removed row leaves only
    its id in ``provenance.derived_from``). Empty unless the graph records such edges."""
    if not _derived_edges(spec, tables):
        return sql.SQL("")
    assert tables.edges is not None
    if citus:  # the edges to insert, for the statement that follows (end_scope_inserts)
        return sql.SQL(
            "derived_edges AS (\n"
            "  SELECT m.tenant, coalesce(m.target, m.new_id) AS source_id, u.member AS target_id\n"
            "  FROM matched AS m CROSS JOIN LATERAL unnest(m.members) AS u(member)\n"
            "  JOIN closing_rows AS c ON c.{t} = m.tenant AND c.id = u.member\n"
            "  LEFT JOIN leaving AS l ON l.typology = c.typology\n"
            "  WHERE c.linked OR coalesce(l.leave, 'remove') = 'archive'),\n").format(
            t=tables.tenant)
    return sql.SQL(
        "derived_edges AS (\n"
        "  INSERT INTO {edges} ({t}, source_id, target_id, relation_type)\n"
        "  SELECT m.tenant, coalesce(m.target, m.new_id), u.member, 'derived_from'\n"
        "  FROM matched AS m CROSS JOIN LATERAL unnest(m.members) AS u(member)\n"
        "  JOIN closing_rows AS c ON c.{t} = m.tenant AND c.id = u.member\n"
        "  LEFT JOIN leaving AS l ON l.typology = c.typology\n"
        "  WHERE c.linked OR coalesce(l.leave, 'remove') = 'archive'\n"
        "  RETURNING 1),\n").format(edges=tables.edges.ident, t=tables.tenant)


def idle_scopes_statement(spec: AgentSpec, tables: Tables, *, embedding: bool,
                          similarity: Similarity, citus: bool = False) -> sql.Composed | None:
    """The maintain pass that closes every open scope of ``%(tenants)s`` idle longer than its
    tier's ``boundary.idle_after`` at ``%(now)s``, as :func:`end_scopes_statement` ends a
    scope (event ``scope_idle_closed``); promotion into a transient tier needs the scope it
    lands in, which an idle close does not know, so only rules into the persistent tier
    compound. None when no transient tier declares ``idle_after``."""
    idle = [(tier.name, f"{int(tier.boundary.idle_after.total_seconds())} seconds")
            for tier in spec.tiers
            if tier.boundary.idle_after is not None and not tier.persistent
            and tier.placement == "store"]
    if not idle:
        return None
    closing = sql.SQL(
        "SELECT s.{t}, s.tier, s.scope_id, NULL::text FROM {scopes} AS s "
        "JOIN (VALUES {idle}) AS i(tier, idle) ON i.tier = s.tier "
        "WHERE s.{t} = ANY(%(tenants)s::text[]){only} AND s.closed_at IS NULL "
        "AND s.last_activity_at < %(now)s::timestamptz - i.idle "
        "ORDER BY s.{t}, s.tier, s.scope_id FOR UPDATE OF s SKIP LOCKED"
    ).format(t=tables.tenant, scopes=tables.scopes.ident,
             idle=_values(idle, ("text", "interval")),
             only=sql.SQL(" AND s.{} = %(tenant)s").format(tables.tenant) if citus
             else sql.SQL(""))
    return end_scopes_statement(spec, tables, embedding=embedding, similarity=similarity,
                                direct_delete=True, closing=closing, summary=True,
                                event="scope_idle_closed", citus=citus)


@dataclass(frozen=True)
class CorroborationRule:
    """A ``corroboration`` promotion rule: ``min_corroborations`` independent evidence keys
    promote a row of ``from`` into ``to``, through a sanitization gate when named."""

    name: str
    from_tier: str
    from_typology: str
    to_tier: str
    to_typology: str
    min_corroborations: int
    gate: str | None
    strip_anchors: tuple[str, ...]
    strip_envelope: tuple[str, ...]
    keep_if_specific: bool
    at: str = "continuous"
    patterns: tuple[str, ...] = ()
    """The gate policy's ``strip_patterns`` (as PostgreSQL reads them), replaced by
    :attr:`replacement` in the promoted content."""
    replacement: str = ""
    from_ref: str = ""
    to_ref: str = ""
    """``continuous``: at every scope end and maintain pass (as soon as evidence suffices);
    ``tier_boundary`` (``session_end``, ``job_end``): only when a scope of the source tier
    ends; any other value: never (not enforced yet)."""
    ledger_rules: tuple[str, ...] = ()
    """The ledger rules whose record of a source refuses this rule's promotion of it
    (``behavior.promotion[].idempotency_key``): ``source_and_target``, this rule alone (a
    source is promoted once per target); ``source_id``, every corroboration rule of the same
    source keyed by ``source_id`` (a source is promoted once between them: by the first to
    qualify it, in spec order within one pass)."""

    @property
    def continuous(self) -> bool:
        return self.at == "continuous"

    def at_end_of(self, tier: str) -> bool:
        """The rule runs when a scope of ``tier`` ends."""
        return self.continuous or (self.at in BOUNDARY_CRITERIA_AT and self.from_tier == tier)


def corroboration_rules(spec: AgentSpec) -> list[CorroborationRule]:
    """The spec's corroboration promotion rules, with their gates resolved."""
    gates = {gate.name: gate for gate in spec.discipline.sanitization}
    rules: list[CorroborationRule] = []
    corroborating = [rule for rule in spec.behavior.promotion
                     if rule.criteria == "corroboration" and rule.min_corroborations is not None]
    for rule in corroborating:
        assert rule.min_corroborations is not None
        from_tier, from_typ = split_ref(rule.from_)
        to_tier, to_typ = split_ref(rule.to)
        gate = gates.get(rule.sanitization) if rule.sanitization else None
        resolved = resolve_gate(spec, gate.name) if gate else None
        stripping = resolved is not None and resolved.transform == "strip_identifiers"
        strip = resolved.strip_keys if resolved and stripping else ()
        rules.append(CorroborationRule(
            name=rule_name(rule.from_, rule.to), from_tier=from_tier, from_typology=from_typ,
            to_tier=to_tier, to_typology=to_typ, min_corroborations=rule.min_corroborations,
            gate=gate.name if gate else None,
            strip_anchors=tuple(k for k in strip if k in spec.anchor.keys),
            strip_envelope=strip, keep_if_specific=gate.keep_if_specific if gate else False,
            at=rule.at, patterns=resolved.patterns if resolved and stripping else (),
            replacement=resolved.replacement if resolved else "",
            from_ref=rule.from_, to_ref=rule.to,
            ledger_rules=ledger_rules(spec, rule)))
    return rules


SPECIFIC_BELOW = 3
"""A sanitized text with fewer word characters than this meant nothing without what was
stripped: with ``keep_if_specific`` the observation stays unpromoted."""


def corroboration_statement(spec: AgentSpec, tables: Tables, rule: CorroborationRule, *,
                            embedding: bool, citus: bool = False) -> sql.Composed:
    """Promote the rows of ``%(tenants)s`` that ``rule`` qualifies and its ledger has not
    seen: a new row of the target with ``provenance.derived_from`` = the source, the
    source's evidence, and (through the rule's gate) the stripped anchor values removed from
    the content and the stripped keys from the envelope. A row that keeps too little once
    stripped stays, journalled ``kept_specific``; either way the ledger records the source,
    so a repeat is refused. A persistent source whose typology archives on ``disposition``
    (``behavior.lifecycle.<typology>.archive_on``; episodic by default) is archived once
    promoted, journalled ``archived`` with the cause ``disposition``: the promoted row now
    stands for it. Returns one row: the number promoted.

    ``citus``: the form a Citus coordinator routes whole to the shards of one tenant,
    ``%(tenant)s`` (with ``%(nonce)s``, a fresh text the new rows' ids are made from), as
    :func:`end_scopes_statement`'s: it inserts nothing, and returns after the number
    promoted what :func:`corroboration_writes_citus` inserts: the promoted rows, the ledger's
    rows, the ``derived_from`` edges and the journal's events."""
    t = tables.tenant
    on = sql.SQL(" AND {}.{} = %(tenant)s") if citus else None

    def only(alias: str) -> sql.Composable:
        return sql.SQL("") if on is None else on.format(sql.Identifier(alias), t)
    mem = tables.memories.ident
    content: sql.Composable = sql.SQL("c.content")
    for key in rule.strip_anchors:
        content = sql.SQL("replace({}, coalesce(c.{}, E'\\x01'), '')").format(
            content, sql.Identifier(key))
    if rule.strip_anchors:
        content = sql.SQL("btrim(regexp_replace({}, '\\s+', ' ', 'g'))").format(content)
    for pattern in rule.patterns:
        content = sql.SQL("regexp_replace({}, {}, {}, 'g')").format(
            content, sql.Literal(pattern), sql.Literal(rule.replacement))
    envelope: sql.Composable = sql.SQL("c.envelope")
    if rule.strip_envelope:
        envelope = sql.SQL("c.envelope - {}::text[]").format(
            sql.Literal(list(rule.strip_envelope)))
    specific: sql.Composable = sql.SQL("FALSE")
    bare: sql.Composable = sql.SQL("s.new_content")
    if rule.patterns and rule.replacement:
        bare = sql.SQL("replace(s.new_content, {}, '')").format(sql.Literal(rule.replacement))
    if rule.keep_if_specific and (rule.strip_anchors or rule.patterns):
        specific = sql.SQL("length(regexp_replace({}, '\\W', '', 'g')) < {}").format(
            bare, sql.Literal(SPECIFIC_BELOW))
    elif rule.strip_anchors or rule.patterns:
        # without keep_if_specific a stripped row still needs some text to be a memory
        specific = sql.SQL("s.new_content = ''")
    anchors = [c for c in tables.anchor_columns if c != tables.tenant_column]
    anchor_cols = sql.SQL("").join(sql.SQL(", {}").format(sql.Identifier(c)) for c in anchors)
    anchor_select = sql.SQL("").join(sql.SQL(", s.{}").format(sql.Identifier(c))
                                     for c in anchors)
    lifecycle = spec.behavior.lifecycle.get(rule.from_typology)  # type: ignore[call-overload]
    # archive_on: disposition: a persistent row promoted is disposed of, so it is archived
    disposes = (spec.tier(rule.from_tier).persistent and lifecycle is not None
                and "disposition" in lifecycle.archive_on)
    vector_cols = sql.SQL(", embedding, embedding_model") if embedding else sql.SQL("")
    edges = _derived_edges(spec, tables) and tables.edges is not None
    vector_select = sql.SQL(
        ", CASE WHEN s.new_content = s.content THEN s.embedding END, "
        "CASE WHEN s.new_content = s.content THEN s.embedding_model END"
    ) if embedding else sql.SQL("")
    return sql.SQL("""\
WITH candidates AS (
  SELECT c.*, {content} AS new_content, {envelope} AS new_envelope,
         {new_id} AS new_id
  FROM {mem} AS c
  WHERE c.{t} = ANY(%(tenants)s::text[]){on_c} AND c.tier = {from_tier}
    AND c.typology = {from_typ} AND {active}
    AND {evidence} >= {n}
    AND NOT EXISTS (SELECT 1 FROM {promotions} AS p WHERE p.{t} = c.{t}{on_p}
                    AND p.rule IN ({ledger_rules}) AND p.source_id = c.id)
  FOR UPDATE OF c SKIP LOCKED),
sorted AS (SELECT s.*, {specific} AS specific FROM candidates AS s),
{promoted},
{ledger},
{edges}{disposed}journal AS (
  {journal_head} FROM (
    SELECT s.{t} AS tenant, CASE WHEN s.specific THEN 'kept_specific' ELSE 'promoted' END
             AS kind,
           CASE WHEN s.specific THEN s.id ELSE s.new_id END AS memory_id,
           jsonb_build_object('rule', {rule}, 'derived_from', jsonb_build_array(s.id::text),
                              'corroborations',
                              jsonb_array_length(s.provenance -> 'corroborated_by'),
                              'sanitization', {gate}::text, 'stripped', {stripped}::jsonb,
                              'changed', s.new_content <> s.content
                                         OR s.new_envelope <> s.envelope) AS payload,
           0 AS n
    FROM sorted AS s{crossings}{disposals}) AS e ORDER BY e.tenant, e.memory_id, e.n
  {journal_tail})
SELECT (SELECT count(*) FROM promoted) + 0 * ((SELECT count(*) FROM ledger)
       + (SELECT count(*) FROM journal){disposed_count}){citus_rows}""").format(
        content=content, envelope=envelope, mem=mem, t=t,
        from_tier=sql.Literal(rule.from_tier), from_typ=sql.Literal(rule.from_typology),
        to_tier=sql.Literal(rule.to_tier), to_typ=sql.Literal(rule.to_typology),
        active=active_predicate("c"), n=sql.Literal(rule.min_corroborations),
        evidence=evidence_count_sql("c"),
        promotions=tables.promotions.ident, rule=sql.Literal(rule.name), specific=specific,
        ledger_rules=sql.SQL(", ").join(map(sql.Literal, rule.ledger_rules or (rule.name,))),
        anchor_cols=anchor_cols, anchor_select=anchor_select, vector_cols=vector_cols,
        vector_select=vector_select, events=tables.events.ident,
        gate=sql.Literal(rule.gate),
        stripped=sql.Literal(_json_list(rule.strip_envelope)),
        crossings=sql.SQL("") if rule.gate is None else sql.SQL(
            "\n    UNION ALL\n"
            "    SELECT s.{t}, {kind}, s.id, jsonb_build_object("
            "'gate', {gate}::text, 'from', {frm}::text, 'to', {to}::text, "
            "'transform', 'strip_identifiers', 'outcome', CASE WHEN s.specific "
            "THEN 'kept_specific' ELSE 'crossed' END, 'stripped', jsonb_build_object("
            "'keys', {stripped}::jsonb, 'patterns', {patterns}), 'via', 'promotion', "
            "'promoted', CASE WHEN s.specific THEN NULL ELSE s.new_id::text END), 1\n"
            "    FROM sorted AS s").format(
                t=t, kind=sql.Literal(SANITIZED_EVENT_KIND), gate=sql.Literal(rule.gate),
                frm=sql.Literal(rule.from_ref), to=sql.Literal(rule.to_ref),
                stripped=sql.Literal(_json_list(rule.strip_envelope)),
                patterns=sql.SQL(" + ").join(
                    [sql.SQL("regexp_count(s.content, {})").format(sql.Literal(p))
                     for p in rule.patterns]) if rule.patterns else sql.SQL("0")),
        disposed=sql.SQL(
            "disposed AS (\n"
            "  UPDATE {mem} AS d SET archived_at = now(), updated_at = now()\n"
            "  FROM sorted AS s WHERE NOT s.specific AND d.{t} = s.{t}{on_d} AND d.id = s.id\n"
            "    AND d.archived_at IS NULL\n"
            "  RETURNING d.{t} AS tenant, d.id, s.new_id),\n").format(mem=mem, t=t,
                                                                     on_d=only("d"))
        if disposes else sql.SQL(""),
        disposals=sql.SQL(
            "\n    UNION ALL\n"
            "    SELECT d.tenant, 'archived', d.id, jsonb_build_object("
            "'column', 'archived_at', 'cause', 'disposition', 'promoted', d.new_id::text, "
            "'rule', {rule}), 2\n"
            "    FROM disposed AS d").format(rule=sql.Literal(rule.name))
        if disposes else sql.SQL(""),
        disposed_count=sql.SQL(" + (SELECT count(*) FROM disposed)") if disposes
        else sql.SQL(""),
        edges=sql.SQL(
            "derived_edges AS (\n"
            "  INSERT INTO {edges} ({t}, source_id, target_id, relation_type)\n"
            "  SELECT p.tenant, p.id, s.id, 'derived_from' FROM promoted AS p\n"
            "  JOIN sorted AS s ON s.{t} = p.tenant AND s.new_id = p.id\n"
            "  RETURNING 1),\n" if not citus else
            "derived_edges AS (\n"
            "  SELECT p.id AS source_id, s.id AS target_id FROM promoted AS p\n"
            "  JOIN sorted AS s ON s.{t} = p.tenant AND s.new_id = p.id),\n"
        ).format(edges=tables.edges.ident, t=t)
        if edges and tables.edges is not None else sql.SQL(""),
        on_c=only("c"), on_p=only("p"),
        new_id=sql.SQL("gen_random_uuid()") if not citus else sql.SQL(
            "md5(%(nonce)s::text || c.id::text || {})::uuid").format(sql.Literal(rule.name)),
        promoted=sql.SQL(_CORROBORATION_PROMOTED if not citus
                         else _CORROBORATION_PROMOTED_CITUS).format(
            mem=mem, t=t, anchor_cols=anchor_cols, anchor_select=anchor_select,
            vector_cols=vector_cols, vector_select=vector_select, rule=sql.Literal(rule.name),
            to_tier=sql.Literal(rule.to_tier), to_typ=sql.Literal(rule.to_typology),
            anchor_text=sql.SQL("").join(sql.SQL("s.{}, ").format(sql.Identifier(c))
                                         for c in anchors),
            vector_text=sql.SQL(", s.embedding::text, s.embedding_model") if embedding
            else sql.SQL("")),
        ledger=sql.SQL(
            "ledger AS (\n"
            "  INSERT INTO {promotions} ({t}, rule, source_id, target_id)\n"
            "  SELECT s.{t}, {rule}, s.id, CASE WHEN s.specific THEN NULL ELSE s.new_id END "
            "FROM sorted AS s\n"
            "  ON CONFLICT DO NOTHING RETURNING 1)" if not citus else
            "ledger AS (\n"
            "  SELECT {rule} AS rule, s.id AS source_id, "
            "CASE WHEN s.specific THEN NULL ELSE s.new_id END AS target_id FROM sorted AS s)"
        ).format(promotions=tables.promotions.ident, t=t, rule=sql.Literal(rule.name)),
        journal_head=sql.SQL(
            "INSERT INTO {events} ({t}, event_id, kind, memory_id, actor, payload)\n"
            "  SELECT e.tenant, gen_random_uuid(), e.kind, e.memory_id, %(actor)s, e.payload"
        ).format(events=tables.events.ident, t=t) if not citus else sql.SQL(
            "SELECT e.tenant, e.kind, e.memory_id, e.payload, e.n"),
        journal_tail=sql.SQL("" if citus else "RETURNING 1"),
        citus_rows=sql.SQL("") if not citus else sql.SQL(
            ",\n  (SELECT jsonb_agg(p.row ORDER BY p.id) FROM promoted AS p),\n"
            "  (SELECT jsonb_agg(jsonb_build_array(l.rule, l.source_id, l.target_id) "
            "ORDER BY l.source_id) FROM ledger AS l),\n"
            "  {edge_rows},\n"
            "  (SELECT jsonb_agg(jsonb_build_array(j.kind, j.memory_id, j.payload) "
            "ORDER BY j.memory_id, j.n) FROM journal AS j)").format(edge_rows=sql.SQL(
                "(SELECT jsonb_agg(jsonb_build_array(d.source_id, d.target_id) "
                "ORDER BY d.source_id, d.target_id) FROM derived_edges AS d)" if edges
                else "NULL::jsonb")),
    )


_CORROBORATION_PROMOTED = """\
promoted AS (
  INSERT INTO {mem} ({t}{anchor_cols}, id, tier, typology, scope_id, key, namespace, content,
                     value, envelope, tags, provenance, event_time, corroborated_at, actor
                     {vector_cols})
  SELECT s.{t}{anchor_select}, s.new_id, {to_tier}, {to_typ},
         CASE WHEN s.tier = {to_tier} THEN s.scope_id END, s.new_id::text, s.namespace,
         s.new_content, s.value, s.new_envelope, s.tags,
         jsonb_build_object('derived_from', jsonb_build_array(s.id::text),
                            'corroborated_by', s.provenance -> 'corroborated_by',
                            'rule', {rule}),
         s.event_time, now(), %(actor)s{vector_select}
  FROM sorted AS s WHERE NOT s.specific
  RETURNING {t} AS tenant, id, provenance)"""
# the cluster form: the values (as text) of the rows the single-node CTE inserts, in the
# order of CORROBORATION_COLUMNS_CITUS
_CORROBORATION_PROMOTED_CITUS = """\
promoted AS (
  SELECT s.{t} AS tenant, s.new_id AS id, s.new_provenance AS provenance,
         jsonb_build_array({anchor_text}s.new_id::text, {to_tier}, {to_typ}, s.new_scope_id,
         s.new_id::text, s.namespace::text, s.new_content, s.value::text,
         s.new_envelope::text, s.tags::text, s.new_provenance::text, s.event_time::text,
         now()::text{vector_text}) AS row
  FROM (SELECT s.*, CASE WHEN s.tier = {to_tier} THEN s.scope_id END AS new_scope_id,
               jsonb_build_object('derived_from', jsonb_build_array(s.id::text),
                                  'corroborated_by', s.provenance -> 'corroborated_by',
                                  'rule', {rule}) AS new_provenance
        FROM sorted AS s WHERE NOT s.specific) AS s)"""


def _json_list(items: tuple[str, ...]) -> str:
    return json.dumps(list(items))


def boundary_passes(spec: AgentSpec, tables: Tables, *, embedding: bool,
                    similarity: Similarity) -> list[MaintenancePass]:
    """The maintain job's boundary work: promotion out of transient tiers, idle scope closes,
    then promotion out of the persistent tier (so evidence an idle close just moved up is
    promoted in the same run)."""
    persistent = spec.persistent_tier.name

    def promote(rule: CorroborationRule) -> MaintenancePass:
        def writes(row: Sequence[Any], params: Mapping[str, Any]
                   ) -> list[tuple[sql.Composed, dict[str, Any]]]:
            return corroboration_writes_citus(tables, row, embedding=embedding,
                                              params=dict(params), event_ids=uuid4)
        return MaintenancePass(
            f"promote {rule.name}",
            corroboration_statement(spec, tables, rule, embedding=embedding),
            cluster=ClusterForm(corroboration_statement(spec, tables, rule,
                                                        embedding=embedding, citus=True),
                                writes))

    # continuous rules only: a rule at a tier boundary runs when end_scope ends its tier's scope
    rules = [r for r in corroboration_rules(spec) if r.continuous]
    # rules out of transient tiers before their idle scopes close (the rows then leave),
    # rules out of the persistent tier after (what the closes compounded up)
    passes = [promote(r) for r in rules if r.from_tier != persistent]
    idle = idle_scopes_statement(spec, tables, embedding=embedding, similarity=similarity)
    idle_citus = idle_scopes_statement(spec, tables, embedding=embedding,
                                       similarity=similarity, citus=True)
    if idle is not None and idle_citus is not None:
        def closed(row: Sequence[Any], params: Mapping[str, Any]
                   ) -> list[tuple[sql.Composed, dict[str, Any]]]:
            return end_scope_writes_citus(spec, tables, row, embedding=embedding,
                                          params=dict(params), event_ids=uuid4)
        passes.append(MaintenancePass("idle_scopes", idle,
                                      cluster=ClusterForm(idle_citus, closed)))
    passes += [promote(r) for r in rules if r.from_tier == persistent]
    return passes
