"""Retrieval records access (count, last time), batched off the read path; the retention
view reads it: a persistent row read recently is ACTIVE, one unused past orphan_after is
ORPHANED, one an action links is REFERENCED."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives.compile import agent_tables
from primitives.engine import AsyncEngine, Engine
from primitives.lifecycle._access import AccessLog
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")


def _ws() -> dict[str, str]:
    return {"workspace_id": f"ws-{uuid.uuid4().hex[:10]}"}


def _marks(admin: psycopg.Connection[Any], spec: AgentSpec, tenant: str
           ) -> dict[str, tuple[int, bool]]:
    tables = agent_tables(spec)
    rows = admin.execute(sql.SQL(
        "SELECT content, access_count, last_accessed_at IS NOT NULL FROM {} WHERE {} = %s"
    ).format(tables.memories.ident, tables.tenant), (tenant,)).fetchall()
    return {content: (count, seen) for content, count, seen in rows}


def _states(auditor: psycopg.Connection[Any], spec: AgentSpec, tenant: str) -> dict[str, str]:
    tables = agent_tables(spec)
    rows = auditor.execute(sql.SQL(
        "SELECT m.content, r.retention_state FROM {} AS r JOIN {} AS m "
        "ON m.{t} = r.{t} AND m.id = r.memory_id WHERE r.{t} = %s").format(
        tables.audit_retention_state.ident, tables.memories.ident, t=tables.tenant),
        (tenant,)).fetchall()
    return dict(rows)


def test_a_search_marks_what_it_returned_once_flushed(
        pg: PostgresHandle, spectral: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    anchor = _ws()
    with Engine.connect(spectral, pg.app_dsn, max_connections=2) as engine:
        engine.access = AccessLog(max_ids=10_000, max_age=3600)  # flushed by hand below
        with engine.tenant(anchor) as mem:
            mem.observe("workspace", "prefers tables over prose", typology="procedural")
            mem.observe("workspace", "prefers dark mode", typology="procedural")
        for _ in range(3):
            assert [h.memory.content for h in engine.search(anchor, "tables")] == [
                "prefers tables over prose"]
        assert _marks(admin_conn, spectral, anchor["workspace_id"])[
            "prefers tables over prose"] == (0, False)  # buffered, not yet written
        assert engine.flush_access() == 1
    marks = _marks(admin_conn, spectral, anchor["workspace_id"])
    assert marks == {"prefers tables over prose": (3, True), "prefers dark mode": (0, False)}


def test_a_full_buffer_flushes_on_the_read_that_fills_it(
        pg: PostgresHandle, spectral: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    anchor = _ws()
    with Engine.connect(spectral, pg.app_dsn, max_connections=2) as engine:
        engine.access = AccessLog(max_ids=2, max_age=3600)
        with engine.tenant(anchor) as mem:
            for n in range(3):
                mem.observe("workspace", f"preference number {n}", typology="procedural")
        engine.search(anchor, "preference", limit=1)
        assert len(engine.access) == 1
        engine.search(anchor, "preference", limit=3)  # fills the buffer: written now,
        engine.wait_access()  # on a thread of its own, not by the read
        assert len(engine.access) == 0
        marks = _marks(admin_conn, spectral, anchor["workspace_id"])
        assert sum(count for count, _ in marks.values()) == 4


def test_reads_inside_a_tenant_transaction_are_marked_at_its_end(
        pg: PostgresHandle, spectral: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    anchor = _ws()
    with Engine.connect(spectral, pg.app_dsn, max_connections=2) as engine:
        engine.access = AccessLog(max_ids=1, max_age=3600)
        with engine.tenant(anchor) as mem:
            mem.observe("workspace", "likes terse summaries", typology="procedural")
        with engine.tenant(anchor) as mem:
            assert len(mem.search("terse")) == 1
        engine.wait_access()
        assert _marks(admin_conn, spectral, anchor["workspace_id"]) == {
            "likes terse summaries": (1, True)}


async def test_the_async_engine_marks_access_and_flushes_on_close(
        pg: PostgresHandle, spectral: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    anchor = _ws()
    engine = await AsyncEngine.connect(spectral, pg.app_dsn)
    engine.access = AccessLog(max_ids=10_000, max_age=3600)
    async with engine.tenant(anchor) as mem:
        await mem.observe("workspace", "wants weekly digests", typology="procedural")
    await engine.search(anchor, "digests")
    await engine.context_pack(anchor, "digests")
    await engine.close()
    assert _marks(admin_conn, spectral, anchor["workspace_id"]) == {
        "wants weekly digests": (2, True)}


def test_retention_states_follow_real_access(
        pg: PostgresHandle, spectral: AgentSpec, admin_conn: psycopg.Connection[Any],
        auditor_conn: psycopg.Connection[Any]) -> None:
    anchor = _ws()
    tables = agent_tables(spectral)
    with Engine.connect(spectral, pg.app_dsn, max_connections=2) as engine:
        with engine.tenant(anchor) as mem:
            for text in ("read lately", "never read", "linked to a decision"):
                row = mem.observe("workspace", text, typology="procedural")
            mem.link_action("decision-1", [row.id], "published_decision")
        # everything was written 200 days ago (past the workspace's 180-day orphan_after)
        admin_conn.execute(sql.SQL(
            "UPDATE {} SET created_at = now() - interval '200 days' WHERE {} = %s").format(
            tables.memories.ident, tables.tenant), (anchor["workspace_id"],))
        engine.search(anchor, "lately")
        engine.flush_access()
    assert _states(auditor_conn, spectral, anchor["workspace_id"]) == {
        "read lately": "ACTIVE", "never read": "ORPHANED",
        "linked to a decision": "REFERENCED"}


def test_the_read_that_finds_the_buffer_due_does_not_write_it_itself(
        pg: PostgresHandle, spectral: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    import threading
    anchor = _ws()
    with Engine.connect(spectral, pg.app_dsn, max_connections=2) as engine:
        engine.access = AccessLog(max_ids=1, max_age=3600)
        with engine.tenant(anchor) as mem:
            mem.observe("workspace", "likes short answers", typology="procedural")
        writers: list[str] = []
        flush = engine.flush_access

        def spy() -> int:
            writers.append(threading.current_thread().name)
            return flush()

        engine.flush_access = spy  # type: ignore[method-assign]
        engine.search(anchor, "short answers")
        engine.wait_access()
        assert writers == ["primitives-access-flush"]
        assert _marks(admin_conn, spectral, anchor["workspace_id"]) == {
            "likes short answers": (1, True)}


async def test_the_async_engine_writes_due_marks_in_a_task_of_their_own(
        pg: PostgresHandle, spectral: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    anchor = _ws()
    engine = await AsyncEngine.connect(spectral, pg.app_dsn)
    try:
        engine.access = AccessLog(max_ids=1, max_age=3600)
        async with engine.tenant(anchor) as mem:
            await mem.observe("workspace", "wants plain text", typology="procedural")
        await engine.search(anchor, "plain text")
        assert engine._flusher is not None  # scheduled, not awaited by the read
        await engine.wait_access()
        assert _marks(admin_conn, spectral, anchor["workspace_id"]) == {
            "wants plain text": (1, True)}
    finally:
        await engine.close()


@pytest.mark.parametrize("native_async", [False, True], ids=["sync", "async"])
async def test_the_langgraph_store_marks_what_its_searches_return(
        pg: PostgresHandle, spectral: AgentSpec, admin_conn: psycopg.Connection[Any],
        native_async: bool) -> None:
    from primitives.langgraph import AsyncMemoryStore, MemoryStore
    ws = _ws()["workspace_id"]
    ns = (ws, "workspace", "procedural", "style")
    if native_async:
        astore = await AsyncMemoryStore.from_spec(spectral, pg.app_dsn)
        await astore.aput(ns, "answers", {"text": "prefers short answers"})
        await astore.aput(ns, "tone", {"text": "formal tone in reports"})
        assert [i.key for i in await astore.asearch((ws,), query="short answers")] == ["answers"]
        await astore.aget(ns, "tone")  # a get is not a retrieval
        await astore.aclose()
    else:
        store = MemoryStore.from_spec(spectral, pg.app_dsn)
        store.put(ns, "answers", {"text": "prefers short answers"})
        store.put(ns, "tone", {"text": "formal tone in reports"})
        assert [i.key for i in store.search((ws,), query="short answers")] == ["answers"]
        store.get(ns, "tone")
        store.close()
    tables = agent_tables(spectral)
    rows = dict(admin_conn.execute(sql.SQL(
        "SELECT key, access_count FROM {} WHERE {} = %s AND superseded_at IS NULL").format(
        tables.memories.ident, tables.tenant), (ws,)).fetchall())
    assert rows == {"answers": 1, "tone": 0}
