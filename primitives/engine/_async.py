"""The asynchronous executor: the same core operations, awaited.

Example::

    async with await AsyncEngine.connect(spec) as engine:
        async with engine.tenant({"workspace_id": "ws-acme"}) as mem:
            await mem.observe("cycle", "lowering temperature removed fabrication")
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Literal, TypeVar, overload
from uuid import UUID

import psycopg
from psycopg_pool import AsyncConnectionPool

from primitives.db import app_dsn, atenant_transaction, resolve_dsn, use_fast_json
from primitives.db._oneshot import NOT_SENT, AsyncOnceTransaction, afetch_rows
from primitives.db._session import aruntime_conninfo
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
from primitives.engine._base import EngineBase, aschema_features, render
from primitives.engine._ids import seeded_ids
from primitives.engine._observe_message import ObserveCall, observe_call
from primitives.engine._records import Edge, Entity, Explanation, Hit, Memory, SearchResult
from primitives.engine._retry import RETRYABLE, before_retry
from primitives.errors import StorageError, StorageFull
from primitives.lifecycle._access import AccessLog, flush_statement, read_ids
from primitives.lifecycle._boundary import ScopeEnd
from primitives.retrieval._context import ContextPack
from primitives.retrieval._rerank import Reranker
from primitives.spec import AgentSpec

__all__ = ["AsyncEngine", "AsyncTenantMemory"]

T = TypeVar("T")
R = TypeVar("R")


async def arun_op(conn: psycopg.AsyncConnection[Any], op: core.Op[R]) -> R:
    """Drive one core operation to completion on ``conn``."""
    try:
        step = next(op)
    except StopIteration as done:
        value: R = done.value
        return value
    return await _adrive(conn, op, step)


async def _adrive(conn: psycopg.AsyncConnection[Any], op: core.Op[R], step: Any) -> R:
    """Drive ``op`` on ``conn`` from ``step``, the step it yielded last."""
    try:
        while True:
            if isinstance(step, core.Compute):
                # Model inference is CPU-bound: keep it off the event loop.
                step = op.send(await asyncio.to_thread(step.compute))
                continue
            cursor = await conn.execute(render(step.statement, conn), step.params)
            step = op.send(await afetch_rows(cursor, step.fetch))
    except StopIteration as done:
        value: R = done.value
        return value


async def _arun_once(conn: psycopg.AsyncConnection[Any], tenant: str, op: core.Op[R], *,
                     after_last: Literal["refuse", "new"]) -> R:
    """The async twin of the sync engine's ``_run_once``."""
    tx = AsyncOnceTransaction(conn, tenant)
    try:
        step = next(op)
        while True:
            if isinstance(step, core.Compute):
                step = op.send(await asyncio.to_thread(step.compute))
                continue
            if tx.committed:
                if after_last == "refuse":
                    raise AssertionError("an operation ran a statement after its last one")
                tx = AsyncOnceTransaction(conn, tenant)
            step = op.send(await tx.fetch(render(step.statement, conn), step.params,
                                          last=step.last, fetch=step.fetch))
    except StopIteration as done:
        await tx.commit()
        value: R = done.value
        return value
    except BaseException:
        await tx.rollback()
        raise


async def _arun_call(conn: psycopg.AsyncConnection[Any], call: ObserveCall) -> Memory | None:
    """The async twin of :func:`primitives.engine._sync._run_call`."""
    tx = AsyncOnceTransaction(conn, call.tenant)
    try:
        row = await tx.fetch_prepared(call.prepared, last=True, fetch="one")
    except BaseException:
        await tx.rollback()
        raise
    if row is None:  # the id is another write's (a retry returns its own row)
        raise core.reused_id(call.written["id"])
    return None if row is NOT_SENT else Memory.from_written(call.written, row)


async def _configure(conn: psycopg.AsyncConnection[Any]) -> None:
    use_fast_json(conn)


