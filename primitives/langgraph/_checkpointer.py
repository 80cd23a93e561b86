"""Tenant-isolated LangGraph checkpointers: ``Checkpointer`` (sync) and ``AsyncCheckpointer``.

LangGraph's Postgres saver semantics (``_checkpoint_core``) in the spec's checkpointer
schema, on the tables the compiled plan creates (``primitives migrate``; ``setup()`` only
checks they exist). Every call runs in a tenant transaction as the application role
(the tenant set for the transaction; forced row-level security behind an explicit tenant
filter). The tenant comes from the anchor's tenant key in ``config["configurable"]``
(e.g. ``workspace_id``), or from :meth:`for_tenant` for the calls that take no config
(``delete_thread``, ``delete_for_runs``, ``copy_thread``, ``prune``, ``list(None)``).
Without either, a call raises :class:`~primitives.errors.TenancyError`.

Example::

    saver = Checkpointer.from_spec(load_spec("agents/spectral_agent.yaml"))
    graph = builder.compile(checkpointer=saver)
    graph.invoke(inputs, {"configurable": {"thread_id": "t-1", "workspace_id": "ws-1"}})
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping, Sequence
from typing import Any, Self, TypeVar

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from primitives.compile import agent_tables
from primitives.compile._checkpointer import CheckpointerTables, checkpointer_tables
from primitives.db import (
    app_dsn,
    atenant_transaction,
    check_tenant,
    resolve_dsn,
    tenant_transaction,
)
from primitives.db._session import aruntime_conninfo, runtime_conninfo
from primitives.errors import SpecError, StorageError, TenancyError
from primitives.langgraph._checkpoint_core import CheckpointCore, COp
from primitives.spec import AgentSpec

__all__ = ["AsyncCheckpointer", "Checkpointer"]

R = TypeVar("R")

_EXISTS = ("SELECT to_regclass(%s) IS NOT NULL, "
           "EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')")
"""Whether the checkpointer's tables exist, and whether the database is a Citus coordinator
(the thread delete then takes its cluster form)."""


def _tables(spec: AgentSpec) -> CheckpointerTables:
    tables = checkpointer_tables(agent_tables(spec))
    if tables is None:
        raise SpecError(f"agent '{spec.agent}' has no checkpointer "
                        "(persistence.checkpointer.enabled: false)",
                        file=spec.source, field="persistence.checkpointer.enabled")
    return tables


def _missing_tables(spec: AgentSpec, tables: CheckpointerTables) -> StorageError:
    return StorageError(
        f"the checkpointer tables of agent '{spec.agent}' ({tables.checkpoints.qualified}, ...) "
        "do not exist: run `primitives migrate` (the compiled plan creates them as the owner "
        "role; the saver never runs DDL)", agent=spec.agent)


class _Saver(CheckpointCore):
    """Spec, tables and tenant resolution, shared by both savers."""

    def __init__(self, spec: AgentSpec, *, serde: SerializerProtocol | None = None,
                 tenant: str | None = None, citus: bool = False) -> None:
        super().__init__(serde=serde)
        self.citus = citus
        self.spec = spec
        self.tables = _tables(spec)
        self.tenant_key = spec.anchor.tenant_key
        self._tenant = tenant

    def for_tenant(self, anchor: Mapping[str, object]) -> Self:
        """A saver bound to one tenant (sharing this one's pool), for the calls without a
        config and for configs that carry no anchor."""
        bound = copy.copy(self)
        bound._tenant = self._check(anchor.get(self.tenant_key), "for_tenant")
        return bound

    def _check(self, value: object, call: str) -> str:
        if not isinstance(value, str):
            raise TenancyError(
                f"checkpointer {call} of agent '{self.spec.agent}' needs the tenant key "
                f"'{self.tenant_key}' as a string, got {type(value).__name__}",
                agent=self.spec.agent)
        check_tenant(value)  # empty or NUL: TenancyError
        return value

    def tenant_of(self, config: RunnableConfig | None, call: str) -> str:
        """The tenant of a call: ``config["configurable"][tenant key]`` (or an alias of it,
        ``anchor.aliases``), else the bound one."""
        configurable = (config or {}).get("configurable") or {}
        given = configurable.get(self.tenant_key)
        if given is None:
            given = next((configurable[alias] for alias, key in self.spec.anchor.aliases.items()
                          if key == self.tenant_key and alias in configurable), None)
        if given is not None:
            tenant = self._check(given, call)
            if self._tenant is not None and tenant != self._tenant:
                raise TenancyError(
                    f"checkpointer {call}: config names {self.tenant_key}={tenant!r} but this "
                    f"saver is bound to {self._tenant!r}", agent=self.spec.agent)
            return tenant
        if self._tenant is not None:
            return self._tenant
        raise TenancyError(
            f"checkpointer {call} of agent '{self.spec.agent}' needs the tenant: put "
            f"'{self.tenant_key}' in config['configurable'] next to thread_id (e.g. "
            f"{{'thread_id': 't-1', '{self.tenant_key}': '...'}}), or use "
            f"saver.for_tenant({{'{self.tenant_key}': ...}})", agent=self.spec.agent)


def _execute(cur: psycopg.Cursor[Any], op: COp[R]) -> R:
    try:
        step = next(op)
        while True:
            rows: Any = None
            if step.many is not None:
                cur.executemany(step.statement, step.many)
            else:
                cur.execute(step.statement, step.params)
                if step.fetch == "all":
                    rows = cur.fetchall()
            step = op.send(rows)
    except StopIteration as done:
        result: R = done.value
        return result


async def _aexecute(cur: psycopg.AsyncCursor[Any], op: COp[R]) -> R:
    try:
        step = next(op)
        while True:
            rows: Any = None
            if step.many is not None:
                await cur.executemany(step.statement, step.many)
            else:
                await cur.execute(step.statement, step.params)
                if step.fetch == "all":
                    rows = await cur.fetchall()
            step = op.send(rows)
    except StopIteration as done:
        result: R = done.value
        return result


class Checkpointer(_Saver):
    """Synchronous tenant-isolated checkpointer; its async methods run the sync ones in a
    worker thread. Create with :meth:`from_spec`."""

    def __init__(self, spec: AgentSpec, pool: ConnectionPool[psycopg.Connection[Any]], *,
                 serde: SerializerProtocol | None = None, tenant: str | None = None,
                 citus: bool = False) -> None:
        super().__init__(spec, serde=serde, tenant=tenant, citus=citus)
        self._pool = pool

    @classmethod
    def from_spec(cls, spec: AgentSpec, dsn: str | None = None, *,
                  serde: SerializerProtocol | None = None,
                  max_connections: int = 4) -> Checkpointer:
        """Open a pool of application-role connections and check the tables exist."""
        tables = _tables(spec)
        try:
            runtime = runtime_conninfo(dsn or app_dsn(resolve_dsn()))
        except psycopg.Error as err:
            raise StorageError(f"cannot connect as the application role: {err}") from err
        pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            runtime, min_size=1, max_size=max_connections, open=False,
            kwargs={"autocommit": True}, name=f"primitives-checkpointer-{spec.agent}")
        try:
            pool.open(wait=True, timeout=15)
            with pool.connection() as conn:
                row = conn.execute(_EXISTS, (tables.checkpoints.qualified,)).fetchone()
        except Exception as err:  # psycopg.Error, psycopg_pool.PoolTimeout
            pool.close()
            raise StorageError(f"cannot connect as the application role: {err}") from err
        if not (row and row[0]):
            pool.close()
            raise _missing_tables(spec, tables)
        return cls(spec, pool, serde=serde, citus=bool(row[1]))

    def setup(self) -> None:
        """Check the tables exist; they are created by ``primitives migrate``, not here."""
        with self._pool.connection() as conn:
            row = conn.execute(_EXISTS, (self.tables.checkpoints.qualified,)).fetchone()
        if not (row and row[0]):
            raise _missing_tables(self.spec, self.tables)
        self.citus = bool(row[1])

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, tenant: str, op: COp[R]) -> R:
        with self._pool.connection() as conn, tenant_transaction(conn, tenant), \
                conn.cursor(binary=True) as cur:
            return _execute(cur, op)

    # BaseCheckpointSaver -------------------------------------------------------------------
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        found = self._run(tenant := self.tenant_of(config, "get_tuple"),
                          self.select_op(tenant, config, latest=True))
        return found[0] if found else None

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None,
             limit: int | None = None) -> Iterator[CheckpointTuple]:
        tenant = self.tenant_of(config, "list")
        yield from self._run(tenant, self.select_op(tenant, config, filter=filter,
                                                    before=before, limit=limit))

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        tenant = self.tenant_of(config, "put")
        return self._run(tenant, self.put_op(tenant, config, checkpoint, metadata, new_versions))

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                   task_id: str, task_path: str = "") -> None:
        tenant = self.tenant_of(config, "put_writes")
        self._run(tenant, self.put_writes_op(tenant, config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        tenant = self.tenant_of(None, "delete_thread")
        self._run(tenant, self.delete_threads_op(tenant, [str(thread_id)]))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        tenant = self.tenant_of(None, "delete_for_runs")
        self._run(tenant, self.delete_runs_op(tenant, run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        tenant = self.tenant_of(None, "copy_thread")
        self._run(tenant, self.copy_thread_op(tenant, source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        tenant = self.tenant_of(None, "prune")
        self._run(tenant, self.prune_op(tenant, thread_ids, strategy))

    # async: the sync methods in a worker thread ---------------------------------------------
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(self, config: RunnableConfig | None, *,
                    filter: dict[str, Any] | None = None, before: RunnableConfig | None = None,
                    limit: int | None = None) -> AsyncIterator[CheckpointTuple]:
        found = await asyncio.to_thread(
            lambda: [*self.list(config, filter=filter, before=before, limit=limit)])
        for item in found:
            yield item

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint,
                   metadata: CheckpointMetadata, new_versions: ChannelVersions) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                          task_id: str, task_path: str = "") -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)


class AsyncCheckpointer(_Saver):
    """Asynchronous tenant-isolated checkpointer; its sync methods may be called from
    another thread than its event loop's (as LangGraph does for sync nodes)."""

    def __init__(self, spec: AgentSpec, pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]],
                 *, serde: SerializerProtocol | None = None, tenant: str | None = None,
                 citus: bool = False) -> None:
        super().__init__(spec, serde=serde, tenant=tenant, citus=citus)
        self._pool = pool
        self._loop = asyncio.get_running_loop()

    @classmethod
    async def from_spec(cls, spec: AgentSpec, dsn: str | None = None, *,
                        serde: SerializerProtocol | None = None,
                        max_connections: int = 4) -> AsyncCheckpointer:
        tables = _tables(spec)
        try:
            runtime = await aruntime_conninfo(dsn or app_dsn(resolve_dsn()))
        except psycopg.Error as err:
            raise StorageError(f"cannot connect as the application role: {err}") from err
        pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
            runtime, min_size=1, max_size=max_connections, open=False,
            kwargs={"autocommit": True}, name=f"primitives-async-checkpointer-{spec.agent}")
        try:
            await pool.open(wait=True, timeout=15)
            async with pool.connection() as conn:
                cursor = await conn.execute(_EXISTS, (tables.checkpoints.qualified,))
                row = await cursor.fetchone()
        except Exception as err:  # psycopg.Error, psycopg_pool.PoolTimeout
            await pool.close()
            raise StorageError(f"cannot connect as the application role: {err}") from err
        if not (row and row[0]):
            await pool.close()
            raise _missing_tables(spec, tables)
        return cls(spec, pool, serde=serde, citus=bool(row[1]))

    async def setup(self) -> None:
        """Check the tables exist; they are created by ``primitives migrate``, not here."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(_EXISTS, (self.tables.checkpoints.qualified,))
            row = await cursor.fetchone()
        if not (row and row[0]):
            raise _missing_tables(self.spec, self.tables)
        self.citus = bool(row[1])

    async def aclose(self) -> None:
        await self._pool.close()

    async def __aenter__(self) -> AsyncCheckpointer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _run(self, tenant: str, op: COp[R]) -> R:
        async with self._pool.connection() as conn, atenant_transaction(conn, tenant):
            async with conn.cursor(binary=True) as cur:
                return await _aexecute(cur, op)

    def _sync(self, call: str, make: Callable[[], Coroutine[Any, Any, R]]) -> R:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            raise asyncio.InvalidStateError(
                f"synchronous {call} on AsyncCheckpointer from its own event loop would block "
                f"it: use await saver.a{call}(...)")
        return asyncio.run_coroutine_threadsafe(make(), self._loop).result()

    # BaseCheckpointSaver, async --------------------------------------------------------------
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        tenant = self.tenant_of(config, "get_tuple")
        found = await self._run(tenant, self.select_op(tenant, config, latest=True))
        return found[0] if found else None

    async def alist(self, config: RunnableConfig | None, *,
                    filter: dict[str, Any] | None = None, before: RunnableConfig | None = None,
                    limit: int | None = None) -> AsyncIterator[CheckpointTuple]:
        tenant = self.tenant_of(config, "list")
        for item in await self._run(tenant, self.select_op(tenant, config, filter=filter,
                                                           before=before, limit=limit)):
            yield item

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint,
                   metadata: CheckpointMetadata, new_versions: ChannelVersions) -> RunnableConfig:
        tenant = self.tenant_of(config, "put")
        return await self._run(tenant, self.put_op(tenant, config, checkpoint, metadata,
                                                   new_versions))

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                          task_id: str, task_path: str = "") -> None:
        tenant = self.tenant_of(config, "put_writes")
        await self._run(tenant, self.put_writes_op(tenant, config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        tenant = self.tenant_of(None, "delete_thread")
        await self._run(tenant, self.delete_threads_op(tenant, [str(thread_id)]))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        tenant = self.tenant_of(None, "delete_for_runs")
        await self._run(tenant, self.delete_runs_op(tenant, run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        tenant = self.tenant_of(None, "copy_thread")
        await self._run(tenant, self.copy_thread_op(tenant, source_thread_id, target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        tenant = self.tenant_of(None, "prune")
        await self._run(tenant, self.prune_op(tenant, thread_ids, strategy))

    # sync: the async methods on the saver's loop ---------------------------------------------
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._sync("get_tuple", lambda: self.aget_tuple(config))

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None,
             limit: int | None = None) -> Iterator[CheckpointTuple]:
        async def collect() -> list[CheckpointTuple]:
            return [t async for t in self.alist(config, filter=filter, before=before,
                                                limit=limit)]
        yield from self._sync("list", collect)

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        return self._sync("put", lambda: self.aput(config, checkpoint, metadata, new_versions))

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                   task_id: str, task_path: str = "") -> None:
        self._sync("put_writes", lambda: self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._sync("delete_thread", lambda: self.adelete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._sync("delete_for_runs", lambda: self.adelete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._sync("copy_thread", lambda: self.acopy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._sync("prune", lambda: self.aprune(thread_ids, strategy=strategy))
