"""Deferred embedding (``retrieval.embedding.embed: deferred``), as the application role and
as the maintainer: a write stores no vector and is found lexically at once; workers embed the
waiting rows in batches, journalled, side by side; a search says how many rows still wait.

The hashing embedder stands in for a model (fast, deterministic).
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

import primitives.embeddings
from primitives._project import migrate
from primitives.cli import main
from primitives.compile import agent_tables
from primitives.embeddings import HashingEmbedder
from primitives.engine import AsyncEngine, Engine, SearchResult
from primitives.engine import _sync as sync_engine
from primitives.errors import ModelMismatch, SpecError
from primitives.langgraph import MemoryStore, memory_tools
from primitives.lifecycle import maintain
from primitives.lifecycle._embed import pending_rows_statement
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

_SPEC = """\
version: 1
agent: {agent}
anchor:
  keys: [user_id]
  required_at_write: [user_id]
typology:
  notes: [episodic]
tiers:
  - name: notes
    boundary: {{scope_change: user_id}}
    persistent: true
persistence:
  store: {{schema: deferred, prefix: {agent}}}
retrieval:
  signals: [semantic, lexical, recency]
  embedding: {{embed: {embed}}}
"""


class CountingEmbedder(HashingEmbedder):
    """Records the size of every document call: one call per batch."""

    def __init__(self, *, model_id: str | None = None) -> None:
        super().__init__(384, model_id=model_id)
        self.document_calls: list[int] = []

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.document_calls.append(len(texts))
        return super().embed_documents(texts)


def _load(tmp_path: Path, agent: str, embed: str) -> AgentSpec:
    path = tmp_path / f"{agent}.yaml"
    path.write_text(_SPEC.format(agent=agent, embed=embed), encoding="utf-8")
    return load_spec(path)


@pytest.fixture(scope="module")
def deferred(pg: PostgresHandle, tmp_path_factory: pytest.TempPathFactory) -> AgentSpec:
    spec = _load(tmp_path_factory.mktemp("deferred"), "deferred_notes", "deferred")
    migrate([spec], dsn=pg.admin_dsn)
    return spec


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def engine(pg: PostgresHandle, deferred: AgentSpec,
           embedder: CountingEmbedder) -> Iterator[Engine]:
    with Engine.connect(deferred, pg.app_dsn, embedder=embedder, max_connections=4) as eng:
        yield eng


def _anchor() -> dict[str, str]:
    return {"user_id": f"u-{uuid.uuid4().hex[:8]}"}


def _vectors(admin: psycopg.Connection[Any], spec: AgentSpec,
             anchor: dict[str, str]) -> list[tuple[str, bool, str | None]]:
    tables = agent_tables(spec)
    return [tuple(r) for r in admin.execute(sql.SQL(
        "SELECT content, embedding IS NOT NULL, embedding_model FROM {} WHERE {} = %s "
        "ORDER BY created_at, content").format(tables.memories.ident, tables.tenant),
        (anchor["user_id"],)).fetchall()]


def _events(admin: psycopg.Connection[Any], spec: AgentSpec, anchor: dict[str, str],
            kind: str) -> list[tuple[Any, ...]]:
    tables = agent_tables(spec)
    return [tuple(r) for r in admin.execute(sql.SQL(
        "SELECT memory_id, actor, payload FROM {} WHERE {} = %s AND kind = %s ORDER BY seq"
    ).format(tables.events.ident, tables.tenant), (anchor["user_id"], kind)).fetchall()]


# the write ------------------------------------------------------------------------------------
def test_a_deferred_write_stores_no_vector_and_a_query_finds_it_lexically_at_once(
        engine: Engine, embedder: CountingEmbedder, admin_conn: psycopg.Connection[Any],
        deferred: AgentSpec) -> None:
    anchor = _anchor()
    written = engine.observe(anchor, "notes", "the invoice reconciliation drifted in March")
    assert embedder.document_calls == []  # no model call in the write
    assert _vectors(admin_conn, deferred, anchor) == [
        ("the invoice reconciliation drifted in March", False, None)]
    explained = engine.search(anchor, "invoice reconciliation", explain=True)
    assert [h.memory.id for h in explained.hits] == [written.id]
    assert "lexical" in explained.hits[0].ranks and "semantic" not in explained.hits[0].ranks
    assert explained.hits.pending_embeddings == 1


def test_a_deferred_write_with_an_embedder_takes_the_one_statement_path(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    original = sync_engine._run_call

    def counted(conn: Any, call: Any) -> Any:
        calls.append(call)
        return original(conn, call)

    monkeypatch.setattr(sync_engine, "_run_call", counted)
    monkeypatch.setattr(sync_engine, "_run_once", _refused)
    engine.observe(_anchor(), "notes", "a hot-path write")
    assert len(calls) == 1


def _refused(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the general path ran")


def test_an_inline_spec_still_embeds_inside_the_write(
        pg: PostgresHandle, tmp_path: Path, admin_conn: psycopg.Connection[Any]) -> None:
    spec = _load(tmp_path, "inline_notes", "inline")
    migrate([spec], dsn=pg.admin_dsn)
    embedder = CountingEmbedder()
    anchor = _anchor()
    with Engine.connect(spec, pg.app_dsn, embedder=embedder) as engine:
        engine.observe(anchor, "notes", "embedded on the hot path")
        found = engine.search(anchor, "embedded hot path")
    assert embedder.document_calls == [1]
    assert _vectors(admin_conn, spec, anchor) == [
        ("embedded on the hot path", True, embedder.model_id)]
    assert found.pending_embeddings is None


def test_a_deferred_spec_without_the_lexical_signal_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "no_lexical.yaml"
    path.write_text(_SPEC.format(agent="no_lexical", embed="deferred").replace(
        "[semantic, lexical, recency]", "[semantic, recency]"), encoding="utf-8")
    with pytest.raises(SpecError, match=r"add lexical to retrieval\.signals"):
        load_spec(path)


# the worker -----------------------------------------------------------------------------------
def test_embed_pending_makes_one_model_call_and_one_statement_per_batch_journalled_per_row(
        engine: Engine, embedder: CountingEmbedder, admin_conn: psycopg.Connection[Any],
        deferred: AgentSpec) -> None:
    anchor = _anchor()
    with engine.tenant(anchor) as mem:
        ids = [mem.observe("notes", f"observation {i} about invoices").id for i in range(5)]
        assert mem.search("invoices").pending_embeddings == 5
    with engine.tenant(anchor) as mem:
        assert mem.embed_pending(batch_size=2) == 5
    assert embedder.document_calls == [2, 2, 1]
    assert {row[1:] for row in _vectors(admin_conn, deferred, anchor)} == {
        (True, embedder.model_id)}
    events = _events(admin_conn, deferred, anchor, "embedded")
    assert sorted(e[0] for e in events) == sorted(ids)
    assert {(e[1], json.dumps(e[2])) for e in events} == {
        ("agent", json.dumps({"model": embedder.model_id}))}
    with engine.tenant(anchor) as mem:
        assert mem.embed_pending() == 0  # nothing waits: nothing embedded twice
        found = mem.search("observation about invoices")
        assert "embedded" in [e["kind"] for e in mem.history(ids[0])]
    assert found.pending_embeddings == 0
    assert all("semantic" in hit.ranks for hit in found)


def test_embed_pending_stops_at_its_limit_and_the_rest_waits(
        engine: Engine, embedder: CountingEmbedder) -> None:
    anchor = _anchor()
    for i in range(4):
        engine.observe(anchor, "notes", f"note {i}")
    assert engine.embed_pending(anchor, batch_size=3, limit=2) == 2
    assert embedder.document_calls == [2]
    assert engine.search(anchor, "note").pending_embeddings == 2


def test_two_workers_side_by_side_skip_each_others_rows_and_embed_each_row_once(
        engine: Engine, admin_conn: psycopg.Connection[Any], deferred: AgentSpec) -> None:
    anchor = _anchor()
    for i in range(6):
        engine.observe(anchor, "notes", f"row {i}")
    second: list[int] = []
    tables = agent_tables(deferred)
    with engine.tenant(anchor) as mem:
        # A worker mid-batch: it has locked the two oldest rows and its model is running.
        held = mem.connection.execute(pending_rows_statement(tables), {
            "tenants": [anchor["user_id"]], "model": "primitives/hashing-v1-384",
            "limit": 2}).fetchall()
        assert len(held) == 2
        # Another worker meanwhile: it must skip the locked rows, not wait for them.
        worker = threading.Thread(target=lambda: second.append(engine.embed_pending(anchor)))
        worker.start()
        worker.join(timeout=20)
        assert not worker.is_alive(), "the second worker waited for the first one's rows"
    assert second == [4]
    assert engine.embed_pending(anchor) == 2  # the rows the first worker let go
    events = _events(admin_conn, deferred, anchor, "embedded")
    assert len(events) == 6 and len({e[0] for e in events}) == 6
    assert all(row[1] for row in _vectors(admin_conn, deferred, anchor))


def test_the_worker_refuses_a_tenant_whose_vectors_are_another_models(
        pg: PostgresHandle, deferred: AgentSpec, engine: Engine,
        admin_conn: psycopg.Connection[Any]) -> None:
    anchor = _anchor()
    engine.observe(anchor, "notes", "first, embedded with the first model")
    engine.embed_pending(anchor)
    engine.observe(anchor, "notes", "second, waiting")
    other = HashingEmbedder(model_id="another/model-384")
    with Engine.connect(deferred, pg.app_dsn, embedder=other) as second:
        with pytest.raises(ModelMismatch, match=r"mem\.reembed\(\)"):
            second.embed_pending(anchor)
    maintain([deferred], pg.admin_dsn, embedder=other)  # the maintainer skips the tenant
    models = {row[2] for row in _vectors(admin_conn, deferred, anchor)}
    assert models == {"primitives/hashing-v1-384", None}  # the waiting row was not mixed in


def test_an_erased_row_never_waits_for_a_vector(
        engine: Engine, embedder: CountingEmbedder) -> None:
    anchor = _anchor()
    with engine.tenant(anchor) as mem:
        mem.observe("notes", "Alice asked about her invoice", envelope={"subject": "Alice"})
        mem.observe("notes", "the build went green")
        assert mem.erase("Alice", approvals=["dpo"], reason="request 7") == 1
        assert mem.search("build").pending_embeddings == 1
        assert mem.embed_pending() == 1
    assert embedder.document_calls == [1]


def test_the_background_worker_embeds_what_the_engines_writes_left(
        engine: Engine, admin_conn: psycopg.Connection[Any], deferred: AgentSpec) -> None:
    engine.start_embedding(batch_size=8)
    anchors = [_anchor(), _anchor()]
    for anchor in anchors:
        engine.observe(anchor, "notes", "noted by the hot path")
        with engine.tenant(anchor) as mem:
            mem.observe("notes", "and one more in a transaction")
    assert engine.wait_embedded(timeout=20)
    assert engine.embedding_errors == []
    for anchor in anchors:
        assert all(row[1] for row in _vectors(admin_conn, deferred, anchor))


def test_the_stats_say_how_many_rows_wait(engine: Engine) -> None:
    anchor = _anchor()
    engine.observe(anchor, "notes", "waiting")
    with engine.tenant(anchor) as mem:
        assert mem.stats()["pending_embeddings"] == 1
        mem.embed_pending()
        assert mem.stats()["pending_embeddings"] == 0


def test_the_async_engine_defers_and_embeds_alike(
        pg: PostgresHandle, deferred: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    embedder = CountingEmbedder()
    anchor = _anchor()

    async def run() -> tuple[int | None, int, int | None]:
        async with await AsyncEngine.connect(deferred, pg.app_dsn, embedder=embedder) as eng:
            await eng.observe(anchor, "notes", "an async observation")
            async with eng.tenant(anchor) as mem:
                await mem.observe("notes", "another async observation")
            before = (await eng.search(anchor, "async observation")).pending_embeddings
            embedded = await eng.embed_pending()  # the tenants its own writes named
            after = (await eng.search(anchor, "async observation")).pending_embeddings
            return before, embedded, after

    assert asyncio.run(run()) == (2, 2, 0)
    assert embedder.document_calls == [2]
    assert all(row[1] for row in _vectors(admin_conn, deferred, anchor))


# maintain ------------------------------------------------------------------------------------
def test_maintain_embeds_every_tenants_waiting_rows_as_the_maintainer_once(
        pg: PostgresHandle, engine: Engine, deferred: AgentSpec,
        admin_conn: psycopg.Connection[Any]) -> None:
    anchors = [_anchor(), _anchor()]
    for anchor in anchors:
        for i in range(3):
            engine.observe(anchor, "notes", f"maintained {i}")
    untouched = maintain([deferred], pg.admin_dsn)  # no embedder: nothing to do
    assert untouched.agents[deferred.agent]["embed_pending"] == 0
    report = maintain([deferred], pg.admin_dsn, embedder=HashingEmbedder(), batch_tenants=1)
    assert report.agents[deferred.agent]["embed_pending"] >= 6
    for anchor in anchors:
        assert all(row[1] for row in _vectors(admin_conn, deferred, anchor))
        events = _events(admin_conn, deferred, anchor, "embedded")
        assert len(events) == 3 and {e[1] for e in events} == {"maintain"}
    again = maintain([deferred], pg.admin_dsn, embedder=HashingEmbedder())
    assert again.agents[deferred.agent]["embed_pending"] == 0
    tables = agent_tables(deferred)
    for anchor in anchors:
        broken = admin_conn.execute(
            "SELECT primitives.verify_chain(%s::regclass, %s, %s)",
            (tables.events.qualified, tables.tenant_column, anchor["user_id"])).fetchone()
        assert broken == (None,)


def test_maintain_refuses_an_embedder_of_other_dimensions(
        pg: PostgresHandle, engine: Engine, deferred: AgentSpec) -> None:
    engine.observe(_anchor(), "notes", "waiting for the right model")
    with pytest.raises(ModelMismatch, match="makes 16-dim vectors"):
        maintain([deferred], pg.admin_dsn, embedder=HashingEmbedder(dims=16))


def test_cli_maintain_embed_uses_the_default_embedder(
        pg: PostgresHandle, engine: Engine, deferred: AgentSpec, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        admin_conn: psycopg.Connection[Any]) -> None:
    anchor = _anchor()
    engine.observe(anchor, "notes", "embedded by the command")
    path = tmp_path / "deferred_notes.yaml"
    path.write_text(_SPEC.format(agent="deferred_notes", embed="deferred"), encoding="utf-8")
    monkeypatch.setattr(primitives.embeddings, "default_embedder",
                        lambda spec: HashingEmbedder())
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    assert main(["maintain", str(path), "--embed", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["agents"]["deferred_notes"]["embed_pending"] >= 1
    assert _vectors(admin_conn, deferred, anchor) == [
        ("embedded by the command", True, "primitives/hashing-v1-384")]


# the index -------------------------------------------------------------------------------------
def test_finding_waiting_rows_reads_the_pending_index_as_the_application_role(
        pg: PostgresHandle, deferred: AgentSpec, engine: Engine) -> None:
    anchor = _anchor()
    engine.observe(anchor, "notes", "waiting")
    tables = agent_tables(deferred)
    with psycopg.connect(pg.app_dsn, autocommit=True) as conn, conn.transaction():
        conn.execute("SELECT set_config('primitives.tenant', %s, true)", (anchor["user_id"],))
        conn.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(r[0] for r in conn.execute(
            sql.SQL("EXPLAIN ") + pending_rows_statement(tables),
            {"tenants": [anchor["user_id"]], "model": "m", "limit": 10}).fetchall())
    assert tables.object_name("memories_embedding_pending_idx") in plan


def test_the_store_search_and_the_stats_tool_say_how_many_rows_wait(
        pg: PostgresHandle, deferred: AgentSpec, engine: Engine) -> None:
    anchor = _anchor()
    engine.observe(anchor, "notes", "the quarterly invoice reconciliation")
    with MemoryStore.from_spec(deferred, pg.app_dsn, embedder=HashingEmbedder()) as store:
        items = store.search((anchor["user_id"],), query="invoice reconciliation")
    assert len(items) == 1 and isinstance(items, SearchResult)
    assert items.pending_embeddings == 1
    stats = next(t for t in memory_tools(engine, anchor) if t.name == "memory_stats")
    assert stats.invoke({})["pending_embeddings"] == 1
    engine.embed_pending(anchor)
    assert stats.invoke({})["pending_embeddings"] == 0
