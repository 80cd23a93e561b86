"""Tenancy as the application role: roles, tenant transactions, row-level security."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from psycopg import sql

from primitives.db import (
    APP_ROLE,
    AUDITOR_ROLE,
    OWNER_ROLE,
    atenant_transaction,
    tenant_transaction,
)
from primitives.errors import PolicyViolation, StorageError, TenancyError

if TYPE_CHECKING:
    from conftest import PostgresHandle

pytestmark = pytest.mark.db

CURRENT_TENANT = "SELECT primitives.current_tenant()"


# -- roles -------------------------------------------------------------------------------


@pytest.mark.parametrize("role", [APP_ROLE, AUDITOR_ROLE])
def test_runtime_roles_cannot_bypass_row_level_security(
    admin_conn: psycopg.Connection[Any], role: str
) -> None:
    row = admin_conn.execute(
        "SELECT rolcanlogin, rolsuper, rolbypassrls, rolcreatedb, rolcreaterole"
        " FROM pg_roles WHERE rolname = %s",
        (role,),
    ).fetchone()
    assert row == (True, False, False, False, False)


def test_app_role_owns_nothing(admin_conn: psycopg.Connection[Any]) -> None:
    owned = admin_conn.execute(
        """
        SELECT count(*) FROM (
            SELECT relowner AS owner FROM pg_class
            UNION ALL SELECT nspowner FROM pg_namespace
            UNION ALL SELECT proowner FROM pg_proc
            UNION ALL SELECT typowner FROM pg_type
            UNION ALL SELECT datdba FROM pg_database
        ) AS objects
        WHERE owner = (SELECT oid FROM pg_roles WHERE rolname = %s)
        """,
        (APP_ROLE,),
    ).fetchone()
    assert owned == (0,)


def test_app_role_cannot_create_objects_or_become_the_owner(
    app_conn: psycopg.Connection[Any],
) -> None:
    for statement in (
        "CREATE TABLE primitives.sneaky (id int)",
        "CREATE TABLE public.sneaky (id int)",
        "SET ROLE primitives_owner",
        "SELECT * FROM primitives.schema_migrations",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app_conn.execute(statement)


def test_app_role_reads_capabilities_and_current_tenant(
    app_conn: psycopg.Connection[Any],
) -> None:
    rows = app_conn.execute("SELECT name, installed FROM primitives.capabilities").fetchall()
    assert {name for name, _ in rows} == {"vector", "pg_trgm", "btree_gin"}
    installed = dict(rows)
    for name in ("vector", "btree_gin"):
        available = app_conn.execute(
            "SELECT count(*) > 0 FROM pg_available_extensions WHERE name = %s", (name,)
        ).fetchone()
        assert available == (installed[name],)  # installed wherever the server offers it
    has_vector = app_conn.execute("SELECT primitives.has_capability('vector')").fetchone()
    assert has_vector == (installed["vector"],)
    assert app_conn.execute(CURRENT_TENANT).fetchone() == (None,)


# -- tenant transactions -----------------------------------------------------------------


def test_tenant_does_not_leak_into_the_next_transaction_on_the_same_connection(
    app_conn: psycopg.Connection[Any],
) -> None:
    with tenant_transaction(app_conn, "acme") as tx:
        assert tx.execute(CURRENT_TENANT).fetchone() == ("acme",)
    assert app_conn.execute(CURRENT_TENANT).fetchone() == (None,)

    with pytest.raises(RuntimeError), tenant_transaction(app_conn, "acme"):
        raise RuntimeError("rolled back")
    assert app_conn.execute(CURRENT_TENANT).fetchone() == (None,)

    with tenant_transaction(app_conn, "globex") as tx:
        assert tx.execute(CURRENT_TENANT).fetchone() == ("globex",)


def test_tenant_does_not_leak_on_a_non_autocommit_connection(pg: PostgresHandle) -> None:
    with psycopg.connect(pg.app_dsn) as conn:
        with tenant_transaction(conn, "acme"):
            pass
        assert conn.execute(CURRENT_TENANT).fetchone() == (None,)
        # now inside an implicit transaction: a tenant block would leak into it, so it refuses
        with pytest.raises(TenancyError), tenant_transaction(conn, "acme"):
            pass


@pytest.mark.parametrize("tenant", ["", "   "])
def test_empty_tenant_is_refused_before_touching_the_database(
    app_conn: psycopg.Connection[Any], tenant: str
) -> None:
    with pytest.raises(TenancyError), tenant_transaction(app_conn, tenant):
        pass


def test_tenant_value_is_sent_as_a_literal_not_as_sql(app_conn: psycopg.Connection[Any]) -> None:
    tricky = "acme'; RESET primitives.tenant; --"
    with tenant_transaction(app_conn, tricky) as tx:
        assert tx.execute(CURRENT_TENANT).fetchone() == (tricky,)


def test_other_database_errors_become_storage_error_with_sqlstate(
    app_conn: psycopg.Connection[Any],
) -> None:
    with pytest.raises(StorageError) as caught, tenant_transaction(app_conn, "acme") as tx:
        tx.execute("SELECT 1 / 0")
    assert caught.value.context == {"sqlstate": "22012", "tenant": "acme", "table": None}
    assert not isinstance(caught.value, PolicyViolation)


async def test_async_tenant_transaction_sets_and_clears_the_tenant(pg: PostgresHandle) -> None:
    async with await psycopg.AsyncConnection.connect(pg.app_dsn, autocommit=True) as conn:
        async with atenant_transaction(conn, "acme") as tx:
            cur = await tx.execute(CURRENT_TENANT)
            assert await cur.fetchone() == ("acme",)
        cur = await conn.execute(CURRENT_TENANT)
        assert await cur.fetchone() == (None,)
        with pytest.raises(TenancyError):
            async with atenant_transaction(conn, ""):
                pass


# -- row-level security ------------------------------------------------------------------


@pytest.fixture
def notes(scratch_schema: str, as_owner: Callable[..., None]) -> sql.Identifier:
    table = sql.Identifier(scratch_schema, "notes")
    tenant = sql.SQL("tenant_id = (SELECT primitives.current_tenant())")
    as_owner(
        sql.SQL("CREATE TABLE {} (tenant_id text NOT NULL, body text NOT NULL)").format(table),
        sql.SQL("ALTER TABLE {} ENABLE ROW LEVEL SECURITY").format(table),
        sql.SQL("ALTER TABLE {} FORCE ROW LEVEL SECURITY").format(table),
        sql.SQL("CREATE POLICY tenant_isolation ON {} USING ({}) WITH CHECK ({})").format(
            table, tenant, tenant
        ),
        sql.SQL("GRANT SELECT, INSERT, UPDATE ON {} TO {}").format(table, sql.Identifier(APP_ROLE)),
    )
    return table


def _insert_note(
    conn: psycopg.Connection[Any], table: sql.Identifier, owner: str, body: str
) -> None:
    conn.execute(
        sql.SQL("INSERT INTO {} (tenant_id, body) VALUES (%s, %s)").format(table), (owner, body)
    )


def test_app_role_sees_only_its_tenants_rows(
    app_conn: psycopg.Connection[Any], notes: sql.Identifier
) -> None:
    for tenant in ("acme", "globex"):
        with tenant_transaction(app_conn, tenant):
            _insert_note(app_conn, notes, tenant, f"{tenant} secret")

    select_all = sql.SQL("SELECT tenant_id, body FROM {}").format(notes)
    with tenant_transaction(app_conn, "acme") as tx:
        assert tx.execute(select_all).fetchall() == [("acme", "acme secret")]
    assert app_conn.execute(select_all).fetchall() == []  # no tenant, no rows


def test_cross_tenant_insert_raises_policy_violation(
    app_conn: psycopg.Connection[Any], notes: sql.Identifier
) -> None:
    with pytest.raises(PolicyViolation) as caught, tenant_transaction(app_conn, "acme"):
        _insert_note(app_conn, notes, "globex", "planted by acme")
    assert caught.value.context["sqlstate"] == "42501"
    assert caught.value.context["tenant"] == "acme"
    assert "notes" in caught.value.message  # "new row violates row-level security policy ..."
    assert isinstance(caught.value.__cause__, psycopg.errors.InsufficientPrivilege)

    with tenant_transaction(app_conn, "globex") as tx:
        rows = tx.execute(sql.SQL("SELECT count(*) FROM {}").format(notes)).fetchone()
    assert rows == (0,)  # nothing was written


def test_moving_a_row_to_another_tenant_raises_policy_violation(
    app_conn: psycopg.Connection[Any], notes: sql.Identifier
) -> None:
    with tenant_transaction(app_conn, "acme"):
        _insert_note(app_conn, notes, "acme", "mine")
    with pytest.raises(PolicyViolation), tenant_transaction(app_conn, "acme") as tx:
        tx.execute(sql.SQL("UPDATE {} SET tenant_id = 'globex'").format(notes))


def test_owner_role_is_subject_to_forced_row_level_security(
    admin_conn: psycopg.Connection[Any], app_conn: psycopg.Connection[Any], notes: sql.Identifier
) -> None:
    with tenant_transaction(app_conn, "acme"):
        _insert_note(app_conn, notes, "acme", "mine")
    with admin_conn.transaction():
        admin_conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(OWNER_ROLE)))
        count = admin_conn.execute(sql.SQL("SELECT count(*) FROM {}").format(notes)).fetchone()
    assert count == (0,)
