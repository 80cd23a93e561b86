"""A write in a transaction of its own, sent as one message (``Engine.observe``)."""

from __future__ import annotations

import threading
import uuid
import warnings
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives.audit._chain import verify_chains
from primitives.db._oneshot import OnceTransaction
from primitives.engine import AsyncEngine, Engine
from primitives.engine._core import Step
from primitives.engine._sync import _run_once
from primitives.errors import GovernanceError, PolicyViolation, TenancyError
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.db


def _tenant() -> dict[str, str]:
    return {"workspace_id": f"ws-{uuid.uuid4().hex[:8]}"}


def _rows(engine: Engine, anchor: dict[str, str]) -> tuple[list[Any], list[Any]]:
    with engine.tenant(anchor) as mem:
        conn = mem.connection
        rows = conn.execute(sql.SQL("SELECT id, content FROM {} ORDER BY created_at").format(
            engine.tables.memories.ident)).fetchall()
        events = conn.execute(sql.SQL("SELECT seq, kind, memory_id FROM {} ORDER BY seq").format(
            engine.tables.events.ident)).fetchall()
    return rows, events


def test_observe_alone_writes_row_event_and_chain_in_one_message(
    engine: Engine, admin_conn: psycopg.Connection[Any], spectral: AgentSpec
) -> None:
    anchor = _tenant()
    first = engine.observe(anchor, "cycle", "lowering temperature removed fabrication",
                           scope_id="c-1", envelope={"kind": "scan"})
    second = engine.observe(anchor, "cycle", "retrieval returned stale context")
    rows, events = _rows(engine, anchor)
    assert [r[0] for r in rows] == [first.id, second.id]
    assert [(e[0], e[1], e[2]) for e in events] == [(1, "observed", first.id),
                                                   (2, "observed", second.id)]
    [report] = verify_chains(admin_conn, spectral, tenants=[anchor["workspace_id"]])
    assert report.intact and report.events == 2
    # it went as EXECUTE of a statement prepared on the session, not as bound statements
    with engine._pool.connection() as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM pg_prepared_statements")]
        assert conn.execute("SELECT primitives.current_tenant()").fetchone() == (None,)
    assert any(n.startswith("primitives_once_") for n in names)


def test_observe_alone_with_a_key_supersedes_in_one_transaction(engine: Engine) -> None:
    anchor = _tenant()
    one = engine.observe(anchor, "workspace", "policy v1", typology="procedural", key="policy")
    two = engine.observe(anchor, "workspace", "policy v2", typology="procedural", key="policy")
    assert engine.observe(anchor, "workspace", "policy v2", typology="procedural", key="policy").id == two.id  # unchanged: no new row
    rows, events = _rows(engine, anchor)
    assert [r[1] for r in rows] == ["policy v1", "policy v2"]
    # procedural: the prior is also archived (update_with_supersession)
    assert [e[1] for e in events] == ["observed", "superseded", "observed", "conflict_resolved"]
    assert events[1][2] == one.id and events[3][2] == one.id


def test_refused_write_leaves_nothing_and_no_tenant_on_the_connection(engine: Engine) -> None:
    anchor = _tenant()
    with pytest.raises(TenancyError):
        engine.observe(anchor, "no_such_tier", "x")
    first = engine.observe(anchor, "cycle", "the only row")
    # the id is taken by another write: refused (a retry of the same write returns its row)
    with pytest.raises(PolicyViolation, match="already names another memory") as caught:
        engine.observe(anchor, "cycle", "a second row with the first one's id",
                       memory_id=first.id)
    assert caught.value.context["memory_id"] == str(first.id)
    rows, events = _rows(engine, anchor)
    assert [r[0] for r in rows] == [first.id]
    assert [e[1] for e in events] == ["observed"]  # no event of the refused write
    with engine._pool.connection() as conn:
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert conn.execute("SELECT primitives.current_tenant()").fetchone() == (None,)


def test_a_failing_statement_rolls_back_the_statements_before_it(
    engine: Engine, app_conn: psycopg.Connection[Any]
) -> None:
    anchor = _tenant()
    insert = sql.SQL(
        "INSERT INTO {} (workspace_id, tier, typology, key, content) "
        "VALUES (%(t)s, 'cycle', 'episodic', %(k)s, 'kept only if the transaction commits')"
    ).format(engine.tables.memories.ident).as_string(app_conn)
    tx = OnceTransaction(app_conn, anchor["workspace_id"])
    tx.execute(insert, {"t": anchor["workspace_id"], "k": "k1"})
    with pytest.raises(psycopg.errors.DivisionByZero):
        tx.execute("SELECT 1 / %(zero)s::int", {"zero": 0}, last=True)
    tx.rollback()
    assert app_conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    rows, _ = _rows(engine, anchor)
    assert rows == []
    # a cross-tenant row is refused by row-level security, in one message as elsewhere
    tx = OnceTransaction(app_conn, anchor["workspace_id"])
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        tx.execute(insert, {"t": "ws-someone-else", "k": "k2"}, last=True)
    tx.rollback()


