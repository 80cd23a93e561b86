"""Governed semantic memory (seed 001 §1.D, §2, §3, §10): SEM reads and its only write paths.

A typology whose ``behavior.write_policy`` is ``governed`` is never written by ``observe``.
It changes in exactly two ways, both journalled:

* **user intent** (``governance.user_intent_allowed``): :func:`record_intent` journals a
  ``user_intent`` event naming the canonical key and the value's hash; :func:`sem_put` writes
  that value under that key once, naming the event;
* **an approved request**: :func:`request_promotion` appends a ``memory_promote_request`` (the
  spec's ``request_kind``) for a source row the spec's ``criteria: governed`` promotion rule
  covers; :func:`approve` records each approver's decision (append-only) and, once
  ``approvals_required`` approvers agreed, runs the ``sem_put`` (``at: on_approval``).

A second request for a source that has one pending, approved or executed is refused with
:class:`~primitives.errors.PromotionLoop`; so is a second ``sem_put`` of one intent event.
Deletion is a request too (:func:`request_deletion`): every approver the retention policy's
``deletion_requires`` names must approve; the row is then tombstoned (never removed) and a
``deletion_event`` is journalled.

Every key goes through :func:`canonical_key`, the one canonicalisation function: ``sem_get``
is an exact match on it and ``sem_search`` a prefix listing of it.

Example::

    intent = mem.record_intent("user/profile/u1/favorite_color", "cerulean")
    mem.sem_put("user/profile/u1/favorite_color", "cerulean", intent=intent)
    mem.sem_get("User/Profile/u1/favorite_color")["value"]   # 'cerulean'
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from uuid import UUID

from psycopg import sql
from psycopg.types.json import Jsonb

from primitives.compile import Tables
from primitives.discipline import pii_guard
from primitives.engine import _core as core
from primitives.engine import _queries as q
from primitives.engine._ids import new_uuid
from primitives.engine._records import Memory
from primitives.errors import GovernanceError, PolicyViolation, PrivacyBlocked, PromotionLoop
from primitives.spec import AgentSpec

__all__ = [
    "DELETE_REQUEST_KIND",
    "ActionRequest",
    "approve",
    "canonical_key",
    "record_intent",
    "request_deletion",
    "request_promotion",
    "sem_get",
    "sem_put",
    "sem_search",
]

SEM_TYPOLOGY = "semantic"
DELETE_REQUEST_KIND = "memory_delete_request"
"""The kind of a request to delete a governed fact (seed 001 §10)."""
INTENT_EVENT = "user_intent"
SEARCH_LIMIT = 100

_SEPARATORS = re.compile(r"/+")
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class ActionRequest:
    """A governed request as it stands: ``status`` is pending, approved, rejected or
    executed; ``memory`` is the row its execution wrote or tombstoned."""

    id: UUID
    kind: str
    status: str
    target_key: str | None
    source: UUID | None
    approvals: tuple[str, ...] = ()
    memory: Memory | None = None


def canonical_key(key: str) -> str:
    """The one canonical form of a SEM key: lower case, segments split on ``/`` with their
    surrounding space removed and inner runs of space turned into ``_``, no empty segment.

    >>> canonical_key(" User/Profile//u1/Favorite Color ")
    'user/profile/u1/favorite_color'
    """
    if not isinstance(key, str):
        raise PolicyViolation(f"a SEM key must be a string, not {type(key).__name__}",
                              field="key")
    parts = [_SPACES.sub("_", p.strip()) for p in _SEPARATORS.split(key.strip().lower())]
    canonical = "/".join(p for p in parts if p)
    if not canonical:
        raise PolicyViolation(f"a SEM key needs at least one segment, not {key!r}", field="key")
    return canonical


# statements -------------------------------------------------------------------------------------
@lru_cache(maxsize=64)
def _current_fact(tables: Tables) -> sql.Composed:
    """The current fact of one canonical key (no lock: a read)."""
    return sql.SQL(
        "SELECT {} FROM {} AS m WHERE m.{} = %(tenant)s AND m.tier = %(tier)s "
        "AND m.typology = %(typology)s AND m.namespace = '{{}}' AND m.key = %(key)s "
        "AND m.superseded_at IS NULL AND m.invalidated_at IS NULL AND m.tombstoned_at IS NULL"
    ).format(q._returning_m(), tables.memories.ident, tables.tenant)


@lru_cache(maxsize=64)
def _facts_with_prefix(tables: Tables) -> sql.Composed:
    """Current facts whose canonical key starts with ``%(prefix)s``, by key."""
    return sql.SQL(
        "SELECT {} FROM {} AS m WHERE m.{} = %(tenant)s AND m.tier = %(tier)s "
        "AND m.typology = %(typology)s AND m.namespace = '{{}}' "
        "AND starts_with(m.key, %(prefix)s) "
        "AND m.superseded_at IS NULL AND m.invalidated_at IS NULL AND m.tombstoned_at IS NULL "
        "ORDER BY m.key LIMIT %(limit)s"
    ).format(q._returning_m(), tables.memories.ident, tables.tenant)


@lru_cache(maxsize=64)
def _event_of_kind(tables: Tables) -> sql.Composed:
    return sql.SQL(
        "SELECT payload FROM {} WHERE {} = %(tenant)s AND event_id = %(id)s AND kind = %(kind)s"
    ).format(tables.events.ident, tables.tenant)


@lru_cache(maxsize=64)
def _intent_used(tables: Tables) -> sql.Composed:
    return sql.SQL(
        "SELECT event_id FROM {} WHERE {} = %(tenant)s AND kind = 'sem_put' "
        "AND payload ->> 'intent' = %(intent)s LIMIT 1"
    ).format(tables.events.ident, tables.tenant)


def _requests(tables: Tables) -> sql.Identifier | sql.Composed:
    if tables.action_requests is None:  # pragma: no cover - callers check governance first
        raise AssertionError("no action requests table")
    return tables.action_requests.ident


@lru_cache(maxsize=64)
def _open_request(tables: Tables) -> sql.Composed:
    """A request of ``%(kind)s`` for ``%(source)s`` that is not rejected (the loop check)."""
    return sql.SQL(
        "SELECT id, status FROM {} WHERE {} = %(tenant)s AND memory_id = %(source)s "
        "AND kind = %(kind)s AND status <> 'rejected' ORDER BY created_at LIMIT 1"
    ).format(_requests(tables), tables.tenant)


@lru_cache(maxsize=64)
def _insert_request(tables: Tables) -> sql.Composed:
    return sql.SQL(
        "INSERT INTO {} ({}, id, kind, memory_id, target_key, payload, justification) "
        "VALUES (%(tenant)s, %(id)s, %(kind)s, %(source)s, %(key)s, %(payload)s, "
        "%(justification)s)"
    ).format(_requests(tables), tables.tenant)


@lru_cache(maxsize=64)
def _request_for_update(tables: Tables) -> sql.Composed:
    return sql.SQL(
        "SELECT id, kind, memory_id, target_key, payload, status FROM {} "
        "WHERE {} = %(tenant)s AND id = %(id)s FOR UPDATE"
    ).format(_requests(tables), tables.tenant)


@lru_cache(maxsize=64)
def _decisions(tables: Tables) -> sql.Composed:
    assert tables.approvals is not None
    return sql.SQL(
        "SELECT approver, decision FROM {} WHERE {} = %(tenant)s AND request_id = %(id)s "
        "ORDER BY at, approver"
    ).format(tables.approvals.ident, tables.tenant)


@lru_cache(maxsize=64)
def _insert_decision(tables: Tables) -> sql.Composed:
    assert tables.approvals is not None
    return sql.SQL(
        "INSERT INTO {} ({}, request_id, approver, decision) "
        "VALUES (%(tenant)s, %(id)s, %(approver)s, %(decision)s)"
    ).format(tables.approvals.ident, tables.tenant)


@lru_cache(maxsize=64)
def _set_status(tables: Tables) -> sql.Composed:
    return sql.SQL(
        "UPDATE {} SET status = %(status)s, decided_at = now() "
        "WHERE {} = %(tenant)s AND id = %(id)s"
    ).format(_requests(tables), tables.tenant)


# helpers ----------------------------------------------------------------------------------------
def _governance(spec: AgentSpec) -> Any:
    """The semantic typology's governance block; refused where SEM is not governed."""
    policy = spec.behavior.write_policy.get(SEM_TYPOLOGY)  # type: ignore[call-overload]
    if policy is None or policy.mode != "governed" or policy.governance is None:
        raise GovernanceError(
            f"semantic memory of agent '{spec.agent}' is not governed "
            "(behavior.write_policy.semantic.mode); write it with observe", agent=spec.agent)
    return policy.governance


