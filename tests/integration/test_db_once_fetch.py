"""``OnceTransaction.fetch``: the one-message transaction with its results read straight from
libpq. Same rows, same errors and the same connection state as the cursor path."""

from __future__ import annotations

import asyncio
import gc
import select
import time
import weakref
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from primitives.db import AsyncOnceTransaction, OnceTransaction, _oneshot, _pipeline, use_fast_json
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.db

CURRENT_TENANT = "SELECT primitives.current_tenant()"
VALUES = (
    "SELECT %(i)s::int, %(t)s, %(j)s, %(u)s, %(ts)s, %(a)s::text[], %(n)s::text, "
    "%(f)s::float8, primitives.current_tenant()"
)
PARAMS: dict[str, Any] = {
    "i": 7, "t": "it's", "j": Jsonb({"k": ["x", 1, None, {"n": "ü"}]}),
    "u": UUID("12345678-1234-5678-1234-567812345678"),
    "ts": datetime(2026, 11, 26, 1, 2, 3, 456789, tzinfo=UTC), "a": ["a", "b,c", ""],
    "n": None, "f": 0.1,
}


@pytest.fixture
def notes(tenant_table: Callable[..., sql.Identifier]) -> sql.Identifier:
    return tenant_table("notes", "tenant_id text NOT NULL, n int PRIMARY KEY, body jsonb",
                        tenant="tenant_id")


def _idle_without_tenant(conn: psycopg.Connection[Any]) -> None:
    assert conn.info.transaction_status == TransactionStatus.IDLE
    assert conn.execute(CURRENT_TENANT).fetchone() == (None,)


@pytest.mark.parametrize("fast_json", [False, True])
def test_fetch_returns_the_rows_the_cursor_returns(
    app_conn: psycopg.Connection[Any], fast_json: bool,
) -> None:
    if fast_json:
        use_fast_json(app_conn)
    by_cursor = OnceTransaction(app_conn, "acme").execute(VALUES, PARAMS, last=True).fetchone()
    direct = OnceTransaction(app_conn, "acme").fetch(VALUES, PARAMS, last=True, fetch="one")
    assert direct == by_cursor
    assert direct[-1] == "acme" and direct[2] == {"k": ["x", 1, None, {"n": "ü"}]}
    assert isinstance(direct, tuple)
    _idle_without_tenant(app_conn)


def test_fetch_one_all_and_none_over_a_transaction_of_several_statements(
    app_conn: psycopg.Connection[Any], notes: sql.Identifier,
) -> None:
    insert = sql.SQL("INSERT INTO {} VALUES (primitives.current_tenant(), %(n)s, %(b)s) "
                     "RETURNING n").format(notes).as_string(None)
    select_all = sql.SQL("SELECT n, body FROM {} WHERE n >= %(low)s ORDER BY n").format(
        notes).as_string(None)
    tx = OnceTransaction(app_conn, "acme")
    assert tx.fetch(insert, {"n": 1, "b": Jsonb({"a": 1})}, fetch="one") == (1,)
    assert tx.fetch(insert, {"n": 2, "b": Jsonb([])}, fetch="none") is None
    assert app_conn.info.transaction_status == TransactionStatus.INTRANS  # still open
    assert tx.fetch(select_all, {"low": 0}, last=True, fetch="all") == [(1, {"a": 1}), (2, [])]
    assert tx.committed
    _idle_without_tenant(app_conn)
    # nothing matches: one gives None, all an empty list
    assert OnceTransaction(app_conn, "acme").fetch(select_all, {"low": 9}, last=True,
                                                   fetch="one") is None
    assert OnceTransaction(app_conn, "acme").fetch(select_all, {"low": 9}, last=True,
                                                   fetch="all") == []
    # the other tenant sees none of them
    assert OnceTransaction(app_conn, "globex").fetch(select_all, {"low": 0}, last=True,
                                                     fetch="all") == []
    with pytest.raises(psycopg.ProgrammingError, match="committed already"):
        tx.fetch(select_all, {"low": 0}, fetch="all")


def test_a_failed_statement_raises_psycopgs_error_and_a_rollback_leaves_the_session_clean(
    app_conn: psycopg.Connection[Any], notes: sql.Identifier,
) -> None:
    insert = sql.SQL("INSERT INTO {} VALUES (%(t)s, %(n)s, NULL)").format(notes).as_string(None)
    OnceTransaction(app_conn, "acme").fetch(insert, {"t": "acme", "n": 10}, last=True)
    cases: list[tuple[str, dict[str, Any], type[psycopg.Error]]] = [
        ("SELECT 1 / %(zero)s::int", {"zero": 0}, psycopg.errors.DivisionByZero),
        (insert, {"t": "acme", "n": 10}, psycopg.errors.UniqueViolation),
        # another tenant's row: the policy's WITH CHECK refuses it
        (insert, {"t": "globex", "n": 11}, psycopg.errors.InsufficientPrivilege),
    ]
    for statement, params, error in cases:
        tx = OnceTransaction(app_conn, "acme")
        with pytest.raises(error):
            tx.fetch(statement, params, last=True, fetch="one")
        # the server ran nothing after the failed statement: the transaction is open, failed
        assert app_conn.info.transaction_status == TransactionStatus.INERROR
        tx.rollback()
        _idle_without_tenant(app_conn)
    count = sql.SQL("SELECT count(*) FROM {}").format(notes).as_string(None)
    assert OnceTransaction(app_conn, "acme").fetch(count, {}, last=True, fetch="one") == (1,)


