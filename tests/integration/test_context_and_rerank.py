"""The reranking hook and context assembly through the engine, against real Postgres as the
application role."""

from __future__ import annotations

import asyncio
import uuid
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import replace

import pytest

from primitives.embeddings import HashingEmbedder
from primitives.engine import AsyncEngine, Engine, Hit
from primitives.errors import PolicyViolation, TenancyError
from primitives.retrieval import FlagReranker, default_reranker
from primitives.spec import AgentSpec
from primitives.spec._models import Reranker as RerankerConfig
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal")


class Reverse:
    """Reverses the hits it is given and records what it saw."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def rerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]:
        self.seen.append(len(hits))
        return [replace(h, ranks={**h.ranks, "rerank": n})
                for n, h in enumerate(reversed(hits), start=1)]


class Drops:
    def rerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]:
        return list(hits[1:])


def _anchor() -> dict[str, str]:
    return {"workspace_id": f"ws-{uuid.uuid4().hex[:10]}"}


@pytest.fixture
def plain(pg: PostgresHandle, spectral: AgentSpec) -> Iterator[Engine]:
    with Engine.connect(spectral, pg.app_dsn, embedder=HashingEmbedder()) as eng:
        yield eng


def _fill(engine: Engine, anchor: dict[str, str], n: int) -> None:
    with engine.tenant(anchor) as mem:
        for i in range(n):
            mem.observe("workspace", f"calibration note {i} about detector drift" + " x" * i,
                        typology="episodic")


# reranking ---------------------------------------------------------------------------------------
def test_a_reranker_reorders_the_top_n_and_the_limit_applies_after(
        pg: PostgresHandle, spectral: AgentSpec, plain: Engine) -> None:
    anchor = _anchor()
    _fill(plain, anchor, 12)
    fused = [h.memory.id for h in plain.search(anchor, "detector drift", limit=20)]
    assert len(fused) == 12
    reverse = Reverse()
    with Engine.connect(spectral, pg.app_dsn, embedder=HashingEmbedder(),
                        reranker=reverse) as eng:
        found = eng.search(anchor, "detector drift", limit=3, explain=True)
        # the statement fetched the reranker's 20 (default top_n), all 12 were reranked
        assert reverse.seen == [12] and found.reranked == 12
        assert [h.memory.id for h in found.hits] == fused[::-1][:3]
        assert [h.ranks["rerank"] for h in found.hits] == [1, 2, 3]
        # a blank query has nothing to rerank for
        assert eng.search(anchor, "", limit=3, explain=True).reranked == 0
        assert reverse.seen == [12]


def test_a_declared_top_n_bounds_the_reranked_head(pg: PostgresHandle,
                                                   spectral: AgentSpec, plain: Engine) -> None:
    anchor = _anchor()
    _fill(plain, anchor, 12)
    fused = [h.memory.id for h in plain.search(anchor, "detector drift", limit=20)]
    spec = spectral.model_copy(update={"retrieval": spectral.retrieval.model_copy(
        update={"reranker": RerankerConfig(model="local/cross-encoder", top_n=5)})})
    reverse = Reverse()
    with Engine.connect(spec, pg.app_dsn, embedder=HashingEmbedder(), reranker=reverse) as eng:
        ids = [h.memory.id for h in eng.search(anchor, "detector drift", limit=8)]
    assert reverse.seen == [5]
    assert ids == fused[:5][::-1] + fused[5:8]       # head reversed, the rest in fused order
    # the spec declares a reranker; an engine without one says so, once, at connect
    with pytest.warns(RuntimeWarning, match="retrieval.reranker is declared"), \
            Engine.connect(spec, pg.app_dsn, embedder=HashingEmbedder()) as eng:
        assert eng.reranker is None
    assert isinstance(default_reranker(spec), FlagReranker)
    assert default_reranker(spectral) is None


def test_a_reranker_that_loses_hits_is_refused(pg: PostgresHandle, spectral: AgentSpec,
                                               plain: Engine) -> None:
    anchor = _anchor()
    _fill(plain, anchor, 3)
    with Engine.connect(spectral, pg.app_dsn, embedder=HashingEmbedder(),
                        reranker=Drops()) as eng, \
            pytest.raises(ValueError, match="must return the hits it was given"):
        eng.search(anchor, "detector drift")


# context assembly ---------------------------------------------------------------------------------
def test_the_context_pack_holds_current_transient_rows_and_searched_memory(
        plain: Engine) -> None:
    anchor, other = _anchor(), _anchor()
    with plain.tenant(anchor) as mem:
        c1 = mem.observe("cycle", "asked for the drift report", scope_id="c-1")
        c2 = mem.observe("cycle", "asked about the old run", scope_id="c-2")
        run = mem.observe("run", "run 12 uses detector B", scope_id="r-12")
        fact = mem.observe("workspace", "detector B drifts after warmup", typology="episodic")
        mem.observe("workspace", "the cafeteria closes at three", typology="episodic")
    with plain.tenant(other) as mem:
        mem.observe("cycle", "another workspace's turn", scope_id="c-1")
    pack = plain.context_pack(anchor, "detector drift")
    assert {m.id for m in pack.block("cycle").items} == {c1.id, c2.id}
    assert [m.id for m in pack.block("run").items] == [run.id]
    assert fact.id in {m.id for m in pack.block("workspace").items}
    assert "another workspace" not in pack.text and "## cycle" in pack.text
    assert pack.total_tokens_used == sum(b.used for b in pack.blocks) > 0
    # one scope of a tier; on-demand blocks off; a blank query searches nothing
    scoped = plain.context_pack(anchor, "detector drift", scopes={"cycle": "c-1"},
                                include_on_demand=False)
    assert [m.id for m in scoped.block("cycle").items] == [c1.id]
    assert scoped.block("workspace").items == ()
    assert plain.context_pack(anchor).block("workspace").items == ()
    with pytest.raises(TenancyError, match="not a transient tier"):
        plain.context_pack(anchor, "x", scopes={"workspace": "w"})
    with pytest.raises(PolicyViolation, match="complexity is 'simple' or 'complex'"):
        plain.context_pack(anchor, "x", complexity="hard")
    # inside a tenant transaction too, the same pack
    with plain.tenant(anchor) as mem:
        assert mem.context_pack("detector drift") == pack


def test_the_async_engine_assembles_the_same_pack(pg: PostgresHandle, spectral: AgentSpec,
                                                  plain: Engine) -> None:
    anchor = _anchor()
    with plain.tenant(anchor) as mem:
        mem.observe("cycle", "asked for the drift report", scope_id="c-1")
        mem.observe("workspace", "detector B drifts after warmup", typology="episodic")
    expected = plain.context_pack(anchor, "detector drift")

    async def run() -> object:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            eng = await AsyncEngine.connect(spectral, pg.app_dsn, embedder=HashingEmbedder())
        async with eng:
            return await eng.context_pack(anchor, "detector drift")

    assert asyncio.run(run()) == expected
