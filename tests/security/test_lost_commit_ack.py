"""Issue 17, defect 10: a retry after a lost COMMIT acknowledgement writes nothing twice.

A loopback proxy between the engine and the server forwards every message, except that,
when armed, it drops the connection the moment the server's ``CommandComplete`` for a
``COMMIT`` arrives, before passing it on: the server has committed, the client only sees its
connection die. The engine's retry (or the caller's, with the same ``memory_id``) must then
find the row that COMMIT wrote and return it: one row and one journal event, never two.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from primitives.engine import AsyncEngine, Engine, Memory
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle
from tests.security._support import SPEC_BY_AGENT, new_tenant

pytestmark = pytest.mark.db

_COMMIT_DONE = b"COMMIT\x00"


class CommitCutter:
    """A TCP proxy on 127.0.0.1 to the server that can cut a connection after a COMMIT."""

    def __init__(self, upstream: dict[str, Any]) -> None:
        self._upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.armed = threading.Event()
        self.cuts = 0
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _connect_upstream(self) -> socket.socket:
        host = str(self._upstream.get("host") or "localhost")
        port = int(self._upstream.get("port") or 5432)
        if host.startswith("/"):  # the embedded server: a unix socket directory
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(f"{host}/.s.PGSQL.{port}")
            return sock
        return socket.create_connection((host, port))

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = self._connect_upstream()
            self._open += [client, server]
            threading.Thread(target=self._to_server, args=(client, server), daemon=True).start()
            threading.Thread(target=self._to_client, args=(server, client), daemon=True).start()

    @staticmethod
    def _to_server(client: socket.socket, server: socket.socket) -> None:
        try:
            while data := client.recv(65536):
                server.sendall(data)
        except OSError:
            pass
        _close(client, server)

    def _to_client(self, server: socket.socket, client: socket.socket) -> None:
        """Forward whole backend messages; when armed, drop the line at a COMMIT's reply."""
        buffer = b""
        try:
            while data := server.recv(65536):
                buffer += data
                out = b""
                while len(buffer) >= 5:
                    size = 1 + int.from_bytes(buffer[1:5], "big")
                    if len(buffer) < size:
                        break
                    message, buffer = buffer[:size], buffer[size:]
                    if (message[:1] == b"C" and message[5:] == _COMMIT_DONE
                            and self.armed.is_set()):
                        self.armed.clear()
                        self.cuts += 1
                        client.sendall(out)  # what came before the COMMIT's reply
                        _close(client, server)
                        return
                    out += message
                if out:
                    client.sendall(out)
        except OSError:
            pass
        _close(client, server)

    def close(self) -> None:
        self._listener.close()
        for sock in self._open:
            _close(sock)


def _close(*socks: socket.socket) -> None:
    for sock in socks:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()


@pytest.fixture(scope="module")
def spectral(specs: tuple[AgentSpec, ...]) -> AgentSpec:
    return SPEC_BY_AGENT["spectral"]


@pytest.fixture(scope="module")
def cutter(pg: PostgresHandle) -> Iterator[CommitCutter]:
    made = CommitCutter(conninfo_to_dict(pg.app_dsn))
    yield made
    made.close()


@pytest.fixture(scope="module")
def proxied_dsn(pg: PostgresHandle, cutter: CommitCutter) -> str:
    params = conninfo_to_dict(pg.app_dsn)
    params.update(host="127.0.0.1", port=str(cutter.port), sslmode="disable",
                  gssencmode="disable")
    return make_conninfo("", **params)


@pytest.fixture(scope="module")
def engine(proxied_dsn: str, spectral: AgentSpec) -> Iterator[Engine]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        made = Engine.connect(spectral, proxied_dsn, max_connections=2)
    yield made
    made.close()


def _rows_and_events(engine: Engine, tenant: str) -> tuple[list[Any], list[Any]]:
    with engine.tenant({"workspace_id": tenant}) as mem:
        conn = mem.connection
        rows = conn.execute(sql.SQL("SELECT id, content FROM {}").format(
            engine.tables.memories.ident)).fetchall()
        events = conn.execute(sql.SQL("SELECT kind, memory_id FROM {} ORDER BY seq").format(
            engine.tables.events.ident)).fetchall()
    return rows, events


def _no_sleep(_: float) -> None:
    return None


def test_engine_observe_retried_after_a_lost_commit_ack_writes_once(
    engine: Engine, cutter: CommitCutter,
) -> None:
    tenant = new_tenant("ack")
    cuts = cutter.cuts
    cutter.armed.set()
    memory = engine.observe({"workspace_id": tenant}, "cycle", "written once, acknowledged never",
                            sleep=_no_sleep)
    assert cutter.cuts == cuts + 1, "the proxy did not cut the COMMIT's reply"
    rows, events = _rows_and_events(engine, tenant)
    assert rows == [(memory.id, "written once, acknowledged never")]
    assert events == [("observed", memory.id)]
    with engine.tenant({"workspace_id": tenant}) as mem:
        assert mem.get(memory.id) == memory


def test_keyed_observe_retried_after_a_lost_commit_ack_writes_one_version(
    engine: Engine, cutter: CommitCutter,
) -> None:
    tenant = new_tenant("ack")
    anchor = {"workspace_id": tenant}
    first = engine.observe(anchor, "workspace", "v1", typology="procedural", key="policy")
    cuts = cutter.cuts
    cutter.armed.set()
    second = engine.observe(anchor, "workspace", "v2", typology="procedural", key="policy",
                            sleep=_no_sleep)
    assert cutter.cuts == cuts + 1
    rows, events = _rows_and_events(engine, tenant)
    assert sorted(r[1] for r in rows) == ["v1", "v2"]
    assert events == [("observed", first.id), ("superseded", first.id),
                      ("observed", second.id), ("conflict_resolved", first.id)]


