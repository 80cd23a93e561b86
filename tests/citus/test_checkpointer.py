"""The LangGraph checkpointer on the cluster, both savers as the application role: a
tenant's checkpoints (inline values, blobs, pending writes) are written, read back and
listed; another tenant sees none of them and cannot delete them; deleting a thread removes
its rows (checked on the data, as the admin) through the cluster's form of the thread
delete, which runs on the tenant's worker."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.conformance.test_utils import (
    generate_checkpoint,
    generate_config,
    generate_metadata,
)
from psycopg import sql

from primitives.compile._checkpointer import CheckpointerTables, checkpointer_tables
from primitives.compile._definer import checkpoint_delete_threads_function
from primitives.db import APP_ROLE, tenant_transaction
from primitives.errors import PolicyViolation
from primitives.langgraph import AsyncCheckpointer, Checkpointer
from primitives.spec import AgentSpec
from tests.citus._cluster import Cluster
from tests.security._support import SPEC_BY_AGENT, TABLES_BY_AGENT

pytestmark = pytest.mark.filterwarnings("ignore:.*(semantic|graph) signal")

SPEC: AgentSpec = SPEC_BY_AGENT["spectral"]
TABLES: CheckpointerTables | None = checkpointer_tables(TABLES_BY_AGENT["spectral"])


class _Sync:
    """The sync saver's sync methods behind the async names the test calls."""

    def __init__(self, saver: Checkpointer) -> None:
        self.saver = saver

    async def aput(self, *args: Any) -> Any:
        return self.saver.put(*args)

    async def aput_writes(self, *args: Any) -> None:
        self.saver.put_writes(*args)

    async def aget_tuple(self, config: Any) -> Any:
        return self.saver.get_tuple(config)

    async def alist(self, config: Any) -> list[Any]:
        return list(self.saver.list(config))

    async def adelete_thread(self, thread: str, tenant: str) -> None:
        self.saver.for_tenant({"workspace_id": tenant}).delete_thread(thread)


class _Async:
    def __init__(self, saver: AsyncCheckpointer) -> None:
        self.saver = saver

    async def aput(self, *args: Any) -> Any:
        return await self.saver.aput(*args)

    async def aput_writes(self, *args: Any) -> None:
        await self.saver.aput_writes(*args)

    async def aget_tuple(self, config: Any) -> Any:
        return await self.saver.aget_tuple(config)

    async def alist(self, config: Any) -> list[Any]:
        return [t async for t in self.saver.alist(config)]

    async def adelete_thread(self, thread: str, tenant: str) -> None:
        await self.saver.for_tenant({"workspace_id": tenant}).adelete_thread(thread)


@pytest.fixture(params=["sync", "async"])
async def saver(request: pytest.FixtureRequest, cluster: Cluster,
                coordinator: str) -> AsyncIterator[Any]:
    dsn = cluster.coordinator.dsn(APP_ROLE)
    if request.param == "sync":
        sync_saver = Checkpointer.from_spec(SPEC, dsn)
        assert sync_saver.citus
        yield _Sync(sync_saver)
        sync_saver.close()
    else:
        async_saver = await AsyncCheckpointer.from_spec(SPEC, dsn)
        assert async_saver.citus
        yield _Async(async_saver)
        await async_saver.aclose()


def _config(thread: str, tenant: str, **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = generate_config(thread, **extra)
    config["configurable"]["workspace_id"] = tenant
    return config


async def _put(saver: Any, thread: str, tenant: str, value: str) -> dict[str, Any]:
    """A checkpoint with an inline value and a blob, and one pending write."""
    checkpoint = generate_checkpoint(channel_values={"note": value, "doc": {"v": value}})
    checkpoint["channel_versions"] = {"note": 1, "doc": 1}
    stored = dict(await saver.aput(_config(thread, tenant), checkpoint, generate_metadata(),
                                   {"note": 1, "doc": 1}))
    await saver.aput_writes(stored, [("doc", {"w": value})], "task-1", "")
    return stored


def _rows(coordinator: str, tenant: str, thread: str) -> list[int]:
    """Rows of the tenant's thread in the three tables, read as the admin (no policy)."""
    assert TABLES is not None
    with psycopg.connect(coordinator, autocommit=True) as conn:
        return [conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE {} = %s AND thread_id = %s")
                             .format(table.ident, TABLES.tenant), (tenant, thread)).fetchone()[0]
                for table in (TABLES.checkpoints, TABLES.blobs, TABLES.writes)]