def _sem_tier(spec: AgentSpec) -> str:
    for tier in spec.tiers:
        if tier.persistent and SEM_TYPOLOGY in spec.typology.get(tier.name, []):
            return tier.name
    raise GovernanceError(f"no persistent tier of agent '{spec.agent}' holds semantic memory")


def _checked_key(spec: AgentSpec, key: str) -> str:
    canonical = canonical_key(key)
    guard = pii_guard(spec)
    if guard is not None:
        guard.check_labels({"key": canonical})
    return canonical


def _value_sha256(value: Any) -> str:
    return core.content_hash(core.canonical_json(value))


def _uuid(value: UUID | str, what: str) -> UUID:
    try:
        return value if type(value) is UUID else UUID(str(value))
    except ValueError:
        raise PolicyViolation(f"{what} must be an id, not {str(value)[:64]!r}",
                              field=what) from None


def _put(ctx: core.Context, key: str, value: Any, *, via: str, source: str | None,
         consent: UUID | str | None, provenance: Mapping[str, Any]) -> core.Op[Memory]:
    """Write the fact (the governed path's own write): the row holds ``value`` under
    ``{"value": ...}`` and as its content; the PII policy redacts both like any write."""
    content = value if isinstance(value, str) else core.canonical_json(value)
    w = core.checked_write(ctx.spec, _sem_tier(ctx.spec), content, typology=SEM_TYPOLOGY,
                           key=key, namespace=(), value={"value": value}, envelope=None,
                           tags=(), scope_id=None, source=source, approved=True)
    return (yield from core._write(ctx, w, event_time=None, source=source, memory_id=None,
                                   embedding=None, final=False, via=via, consent=consent,
                                   provenance=provenance))


