"""No caller value in any statement text (issue 17, defect 2).

Every runtime connects as the same application role, and a session of a role reads the
current statement text of every other session of that role in ``pg_stat_activity``. So the
text of every statement the framework sends must be SQL only: the tenant, the content, the
key, the envelope, the tags, the search text and every other value travel as bind
parameters.

The test writes and searches about 1,000 times for one tenant whose every value carries a
random marker, through every runtime path (``Engine.observe``'s fast path and its general
path, ``engine.tenant(...)`` transactions, ``Engine.search``, the async engine,
``read_once``, the LangGraph store and checkpointer), while two threads poll
``pg_stat_activity`` as fast as they can: one as the superuser (which sees every session's
text: the strongest observer) and one as the application role. Neither may ever see the
marker. The server also logs every statement (``log_statement = 'all'`` for the database,
parameters left out of the log), and no logged statement may hold the marker either;
``pg_stat_statements`` is read too when the server has it loaded.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata
from psycopg import sql

from primitives.db import APP_ROLE, read_once
from primitives.embeddings import HashingEmbedder
from primitives.engine import AsyncEngine, Engine
from primitives.langgraph import Checkpointer, MemoryStore
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle
from tests.security._support import SPEC_BY_AGENT, anchor_for, connect_engine, transient_tier

pytestmark = pytest.mark.filterwarnings("ignore:.*(semantic|graph|lexical) signal")

_ACTIVITY = "SELECT query FROM pg_catalog.pg_stat_activity WHERE pid <> pg_backend_pid()"
_LOG_SETTINGS = {"log_statement": "all", "log_parameter_max_length": "0",
                 "log_parameter_max_length_on_error": "0"}
"""Every statement's text in the server log, without its bound parameters (which are values,
not statement text: the log is then a record of exactly what this test checks)."""


class Observer(threading.Thread):
    """Polls ``pg_stat_activity`` on its own connection until stopped; keeps each distinct
    statement text it saw."""

    def __init__(self, dsn: str) -> None:
        super().__init__(daemon=True)
        self.dsn = dsn
        self.seen: set[str] = set()
        self.polls = 0
        self.user = ""
        self.error: BaseException | None = None
        self.stop = threading.Event()
        self.ready = threading.Event()

    def run(self) -> None:
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                self.user = conn.info.user
                self.ready.set()
                while not self.stop.is_set():
                    for (text,) in conn.execute(_ACTIVITY, prepare=True).fetchall():
                        if text:
                            self.seen.add(text)
                    self.polls += 1
        except BaseException as err:  # reported by the test, not lost in the thread
            self.error = err
            self.ready.set()


@pytest.fixture
def statement_log(pg: PostgresHandle, specs: tuple[AgentSpec, ...]) -> Iterator[Any]:
    """Every statement of the database logged while the test runs; yields a function that
    returns the log written since the fixture began (``None`` if the server's log cannot be
    read as a file)."""
    with psycopg.connect(pg.admin_dsn, autocommit=True) as admin:
        database = sql.Identifier(admin.info.dbname)
        path_row = admin.execute("SELECT pg_catalog.pg_current_logfile()").fetchone()
        path = path_row[0] if path_row and path_row[0] else "log"  # the embedded server's
        size_row = admin.execute("SELECT (pg_catalog.pg_stat_file(%s, true)).size",
                                 [path]).fetchone()
        start = size_row[0] if size_row else None
        for name, value in _LOG_SETTINGS.items():
            admin.execute(sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                database, sql.Identifier(name), sql.Literal(value)))

        def written() -> str | None:
            if start is None:
                return None
            row = admin.execute("SELECT pg_catalog.pg_read_file(%s, %s, "
                                "(pg_catalog.pg_stat_file(%s)).size - %s)",
                                [path, start, path, start]).fetchone()
            return row[0] if row else None

        try:
            yield written
        finally:
            for name in _LOG_SETTINGS:
                admin.execute(sql.SQL("ALTER DATABASE {} RESET {}").format(
                    database, sql.Identifier(name)))


def _statement_statistics(admin_dsn: str) -> list[str] | None:
    """Every statement text in ``pg_stat_statements``, or ``None`` when the server has not
    loaded it (it needs ``shared_preload_libraries``; the embedded server does not)."""
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        try:
            admin.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            rows = admin.execute("SELECT query FROM pg_stat_statements").fetchall()
        except psycopg.Error:
            return None
    return [text for (text,) in rows if text]


def _workload(pg: PostgresHandle, mark: str) -> int:
    """About 1,000 writes and reads for tenant ``ws-<mark>``, every value carrying ``mark``,
    through every runtime path; the number of calls made."""
    spectral, mace = SPEC_BY_AGENT["spectral"], SPEC_BY_AGENT["mace"]
    tenant = f"ws-{mark}"
    anchor = {"workspace_id": tenant}
    calls = 0
    with connect_engine(spectral, pg.app_dsn, max_connections=2) as engine:
        for i in range(300):  # the fast path: one pipeline per write
            engine.observe(anchor, "cycle", f"{mark} observed content {i}",
                           envelope={"probe": f"{mark}-envelope", "n": i},
                           tags=[f"{mark}-tag"], namespace=[f"{mark}-ns"],
                           scope_id=f"{mark}-scope", source=f"{mark}-source")
            calls += 1
        for i in range(100):  # keyed: the general path, half of them supersessions
            engine.observe(anchor, "cycle", f"{mark} keyed content {i}",
                           key=f"{mark}-key-{i % 50}")
            calls += 1
        for i in range(50):
            with engine.tenant(anchor) as mem:
                memory = mem.observe("cycle", f"{mark} in a transaction {i}",
                                     envelope={"probe": f"{mark}-envelope"})
                mem.search(f"{mark} in a transaction", envelope={"probe": f"{mark}-envelope"})
                assert mem.get(memory.id) is not None
                mem.supersede(memory.id, f"{mark} superseded {i}")
            calls += 4
        for i in range(150):
            engine.search(anchor, f"{mark} observed content {i}",
                          envelope={"probe": f"{mark}-envelope"})
            calls += 1
        with engine._pool.connection() as conn:
            statement = ("SELECT count(*) FROM platform.spectral_memories "
                         "WHERE content <> %(content)s")
            for i in range(50):
                read_once(conn, tenant, statement, {"content": f"{mark} read {i}"}).fetchall()
                calls += 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        semantic = Engine.connect(spectral, pg.app_dsn, max_connections=1,
                                  embedder=HashingEmbedder())
    with semantic:  # a vector written and a query vector searched
        for i in range(40):
            semantic.observe(anchor, "cycle", f"{mark} embedded content {i}")
            semantic.search(anchor, f"{mark} embedded content {i}")
            calls += 2
    with connect_engine(mace, pg.app_dsn, max_connections=1) as lexical:
        mace_anchor = anchor_for(mace, tenant)
        tier = transient_tier(mace)
        for i in range(25):  # the lexical signal: the search text into websearch_to_tsquery
            lexical.observe(mace_anchor, tier, f"{mark} lexical content {i}")
            lexical.search(mace_anchor, f"{mark} lexical")
            calls += 2
    calls += asyncio.run(_async_workload(pg, spectral, anchor, mark))
    with MemoryStore.from_spec(spectral, pg.app_dsn, max_connections=1) as store:
        namespace = (tenant, "workspace", "procedural", f"{mark}-ns")
        for i in range(30):
            store.put(namespace, f"{mark}-item-{i}", {"text": f"{mark} stored value {i}"})
            assert store.get(namespace, f"{mark}-item-{i}") is not None
            store.search(namespace, query=f"{mark} stored value", filter={"text": f"{mark} x"})
            calls += 3
    with Checkpointer.from_spec(spectral, pg.app_dsn) as saver:
        for i in range(25):
            config: Any = {"configurable": {"thread_id": f"{mark}-thread-{i}",
                                            "checkpoint_ns": "", "workspace_id": tenant}}
            checkpoint = generate_checkpoint(channel_values={"note": f"{mark} state {i}"})
            checkpoint["channel_versions"] = {"note": 1}
            stored = saver.put(config, checkpoint, generate_metadata(), {"note": 1})
            assert saver.get_tuple(stored) is not None
            calls += 2
    return calls


async def _async_workload(pg: PostgresHandle, spec: AgentSpec, anchor: dict[str, str],
                          mark: str) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        engine = await AsyncEngine.connect(spec, pg.app_dsn, max_connections=1)
    async with engine:
        for i in range(30):
            await engine.observe(anchor, "cycle", f"{mark} async content {i}",
                                 tags=[f"{mark}-tag"])
            await engine.search(anchor, f"{mark} async content {i}")
            async with engine.tenant(anchor) as mem:
                await mem.observe("cycle", f"{mark} async in a transaction {i}")
    return 90


def test_no_tenant_value_ever_appears_in_a_statement_text(
    pg: PostgresHandle, specs: tuple[AgentSpec, ...], statement_log: Any,
) -> None:
    mark = f"zq{uuid.uuid4().hex[:14]}"
    observers = [Observer(pg.admin_dsn), Observer(pg.app_dsn)]
    for observer in observers:
        observer.start()
        observer.ready.wait(30)
    try:
        calls = _workload(pg, mark)
    finally:
        for observer in observers:
            observer.stop.set()
            observer.join(30)
    assert calls >= 1_000
    for observer in observers:
        assert observer.error is None, observer.error
        # the observer really watched the workload: it polled throughout and saw its SQL
        assert observer.polls >= 100, observer.polls
        assert any("spectral_memories" in text for text in observer.seen), observer.user
        leaked = sorted(text for text in observer.seen if mark in text)
        assert leaked == [], f"{observer.user} read a tenant value in {len(leaked)} " \
                             f"statement texts, e.g. {leaked[0][:300]!r}"
    assert {o.user for o in observers} >= {APP_ROLE}
    logged = statement_log()
    if pg.home is not None:
        assert logged is not None, "the embedded server's log is readable"
    if logged is not None:  # the embedded server's log, or the file logging_collector writes
        assert "spectral_memories" in logged  # statements were logged
        lines = [line for line in logged.splitlines() if mark in line]
        assert lines == [], f"{len(lines)} logged statements hold a tenant value: {lines[:3]}"
    texts = _statement_statistics(pg.admin_dsn)
    if texts is not None:
        assert [text for text in texts if mark in text] == []
