"""Audit invariants enforced by the database: append-only journal, hash chain, guarded deletes.

The tables are built here the way the compiler is expected to build them
(FORCE RLS, tenant-leading keys, the triggers from migration 0002), and the
runtime statements run as the application role inside tenant transactions.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from primitives.db import (
    APP_ROLE,
    SQLSTATE_APPEND_ONLY,
    SQLSTATE_JOURNAL_ISOLATION,
    SQLSTATE_LINKED_DELETE,
    SQLSTATE_PERSISTENT_DELETE,
    tenant_transaction,
)
from primitives.errors import PolicyViolation, StorageError

if TYPE_CHECKING:
    from conftest import PostgresHandle

pytestmark = pytest.mark.db

ZERO_HASH = "0" * 64


def _rls(table: sql.Composable) -> list[sql.Composable]:
    tenant = sql.SQL("tenant_id = (SELECT primitives.current_tenant())")
    return [
        sql.SQL("ALTER TABLE {} ENABLE ROW LEVEL SECURITY").format(table),
        sql.SQL("ALTER TABLE {} FORCE ROW LEVEL SECURITY").format(table),
        sql.SQL("CREATE POLICY tenant_isolation ON {} USING ({}) WITH CHECK ({})").format(
            table, tenant, tenant
        ),
    ]


@pytest.fixture
def journal(scratch_schema: str, as_owner: Callable[..., None]) -> sql.Identifier:
    table = sql.Identifier(scratch_schema, "memory_events")
    as_owner(
        sql.SQL(
            """
            CREATE TABLE {} (
                tenant_id   text NOT NULL,
                seq         bigint NOT NULL,
                prev_hash   text NOT NULL,
                hash        text NOT NULL,
                kind        text NOT NULL,
                memory_id   uuid,
                actor       text,
                payload     jsonb NOT NULL DEFAULT '{{}}',
                occurred_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (tenant_id, seq)
            )
            """
        ).format(table),
        *_rls(table),
        sql.SQL(
            "CREATE TRIGGER zz_chain BEFORE INSERT ON {} "
            "FOR EACH ROW EXECUTE FUNCTION primitives.chain_event('tenant_id')"
        ).format(table),
        sql.SQL(
            "CREATE TRIGGER append_only BEFORE UPDATE OR DELETE ON {} "
            "FOR EACH ROW EXECUTE FUNCTION primitives.refuse_journal_mutation()"
        ).format(table),
        sql.SQL(
            "CREATE TRIGGER append_only_truncate BEFORE TRUNCATE ON {} "
            "FOR EACH STATEMENT EXECUTE FUNCTION primitives.refuse_journal_mutation()"
        ).format(table),
        sql.SQL("GRANT SELECT, INSERT ON {} TO {}").format(table, sql.Identifier(APP_ROLE)),
    )
    return table


def _append(
    conn: psycopg.Connection[Any], journal: sql.Identifier, tenant: str, kind: str, **payload: Any
) -> None:
    with tenant_transaction(conn, tenant):
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (tenant_id, kind, memory_id, actor, payload) "
                "VALUES (%s, %s, %s, %s, %s::jsonb)"
            ).format(journal),
            (tenant, kind, uuid.uuid4(), "agent:test", Jsonb(payload)),
        )


def _verify(conn: psycopg.Connection[Any], journal: sql.Identifier, tenant: str) -> int | None:
    with tenant_transaction(conn, tenant):
        row = conn.execute(
            "SELECT primitives.verify_chain(%s::regclass, 'tenant_id', %s)",
            (journal.as_string(conn), tenant),
        ).fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


def _chain(conn: psycopg.Connection[Any], journal: sql.Identifier, tenant: str) -> list[Any]:
    with tenant_transaction(conn, tenant):
        return conn.execute(
            sql.SQL("SELECT seq, prev_hash, hash FROM {} ORDER BY seq").format(journal)
        ).fetchall()


def test_chain_event_links_each_tenants_events_into_a_verifiable_chain(
    app_conn: psycopg.Connection[Any], journal: sql.Identifier
) -> None:
    for n in range(3):
        _append(app_conn, journal, "acme", "memory.written", n=n)
    _append(app_conn, journal, "globex", "memory.written", n=0)

    acme = _chain(app_conn, journal, "acme")
    assert [seq for seq, _, _ in acme] == [1, 2, 3]
    assert acme[0][1] == ZERO_HASH
    assert [prev for _, prev, _ in acme[1:]] == [h for _, _, h in acme[:-1]]
    assert all(len(h) == 64 for _, _, h in acme)
    assert [seq for seq, _, _ in _chain(app_conn, journal, "globex")] == [1]  # own chain
    assert _verify(app_conn, journal, "acme") is None
    assert _verify(app_conn, journal, "globex") is None


def test_journal_refuses_update_delete_and_truncate_even_for_the_owner(
    admin_conn: psycopg.Connection[Any],
    app_conn: psycopg.Connection[Any],
    journal: sql.Identifier,
    as_owner: Callable[..., None],
) -> None:
    _append(app_conn, journal, "acme", "memory.written")

    for statement in (
        sql.SQL("UPDATE {} SET kind = 'forged'").format(journal),
        sql.SQL("DELETE FROM {}").format(journal),
    ):
        with pytest.raises(PolicyViolation) as caught, tenant_transaction(admin_conn, "acme"):
            admin_conn.execute("SET LOCAL ROLE primitives_owner")
            admin_conn.execute(statement)
        assert caught.value.context["sqlstate"] == SQLSTATE_APPEND_ONLY
        assert isinstance(caught.value.__cause__, psycopg.Error)

    with pytest.raises(psycopg.Error) as truncated:
        as_owner(sql.SQL("TRUNCATE {}").format(journal))
    assert truncated.value.sqlstate == SQLSTATE_APPEND_ONLY
    assert "memory_events is append-only" in str(truncated.value)
    assert _verify(app_conn, journal, "acme") is None


def test_app_role_mutating_the_journal_gets_policy_violation_with_append_only_sqlstate(
    admin_conn: psycopg.Connection[Any], app_conn: psycopg.Connection[Any], journal: sql.Identifier
) -> None:
    _append(app_conn, journal, "acme", "memory.written")
    # even with UPDATE granted, the trigger refuses
    admin_conn.execute(
        sql.SQL("GRANT UPDATE, DELETE ON {} TO {}").format(journal, sql.Identifier(APP_ROLE))
    )
    for statement in (
        sql.SQL("UPDATE {} SET actor = 'someone else'").format(journal),
        sql.SQL("DELETE FROM {}").format(journal),
    ):
        with pytest.raises(PolicyViolation) as caught, tenant_transaction(app_conn, "acme"):
            app_conn.execute(statement)
        assert caught.value.context["sqlstate"] == SQLSTATE_APPEND_ONLY
        assert "append-only" in caught.value.message


def test_verify_chain_reports_the_first_tampered_event(
    app_conn: psycopg.Connection[Any],
    journal: sql.Identifier,
    as_owner: Callable[..., None],
    admin_conn: psycopg.Connection[Any],
) -> None:
    for n in range(4):
        _append(app_conn, journal, "acme", "memory.written", n=n)

    # Tampering needs the owner to switch the guard off first; the chain still tells.
    as_owner(sql.SQL("ALTER TABLE {} DISABLE TRIGGER append_only").format(journal))
    with tenant_transaction(admin_conn, "acme"):
        admin_conn.execute("SET LOCAL ROLE primitives_owner")
        admin_conn.execute(
            sql.SQL("UPDATE {} SET payload = '{{\"n\": 99}}' WHERE seq = 3").format(journal)
        )
    assert _verify(app_conn, journal, "acme") == 3

    with tenant_transaction(admin_conn, "acme"):
        admin_conn.execute("SET LOCAL ROLE primitives_owner")
        admin_conn.execute(sql.SQL("DELETE FROM {} WHERE seq = 2").format(journal))
    assert _verify(app_conn, journal, "acme") == 2  # the gap left by the deleted event


def test_concurrent_appends_of_one_tenant_keep_the_chain_intact(
    pg: PostgresHandle, journal: sql.Identifier
) -> None:
    writers, events = 4, 15
    start = threading.Barrier(writers)
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            with psycopg.connect(pg.app_dsn, autocommit=True) as conn:
                start.wait()
                for n in range(events):
                    _append(conn, journal, "acme", "memory.written", worker=worker, n=n)
                    _append(conn, journal, f"other-{worker}", "memory.written", n=n)
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    with psycopg.connect(pg.app_dsn, autocommit=True) as conn:
        assert [seq for seq, _, _ in _chain(conn, journal, "acme")] == list(
            range(1, writers * events + 1)
        )
        assert _verify(conn, journal, "acme") is None
        for worker in range(writers):
            assert _verify(conn, journal, f"other-{worker}") is None


def test_journal_insert_outside_read_committed_is_refused(
    app_conn: psycopg.Connection[Any], journal: sql.Identifier
) -> None:
    # The tenant transaction's first statement sets the tenant, which takes a snapshot, so
    # the isolation level comes from the session default its BEGIN reads.
    app_conn.execute("SET default_transaction_isolation = 'repeatable read'")
    with pytest.raises(StorageError) as caught, tenant_transaction(app_conn, "acme"):
        assert app_conn.execute("SHOW transaction_isolation").fetchone() == ("repeatable read",)
        app_conn.execute(
            sql.SQL("INSERT INTO {} (tenant_id, kind) VALUES ('acme', 'x')").format(journal)
        )
    assert caught.value.context["sqlstate"] == SQLSTATE_JOURNAL_ISOLATION
    assert "READ COMMITTED" in caught.value.message


# -- guarded deletes -------------------------------------------------------------------


@pytest.fixture
def memories(
    scratch_schema: str, as_owner: Callable[..., None]
) -> tuple[sql.Identifier, sql.Identifier]:
    table = sql.Identifier(scratch_schema, "memories")
    links = sql.Identifier(scratch_schema, "action_links")
    app = sql.Identifier(APP_ROLE)
    as_owner(
        sql.SQL(
            "CREATE TABLE {} (tenant_id text NOT NULL, id uuid NOT NULL DEFAULT gen_random_uuid(),"
            " persistent boolean NOT NULL DEFAULT false, content text,"
            " PRIMARY KEY (tenant_id, id))"
        ).format(table),
        sql.SQL(
            "CREATE TABLE {} (tenant_id text NOT NULL, action_id uuid NOT NULL,"
            " memory_id uuid NOT NULL, PRIMARY KEY (tenant_id, action_id, memory_id))"
        ).format(links),
        *_rls(table),
        *_rls(links),
        sql.SQL(
            "CREATE TRIGGER guard_delete BEFORE DELETE ON {} FOR EACH ROW "
            "EXECUTE FUNCTION primitives.guard_memory_delete({}, 'tenant_id')"
        ).format(table, sql.Literal(f"{scratch_schema}.action_links")),
        sql.SQL("GRANT SELECT, INSERT, DELETE ON {}, {} TO {}").format(table, links, app),
    )
    return table, links


def _remember(
    conn: psycopg.Connection[Any], table: sql.Identifier, tenant: str, *, persistent: bool
) -> uuid.UUID:
    with tenant_transaction(conn, tenant):
        row = conn.execute(
            sql.SQL(
                "INSERT INTO {} (tenant_id, persistent, content) VALUES (%s, %s, 'x') RETURNING id"
            ).format(table),
            (tenant, persistent),
        ).fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


def _delete(
    conn: psycopg.Connection[Any], table: sql.Identifier, tenant: str, memory: uuid.UUID
) -> int:
    with tenant_transaction(conn, tenant):
        return conn.execute(
            sql.SQL("DELETE FROM {} WHERE id = %s").format(table), (memory,)
        ).rowcount


def test_persistent_memory_cannot_be_hard_deleted(
    app_conn: psycopg.Connection[Any], memories: tuple[sql.Identifier, sql.Identifier]
) -> None:
    table, _ = memories
    kept = _remember(app_conn, table, "acme", persistent=True)
    with pytest.raises(PolicyViolation) as caught:
        _delete(app_conn, table, "acme", kept)
    assert caught.value.context["sqlstate"] == SQLSTATE_PERSISTENT_DELETE
    assert "persistent" in caught.value.message and str(kept) in caught.value.message


def test_action_linked_memory_cannot_be_hard_deleted(
    app_conn: psycopg.Connection[Any], memories: tuple[sql.Identifier, sql.Identifier]
) -> None:
    table, links = memories
    linked = _remember(app_conn, table, "acme", persistent=False)
    with tenant_transaction(app_conn, "acme"):
        app_conn.execute(
            sql.SQL(
                "INSERT INTO {} (tenant_id, action_id, memory_id) VALUES ('acme', %s, %s)"
            ).format(links),
            (uuid.uuid4(), linked),
        )
    with pytest.raises(PolicyViolation) as caught:
        _delete(app_conn, table, "acme", linked)
    assert caught.value.context["sqlstate"] == SQLSTATE_LINKED_DELETE
    assert "linked" in caught.value.message


def test_transient_unlinked_memory_can_be_deleted(
    app_conn: psycopg.Connection[Any], memories: tuple[sql.Identifier, sql.Identifier]
) -> None:
    table, links = memories
    scratch = _remember(app_conn, table, "acme", persistent=False)
    # a link held by another tenant to the same id does not count for acme
    other = _remember(app_conn, table, "globex", persistent=False)
    with tenant_transaction(app_conn, "globex"):
        app_conn.execute(
            sql.SQL(
                "INSERT INTO {} (tenant_id, action_id, memory_id) VALUES ('globex', %s, %s)"
            ).format(links),
            (uuid.uuid4(), other),
        )
    assert _delete(app_conn, table, "acme", scratch) == 1