# reads ------------------------------------------------------------------------------------------
def _fact(memory: Memory) -> dict[str, Any]:
    return {"exists": True, "key": memory.key, "value": memory.value.get("value"),
            "meta": {"id": str(memory.id), "created_at": memory.created_at.isoformat(),
                     "updated_at": memory.updated_at.isoformat()}}


def sem_get(ctx: core.Context, key: str) -> core.Op[dict[str, Any]]:
    """``{exists, value, meta}`` of the current fact under exactly ``canonical_key(key)``."""
    row = yield core.Step(_current_fact(ctx.tables), {
        "tenant": ctx.tenant, "tier": _sem_tier(ctx.spec), "typology": SEM_TYPOLOGY,
        "key": canonical_key(key)}, "one")
    if row is None:
        return {"exists": False, "key": canonical_key(key), "value": None, "meta": {}}
    return _fact(Memory.from_row(row))


def sem_search(ctx: core.Context, prefix: str, *,
               limit: int = SEARCH_LIMIT) -> core.Op[list[dict[str, Any]]]:
    """Current facts whose canonical key starts with ``canonical_key(prefix)``, by key (no
    fuzzy match)."""
    if type(limit) is not int or limit < 1:
        raise PolicyViolation(f"limit must be a positive integer, not {limit!r}",
                              field="limit")
    rows = yield core.Step(_facts_with_prefix(ctx.tables), {
        "tenant": ctx.tenant, "tier": _sem_tier(ctx.spec), "typology": SEM_TYPOLOGY,
        "prefix": canonical_key(prefix), "limit": limit}, "all")
    return [_fact(Memory.from_row(r)) for r in rows]


# user intent ------------------------------------------------------------------------------------
def record_intent(ctx: core.Context, key: str, value: Any, *,
                  reason: str | None = None) -> core.Op[UUID]:
    """Journal the user's explicit, confirmed "remember X" (a ``user_intent`` event naming
    the canonical key and the value's hash) and return its id, for :func:`sem_put`."""
    if not _governance(ctx.spec).user_intent_allowed:
        raise GovernanceError(
            f"semantic memory of agent '{ctx.spec.agent}' takes no user-intent writes "
            "(governance.user_intent_allowed: false); file a request instead")
    canonical = _checked_key(ctx.spec, key)
    step = core._event(ctx, INTENT_EVENT, None, {
        **core.reason_payload(reason), "key": canonical, "value_sha256": _value_sha256(value)})
    yield step
    event_id: UUID = step.params["event_id"]
    return event_id


