"""Store contract, run against both MemoryStore and AsyncMemoryStore as the application role."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from psycopg import sql

from primitives.db import APP_ROLE
from primitives.embeddings import HashingEmbedder
from primitives.engine import Engine
from primitives.errors import GovernanceError, PolicyViolation, TenancyError
from primitives.langgraph import AsyncMemoryStore, MemoryStore
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore:.*(semantic|graph) signal")


@pytest.fixture(scope="module")
def inspect(pg: PostgresHandle, spectral: AgentSpec) -> Iterator[Callable[..., list[Any]]]:
    """``inspect(tenant, query, *params)``: rows of a tenant, read as the application role."""
    engine = Engine.connect(spectral, pg.app_dsn)

    def run(tenant: str, query: sql.Composable, *params: Any) -> list[Any]:
        with engine.tenant({"workspace_id": tenant}) as mem:
            return mem.connection.execute(query, params).fetchall()

    yield run
    engine.close()


class Api:
    """The same awaited calls on both stores: ``put`` is ``store.put`` or ``await store.aput``."""

    def __init__(self, store: Any, native_async: bool) -> None:
        self.store = store
        self.native_async = native_async

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if self.native_async:
            return getattr(self.store, f"a{name}")  # type: ignore[no-any-return]
        method = getattr(self.store, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return method(*args, **kwargs)

        return call


@pytest.fixture(params=["sync", "async"])
async def api(request: pytest.FixtureRequest, pg: PostgresHandle,
              spectral: AgentSpec) -> AsyncIterator[Api]:
    if request.param == "sync":
        store = MemoryStore.from_spec(spectral, pg.app_dsn)
        with store.engine.tenant({"workspace_id": "probe"}) as mem:
            assert mem.connection.info.user == APP_ROLE
        yield Api(store, native_async=False)
        store.close()
    else:
        astore = await AsyncMemoryStore.from_spec(spectral, pg.app_dsn)
        async with astore.engine.tenant({"workspace_id": "probe"}) as amem:
            assert amem.connection.info.user == APP_ROLE
        yield Api(astore, native_async=True)
        await astore.aclose()


def _ws() -> str:
    return f"ws-{uuid.uuid4().hex[:8]}"


def _memories(spec: AgentSpec) -> sql.Identifier:
    return sql.Identifier("platform", "spectral_memories")


# get / put / delete -----------------------------------------------------------------------------
async def test_put_then_get_returns_the_item_with_its_full_namespace(api: Api) -> None:
    ns = (_ws(), "workspace", "procedural", "style")
    await api.put(ns, "answers", {"text": "prefers short answers", "n": 1})
    item = await api.get(ns, "answers")
    assert item is not None
    assert item.namespace == ns and item.key == "answers"
    assert item.value == {"text": "prefers short answers", "n": 1}
    assert await api.get(ns, "missing") is None


async def test_update_supersedes_keeps_created_at_and_moves_updated_at(
    api: Api, inspect: Callable[..., list[Any]], spectral: AgentSpec
) -> None:
    ws = _ws()
    ns = (ws, "workspace", "procedural")
    await api.put(ns, "k", {"text": "v1"})
    first = await api.get(ns, "k")
    await api.put(ns, "k", {"text": "v1"})  # unchanged: nothing written
    await api.put(ns, "k", {"text": "v2"})
    second = await api.get(ns, "k")
    assert second.value == {"text": "v2"}
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at
    rows = inspect(ws, sql.SQL("SELECT content, superseded_at IS NOT NULL FROM {} "
                               "WHERE key = 'k' ORDER BY created_at").format(
        _memories(spectral)))
    assert rows == [("v1", True), ("v2", False)]


async def test_delete_on_the_persistent_tier_tombstones_and_keeps_the_row(
    api: Api, inspect: Callable[..., list[Any]], spectral: AgentSpec
) -> None:
    ws = _ws()
    ns = (ws, "workspace", "episodic")
    await api.put(ns, "gone", {"text": "to be deleted"})
    await api.delete(ns, "gone")
    assert await api.get(ns, "gone") is None
    await api.delete(ns, "never-there")  # a no-op, like BaseStore
    rows = inspect(ws, sql.SQL("SELECT tombstoned_at IS NOT NULL, content FROM {} "
                               "WHERE key = 'gone'").format(_memories(spectral)))
    assert rows == [(True, "to be deleted")]
    events = inspect(ws, sql.SQL("SELECT kind, payload->>'cause' FROM {} ORDER BY seq").format(
        sql.Identifier("platform", "spectral_memory_events")))
    assert events == [("observed", None), ("tombstoned", "store: deleted")]
    await api.put(ns, "gone", {"text": "written again"})
    assert (await api.get(ns, "gone")).value == {"text": "written again"}


async def test_put_none_on_a_transient_tier_tombstones_and_scope_end_removes_it(
    api: Api, pg: PostgresHandle, spectral: AgentSpec, inspect: Callable[..., list[Any]]
) -> None:
    ws = _ws()
    ns = (ws, "run", "run-1")
    await api.put(ns, "scratch", {"text": "scratch note"})
    await api.put(ns, "kept", {"text": "still here"})
    await api.put(ns, "scratch", None)
    assert await api.get(ns, "scratch") is None
    count = sql.SQL("SELECT count(*) FROM {} WHERE scope_id = 'run-1'").format(
        _memories(spectral))
    assert inspect(ws, count) == [(2,)]
    with Engine.connect(spectral, pg.app_dsn) as engine, \
            engine.tenant({"workspace_id": ws}) as mem:
        assert mem.end_scope("run", "run-1") == (2, 0)
    assert inspect(ws, count) == [(0,)]


async def test_batch_runs_ops_in_order_and_returns_results_in_order(api: Api) -> None:
    ns = (_ws(), "workspace", "procedural")
    results = await api.batch([
        PutOp(ns, "a", {"text": "alpha"}),
        GetOp(ns, "a"),
        PutOp(ns, "a", None),
        GetOp(ns, "a"),
        SearchOp(ns[:1]),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", ns[:1]),)),
    ])
    assert results[0] is None and results[1].value == {"text": "alpha"}
    assert results[2] is None and results[3] is None
    assert results[4] == [] and results[5] == []


# namespaces and write policy ---------------------------------------------------------------------
@pytest.mark.parametrize(("namespace", "message"), [
    (("ws-1",), "the tier follows the anchor"),
    (("ws-1", "weekly"), "unknown tier 'weekly'"),
    (("ws-1", "workspace"), "names the typology"),
    (("ws-1", "workspace", "opinion"), r"holds episodic, semantic, procedural"),
    (("ws-1", "run"), "transient"),
    (("*", "run", "r"), "cannot be a wildcard"),
])
async def test_a_namespace_that_does_not_fit_the_spec_says_what_was_expected(
    api: Api, namespace: tuple[str, ...], message: str
) -> None:
    with pytest.raises(TenancyError, match=message) as caught:
        await api.put(namespace, "k", {"text": "x"})
    assert "expected (workspace_id, " in str(caught.value)


async def test_invalid_labels_are_refused_like_basestore(api: Api) -> None:
    with pytest.raises(InvalidNamespaceError):
        await api.batch([GetOp(("ws.1", "workspace", "procedural"), "k")])


async def test_direct_put_into_semantic_memory_names_the_promotion_path(api: Api) -> None:
    ns = (_ws(), "workspace", "semantic")
    with pytest.raises(GovernanceError, match="promotion engine"):
        await api.put(ns, "fact", {"text": "the sky is green"})
    await api.put((ns[0], "workspace", "episodic"), "obs", {"text": "auto write"})
    await api.put((ns[0], "workspace", "procedural"), "how", {"text": "explicit write"})


async def test_limits_of_the_spec_apply_to_values(api: Api) -> None:
    ns = (_ws(), "workspace", "procedural")
    with pytest.raises(PolicyViolation, match="value_bytes"):
        await api.put(ns, "big", {"blob": "x" * 40_000})


async def test_content_comes_from_the_value_by_the_documented_rule(
    api: Api, inspect: Callable[..., list[Any]], spectral: AgentSpec
) -> None:
    ws = _ws()
    ns = (ws, "workspace", "procedural")
    await api.put(ns, "c", {"content": "from content", "text": "not this"})
    await api.put(ns, "t", {"text": "from text"})
    await api.put(ns, "j", {"b": 2, "a": [1]})
    await api.put(ns, "p", {"facts": [{"t": "one"}, {"t": "two"}]}, index=["facts[*].t"])
    await api.put(ns, "n", {"text": "secret detail"}, index=False)
    rows = dict(inspect(ws, sql.SQL("SELECT key, content FROM {} ORDER BY key").format(
        _memories(spectral))))
    assert rows == {"c": "from content", "t": "from text", "j": '{"a":[1],"b":2}',
                    "p": "one\ntwo", "n": "n"}


# search -------------------------------------------------------------------------------------------
async def test_filters_compare_numbers_as_numbers(api: Api) -> None:
    ws = _ws()
    ns = (ws, "workspace", "procedural")
    for key, n, tag in (("a", 9, "x"), ("b", 10, "y"), ("c", 100, "x"), ("d", 9.5, "z")):
        await api.put(ns, key, {"n": n, "tag": tag})
    await api.put(ns, "e", {"n": "10", "tag": "x"})  # a string is not a number

    async def keys(filter: dict[str, Any]) -> list[str]:
        return sorted(i.key for i in await api.search((ws,), filter=filter))

    assert await keys({"n": {"$gt": 9}}) == ["b", "c", "d"]
    assert await keys({"n": {"$gte": 10, "$lt": 100}}) == ["b"]
    assert await keys({"n": {"$lte": 9.5}}) == ["a", "d"]
    assert await keys({"n": 10}) == ["b"]
    assert await keys({"n": {"$eq": 10.0}}) == ["b"]
    assert await keys({"tag": {"$ne": "x"}}) == ["b", "d"]
    assert await keys({"tag": "x", "n": {"$gt": 50}}) == ["c"]
    assert await keys({"n": {"$gt": "1"}}) == ["e"]  # strings compare as strings
    with pytest.raises(PolicyViolation, match="unsupported operator"):
        await keys({"n": {"$in": [1]}})


async def test_search_without_query_pages_newest_first_within_the_prefix(api: Api) -> None:
    ws = _ws()
    for i in range(5):
        await api.put((ws, "workspace", "procedural", "a"), f"k{i}", {"i": i})
    await api.put((ws, "workspace", "procedural", "ab"), "other", {"i": 99})
    await api.put((ws, "run", "r-1"), "run-item", {"i": 7})
    page = await api.search((ws, "workspace", "procedural", "a"), limit=2, offset=1)
    assert [i.key for i in page] == ["k3", "k2"]
    assert all(i.score is None for i in page)
    everything = await api.search((ws,), limit=100)
    assert len(everything) == 7
    assert [i.key for i in await api.search((ws, "run"))] == ["run-item"]


async def test_query_search_uses_hybrid_retrieval_and_honours_filters_and_index_false(
    api: Api
) -> None:
    ws = _ws()
    ns = (ws, "workspace", "procedural")
    await api.put(ns, "temp", {"text": "lowering temperature removed fabrication", "n": 1})
    await api.put(ns, "temp2", {"text": "temperature tuning notes", "n": 2})
    await api.put(ns, "other", {"text": "unrelated gardening advice", "n": 3})
    await api.put(ns, "hidden", {"text": "temperature secret"}, index=False)
    hits = await api.search((ws,), query="temperature")
    # the ranked hits, then the item written with index=False, unranked (score None)
    assert {h.key for h in hits[:2]} == {"temp", "temp2"}
    assert all(h.score is not None and h.score > 0 for h in hits[:2])
    assert [(h.key, h.score) for h in hits[2:]] == [("hidden", None)]
    assert [h.key for h in await api.search((ws,), query="temperature", limit=2)] == [
        h.key for h in hits[:2]]
    filtered = await api.search((ws,), query="temperature", filter={"n": {"$gt": 1}})
    assert [h.key for h in filtered] == ["temp2"]
    listed = await api.search((ws,), filter={"text": "temperature secret"})
    assert [h.key for h in listed] == ["hidden"]  # still listed without a query


# list_namespaces -----------------------------------------------------------------------------------
async def test_list_namespaces_matches_whole_segments_with_depth_and_paging(api: Api) -> None:
    ws = _ws()
    for ns in ((ws, "workspace", "procedural", "user"),
               (ws, "workspace", "procedural", "users", "v1"),
               (ws, "workspace", "episodic", "user", "v1"),
               (ws, "run", "r-1")):
        await api.put(ns, "k", {"text": "x"})
    assert await api.list_namespaces(prefix=(ws, "workspace", "procedural", "user")) == [
        (ws, "workspace", "procedural", "user")]
    assert await api.list_namespaces(prefix=(ws,), suffix=("v1",)) == [
        (ws, "workspace", "episodic", "user", "v1"),
        (ws, "workspace", "procedural", "users", "v1")]
    assert await api.list_namespaces(prefix=(ws, "*", "*", "user")) == [
        (ws, "workspace", "episodic", "user", "v1"), (ws, "workspace", "procedural", "user")]
    assert await api.list_namespaces(prefix=(ws,), max_depth=3) == [
        (ws, "run", "r-1"), (ws, "workspace", "episodic"), (ws, "workspace", "procedural")]
    assert await api.list_namespaces(prefix=(ws,), max_depth=3, limit=1, offset=1) == [
        (ws, "workspace", "episodic")]
    with pytest.raises(TenancyError, match="needs a prefix"):
        await api.list_namespaces(suffix=("v1",))


# TTL ------------------------------------------------------------------------------------------------
async def test_ttl_sets_expiry_refreshes_on_read_and_expired_items_disappear(
    api: Api, inspect: Callable[..., list[Any]], spectral: AgentSpec
) -> None:
    ws = _ws()
    ns = (ws, "run", "r-ttl")
    expiry = sql.SQL("SELECT expires_at FROM {} WHERE key = %s AND tombstoned_at IS NULL").format(
        _memories(spectral))
    await api.put(ns, "k", {"text": "short lived"}, ttl=10)
    [(first,)] = inspect(ws, expiry, "k")
    assert first is not None
    await asyncio.sleep(0.05)
    await api.get(ns, "k", refresh_ttl=False)
    assert inspect(ws, expiry, "k") == [(first,)]
    await api.get(ns, "k")
    [(refreshed,)] = inspect(ws, expiry, "k")
    assert refreshed > first
    await api.put(ns, "k", {"text": "short lived"}, ttl=None)  # unchanged value, TTL removed
    assert inspect(ws, expiry, "k") == [(None,)]
    await api.put(ns, "brief", {"text": "gone soon"}, ttl=0.001)  # 60 ms
    time.sleep(0.1)
    assert await api.get(ns, "brief") is None
    assert await api.search((ws,), filter={"text": "gone soon"}) == []
    assert await api.list_namespaces(prefix=(ws,)) == [ns]
    await api.put(ns, "brief", {"text": "gone soon"})  # the expired row leaves the key
    assert (await api.get(ns, "brief")).value == {"text": "gone soon"}


# tenancy ----------------------------------------------------------------------------------------------
async def test_cross_tenant_reads_return_nothing(api: Api) -> None:
    a, b = _ws(), _ws()
    await api.put((a, "workspace", "procedural"), "secret", {"text": "tenant a only"})
    assert await api.get((b, "workspace", "procedural"), "secret") is None
    assert await api.search((b,), query="tenant only") == []
    assert await api.search((b,)) == []
    assert await api.list_namespaces(prefix=(b,)) == []


async def test_a_batch_spanning_two_tenants_runs_each_in_its_own_transaction(
    api: Api, inspect: Callable[..., list[Any]], spectral: AgentSpec
) -> None:
    a, b = _ws(), _ws()
    results = await api.batch([
        PutOp((a, "workspace", "procedural"), "k", {"text": "a"}),
        PutOp((b, "workspace", "procedural"), "k", {"text": "b"}),
        GetOp((a, "workspace", "procedural"), "k"),
        GetOp((b, "workspace", "procedural"), "k"),
    ])
    assert results[2].value == {"text": "a"} and results[3].value == {"text": "b"}
    mine = sql.SQL("SELECT workspace_id, content FROM {}").format(_memories(spectral))
    assert inspect(a, mine) == [(a, "a")]
    assert inspect(b, mine) == [(b, "b")]


async def test_a_failing_group_rolls_back_its_own_writes_only(api: Api) -> None:
    a, b = _ws(), _ws()
    with pytest.raises(GovernanceError):
        await api.batch([
            PutOp((a, "workspace", "procedural"), "first", {"text": "committed"}),
            PutOp((b, "workspace", "procedural"), "first", {"text": "rolled back"}),
            PutOp((b, "workspace", "semantic"), "fact", {"text": "refused"}),
        ])
    assert await api.get((a, "workspace", "procedural"), "first") is not None
    assert await api.get((b, "workspace", "procedural"), "first") is None


async def test_sync_calls_on_the_async_store_from_its_loop_are_refused(
    pg: PostgresHandle, spectral: AgentSpec
) -> None:
    store = await AsyncMemoryStore.from_spec(spectral, pg.app_dsn)
    try:
        with pytest.raises(asyncio.InvalidStateError, match="async methods"):
            store.get((_ws(), "workspace", "procedural"), "k")
        ns = (_ws(), "workspace", "procedural")
        await asyncio.to_thread(store.put, ns, "k", {"text": "from a thread"})
        assert (await store.aget(ns, "k")).value == {"text": "from a thread"}
    finally:
        await store.aclose()


async def test_query_search_runs_the_semantic_signal_when_the_store_has_an_embedder(
    pg: PostgresHandle, spectral: AgentSpec
) -> None:
    store = await AsyncMemoryStore.from_spec(spectral, pg.app_dsn, embedder=HashingEmbedder())
    ws = _ws()
    ns = (ws, "workspace", "procedural")
    try:
        await store.aput(ns, "garden", {"text": "water the tomatoes every morning"})
        await store.aput(ns, "temp", {"text": "lowering the temperature removed fabrication"})
        await store.aput(ns, "hidden", {"text": "temperature fabrication notes"}, index=False)
        hits = await store.asearch((ws,), query="temperature fabrication")
        assert hits[0].key == "temp" and hits[-1].key == "hidden" and hits[-1].score is None
        assert all(h.score is not None for h in hits[:-1])
        async with store.engine.tenant({"workspace_id": ws}) as mem:
            explained = await mem.search("temperature fabrication", explain=True)
        assert explained.hits and "semantic" in explained.hits[0].ranks
    finally:
        await store.aclose()


def test_concurrent_puts_of_one_new_key_all_succeed_and_the_last_one_wins(
    pg: PostgresHandle, spectral: AgentSpec, inspect: Callable[..., list[Any]]
) -> None:
    ws = _ws()
    ns = (ws, "workspace", "procedural")
    with MemoryStore.from_spec(spectral, pg.app_dsn, max_connections=8) as store, \
            ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: store.put(ns, "hot", {"text": f"writer {i}"}), range(8)))
        current = store.get(ns, "hot")
    assert current is not None and current.value["text"].startswith("writer ")
    rows = inspect(ws, sql.SQL("SELECT count(*), count(*) FILTER (WHERE superseded_at IS NULL) "
                               "FROM {} WHERE key = 'hot'").format(_memories(spectral)))
    assert rows == [(8, 1)]


async def test_a_store_bound_to_a_tenant_refuses_every_other_anchor(api: Api) -> None:
    mine, theirs = _ws(), _ws()
    await api.put((theirs, "workspace", "procedural"), "k", {"text": "theirs"})
    bound = Api(api.store.for_tenant({"workspace_id": mine}), api.native_async)
    await bound.put((mine, "workspace", "procedural"), "k", {"text": "mine"})
    assert (await bound.get((mine, "workspace", "procedural"), "k")).value == {"text": "mine"}
    for call in (bound.get((theirs, "workspace", "procedural"), "k"),
                 bound.search((theirs,)), bound.list_namespaces(prefix=(theirs,))):
        with pytest.raises(TenancyError, match="bound to"):
            await call


def test_a_selective_filter_still_fills_the_limit(pg: PostgresHandle, spectral: AgentSpec) -> None:
    """The prefix, filter and index flag are applied inside the search, before ranking: the
    few matching items come back even when well over a thousand others rank above them."""
    # with vectors every row gets a semantic rank: the rare items rank below the common ones
    with MemoryStore.from_spec(spectral, pg.app_dsn, embedder=HashingEmbedder()) as store:
        ws = _ws()
        ns = (ws, "workspace", "procedural")
        common = [PutOp(ns, f"c{i}", {"text": f"temperature fabrication report {i}",
                                      "kind": "common"}) for i in range(1200)]
        rare = [PutOp((*ns, "rare"), f"r{i}", {"text": f"an unrelated gardening note {i}",
                                                "kind": "rare"}) for i in range(12)]
        store.batch([*rare, *common])
        by_filter = store.search((ws,), query="temperature fabrication",
                                 filter={"kind": "rare"}, limit=10)
        assert len(by_filter) == 10 and {h.value["kind"] for h in by_filter} == {"rare"}
        by_prefix = store.search((ws, "workspace", "procedural", "rare"),
                                 query="temperature fabrication", limit=20)
        assert sorted(h.key for h in by_prefix) == sorted(f"r{i}" for i in range(12))
