"""Abstention (World's "I don't know"): hits below ``retrieval.abstain.min_fused_score`` are
dropped, and a query left with none gets an explicit abstain result, through every read path.
Runs as the application role."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from primitives._project import migrate
from primitives.engine import AsyncEngine, Engine, SearchResult
from primitives.langgraph import MemoryStore, memory_tools
from primitives.retrieval import render_explanation
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")

MESSAGE = "I don't know: the world model has no coverage for this."


@pytest.fixture(scope="module")
def world(pg: PostgresHandle) -> AgentSpec:
    spec = load_spec(ROOT / "agents" / "world_agent.yaml")
    migrate([spec], dsn=pg.admin_dsn)
    return spec


@pytest.fixture
def world_engine(pg: PostgresHandle, world: AgentSpec) -> Iterator[Engine]:
    with Engine.connect(world, pg.app_dsn, max_connections=2) as engine:
        yield engine


def _world() -> dict[str, str]:
    return {"world_id": f"w-{uuid.uuid4().hex[:10]}"}


def _session_observation(engine: Engine, anchor: dict[str, str]) -> None:
    with engine.tenant(anchor) as mem:
        mem.observe("session", "the river Vell floods every spring", scope_id="s-1")


def test_world_declares_its_cut_off() -> None:
    spec = load_spec(ROOT / "agents" / "world_agent.yaml")
    assert spec.retrieval.abstain is not None
    assert spec.retrieval.abstain.min_fused_score == 0.03
    assert spec.retrieval.abstain.message == MESSAGE


def test_a_hit_scoring_about_0_016_makes_world_abstain(
        pg: PostgresHandle, world: AgentSpec, world_engine: Engine) -> None:
    anchor = _world()
    _session_observation(world_engine, anchor)
    # the same spec without a cut-off returns the hit, scored 2/61 x 0.5 (session weight)
    lenient = world.model_copy(update={"retrieval": world.retrieval.model_copy(
        update={"abstain": None})})
    with Engine.connect(lenient, pg.app_dsn, max_connections=1) as engine:
        [hit] = engine.search(anchor, "river floods")
    assert hit.score == pytest.approx(2 / 61 * 0.5, rel=1e-6)  # ~0.016, under 0.03
    found = world_engine.search(anchor, "river floods")
    assert isinstance(found, SearchResult)
    assert found == [] and found.abstained and found.message == MESSAGE
    explanation = world_engine.search(anchor, "river floods", explain=True)
    assert explanation.abstained and explanation.message == MESSAGE
    assert explanation.signal_rows["lexical"] == 1  # it found the row, and said no anyway
    assert f"abstained: {MESSAGE}" in render_explanation(explanation, query="river floods")


def test_a_hit_above_the_cut_off_is_returned_and_a_blank_query_never_abstains(
        world_engine: Engine) -> None:
    anchor = _world()
    _session_observation(world_engine, anchor)
    with world_engine.tenant(anchor) as mem:
        mem.observe("world", "to reset the river gauge, lift the red lever",
                    typology="procedural")
    found = world_engine.search(anchor, "river gauge")
    assert not found.abstained and found.message is None
    assert [h.memory.content for h in found] == ["to reset the river gauge, lift the red lever"]
    assert found[0].score == pytest.approx(2 / 61, rel=1e-6)  # world tier, weight 1
    listing = world_engine.search(anchor, "")
    assert not listing.abstained and len(listing) == 2


async def test_the_async_engine_abstains_alike(pg: PostgresHandle, world: AgentSpec,
                                               world_engine: Engine) -> None:
    anchor = _world()
    _session_observation(world_engine, anchor)
    engine = await AsyncEngine.connect(world, pg.app_dsn, max_connections=1)
    try:
        found = await engine.search(anchor, "river floods")
        async with engine.tenant(anchor) as mem:
            inside = await mem.search("river floods")
    finally:
        await engine.close()
    assert found == [] and found.abstained and found.message == MESSAGE
    assert inside.abstained and inside.message == MESSAGE


def test_the_store_search_tool_and_context_pack_say_they_abstained(
        pg: PostgresHandle, world: AgentSpec, world_engine: Engine) -> None:
    anchor = _world()
    _session_observation(world_engine, anchor)
    with MemoryStore.from_spec(world, pg.app_dsn) as store:
        items = store.search((anchor["world_id"],), query="river floods")
        listed = store.search((anchor["world_id"],))
    assert items == [] and isinstance(items, SearchResult) and items.abstained
    assert items.message == MESSAGE
    assert len(listed) == 1 and not getattr(listed, "abstained", False)

    search = next(t for t in memory_tools(world_engine, anchor) if t.name == "search_memory")
    assert search.invoke({"query": "river floods"}) == {
        "status": "abstained", "message": MESSAGE, "results": []}

    pack = world_engine.context_pack(anchor, "river floods", tiers=["session"])
    assert pack.abstained and pack.message == MESSAGE
    quiet = world_engine.context_pack(anchor, "")
    assert not quiet.abstained and quiet.message is None