def sem_put(ctx: core.Context, key: str, value: Any, *, intent: UUID | str,
            source: str | None = None, consent: UUID | str | None = None,
            raw: bool = False) -> core.Op[Memory]:
    """Write ``value`` under ``key`` on the user's recorded intent (:func:`record_intent`):
    the event must name this key and value and not have been used. ``raw``: the caller wants
    the value kept unredacted; with personal data in it that needs ``consent`` (a
    ``pii_consent`` event: the row stays redacted, the raw copy goes to the privacy admin's
    table), else PrivacyBlocked and nothing is written."""
    governance = _governance(ctx.spec)
    if not governance.user_intent_allowed:
        raise GovernanceError(
            f"semantic memory of agent '{ctx.spec.agent}' takes no user-intent writes "
            f"(governance.user_intent_allowed: false); file a {governance.request_kind}")
    canonical = _checked_key(ctx.spec, key)
    intent_id = _uuid(intent, "intent")
    payload = yield core.Step(_event_of_kind(ctx.tables), {
        "tenant": ctx.tenant, "id": intent_id, "kind": INTENT_EVENT}, "one")
    if payload is None:
        raise GovernanceError(
            f"no user-intent event {intent_id} in this tenant: record the user's confirmed "
            "request with record_intent and pass its id", intent=str(intent_id))
    recorded = payload[0]
    if recorded.get("key") != canonical or recorded.get("value_sha256") != _value_sha256(value):
        raise GovernanceError(
            f"user-intent event {intent_id} names another key or value than this write; "
            "record the intent for what is written", intent=str(intent_id), key=canonical)
    used = yield core.Step(_intent_used(ctx.tables), {
        "tenant": ctx.tenant, "intent": str(intent_id)}, "one")
    if used is not None:
        raise PromotionLoop(
            f"user-intent event {intent_id} was written already (event {used[0]}); a "
            "repeated write of one intent is refused", source=str(intent_id), key=canonical)
    _refuse_raw_without_consent(ctx.spec, value, raw=raw, consent=consent)
    memory = yield from _put(ctx, canonical, value, via="user_intent", source=source,
                             consent=consent, provenance={"intent": str(intent_id)})
    yield core._event(ctx, "sem_put", memory.id, {
        "key": canonical, "intent": str(intent_id), "value_sha256": _value_sha256(value)})
    return memory


def _refuse_raw_without_consent(spec: AgentSpec, value: Any, *, raw: bool,
                                consent: UUID | str | None) -> None:
    if not raw or consent is not None:
        return
    guard = pii_guard(spec)
    if guard is None:
        return
    text = value if isinstance(value, str) else core.canonical_json(value)
    found = guard.detector.find(text)
    if found:
        kinds = sorted({f.kind for f in found})
        raise PrivacyBlocked(guard.policy.refusal_message, kinds=kinds, field="value",
                             policy=guard.policy_name, agent=spec.agent,
                             user_message=guard.policy.refusal_message)


# requests ---------------------------------------------------------------------------------------
def _governed_rule(spec: AgentSpec, tier: str, typology: str) -> Any:
    for rule in spec.behavior.promotion:
        if rule.criteria == "governed" and rule.from_ == f"{tier}.{typology}":
            return rule
    raise GovernanceError(
        f"no governed promotion of agent '{spec.agent}' starts at {tier}.{typology} "
        "(behavior.promotion with criteria: governed)", tier=tier, typology=typology)


def _redacted_text(ctx: core.Context, text: str, source: UUID,
                   field: str) -> core.Op[tuple[str, dict[str, Any]]]:
    """``text`` as a request may store it: redacted where the PII policy finds personal
    data (a ``pii_redacted`` event names the source, the kinds and the hashes kept)."""
    guard = pii_guard(ctx.spec)
    if guard is None:
        return text, {}
    scan = guard.scan(text, {}, {})
    if scan is None:
        return text, {}
    yield core._event(ctx, core.PII_REDACTED_EVENT, source, {
        "policy": guard.policy_name, "kinds": scan.kinds, "fields": [field],
        "action": "redacted", "consent_event": None, "hashes_kept": guard.policy.store_hash})
    return scan.content, scan.provenance()


