"""Crossing a sanitization gate, and claiming what an event-driven agent published.

:func:`cross` carries a tenant's rows of a gate's ``from`` tier and typology across the gate
in one set-based statement (:func:`primitives.compile._gates.cross_statement`): each row is
stripped, hedged or counted as the gate says, gets one ``sanitized`` journal event (visible
in ``<prefix>_audit_sanitization``) and comes back as a :class:`Crossing` saying whether it
crossed or stayed behind and why. PII kinds a gate's policy names (``strip_pii``) are found
in Python first, by a :class:`PiiFinder` (a :class:`FindPii` step, so the executors run it
like any model work), and replaced before the statement runs.

:func:`claim_outbox` hands a consumer the tenant's undelivered outbox entries
(:mod:`primitives.compile._outbox`), marking them delivered in the same statement.

Example::

    with engine.tenant({"world_id": "w-1"}) as mem:
        for crossing in mem.cross("hedge_semantic_for_operators", ids):
            print(crossing.outcome, crossing.content)
        entries = mem.claim_outbox(consumer="worlds")
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol
from uuid import UUID

from psycopg.types.json import Jsonb

from primitives.compile._gates import (
    Gate,
    candidates_statement,
    cross_statement,
    resolve_gate,
)
from primitives.compile._outbox import claim_statement, retry_statement
from primitives.discipline._pii import pii_detector
from primitives.engine._core import Compute, Context, Op, Step
from primitives.errors import PolicyViolation, SpecError

__all__ = [
    "Crossing",
    "FindPii",
    "OutboxEntry",
    "PiiFinder",
    "claim_outbox",
    "cross",
    "pii_finder",
]

Outcome = Literal["crossed", "kept_specific", "below_min_sources"]

DEFAULT_CROSS_LIMIT = 100
"""Rows one :func:`cross` carries at most, unless the caller says otherwise."""


class PiiSpan(Protocol):
    """One finding: its kind and where it is in the text."""

    @property
    def kind(self) -> str: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...


class PiiFinder(Protocol):
    """What the PII step needs of a detector: the spans of PII in a text."""

    def find(self, text: str) -> Sequence[PiiSpan]: ...


def pii_finder(kinds: tuple[str, ...]) -> PiiFinder:
    """The project's PII detector for ``kinds`` (:func:`primitives.discipline.pii_detector`)."""
    try:
        return pii_detector(tuple(kinds))
    except ValueError as err:
        raise SpecError(f"sanitization policy: {err}", field="strip_pii") from err


@dataclass(frozen=True)
class FindPii(Compute):
    """Replace the PII in ``texts`` by ``replacement``: sent back, per text, the redacted
    text and the kinds found with their counts."""

    finder: PiiFinder
    texts: tuple[str, ...]
    replacement: str

    def compute(self) -> list[tuple[str, dict[str, int]]]:
        out: list[tuple[str, dict[str, int]]] = []
        for text in self.texts:
            spans = sorted(self.finder.find(text), key=lambda f: f.start)
            parts: list[str] = []
            at = 0
            kinds: Counter[str] = Counter()
            for span in spans:
                if span.start < at:
                    continue  # overlapping spans: the first one wins
                parts += [text[at:span.start], self.replacement]
                at = span.end
                kinds[span.kind] += 1
            parts.append(text[at:])
            out.append(("".join(parts), dict(kinds)))
        return out


@dataclass(frozen=True)
class Crossing:
    """One row at a gate. ``content`` (hedged under hedge_map), ``envelope`` and ``value``
    are what crossed; a row that stayed behind (``kept_specific``, ``below_min_sources``)
    has ``content`` None. ``stripped``: key names and counts removed, never values."""

    memory_id: UUID
    gate: str
    to: str
    outcome: Outcome
    content: str | None
    envelope: dict[str, Any]
    value: dict[str, Any]
    provenance_tier: str
    sources: int
    stripped: dict[str, Any]
    event_id: UUID
    key: str
    event_time: datetime

    @property
    def crossed(self) -> bool:
        return self.outcome == "crossed"


def _ids(memory_ids: Sequence[UUID | str] | None) -> list[UUID] | None:
    if memory_ids is None:
        return None
    try:
        return [m if isinstance(m, UUID) else UUID(str(m)) for m in memory_ids]
    except ValueError as err:
        raise PolicyViolation(f"memory_ids: {err}", field="memory_ids") from None