class AsyncEngine(EngineBase):
    """The async twin of :class:`~primitives.engine.Engine`."""

    def __init__(self, spec: AgentSpec,
                 pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]], *,
                 has_embedding: bool = False, embedder: Embedder | None = None,
                 reranker: Reranker | None = None, text_match: bool = False,
                 trigram: bool = True, citus: bool = False) -> None:
        super().__init__(spec, has_embedding=has_embedding, embedder=embedder,
                         reranker=reranker, text_match=text_match, trigram=trigram,
                         citus=citus)
        self._pool = pool
        self._flusher: asyncio.Task[int] | None = None

    @classmethod
    async def connect(cls, spec: AgentSpec, dsn: str | None = None, *,
                      max_connections: int = 4, embedder: Embedder | None = None,
                      reranker: Reranker | None = None) -> AsyncEngine:
        try:
            runtime = await aruntime_conninfo(dsn or app_dsn(resolve_dsn()))
        except psycopg.Error as err:
            raise StorageError(f"cannot connect as the application role: {err}") from err
        pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
            runtime, min_size=1, max_size=max_connections, open=False,
            kwargs={"autocommit": True}, name=f"primitives-async-{spec.agent}",
            configure=_configure,
        )
        try:
            await pool.open(wait=True, timeout=15)
            async with pool.connection() as conn:
                features = await aschema_features(conn, cls.tables_for(spec))
        except Exception as err:  # psycopg.Error, psycopg_pool.PoolTimeout
            await pool.close()
            raise StorageError(f"cannot connect as the application role: {err}") from err
        try:
            return cls(spec, pool, has_embedding=features.embedding, embedder=embedder,
                       reranker=reranker, text_match=features.text_match,
                       trigram=features.trigram, citus=features.citus)
        except Exception:
            await pool.close()
            raise

    async def close(self) -> None:
        try:
            await self.wait_access()
            await self.flush_access()
        finally:
            await self._pool.close()

    async def wait_access(self) -> None:
        """Wait for a background write of read marks under way (if any) to finish."""
        flusher = self._flusher
        if flusher is not None:
            await asyncio.wait([flusher])

    def _flush_in_background(self) -> None:
        """Write the due marks in a task of its own, so the read that found the buffer due
        returns at once (see :meth:`Engine._flush_in_background`)."""
        if self._flusher is not None and not self._flusher.done():
            return

        async def flush() -> int:
            try:
                return await self.flush_access()
            except (psycopg.Error, StorageError, OSError):
                return 0

        self._flusher = asyncio.get_running_loop().create_task(flush())

    async def flush_access(self) -> int:
        """Write the buffered read marks now, one UPDATE per tenant; returns the rows marked
        (see :meth:`Engine.flush_access`)."""
        batches = self.access.take()
        if not batches:
            return 0
        statement = flush_statement(self.tables)
        async with self._pool.connection() as conn:
            try:
                for tenant, ids, counts, ats in batches:
                    async with atenant_transaction(conn, tenant):
                        await conn.execute(statement, {"tenant": tenant, "ids": ids,
                                                       "counts": counts, "ats": ats})
            except BaseException:
                await self._after_error(conn)
                raise
        return sum(len(ids) for _, ids, _, _ in batches)

    async def _after_error(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Like :meth:`Engine._after_error`: closed on a Citus coordinator."""
        if self.citus:
            await conn.close()

    async def _accessed(self, tenant: str, result: R) -> R:
        if self.access.record(tenant, read_ids(result)):
            self._flush_in_background()
        return result

    async def __aenter__(self) -> AsyncEngine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @asynccontextmanager
    async def tenant(self, anchor: Mapping[str, object], *,
                     actor: str = "agent") -> AsyncIterator[AsyncTenantMemory]:
        ctx, seed, ids = self.job_context(self.context(resolve_anchor(self.spec, anchor), actor))
        try:
            async with self._pool.connection() as conn:
                try:
                    async with atenant_transaction(conn, ctx.tenant):
                        head = (await arun_op(conn, determinism.open_job(ctx, seed))
                                if seed is not None else 0)  # as Engine.tenant
                        with seeded_ids(ids, head):
                            yield AsyncTenantMemory(ctx, conn, self.access)
                except BaseException:
                    await self._after_error(conn)
                    raise
        except StorageFull as err:
            await self._journal_refusal(ctx, err)
            raise
        self.note_pending(ctx)
        if self.access.due():
            self._flush_in_background()

    async def _journal_refusal(self, ctx: core.Context, err: StorageFull) -> None:
        """Like :meth:`Engine._journal_refusal`."""
        op = capacity.refused(ctx, err)
        if op is None or "event_id" in err.context:
            return
        try:
            async with self._pool.connection() as conn:
                try:
                    err.context["event_id"] = str(await _arun_once(conn, ctx.tenant, op,
                                                                   after_last="refuse"))
                except BaseException:
                    await self._after_error(conn)
                    raise
        except (psycopg.Error, StorageError) as failed:
            # the refusal itself still reaches the caller, saying its event is missing
            err.context["journal_error"] = str(failed)

    async def read(self, anchor: Mapping[str, object],
                   make: Callable[[core.Context], core.Op[R]], *, actor: str = "agent",
                   seed: str | None = None) -> R:
        """Like :meth:`Engine.read`: the first statement in one round trip, one retry."""
        ctx = self.context(resolve_anchor(self.spec, anchor), actor)
        seed = seed or f"{self.spec.agent}:{ctx.tenant}"
        pool = self._pool
        for attempt in (1, 2):
            try:
                conn = await pool.getconn()  # as Engine.observe: not the connection() context
                try:
                    return await _arun_once(conn, ctx.tenant, make(ctx), after_last="new")
                except BaseException:
                    await self._after_error(conn)
                    raise
                finally:
                    await pool.putconn(conn)
            except RETRYABLE as err:
                await asyncio.sleep(before_retry(err, attempt=attempt, seed=seed, tenant=ctx.tenant,
                                write=False))
        raise AssertionError("unreachable")

    @overload
    async def search(self, anchor: Mapping[str, object], query: str = "", *,
                     explain: Literal[False] = False, actor: str = "agent",
                     **options: Any) -> SearchResult[Hit]: ...

    @overload
    async def search(self, anchor: Mapping[str, object], query: str = "", *,
                     explain: Literal[True], actor: str = "agent",
                     **options: Any) -> Explanation: ...

    async def search(self, anchor: Mapping[str, object], query: str = "", *,
                     explain: bool = False, actor: str = "agent",
                     **options: Any) -> SearchResult[Hit] | Explanation:
        """Like :meth:`Engine.search`."""
        explanation = await self.read(
            anchor, lambda ctx: core.explain_search(ctx, query, final=True, **options),
            actor=actor)
        await self._accessed(resolve_anchor(self.spec, anchor).tenant, explanation)
        return explanation if explain else explanation.hits

    async def context_pack(self, anchor: Mapping[str, object], query: str = "", *,
                           actor: str = "agent", **options: Any) -> ContextPack:
        """:meth:`TenantMemory.context_pack` in a read transaction of its own."""
        pack = await self.read(anchor, lambda ctx: assemble.context(ctx, query, final=True,
                                                                    **options), actor=actor)
        return await self._accessed(resolve_anchor(self.spec, anchor).tenant, pack)

    async def observe(self, anchor: Mapping[str, object], tier: str, content: str, *,
                      actor: str = "agent", seed: str | None = None, **fields: Any) -> Memory:
        """Like :meth:`Engine.observe`: one memory in a transaction of its own."""
        resolved = resolve_anchor(self.spec, anchor)
        if determinism.job_seed(self.spec, resolved) is not None:  # as Engine.observe
            async def write(mem: AsyncTenantMemory) -> Memory:
                return await mem.observe(tier, content, **fields)
            return await self.write(anchor, write, actor=actor, seed=seed)
        with seeded_ids(None):  # not a job: random ids, even inside a job's block
            seed = seed or f"{self.spec.agent}:{resolved.tenant}"
            pool = self._pool
            fields = core.with_idempotency_key(fields)
            for attempt in (1, 2):
                try:
                    conn = await pool.getconn()  # as Engine.observe: not the connection() context
                    try:
                        call = observe_call(self, conn, resolved, tier, content, actor, fields)
                        checked = call if isinstance(call, core.WriteInput) else None
                        if isinstance(call, ObserveCall):
                            memory = await _arun_call(conn, call)
                            if memory is not None:
                                if self.defers_embedding:
                                    self.pending.note(resolved)
                                return memory
                        ctx = self.context(resolved, actor)
                        memory = await _arun_once(
                            conn, ctx.tenant, core.observe(ctx, tier, content, final=True,
                                                          checked=checked, **fields),
                            after_last="refuse")
                        self.note_pending(ctx)
                        return memory
                    except BaseException:
                        await self._after_error(conn)
                        raise
                    finally:
                        await pool.putconn(conn)
                except RETRYABLE as err:
                    try:
                        delay = before_retry(err, attempt=attempt, seed=seed,
                                             tenant=resolved.tenant)
                    except StorageFull as full:
                        await self._journal_refusal(self.context(resolved, actor), full)
                        raise
                    await asyncio.sleep(delay)
            raise AssertionError("unreachable")

    async def embed_pending(self, anchor: Mapping[str, object] | None = None, *,
                            batch_size: int = pending.DEFAULT_BATCH, limit: int | None = None,
                            actor: str = "embedder") -> int:
        """Like :meth:`Engine.embed_pending`: one transaction per batch, the model run in a
        worker thread. (The sync engine alone has a background thread for it: schedule this
        coroutine as a task instead.)"""
        anchors = ([resolve_anchor(self.spec, anchor)] if anchor is not None
                   else self.pending.take())
        total = 0
        failed: BaseException | None = None
        for resolved in anchors:
            done = 0
            try:
                while limit is None or done < limit:
                    wanted = batch_size if limit is None else min(batch_size, limit - done)
                    stored = await self.write(resolved.as_dict(), partial(
                        AsyncTenantMemory.embed_pending, batch_size=wanted, limit=wanted),
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

    async def write_once(self, anchor: Mapping[str, object],
                         make: Callable[[core.Context], core.Op[R]], *, actor: str = "agent",
                         seed: str | None = None) -> R:
        """Like :meth:`Engine.write_once`: a write in as few messages as it has statements."""
        resolved = resolve_anchor(self.spec, anchor)
        seed = seed or f"{self.spec.agent}:{resolved.tenant}"
        pool = self._pool
        for attempt in (1, 2):
            try:
                ctx = self.context(resolved, actor)
                conn = await pool.getconn()  # as Engine.observe: not the connection() context
                try:
                    result = await _arun_once(conn, ctx.tenant, make(ctx), after_last="refuse")
                except BaseException:
                    await self._after_error(conn)
                    raise
                finally:
                    await pool.putconn(conn)
                self.note_pending(ctx)
                return result
            except RETRYABLE as err:
                await asyncio.sleep(before_retry(err, attempt=attempt, seed=seed,
                                                 tenant=resolved.tenant))
        raise AssertionError("unreachable")

    async def write(self, anchor: Mapping[str, object],
                    fn: Callable[[AsyncTenantMemory], Awaitable[T]], *, actor: str = "agent",
                    seed: str | None = None) -> T:
        """Like :meth:`Engine.write`: one retry after a deterministic backoff."""
        seed = seed or f"{self.spec.agent}:{resolve_anchor(self.spec, anchor).tenant}"
        for attempt in (1, 2):
            try:
                async with self.tenant(anchor, actor=actor) as mem:
                    return await fn(mem)
            except RETRYABLE as err:
                await asyncio.sleep(before_retry(err, attempt=attempt, seed=seed))
        raise AssertionError("unreachable")


class AsyncTenantMemory:
    """Awaitable operations inside one tenant transaction."""

    def __init__(self, ctx: core.Context, conn: psycopg.AsyncConnection[Any],
                 access: AccessLog | None = None) -> None:
        self.ctx = ctx
        self._conn = conn
        self._access = access

    @property
    def connection(self) -> psycopg.AsyncConnection[Any]:
        return self._conn

    async def observe(self, tier: str, content: str, **fields: Any) -> Memory:
        return await arun_op(self._conn, core.observe(self.ctx, tier, content, **fields))

    async def supersede(self, memory_id: UUID, content: str, **fields: Any) -> Memory:
        return await arun_op(self._conn, core.supersede(self.ctx, memory_id, content, **fields))

    async def invalidate(self, memory_id: UUID, *, reason: str | None = None,
                         **kw: Any) -> Memory:
        return await arun_op(self._conn, core.change_state(
            self.ctx, "invalidate", memory_id, reason=reason, **kw))

    async def archive(self, memory_id: UUID, *, reason: str | None = None) -> Memory:
        return await arun_op(self._conn, core.change_state(
            self.ctx, "archive", memory_id, reason=reason))

    async def tombstone(self, memory_id: UUID, *, reason: str | None = None) -> Memory:
        return await arun_op(self._conn, core.change_state(
            self.ctx, "tombstone", memory_id, reason=reason))

    async def link_action(self, action_id: str, memory_ids: list[UUID], kind: str) -> int:
        return await arun_op(self._conn, core.link_action(
            self.ctx, action_id, memory_ids, kind))

    async def reference(self, memory_id: UUID | str, category: str, key: str, *,
                        version: str | None = None) -> canonical.CanonicalRef:
        """See :meth:`primitives.engine.TenantMemory.reference`."""
        return await arun_op(self._conn, canonical.reference(
            self.ctx, memory_id, category, key, version=version))

    async def references(self, memory_id: UUID | str) -> list[canonical.CanonicalRef]:
        """See :meth:`primitives.engine.TenantMemory.references`."""
        return await arun_op(self._conn, canonical.references(self.ctx, memory_id))

    async def record_consent(self, *, kinds: Sequence[str] = (),
                             reason: str | None = None) -> UUID:
        """See :meth:`primitives.engine.TenantMemory.record_consent`."""
        return await arun_op(self._conn, core.record_consent(self.ctx, kinds=kinds,
                                                            reason=reason))

    async def read_raw(self, memory_id: UUID, *, reason: str) -> dict[str, Any] | None:
        """See :meth:`primitives.engine.TenantMemory.read_raw`."""
        return await arun_op(self._conn, core.read_raw(self.ctx, memory_id, reason=reason))

    async def episodic_query(self, query: str, *, max_results: int | None = None,
                             since: datetime | None = None, until: datetime | None = None,
                             tiers: Sequence[str] | None = None,
                             typology: str | None = "episodic") -> SearchResult[Hit]:
        """See :meth:`primitives.engine.TenantMemory.episodic_query`."""
        return await arun_op(self._conn, episodic.episodic_query(
            self.ctx, query, max_results=max_results, since=since, until=until, tiers=tiers,
            typology=typology))

    # governed semantic memory (seed 001; see primitives.engine._sem) ---------------------------
    async def sem_get(self, key: str) -> dict[str, Any]:
        """See :meth:`primitives.engine.TenantMemory.sem_get`."""
        return await arun_op(self._conn, sem.sem_get(self.ctx, key))

    async def sem_search(self, prefix: str, *,
                         limit: int = sem.SEARCH_LIMIT) -> list[dict[str, Any]]:
        """See :meth:`primitives.engine.TenantMemory.sem_search`."""
        return await arun_op(self._conn, sem.sem_search(self.ctx, prefix, limit=limit))

    async def sem_snapshot(self) -> determinism.SemSnapshot:
        """See :meth:`primitives.engine.TenantMemory.sem_snapshot`."""
        return await arun_op(self._conn, determinism.sem_snapshot(self.ctx))

    async def record_intent(self, key: str, value: Any, *, reason: str | None = None) -> UUID:
        """See :meth:`primitives.engine.TenantMemory.record_intent`."""
        return await arun_op(self._conn, sem.record_intent(self.ctx, key, value, reason=reason))

    async def sem_put(self, key: str, value: Any, *, intent: UUID | str,
                      source: str | None = None, consent: UUID | str | None = None,
                      raw: bool = False) -> Memory:
        """See :meth:`primitives.engine.TenantMemory.sem_put`."""
        return await arun_op(self._conn, sem.sem_put(self.ctx, key, value, intent=intent,
                                                     source=source, consent=consent, raw=raw))

    async def request_promotion(self, source: UUID | str, target_key: str, *,
                                justification: str, value: Any = None,
                                evidence: Sequence[Mapping[str, Any]] = ()
                                ) -> sem.ActionRequest:
        """See :meth:`primitives.engine.TenantMemory.request_promotion`."""
        return await arun_op(self._conn, sem.request_promotion(
            self.ctx, source, target_key, justification=justification, value=value,
            evidence=evidence))

    async def request_deletion(self, key: str, *, justification: str) -> sem.ActionRequest:
        """See :meth:`primitives.engine.TenantMemory.request_deletion`."""
        return await arun_op(self._conn, sem.request_deletion(self.ctx, key,
                                                              justification=justification))

    async def approve(self, request_id: UUID | str, *, approver: str,
                      decision: str = "approve", reason: str | None = None) -> sem.ActionRequest:
        """See :meth:`primitives.engine.TenantMemory.approve`."""
        return await arun_op(self._conn, sem.approve(self.ctx, request_id, approver=approver,
                                                     decision=decision, reason=reason))

    async def end_scope(self, tier: str, scope_id: str, *,
                        into_scope: str | None = None, extractor: Any = None,
                        reflective_log_id: str | None = None) -> ScopeEnd:
        """End a transient tier's scope: consolidation where the spec extracts at its end,
        compounding upward, then removal or archive
        (see :func:`primitives.engine._core.end_scope`)."""
        return await arun_op(self._conn, core.end_scope(self.ctx, tier, scope_id,
                                                        into_scope=into_scope,
                                                        extractor=extractor,
                                                        reflective_log_id=reflective_log_id))

    async def tick(self, *, scope_id: str | None = None,
                   into_scope: str | None = None) -> ticks.TickResult:
        """One workflow tick (see :func:`primitives.engine._ticks.tick`)."""
        return await arun_op(self._conn, ticks.tick(self.ctx, scope_id=scope_id,
                                                    into_scope=into_scope))

    async def use(self, memory_ids: Sequence[UUID | str]) -> list[UUID]:
        """Count one use of each row of a ticked tier (see
        :func:`primitives.engine._ticks.reference`)."""
        return await arun_op(self._conn, ticks.reference(self.ctx, memory_ids))

    async def ticked(self, tier: str, *,
                     scope_id: str | None = None) -> list[ticks.TickedRow]:
        """The live rows of a ticked tier, newest first."""
        return await arun_op(self._conn, ticks.ticked_rows(self.ctx, tier, scope_id=scope_id))

    async def consolidate(self, scope_id: str, *,
                          extractor: Any = None) -> list[consolidation.Consolidation]:
        """Consolidate one scope's episodes by every extraction rule of the spec (see
        :func:`primitives.engine._consolidate.consolidate`); a second call changes nothing."""
        return await arun_op(self._conn, consolidation.consolidate(self.ctx, scope_id,
                                                                   extractor=extractor))

    async def save_extracted(self, scope_id: str, decisions: Sequence[Any], *,
                   extractor: str = consolidation.AGENT_EXTRACTOR,
                   ) -> list[consolidation.Consolidation]:
        """A write-path agent's extracted memories from session ``scope_id``, applied as
        consolidation's are, without marking the session consolidated (see
        :func:`primitives.engine._consolidate.save_extracted`)."""
        return await arun_op(self._conn, consolidation.save_extracted(
            self.ctx, scope_id, decisions, extractor=extractor))

    async def mark_consolidated(self, scope_id: str, *,
                          extractor: str = consolidation.AGENT_EXTRACTOR,
                          ) -> list[consolidation.Consolidation]:
        """Claim session ``scope_id``'s unconsolidated rows for a write-path agent that has
        saved what it extracted (see :func:`primitives.engine._consolidate.mark_consolidated`);
        a second call claims nothing."""
        return await arun_op(self._conn, consolidation.mark_consolidated(
            self.ctx, scope_id, extractor=extractor))

    async def erase(self, subject: str, *, approvals: list[str], reason: str,
                    memory_ids: list[UUID] | None = None,
                    thread_ids: list[str] | None = None) -> int:
        return await arun_op(self._conn, core.erase(
            self.ctx, subject, approvals=approvals, reason=reason,
            memory_ids=memory_ids or [], thread_ids=thread_ids or []))

    async def get(self, memory_id: UUID) -> Memory | None:
        return await arun_op(self._conn, core.get(self.ctx, memory_id))

    async def history(self, memory_id: UUID) -> list[dict[str, Any]]:
        return await arun_op(self._conn, core.history(self.ctx, memory_id))

    async def observe_many(self, items: Sequence[Mapping[str, Any]]) -> list[Memory]:
        return await arun_op(self._conn, core.observe_many(self.ctx, items))

    async def reembed(self, *, batch_size: int = 256) -> int:
        return await arun_op(self._conn, core.reembed(self.ctx, batch_size=batch_size))

    async def embed_pending(self, *, batch_size: int = pending.DEFAULT_BATCH,
                            limit: int | None = None) -> int:
        """Like :meth:`TenantMemory.embed_pending`."""
        return await arun_op(self._conn, pending.embed_pending(
            self.ctx, batch_size=batch_size, limit=limit))

    @overload
    async def search(self, query: str = "", *, explain: Literal[False] = False,
                     **options: Any) -> SearchResult[Hit]: ...

    @overload
    async def search(self, query: str = "", *, explain: Literal[True],
                     **options: Any) -> Explanation: ...

    async def search(self, query: str = "", *, explain: bool = False,
                     **options: Any) -> SearchResult[Hit] | Explanation:
        explanation = await arun_op(self._conn, core.explain_search(self.ctx, query, **options))
        if self._access is not None:
            self._access.record(self.ctx.tenant, read_ids(explanation))
        return explanation if explain else explanation.hits

    async def context_pack(self, query: str = "", **options: Any) -> ContextPack:
        """The spec's context blocks for this turn: the transient tiers' current rows and the
        search hits for ``query``, within their token budgets (see ``_assemble.context``)."""
        pack = await arun_op(self._conn, assemble.context(self.ctx, query, **options))
        if self._access is not None:
            self._access.record(self.ctx.tenant, read_ids(pack))
        return pack

    async def item_batch(self, ops: Sequence[store_ops.ItemOp]) -> list[Any]:
        """Run LangGraph-store item operations in this transaction (see ``_store_ops``)."""
        return await arun_op(self._conn, store_ops.run_item_ops(self.ctx, ops))

    # graph (specs with graph:) ----------------------------------------------------------------
    async def entity(self, name: str, kind: str, *, aliases: Sequence[str] = (),
               summary: str | None = None) -> Entity:
        """The entity ``name`` of type ``kind``, created if new (aliases, summary merged)."""
        return await arun_op(self._conn, graph.entity(self.ctx, name, kind, aliases=aliases,
                                               summary=summary))

    async def find_entities(self, name: str, kind: str | None = None) -> list[Entity]:
        """Entities whose name or an alias is ``name`` (case-insensitively)."""
        return await arun_op(self._conn, graph.find_entities(self.ctx, name, kind))

    async def mention(self, memory_id: UUID, entities: Sequence[graph.EntityRef]) -> list[Entity]:
        """Record that a memory mentions these entities (ids, known names, or (name, type))."""
        return await arun_op(self._conn, graph.mention(self.ctx, memory_id, entities))

    async def relate(self, source_id: UUID, target_id: UUID, relation_type: str,
               **fields: Any) -> Edge:
        """A typed edge between two memories (see ``_graph.relate`` for the fields)."""
        return await arun_op(self._conn, graph.relate(self.ctx, source_id, target_id, relation_type,
                                               **fields))

    async def end_edge(self, edge_id: UUID, *, reason: str | None = None) -> Edge:
        """End an edge (``valid_until`` set; the row stays)."""
        return await arun_op(self._conn, graph.end_edge(self.ctx, edge_id, reason=reason))

    async def entity_memories(self, entity: UUID | str, *, limit: int = 20,
                        ) -> tuple[Entity, list[Memory]]:
        """An entity and the active memories that mention it, latest first."""
        return await arun_op(self._conn, graph.entity_memories(self.ctx, entity, limit=limit))

    async def confirm(self, memory_id: UUID, *, reason: str | None = None) -> Memory:
        """Protect an active memory from decay (confidence 1, decay rate 0), journalled."""
        return await arun_op(self._conn, store_ops.confirm_memory(
            self.ctx, memory_id, reason=reason))

    async def mark_exempt(self, memory_id: UUID, *, reason: str | None = None) -> Memory:
        """Exempt an active memory from decay (decay rate 0), journalled as ``exempted``."""
        return await arun_op(self._conn, store_ops.exempt_memory(
            self.ctx, memory_id, reason=reason))

    async def stats(self) -> dict[str, Any]:
        """Counts of this tenant's memory by typology, tier and state, and of its journal."""
        return await arun_op(self._conn, store_ops.memory_stats(self.ctx))

    async def explain_fact(self, memory_id: UUID, *,
                     depth: int = insight.MAX_PROVENANCE_DEPTH) -> insight.FactProvenance:
        """A memory's provenance chain: derived_from and supersedes edges followed, the
        versions that replaced it, its episodes and its journal (``_insight.explain_fact``)."""
        return await arun_op(self._conn, insight.explain_fact(self.ctx, memory_id, depth=depth))

    async def session_episodes(self, scope_id: str, *, limit: int = 50,
                         offset: int = 0) -> insight.SessionEpisodes:
        """A page of a session's episodes and whether consolidation has taken them all."""
        return await arun_op(self._conn, insight.session_episodes(self.ctx, scope_id, limit=limit,
                                                         offset=offset))

    async def weak_facts(self, *, below: float = insight.WEAK_BELOW,
                   horizon: timedelta = insight.WEAK_HORIZON, limit: int = 50,
                   now: datetime | None = None) -> list[insight.WeakFact]:
        """Facts with low confidence, a single source, or fading below the decay threshold
        within ``horizon``, weakest first (``_insight.weak_facts``)."""
        return await arun_op(self._conn, insight.weak_facts(self.ctx, below=below, horizon=horizon,
                                                   limit=limit, now=now))

    # discipline: sanitization gates and the outbox ----------------------------------------------
    async def cross(self, gate: str, memory_ids: Sequence[UUID | str] | None = None,
                    **options: Any) -> list[gates.Crossing]:
        """The async twin of :meth:`TenantMemory.cross`."""
        return await arun_op(self._conn, gates.cross(self.ctx, gate, memory_ids, **options))

    async def claim_outbox(self, *, consumer: str, event: str | None = None,
                           limit: int = 100) -> list[gates.OutboxEntry]:
        """The async twin of :meth:`TenantMemory.claim_outbox`."""
        return await arun_op(self._conn, gates.claim_outbox(self.ctx, consumer=consumer,
                                                            event=event, limit=limit))

    async def retry_outbox(self, ids: Sequence[UUID | str]) -> list[UUID]:
        """The async twin of :meth:`TenantMemory.retry_outbox`."""
        return await arun_op(self._conn, gates.retry_outbox(self.ctx, ids))
