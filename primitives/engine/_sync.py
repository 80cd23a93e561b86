"""The synchronous executor: runs the core's operations on a pooled connection.

Example::

    with Engine.connect(load_spec("agents/spectral_agent.yaml")) as engine:
        with engine.tenant({"workspace_id": "ws-acme"}) as mem:
            mem.observe("cycle", "lowering temperature removed fabrication", scope_id="c-1")
            hits = mem.search("temperature fabrication")
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Literal, TypeVar, overload
from uuid import UUID

import psycopg
from psycopg_pool import ConnectionPool

from primitives.db import app_dsn, resolve_dsn, tenant_transaction, use_fast_json
from primitives.db._oneshot import NOT_SENT, OnceTransaction, fetch_rows
from primitives.db._session import runtime_conninfo
from primitives.discipline import _gates as gates
from primitives.embeddings import Embedder
from primitives.engine import _assemble as assemble
from primitives.engine import _canonical as canonical
from primitives.engine import _capacity as capacity
from primitives.engine import _consolidate as consolidation
from primitives.engine import _core as core
from primitives.engine import _determinism as determinism
from primitives.engine import _episodic as episodic
from primitives.engine import _graph as graph
from primitives.engine import _insight as insight
from primitives.engine import _pending as pending
from primitives.engine import _sem as sem
from primitives.engine import _store_ops as store_ops
from primitives.engine import _ticks as ticks
from primitives.engine._anchor import resolve_anchor
from primitives.engine._base import EngineBase, render, schema_features
from primitives.engine._ids import seeded_ids
from primitives.engine._observe_message import ObserveCall, observe_call
from primitives.engine._pending import EmbedWorker
from primitives.engine._records import Edge, Entity, Explanation, Hit, Memory, SearchResult
from primitives.engine._retry import RETRYABLE, before_retry
from primitives.errors import EmbedderUnavailable, StorageError, StorageFull
from primitives.lifecycle._access import AccessLog, flush_statement, read_ids
from primitives.lifecycle._boundary import ScopeEnd
from primitives.retrieval._context import ContextPack
from primitives.retrieval._rerank import Reranker
from primitives.spec import AgentSpec

__all__ = ["Engine", "TenantMemory"]

T = TypeVar("T")
R = TypeVar("R")


def run_op(conn: psycopg.Connection[Any], op: core.Op[R]) -> R:
    """Drive one core operation to completion on ``conn``."""
    try:
        step = next(op)
    except StopIteration as done:
        value: R = done.value
        return value
    return _drive(conn, op, step)


def _drive(conn: psycopg.Connection[Any], op: core.Op[R], step: Any) -> R:
    """Drive ``op`` on ``conn`` from ``step``, the step it yielded last."""
    try:
        while True:
            if isinstance(step, core.Compute):
                step = op.send(step.compute())
                continue
            cursor = conn.execute(render(step.statement, conn), step.params)
            step = op.send(fetch_rows(cursor, step.fetch))
    except StopIteration as done:
        value: R = done.value
        return value


def _run_once(conn: psycopg.Connection[Any], tenant: str, op: core.Op[R], *,
              after_last: Literal["refuse", "new"]) -> R:
    """Drive ``op`` in one tenant transaction sent with as few messages as it has statements:
    ``BEGIN`` and the bound tenant go with its first statement, ``COMMIT`` with the one marked
    ``last`` (or alone, at the end). A statement after the ``last`` one runs in a new
    transaction (``after_last="new"``: a read op's independent follow-up, such as a TTL
    refresh) or is refused (``"refuse"``: a write must be one transaction)."""
    tx = OnceTransaction(conn, tenant)
    try:
        step = next(op)
        while True:
            if isinstance(step, core.Compute):
                step = op.send(step.compute())
                continue
            if tx.committed:
                if after_last == "refuse":
                    raise AssertionError("an operation ran a statement after its last one")
                tx = OnceTransaction(conn, tenant)
            step = op.send(tx.fetch(render(step.statement, conn), step.params, last=step.last,
                                    fetch=step.fetch))
    except StopIteration as done:
        tx.commit()
        value: R = done.value
        return value
    except BaseException:
        tx.rollback()
        raise


def _run_call(conn: psycopg.Connection[Any], call: ObserveCall) -> Memory | None:
    """Send ``call`` (:func:`~primitives.engine._observe_message.observe_call`) as its
    whole transaction; ``None`` when it must take the general path (nothing was sent)."""
    tx = OnceTransaction(conn, call.tenant)
    try:
        row = tx.fetch_prepared(call.prepared, last=True, fetch="one")
    except BaseException:
        tx.rollback()
        raise
    if row is None:  # the id is another write's (a retry returns its own row)
        raise core.reused_id(call.written["id"])
    return None if row is NOT_SENT else Memory.from_written(call.written, row)


class Engine(EngineBase):
    """Spec-bound, tenant-scoped access to an agent's memory. Create with :meth:`connect`."""

    def __init__(self, spec: AgentSpec, pool: ConnectionPool[psycopg.Connection[Any]], *,
                 has_embedding: bool = False, embedder: Embedder | None = None,
                 reranker: Reranker | None = None, text_match: bool = False,
                 trigram: bool = True, citus: bool = False) -> None:
        super().__init__(spec, has_embedding=has_embedding, embedder=embedder,
                         reranker=reranker, text_match=text_match, trigram=trigram,
                         citus=citus)
        self._pool = pool
        self._flusher: threading.Thread | None = None
        self._flush_lock = threading.Lock()
        self._embed_worker: EmbedWorker | None = None
        for message in self.warnings:
            warnings.warn(message, RuntimeWarning, stacklevel=3)

    @classmethod
    def connect(cls, spec: AgentSpec, dsn: str | None = None, *,
                max_connections: int = 4, embedder: Embedder | None = None,
                reranker: Reranker | None = None) -> Engine:
        """Open a pool of application-role connections (``dsn`` defaults to the resolved one).

        With ``embedder`` (e.g. ``primitives.embeddings.default_embedder(spec)``), writes
        store vectors and search runs the semantic signal; without it, semantic is dropped
        with a warning. With ``reranker`` (e.g. ``default_reranker(spec)``), the top fused
        hits of a search are reordered by it (off by default)."""
        try:
            runtime = runtime_conninfo(dsn or app_dsn(resolve_dsn()))
        except psycopg.Error as err:
            raise StorageError(f"cannot connect as the application role: {err}") from err
        pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            runtime, min_size=1, max_size=max_connections, open=False,
            kwargs={"autocommit": True}, name=f"primitives-{spec.agent}",
            configure=use_fast_json,
        )
        try:
            pool.open(wait=True, timeout=15)
            with pool.connection() as conn:
                features = schema_features(conn, cls.tables_for(spec))
        except Exception as err:  # psycopg.Error, psycopg_pool.PoolTimeout
            pool.close()
            raise StorageError(f"cannot connect as the application role: {err}") from err
        try:
            return cls(spec, pool, has_embedding=features.embedding, embedder=embedder,
                       reranker=reranker, text_match=features.text_match,
                       trigram=features.trigram, citus=features.citus)
        except Exception:
            pool.close()
            raise

    def close(self) -> None:
        try:
            if self._embed_worker is not None:
                self._embed_worker.stop()
            self.wait_access()
            self.flush_access()
        finally:
            self._pool.close()

    def wait_access(self, timeout: float | None = None) -> None:
        """Wait for a background write of read marks under way (if any) to finish."""
        flusher = self._flusher
        if flusher is not None:
            flusher.join(timeout)

    def _flush_in_background(self) -> None:
        """Write the due marks on a thread of its own, so the read that found the buffer due
        returns at once; one such write at a time (marks recorded meanwhile wait for the
        next). A failed write drops its marks: they record use, they are not memory."""
        with self._flush_lock:
            if self._flusher is not None and self._flusher.is_alive():
                return

            def flush() -> None:
                try:
                    self.flush_access()
                except (psycopg.Error, StorageError, OSError):
                    pass

            self._flusher = threading.Thread(target=flush, name="primitives-access-flush",
                                             daemon=True)
            self._flusher.start()

    def flush_access(self) -> int:
        """Write the buffered read marks now, one UPDATE per tenant; returns the rows marked.
        Reads call it when the buffer is due (see :mod:`primitives.lifecycle._access`)."""
        batches = self.access.take()
        if not batches:
            return 0
        statement = flush_statement(self.tables)
        with self._pool.connection() as conn:
            try:
                for tenant, ids, counts, ats in batches:
                    with tenant_transaction(conn, tenant):
                        conn.execute(statement, {"tenant": tenant, "ids": ids,
                                                 "counts": counts, "ats": ats})
            except BaseException:
                self._after_error(conn)
                raise
        return sum(len(ids) for _, ids, _, _ in batches)

    def _after_error(self, conn: psycopg.Connection[Any]) -> None:
        """A connection whose transaction failed: on a Citus coordinator it is closed, and
        the pool opens another. Citus 14.0 counts, per backend, how deep it is in planning a
        subquery or CTE on its own; an error raised meanwhile (such as "could not run
        distributed query with FOR UPDATE/SHARE commands") leaves the count raised, and from
        then on that backend delegates no call of a distributed function, taking every call
        for one inside a subquery. The erasure function (``<prefix>_erase_row``) would then
        run on the coordinator as its owner and reach shards that the transaction wrote as
        the application role over another user's connection, which Citus refuses ("cannot
        perform query on placements that were modified in this transaction by a different
        user"). ``tests/citus/test_cluster.py`` shows both."""
        if self.citus:
            conn.close()

    def _accessed(self, tenant: str, result: R) -> R:
        if self.access.record(tenant, read_ids(result)):
            self._flush_in_background()
        return result

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def tenant(self, anchor: Mapping[str, object], *,
               actor: str = "agent") -> Iterator[TenantMemory]:
        """One tenant-scoped transaction; commits on success, rolls back on any error."""
        ctx, seed, ids = self.job_context(self.context(resolve_anchor(self.spec, anchor), actor))
        try:
            with self._pool.connection() as conn:
                try:
                    with tenant_transaction(conn, ctx.tenant):
                        # a job's transaction: seeded ids and clock until it ends (or random
                        # ids, so a transaction inside another one's block never takes that
                        # job's ids)
                        head = (run_op(conn, determinism.open_job(ctx, seed))
                                if seed is not None else 0)
                        with seeded_ids(ids, head):
                            yield TenantMemory(ctx, conn, self.access)
                except BaseException:
                    self._after_error(conn)
                    raise
        except StorageFull as err:
            self._journal_refusal(ctx, err)
            raise
        self.note_pending(ctx)
        if self.access.due():
            self._flush_in_background()

    def _journal_refusal(self, ctx: core.Context, err: StorageFull) -> None:
        """Journal a write the capacity guard refused (a ``storage_full`` event, in a
        transaction of its own: the write's was rolled back); its id goes into the error's
        envelope as ``event_id``; if the journal cannot be written, ``journal_error`` says why."""
        op = capacity.refused(ctx, err)
        if op is None or "event_id" in err.context:
            return
        try:
            with self._pool.connection() as conn:
                try:
                    err.context["event_id"] = str(_run_once(conn, ctx.tenant, op,
                                                            after_last="refuse"))
                except BaseException:
                    self._after_error(conn)
                    raise
        except (psycopg.Error, StorageError) as failed:
            # the refusal itself still reaches the caller, saying its event is missing
            err.context["journal_error"] = str(failed)

    def read(self, anchor: Mapping[str, object], make: Callable[[core.Context], core.Op[R]], *,
             actor: str = "agent", seed: str | None = None,
             sleep: Callable[[float], None] = time.sleep) -> R:
        """Run the read-only core operation ``make(context)`` for ``anchor`` in its own tenant
        transaction: ``BEGIN`` and the bound tenant travel with its first statement and ``COMMIT`` with
        the statement it marks ``last``, so a one-statement read is one round trip. A
        transient failure is retried once after the same deterministic backoff as
        :meth:`write`; then the error is raised.
        """
        ctx = self.context(resolve_anchor(self.spec, anchor), actor)
        seed = seed or f"{self.spec.agent}:{ctx.tenant}"
        pool = self._pool
        for attempt in (1, 2):
            try:
                conn = pool.getconn()  # see observe: the pool's connection() costs more
                try:
                    return _run_once(conn, ctx.tenant, make(ctx), after_last="new")
                except BaseException:
                    self._after_error(conn)
                    raise
                finally:
                    pool.putconn(conn)
            except RETRYABLE as err:
                sleep(before_retry(err, attempt=attempt, seed=seed, tenant=ctx.tenant,
                                write=False))
        raise AssertionError("unreachable")

    @overload
    def search(self, anchor: Mapping[str, object], query: str = "", *,
               explain: Literal[False] = False, actor: str = "agent",
               **options: Any) -> SearchResult[Hit]: ...

    @overload
    def search(self, anchor: Mapping[str, object], query: str = "", *,
               explain: Literal[True], actor: str = "agent", **options: Any) -> Explanation: ...

    def search(self, anchor: Mapping[str, object], query: str = "", *, explain: bool = False,
               actor: str = "agent", **options: Any) -> SearchResult[Hit] | Explanation:
        """:meth:`TenantMemory.search` in a transaction of its own, in one round trip."""
        explanation = self.read(
            anchor, lambda ctx: core.explain_search(ctx, query, final=True, **options),
            actor=actor)
        self._accessed(resolve_anchor(self.spec, anchor).tenant, explanation)
        return explanation if explain else explanation.hits

    def context_pack(self, anchor: Mapping[str, object], query: str = "", *,
                     actor: str = "agent", **options: Any) -> ContextPack:
        """:meth:`TenantMemory.context_pack` in a read transaction of its own."""
        pack = self.read(anchor, lambda ctx: assemble.context(ctx, query, final=True,
                                                              **options), actor=actor)
        return self._accessed(resolve_anchor(self.spec, anchor).tenant, pack)

    def observe(self, anchor: Mapping[str, object], tier: str, content: str, *,
                actor: str = "agent", seed: str | None = None,
                sleep: Callable[[float], None] = time.sleep, **fields: Any) -> Memory:
        """One memory (see :meth:`TenantMemory.observe`) in a tenant transaction of its own,
        retried like :meth:`write`. Without ``key`` and without an embedder it is one round
        trip: ``BEGIN``, the bound tenant, the insert (row, journal event, scope mark) and ``COMMIT``
        in one message.

        Its retry is idempotent: the write's ``memory_id`` (the caller's, or one chosen
        before the first attempt) is its idempotency key, so a retry after a COMMIT whose
        acknowledgement was lost returns the row that COMMIT wrote and writes nothing, keyed
        or not (a keyed one even when another writer superseded it in between)."""
        resolved = resolve_anchor(self.spec, anchor)
        if determinism.job_seed(self.spec, resolved) is not None:
            # a job's write: its transaction opens the job (seeded ids and clock)
            return self.write(anchor, lambda mem: mem.observe(tier, content, **fields),
                              actor=actor, seed=seed, sleep=sleep)
        with seeded_ids(None):  # not a job: random ids, even inside a job's block
            seed = seed or f"{self.spec.agent}:{resolved.tenant}"
            pool = self._pool
            fields = core.with_idempotency_key(fields)
            for attempt in (1, 2):
                try:
                    # getconn/putconn rather than the pool's connection() context: that one wraps
                    # the connection's own context (a COMMIT check through psycopg's generator
                    # machinery) in a generator context manager: 7% of this call's client CPU
                    # under load (python -m bench.client_ab --variant pool-context), for nothing
                    # here, since the transaction's own code has committed or rolled back before
                    # the connection goes back. putconn still rolls back, or replaces, a
                    # connection returned in any other state.
                    conn = pool.getconn()
                    try:
                        call = observe_call(self, conn, resolved, tier, content, actor, fields)
                        checked = call if isinstance(call, core.WriteInput) else None
                        if isinstance(call, ObserveCall):
                            memory = _run_call(conn, call)
                            if memory is not None:
                                if self.defers_embedding:
                                    self.pending.note(resolved)
                                return memory
                        ctx = self.context(resolved, actor)
                        memory = _run_once(conn, ctx.tenant,
                                           core.observe(ctx, tier, content, final=True,
                                                        checked=checked, **fields),
                                           after_last="refuse")
                        self.note_pending(ctx)
                        return memory
                    except BaseException:
                        self._after_error(conn)
                        raise
                    finally:
                        pool.putconn(conn)
                except RETRYABLE as err:
                    try:
                        sleep(before_retry(err, attempt=attempt, seed=seed,
                                           tenant=resolved.tenant))
                    except StorageFull as full:
                        self._journal_refusal(self.context(resolved, actor), full)
                        raise
            raise AssertionError("unreachable")

    def embed_pending(self, anchor: Mapping[str, object] | None = None, *,
                      batch_size: int = pending.DEFAULT_BATCH, limit: int | None = None,
                      actor: str = "embedder") -> int:
        """Embed rows waiting for a vector (``retrieval.embedding.embed: deferred``): the
        tenant of ``anchor``, or else every tenant this engine's deferred writes left rows
        for. One transaction per batch of ``batch_size`` rows (one model call, one statement
        storing and journalling the batch), retried like :meth:`write`; at most ``limit``
        rows per tenant. Returns the rows embedded. A tenant that fails (another model's
        vectors: ``ModelMismatch``) keeps its rows waiting; the others are still embedded,
        then the first error is raised."""
        anchors = ([resolve_anchor(self.spec, anchor)] if anchor is not None
                   else self.pending.take())
        total = 0
        failed: BaseException | None = None
        for resolved in anchors:
            done = 0
            try:
                while limit is None or done < limit:
                    wanted = batch_size if limit is None else min(batch_size, limit - done)
                    stored = self.write(resolved.as_dict(), partial(
                        TenantMemory.embed_pending, batch_size=wanted, limit=wanted),
                        actor=actor)
                    done += stored
                    if stored < wanted:
                        break
            except Exception as err:
                failed = failed or err
            total += done
        if failed is not None:
            raise failed
        return total

    def start_embedding(self, *, batch_size: int = pending.DEFAULT_BATCH) -> None:
        """Run :meth:`embed_pending` on a background thread whenever a deferred write of this
        engine leaves rows waiting, until :meth:`close` (which lets it finish what is
        noted). Errors are kept in ``embedding_errors``; their rows stay waiting."""
        if self._embed_worker is not None:
            return
        if not self.defers_embedding:
            raise EmbedderUnavailable(
                f"agent '{self.spec.agent}': a background embedding worker needs "
                "retrieval.embedding.embed: deferred, an embedder and pgvector")
        worker = EmbedWorker(self.pending, lambda: self.embed_pending(batch_size=batch_size))
        self._embed_worker = worker
        worker.start()

    def wait_embedded(self, timeout: float | None = None) -> bool:
        """Wait until the background worker has embedded what this engine's writes left
        waiting (True), or ``timeout`` seconds passed (False)."""
        if self._embed_worker is None:
            return not len(self.pending)
        return self._embed_worker.wait(timeout)

    @property
    def embedding_errors(self) -> list[BaseException]:
        """The background worker's recent errors (the rows they concern stay waiting)."""
        return list(self._embed_worker.errors) if self._embed_worker is not None else []

    def write_once(self, anchor: Mapping[str, object],
                   make: Callable[[core.Context], core.Op[R]], *, actor: str = "agent",
                   seed: str | None = None, sleep: Callable[[float], None] = time.sleep) -> R:
        """Run the core write ``make(context)`` in one tenant transaction sent with as few
        messages as it has statements, as :meth:`observe` sends its write: ``BEGIN`` and the
        bound tenant travel with its first statement, ``COMMIT`` with the one it marks
        ``last`` (a one-statement write is one round trip). Retried like :meth:`write`;
        ``make`` is called again for the retry."""
        resolved = resolve_anchor(self.spec, anchor)
        seed = seed or f"{self.spec.agent}:{resolved.tenant}"
        pool = self._pool
        for attempt in (1, 2):
            try:
                ctx = self.context(resolved, actor)
                conn = pool.getconn()  # see observe: the pool's connection() costs more
                try:
                    result = _run_once(conn, ctx.tenant, make(ctx), after_last="refuse")
                except BaseException:
                    self._after_error(conn)
                    raise
                finally:
                    pool.putconn(conn)
                self.note_pending(ctx)
                return result
            except RETRYABLE as err:
                sleep(before_retry(err, attempt=attempt, seed=seed, tenant=resolved.tenant))
        raise AssertionError("unreachable")

    def write(self, anchor: Mapping[str, object], fn: Callable[[TenantMemory], T], *,
              actor: str = "agent", seed: str | None = None,
              sleep: Callable[[float], None] = time.sleep) -> T:
        """Run ``fn`` in its own tenant transaction; on a transient failure, retry exactly
        once after a deterministic backoff, then raise ``MemoryWriteFail``."""
        seed = seed or f"{self.spec.agent}:{resolve_anchor(self.spec, anchor).tenant}"
        for attempt in (1, 2):
            try:
                with self.tenant(anchor, actor=actor) as mem:
                    return fn(mem)
            except RETRYABLE as err:
                sleep(before_retry(err, attempt=attempt, seed=seed))
        raise AssertionError("unreachable")