def cross(ctx: Context, gate_name: str, memory_ids: Sequence[UUID | str] | None = None, *,
          limit: int = DEFAULT_CROSS_LIMIT, via: str = "cross",
          finder: Callable[[tuple[str, ...]], PiiFinder] = pii_finder) -> Op[list[Crossing]]:
    """Carry ``memory_ids`` (active rows of the gate's ``from``; others are ignored), or
    the tenant's first ``limit`` such rows, across the gate ``gate_name``; one
    ``sanitized`` event per row, ``via`` recorded in it. Returns a :class:`Crossing` per
    row, in the order of ``memory_ids``."""
    gate = resolve_gate(ctx.spec, gate_name)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise PolicyViolation(f"limit must be a positive integer, not {limit!r}",
                              field="limit")
    ids = _ids(memory_ids)
    params: dict[str, Any] = {"tenant": ctx.tenant, "ids": ids, "limit": limit,
                              "actor": ctx.actor, "via": via, "pii_ids": [],
                              "pii_contents": [], "pii_found": []}
    if gate.pii_kinds and gate.transform != "none":
        rows = yield Step(candidates_statement(ctx.tables, gate), params, "all")
        if rows:
            redacted = yield FindPii(finder(gate.pii_kinds), tuple(r[1] for r in rows),
                                     gate.replacement)
            changed = [(r[0], text, found) for r, (text, found) in zip(rows, redacted,
                                                                       strict=True) if found]
            params.update(pii_ids=[c[0] for c in changed],
                          pii_contents=[c[1] for c in changed],
                          pii_found=[Jsonb(c[2]) for c in changed])
    rows = yield Step(cross_statement(ctx.tables, gate), params, "all")
    return [_crossing(gate, row) for row in rows]


def _crossing(gate: Gate, row: tuple[Any, ...]) -> Crossing:
    (memory_id, outcome, content, envelope, value, tier, sources, stripped, event_id, key,
     event_time) = row
    crossed = outcome == "crossed"
    return Crossing(memory_id=memory_id, gate=gate.name, to=gate.to, outcome=outcome,
                    content=content if crossed else None,
                    envelope=envelope if crossed else {}, value=value if crossed else {},
                    provenance_tier=tier, sources=int(sources), stripped=stripped,
                    event_id=event_id, key=key, event_time=event_time)


@dataclass(frozen=True)
class OutboxEntry:
    """One published crossing handed to a consumer: the event, the gate it crossed, the
    source memory's id and the sanitized payload (content, envelope, value, tier,
    typology, key, event_time, provenance_tier)."""

    id: UUID
    event: str
    gate: str
    to: str
    memory_id: UUID
    payload: dict[str, Any]
    created_at: datetime


def claim_outbox(ctx: Context, *, consumer: str, event: str | None = None,
                 limit: int = DEFAULT_CROSS_LIMIT) -> Op[list[OutboxEntry]]:
    """Claim up to ``limit`` of the tenant's undelivered outbox entries (of ``event``, or
    any), oldest first, skipping entries another transaction holds; they are marked
    delivered to ``consumer`` in the same statement (and the claim journalled), so a
    second claim never hands them out again. Claim inside the transaction that processes
    them: if it rolls back, so does the claim."""
    if ctx.tables.outbox is None:
        raise SpecError(f"agent '{ctx.spec.agent}' publishes nothing: it has no outbox "
                        "(discipline.visibility.cross_context: event_driven with events and a "
                        "sanitization gate)", file=ctx.spec.source,
                        field="discipline.visibility.cross_context")
    if not isinstance(consumer, str) or not consumer.strip():
        raise PolicyViolation("consumer must name who claims the entries", field="consumer")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise PolicyViolation(f"limit must be a positive integer, not {limit!r}",
                              field="limit")
    rows = yield Step(claim_statement(ctx.tables), {
        "tenant": ctx.tenant, "event": event, "limit": limit, "consumer": consumer,
        "actor": ctx.actor}, "all")
    return [OutboxEntry(id=r[0], event=r[1], gate=r[2], to=r[3], memory_id=r[4],
                        payload=r[5], created_at=r[6]) for r in rows]


def retry_outbox(ctx: Context, ids: Sequence[UUID | str]) -> Op[list[UUID]]:
    """Hand the tenant's delivered outbox entries ``ids`` back to the queue, so the next
    :func:`claim_outbox` hands them out again (a consumer that lost what it claimed). The
    retry is journalled (``outbox_retried``: the entries and the consumers they had gone to).
    Returns the ids retried; an entry still waiting, unknown, or of another tenant is not."""
    if ctx.tables.outbox is None:
        raise SpecError(f"agent '{ctx.spec.agent}' publishes nothing: it has no outbox "
                        "(discipline.visibility.cross_context: event_driven with events and a "
                        "sanitization gate)", file=ctx.spec.source,
                        field="discipline.visibility.cross_context")
    try:
        wanted = [UUID(str(i)) for i in ids]
    except ValueError as err:
        raise PolicyViolation(f"outbox entry ids must be UUIDs: {err}", field="ids") from err
    if not wanted:
        return []
    rows = yield Step(retry_statement(ctx.tables), {
        "tenant": ctx.tenant, "ids": wanted, "actor": ctx.actor}, "all")
    return [r[0] for r in rows]
