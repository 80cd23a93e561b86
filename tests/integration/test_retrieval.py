"""Hybrid retrieval with the semantic signal, against real Postgres as the application role.

The hashing embedder stands in for a model (fast, deterministic); one test runs the real
packaged MiniLM weights end to end.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives.embeddings import HashingEmbedder, minilm_path
from primitives.engine import AsyncEngine, Engine
from primitives.errors import ModelMismatch
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle

ROOT = Path(__file__).resolve().parents[2]


def _with_retrieval(spec: AgentSpec, **changes: Any) -> AgentSpec:
    return spec.model_copy(update={"retrieval": spec.retrieval.model_copy(update=changes)})


class CountingEmbedder(HashingEmbedder):
    """Records every call, to see batching and the query cache at work."""

    def __init__(self, dims: int = 384, *, model_id: str | None = None) -> None:
        super().__init__(dims, model_id=model_id)
        self.document_calls: list[int] = []
        self.query_calls = 0

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.document_calls.append(len(texts))
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.query_calls += 1
        return super().embed_query(text)


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def engine(pg: PostgresHandle, spectral: AgentSpec,
           embedder: CountingEmbedder) -> Iterator[Engine]:
    with Engine.connect(spectral, pg.app_dsn, embedder=embedder) as eng:
        yield eng


def _tenant() -> dict[str, str]:
    return {"workspace_id": f"ws-{uuid.uuid4().hex[:8]}"}


def _stored(engine: Engine, anchor: dict[str, str]) -> list[tuple[Any, ...]]:
    with engine.tenant(anchor) as mem:
        query = sql.SQL("SELECT content, embedding IS NOT NULL, embedding_model FROM {} "
                        "ORDER BY created_at").format(engine.tables.memories.ident)
        return list(mem.connection.execute(query).fetchall())


def test_write_stores_the_vector_and_the_model_id(engine: Engine) -> None:
    anchor = _tenant()
    with engine.tenant(anchor) as mem:
        mem.observe("cycle", "lowering temperature removed fabrication")
    assert _stored(engine, anchor) == [
        ("lowering temperature removed fabrication", True, "primitives/hashing-v1-384")]


def test_observe_many_embeds_all_rows_in_one_batch(engine: Engine,
                                                   embedder: CountingEmbedder) -> None:
    anchor = _tenant()
    with engine.tenant(anchor) as mem:
        written = mem.observe_many([{"tier": "cycle", "content": f"observation {i}"}
                                    for i in range(5)])
    assert len(written) == 5
    assert embedder.document_calls == [5]
    assert all(row[1] for row in _stored(engine, anchor))


def test_semantic_signal_ranks_in_the_one_statement_and_explains_itself(
    pg: PostgresHandle, spectral: AgentSpec, embedder: CountingEmbedder,
) -> None:
    anchor = _tenant()
    semantic_lexical = _with_retrieval(spectral, signals=["semantic", "lexical"])
    with Engine.connect(semantic_lexical, pg.app_dsn, embedder=embedder) as engine, \
            engine.tenant(anchor) as mem:
        mem.observe("cycle", "the invoice reconciliation drifted in March")
        mem.observe("cycle", "scanner firmware upgraded overnight")
        explained = mem.search("invoices reconciliations", explain=True)
    assert explained.signals == ("semantic", "lexical")
    top = explained.hits[0]
    assert top.memory.content.startswith("the invoice")
    assert top.ranks["semantic"] == 1
    assert 0.0 < top.scores["semantic"] <= 1.0  # cosine similarity
    expected = sum(explained.weights[s] / (explained.k + r) for s, r in top.ranks.items())
    assert top.score == pytest.approx(expected * engine.spec.retrieval.scope["cycle"])
    assert explained.signal_rows == {"semantic": 2, "lexical": 1}
    assert explained.semantic_mode == "exact"


def test_query_embeddings_are_cached(engine: Engine, embedder: CountingEmbedder) -> None:
    with engine.tenant(_tenant()) as mem:
        mem.observe("cycle", "cache me")
        for _ in range(3):
            mem.search("cache me")
    assert embedder.query_calls == 1


def test_blank_query_drops_semantic_and_lists_recent_rows(engine: Engine) -> None:
    with engine.tenant(_tenant()) as mem:
        mem.observe("cycle", "first")
        mem.observe("cycle", "second")
        explained = mem.search("", explain=True)
    assert explained.dropped == ("semantic",)
    assert [h.memory.content for h in explained.hits] == ["second", "first"]


def test_a_write_with_another_model_is_refused_until_rows_are_reembedded(
    pg: PostgresHandle, spectral: AgentSpec, engine: Engine,
) -> None:
    anchor = _tenant()
    with engine.tenant(anchor) as mem:
        mem.observe("cycle", "written with the first model")
    other = HashingEmbedder(model_id="another/model-384")
    with Engine.connect(spectral, pg.app_dsn, embedder=other) as second:
        with pytest.raises(ModelMismatch, match=r"mem\.reembed\(\)"), \
                second.tenant(anchor) as mem:
            mem.observe("cycle", "written with the second model")
        with pytest.raises(ModelMismatch, match="holds vectors of primitives/hashing-v1-384"), \
                second.tenant(anchor) as mem:
            mem.search("first model")
        with second.tenant(anchor) as mem:
            assert mem.reembed() == 1
            mem.observe("cycle", "written with the second model")
            hits = mem.search("first model")
    assert {row[2] for row in _stored(engine, anchor)} == {"another/model-384"}
    assert hits and "semantic" in hits[0].ranks


def test_embedder_with_other_dimensions_is_refused_at_connect(
    pg: PostgresHandle, spectral: AgentSpec,
) -> None:
    with pytest.raises(ModelMismatch, match="makes 16-dim vectors"):
        Engine.connect(spectral, pg.app_dsn, embedder=HashingEmbedder(dims=16))


def test_as_of_returns_the_rows_valid_at_that_time(engine: Engine) -> None:
    anchor = _tenant()
    with engine.tenant(anchor) as mem:
        old = mem.observe("workspace", "prefers concise outputs", typology="procedural",
                          key="style")
    with engine.tenant(anchor) as mem:
        before = mem.connection.execute("SELECT now()").fetchone()
    time.sleep(0.01)
    with engine.tenant(anchor) as mem:
        mem.supersede(old.id, "prefers exhaustive outputs")
    assert before is not None
    at: datetime = before[0]
    with engine.tenant(anchor) as mem:
        then = mem.search("prefers outputs", as_of=at)
        now = mem.search("prefers outputs")
        before_any = mem.search("prefers outputs", as_of=old.created_at.replace(year=2000))
    assert [h.memory.content for h in then] == ["prefers concise outputs"]
    assert [h.memory.content for h in now] == ["prefers exhaustive outputs"]
    assert before_any == []


def test_tenant_below_the_switch_point_scans_exactly_and_above_uses_the_index(
    pg: PostgresHandle, spectral: AgentSpec,
) -> None:
    anchor = _tenant()
    embedder = HashingEmbedder()
    always_index = _with_retrieval(spectral, semantic_exact_below=0)
    with Engine.connect(spectral, pg.app_dsn, embedder=embedder) as exact, \
            Engine.connect(always_index, pg.app_dsn, embedder=embedder) as index:
        with exact.tenant(anchor) as mem:
            mem.observe_many([{"tier": "cycle", "content": f"note {i}"} for i in range(3)])
            assert mem.search("note", explain=True).semantic_mode == "exact"
        with index.tenant(anchor) as mem:
            explained = mem.search("note", explain=True)
    # The index walk finds only 3 of this tenant's rows (fewer than the cap): completed exactly.
    assert explained.semantic_mode == "hnsw+exact"
    assert len(explained.hits) == 3


def test_auto_switch_point_follows_the_table_and_bm25_scores_do_not_depend_on_the_path(
    pg: PostgresHandle, spectral: AgentSpec,
) -> None:
    anchor = _tenant()
    embedder = HashingEmbedder()
    hybrid = _with_retrieval(spectral, signals=["semantic", "lexical"],
                             lexical=spectral.retrieval.lexical.model_copy(
                                 update={"ranking": "bm25"}))
    assert hybrid.retrieval.semantic_exact_below == "auto"  # the default
    small = _with_retrieval(hybrid, semantic_exact_below=5)
    rows = [{"tier": "cycle", "content": f"scan {i} removed {'stale' if i % 3 else 'fresh'}"}
            for i in range(12)]
    with Engine.connect(hybrid, pg.app_dsn, embedder=embedder) as auto, \
            Engine.connect(small, pg.app_dsn, embedder=embedder) as fixed:
        with auto.tenant(anchor) as mem:
            mem.observe_many(rows)
            # a 12-row tenant is far below sqrt(30 x cap x table rows), at least 1,000
            by_count = mem.search("stale scan", limit=12, explain=True)
        with fixed.tenant(anchor) as mem:
            counted = mem.search("stale scan", limit=12, explain=True)
    assert by_count.semantic_mode == "exact"
    assert counted.semantic_mode != "exact"  # 12 rows is past a switch point of 5
    # BM25's N came from the settings statement's count in one, from a count in the other
    lexical = {h.memory.id: h.scores["lexical"] for h in by_count.hits if "lexical" in h.scores}
    assert len(lexical) == 12
    assert lexical == pytest.approx(
        {h.memory.id: h.scores["lexical"] for h in counted.hits if "lexical" in h.scores})


async def test_async_engine_embeds_writes_and_queries(
    pg: PostgresHandle, spectral: AgentSpec, embedder: CountingEmbedder,
) -> None:
    anchor = _tenant()
    engine = await AsyncEngine.connect(spectral, pg.app_dsn, embedder=embedder)
    try:
        async with engine.tenant(anchor) as mem:
            await mem.observe_many([{"tier": "cycle", "content": "async one"},
                                    {"tier": "cycle", "content": "async two"}])
            explained = await mem.search("async two", explain=True)
    finally:
        await engine.close()
    assert embedder.document_calls == [2]
    assert explained.hits[0].memory.content == "async two"
    assert explained.signal_rows["semantic"] == 2


def test_without_an_embedder_semantic_is_dropped_with_a_warning(
    pg: PostgresHandle, spectral: AgentSpec,
) -> None:
    with pytest.warns(RuntimeWarning, match="semantic signal needs an embedder"), \
            Engine.connect(spectral, pg.app_dsn) as engine:
        assert "semantic" not in engine.signals
        anchor = _tenant()
        with engine.tenant(anchor) as mem:
            mem.observe("cycle", "no vector for this one")
        assert _stored(engine, anchor)[0][1:] == (False, None)


@pytest.mark.skipif(minilm_path() is None, reason="the embeddings extra is not installed")
def test_packaged_minilm_finds_a_paraphrase_lexical_search_misses(
    pg: PostgresHandle, spectral: AgentSpec,
) -> None:
    from primitives.embeddings import default_embedder

    embedder = default_embedder(spectral)
    assert embedder.model_id == "sentence-transformers/all-MiniLM-L6-v2"
    anchor = _tenant()
    with Engine.connect(spectral, pg.app_dsn, embedder=embedder) as engine, \
            engine.tenant(anchor) as mem:
        mem.observe_many([
            {"tier": "cycle", "content": "The quarterly budget review moved to Friday."},
            {"tier": "cycle", "content": "My dog loves running on the beach."},
            {"tier": "cycle", "content": "Upgraded the OCR scanner firmware."},
        ])
        hits = mem.search("a pet that enjoys the seaside", explain=True)
    assert hits.hits[0].memory.content.startswith("My dog")
    assert hits.signal_rows["semantic"] == 3


def test_app_role_cannot_read_vectors_without_a_tenant(
    engine: Engine, app_conn: psycopg.Connection[Any],
) -> None:
    with engine.tenant(_tenant()) as mem:
        mem.observe("cycle", "vector kept inside its tenant")
    row = app_conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE embedding IS NOT NULL").format(
        engine.tables.memories.ident)).fetchone()
    assert row == (0,)


def test_bm25_finds_rows_matching_some_words_that_websearch_misses(
    pg: PostgresHandle, spectral: AgentSpec,
) -> None:
    anchor = _tenant()
    bm25 = _with_retrieval(spectral, signals=["lexical"])
    assert bm25.retrieval.lexical.ranking == "bm25"  # the default
    lexical = _with_retrieval(bm25, lexical=spectral.retrieval.lexical.model_copy(
        update={"ranking": "websearch"}))
    question = "when did Caroline go to the support group?"
    with Engine.connect(lexical, pg.app_dsn) as websearch, \
            Engine.connect(bm25, pg.app_dsn) as ranked:
        with websearch.tenant(anchor) as mem:
            mem.observe_many([
                {"tier": "cycle", "content": "Caroline: I went to a support group yesterday."},
                {"tier": "cycle", "content": "Caroline: my kids painted a sunrise."},
                {"tier": "cycle", "content": "Caroline: we camped by the lake."},
                {"tier": "cycle", "content": "Melanie: the group hike was long."},
            ])
            assert mem.search(question) == []  # every word must match
        with ranked.tenant(anchor) as mem:
            hits = mem.search(question, explain=True)
    assert hits.hits[0].memory.content.endswith("support group yesterday.")
    assert hits.signal_rows == {"lexical": 4}
    # "caroline" is in three rows, "group" in two: the rarer word weighs more.
    assert hits.hits[1].memory.content.startswith("Melanie")


def test_explain_query_renders_signals_rows_and_ranks(
    pg: PostgresHandle, spectral: AgentSpec, engine: Engine,
) -> None:
    from primitives.retrieval import explain_query

    anchor = _tenant()
    with engine.tenant(anchor) as mem:
        mem.observe("cycle", "OCR swaps fields on scanned contracts")
    text = explain_query(spectral, anchor["workspace_id"], "OCR contracts", dsn=pg.app_dsn,
                         use_embedder=False)
    assert "note: agent 'spectral': the semantic signal needs an embedder" in text
    assert "signals: lexical 1, envelope 0, recency 1" in text
    assert "1. " in text and "OCR swaps fields" in text and "lexical #1" in text


@pytest.mark.parametrize("method", ["rrf", "weighted"])
def test_fusion_method_decides_how_signal_scores_combine(
        pg: PostgresHandle, spectral: AgentSpec, embedder: CountingEmbedder,
        method: str) -> None:
    # weighted: each signal's scores min-max normalized over the rows it returned (1 when
    # they are all equal), summed with the signal weights; rrf: weight / (k + rank)
    from primitives.spec._models import Fusion
    weights = {"semantic": 2.0, "recency": 0.5, "envelope": 1.0}
    spec = _with_retrieval(spectral, fusion=Fusion(method=method, k=60, weights=weights))
    anchor = _tenant()
    with Engine.connect(spec, pg.app_dsn, embedder=embedder) as eng, \
            eng.tenant(anchor) as mem:
        for n, text in enumerate(["login route times out under load",
                                  "login route returns 500 after deploy",
                                  "cache headers missing on assets",
                                  "login page slow on mobile"]):
            mem.observe("workspace", text, typology="episodic",
                        event_time=datetime(2026, 1, 1 + n, tzinfo=UTC))
        hits = mem.search("login route", tiers=["workspace"], limit=50)
    assert len(hits) == 4
    signals = {s for h in hits for s in h.scores}
    assert signals == {"semantic", "recency"}
    for hit in hits:
        if method == "rrf":
            fused = sum(weights[s] / (60 + hit.ranks[s]) for s in hit.ranks)
        else:
            fused = 0.0
            for s, score in hit.scores.items():
                values = [h.scores[s] for h in hits if s in h.scores]
                spread = max(values) - min(values)
                fused += weights[s] * ((score - min(values)) / spread if spread else 1.0)
        assert hit.score == pytest.approx(fused * hit.confidence, rel=1e-6)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