def test_manual_retry_of_a_transaction_with_the_same_memory_id_writes_once(
    engine: Engine, cutter: CommitCutter,
) -> None:
    tenant = new_tenant("ack")
    memory_id = uuid.uuid4()  # the write's idempotency key, chosen before the first attempt
    cuts = cutter.cuts
    cutter.armed.set()
    written = engine.write({"workspace_id": tenant}, lambda mem: mem.observe(
        "cycle", "one row whatever the retries", memory_id=memory_id), sleep=_no_sleep)
    assert cutter.cuts == cuts + 1
    assert written.id == memory_id
    # and once more by hand, as a caller that never saw the answer would
    again = engine.observe({"workspace_id": tenant}, "cycle", "one row whatever the retries",
                           memory_id=memory_id)
    assert again == written
    rows, events = _rows_and_events(engine, tenant)
    assert rows == [(memory_id, "one row whatever the retries")]
    assert events == [("observed", memory_id)]


def test_async_observe_retried_after_a_lost_commit_ack_writes_once(
    engine: Engine, cutter: CommitCutter, proxied_dsn: str, spectral: AgentSpec,
) -> None:
    tenant = new_tenant("ack")

    async def write() -> Memory:
        aengine = await AsyncEngine.connect(spectral, proxied_dsn, max_connections=1)
        try:
            cutter.armed.set()
            return await aengine.observe({"workspace_id": tenant}, "cycle", "async, once")
        finally:
            await aengine.close()

    cuts = cutter.cuts
    memory = asyncio.run(write())
    assert cutter.cuts == cuts + 1
    rows, events = _rows_and_events(engine, tenant)
    assert rows == [(memory.id, "async, once")]
    assert events == [("observed", memory.id)]


def _key_history(engine: Engine, tenant: str, key: str) -> list[tuple[Any, ...]]:
    """(id, content, live, superseded_by) of every version of ``key``, oldest first."""
    with engine.tenant({"workspace_id": tenant}) as mem:
        return mem.connection.execute(sql.SQL(
            "SELECT id, content, superseded_at IS NULL AND tombstoned_at IS NULL, superseded_by "
            "FROM {} WHERE key = %s ORDER BY created_at, id").format(
                engine.tables.memories.ident), (key,)).fetchall()


def test_keyed_retry_with_its_memory_id_after_a_later_version_keeps_one_live_version(
    engine: Engine,
) -> None:
    # The write with id x committed (its answer lost); another writer's version came after
    # it; the caller retries with the same id. The retry must find x written, not supersede
    # the later version with x again (which left no live version and a cycle x -> v3 -> x).
    tenant = new_tenant("ack")
    anchor = {"workspace_id": tenant}
    x = uuid.uuid4()
    fields = {"typology": "procedural", "key": "policy"}
    v1 = engine.observe(anchor, "workspace", "v1", **fields)
    v2 = engine.observe(anchor, "workspace", "v2", memory_id=x, **fields)
    v3 = engine.observe(anchor, "workspace", "v3", **fields)
    again = engine.observe(anchor, "workspace", "v2", memory_id=x, **fields)
    assert (again.id, again.content) == (v2.id, "v2")
    assert _key_history(engine, tenant, "policy") == [
        (v1.id, "v1", False, x), (x, "v2", False, v3.id), (v3.id, "v3", True, None)]
    _rows, events = _rows_and_events(engine, tenant)
    assert events == [("observed", v1.id), ("superseded", v1.id), ("observed", x),
                      ("conflict_resolved", v1.id), ("superseded", x), ("observed", v3.id),
                      ("conflict_resolved", x)]


def test_keyed_engine_retry_after_a_lost_ack_and_a_later_version_writes_nothing_twice(
    engine: Engine, cutter: CommitCutter, pg: PostgresHandle, spectral: AgentSpec,
) -> None:
    # Engine.observe's own retry of a keyed write, with another writer's version committed
    # between the lost answer and the retry (run from the retry's backoff): the retry
    # returns the version it wrote and adds no copy of it on top of the later one.
    tenant = new_tenant("ack")
    anchor = {"workspace_id": tenant}
    fields = {"typology": "procedural", "key": "policy"}
    v1 = engine.observe(anchor, "workspace", "v1", **fields)
    later: list[Memory] = []

    def another_writer(_: float) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            with Engine.connect(spectral, pg.app_dsn, max_connections=1) as direct:
                later.append(direct.observe(anchor, "workspace", "v3", **fields))

    cuts = cutter.cuts
    cutter.armed.set()
    v2 = engine.observe(anchor, "workspace", "v2", sleep=another_writer, **fields)
    assert cutter.cuts == cuts + 1 and len(later) == 1
    [v3] = later
    assert _key_history(engine, tenant, "policy") == [
        (v1.id, "v1", False, v2.id), (v2.id, "v2", False, v3.id), (v3.id, "v3", True, None)]
    rows, events = _rows_and_events(engine, tenant)
    assert len(rows) == 3
    assert [kind for kind, _ in events].count("observed") == 3