def test_a_session_that_lost_its_prepared_statement_prepares_it_again(
    app_conn: psycopg.Connection[Any],
) -> None:
    assert OnceTransaction(app_conn, "acme").fetch(VALUES, PARAMS, last=True, fetch="one")
    app_conn.execute("DEALLOCATE ALL")
    row = OnceTransaction(app_conn, "acme").fetch(VALUES, PARAMS, last=True, fetch="one")
    assert row[0] == 7 and row[-1] == "acme"
    _idle_without_tenant(app_conn)


TENANT_STATEMENT = ("SELECT name, statement FROM pg_catalog.pg_prepared_statements "
                    "WHERE name = 'primitives_set_tenant'")


def test_the_tenant_statement_is_prepared_once_per_session_and_binds_each_tenant(
    app_conn: psycopg.Connection[Any],
) -> None:
    assert app_conn.execute(TENANT_STATEMENT).fetchall() == []
    for tenant in ("acme", "globex", "acme"):
        row = OnceTransaction(app_conn, tenant).fetch(VALUES, PARAMS, last=True, fetch="one")
        assert row[-1] == tenant
        _idle_without_tenant(app_conn)
    assert app_conn.execute(TENANT_STATEMENT).fetchall() == [
        ("primitives_set_tenant",
         "PREPARE primitives_set_tenant(text) AS SELECT primitives.set_tenant($1)")]


def test_a_session_that_lost_only_its_tenant_statement_prepares_it_again(
    app_conn: psycopg.Connection[Any],
) -> None:
    """The error does not say which statement the session lost: the call's own statement,
    still there, is deallocated and prepared again with the tenant statement."""
    assert OnceTransaction(app_conn, "acme").fetch(VALUES, PARAMS, last=True, fetch="one")
    app_conn.execute("DEALLOCATE primitives_set_tenant")
    row = OnceTransaction(app_conn, "globex").fetch(VALUES, PARAMS, last=True, fetch="one")
    assert row[0] == 7 and row[-1] == "globex"
    _idle_without_tenant(app_conn)
    assert len(app_conn.execute(TENANT_STATEMENT).fetchall()) == 1


async def test_async_a_lost_tenant_statement_is_prepared_again(pg: PostgresHandle) -> None:
    async with await psycopg.AsyncConnection.connect(pg.app_dsn, autocommit=True) as conn:
        row = await AsyncOnceTransaction(conn, "acme").fetch(VALUES, PARAMS, last=True,
                                                             fetch="one")
        assert row[-1] == "acme"
        await conn.execute("DEALLOCATE primitives_set_tenant")
        row = await AsyncOnceTransaction(conn, "globex").fetch(VALUES, PARAMS, last=True,
                                                               fetch="one")
        assert row[0] == 7 and row[-1] == "globex"
        # afetch_each: a lost tenant statement fails the batch, which ran nothing and is
        # left to the caller; the next batch prepares it again
        calls = [_oneshot.OnceCall(t, VALUES, PARAMS, "one") for t in ("acme", "globex")]
        await conn.execute("DEALLOCATE primitives_set_tenant")
        assert await _oneshot.afetch_each(conn, calls) == [_oneshot.NOT_SENT] * 2
        assert conn.info.transaction_status == TransactionStatus.IDLE
        rows = await _oneshot.afetch_each(conn, calls)
        assert [r[-1] for r in rows] == ["acme", "globex"]


def _read_statements(conn: psycopg.Connection[Any]) -> list[tuple[str, str]]:
    """The session's prepared copies of this module's read: name and result types."""
    return conn.execute(
        "SELECT name, result_types::text FROM pg_prepared_statements "
        "WHERE statement LIKE %s ORDER BY name", ["%SELECT n, body FROM%"],
        prepare=False).fetchall()


