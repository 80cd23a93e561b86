"""``primitives.tenant_xact_lock`` (migration 0011): the per-tenant transaction lock that every
journal event takes. Its common path runs no query; what it locks and whom it refuses stay
as they were: a second transaction of the tenant waits for the first, another tenant's lock
is refused to the runtime role and taken for a session that may become the maintainer."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.conftest import PostgresHandle

pytestmark = pytest.mark.db

Conn = psycopg.Connection[Any]

LOCK = "SELECT primitives.tenant_xact_lock(%s, %s)"


def _tenant(conn: Conn, tenant: str) -> None:
    """Open a transaction of ``tenant`` on ``conn`` (not autocommit)."""
    conn.execute("SELECT primitives.set_tenant(%s)", (tenant,))


def _try_lock(conn: Conn, tenant: str, scope: str) -> bool:
    """Whether ``conn``, in a new transaction of ``tenant``, gets the lock within 200 ms."""
    try:
        _tenant(conn, tenant)
        conn.execute("SET LOCAL lock_timeout = '200ms'")
        conn.execute(LOCK, (tenant, scope))
    except psycopg.errors.LockNotAvailable:
        conn.rollback()
        return False
    conn.rollback()
    return True


def test_a_second_transaction_of_the_tenant_waits_for_the_first_until_it_ends(
        pg: PostgresHandle) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg.app_dsn) as first, psycopg.connect(pg.app_dsn) as second:
        _tenant(first, tenant)
        first.execute(LOCK, (tenant, "journal x"))
        first.execute(LOCK, (tenant, "journal x"))  # again in the same transaction: held
        assert not _try_lock(second, tenant, "journal x")
        assert _try_lock(second, tenant, "journal y")  # another scope is another lock
        first.commit()
        assert _try_lock(second, tenant, "journal x")


def test_another_tenants_lock_is_refused_to_the_app_role_and_nothing_is_held(
        pg: PostgresHandle) -> None:
    a, b = f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg.app_dsn) as attacker, psycopg.connect(pg.app_dsn) as writer:
        _tenant(attacker, b)
        with pytest.raises(psycopg.errors.InsufficientPrivilege,
                           match="tenant of the current transaction") as raised:
            attacker.execute(LOCK, (a, "journal x"))
        assert raised.value.diag.message_hint == "SET LOCAL primitives.tenant to the tenant first."
        assert _try_lock(writer, a, "journal x")
        attacker.rollback()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # no tenant set at all
            attacker.execute(LOCK, (a, "journal x"))


@pytest.fixture
def maintainer_member(pg: PostgresHandle) -> Iterator[str]:
    """The DSN of a login role, not a superuser, that is a member of the maintainer role."""
    name = f"maint_{uuid.uuid4().hex[:8]}"
    password = uuid.uuid4().hex
    with psycopg.connect(pg.admin_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER PASSWORD {} "
                              "IN ROLE primitives_maintainer").format(
            sql.Identifier(name), sql.Literal(password)))
        try:
            info = psycopg.conninfo.conninfo_to_dict(pg.app_dsn)
            info.update(user=name, password=password)
            yield psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items()})
        finally:
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def test_a_session_that_may_become_the_maintainer_locks_any_tenant(
        pg: PostgresHandle, maintainer_member: str) -> None:
    a, b = f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
    with psycopg.connect(maintainer_member) as maintainer, \
            psycopg.connect(pg.app_dsn) as writer:
        maintainer.execute("SET LOCAL ROLE primitives_maintainer")
        _tenant(maintainer, b)
        maintainer.execute(LOCK, (a, "journal x"))
        assert not _try_lock(writer, a, "journal x")
        maintainer.rollback()
        assert _try_lock(writer, a, "journal x")
