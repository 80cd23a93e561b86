"""Peer: LangGraph's checkpoint-postgres ``tests/test_async_store.py``, against
``AsyncMemoryStore``.

Each test is named after its peer case and asserts what that case asserts, over the spec
store of ``peer_agent.yaml`` as the application role, one fresh tenant per test (conftest).
docs/langgraph.md keeps the table.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings
from langgraph.store.base import GetOp, Item, ListNamespacesOp, PutOp, SearchOp

from primitives.langgraph import AsyncMemoryStore
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle
from tests.peer.conftest import (
    DISTANCES,
    STORE_TTL,
    TTL_MINUTES,
    TTL_SECONDS,
    LetterEmbeddings,
    Rooted,
    async_store,
    backdate,
    expire_now,
    row_count,
    stored_expiry,
    vector_index,
)
from tests.peer.test_postgres_store import FILTER_DOCS, OMIT_DEFAULT

pytestmark = pytest.mark.filterwarnings("ignore:.*(semantic|graph) signal")


@pytest.fixture
async def store(pg: PostgresHandle, peer_spec: AgentSpec) -> AsyncIterator[Rooted]:
    async with async_store(pg, peer_spec, ttl=dict(STORE_TTL)) as rooted:  # type: ignore[arg-type]
        await rooted.start_ttl_sweeper()
        yield rooted
        assert await rooted.stop_ttl_sweeper() is True


@pytest.fixture(params=DISTANCES)
async def vector_store(request: pytest.FixtureRequest, pg: PostgresHandle, peer_spec: AgentSpec,
                       fake_embeddings: LetterEmbeddings) -> AsyncIterator[Rooted]:
    async with async_store(pg, peer_spec,
                           index=vector_index(fake_embeddings, request.param)) as rooted:
        await rooted.setup()
        await rooted.setup()
        yield rooted


async def test_no_running_loop(store: Rooted) -> None:
    ns = ("foo", "bar")
    for call in (lambda: store.put(ns, "baz", {"val": "baz"}), lambda: store.get(ns, "baz"),
                 lambda: store.delete(ns, "baz"), lambda: store.search(ns),
                 lambda: store.list_namespaces(prefix=("foo",)),
                 lambda: store.batch([PutOp(ns, "baz", {"val": "baz"})])):
        with pytest.raises(asyncio.InvalidStateError):
            call()
    with ThreadPoolExecutor(max_workers=1) as pool:
        assert await asyncio.wrap_future(pool.submit(store.put, ns, "baz", {"val": "baz"})) is None
        got = await asyncio.wrap_future(pool.submit(store.get, ns, "baz"))
        assert got is not None and got.value == {"val": "baz"}
        listed = await asyncio.wrap_future(pool.submit(store.list_namespaces, prefix=("foo",)))
        assert ns in listed


def _mixed_calls(store: Rooted, m: int, i: int) -> list[tuple[Any, tuple[Any, ...], dict[str, Any]]]:
    ns = ("test", "foo", "bar", "baz", str(m % 2))
    return [(store.put, (ns, f"key{i}"), {"value": {"foo": f"bar{i}"}}),
            (store.get, (ns, f"key{i}"), {}),
            (store.list_namespaces, (), {"prefix": None, "max_depth": m + 1}),
            (store.search, (("test",),), {}),
            (store.put, (ns, f"key{i}"), {"value": {"foo": f"bar{i}"}}),
            (store.put, (ns, f"key{i}", None), {})]


async def test_large_batches(store: Rooted) -> None:
    n, m = 100, 10
    with ThreadPoolExecutor(max_workers=10) as pool:
        futures = [pool.submit(call, *args, **kwargs)
                   for j in range(m) for i in range(n)
                   for call, args, kwargs in _mixed_calls(store, j, i)]
        # every call is awaited before the pool shuts down, so a failure cannot block the loop
        results = await asyncio.gather(*(asyncio.wrap_future(f) for f in futures),
                                       return_exceptions=True)
    failures = [r for r in results if isinstance(r, BaseException)]
    assert not failures, repr(failures[:3])
    assert len(results) == m * n * 6


async def test_large_batches_async(store: Rooted) -> None:
    n, m = 1000, 10
    calls = []
    for j in range(m):
        ns = ("test", "foo", "bar", "baz", str(j % 2))
        for i in range(n):
            calls += [store.aput(ns, f"key{i}", value={"foo": f"bar{i}"}),
                      store.aget(ns, f"key{i}"),
                      store.alist_namespaces(prefix=None, max_depth=j + 1),
                      store.asearch(("test",)),
                      store.aput(ns, f"key{i}", value={"foo": f"bar{i}"}),
                      store.adelete(ns, f"key{i}")]
    results = await asyncio.gather(*calls)
    assert len(results) == m * n * 6


async def test_abatch_order(store: Rooted) -> None:
    await store.aput(("test", "foo"), "key1", {"data": "value1"})
    await store.aput(("test", "bar"), "key2", {"data": "value2"})
    first = await store.abatch([
        GetOp(("test", "foo"), "key1"),
        PutOp(("test", "bar"), "key2", {"data": "value2"}),
        SearchOp(("test",), filter={"data": "value1"}, limit=10, offset=0),
        ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
        GetOp(("test",), "key3"),
    ])
    assert len(first) == 5
    assert isinstance(first[0], Item) and first[0].value == {"data": "value1"}
    assert first[0].key == "key1"
    assert first[1] is None
    assert isinstance(first[2], list) and len(first[2]) == 1
    assert isinstance(first[3], list)
    assert ("test", "foo") in first[3] and ("test", "bar") in first[3]
    assert first[4] is None

    second = await store.abatch([
        SearchOp(("test",), filter=None, limit=5, offset=0),
        GetOp(("test", "bar"), "key2"),
        ListNamespacesOp(match_conditions=None, max_depth=None, limit=5, offset=0),
        PutOp(("test",), "key3", {"data": "value3"}),
        GetOp(("test", "foo"), "key1"),
    ])
    assert len(second) == 5
    assert isinstance(second[0], list) and len(second[0]) == 2
    assert isinstance(second[1], Item) and second[1].value == {"data": "value2"}
    assert second[1].key == "key2"
    assert isinstance(second[2], list)
    assert ("test", "foo") in second[2] and ("test", "bar") in second[2]
    assert second[3] is None
    assert isinstance(second[4], Item) and second[4].value == {"data": "value1"}
    assert second[4].key == "key1"


async def test_batch_get_ops(store: Rooted) -> None:
    await store.aput(("test",), "key1", {"data": "value1"})
    await store.aput(("test",), "key2", {"data": "value2"})
    results = await store.abatch([GetOp(("test",), k) for k in ("key1", "key2", "key3")])
    assert len(results) == 3
    assert isinstance(results[0], Item) and results[0].key == "key1"
    assert isinstance(results[1], Item) and results[1].key == "key2"
    assert results[2] is None


async def test_batch_put_ops(store: Rooted) -> None:
    results = await store.abatch([PutOp(("test",), "key1", {"data": "value1"}),
                                  PutOp(("test",), "key2", {"data": "value2"}),
                                  PutOp(("test",), "key3", None)])
    assert results == [None, None, None]
    assert len(await store.asearch(("test",), limit=10)) == 2


async def test_batch_search_ops(store: Rooted) -> None:
    await store.aput(("test", "foo"), "key1", {"data": "value1"})
    await store.aput(("test", "bar"), "key2", {"data": "value2"})
    filtered, every = await store.abatch([
        SearchOp(("test",), filter={"data": "value1"}, limit=10, offset=0),
        SearchOp(("test",), filter=None, limit=5, offset=0)])
    assert isinstance(filtered, list) and len(filtered) == 1
    assert isinstance(every, list) and len(every) == 2


async def test_batch_list_namespaces_ops(store: Rooted) -> None:
    await store.aput(("test", "namespace1"), "key1", {"data": "value1"})
    await store.aput(("test", "namespace2"), "key2", {"data": "value2"})
    (listed,) = await store.abatch([ListNamespacesOp(match_conditions=None, max_depth=None,
                                                     limit=10, offset=0)])
    assert isinstance(listed, list) and len(listed) == 2
    assert ("test", "namespace1") in listed and ("test", "namespace2") in listed


async def test_abatch_uses_single_pool_checkout(pg: PostgresHandle, peer_spec: AgentSpec,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    async with async_store(pg, peer_spec, max_connections=1) as store:
        await store.aput(("test",), "key1", {"data": "value1"})
        inner = store.inner
        assert isinstance(inner, AsyncMemoryStore)
        pool = inner.engine._pool
        checkouts = 0
        getconn, connection = pool.getconn, pool.connection

        async def counting_getconn(*args: Any, **kwargs: Any) -> Any:
            nonlocal checkouts
            checkouts += 1
            return await getconn(*args, **kwargs)

        def counting_connection(*args: Any, **kwargs: Any) -> Any:
            nonlocal checkouts
            checkouts += 1
            return connection(*args, **kwargs)

        monkeypatch.setattr(pool, "getconn", counting_getconn)
        monkeypatch.setattr(pool, "connection", counting_connection)
        results = await store.abatch([GetOp(("test",), "key1")])
        assert len(results) == 1
        assert isinstance(results[0], Item) and results[0].value == {"data": "value1"}
        assert checkouts == 1


async def test_vector_store_initialization(vector_store: Rooted,
                                           fake_embeddings: LetterEmbeddings) -> None:
    config = vector_store.index_config
    assert config is not None and config["dims"] == fake_embeddings.dims
    if isinstance(config["embed"], Embeddings):
        assert config["embed"] == fake_embeddings


async def test_vector_insert_with_auto_embedding(vector_store: Rooted) -> None:
    for key, value in [("doc1", {"text": "short text"}),
                       ("doc2", {"text": "longer text document"}),
                       ("doc3", {"text": "longest text document here"}),
                       ("doc4", {"description": "text in description field"}),
                       ("doc5", {"content": "text in content field"}),
                       ("doc6", {"body": "text in body field"})]:
        await vector_store.aput(("test",), key, value)
    keys = [r.key for r in await vector_store.asearch(("test",), query="long text")]
    assert keys and "doc2" in keys and "doc3" in keys


async def test_vector_update_with_embedding(vector_store: Rooted) -> None:
    await vector_store.aput(("test",), "doc1", {"text": "zany zebra Xerxes"})
    await vector_store.aput(("test",), "doc2", {"text": "something about dogs"})
    await vector_store.aput(("test",), "doc3", {"text": "text about birds"})
    initial = await vector_store.asearch(("test",), query="Zany Xerxes")
    assert initial and initial[0].key == "doc1"
    initial_score = initial[0].score
    assert initial_score is not None

    await vector_store.aput(("test",), "doc1", {"text": "new text about dogs"})
    after = await vector_store.asearch(("test",), query="Zany Xerxes")
    after_score = next((r.score for r in after if r.key == "doc1"), 0.0)
    assert after_score is not None and after_score < initial_score
    for r in await vector_store.asearch(("test",), query="new text about dogs"):
        if r.key == "doc1":
            assert r.score is not None and r.score > after_score

    await vector_store.aput(("test",), "doc4", {"text": "new text about dogs"}, index=False)
    top = await vector_store.asearch(("test",), query="new text about dogs", limit=3)
    assert not any(r.key == "doc4" for r in top)


async def test_vector_search_with_filters(vector_store: Rooted) -> None:
    for key, value in FILTER_DOCS:
        await vector_store.aput(("test",), key, value)
    red_apple = await vector_store.asearch(("test",), query="apple", filter={"color": "red"})
    assert len(red_apple) == 2 and red_apple[0].key == "doc1"
    red_car = await vector_store.asearch(("test",), query="car", filter={"color": "red"})
    assert len(red_car) == 2 and red_car[0].key == "doc2"
    above = await vector_store.asearch(("test",), query="bbbbluuu",
                                       filter={"score": {"$gt": 3.2}})
    assert len(above) == 3 and above[0].key == "doc4"
    both = await vector_store.asearch(("test",), query="apple",
                                      filter={"score": {"$gte": 4.0}, "color": "green"})
    assert len(both) == 1 and both[0].key == "doc3"


async def test_vector_search_pagination(vector_store: Rooted) -> None:
    for i in range(5):
        await vector_store.aput(("test",), f"doc{i}", {"text": f"test document number {i}"})
    page1 = await vector_store.asearch(("test",), query="test", limit=2)
    page2 = await vector_store.asearch(("test",), query="test", limit=2, offset=2)
    assert len(page1) == 2 and len(page2) == 2 and page1[0].key != page2[0].key
    assert len(await vector_store.asearch(("test",), query="test", limit=10)) == 5


async def test_vector_search_edge_cases(vector_store: Rooted) -> None:
    await vector_store.aput(("test",), "doc1", {"text": "test document"})
    perfect = (await vector_store.asearch(("test",), query="text test document"))[0].score
    assert perfect is not None
    for query in ("", None):
        results = await vector_store.asearch(("test",), query=query)
        assert len(results) == 1 and results[0].score is None
    for query in ("foo " * 100, "test!@#$%^&*()"):
        results = await vector_store.asearch(("test",), query=query)
        assert len(results) == 1
        assert results[0].score is not None and results[0].score < perfect


@pytest.mark.parametrize("distance", DISTANCES)
async def test_embed_with_path(pg: PostgresHandle, peer_spec: AgentSpec,
                               fake_embeddings: LetterEmbeddings, distance: str) -> None:
    index = vector_index(fake_embeddings, distance, fields=["key0", "key1", "key3"])
    async with async_store(pg, peer_spec, index=index) as store:
        await store.aput(("test",), "doc1", {"key1": "xxx", "key2": "yyy", "key3": "zzz"})
        await store.aput(("test",), "doc2", {"key0": "uuu", "key1": "vvv", "key2": "www",
                                             "key3": "xxx"})
        both = await store.asearch(("test",), query="xxx")
        assert len(both) == 2 and both[0].key != both[1].key
        top, second = both[0].score, both[1].score
        assert top is not None and second is not None
        assert top == pytest.approx(second, abs=1e-3)

        uuu = await store.asearch(("test",), query="uuu")
        assert len(uuu) == 2 and uuu[0].key != uuu[1].key and uuu[0].key == "doc2"
        assert uuu[0].score is not None and uuu[1].score is not None
        assert uuu[0].score > uuu[1].score
        assert top == pytest.approx(uuu[0].score, abs=1e-3)

        www = await store.asearch(("test",), query="www")
        assert len(www) == 2
        assert all(r.score is not None and r.score < top for r in www)


@pytest.mark.parametrize("distance", DISTANCES)
async def test_search_sorting(pg: PostgresHandle, peer_spec: AgentSpec,
                              fake_embeddings: LetterEmbeddings, distance: str) -> None:
    index = vector_index(fake_embeddings, distance, fields=["key1"])
    async with async_store(pg, peer_spec, index=index) as store:
        await store.aput(("test", "M"), "M", {"key1": "mmm"})
        for i in range(100):
            await store.aput(("test", "A"), f"A{i}", {"key1": "no"})
        for i in range(100):
            await store.aput(("test", "Z"), f"Z{i}", {"key1": "no"})
        results = await store.asearch(("test",), query="mmm", limit=10)
        assert len(results) == 10 and len({r.key for r in results}) == 10
        assert results[0].key == "M"
        assert results[0].score is not None and results[1].score is not None
        assert results[0].score > results[1].score


async def test_store_ttl(store: Rooted) -> None:
    ns = ("foo",)
    await store.start_ttl_sweeper()
    await store.aput(ns, key="item1", value={"foo": "bar"}, ttl=TTL_MINUTES)
    await asyncio.sleep(TTL_SECONDS - 2)
    assert await store.aget(ns, key="item1", refresh_ttl=True) is not None
    await asyncio.sleep(TTL_SECONDS - 2)
    assert len(await store.asearch(ns, query="foo", refresh_ttl=True)) == 1
    await asyncio.sleep(TTL_SECONDS - 2)
    assert await store.aget(ns, key="item1", refresh_ttl=False) is not None
    await asyncio.sleep(TTL_SECONDS - 1)
    assert len(await store.asearch(ns, query="bar", refresh_ttl=False)) == 0


async def test_omit_expired_filters_read_paths(pg: PostgresHandle, store: Rooted) -> None:
    await store.stop_ttl_sweeper()
    assert store.ttl_config is not None
    store.ttl_config["omit_expired"] = True
    expired_ns, control_ns = ("omit", "expired"), ("omit", "control")
    await store.aput(expired_ns, "e", {"data": "gone"}, ttl=TTL_MINUTES)
    await store.aput(control_ns, "c", {"data": "keep"}, ttl=None)
    expire_now(pg, store, expired_ns, "e")
    assert row_count(pg, store, expired_ns, "e") == 1
    assert await store.aget(expired_ns, "e") is None
    assert await store.aget(control_ns, "c") is not None
    assert await store.asearch(expired_ns) == []
    assert [i.key for i in await store.asearch(control_ns)] == ["c"]
    listed = await store.alist_namespaces(prefix=("omit",))
    assert expired_ns not in listed and control_ns in listed


@pytest.mark.parametrize("omit", [pytest.param(None, marks=OMIT_DEFAULT), False],
                         ids=["default", "explicit-false"])
async def test_omit_expired_disabled_preserves_expired_rows(pg: PostgresHandle, store: Rooted,
                                                            omit: bool | None) -> None:
    await store.stop_ttl_sweeper()
    assert store.ttl_config is not None
    if omit is not None:
        store.ttl_config["omit_expired"] = omit
    ns = ("keep",)
    await store.aput(ns, "k", {"data": "still-here"}, ttl=TTL_MINUTES)
    expire_now(pg, store, ns, "k")
    assert await store.aget(ns, "k", refresh_ttl=False) is not None
    assert [i.key for i in await store.asearch(ns, refresh_ttl=False)] == ["k"]
    assert ns in await store.alist_namespaces(prefix=("keep",))


async def test_omit_expired_refresh_ttl_only_refreshes_live_rows(pg: PostgresHandle,
                                                                 store: Rooted) -> None:
    await store.stop_ttl_sweeper()
    assert store.ttl_config is not None
    store.ttl_config["omit_expired"] = True
    ns = ("refresh",)
    for n, key in enumerate(("expired", "live_get", "live_search")):
        await store.aput(ns, key, {"n": n}, ttl=TTL_MINUTES)
    expire_now(pg, store, ns, "expired")
    before = {k: stored_expiry(pg, store, ns, k) for k in ("expired", "live_get", "live_search")}
    assert await store.aget(ns, "expired", refresh_ttl=True) is None
    assert "expired" not in [i.key for i in await store.asearch(ns, refresh_ttl=True)]
    assert stored_expiry(pg, store, ns, "expired") == before["expired"]
    assert await store.aget(ns, "live_get", refresh_ttl=True) is not None
    assert stored_expiry(pg, store, ns, "live_get") > before["live_get"]
    assert stored_expiry(pg, store, ns, "live_search") > before["live_search"]


async def test_omit_expired_search_pagination(pg: PostgresHandle, store: Rooted) -> None:
    await store.stop_ttl_sweeper()
    assert store.ttl_config is not None
    store.ttl_config["omit_expired"] = True
    ns = ("page",)
    for k in ("a", "b", "c"):
        await store.aput(ns, k, {"k": k}, ttl=TTL_MINUTES)
    await store.aput(ns, "expired", {"k": "x"}, ttl=TTL_MINUTES)
    expire_now(pg, store, ns, "expired")
    for key, seconds in {"a": 1, "expired": 2, "b": 3, "c": 4}.items():
        backdate(pg, store, ns, key, seconds)
    assert [i.key for i in await store.asearch(ns, limit=2, offset=0)] == ["a", "b"]
    assert [i.key for i in await store.asearch(ns, limit=2, offset=2)] == ["c"]
