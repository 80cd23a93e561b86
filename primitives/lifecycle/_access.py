"""Access tracking: retrieval marks what it returned, batched off the read path.

A search adds the ids it returned to an in-process buffer; the buffer is written when it
holds ``max_ids`` ids or its oldest mark is ``max_age`` seconds old (checked on each read),
and when the engine closes: one UPDATE per tenant (``access_count`` += the reads since the
last flush, ``last_accessed_at`` = the latest), in a tenant transaction of its own, so the
read that trips the flush pays for it once and no read waits on a write lock otherwise.

Access marks are not memory changes: no journal event is written for them. A process that
dies before a flush loses the marks it held (at most ``max_ids`` ids, ``max_age`` seconds);
the retention states they feed are a heuristic about use, not an audit fact.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from uuid import UUID

from psycopg import sql

from primitives.compile import Tables

__all__ = ["AccessLog", "flush_statement", "read_ids"]

Batch = tuple[str, list[UUID], list[int], list[datetime]]
"""One tenant's marks: (tenant, ids, reads, last read time)."""


def flush_statement(tables: Tables) -> sql.Composed:
    """Add ``%(counts)s`` reads to the rows ``%(ids)s`` of ``%(tenant)s`` and move their
    ``last_accessed_at`` to ``%(ats)s`` where that is later. Rows gone since are skipped."""
    return sql.SQL(
        "UPDATE {mem} AS m SET access_count = m.access_count + a.n, "
        "last_accessed_at = greatest(m.last_accessed_at, a.at) "
        "FROM unnest(%(ids)s::uuid[], %(counts)s::int[], %(ats)s::timestamptz[]) "
        "AS a(id, n, at) WHERE m.{t} = %(tenant)s AND m.id = a.id"
    ).format(mem=tables.memories.ident, t=tables.tenant)


def read_ids(result: object) -> list[UUID]:
    """The memory ids a read returned: search hits, an explanation's hits, a context pack's
    memories (entities are not memories), the LangGraph store's search items."""
    from primitives.engine._records import Explanation, Hit, Memory
    from primitives.engine._store_ops import StoredItem
    from primitives.retrieval._context import ContextPack
    if isinstance(result, Explanation):
        result = result.hits
    if isinstance(result, ContextPack):
        return [item.id for block in result.blocks for item in block.items
                if isinstance(item, Memory)]
    if isinstance(result, list):
        return [hit.memory.id for hit in result if isinstance(hit, Hit | StoredItem)]
    return []


class AccessLog:
    """Thread-safe buffer of read marks per tenant."""

    def __init__(self, *, max_ids: int = 512, max_age: float = 2.0) -> None:
        self.max_ids = max_ids
        self.max_age = max_age
        self._lock = threading.Lock()
        self._marks: dict[str, dict[UUID, tuple[int, datetime]]] = {}
        self._size = 0
        self._oldest: float | None = None

    def record(self, tenant: str, ids: Iterable[UUID]) -> bool:
        """Mark ``ids`` read now; True when the buffer is due for a flush."""
        now = datetime.now(UTC)
        with self._lock:
            marks = self._marks.setdefault(tenant, {})
            for memory_id in ids:
                count, _ = marks.get(memory_id, (0, now))
                if count == 0:
                    self._size += 1
                marks[memory_id] = (count + 1, now)
            if self._oldest is None and self._size:
                self._oldest = time.monotonic()
            return self._due()

    def _due(self) -> bool:
        return self._size >= self.max_ids or (
            self._oldest is not None and time.monotonic() - self._oldest >= self.max_age)

    def due(self) -> bool:
        with self._lock:
            return self._due()

    def take(self) -> list[Batch]:
        """Empty the buffer; its marks, one batch per tenant."""
        with self._lock:
            marks, self._marks = self._marks, {}
            self._size, self._oldest = 0, None
        return [(tenant, list(rows), [n for n, _ in rows.values()],
                 [at for _, at in rows.values()]) for tenant, rows in marks.items() if rows]

    def __len__(self) -> int:
        with self._lock:
            return self._size
