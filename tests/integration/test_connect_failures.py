"""A connection that cannot be made is reported within 3 s with its cause (issue 21, part 3).

The session's embedded server is made to ask one role for a scram-sha-256 password (a line
at the top of its pg_hba.conf, removed afterwards); the other failures need no server setup:
a port nobody listens on, a socket that accepts and never answers.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from primitives._project import migrate
from primitives.db._session import runtime_conninfo
from primitives.engine import Engine
from primitives.errors import StorageError
from primitives.spec import load_spec
from tests.conftest import PostgresHandle

ROOT = Path(__file__).resolve().parents[2]
SPECTRAL = ROOT / "agents" / "spectral_agent.yaml"
ROLE = "pw_app_t21"
PASSWORD = "s3cret-t21"


def _with(dsn: str, **params: str) -> str:
    return make_conninfo(dsn, **params)


@pytest.fixture(scope="module")
def password_role(pg: PostgresHandle) -> Iterator[str]:
    """A login role that must give a password; member of primitives_app (its grants)."""
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        hba = Path(str(conn.execute("SHOW hba_file").fetchone()[0]))  # type: ignore[index]
        original = hba.read_text()
        conn.execute(f"DROP ROLE IF EXISTS {ROLE}")
        conn.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{PASSWORD}' IN ROLE primitives_app")
        hba.write_text(f"local all {ROLE} scram-sha-256\n"
                       f"host all {ROLE} 127.0.0.1/32 scram-sha-256\n" + original)
        conn.execute("SELECT pg_reload_conf()")
        time.sleep(0.3)
    try:
        yield _with(pg.app_dsn, user=ROLE)
    finally:
        hba.write_text(original)
        with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_reload_conf()")
            conn.execute(f"DROP ROLE IF EXISTS {ROLE}")


def _fails_fast(dsn: str, match: str) -> str:
    started = time.perf_counter()
    with pytest.raises(StorageError, match=match) as caught:
        Engine.connect(load_spec(SPECTRAL), dsn)
    assert time.perf_counter() - started < 3
    return str(caught.value)


def test_a_role_without_its_password_is_told_how_to_give_one(password_role: str) -> None:
    message = _fails_fast(password_role, "asks for a password and none was given")
    assert message.startswith("cannot connect as the application role:")
    assert f"ALTER ROLE {ROLE} PASSWORD" in message and "PRIMITIVES_APP_DSN" in message


def test_a_wrong_password_is_reported_as_authentication_failed(password_role: str) -> None:
    message = _fails_fast(_with(password_role, password="wrong"),
                          f"authentication failed for {ROLE}")
    assert "password authentication failed" in message  # the server's own words kept


@pytest.mark.filterwarnings("ignore:agent 'spectral'")  # no embedder: lexical only
def test_the_right_password_connects_and_works(password_role: str, pg: PostgresHandle) -> None:
    spec = load_spec(SPECTRAL)
    migrate([spec], dsn=pg.admin_dsn)
    runtime = runtime_conninfo(_with(password_role, password=PASSWORD))
    assert conninfo_to_dict(runtime)["user"] == ROLE
    with Engine.connect(spec, _with(password_role, password=PASSWORD)) as engine, \
            engine.tenant({"workspace_id": "ws-t21"}) as mem:
        mem.observe("workspace", "Prefers short answers.", typology="procedural",
                    key="style-t21")
        assert [h.memory.content for h in mem.search("short answers")] == \
            ["Prefers short answers."]


def test_an_unknown_role_is_named_with_the_way_forward(pg: PostgresHandle) -> None:
    message = _fails_fast(_with(pg.app_dsn, user="nobody_t21"), "no such role nobody_t21")
    assert "primitives migrate" in message


def test_an_unknown_database_is_named(pg: PostgresHandle) -> None:
    _fails_fast(_with(pg.app_dsn, dbname="no_such_db_t21"), "no such database")


def test_a_port_nobody_listens_on_is_reported_not_reachable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    _fails_fast(f"host=127.0.0.1 port={port} user=primitives_app dbname=postgres",
                f"server not reachable at 127.0.0.1:{port}")


def test_a_server_that_never_answers_is_reported_within_the_timeout() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)  # accepts the TCP connection, never speaks
        port = silent.getsockname()[1]
        _fails_fast(f"host=127.0.0.1 port={port} user=primitives_app dbname=postgres",
                    "did not answer within the connect timeout")


def test_migrate_reports_a_wrong_admin_password(password_role: str) -> None:
    spec = load_spec(SPECTRAL)
    started = time.perf_counter()
    with pytest.raises(StorageError, match=r"cannot connect as the admin .*authentication failed"):
        migrate([spec], dsn=_with(password_role, password="wrong"))
    assert time.perf_counter() - started < 3


async def test_the_async_engine_reports_the_same_causes(password_role: str) -> None:
    from primitives.engine import AsyncEngine

    started = time.perf_counter()
    with pytest.raises(StorageError, match=f"authentication failed for {ROLE}"):
        await AsyncEngine.connect(load_spec(SPECTRAL), _with(password_role, password="wrong"))
    with pytest.raises(StorageError, match="asks for a password and none was given"):
        await AsyncEngine.connect(load_spec(SPECTRAL), password_role)
    assert time.perf_counter() - started < 3
