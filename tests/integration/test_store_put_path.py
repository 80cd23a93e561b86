"""The store's one-statement put (``store_ops.put_items``) writes what the op-by-op path
writes: the same rows, store metadata and journal events, hash-chained, as the application
role; what it cannot take goes to the op-by-op path."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph.store.base import GetOp, PutOp
from psycopg import sql

from primitives.audit import connect_auditor, verify_chains
from primitives.compile import agent_tables
from primitives.db import APP_ROLE
from primitives.engine import Engine
from primitives.langgraph import AsyncMemoryStore, MemoryStore
from primitives.langgraph import _store as store_module
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.filterwarnings("ignore:.*(semantic|graph) signal")


class Counted:
    """Counts the store's transactions by path: ``once`` (the one-statement put) and
    ``general`` (op by op, ``engine.write``)."""

    def __init__(self, engine: Any) -> None:
        self.once = self.general = 0
        write, write_once = engine.write, engine.write_once

        def general(*args: Any, **kwargs: Any) -> Any:
            self.general += 1
            return write(*args, **kwargs)

        def once(*args: Any, **kwargs: Any) -> Any:
            self.once += 1
            return write_once(*args, **kwargs)

        engine.write, engine.write_once = general, once


@pytest.fixture
def store(pg: PostgresHandle, spectral: AgentSpec) -> Iterator[MemoryStore]:
    store = MemoryStore.from_spec(spectral, pg.app_dsn)
    with store.engine.tenant({"workspace_id": "probe"}) as mem:
        assert mem.connection.info.user == APP_ROLE
    yield store
    store.close()


def _ns(tenant: str) -> tuple[str, ...]:
    return (tenant, "workspace", "procedural", "style")


def _steps(tenant: str) -> list[tuple[list[PutOp], str]]:
    """Batches of puts and the path each should take in the one-statement store."""
    ns = _ns(tenant)
    return [
        ([PutOp(ns, "k1", {"text": "short answers"})], "once"),  # a new key
        ([PutOp(ns, "k1", {"text": "shorter answers"})], "once"),  # supersedes, archives
        ([PutOp(ns, "k1", {"text": "shorter answers"})], "once"),  # unchanged: nothing
        ([PutOp(ns, "k2", {"text": "expires"}, ttl=5.0)], "once"),  # with its expiry
        ([PutOp(ns, "k2", {"text": "expires"}, ttl=5.0)], "fallback"),  # pushes it back
        ([PutOp(ns, "k3", {"text": "hidden"}, index=False)], "once"),
        ([PutOp(ns, "k4", {"text": "four", "embed_context": "a note"}),
          PutOp(ns, "k1", {"text": "the third version"}),
          PutOp(ns, "k5", {"text": "five", "n": 5})], "once"),
        ([PutOp(ns, "k4", None)], "general"),  # a delete: op by op
        ([PutOp(ns, "k4", {"text": "four again"})], "once"),  # the key starts over
        # a scoped tier whose typology (episodic) has no conflict strategy
        ([PutOp((tenant, "run", "run-1"), "scratch", {"text": "a note"})], "once"),
        ([PutOp((tenant, "run", "run-1"), "scratch", {"text": "a changed note"})], "once"),
    ]


def _rows(engine: Engine, spec: AgentSpec, tenant: str) -> list[tuple[Any, ...]]:
    memories = agent_tables(spec).memories.ident
    with engine.tenant({"workspace_id": tenant}) as mem:
        return mem.connection.execute(sql.SQL(
            "SELECT key, tier, typology, namespace, content, value, envelope, tags, "
            "confidence, decay_rate, superseded_at IS NOT NULL, superseded_by IS NOT NULL, "
            "archived_at IS NOT NULL, invalidated_at IS NOT NULL, tombstoned_at IS NOT NULL, "
            "expires_at IS NOT NULL, provenance #> '{{store,ttl_minutes}}', "
            "provenance #> '{{store,index}}', provenance #> '{{store,created_at}}' IS NOT NULL, "
            "provenance - 'store', scope_id, source, actor FROM {} "
            "ORDER BY key, created_at, superseded_at NULLS LAST").format(memories)).fetchall()


def _events(engine: Engine, spec: AgentSpec, tenant: str) -> list[tuple[Any, ...]]:
    events = agent_tables(spec).events.ident
    with engine.tenant({"workspace_id": tenant}) as mem:
        return mem.connection.execute(sql.SQL(
            "SELECT seq, kind, memory_id, actor, payload FROM {} ORDER BY seq").format(
                events)).fetchall()


def _without_ids(payload: dict[str, Any]) -> dict[str, Any]:
    """A payload with each id (a memory's uuid) replaced by a marker, numbers as floats."""
    def plain(value: Any) -> Any:
        if isinstance(value, str):
            try:
                uuid.UUID(value)
            except ValueError:
                return value
            return "<id>"
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        return value
    return {k: plain(v) for k, v in payload.items()}


def test_one_statement_puts_write_the_rows_and_events_of_the_op_by_op_path(
        store: MemoryStore, spectral: AgentSpec, pg: PostgresHandle,
        monkeypatch: pytest.MonkeyPatch) -> None:
    fast, slow = f"ws-once-{uuid.uuid4().hex[:8]}", f"ws-ops-{uuid.uuid4().hex[:8]}"
    counted = Counted(store.engine)
    for ops, path in _steps(fast):
        before = (counted.once, counted.general)
        store.batch(ops)
        took = (counted.once - before[0], counted.general - before[1])
        assert took == {"once": (1, 0), "fallback": (1, 1), "general": (0, 1)}[path], ops
    with monkeypatch.context() as patched:
        patched.setattr(store_module, "_puts_only", lambda ops: None)
        for ops, _ in _steps(slow):
            store.batch(ops)

    fast_rows, slow_rows = (_rows(store.engine, spectral, t) for t in (fast, slow))
    assert [r[0] for r in fast_rows] == ["k1", "k1", "k1", "k2", "k3", "k4", "k4", "k5",
                                         "scratch", "scratch"]
    assert fast_rows == slow_rows
    assert _scopes(store.engine, spectral, fast) == _scopes(store.engine, spectral, slow) == [
        ("run", "run-1")]
    k1 = [r for r in fast_rows if r[0] == "k1"]
    # superseded and archived (the typology's update_with_supersession), the current one not
    assert [(r[10], r[11], r[12]) for r in k1] == [(True, True, True)] * 2 + [(False,) * 3]
    assert [r[18] for r in k1] == [False, True, True]  # created_at carried over
    assert next(r for r in fast_rows if r[0] == "k2")[15:17] == (True, 5.0)
    assert next(r for r in fast_rows if r[0] == "k3")[17] is False

    fast_events, slow_events = (_events(store.engine, spectral, t) for t in (fast, slow))
    assert [(e[0], e[1], e[3], _without_ids(e[4])) for e in fast_events] == [
        (e[0], e[1], e[3], _without_ids(e[4])) for e in slow_events]
    kinds = [e[1] for e in fast_events]
    assert kinds[:4] == ["observed", "superseded", "observed", "conflict_resolved"]
    # each superseded event names the old row and, in ``by``, the row that took its slot
    ids = {r[0]: r for r in _ids(store.engine, spectral, fast)}
    for seq, kind, memory_id, _, payload in fast_events:
        if kind == "superseded":
            assert ids[memory_id][1] == uuid.UUID(payload["by"]), seq
        if kind == "conflict_resolved":
            assert ids[memory_id][1] == uuid.UUID(payload["new"]), seq
            assert payload["previous_confidence"] == 1.0

    with connect_auditor(pg.auditor_dsn) as conn:
        reports = verify_chains(conn, spectral, tenants=[fast, slow])
    assert [(r.events, r.intact) for r in reports] == [(len(fast_events), True)] * 2


def _scopes(engine: Engine, spec: AgentSpec, tenant: str) -> list[tuple[Any, ...]]:
    scopes = agent_tables(spec).scopes.ident
    with engine.tenant({"workspace_id": tenant}) as mem:
        return mem.connection.execute(sql.SQL(
            "SELECT tier, scope_id FROM {} ORDER BY tier, scope_id").format(scopes)).fetchall()


def _ids(engine: Engine, spec: AgentSpec, tenant: str) -> list[tuple[Any, ...]]:
    memories = agent_tables(spec).memories.ident
    with engine.tenant({"workspace_id": tenant}) as mem:
        return mem.connection.execute(sql.SQL(
            "SELECT id, superseded_by FROM {}").format(memories)).fetchall()


def test_a_refused_put_in_a_batch_writes_nothing_of_the_batch(
        store: MemoryStore, spectral: AgentSpec) -> None:
    tenant = f"ws-refused-{uuid.uuid4().hex[:8]}"
    ns = _ns(tenant)
    with pytest.raises(Exception, match="key"):
        store.batch([PutOp(ns, "ok", {"text": "fine"}),
                     PutOp(ns, "x" * 10_000, {"text": "a key over the limit"})])
    assert _rows(store.engine, spectral, tenant) == []
    assert _events(store.engine, spectral, tenant) == []


def test_concurrent_async_puts_share_one_statement_and_keep_the_journal_chained(
        pg: PostgresHandle, spectral: AgentSpec) -> None:
    tenant = f"ws-async-{uuid.uuid4().hex[:8]}"
    ns = _ns(tenant)

    async def run() -> tuple[int, int, list[Any]]:
        store = await AsyncMemoryStore.from_spec(spectral, pg.app_dsn)
        try:
            calls = {"once": 0, "general": 0}
            write, write_once = store.engine.write, store.engine.write_once

            async def general(*args: Any, **kwargs: Any) -> Any:
                calls["general"] += 1
                return await write(*args, **kwargs)

            async def once(*args: Any, **kwargs: Any) -> Any:
                calls["once"] += 1
                return await write_once(*args, **kwargs)

            store.engine.write, store.engine.write_once = general, once  # type: ignore[method-assign]
            await asyncio.gather(*(store.aput(ns, f"k{i}", {"text": f"item {i}"})
                                   for i in range(40)))
            items = await asyncio.gather(*(store.aget(ns, f"k{i}") for i in range(40)))
            return calls["once"], calls["general"], items
        finally:
            await store.aclose()

    once, general, items = asyncio.run(run())
    assert [item.value["text"] for item in items] == [f"item {i}" for i in range(40)]
    assert general == 0 and 1 <= once < 40  # queued calls were put together
    engine = Engine.connect(spectral, pg.app_dsn)
    try:
        events = _events(engine, spectral, tenant)
    finally:
        engine.close()
    assert [e[1] for e in events] == ["observed"] * 40
    assert sorted(json.dumps(e[4]["key"]) for e in events) == sorted(
        json.dumps(f"k{i}") for i in range(40))
    with connect_auditor(pg.auditor_dsn) as conn:
        [report] = verify_chains(conn, spectral, tenants=[tenant])
    assert (report.events, report.intact) == (40, True)


def test_a_batch_of_gets_is_one_statement_that_returns_each_key_in_place(
        store: MemoryStore, spectral: AgentSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    from primitives.engine import _store_ops as store_ops

    tenant = f"ws-gets-{uuid.uuid4().hex[:8]}"
    ns = _ns(tenant)
    store.batch([PutOp(ns, "a", {"text": "first"}), PutOp(ns, "b", {"text": "second"}),
                 PutOp(ns, "gone", {"text": "deleted"})])
    store.delete(ns, "gone")
    monkeypatch.setattr(store_ops, "get_item", None)  # a get op by op would fail here
    found = store.batch([GetOp(ns, "b"), GetOp(ns, "missing"), GetOp(ns, "a"),
                         GetOp(ns, "gone")])
    assert [None if item is None else item.value["text"] for item in found] == [
        "second", None, "first", None]
    assert [tuple(item.namespace) for item in found if item is not None] == [ns] * 2


def test_a_one_item_put_that_loses_the_race_for_a_new_key_writes_nothing_then_supersedes(
        store: MemoryStore, spectral: AgentSpec, pg: PostgresHandle) -> None:
    """Two first writes of one key: the one-item statement of the second waits for the
    first's transaction, then reports ``lost`` (nothing written); the store's general path
    then supersedes the winner, so the last write is current and the journal chained."""
    import threading

    from primitives.engine._store_ops import ItemPut

    tenant = f"ws-race-{uuid.uuid4().hex[:8]}"
    outcomes: list[Any] = []
    write_once = store.engine.write_once

    def once(*args: Any, **kwargs: Any) -> Any:
        outcomes.append(write_once(*args, **kwargs))
        return outcomes[-1]

    store.engine.write_once = once  # type: ignore[method-assign]
    other = Engine.connect(spectral, pg.app_dsn)
    try:
        with other.tenant({"workspace_id": tenant}) as mem:
            # the first writer holds its new row, uncommitted, while the second puts
            mem.item_batch([ItemPut("workspace", "procedural", ("procedural", "style"), "k",
                                    {"text": "first"}, content="first")])
            second = threading.Thread(
                target=store.put, args=(_ns(tenant), "k", {"text": "second"}))
            second.start()
            assert _lock_waiters(pg.app_dsn, mem.connection) == 1  # it waits for the key
        second.join(timeout=30)
        assert not second.is_alive()
    finally:
        other.close()
    assert outcomes == [["lost"]]
    item = store.get(_ns(tenant), "k")
    assert item is not None and item.value == {"text": "second"}
    rows = _rows(store.engine, spectral, tenant)
    assert [(r[5], r[10]) for r in rows] == [({"text": "first"}, True),
                                             ({"text": "second"}, False)]
    kinds = [e[1] for e in _events(store.engine, spectral, tenant)]
    assert kinds == ["observed", "superseded", "observed", "conflict_resolved"]
    with connect_auditor(pg.auditor_dsn) as conn:
        [report] = verify_chains(conn, spectral, tenants=[tenant])
    assert (report.events, report.intact) == (4, True)


def _lock_waiters(dsn: str, holder: Any, timeout: float = 30.0) -> int:
    """Sessions of the application role waiting for a lock (``pg_stat_activity``), other
    than ``holder``'s: polled until one waits or ``timeout`` seconds pass."""
    import time

    import psycopg

    pid = holder.info.backend_pid
    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE usename = current_user "
                "AND wait_event_type = 'Lock' AND pid <> %s", (pid,)).fetchone()
            waiting = int(row[0]) if row else 0
            if waiting or time.monotonic() > deadline:
                return waiting
            time.sleep(0.02)