def test_write_policy_refusal_surfaces_as_such_and_writes_nothing(engine: Engine) -> None:
    anchor = _tenant()
    with pytest.raises(GovernanceError, match="promotion"):
        engine.observe(anchor, "workspace", "direct write of semantic memory",
                       typology="semantic")
    assert _rows(engine, anchor) == ([], [])


def test_concurrent_single_writes_of_one_tenant_keep_the_chain(
    engine: Engine, admin_conn: psycopg.Connection[Any], spectral: AgentSpec
) -> None:
    anchor = _tenant()
    errors: list[BaseException] = []

    def writer(k: int) -> None:
        try:
            for n in range(10):
                engine.observe(anchor, "cycle", f"writer {k} note {n}")
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    [report] = verify_chains(admin_conn, spectral, tenants=[anchor["workspace_id"]])
    assert report.intact and report.events == 60


def _settings_then_read(ctx: Any, *, mark_last: bool) -> Any:
    """A read op shaped like search: a SET LOCAL-style step, then the statement that needs it."""
    yield Step(sql.SQL("SELECT set_config('primitives_test.mode', %(v)s, true)"), {"v": "on"},
               "one")
    row = yield Step(sql.SQL("SELECT current_setting('primitives_test.mode', true), "
                             "primitives.current_tenant()"), {}, "one", last=mark_last)
    return row


@pytest.mark.parametrize("mark_last", [True, False])
def test_a_read_op_runs_its_statements_in_one_transaction(
    engine: Engine, mark_last: bool
) -> None:
    anchor = _tenant()
    row = engine.read(anchor, lambda ctx: _settings_then_read(ctx, mark_last=mark_last))
    assert row == ("on", anchor["workspace_id"])  # the setting and the tenant reached it
    with engine._pool.connection() as conn:
        assert conn.execute("SELECT current_setting('primitives_test.mode', true), "
                            "primitives.current_tenant()").fetchone() in ((None, None), ("", None))


def test_a_read_op_after_its_last_statement_opens_a_new_tenant_transaction(
    engine: Engine,
) -> None:
    anchor = _tenant()

    def two(ctx: Any) -> Any:
        first = yield Step(sql.SQL("SELECT txid_current(), primitives.current_tenant()"), {},
                           "one", last=True)
        second = yield Step(sql.SQL("SELECT txid_current(), primitives.current_tenant()"), {},
                            "one")
        return first, second

    first, second = engine.read(anchor, two)
    assert first[1] == second[1] == anchor["workspace_id"]
    assert first[0] != second[0]  # two transactions


def test_a_write_op_may_not_run_a_statement_after_its_last_one(engine: Engine) -> None:
    def broken(ctx: Any) -> Any:
        yield Step(sql.SQL("SELECT 1"), {}, "one", last=True)
        yield Step(sql.SQL("SELECT 2"), {}, "one")

    with engine._pool.connection() as conn, pytest.raises(AssertionError, match="after its last"):
        _run_once(conn, "ws-x", broken(None), after_last="refuse")


async def test_async_observe_matches(pg: PostgresHandle, spectral: AgentSpec) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # no embedder: lexical only
        engine = await AsyncEngine.connect(spectral, pg.app_dsn)
    async with engine:
        anchor = _tenant()
        made = await engine.observe(anchor, "cycle", "async single write")
        async with engine.tenant(anchor) as mem:
            assert (await mem.get(made.id)) == made
        with pytest.raises(TenancyError):
            await engine.observe(anchor, "no_such_tier", "x")


def test_journal_event_ids_come_from_the_client(
    engine: Engine, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from primitives.engine import _queries

    made = [uuid.UUID(int=k) for k in (101, 102, 103)]
    ids = iter(made)
    monkeypatch.setattr(_queries, "new_event_id", lambda: next(ids))
    anchor = _tenant()
    first = engine.observe(anchor, "cycle", "lowering temperature removed fabrication")
    engine.write(anchor, lambda mem: mem.tombstone(first.id, reason="test"))
    with engine.tenant(anchor) as mem:
        rows = mem.connection.execute(sql.SQL(
            "SELECT kind, event_id FROM {} ORDER BY seq").format(
            engine.tables.events.ident)).fetchall()
    assert [kind for kind, _ in rows] == ["observed", "tombstoned"]
    assert [event_id for _, event_id in rows] == made[:2]
