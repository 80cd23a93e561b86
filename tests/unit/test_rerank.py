"""The reranking hook: off by default, reorders only the top hits, never downloads."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

import pytest

from primitives.engine._records import Hit, Memory
from primitives.errors import EmbedderUnavailable
from primitives.retrieval import FlagReranker, Reranker, rerank_hits

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def _hit(number: int) -> Hit:
    memory = Memory(
        id=UUID(int=number), tier="long_term", typology="semantic", scope_id=None,
        namespace=("t",), key=f"k{number}", content=f"memory {number}", value={}, envelope={},
        tags=(), confidence=1.0, event_time=NOW, created_at=NOW, updated_at=NOW,
        superseded_at=None, invalidated_at=None, archived_at=None, tombstoned_at=None,
        persistent=True,
    )
    return Hit(memory=memory, score=1.0 / number)


class ReverseReranker:
    """A fake cross-encoder: puts the hits it gets in reverse order and records the calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def rerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]:
        self.calls.append((query, len(hits)))
        return list(reversed(hits))


class DroppingReranker:
    def rerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]:
        return list(hits[1:])


HITS = [_hit(n) for n in range(1, 7)]


def test_fake_reranker_satisfies_the_protocol() -> None:
    assert isinstance(ReverseReranker(), Reranker)
    assert isinstance(FlagReranker("nowhere"), Reranker)


def test_no_reranker_is_the_identity() -> None:
    assert rerank_hits(None, "q", HITS, top_n=3) == HITS


def test_reranker_reorders_the_top_n_and_keeps_the_rest_after_them() -> None:
    fake = ReverseReranker()
    out = rerank_hits(fake, "what changed?", HITS, top_n=3)
    assert [h.memory.key for h in out] == ["k3", "k2", "k1", "k4", "k5", "k6"]
    assert fake.calls == [("what changed?", 3)]


def test_top_n_beyond_the_hits_reranks_them_all() -> None:
    out = rerank_hits(ReverseReranker(), "q", HITS, top_n=50)
    assert out == list(reversed(HITS))


def test_top_n_below_one_or_no_hits_does_not_call_the_reranker() -> None:
    fake = ReverseReranker()
    assert rerank_hits(fake, "q", HITS, top_n=0) == HITS
    assert rerank_hits(fake, "q", [], top_n=5) == []
    assert fake.calls == []


def test_a_reranker_that_loses_hits_is_refused() -> None:
    with pytest.raises(ValueError, match="must return the hits it was given"):
        rerank_hits(DroppingReranker(), "q", HITS, top_n=3)


def test_flag_reranker_constructor_does_no_io(tmp_path: Path) -> None:
    FlagReranker(tmp_path / "missing")  # nothing is read until the first rerank


def test_flag_reranker_without_local_weights_is_unavailable_not_a_download(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    reranker = FlagReranker("no-such-org/no-such-reranker")  # in no cache, on no disk
    with pytest.raises(EmbedderUnavailable, match=r"no local weights|needs FlagEmbedding"):
        reranker.rerank("q", HITS)