class TenantMemory:
    """Operations inside one tenant transaction (see :mod:`primitives.engine._core`)."""

    def __init__(self, ctx: core.Context, conn: psycopg.Connection[Any],
                 access: AccessLog | None = None) -> None:
        self.ctx = ctx
        self._conn = conn
        self._access = access

    @property
    def connection(self) -> psycopg.Connection[Any]:
        """The transaction's connection (tenant already set), for audit and test queries."""
        return self._conn

    def observe(self, tier: str, content: str, **fields: Any) -> Memory:
        return run_op(self._conn, core.observe(self.ctx, tier, content, **fields))

    def supersede(self, memory_id: UUID, content: str, **fields: Any) -> Memory:
        return run_op(self._conn, core.supersede(self.ctx, memory_id, content, **fields))

    def invalidate(self, memory_id: UUID, *, reason: str | None = None, **kw: Any) -> Memory:
        return run_op(self._conn, core.change_state(self.ctx, "invalidate", memory_id,
                                                    reason=reason, **kw))

    def archive(self, memory_id: UUID, *, reason: str | None = None) -> Memory:
        return run_op(self._conn, core.change_state(self.ctx, "archive", memory_id,
                                                    reason=reason))

    def tombstone(self, memory_id: UUID, *, reason: str | None = None) -> Memory:
        return run_op(self._conn, core.change_state(self.ctx, "tombstone", memory_id,
                                                    reason=reason))

    def link_action(self, action_id: str, memory_ids: list[UUID], kind: str) -> int:
        return run_op(self._conn, core.link_action(self.ctx, action_id, memory_ids, kind))

    def reference(self, memory_id: UUID | str, category: str, key: str, *,
                  version: str | None = None) -> canonical.CanonicalRef:
        """Point ``memory_id`` to the canonical row ``key`` of non-mirror ``category``, pinned
        to ``version`` (default: the row's current one); journalled as
        ``canonical_referenced``. Notes reference canonical text instead of copying it."""
        return run_op(self._conn, canonical.reference(self.ctx, memory_id, category, key,
                                                      version=version))

    def references(self, memory_id: UUID | str) -> list[canonical.CanonicalRef]:
        """The canonical references of ``memory_id``; ``stale`` when the row moved on."""
        return run_op(self._conn, canonical.references(self.ctx, memory_id))

    def record_consent(self, *, kinds: Sequence[str] = (), reason: str | None = None) -> UUID:
        """Journal the subject's consent to keep raw personal data of ``kinds`` (all the
        policy detects when empty); pass the id to ``observe(..., consent=id)``."""
        return run_op(self._conn, core.record_consent(self.ctx, kinds=kinds, reason=reason))

    def read_raw(self, memory_id: UUID, *, reason: str) -> dict[str, Any] | None:
        """The raw fields kept with consent for ``memory_id`` (privacy admin only: connect
        with ``primitives.db.privacy_admin_dsn``); the read is journalled with the reason's
        hash. ``None`` when nothing raw is kept for it."""
        return run_op(self._conn, core.read_raw(self.ctx, memory_id, reason=reason))

    def episodic_query(self, query: str, *, max_results: int | None = None,
                       since: datetime | None = None, until: datetime | None = None,
                       tiers: Sequence[str] | None = None,
                       typology: str | None = "episodic") -> SearchResult[Hit]:
        """Seed 001 §3's deterministic token-overlap ranking (see
        :func:`primitives.engine._episodic.episodic_query`)."""
        return run_op(self._conn, episodic.episodic_query(
            self.ctx, query, max_results=max_results, since=since, until=until, tiers=tiers,
            typology=typology))

    # governed semantic memory (seed 001; see primitives.engine._sem) ---------------------------
    def sem_get(self, key: str) -> dict[str, Any]:
        """``{exists, key, value, meta}`` of the fact under exactly the canonical ``key``."""
        return run_op(self._conn, sem.sem_get(self.ctx, key))

    def sem_search(self, prefix: str, *, limit: int = sem.SEARCH_LIMIT) -> list[dict[str, Any]]:
        """Facts whose canonical key starts with the canonical ``prefix``, by key."""
        return run_op(self._conn, sem.sem_search(self.ctx, prefix, limit=limit))

    def sem_snapshot(self) -> determinism.SemSnapshot:
        """The tenant's SEM rows (key, value, seeded timestamp) and their snapshot hash
        (seed 001 §6; :func:`primitives.engine._determinism.sem_snapshot`)."""
        return run_op(self._conn, determinism.sem_snapshot(self.ctx))

    def record_intent(self, key: str, value: Any, *, reason: str | None = None) -> UUID:
        """Journal the user's confirmed "remember X"; pass the id to :meth:`sem_put`."""
        return run_op(self._conn, sem.record_intent(self.ctx, key, value, reason=reason))

    def sem_put(self, key: str, value: Any, *, intent: UUID | str, source: str | None = None,
                consent: UUID | str | None = None, raw: bool = False) -> Memory:
        """Write a fact on a recorded user intent (:func:`primitives.engine._sem.sem_put`)."""
        return run_op(self._conn, sem.sem_put(self.ctx, key, value, intent=intent,
                                              source=source, consent=consent, raw=raw))

    def request_promotion(self, source: UUID | str, target_key: str, *, justification: str,
                          value: Any = None,
                          evidence: Sequence[Mapping[str, Any]] = ()) -> sem.ActionRequest:
        """File a governed promotion of ``source`` to the fact ``target_key``."""
        return run_op(self._conn, sem.request_promotion(
            self.ctx, source, target_key, justification=justification, value=value,
            evidence=evidence))

    def request_deletion(self, key: str, *, justification: str) -> sem.ActionRequest:
        """File a request to delete the fact under ``key`` (deletion approvers decide)."""
        return run_op(self._conn, sem.request_deletion(self.ctx, key,
                                                       justification=justification))

    def approve(self, request_id: UUID | str, *, approver: str, decision: str = "approve",
                reason: str | None = None) -> sem.ActionRequest:
        """Record an approver's decision; a request with its approvals executes at once."""
        return run_op(self._conn, sem.approve(self.ctx, request_id, approver=approver,
                                              decision=decision, reason=reason))

    def end_scope(self, tier: str, scope_id: str, *,
                  into_scope: str | None = None, extractor: Any = None,
                  reflective_log_id: str | None = None) -> ScopeEnd:
        """End a transient tier's scope: consolidation where the spec extracts at its end
        (``extractor``: an :class:`~primitives.extraction.Extractor`, the spec's default
        when None), compounding upward, then removal or archive
        (see :func:`primitives.engine._core.end_scope`)."""
        return run_op(self._conn, core.end_scope(self.ctx, tier, scope_id,
                                                 into_scope=into_scope, extractor=extractor,
                                                 reflective_log_id=reflective_log_id))

    def tick(self, *, scope_id: str | None = None,
             into_scope: str | None = None) -> ticks.TickResult:
        """One workflow tick of the ticked tiers: references promotions, then TTLs down by
        one and rows at 0 removed (see :func:`primitives.engine._ticks.tick`)."""
        return run_op(self._conn, ticks.tick(self.ctx, scope_id=scope_id,
                                             into_scope=into_scope))

    def use(self, memory_ids: Sequence[UUID | str]) -> list[UUID]:
        """Count one use of each row of a ticked tier (see
        :func:`primitives.engine._ticks.reference`)."""
        return run_op(self._conn, ticks.reference(self.ctx, memory_ids))

    def ticked(self, tier: str, *, scope_id: str | None = None) -> list[ticks.TickedRow]:
        """The live rows of a ticked tier, newest first."""
        return run_op(self._conn, ticks.ticked_rows(self.ctx, tier, scope_id=scope_id))

    def consolidate(self, scope_id: str, *,
                    extractor: Any = None) -> list[consolidation.Consolidation]:
        """Consolidate one scope's episodes by every extraction rule of the spec (see
        :func:`primitives.engine._consolidate.consolidate`); a second call changes nothing."""
        return run_op(self._conn, consolidation.consolidate(self.ctx, scope_id,
                                                            extractor=extractor))

    def save_extracted(self, scope_id: str, decisions: Sequence[Any], *,
                   extractor: str = consolidation.AGENT_EXTRACTOR,
                   ) -> list[consolidation.Consolidation]:
        """A write-path agent's extracted memories from session ``scope_id``, applied as
        consolidation's are, without marking the session consolidated (see
        :func:`primitives.engine._consolidate.save_extracted`)."""
        return run_op(self._conn, consolidation.save_extracted(
            self.ctx, scope_id, decisions, extractor=extractor))

    def mark_consolidated(self, scope_id: str, *,
                          extractor: str = consolidation.AGENT_EXTRACTOR,
                          ) -> list[consolidation.Consolidation]:
        """Claim session ``scope_id``'s unconsolidated rows for a write-path agent that has
        saved what it extracted (see :func:`primitives.engine._consolidate.mark_consolidated`);
        a second call claims nothing."""
        return run_op(self._conn, consolidation.mark_consolidated(
            self.ctx, scope_id, extractor=extractor))

    def erase(self, subject: str, *, approvals: list[str], reason: str,
              memory_ids: list[UUID] | None = None,
              thread_ids: list[str] | None = None) -> int:
        return run_op(self._conn, core.erase(self.ctx, subject, approvals=approvals,
                                             reason=reason, memory_ids=memory_ids or [],
                                             thread_ids=thread_ids or []))

    def get(self, memory_id: UUID) -> Memory | None:
        return run_op(self._conn, core.get(self.ctx, memory_id))

    def history(self, memory_id: UUID) -> list[dict[str, Any]]:
        return run_op(self._conn, core.history(self.ctx, memory_id))

    def observe_many(self, items: Sequence[Mapping[str, Any]]) -> list[Memory]:
        """Write several memories (each a dict with ``tier``, ``content`` and any
        :meth:`observe` keyword); their vectors are embedded in one batch."""
        return run_op(self._conn, core.observe_many(self.ctx, items))

    def reembed(self, *, batch_size: int = 256) -> int:
        """Re-embed this tenant's rows that lack a vector of this engine's model."""
        return run_op(self._conn, core.reembed(self.ctx, batch_size=batch_size))

    def embed_pending(self, *, batch_size: int = pending.DEFAULT_BATCH,
                      limit: int | None = None) -> int:
        """Embed this tenant's rows waiting for a vector, ``batch_size`` per model call, at
        most ``limit`` (see :func:`primitives.engine._pending.embed_pending`)."""
        return run_op(self._conn, pending.embed_pending(self.ctx, batch_size=batch_size,
                                                        limit=limit))

    @overload
    def search(self, query: str = "", *, explain: Literal[False] = False,
               **options: Any) -> SearchResult[Hit]: ...

    @overload
    def search(self, query: str = "", *, explain: Literal[True], **options: Any) -> Explanation: ...

    def search(self, query: str = "", *, explain: bool = False,
               **options: Any) -> SearchResult[Hit] | Explanation:
        """Hybrid search (options: ``envelope``, ``tiers``, ``limit``, ``as_of``, ``window``); with
        ``explain=True`` an :class:`Explanation` (hits plus rows per signal)."""
        explanation = run_op(self._conn, core.explain_search(self.ctx, query, **options))
        if self._access is not None:
            self._access.record(self.ctx.tenant, read_ids(explanation))
        return explanation if explain else explanation.hits

    def context_pack(self, query: str = "", **options: Any) -> ContextPack:
        """The spec's context blocks for this turn: the transient tiers' current rows and the
        search hits for ``query``, within their token budgets (see ``_assemble.context``)."""
        pack = run_op(self._conn, assemble.context(self.ctx, query, **options))
        if self._access is not None:
            self._access.record(self.ctx.tenant, read_ids(pack))
        return pack

    def item_batch(self, ops: Sequence[store_ops.ItemOp]) -> list[Any]:
        """Run LangGraph-store item operations in this transaction (see ``_store_ops``)."""
        return run_op(self._conn, store_ops.run_item_ops(self.ctx, ops))

    # graph (specs with graph:) ----------------------------------------------------------------
    def entity(self, name: str, kind: str, *, aliases: Sequence[str] = (),
               summary: str | None = None) -> Entity:
        """The entity ``name`` of type ``kind``, created if new (aliases, summary merged)."""
        return run_op(self._conn, graph.entity(self.ctx, name, kind, aliases=aliases,
                                               summary=summary))

    def find_entities(self, name: str, kind: str | None = None) -> list[Entity]:
        """Entities whose name or an alias is ``name`` (case-insensitively)."""
        return run_op(self._conn, graph.find_entities(self.ctx, name, kind))

    def mention(self, memory_id: UUID, entities: Sequence[graph.EntityRef]) -> list[Entity]:
        """Record that a memory mentions these entities (ids, known names, or (name, type))."""
        return run_op(self._conn, graph.mention(self.ctx, memory_id, entities))

    def relate(self, source_id: UUID, target_id: UUID, relation_type: str,
               **fields: Any) -> Edge:
        """A typed edge between two memories (see ``_graph.relate`` for the fields)."""
        return run_op(self._conn, graph.relate(self.ctx, source_id, target_id, relation_type,
                                               **fields))

    def end_edge(self, edge_id: UUID, *, reason: str | None = None) -> Edge:
        """End an edge (``valid_until`` set; the row stays)."""
        return run_op(self._conn, graph.end_edge(self.ctx, edge_id, reason=reason))

    def entity_memories(self, entity: UUID | str, *, limit: int = 20,
                        ) -> tuple[Entity, list[Memory]]:
        """An entity and the active memories that mention it, latest first."""
        return run_op(self._conn, graph.entity_memories(self.ctx, entity, limit=limit))

    def confirm(self, memory_id: UUID, *, reason: str | None = None) -> Memory:
        """Protect an active memory from decay (confidence 1, decay rate 0), journalled."""
        return run_op(self._conn, store_ops.confirm_memory(self.ctx, memory_id,
                                                           reason=reason))

    def mark_exempt(self, memory_id: UUID, *, reason: str | None = None) -> Memory:
        """Exempt an active memory from decay (decay rate 0), journalled as ``exempted``: a
        forcing-function row past its horizon stops awaiting disposition."""
        return run_op(self._conn, store_ops.exempt_memory(self.ctx, memory_id,
                                                          reason=reason))

    def stats(self) -> dict[str, Any]:
        """Counts of this tenant's memory by typology, tier and state, and of its journal."""
        return run_op(self._conn, store_ops.memory_stats(self.ctx))

    def explain_fact(self, memory_id: UUID, *,
                     depth: int = insight.MAX_PROVENANCE_DEPTH) -> insight.FactProvenance:
        """A memory's provenance chain: derived_from and supersedes edges followed, the
        versions that replaced it, its episodes and its journal (``_insight.explain_fact``)."""
        return run_op(self._conn, insight.explain_fact(self.ctx, memory_id, depth=depth))

    def session_episodes(self, scope_id: str, *, limit: int = 50,
                         offset: int = 0) -> insight.SessionEpisodes:
        """A page of a session's episodes and whether consolidation has taken them all."""
        return run_op(self._conn, insight.session_episodes(self.ctx, scope_id, limit=limit,
                                                         offset=offset))

    def weak_facts(self, *, below: float = insight.WEAK_BELOW,
                   horizon: timedelta = insight.WEAK_HORIZON, limit: int = 50,
                   now: datetime | None = None) -> list[insight.WeakFact]:
        """Facts with low confidence, a single source, or fading below the decay threshold
        within ``horizon``, weakest first (``_insight.weak_facts``)."""
        return run_op(self._conn, insight.weak_facts(self.ctx, below=below, horizon=horizon,
                                                   limit=limit, now=now))

    # discipline: sanitization gates and the outbox ----------------------------------------------
    def cross(self, gate: str, memory_ids: Sequence[UUID | str] | None = None,
              **options: Any) -> list[gates.Crossing]:
        """Carry rows across the sanitization gate ``gate`` (see
        :func:`primitives.discipline.cross`): what crossed, what stayed and why."""
        return run_op(self._conn, gates.cross(self.ctx, gate, memory_ids, **options))

    def claim_outbox(self, *, consumer: str, event: str | None = None,
                     limit: int = 100) -> list[gates.OutboxEntry]:
        """Claim the tenant's undelivered outbox entries (see
        :func:`primitives.discipline.claim_outbox`)."""
        return run_op(self._conn, gates.claim_outbox(self.ctx, consumer=consumer,
                                                     event=event, limit=limit))

    def retry_outbox(self, ids: Sequence[UUID | str]) -> list[UUID]:
        """Hand delivered outbox entries back to the queue (see
        :func:`primitives.discipline._gates.retry_outbox`)."""
        return run_op(self._conn, gates.retry_outbox(self.ctx, ids))
