"""Shared fixtures: one migrated PostgreSQL for the session, reached as three roles.

``pg`` starts the embedded server in a fresh ``PRIMITIVES_HOME`` (or uses
``PRIMITIVES_DSN`` when it is set, e.g. a Debian PostgreSQL without pgvector),
applies the framework migrations, and stops the embedded server at the end.

Fixtures for later test files:

- ``make_home``: ``make_home()`` returns a fresh PRIMITIVES_HOME (servers stopped at the end).
- ``pg``: ``PostgresHandle`` with ``admin_dsn``, ``app_dsn``, ``auditor_dsn``, ``home``.
- ``admin_conn``, ``app_conn``, ``auditor_conn``: autocommit connections, closed after the test.
  Isolation tests run as ``app_conn``: a superuser proves nothing about RLS.
- ``scratch_schema``: a fresh schema owned by ``primitives_owner`` (usable by the app role),
  dropped after the test.
- ``as_owner``: ``as_owner(stmt, ...)`` runs statements in one transaction as ``primitives_owner``.
- ``fresh_database``: ``fresh_database()`` creates an empty database and returns its admin DSN;
  every database made is dropped after the test.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.abc import Query
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from primitives.db import (
    APP_ROLE,
    AUDITOR_ROLE,
    OWNER_ROLE,
    app_dsn,
    apply_migrations,
    auditor_dsn,
    resolve_dsn,
    stop_server,
)


@dataclass(frozen=True)
class PostgresHandle:
    """The session's database: one DSN per role; ``home`` is None for ``PRIMITIVES_DSN``."""

    admin_dsn: str
    app_dsn: str
    auditor_dsn: str
    home: Path | None


@pytest.fixture(scope="session")
def make_home() -> Iterator[Callable[[], Path]]:
    """Fresh PRIMITIVES_HOME folders; their servers are stopped and folders removed at the end.

    Not under pytest's basetemp: every pytest session (a concurrent one too) resets
    /tmp/pytest-of-<user> to mode 0700, which, under root, locks the embedded
    server's system user out of its own data directory.
    """
    homes: list[Path] = []

    def make() -> Path:
        home = Path(tempfile.mkdtemp(prefix="primitives-test-"))
        homes.append(home)
        return home

    yield make
    for home in homes:
        stop_server(home)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def pg(make_home: Callable[[], Path]) -> Iterator[PostgresHandle]:
    yield from single_node(make_home)


def single_node(make_home: Callable[[], Path]) -> Iterator[PostgresHandle]:
    """A migrated single-node server (``PRIMITIVES_DSN``'s, else an embedded one in a fresh
    home), for a fixture to yield from; the suite's ``pg`` is one, and the Citus suite, whose
    ``pg`` is the coordinator, starts one beside it."""
    with pytest.MonkeyPatch.context() as env:
        home: Path | None = None
        if not os.environ.get("PRIMITIVES_DSN"):
            home = make_home()
            env.setenv("PRIMITIVES_HOME", str(home))
            # role DSNs pointing at some other server must not leak into this one
            env.delenv("PRIMITIVES_APP_DSN", raising=False)
            env.delenv("PRIMITIVES_AUDITOR_DSN", raising=False)
        admin = resolve_dsn()
        try:
            apply_migrations(admin)
            yield PostgresHandle(admin, app_dsn(admin), auditor_dsn(admin), home)
        finally:
            if home is not None:
                stop_server(home)


@pytest.fixture
def admin_conn(pg: PostgresHandle) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture
def app_conn(pg: PostgresHandle) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg.app_dsn, autocommit=True) as conn:
        assert conn.info.user == APP_ROLE
        yield conn


@pytest.fixture
def auditor_conn(pg: PostgresHandle) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg.auditor_dsn, autocommit=True) as conn:
        assert conn.info.user == AUDITOR_ROLE
        yield conn


@pytest.fixture
def as_owner(admin_conn: psycopg.Connection[Any]) -> Callable[..., None]:
    def run(*statements: Query) -> None:
        with admin_conn.transaction():
            admin_conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(OWNER_ROLE)))
            for statement in statements:
                admin_conn.execute(statement)

    return run


@pytest.fixture
def scratch_schema(
    admin_conn: psycopg.Connection[Any], as_owner: Callable[..., None]
) -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    schema = sql.Identifier(name)
    as_owner(
        sql.SQL("CREATE SCHEMA {}").format(schema),
        sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, sql.Identifier(APP_ROLE)),
    )
    yield name
    admin_conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(schema))


@pytest.fixture
def tenant_table(
    as_owner: Callable[..., None], scratch_schema: str
) -> Callable[..., sql.Identifier]:
    """A factory of tables in the scratch schema shaped like the framework's own: row-level
    security enabled and forced, one policy on the tenant column for reads and writes alike,
    SELECT and INSERT for the application role. ``columns`` is the column list as SQL (the
    tenant column among them), each of ``indexes`` a CREATE INDEX with ``{}`` for the table."""

    def make(name: str, columns: str, *, tenant: str = "tenant",
             indexes: tuple[str, ...] = ()) -> sql.Identifier:
        table = sql.Identifier(scratch_schema, name)
        mine = sql.SQL("{} = (SELECT primitives.current_tenant())").format(sql.Identifier(tenant))
        as_owner(
            sql.SQL("CREATE TABLE {} ({})").format(table, sql.SQL(columns)),
            *(sql.SQL(index).format(table) for index in indexes),
            sql.SQL("ALTER TABLE {} ENABLE ROW LEVEL SECURITY").format(table),
            sql.SQL("ALTER TABLE {} FORCE ROW LEVEL SECURITY").format(table),
            sql.SQL("CREATE POLICY tenant_isolation ON {} USING ({}) WITH CHECK ({})").format(
                table, mine, mine),
            sql.SQL("GRANT SELECT, INSERT ON {} TO {}").format(table, sql.Identifier(APP_ROLE)),
        )
        return table

    return make


@pytest.fixture
def fresh_database(
    admin_conn: psycopg.Connection[Any], pg: PostgresHandle
) -> Iterator[Callable[[], str]]:
    made: list[str] = []

    def make() -> str:
        name = f"t_{uuid.uuid4().hex[:12]}"
        admin_conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        made.append(name)
        params = conninfo_to_dict(pg.admin_dsn)
        params["dbname"] = name
        return make_conninfo("", **params)

    yield make
    for name in made:
        admin_conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
