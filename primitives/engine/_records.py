"""What the engine returns: memories as rows, search hits with their signal ranks."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from uuid import UUID

__all__ = ["MEMORY_COLUMNS", "READ_BACK_COLUMNS", "Edge", "Entity", "Explanation", "Hit",
           "Memory", "SearchResult"]

T = TypeVar("T")

MEMORY_COLUMNS = (
    "id", "tier", "typology", "scope_id", "namespace", "key", "content", "value", "envelope",
    "tags", "confidence", "event_time", "created_at", "updated_at", "superseded_at",
    "invalidated_at", "archived_at", "tombstoned_at", "persistent",
)
"""Columns read back into :class:`Memory`, in this order."""

READ_BACK_COLUMNS = (
    "value", "envelope", "confidence", "event_time", "created_at", "updated_at",
    "superseded_at", "invalidated_at", "archived_at", "tombstoned_at", "persistent",
)
"""The columns the write path reads back from a row it has just inserted: those the database
decides (defaults, the generated ``persistent``, the state columns), those it normalizes (the
``jsonb`` value and envelope: key order, numbers such as ``1.5e300`` kept as exact decimals;
the event time as a ``timestamptz`` in the session's time zone). Every other column (id, tier,
typology, scope, namespace, key, content, tags) is stored exactly as sent, so the write path
takes it from what it sent (:meth:`Memory.from_written`)."""


@dataclass(frozen=True)
class Memory:
    id: UUID
    tier: str
    typology: str
    scope_id: str | None
    namespace: tuple[str, ...]
    key: str
    content: str
    value: dict[str, Any]
    envelope: dict[str, Any]
    tags: tuple[str, ...]
    confidence: float
    event_time: datetime
    created_at: datetime
    updated_at: datetime
    superseded_at: datetime | None
    invalidated_at: datetime | None
    archived_at: datetime | None
    tombstoned_at: datetime | None
    persistent: bool
    sampled_out: bool = False
    """The write policy's ``sampling`` left this observation unwritten: no row holds it,
    only its ``sampled_out`` journal event (:func:`~primitives.engine._core.observe`)."""

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> Memory:
        return cls._of(dict(zip(MEMORY_COLUMNS, row, strict=False)))

    @classmethod
    def from_written(cls, written: dict[str, Any], row: tuple[Any, ...]) -> Memory:
        """The memory an insert just wrote: ``written`` holds the values it sent for the
        columns outside :data:`READ_BACK_COLUMNS` (``id``, ``tier``, ``content``, ``tags``
        ...), ``row`` the columns it read back, in that order. The same memory as
        :meth:`from_row` of a fresh read, without loading the text the caller already has."""
        values = dict(zip(READ_BACK_COLUMNS, row, strict=True))
        values.update(written)
        return cls._of(values)

    @classmethod
    def _of(cls, values: dict[str, Any]) -> Memory:
        """A memory from its column values (the array columns become tuples)."""
        values["namespace"] = tuple(values["namespace"] or ())
        values["tags"] = tuple(values["tags"] or ())
        return cls(**values)

    @classmethod
    def from_row_or_none(cls, row: tuple[Any, ...] | None) -> Memory | None:
        return cls.from_row(row) if row is not None else None

    @property
    def state(self) -> str:
        """The most final state of the row: tombstoned, archived, invalidated, superseded,
        or active."""
        for name in ("tombstoned", "archived", "invalidated", "superseded"):
            if getattr(self, f"{name}_at") is not None:
                return name
        return "active"

    @property
    def active(self) -> bool:
        return not (self.superseded_at or self.invalidated_at or self.archived_at
                    or self.tombstoned_at)


@dataclass(frozen=True)
class Entity:
    """A canonical entity of the graph (``graph:`` specs): a person, project, place..."""

    id: UUID
    canonical_name: str
    type: str
    aliases: tuple[str, ...]
    summary: str | None
    mention_count: int
    first_seen: datetime
    last_updated: datetime

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Entity:
        values = list(row[:8])
        values[3] = tuple(values[3] or ())
        return cls(*values)


@dataclass(frozen=True)
class Edge:
    """A typed edge between two memories; ``valid_until`` is set once it has ended."""

    id: UUID
    source_id: UUID
    target_id: UUID
    relation_type: str
    predicate: str | None
    weight: float
    confidence: float
    valid_from: datetime
    valid_until: datetime | None
    evidence: list[Any]
    created_at: datetime

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Edge:
        return cls(*row[:11])


@dataclass(frozen=True)
class Hit:
    """One search result: the memory, its score, and per signal its rank (1-based) and
    score (the value the signal ranked by: cosine similarity for ``semantic``,
    ``ts_rank_cd`` for ``lexical``, the decay weight of the spec's decay model for
    ``recency`` (event time in epoch seconds when no typology decays), 1.0 for an
    ``envelope`` match).

    ``score`` is the fused score times the tier weight times ``confidence``, the memory's
    effective confidence now (its base confidence ``memory.confidence`` under its
    typology's decay model, :mod:`primitives.lifecycle._decay`)."""

    memory: Memory
    score: float
    ranks: dict[str, int] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    confidence: float = 1.0


class SearchResult(list[T], Generic[T]):
    """What a search returns: its results, in order, as a list, and whether it abstained.

    With ``retrieval.abstain`` in the spec, results below ``min_fused_score`` are dropped;
    when none remain for a query, ``abstained`` is True and ``message`` is the spec's
    answer ("I don't know"), so the caller can tell "nothing matched well enough" from an
    empty memory. Otherwise ``abstained`` is False and ``message`` None.

    ``pending_embeddings``: with ``retrieval.embedding.embed: deferred``, how many of the
    tenant's active rows in the searched tiers were still waiting for their vector when the
    semantic signal ran (the other signals found them; semantic could not rank them yet).
    None when the spec embeds inline or the search ran no semantic signal.

    >>> SearchResult([], abstained=True, message="I don't know.").abstained
    True
    """

    abstained: bool
    message: str | None
    pending_embeddings: int | None

    def __init__(self, items: Any = (), *, abstained: bool = False,
                 message: str | None = None, pending_embeddings: int | None = None) -> None:
        super().__init__(items)
        self.abstained = abstained
        self.message = message
        self.pending_embeddings = pending_embeddings

    def __repr__(self) -> str:
        if self.abstained:
            return f"SearchResult([], abstained=True, message={self.message!r})"
        return f"SearchResult({list.__repr__(self)})"


@dataclass(frozen=True)
class Explanation:
    """What ``search(..., explain=True)`` returns: the hits, and how the query ran.

    ``signal_rows`` says how many rows each signal returned (before fusion and the limit);
    ``semantic_mode`` is ``exact`` (a scan of the tenant's rows), ``hnsw`` (the index with
    iterative scans), ``hnsw+exact`` (the index came back short; an exact scan completed
    it) or None without the semantic signal. ``intent`` is the query's intent when the
    spec routes by intent (``retrieval.intents``); ``edge_types`` the edges the graph
    signal followed. ``hits`` is a :class:`SearchResult`; each hit's ``confidence`` is the
    effective confidence its fused score was multiplied by.
    """

    hits: SearchResult[Hit]
    signals: tuple[str, ...]
    signal_rows: dict[str, int]
    semantic_mode: str | None
    k: int
    weights: dict[str, float]
    dropped: tuple[str, ...] = ()
    intent: str | None = None
    edge_types: tuple[str, ...] = ()
    reranked: int = 0
    """How many of the top fused hits a reranker reordered (0: no reranker ran)."""
    abstained: bool = False
    """The query had no hit at or above ``retrieval.abstain.min_fused_score``."""
    message: str | None = None
    """The spec's abstain message when it abstained."""
    complexity: str | None = None
    """The query's complexity (``simple``/``complex``, seed 002 §11.5) where the spec routes
    by intent; it set the limit (when the caller gave none) and the graph depth."""
    direction: str | None = None
    """Which way the graph walked temporal edges for a ``when`` query (``forward``,
    ``backward`` or ``both``); None for other intents."""
    window: tuple[datetime | None, datetime | None] | None = None
    """The event-time window ``(since, until)`` the graph signal kept to: the caller's, or
    for a ``when`` query the one its words name (:func:`primitives.retrieval.time_window`);
    None when there was none."""

    def __post_init__(self) -> None:
        if not isinstance(self.hits, SearchResult):  # a plain list of hits
            object.__setattr__(self, "hits", SearchResult(
                self.hits, abstained=self.abstained, message=self.message))

    def __iter__(self) -> Iterator[Hit]:
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)
