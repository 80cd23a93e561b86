"""The embedding worker's engine side: one tenant's waiting rows embedded in batches.

Rows a deferred write left without a vector (``retrieval.embedding.embed: deferred``,
:mod:`primitives.lifecycle._embed`) are embedded by :func:`embed_pending`, a core operation
both executors run (``mem.embed_pending()``); the engines' ``embed_pending()`` runs it one
batch per transaction for the tenants their own deferred writes named
(:class:`PendingTenants`), and the sync engine can run that on a background thread
(:class:`EmbedWorker`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from primitives.engine._anchor import Anchor
from primitives.engine._core import Context, Embed, Op, Step, check_model
from primitives.errors import EmbedderUnavailable, PolicyViolation
from primitives.lifecycle._embed import (
    DEFAULT_BATCH,
    EmbedBatch,
    embedded_events_citus,
    pending_rows_statement,
    pending_rows_statement_citus,
    store_vectors_statement,
    store_vectors_statement_citus,
)

__all__ = ["DEFAULT_BATCH", "EmbedWorker", "PendingTenants", "embed_pending"]


def embed_pending(ctx: Context, *, batch_size: int = DEFAULT_BATCH,
                  limit: int | None = None) -> Op[int]:
    """Embed this tenant's rows that wait for a vector, oldest first, ``batch_size`` per
    model call; at most ``limit`` rows (None: until none waits). Each batch is one
    statement that stores the vectors and journals an ``embedded`` event per row. Rows
    another worker holds are skipped. Returns the rows embedded.

    Refused with ``ModelMismatch`` when the tenant's stored vectors are another model's,
    and with ``EmbedderUnavailable`` on an engine without an embedder or pgvector."""
    if ctx.embedder is None or not ctx.has_embedding:
        raise EmbedderUnavailable(
            f"embedding waiting rows of agent '{ctx.spec.agent}' needs an engine connected "
            "with an embedder (Engine.connect(..., embedder=default_embedder(spec))) on a "
            "server with pgvector", tenant=ctx.tenant)
    if type(batch_size) is not int or batch_size < 1:
        raise PolicyViolation(f"batch_size must be a positive integer, got {batch_size!r}",
                              field="batch_size")
    if limit is not None and (type(limit) is not int or limit < 0):
        raise PolicyViolation(f"limit must be a non-negative integer or None, got {limit!r}",
                              field="limit")
    yield from check_model(ctx)
    model = ctx.embedder.model_id
    total = 0
    while limit is None or total < limit:
        wanted = batch_size if limit is None else min(batch_size, limit - total)
        if ctx.citus:
            rows = yield Step(pending_rows_statement_citus(ctx.tables), {
                "tenant": ctx.tenant, "model": model, "limit": wanted}, "all")
        else:
            rows = yield Step(pending_rows_statement(ctx.tables), {
                "tenants": [ctx.tenant], "model": model, "limit": wanted}, "all")
        if not rows:
            break
        work = EmbedBatch(ctx.spec, rows)
        vectors = yield Embed(ctx.embedder, work.texts)
        if ctx.citus:
            total += yield from _store_on_cluster(ctx, work.params(vectors, model, ctx.actor))
        else:
            stored = yield Step(store_vectors_statement(ctx.tables),
                                work.params(vectors, model, ctx.actor), "one")
            total += int(stored[0]) if stored else 0
        if len(rows) < wanted:
            break
    return total


def _store_on_cluster(ctx: Context, params: dict[str, Any]) -> Op[int]:
    """A batch's vectors stored on a Citus coordinator: the rows updated, then one
    ``embedded`` event per row stored, with ``VALUES`` (both routed to the tenant's shard);
    the rows stored."""
    stored = yield Step(store_vectors_statement_citus(ctx.tables), {
        "tenant": ctx.tenant, "model": params["model"], "ids": params["ids"],
        "vectors": params["vectors"]}, "all")
    if not stored:
        return 0
    yield Step(*embedded_events_citus(ctx.tables, ctx.tenant, [i for (i,) in stored],
                                      params["model"], ctx.actor))
    return len(stored)


class PendingTenants:
    """The tenants this engine's deferred writes left rows for, until a worker takes them.
    Thread-safe; one entry per tenant however many rows it wrote."""

    def __init__(self) -> None:
        self._anchors: dict[str, Anchor] = {}
        self._lock = threading.Lock()
        self.changed = threading.Condition(self._lock)

    def note(self, anchor: Anchor) -> None:
        with self._lock:
            self._anchors.setdefault(anchor.tenant, anchor)
            self.changed.notify_all()

    def take(self) -> list[Anchor]:
        """Every noted tenant, forgotten here (a worker now has them)."""
        with self._lock:
            anchors = list(self._anchors.values())
            self._anchors.clear()
            return anchors

    def __len__(self) -> int:
        with self._lock:
            return len(self._anchors)


class EmbedWorker:
    """A daemon thread that runs ``drain()`` (the engine's ``embed_pending()``) whenever a
    deferred write notes a tenant in ``pending``, until :meth:`stop`. A failed round keeps
    its error in ``errors`` (the rows stay waiting, for the next round or ``maintain``)."""

    def __init__(self, pending: PendingTenants, drain: Callable[[], int]) -> None:
        self.pending = pending
        self.drain = drain
        self.errors: list[BaseException] = []
        self.embedded = 0
        self._busy = False
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="primitives-embed",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        changed = self.pending.changed
        while True:
            with changed:
                while not len(self.pending._anchors) and not self._stopping:
                    changed.wait()
                if not self.pending._anchors and self._stopping:
                    return
                self._busy = True
            try:
                self.embedded += self.drain()
            except Exception as err:  # kept for the caller; the rows stay waiting
                self.errors.append(err)
                del self.errors[:-16]
            finally:
                with changed:
                    self._busy = False
                    changed.notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until no noted tenant waits and no round runs; False on timeout."""
        with self.pending.changed:
            return self.pending.changed.wait_for(
                lambda: not self.pending._anchors and not self._busy, timeout)

    def stop(self, timeout: float | None = None) -> None:
        """Finish what was noted, then end the thread."""
        with self.pending.changed:
            self._stopping = True
            self.pending.changed.notify_all()
        self._thread.join(timeout)
