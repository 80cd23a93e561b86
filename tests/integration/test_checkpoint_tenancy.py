"""Checkpointer tenancy, on both savers as the application role: the tenant comes from the
anchor in ``config["configurable"]``; another tenant's threads are invisible."""

from __future__ import annotations

import operator
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import psycopg
import pytest
from langgraph.checkpoint.conformance.test_utils import (
    generate_checkpoint,
    generate_config,
    generate_metadata,
)
from langgraph.graph import END, START, StateGraph
from psycopg import sql

from primitives.db import APP_ROLE, apply_migrations, tenant_transaction
from primitives.errors import StorageError, TenancyError
from primitives.langgraph import AsyncCheckpointer, Checkpointer
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore:.*(semantic|graph) signal")


@pytest.fixture(params=["sync", "async"])
async def saver(request: pytest.FixtureRequest, pg: PostgresHandle,
                spectral: AgentSpec) -> AsyncIterator[Any]:
    """Both savers, used through their async methods (the sync one runs its sync methods)."""
    if request.param == "sync":
        sync_saver = Checkpointer.from_spec(spectral, pg.app_dsn)
        yield sync_saver
        sync_saver.close()
    else:
        async_saver = await AsyncCheckpointer.from_spec(spectral, pg.app_dsn)
        yield async_saver
        await async_saver.aclose()


def _config(thread: str, tenant: str | None, **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = generate_config(thread, **extra)
    if tenant is not None:
        config["configurable"]["workspace_id"] = tenant
    return config


async def _put(saver: Any, thread: str, tenant: str, value: str) -> dict[str, Any]:
    checkpoint = generate_checkpoint(channel_values={"note": value, "doc": {"v": value}})
    checkpoint["channel_versions"] = {"note": 1, "doc": 1}
    return dict(await saver.aput(_config(thread, tenant), checkpoint, generate_metadata(),
                                 {"note": 1, "doc": 1}))


async def test_cross_tenant_thread_read_returns_nothing(saver: Any) -> None:
    a, b, thread = f"ws-{uuid.uuid4().hex[:6]}", f"ws-{uuid.uuid4().hex[:6]}", "shared-thread"
    stored = await _put(saver, thread, a, "tenant a's state")
    assert stored["configurable"]["workspace_id"] == a
    assert await saver.aget_tuple(_config(thread, b)) is None
    assert [t async for t in saver.alist(_config(thread, b))] == []
    leaked = dict(stored)
    leaked["configurable"] = {**stored["configurable"], "workspace_id": b}
    assert await saver.aget_tuple(leaked) is None  # even with a's checkpoint id
    await _put(saver, thread, b, "tenant b's state")  # the same thread id, its own row
    mine = await saver.aget_tuple(_config(thread, a))
    assert mine.checkpoint["channel_values"] == {"note": "tenant a's state",
                                                 "doc": {"v": "tenant a's state"}}
    await saver.for_tenant({"workspace_id": b}).adelete_thread(thread)
    assert await saver.aget_tuple(_config(thread, a)) is not None
    assert await saver.aget_tuple(_config(thread, b)) is None


async def test_a_call_without_the_anchor_fails_with_a_tenancy_error(saver: Any) -> None:
    with pytest.raises(TenancyError, match=r"put 'workspace_id' in config\['configurable'\]"):
        await saver.aget_tuple(_config("t", None))
    with pytest.raises(TenancyError, match="needs the tenant"):
        await saver.adelete_thread("t")
    with pytest.raises(TenancyError, match="needs the tenant"):
        [t async for t in saver.alist(None)]
    with pytest.raises(TenancyError):
        await saver.aget_tuple(_config("t", ""))
    bound = saver.for_tenant({"workspace_id": "ws-bound"})
    with pytest.raises(TenancyError, match="bound to 'ws-bound'"):
        await bound.aget_tuple(_config("t", "ws-other"))


def test_rows_carry_the_tenant_and_rls_hides_them_from_other_tenants(
    pg: PostgresHandle, spectral: AgentSpec
) -> None:
    tenant, other = f"ws-{uuid.uuid4().hex[:6]}", f"ws-{uuid.uuid4().hex[:6]}"
    with Checkpointer.from_spec(spectral, pg.app_dsn) as cp:
        checkpoint = generate_checkpoint(channel_values={"doc": {"k": 1}})
        checkpoint["channel_versions"] = {"doc": 1}
        stored = cp.put(_config("t-rls", tenant), checkpoint, generate_metadata(), {"doc": 1})
        cp.put_writes(stored, [("doc", {"k": 2})], "task-1")
    tables = ("spectral_checkpoints", "spectral_checkpoint_blobs", "spectral_checkpoint_writes")
    with psycopg.connect(pg.app_dsn, autocommit=True) as conn:
        assert conn.info.user == APP_ROLE
        for name in tables:
            query = sql.SQL("SELECT workspace_id FROM {} WHERE thread_id = 't-rls'").format(
                sql.Identifier("langgraph", name))
            with tenant_transaction(conn, tenant):
                assert conn.execute(query).fetchall() == [(tenant,)]
            with tenant_transaction(conn, other):
                assert conn.execute(query).fetchall() == []  # RLS, no explicit filter
            assert conn.execute(query).fetchall() == []  # no tenant set: nothing


def test_tables_come_from_the_plan_and_the_saver_never_runs_ddl(
    pg: PostgresHandle, fresh_database: Callable[[], str], spectral: AgentSpec
) -> None:
    admin = fresh_database()
    apply_migrations(admin)  # the framework, but not the agent's plan
    app = psycopg.conninfo.make_conninfo(admin, user=APP_ROLE, password="")
    with pytest.raises(StorageError, match="primitives migrate"):
        Checkpointer.from_spec(spectral, app)
    with Checkpointer.from_spec(spectral, pg.app_dsn) as cp:
        cp.setup()  # a check only
    with psycopg.connect(pg.app_dsn, autocommit=True) as conn, \
            pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("CREATE TABLE langgraph.rogue (x int)")


class _State(TypedDict):
    notes: Annotated[list[str], operator.add]


def _graph(saver: Any) -> Any:
    builder = StateGraph(_State)
    builder.add_node("note", lambda state: {"notes": [f"turn {len(state['notes']) + 1}"]})
    builder.add_edge(START, "note")
    builder.add_edge("note", END)
    return builder.compile(checkpointer=saver)


async def test_a_graph_keeps_each_tenants_thread_state_apart(saver: Any) -> None:
    graph = _graph(saver)
    a, b = f"ws-{uuid.uuid4().hex[:6]}", f"ws-{uuid.uuid4().hex[:6]}"
    run_a = {"configurable": {"thread_id": "chat", "workspace_id": a}}
    run_b = {"configurable": {"thread_id": "chat", "workspace_id": b}}
    await graph.ainvoke({"notes": ["hello a"]}, run_a)
    await graph.ainvoke({"notes": ["again a"]}, run_a)
    await graph.ainvoke({"notes": ["hello b"]}, run_b)
    state_a = (await graph.aget_state(run_a)).values["notes"]
    state_b = (await graph.aget_state(run_b)).values["notes"]
    assert state_a == ["hello a", "turn 2", "again a", "turn 4"]
    assert state_b == ["hello b", "turn 2"]
    history = [s async for s in graph.aget_state_history(run_a)]
    assert len(history) >= 4 and all(
        s.config["configurable"]["workspace_id"] == a for s in history)
    with pytest.raises(TenancyError, match="workspace_id"):
        await graph.ainvoke({"notes": ["no tenant"]}, {"configurable": {"thread_id": "chat"}})