def request_promotion(ctx: core.Context, source: UUID | str, target_key: str, *,
                      justification: str, value: Any = None,
                      evidence: Sequence[Mapping[str, Any]] = ()) -> core.Op[ActionRequest]:
    """Append a ``request_kind`` request to promote ``source`` (a row the spec's governed
    promotion rule starts at) to the fact ``target_key``; nothing is written to SEM until
    :func:`approve`. ``value``: the fact (default: the source's content); personal data in
    it or in the justification is redacted before the request stores it. A second request
    for a source that has one open or executed is refused with PromotionLoop."""
    governance = _governance(ctx.spec)
    canonical = _checked_key(ctx.spec, target_key)
    source_id = _uuid(source, "source")
    if not isinstance(justification, str) or not justification.strip():
        raise PolicyViolation("a promotion request needs a justification", field="justification")
    # the source locked: requests for one source take turns, so two concurrent ones cannot
    # both pass the loop check
    memory = Memory.from_row_or_none((yield core.Step(q.select_memory_for_update(ctx.tables), {
        "tenant": ctx.tenant, "id": source_id}, "one")))
    if memory is None or memory.tombstoned_at is not None:
        raise PolicyViolation(f"no memory {source_id} to promote in this tenant",
                              source=str(source_id))
    _governed_rule(ctx.spec, memory.tier, memory.typology)
    open_request = yield core.Step(_open_request(ctx.tables), {
        "tenant": ctx.tenant, "source": source_id, "kind": governance.request_kind}, "one")
    if open_request is not None:
        raise PromotionLoop(
            f"memory {source_id} has a {governance.request_kind} already "
            f"({open_request[0]}, {open_request[1]}); promotions are idempotent per source",
            source=str(source_id), request_id=str(open_request[0]), status=open_request[1])
    fact = memory.content if value is None else value
    text = fact if isinstance(fact, str) else core.canonical_json(fact)
    stored, pii = yield from _redacted_text(ctx, text, source_id, "value")
    if pii:
        fact = stored
    reason, reason_pii = yield from _redacted_text(ctx, justification, source_id,
                                                   "justification")
    request_id = new_uuid()
    found = {f: scan["pii"] for f, scan in (("value", pii), ("justification", reason_pii))
             if scan}
    payload = {"value": fact, "evidence": [dict(e) for e in evidence], "pii": found or None}
    yield core.Step(_insert_request(ctx.tables), {
        "tenant": ctx.tenant, "id": request_id, "kind": governance.request_kind,
        "source": source_id, "key": canonical, "payload": Jsonb(payload),
        "justification": reason})
    yield core._event(ctx, "action_request", source_id, {
        "request_id": str(request_id), "kind": governance.request_kind, "target_key": canonical,
        "value_sha256": _value_sha256(fact), "justification_sha256": core.content_hash(reason),
        "evidence_sha256": _value_sha256(payload["evidence"])})
    return ActionRequest(request_id, governance.request_kind, "pending", canonical, source_id)


def request_deletion(ctx: core.Context, key: str, *,
                     justification: str) -> core.Op[ActionRequest]:
    """Append a request to delete the fact under ``key``; every approver the retention
    policy's ``deletion_requires`` names must approve it (:func:`approve`)."""
    _governance(ctx.spec)
    if not core._deletion_requires(ctx.spec):
        raise GovernanceError(f"agent '{ctx.spec.agent}' names no deletion approvers "
                              "(retention deletion_requires)")
    canonical = _checked_key(ctx.spec, key)
    if not isinstance(justification, str) or not justification.strip():
        raise PolicyViolation("a deletion request needs a justification", field="justification")
    row = yield core.Step(_current_fact(ctx.tables), {
        "tenant": ctx.tenant, "tier": _sem_tier(ctx.spec), "typology": SEM_TYPOLOGY,
        "key": canonical}, "one")
    if row is None:
        raise PolicyViolation(f"no fact under '{canonical}' to delete", key=canonical)
    memory = Memory.from_row(row)
    yield core.Step(q.select_memory_for_update(ctx.tables), {"tenant": ctx.tenant,
                                                             "id": memory.id}, "one")
    open_request = yield core.Step(_open_request(ctx.tables), {
        "tenant": ctx.tenant, "source": memory.id, "kind": DELETE_REQUEST_KIND}, "one")
    if open_request is not None:
        raise GovernanceError(
            f"the fact under '{canonical}' has a deletion request already ({open_request[0]}, "
            f"{open_request[1]})", request_id=str(open_request[0]), key=canonical)
    reason, pii = yield from _redacted_text(ctx, justification, memory.id, "justification")
    request_id = new_uuid()
    yield core.Step(_insert_request(ctx.tables), {
        "tenant": ctx.tenant, "id": request_id, "kind": DELETE_REQUEST_KIND,
        "source": memory.id, "key": canonical, "payload": Jsonb({"pii": {"justification": pii["pii"]} if pii else None}),
        "justification": reason})
    yield core._event(ctx, "action_request", memory.id, {
        "request_id": str(request_id), "kind": DELETE_REQUEST_KIND, "target_key": canonical,
        "justification_sha256": core.content_hash(reason)})
    return ActionRequest(request_id, DELETE_REQUEST_KIND, "pending", canonical, memory.id)


