"""Fixtures of the security suite: all five reference specs migrated, tenants seeded.

- ``on_cluster``: whether ``pg`` is a Citus coordinator.
- ``specs``: the five reference specs, migrated once per module into the session database.
- ``engines``: one engine per agent (application role), closed at the end of the module.
- ``world``: per agent, tenants ``a`` and ``b`` with rows in every table, and ``c`` with none.
- ``app_session``, ``auditor_session``: module-wide autocommit connections as those roles
  (the function-scoped ``app_conn`` would open hundreds of connections for the parametrised
  tests). A test that changes session state must use its own connection.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from primitives._project import migrate
from primitives.db import APP_ROLE, AUDITOR_ROLE
from primitives.db._citus import is_citus_coordinator
from primitives.engine import Engine
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle
from tests.security._support import SPECS, World, connect_engine, new_tenant, seed_tenant


@pytest.fixture(scope="session")
def on_cluster(pg: PostgresHandle) -> bool:
    """Whether ``pg`` is a Citus coordinator (``tests/citus`` runs this suite there). Only a
    test whose premise is single-node branches on it, saying why, and asserts the same
    property on both targets."""
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        return is_citus_coordinator(conn)


@pytest.fixture(scope="module")
def specs(pg: PostgresHandle) -> tuple[AgentSpec, ...]:
    migrate(list(SPECS), dsn=pg.admin_dsn, progress=lambda _: None)
    return SPECS


@pytest.fixture(scope="module")
def engines(pg: PostgresHandle, specs: tuple[AgentSpec, ...]) -> Iterator[dict[str, Engine]]:
    made = {spec.agent: connect_engine(spec, pg.app_dsn, max_connections=2) for spec in specs}
    yield made
    for engine in made.values():
        engine.close()


@pytest.fixture(scope="module")
def world(engines: dict[str, Engine]) -> dict[str, World]:
    return {
        agent: World(seed_tenant(engine, new_tenant("a")), seed_tenant(engine, new_tenant("b")),
                     new_tenant("c"))
        for agent, engine in engines.items()
    }


@pytest.fixture(scope="module")
def app_session(pg: PostgresHandle,
                specs: tuple[AgentSpec, ...]) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg.app_dsn, autocommit=True) as conn:
        assert conn.info.user == APP_ROLE
        yield conn


@pytest.fixture(scope="module")
def auditor_session(pg: PostgresHandle,
                    specs: tuple[AgentSpec, ...]) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg.auditor_dsn, autocommit=True) as conn:
        assert conn.info.user == AUDITOR_ROLE
        yield conn
