"""No statement text carries a tenant's values (issue 17, defect 2).

Every runtime connects as the same role, so any session of it reads the current query of
every other session in ``pg_stat_activity``. While one tenant writes and searches through
every runtime path (the engine's one-round-trip calls, tenant transactions, ``read_once``,
the LangGraph store and checkpointer), two observers poll ``pg_stat_activity`` as fast as they
can: the admin (a superuser sees every session's text) and a session of the application
role. Neither may ever see the tenant id, the content, the key, an envelope value, a tag, a
namespace label or the search text: values travel as bind parameters only.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from langgraph.checkpoint.conformance.test_utils import (
    generate_checkpoint,
    generate_config,
    generate_metadata,
)

from primitives.db import APP_ROLE, read_once
from primitives.engine import Engine
from primitives.langgraph import Checkpointer, MemoryStore
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.filterwarnings("ignore:.*(semantic|graph) signal")

POLL = "SELECT query FROM pg_catalog.pg_stat_activity WHERE pid <> pg_catalog.pg_backend_pid()"


class Observer:
    """Polls ``pg_stat_activity`` on ``dsn`` in a thread until stopped; keeps each text seen."""

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.seen: set[str] = set()
        self.polls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for (query,) in self.conn.execute(POLL).fetchall():
                if query:
                    self.seen.add(query)
            self.polls += 1

    def __enter__(self) -> Observer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.conn.close()


@pytest.fixture
def spectral(specs: tuple[AgentSpec, ...]) -> AgentSpec:
    return next(spec for spec in specs if spec.agent == "spectral")


@pytest.fixture
def markers() -> Iterator[dict[str, str]]:
    tag = uuid.uuid4().hex[:10]
    yield {name: f"{name}mark{tag}" for name in
           ("tenant", "content", "key", "envelope", "tags", "label", "query", "thread", "doc")}


def _workload(pg: PostgresHandle, spec: AgentSpec, m: dict[str, str]) -> int:
    """About 1,000 calls of tenant ``m["tenant"]`` through every runtime path; how many."""
    anchor = {"workspace_id": m["tenant"]}
    calls = 0
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine:
        for i in range(400):  # the one-round-trip write
            engine.observe(anchor, "cycle", f"{m['content']} note {i}",
                           envelope={"kind": m["envelope"]}, tags=[m["tags"]],
                           namespace=[m["label"]])
            calls += 1
        for _ in range(270):  # the one-round-trip search
            engine.search(anchor, f"{m['query']} {m['content']}")
            calls += 1
        for i in range(50):  # multi-statement tenant transactions
            with engine.tenant(anchor) as mem:
                written = mem.observe("workspace", f"{m['content']} fact {i}",
                                      typology="procedural", key=f"{m['key']}-{i % 5}",
                                      envelope={"kind": m["envelope"]})
                mem.search(m["query"], envelope={"kind": m["envelope"]})
                mem.get(written.id)
            calls += 3
    with psycopg.connect(pg.app_dsn, autocommit=True) as conn:
        for _ in range(50):
            read_once(conn, m["tenant"], "SELECT %(v)s::text", {"v": m["content"]}).fetchall()
            calls += 1
    with MemoryStore.from_spec(spec, pg.app_dsn) as store:
        namespace = (m["tenant"], "workspace", "procedural")
        for i in range(30):
            store.put(namespace, f"{m['key']}-store-{i % 3}", {"text": f"{m['content']} {i}"})
            store.get(namespace, f"{m['key']}-store-{i % 3}")
            store.search(namespace, query=m["query"])
            calls += 3
    with Checkpointer.from_spec(spec, pg.app_dsn) as saver:
        for i in range(20):
            config = generate_config(m["thread"])
            config["configurable"]["workspace_id"] = m["tenant"]
            checkpoint = generate_checkpoint(channel_values={"doc": {"v": m["doc"]}})
            checkpoint["channel_versions"] = {"doc": i + 1}
            stored = saver.put(config, checkpoint, generate_metadata(), {"doc": i + 1})
            saver.get_tuple(stored)
            calls += 2
    return calls


def test_no_statement_text_shows_another_tenants_values(
    pg: PostgresHandle, spectral: AgentSpec, markers: dict[str, str],
) -> None:
    with Observer(pg.admin_dsn) as admin, Observer(pg.app_dsn) as app:
        assert app.conn.info.user == APP_ROLE
        calls = _workload(pg, spectral, markers)
    assert calls >= 1000
    # Both observers watched the workload: they saw its statements, just not its values.
    for observer in (admin, app):
        assert observer.polls > 100
        assert any("primitives.tenant" in text for text in observer.seen), (
            "the observer never saw a tenant being set: it did not watch the workload")
        assert any("spectral_memories" in text for text in observer.seen)
    leaks = sorted({(name, text[:200]) for observer in (admin, app) for text in observer.seen
                    for name, marker in markers.items() if marker in text})
    assert leaks == []