async def test_a_tenants_checkpoints_round_trip_and_another_tenant_sees_none(
    saver: Any, coordinator: str
) -> None:
    a, b, thread = (f"ws-{uuid.uuid4().hex[:6]}", f"ws-{uuid.uuid4().hex[:6]}",
                    f"thread-{uuid.uuid4().hex[:6]}")
    stored = await _put(saver, thread, a, "tenant a's state")
    assert stored["configurable"]["workspace_id"] == a
    assert _rows(coordinator, a, thread) == [1, 1, 1]

    mine = await saver.aget_tuple(_config(thread, a))
    assert mine is not None
    assert mine.checkpoint["channel_values"] == {"note": "tenant a's state",
                                                 "doc": {"v": "tenant a's state"}}
    assert [(w[1], w[2]) for w in mine.pending_writes] == [("doc", {"w": "tenant a's state"})]
    assert [t.config["configurable"]["checkpoint_id"] for t in await saver.alist(
        _config(thread, a))] == [stored["configurable"]["checkpoint_id"]]

    assert await saver.aget_tuple(_config(thread, b)) is None
    assert await saver.alist(_config(thread, b)) == []
    leaked = {**stored, "configurable": {**stored["configurable"], "workspace_id": b}}
    assert await saver.aget_tuple(leaked) is None  # even with a's checkpoint id

    await _put(saver, thread, b, "tenant b's state")  # the same thread id, its own rows
    await saver.adelete_thread(thread, b)
    assert _rows(coordinator, b, thread) == [0, 0, 0]
    assert _rows(coordinator, a, thread) == [1, 1, 1]  # b's delete left a's rows
    assert (await saver.aget_tuple(_config(thread, a))) is not None

    await saver.adelete_thread(thread, a)
    assert await saver.aget_tuple(_config(thread, a)) is None
    assert _rows(coordinator, a, thread) == [0, 0, 0]


def test_the_cluster_thread_delete_refuses_another_tenant(
    cluster: Cluster, coordinator: str
) -> None:
    """Called directly by the application role for a tenant other than the transaction's,
    the cluster's thread delete refuses, and the other tenant's rows stay."""
    assert TABLES is not None
    a, b, thread = (f"ws-{uuid.uuid4().hex[:6]}", f"ws-{uuid.uuid4().hex[:6]}",
                    f"thread-{uuid.uuid4().hex[:6]}")
    with Checkpointer.from_spec(SPEC, cluster.coordinator.dsn(APP_ROLE)) as saver:
        checkpoint = generate_checkpoint(channel_values={"doc": {"v": "b's"}})
        checkpoint["channel_versions"] = {"doc": 1}
        saver.put(_config(thread, b), checkpoint, generate_metadata(), {"doc": 1})
    assert _rows(coordinator, b, thread) == [1, 1, 0]
    delete = sql.SQL("SELECT {}(%s::text, %s::text[])").format(
        checkpoint_delete_threads_function(TABLES))
    with psycopg.connect(cluster.coordinator.dsn(APP_ROLE), autocommit=True) as conn:
        with pytest.raises(PolicyViolation,
                           match="only for the tenant of the current transaction"):
            with tenant_transaction(conn, a):
                conn.execute(delete, (b, [thread]))
        with tenant_transaction(conn, a):  # a's own call reaches only a's rows
            conn.execute(delete, (a, [thread]))
    assert _rows(coordinator, b, thread) == [1, 1, 0]


def test_copy_prune_and_run_deletes_on_the_cluster(cluster: Cluster, coordinator: str) -> None:
    """A thread copied, pruned to its latest checkpoint, and a run's checkpoints deleted, for
    one tenant; another tenant's thread of the same id keeps its rows through all three."""
    a, b = f"ws-{uuid.uuid4().hex[:6]}", f"ws-{uuid.uuid4().hex[:6]}"
    thread, copy = f"thread-{uuid.uuid4().hex[:6]}", f"copy-{uuid.uuid4().hex[:6]}"
    with Checkpointer.from_spec(SPEC, cluster.coordinator.dsn(APP_ROLE)) as saver:
        config: dict[str, Any] = _config(thread, a)
        for step, value in enumerate(("first", "second")):
            checkpoint = generate_checkpoint(channel_values={"doc": {"v": value}})
            checkpoint["channel_versions"] = {"doc": step + 1}
            config = dict(saver.put(config, checkpoint, generate_metadata(step=step,
                                                                          run_id="run-1"),
                                    {"doc": step + 1}))
        other = generate_checkpoint(channel_values={"doc": {"v": "b's"}})
        other["channel_versions"] = {"doc": 1}
        saver.put(_config(thread, b), other, generate_metadata(run_id="run-1"), {"doc": 1})
        assert _rows(coordinator, a, thread) == [2, 2, 0]

        mine = saver.for_tenant({"workspace_id": a})
        mine.copy_thread(thread, copy)
        assert _rows(coordinator, a, copy) == [2, 2, 0]
        mine.prune([thread])
        assert _rows(coordinator, a, thread) == [1, 1, 0]
        latest = saver.get_tuple(_config(thread, a))
        assert latest is not None and latest.checkpoint["channel_values"] == {
            "doc": {"v": "second"}}
        mine.delete_for_runs(["run-1"])
        assert _rows(coordinator, a, thread) == [0, 0, 0]
        assert _rows(coordinator, a, copy) == [0, 0, 0]
    assert _rows(coordinator, b, thread) == [1, 1, 0]
