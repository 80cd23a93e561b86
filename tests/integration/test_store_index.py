"""LangGraph's ``index`` config and any LangChain ``Embeddings`` object on the store, as the
application role: the model id and width come from the object (or are given), a width other
than the spec's is a ``ModelMismatch``, and ``fields`` decides what an item's text holds."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest
from langchain_core.embeddings import Embeddings
from psycopg import sql

from primitives.db import APP_ROLE
from primitives.embeddings import HashingEmbedder, LangChainEmbedder, as_embedder
from primitives.errors import GovernanceError, ModelMismatch
from primitives.langgraph import AsyncMemoryStore, MemoryStore
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.filterwarnings("ignore:.*(semantic|graph) signal")
DIMS = 384  # agents/spectral_agent.yaml retrieval.embedding.dims
MEMORIES = sql.Identifier("platform", "spectral_memories")


class PlainEmbeddings(Embeddings):
    """A LangChain ``Embeddings`` with nothing but the two methods (no model id, no dims)."""

    def __init__(self, dims: int = DIMS, *, calls: list[int] | None = None) -> None:
        self.inner = HashingEmbedder(dims=dims)
        self.calls = calls if calls is not None else []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


class NamedEmbeddings(PlainEmbeddings):
    model = "acme/text-embed-1"


def _ws() -> str:
    return f"ws-{uuid.uuid4().hex[:8]}"


def _content(store: MemoryStore, ws: str, key: str) -> list[tuple[str, bool]]:
    with store.engine.tenant({"workspace_id": ws}) as mem:
        assert mem.connection.info.user == APP_ROLE
        rows = mem.connection.execute(
            sql.SQL("SELECT content, embedding IS NOT NULL FROM {} WHERE key = %s "
                    "AND superseded_at IS NULL").format(MEMORIES), (key,)).fetchall()
    return [(str(r[0]), bool(r[1])) for r in rows]


def test_a_plain_langchain_embeddings_object_is_accepted_and_named_by_its_class(
    pg: PostgresHandle, spectral: AgentSpec
) -> None:
    calls: list[int] = []
    with MemoryStore.from_spec(spectral, pg.app_dsn,
                               embedder=PlainEmbeddings(calls=calls)) as store:
        assert store.engine.embedder is not None
        assert store.engine.embedder.model_id == (
            f"langchain/{__name__}.PlainEmbeddings")
        assert store.engine.embedder.dims == DIMS
        ws = _ws()
        ns = (ws, "workspace", "procedural")
        store.put(ns, "temp", {"text": "lowering the temperature removed fabrication"})
        store.put(ns, "garden", {"text": "water the tomatoes every morning"})
        assert calls and _content(store, ws, "temp")[0][1] is True
        with store.engine.tenant({"workspace_id": ws}) as mem:
            explained = mem.search("temperature fabrication", explain=True)
        assert explained.hits and "semantic" in explained.hits[0].ranks


def test_the_model_id_comes_from_the_object_else_the_one_given() -> None:
    assert as_embedder(NamedEmbeddings()).model_id == "acme/text-embed-1"
    assert as_embedder(PlainEmbeddings(), model_id="mine/v2").model_id == "mine/v2"
    hashing = HashingEmbedder(dims=8)
    assert as_embedder(hashing) is hashing
    with pytest.raises(TypeError, match="has no embed_documents"):
        LangChainEmbedder(object())


def test_an_embeddings_object_of_another_width_is_a_model_mismatch(
    pg: PostgresHandle, spectral: AgentSpec
) -> None:
    with pytest.raises(ModelMismatch, match=r"makes 8-dim vectors.*stores 384"):
        MemoryStore.from_spec(spectral, pg.app_dsn, embedder=PlainEmbeddings(8))
    with pytest.raises(ModelMismatch, match=r"makes 512-dim vectors.*stores 384"):
        MemoryStore.from_spec(spectral, pg.app_dsn,
                              index={"dims": 512, "embed": PlainEmbeddings(DIMS)})


def test_a_model_that_returns_other_vectors_than_declared_stores_nothing(
    pg: PostgresHandle, spectral: AgentSpec
) -> None:
    """``dims`` declared 384 in the index config, the model makes 8: the put is refused with
    ``ModelMismatch`` and no row is written."""
    with MemoryStore.from_spec(spectral, pg.app_dsn,
                               index={"dims": DIMS, "embed": PlainEmbeddings(8)}) as store:
        ws = _ws()
        with pytest.raises(ModelMismatch, match="returned a 8-dim vector"):
            store.put((ws, "workspace", "procedural"), "k", {"text": "anything"})
        assert _content(store, ws, "k") == []


def test_index_fields_per_store_and_per_put_decide_what_is_indexed(
    pg: PostgresHandle, spectral: AgentSpec
) -> None:
    with MemoryStore.from_spec(spectral, pg.app_dsn, index={
            "dims": DIMS, "embed": PlainEmbeddings(), "fields": ["title"]}) as store:
        assert store.index_config is not None and store.index_config["fields"] == ["title"]
        store.setup()
        ws = _ws()
        ns = (ws, "workspace", "procedural")
        store.put(ns, "a", {"title": "alpha notes", "secret": "zebra password"})
        store.put(ns, "b", {"title": "beta notes", "secret": "okapi"}, index=["secret"])
        assert _content(store, ws, "a") == [("alpha notes", True)]
        assert _content(store, ws, "b") == [("okapi", True)]
    # lexical search alone: an excluded field is not found, an included one is
    with MemoryStore.from_spec(spectral, pg.app_dsn) as lexical:
        assert [h.key for h in lexical.search((ws,), query="zebra")] == []
        assert [h.key for h in lexical.search((ws,), query="alpha")] == ["a"]
        assert [h.key for h in lexical.search((ws,), query="okapi")] == ["b"]


async def test_an_embedding_function_in_the_index_config_on_the_async_store(
    pg: PostgresHandle, spectral: AgentSpec
) -> None:
    hashing = HashingEmbedder(dims=DIMS)

    def embed(texts: Sequence[str]) -> list[list[float]]:
        return hashing.embed_documents(list(texts))

    store = await AsyncMemoryStore.from_spec(
        spectral, pg.app_dsn, index={"dims": DIMS, "embed": embed, "fields": ["text"]})
    try:
        await store.setup()
        assert store.engine.embedder is not None and store.engine.embedder.dims == DIMS
        ws = _ws()
        ns = (ws, "workspace", "procedural")
        await store.aput(ns, "temp", {"text": "lowering the temperature", "x": "hidden"})
        hits = await store.asearch((ws,), query="temperature")
        assert [h.key for h in hits] == ["temp"]
    finally:
        await store.aclose()


async def test_many_concurrent_async_calls_are_queued_not_timed_out(
    pg: PostgresHandle, spectral: AgentSpec
) -> None:
    """LangGraph's async store batches concurrent calls: 3,000 at once on a two-connection
    pool all succeed (they wait in the store's queue, not for a connection), each gets its own
    result, and one refused call among them fails alone."""
    import asyncio

    store = await AsyncMemoryStore.from_spec(spectral, pg.app_dsn, max_connections=2)
    try:
        wss = [_ws() for _ in range(3)]
        n = 3000
        puts = [store.aput((wss[i % 3], "workspace", "procedural"), f"k{i}", {"text": f"v{i}"})
                for i in range(n)]
        # refused inside the write transaction, queued among puts of the same anchor
        bad = store.aput((wss[0], "workspace", "semantic"), "fact", {"text": "the sky"})
        outcome = await asyncio.gather(*puts[:n // 2], bad, *puts[n // 2:],
                                       return_exceptions=True)
        refused = outcome.pop(n // 2)
        assert isinstance(refused, GovernanceError) and "promotion engine" in str(refused)
        assert outcome == [None] * n
        gets = await asyncio.gather(*(store.aget((wss[i % 3], "workspace", "procedural"),
                                                 f"k{i}") for i in range(n)))
        assert [g.value["text"] if g else None for g in gets] == [f"v{i}" for i in range(n)]
    finally:
        await store.aclose()


async def test_the_ttl_sweeper_calls_run_and_expired_items_are_gone_without_one(
    pg: PostgresHandle, spectral: AgentSpec
) -> None:
    import asyncio

    with MemoryStore.from_spec(spectral, pg.app_dsn, ttl={"default_ttl": 0.002}) as store:
        assert store.start_ttl_sweeper(1).result(timeout=1) is None
        ws = _ws()
        ns = (ws, "workspace", "procedural")
        store.put(ns, "short", {"text": "soon gone"})
        store.put(ns, "kept", {"text": "stays"}, ttl=None)
        await asyncio.sleep(0.3)
        assert store.get(ns, "short") is None
        assert store.get(ns, "kept") is not None
        assert store.stop_ttl_sweeper() is True
    astore = await AsyncMemoryStore.from_spec(spectral, pg.app_dsn)
    try:
        task = await astore.start_ttl_sweeper()
        assert await task is None and await astore.stop_ttl_sweeper() is True
    finally:
        await astore.aclose()