def approve(ctx: core.Context, request_id: UUID | str, *, approver: str,
            decision: str = "approve", reason: str | None = None) -> core.Op[ActionRequest]:
    """Record ``approver``'s decision on a pending request (append-only, journalled as an
    ``approval`` event). A rejection closes it. Once enough approvers agreed (a promotion:
    ``approvals_required`` of ``approvers``; a deletion: every one of ``deletion_requires``)
    the request executes in the same transaction: the ``sem_put`` or the tombstone and its
    ``deletion_event``."""
    governance = _governance(ctx.spec)
    rid = _uuid(request_id, "request_id")
    if decision not in ("approve", "reject"):
        raise PolicyViolation(f"decision is 'approve' or 'reject', not {decision!r}",
                              field="decision")
    row = yield core.Step(_request_for_update(ctx.tables), {"tenant": ctx.tenant, "id": rid},
                          "one")
    if row is None:
        raise GovernanceError(f"no action request {rid} in this tenant", request_id=str(rid))
    _, kind, source, target_key, payload, status = row
    deletion = kind == DELETE_REQUEST_KIND
    allowed = core._deletion_requires(ctx.spec) if deletion else list(governance.approvers)
    if approver not in allowed:
        raise GovernanceError(
            f"'{approver}' may not decide a {kind}; its approvers are {', '.join(allowed)}",
            request_id=str(rid), approver=approver)
    if status != "pending":
        raise GovernanceError(f"action request {rid} is {status} already; nothing to decide",
                              request_id=str(rid), status=status)
    decided = yield core.Step(_decisions(ctx.tables), {"tenant": ctx.tenant, "id": rid}, "all")
    if any(a == approver for a, _ in decided):
        raise GovernanceError(f"'{approver}' decided action request {rid} already",
                              request_id=str(rid), approver=approver)
    yield core.Step(_insert_decision(ctx.tables), {
        "tenant": ctx.tenant, "id": rid, "approver": approver, "decision": decision})
    yield core._event(ctx, "approval", source, {
        **core.reason_payload(reason), "request_id": str(rid), "kind": kind,
        "approver": approver, "decision": decision})
    approvals = tuple(a for a, d in [*decided, (approver, decision)] if d == "approve")
    if decision == "reject":
        return (yield from _close(ctx, rid, kind, target_key, source, "rejected", approvals))
    complete = (set(allowed) <= set(approvals) if deletion
                else len(approvals) >= governance.approvals_required)
    if not complete:
        return ActionRequest(rid, kind, "pending", target_key, source, approvals)
    if deletion:
        memory = yield from core.change_state(ctx, "tombstone", source, reason=None,
                                              cause="deletion_approved", approved=True)
        yield core._event(ctx, "deletion_event", source, {
            "request_id": str(rid), "key": target_key, "approvals": list(approvals)})
    else:
        memory = yield from _put(ctx, target_key, payload["value"], via="approval",
                                 source=None, consent=None,
                                 provenance={"request_id": str(rid),
                                             "derived_from": [str(source)]})
        yield core._event(ctx, "sem_put", memory.id, {
            "key": target_key, "request_id": str(rid), "source": str(source),
            "value_sha256": _value_sha256(payload["value"])})
    return (yield from _close(ctx, rid, kind, target_key, source, "executed", approvals,
                              memory))


def _close(ctx: core.Context, rid: UUID, kind: str, key: str | None, source: UUID | None,
           status: str, approvals: tuple[str, ...],
           memory: Memory | None = None) -> core.Op[ActionRequest]:
    yield core.Step(_set_status(ctx.tables), {"tenant": ctx.tenant, "id": rid,
                                              "status": status})
    yield core._event(ctx, f"request_{status}", source, {"request_id": str(rid), "kind": kind})
    return ActionRequest(rid, kind, status, key, source, approvals, memory)
