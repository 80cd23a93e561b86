"""One-round-trip reads as the application role (``primitives.db.read_once``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from uuid import UUID

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from primitives.db import aread_once, read_once, tenant_transaction
from primitives.errors import StorageError

if TYPE_CHECKING:
    from tests.conftest import PostgresHandle

pytestmark = pytest.mark.db

CURRENT_TENANT = "SELECT primitives.current_tenant()"


@pytest.fixture
def notes(tenant_table: Callable[..., sql.Identifier],
          app_conn: psycopg.Connection[Any]) -> str:
    table = tenant_table("notes", "tenant_id text NOT NULL, n int NOT NULL, body text NOT NULL",
                         tenant="tenant_id")
    for owner in ("acme", "globex"):
        with tenant_transaction(app_conn, owner) as tx:
            for n in range(3):
                tx.execute(sql.SQL("INSERT INTO {} VALUES (%s, %s, %s)").format(table),
                           (owner, n, f"{owner} note {n}"))
    return sql.SQL("SELECT body FROM {} WHERE n >= %(low)s ORDER BY n").format(table) \
        .as_string(None)


def test_a_read_sees_only_its_tenants_rows_and_leaves_no_tenant_behind(
    app_conn: psycopg.Connection[Any], notes: str
) -> None:
    for tenant in ("acme", "globex", "acme"):  # the second acme read reuses the prepared plan
        cursor = read_once(app_conn, tenant, notes, {"low": 1})
        assert cursor.fetchall() == [(f"{tenant} note 1",), (f"{tenant} note 2",)]
        assert app_conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert app_conn.execute(CURRENT_TENANT).fetchone() == (None,)
    assert read_once(app_conn, "initech", notes, {"low": 0}).fetchall() == []


def test_parameters_and_tenant_are_literals_not_sql(
    app_conn: psycopg.Connection[Any], notes: str
) -> None:
    tricky = "acme'; RESET primitives.tenant; SELECT '"
    cursor = read_once(app_conn, tricky, notes, {"low": 0})
    assert cursor is not None and cursor.fetchall() == []  # a tenant of that exact name
    probe = "SELECT %(v)s::text"
    value = "x'); SELECT pg_sleep(5); --"
    cursor = read_once(app_conn, "acme", probe, {"v": value})
    assert cursor is not None and cursor.fetchone() == (value,)


def test_a_failing_read_is_rolled_back_and_raised_as_a_storage_error(
    app_conn: psycopg.Connection[Any],
) -> None:
    with pytest.raises(StorageError) as caught:
        read_once(app_conn, "acme", "SELECT 1 / %(zero)s::int", {"zero": 0})
    assert caught.value.context["sqlstate"] == "22012"
    assert caught.value.context["tenant"] == "acme"
    assert app_conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert app_conn.execute(CURRENT_TENANT).fetchone() == (None,)


def test_parameters_keep_the_types_psycopg_would_bind(
    app_conn: psycopg.Connection[Any],
) -> None:
    # an untyped $1 is text when inferred; declared as psycopg binds an int, it stays an int
    for value in (7, 7_000_000_000, 1.5, True, None, "seven"):
        cursor = read_once(app_conn, "acme", "SELECT %(v)s", {"v": value})
        assert cursor is not None and cursor.fetchone() == (value,)
    cursor = read_once(app_conn, "acme", "SELECT %(v)s", {"v": [1, 2]})
    assert cursor is not None and cursor.fetchone() == ([1, 2],)


@pytest.mark.parametrize("value", [
    "plain", "it's \\ a 'quoted' back\\slash", "ünïcødé ✓", "", "a\nb", "%(x)s %s %%",
    0, -1, 2**15, -(2**31) - 1, 2**63 - 1, 2**70, 0.1, float("inf"), True, False, None,
    UUID("12345678-1234-5678-1234-567812345678"),
    datetime(2026, 11, 26, 1, 2, 3, 456789, tzinfo=UTC),
    datetime(2026, 11, 26, 1, 2, 3, tzinfo=timezone(timedelta(hours=-5))),
    datetime(2026, 11, 26, 1, 2, 3),  # naive: through psycopg's own quoting
    ["a", "b'c", ""], [1, 2], [], Decimal("1.5"),
    ["NULL", "null", "a,b", "{x}", 'q"t', "b\\s", " sp", "tab\there", "ü", "\u00a0nb", "\u3000",
     "%s", "it's"],
])
def test_every_parameter_comes_back_as_it_was_bound(
    app_conn: psycopg.Connection[Any], value: Any
) -> None:
    bound = app_conn.execute("SELECT %(v)s", {"v": value}).fetchone()
    cursor = read_once(app_conn, "acme", "SELECT %(v)s", {"v": value})
    assert cursor is not None
    assert cursor.fetchone() == bound


@pytest.mark.parametrize("obj", [{"a": "it's"}, {"k": ["x", 1, None, {"n": "ü\\"}]}, [], "s"])
def test_jsonb_parameters_come_back_as_they_were_bound(
    app_conn: psycopg.Connection[Any], obj: Any
) -> None:
    cursor = read_once(app_conn, "acme", "SELECT %(v)s", {"v": Jsonb(obj)})
    assert cursor is not None and cursor.fetchone() == (obj,)


def test_text_with_a_nul_is_refused_as_psycopg_refuses_it(
    app_conn: psycopg.Connection[Any],
) -> None:
    with pytest.raises(StorageError, match="NUL"):
        read_once(app_conn, "acme", "SELECT %(v)s::text", {"v": "a\x00b"})
    assert app_conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_a_statement_that_cannot_be_prepared_runs_bound_in_the_same_transaction(
    app_conn: psycopg.Connection[Any], notes: str
) -> None:
    # positional placeholders are not prepared: bound, still in one tenant transaction
    cursor = read_once(app_conn, "acme", notes.replace("%(low)s", "%s"), [2])  # type: ignore[arg-type]
    assert cursor.fetchall() == [("acme note 2",)]
    assert app_conn.execute(CURRENT_TENANT).fetchone() == (None,)
    # the server cannot plan it (no such column): its error, the session reset
    with pytest.raises(StorageError) as caught:
        read_once(app_conn, "acme", "SELECT no_such_column + %(v)s", {"v": 1})
    assert caught.value.context["sqlstate"] == "42703"
    assert app_conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert app_conn.execute(CURRENT_TENANT).fetchone() == (None,)


def test_a_session_that_lost_its_prepared_statement_prepares_it_again(
    app_conn: psycopg.Connection[Any], notes: str
) -> None:
    assert read_once(app_conn, "acme", notes, {"low": 2}).fetchall() == [("acme note 2",)]
    app_conn.execute("DEALLOCATE ALL")
    assert read_once(app_conn, "acme", notes, {"low": 2}).fetchall() == [("acme note 2",)]


def test_a_connection_inside_a_transaction_is_refused(pg: PostgresHandle, notes: str) -> None:
    with psycopg.connect(pg.app_dsn) as conn, pytest.raises(psycopg.ProgrammingError):
        read_once(conn, "acme", notes, {"low": 0})  # not autocommit
    with psycopg.connect(pg.app_dsn, autocommit=True) as conn, tenant_transaction(conn, "acme"):
        with pytest.raises(psycopg.ProgrammingError):
            read_once(conn, "acme", notes, {"low": 0})  # already in one


async def test_async_read_matches_the_sync_one(pg: PostgresHandle, notes: str) -> None:
    async with await psycopg.AsyncConnection.connect(pg.app_dsn, autocommit=True) as conn:
        cursor = await aread_once(conn, "globex", notes, {"low": 2})
        assert cursor is not None
        assert await cursor.fetchall() == [("globex note 2",)]
        with pytest.raises(StorageError):
            await aread_once(conn, "globex", "SELECT 1 / %(zero)s::int", {"zero": 0})
        cur = await conn.execute(CURRENT_TENANT)
        assert await cur.fetchone() == (None,)