def test_a_statement_whose_result_type_a_migration_changed_is_prepared_again(
    app_conn: psycopg.Connection[Any], notes: sql.Identifier, as_owner: Callable[..., None],
) -> None:
    insert = sql.SQL("INSERT INTO {} VALUES (primitives.current_tenant(), %(n)s, %(b)s) "
                     "RETURNING n, body").format(notes).as_string(None)
    read = sql.SQL("SELECT n, body FROM {} WHERE n = %(n)s").format(notes).as_string(None)
    assert OnceTransaction(app_conn, "acme").fetch(
        insert, {"n": 1, "b": Jsonb({"a": 1})}, last=True, fetch="one") == (1, {"a": 1})
    assert OnceTransaction(app_conn, "acme").fetch(read, {"n": 1}, last=True,
                                                   fetch="one") == (1, {"a": 1})
    [(name, types)] = _read_statements(app_conn)
    assert types == "{integer,jsonb}"
    # the returned column changes type under the session's prepared statements
    as_owner(sql.SQL("ALTER TABLE {} ALTER COLUMN body TYPE text USING body::text").format(
        notes))
    # first in its transaction: rolled back, deallocated, prepared again and sent once more
    assert OnceTransaction(app_conn, "acme").fetch(read, {"n": 1}, last=True,
                                                   fetch="one") == (1, '{"a": 1}')
    assert OnceTransaction(app_conn, "acme").fetch(
        insert, {"n": 2, "b": "two"}, last=True, fetch="one") == (2, "two")
    _idle_without_tenant(app_conn)
    # one copy of the read on the session, under its name, with the new result type
    assert _read_statements(app_conn) == [(name, "{integer,text}")]
    count = sql.SQL("SELECT count(*) FROM {}").format(notes).as_string(None)
    assert OnceTransaction(app_conn, "acme").fetch(count, {}, last=True, fetch="one") == (2,)


def test_a_changed_result_type_later_in_a_transaction_raises_and_the_next_one_works(
    app_conn: psycopg.Connection[Any], notes: sql.Identifier, as_owner: Callable[..., None],
) -> None:
    insert = sql.SQL("INSERT INTO {} VALUES (primitives.current_tenant(), %(n)s, %(b)s)").format(
        notes).as_string(None)
    read = sql.SQL("SELECT body FROM {} WHERE n = %(n)s").format(notes).as_string(None)
    OnceTransaction(app_conn, "acme").fetch(insert, {"n": 1, "b": Jsonb([1])}, last=True)
    assert OnceTransaction(app_conn, "acme").fetch(read, {"n": 1}, last=True,
                                                   fetch="one") == ([1],)
    as_owner(sql.SQL("ALTER TABLE {} ALTER COLUMN body TYPE text USING body::text").format(
        notes))
    tx = OnceTransaction(app_conn, "acme")
    tx.fetch(insert, {"n": 2, "b": "lost"})  # the transaction's earlier work ...
    with pytest.raises(psycopg.errors.FeatureNotSupported):
        tx.fetch(read, {"n": 1}, last=True, fetch="one")
    tx.rollback()  # ... goes with it: not retried behind the caller's back
    _idle_without_tenant(app_conn)
    tx = OnceTransaction(app_conn, "acme")
    assert tx.fetch(insert, {"n": 3, "b": "kept"}) is None
    assert tx.fetch(read, {"n": 1}, last=True, fetch="one") == ("[1]",)
    numbers = sql.SQL("SELECT n FROM {} ORDER BY n").format(notes).as_string(None)
    assert OnceTransaction(app_conn, "acme").fetch(numbers, {}, last=True,
                                                   fetch="all") == [(1,), (3,)]


def test_a_connection_with_a_row_factory_of_its_own_keeps_its_rows(
    app_conn: psycopg.Connection[Any],
) -> None:
    app_conn.row_factory = dict_row  # type: ignore[assignment]
    row = OnceTransaction(app_conn, "acme").fetch("SELECT %(i)s::int AS i", {"i": 3},
                                                  last=True, fetch="one")
    assert row == {"i": 3}


