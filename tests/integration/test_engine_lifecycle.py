"""Lifecycle contract, run against both the sync and the async engine (one core, two executors)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives.engine import Engine, backoff_seconds
from primitives.errors import GovernanceError, MemoryWriteFail, PolicyViolation
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle
from tests.integration._awaiting import engine_sessions

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")


@pytest.fixture(params=["sync", "async"])
async def api(request: pytest.FixtureRequest, pg: PostgresHandle,
              spectral: AgentSpec) -> AsyncIterator[Callable[..., Any]]:
    async with engine_sessions(request.param, spectral, pg.app_dsn) as session:
        yield session


def _anchor() -> dict[str, str]:
    return {"workspace_id": f"ws-{uuid.uuid4().hex[:8]}"}


async def test_end_scope_removes_unlinked_rows_keeps_linked_and_journals_both(api: Any) -> None:
    anchor = _anchor()
    async with api(anchor) as mem:
        kept = await mem.observe("run", "basis of a published decision", scope_id="run-1")
        gone = await mem.observe("run", "scratch note", scope_id="run-1")
        other = await mem.observe("run", "another run's note", scope_id="run-2")
        assert await mem.link_action("decision-9", [kept.id], "published_decision") == 1
        removed, retained = await mem.end_scope("run", "run-1")
        assert (removed, retained) == (1, 1)
        assert await mem.get(gone.id) is None
        assert await mem.get(kept.id) is not None
        assert await mem.get(other.id) is not None
        kinds = [e["kind"] for e in await mem.history(gone.id)]
        # compounded into the workspace tier first (run.episodic -> workspace.episodic)
        assert kinds == ["observed", "compounded", "removed_at_scope_end"]


async def test_end_scope_of_the_persistent_tier_is_refused(api: Any) -> None:
    async with api(_anchor()) as mem:
        with pytest.raises(GovernanceError, match="persistent"):
            await mem.end_scope("workspace", "ws")


async def test_state_changes_keep_the_row_and_leave_retrieval(api: Any) -> None:
    anchor = _anchor()
    async with api(anchor) as mem:
        a = await mem.observe("workspace", "prefers tables over prose", typology="procedural")
        b = await mem.observe("workspace", "prefers short answers", typology="procedural")
        c = await mem.observe("workspace", "prefers dark mode", typology="procedural")
        await mem.archive(a.id, reason="stale")
        await mem.tombstone(b.id, reason="user asked")
        await mem.invalidate(c.id, reason="contradicted")
        assert await mem.search("prefers") == []
        states = [(await mem.get(m.id)).state for m in (a, b, c)]
        # procedural archives on explicit invalidation: the invalidated row is archived too
        assert states == ["archived", "tombstoned", "archived"]
        assert (await mem.get(c.id)).invalidated_at is not None


async def test_mark_exempt_sets_decay_rate_zero_with_an_exempted_event(api: Any) -> None:
    async with api(_anchor()) as mem:
        episode = await mem.observe("workspace", "scan 12 found a drift", typology="episodic")
        exempted = await mem.mark_exempt(episode.id, reason="reference scan")
        assert exempted.id == episode.id and exempted.confidence == episode.confidence
        row = await _fetch(mem.connection, sql.SQL("SELECT decay_rate FROM {} WHERE id = %s")
                           .format(sql.Identifier("platform", "spectral_memories")),
                           (episode.id,))
        assert row == (0.0,)
        [event] = [e for e in await mem.history(episode.id) if e["kind"] == "exempted"]
        assert event["payload"]["decay_rate"] == 0.0 and "reason_sha256" in event["payload"]
        await mem.archive(episode.id, reason="disposed")
        with pytest.raises(GovernanceError, match="not active"):
            await mem.mark_exempt(episode.id)


async def test_supersede_links_versions_and_history_spans_the_chain(api: Any) -> None:
    async with api(_anchor()) as mem:
        old = await mem.observe("workspace", "the gate needs two corroborations",
                                typology="procedural", key="gate")
        new = await mem.supersede(old.id, "the gate needs three corroborations",
                                  reason="rule revision")
        refreshed = await mem.get(old.id)
        assert refreshed.superseded_at is not None and new.key == "gate"
        kinds = [e["kind"] for e in await mem.history(new.id)]
        # procedural: update_with_supersession archives the prior (conflict_resolved)
        assert kinds == ["observed", "superseded", "observed", "conflict_resolved",
                         "supersession_reason"]
        with pytest.raises(GovernanceError, match="not active"):
            await mem.supersede(old.id, "again")


async def test_erase_replaces_content_with_hash_keeps_row_and_links(api: Any) -> None:
    anchor = _anchor()
    async with api(anchor) as mem:
        target = await mem.observe("workspace", "Dana's phone is 555-0101",
                                   typology="procedural", envelope={"subject": "dana"})
        await mem.link_action("ticket-1", [target.id], "support_reply")
        with pytest.raises(GovernanceError, match="approval"):
            await mem.erase("dana", approvals=[], reason="gdpr request")
        assert await mem.erase("dana", approvals=["dpo"], reason="gdpr request") == 1
        erased = await mem.get(target.id)
        assert erased.content.startswith("sha256:") and "555" not in erased.content
        assert erased.envelope == {} and erased.value == {}
        view = sql.SQL("SELECT residue FROM {} WHERE memory_id = %s")
        row = await _fetch(mem.connection, view.format(
            sql.Identifier("platform", "spectral_audit_erasures")), (target.id,))
        assert row == (False,)
        assert await mem.search("phone") == []


async def _fetch(conn: Any, query: Any, params: Any) -> Any:
    cursor = conn.execute(query, params)
    if hasattr(cursor, "__await__"):
        cursor = await cursor
        return await cursor.fetchone()
    return cursor.fetchone()


async def test_link_action_to_a_missing_memory_is_refused(api: Any) -> None:
    async with api(_anchor()) as mem:
        with pytest.raises(Exception, match="no memory"):
            await mem.link_action("a-1", [uuid.uuid4()], "x")
        with pytest.raises(PolicyViolation):
            await mem.link_action("", [], "x")


def test_hard_delete_of_persistent_or_linked_memory_is_refused_by_the_database(
    pg: PostgresHandle, spectral: AgentSpec
) -> None:
    engine = Engine.connect(spectral, pg.app_dsn)
    anchor = _anchor()
    with engine:
        with engine.tenant(anchor) as mem:
            durable = mem.observe("workspace", "durable", typology="procedural")
            linked = mem.observe("cycle", "linked", scope_id="c")
            mem.link_action("act", [linked.id], "basis")
        for target in (durable.id, linked.id):
            with pytest.raises(PolicyViolation), engine.tenant(anchor) as mem:
                mem.connection.execute(sql.SQL("DELETE FROM {} WHERE id = %s").format(
                    engine.tables.memories.ident), (target,))


def test_write_retries_once_then_raises_memory_write_fail(
    pg: PostgresHandle, spectral: AgentSpec
) -> None:
    waits: list[float] = []
    calls = 0

    def flaky(mem: Any) -> None:
        nonlocal calls
        calls += 1
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    with Engine.connect(spectral, pg.app_dsn) as engine:
        with pytest.raises(MemoryWriteFail) as caught:
            engine.write(_anchor(), flaky, seed="job-7", sleep=waits.append)
    assert calls == 2
    assert waits == [backoff_seconds("job-7")]
    envelope = caught.value.envelope()
    assert envelope["error"] == "MEMORY_WRITE_FAIL" and envelope["attempts"] == 2
    assert "might not remember" in envelope["user_message"]


def test_write_succeeds_on_the_retry_and_commits_once(
    pg: PostgresHandle, spectral: AgentSpec
) -> None:
    anchor = _anchor()
    attempts = 0

    def once_flaky(mem: Any) -> Any:
        nonlocal attempts
        attempts += 1
        created = mem.observe("cycle", "written on the second try")
        if attempts == 1:
            raise psycopg.OperationalError("connection lost mid-transaction")
        return created

    with Engine.connect(spectral, pg.app_dsn) as engine:
        engine.write(anchor, once_flaky, sleep=lambda s: None)
        with engine.tenant(anchor) as mem:
            hits = mem.search("second try")
            events = mem.connection.execute(sql.SQL("SELECT count(*) FROM {}").format(
                engine.tables.events.ident)).fetchone()
    assert len(hits) == 1  # the first attempt left no partial memory
    assert events == (1,)  # and no orphan event


def test_policy_errors_are_not_retried(pg: PostgresHandle, spectral: AgentSpec) -> None:
    calls = 0

    def refused(mem: Any) -> None:
        nonlocal calls
        calls += 1
        mem.observe("workspace", "x", typology="semantic")

    with Engine.connect(spectral, pg.app_dsn) as engine, pytest.raises(GovernanceError):
        engine.write(_anchor(), refused, sleep=lambda s: None)
    assert calls == 1