def test_an_interrupt_while_waiting_cancels_the_query_and_leaves_no_query_running(
    app_conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = select.select

    def interrupted(rlist: Any, wlist: Any, xlist: Any, *timeout: Any) -> Any:
        if rlist:  # waiting for the server's answer
            raise KeyboardInterrupt
        return real(rlist, wlist, xlist, *timeout)

    monkeypatch.setattr(_pipeline.select, "select", interrupted)
    tx = OnceTransaction(app_conn, "acme")
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        tx.fetch("SELECT pg_sleep(%(s)s::float8)", {"s": 30.0}, last=True, fetch="one")
    monkeypatch.undo()
    assert time.monotonic() - started < 10  # cancelled, not waited out
    assert app_conn.info.transaction_status == TransactionStatus.INERROR
    tx.rollback()
    _idle_without_tenant(app_conn)
    assert OnceTransaction(app_conn, "acme").fetch("SELECT %(i)s::int", {"i": 1}, last=True,
                                                   fetch="one") == (1,)


def test_the_row_loader_is_kept_per_connection_and_goes_with_it(pg: PostgresHandle) -> None:
    conn = psycopg.connect(pg.app_dsn, autocommit=True)
    first = OnceTransaction(conn, "acme").fetch(VALUES, PARAMS, last=True, fetch="one")
    loader = _oneshot._row_loader(conn)
    # another result shape through the same loader: its own columns, loaded right
    assert OnceTransaction(conn, "acme").fetch("SELECT %(t)s, %(i)s::int", PARAMS, last=True,
                                               fetch="one") == ("it's", 7)
    assert _oneshot._row_loader(conn) is loader
    assert OnceTransaction(conn, "acme").fetch(VALUES, PARAMS, last=True, fetch="one") == first
    gone = weakref.ref(conn)
    conn.close()
    del conn, loader
    gc.collect()
    assert gone() is None  # the loader's reference to its connection keeps neither alive


# -- the async twin -------------------------------------------------------------------------------
async def test_async_fetch_returns_the_rows_the_cursor_returns(pg: PostgresHandle) -> None:
    async with await psycopg.AsyncConnection.connect(pg.app_dsn, autocommit=True) as conn:
        use_fast_json(conn)
        cursor = await AsyncOnceTransaction(conn, "acme").execute(VALUES, PARAMS, last=True)
        by_cursor = await cursor.fetchone()
        direct = await AsyncOnceTransaction(conn, "acme").fetch(VALUES, PARAMS, last=True,
                                                                fetch="one")
        assert direct == by_cursor and direct[-1] == "acme"
        many = await AsyncOnceTransaction(conn, "acme").fetch(
            "SELECT g FROM generate_series(1, %(n)s::int) AS g", {"n": 3}, last=True,
            fetch="all")
        assert many == [(1,), (2,), (3,)]
        assert conn.info.transaction_status == TransactionStatus.IDLE
        cur = await conn.execute(CURRENT_TENANT)
        assert await cur.fetchone() == (None,)


async def test_async_fetch_errors_and_a_lost_prepared_statement(pg: PostgresHandle) -> None:
    async with await psycopg.AsyncConnection.connect(pg.app_dsn, autocommit=True) as conn:
        tx = AsyncOnceTransaction(conn, "acme")
        with pytest.raises(psycopg.errors.DivisionByZero):
            await tx.fetch("SELECT 1 / %(zero)s::int", {"zero": 0}, last=True, fetch="one")
        assert conn.info.transaction_status == TransactionStatus.INERROR
        await tx.rollback()
        assert conn.info.transaction_status == TransactionStatus.IDLE
        await conn.execute("DEALLOCATE ALL")
        row = await AsyncOnceTransaction(conn, "acme").fetch(VALUES, PARAMS, last=True,
                                                             fetch="one")
        assert row[0] == 7 and row[-1] == "acme"


async def test_async_fetch_prepares_a_statement_with_a_changed_result_type_again(
    pg: PostgresHandle, notes: sql.Identifier, as_owner: Callable[..., None],
) -> None:
    read = sql.SQL("SELECT body FROM {} WHERE n = %(n)s").format(notes).as_string(None)
    insert = sql.SQL("INSERT INTO {} VALUES (primitives.current_tenant(), %(n)s, %(b)s)").format(
        notes).as_string(None)
    async with await psycopg.AsyncConnection.connect(pg.app_dsn, autocommit=True) as conn:
        await AsyncOnceTransaction(conn, "acme").fetch(insert, {"n": 1, "b": Jsonb({"x": 2})},
                                                       last=True)
        assert await AsyncOnceTransaction(conn, "acme").fetch(
            read, {"n": 1}, last=True, fetch="one") == ({"x": 2},)
        as_owner(sql.SQL("ALTER TABLE {} ALTER COLUMN body TYPE text USING body::text").format(
            notes))
        assert await AsyncOnceTransaction(conn, "acme").fetch(
            read, {"n": 1}, last=True, fetch="one") == ('{"x": 2}',)
        assert conn.info.transaction_status == TransactionStatus.IDLE


async def test_a_cancelled_async_fetch_cancels_the_query(pg: PostgresHandle) -> None:
    async with await psycopg.AsyncConnection.connect(pg.app_dsn, autocommit=True) as conn:
        tx = AsyncOnceTransaction(conn, "acme")
        task = asyncio.create_task(tx.fetch("SELECT pg_sleep(%(s)s::float8)", {"s": 30.0},
                                            last=True, fetch="one"))
        await asyncio.sleep(0.3)  # the query is running on the server
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert time.monotonic() - started < 10  # cancelled, not waited out
        assert conn.info.transaction_status == TransactionStatus.INERROR
        await tx.rollback()
        row = await AsyncOnceTransaction(conn, "acme").fetch("SELECT %(i)s::int", {"i": 1},
                                                             last=True, fetch="one")
        assert row == (1,)
