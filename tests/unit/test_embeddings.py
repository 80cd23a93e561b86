"""Embedders without a database: the protocol, the hashing test double, the query cache,
and how ``default_embedder`` chooses a model (or says what to install)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from primitives.embeddings import (
    BGE_SMALL,
    MINILM,
    CachedEmbedder,
    Embedder,
    FlagEmbedder,
    HashingEmbedder,
    _default,
    cached,
    default_embedder,
    minilm_path,
)
from primitives.errors import EmbedderUnavailable
from primitives.spec import AgentSpec, load_spec

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def spec() -> AgentSpec:
    return load_spec(ROOT / "agents" / "spectral_agent.yaml")


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_hashing_embedder_is_deterministic_unit_length_and_sized() -> None:
    embedder = HashingEmbedder(dims=64)
    first = embedder.embed_documents(["the cat sat on the mat", ""])
    again = HashingEmbedder(dims=64).embed_documents(["the cat sat on the mat", ""])
    assert first == again
    assert all(len(v) == 64 and math.isclose(_cosine(v, v), 1.0) for v in first)
    assert isinstance(embedder, Embedder)


def test_hashing_embedder_puts_shared_words_closer_than_unrelated_text() -> None:
    e = HashingEmbedder()
    query = e.embed_query("invoice reconciliation")
    near, far = e.embed_documents(["the invoice reconciliation drifted", "dogs on a beach"])
    assert _cosine(query, near) > _cosine(query, far) + 0.2


def test_query_cache_answers_repeats_and_evicts_least_recent() -> None:
    calls: list[str] = []

    class Recording(HashingEmbedder):
        def embed_query(self, text: str) -> list[float]:
            calls.append(text)
            return super().embed_query(text)

    cache = CachedEmbedder(Recording(dims=8), maxsize=2)
    for text in ["a", "b", "a", "c", "b", "a"]:
        cache.embed_query(text)
    # "a" hit once; "c" evicted "b" (least recent), "b" evicted "a".
    assert calls == ["a", "b", "c", "b", "a"]
    assert (cache.hits, cache.misses) == (1, 5)
    assert cache.embed_query("a") == HashingEmbedder(dims=8).embed_query("a")
    assert cached(cache) is cache and cache.model_id == "primitives/hashing-v1-8"


def test_flag_embedder_constructor_reads_nothing() -> None:
    embedder = FlagEmbedder("/nonexistent/model", model_id="x/y", dims=384)
    assert embedder.model_id == "x/y" and embedder.dims == 384


def test_default_without_flagembedding_names_the_extra_to_install(
    spec: AgentSpec, monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "FlagEmbedding" else real(name, *a))
    with pytest.raises(EmbedderUnavailable,
                       match=r"pip install 'agent-memory-primitives\[embeddings\]'"):
        default_embedder(spec)


def test_default_without_any_weights_names_the_extra_to_install(
    spec: AgentSpec, monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("FlagEmbedding")
    monkeypatch.setattr(_default, "bge_small_path", lambda model: None)
    monkeypatch.setattr(_default, "minilm_path", lambda: None)
    with pytest.raises(EmbedderUnavailable, match=r"no local weights for BAAI/bge-small"):
        default_embedder(spec)


def test_default_prefers_local_bge_with_the_spec_query_instruction(
    spec: AgentSpec, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    pytest.importorskip("FlagEmbedding")
    monkeypatch.setattr(_default, "bge_small_path", lambda model: tmp_path)
    embedder = default_embedder(spec)
    assert (embedder.model_id, embedder.pooling, embedder.path) == (
        BGE_SMALL, "cls", str(tmp_path))
    assert embedder.query_instruction == spec.retrieval.embedding.query_instruction


def test_default_falls_back_to_packaged_minilm_offline(
    spec: AgentSpec, monkeypatch: pytest.MonkeyPatch,
) -> None:
    if minilm_path() is None:
        pytest.skip("the embeddings extra is not installed")
    monkeypatch.setattr(_default, "bge_small_path", lambda model: None)
    embedder = default_embedder(spec)
    assert (embedder.model_id, embedder.pooling, embedder.dims) == (MINILM, "mean", 384)
    assert embedder.query_instruction is None


def test_minilm_fallback_refuses_a_spec_of_other_dimensions(
    spec: AgentSpec, monkeypatch: pytest.MonkeyPatch,
) -> None:
    if minilm_path() is None:
        pytest.skip("the embeddings extra is not installed")
    monkeypatch.setattr(_default, "bge_small_path", lambda model: None)
    wide = spec.model_copy(update={"retrieval": spec.retrieval.model_copy(update={
        "embedding": spec.retrieval.embedding.model_copy(update={"dims": 768})})})
    with pytest.raises(EmbedderUnavailable, match="makes 384"):
        default_embedder(wide)


@pytest.mark.skipif(minilm_path() is None, reason="the embeddings extra is not installed")
def test_packaged_minilm_batches_match_flagembedding_encode() -> None:
    embedder = FlagEmbedder(minilm_path() or "", model_id=MINILM, dims=384, pooling="mean",
                            batch_size=2)
    texts = ["Caroline went to a support group.", "short", "a much longer sentence " * 20]
    ours = embedder.embed_documents(texts)
    theirs = embedder.load().encode_corpus(texts)
    assert len(ours) == 3 and all(len(v) == 384 for v in ours)
    assert max(abs(a - b) for v, w in zip(ours, theirs, strict=True)
               for a, b in zip(v, w, strict=True)) < 1e-5
    assert embedder.embed_query("short") == pytest.approx(ours[1], abs=1e-6)


def test_embedded_text_is_content_or_content_after_its_event_time(spec: AgentSpec) -> None:
    from datetime import datetime

    from primitives.engine._core import embedding_text

    when = datetime(2023, 5, 8, 13, 56)
    assert embedding_text(spec, "Caroline: hi", {}, when) == "Caroline: hi"
    with_context = spec.model_copy(update={"retrieval": spec.retrieval.model_copy(update={
        "embedding": spec.retrieval.embedding.model_copy(
            update={"text": "content_with_context"})})})
    assert embedding_text(with_context, "Caroline: hi", {}, when) == \
        "[1:56 pm on 8 May, 2023] Caroline: hi"
    assert embedding_text(with_context, "x", {}, datetime(2023, 5, 8, 0, 5)).startswith(
        "[12:05 am on 8 May, 2023]")
    assert embedding_text(with_context, "x", {}, None) == "x"


def test_listed_envelope_keys_follow_the_content_in_the_embedded_text(spec: AgentSpec) -> None:
    from datetime import datetime

    from primitives.engine._core import embedding_text

    def embedding(**update: object) -> AgentSpec:
        return spec.model_copy(update={"retrieval": spec.retrieval.model_copy(update={
            "embedding": spec.retrieval.embedding.model_copy(update=update)})})

    envelope = {"previous": "Melanie: what did you research?", "speaker": "Caroline",
                "session": 3, "empty": ""}
    assert embedding_text(spec, "Caroline: adoption", envelope, None) == "Caroline: adoption"
    previous = embedding(envelope_keys=["previous"])
    assert embedding_text(previous, "Caroline: adoption", envelope, None) == \
        "Caroline: adoption (previous: Melanie: what did you research?)"
    # Listed order; values that are not text as canonical JSON; absent or empty keys skipped.
    several = embedding(envelope_keys=["session", "missing", "empty", "previous"])
    assert embedding_text(several, "x", envelope, None) == \
        "x (session: 3) (previous: Melanie: what did you research?)"
    assert embedding_text(several, "x", {}, None) == "x"
    both = embedding(text="content_with_context", envelope_keys=["previous"])
    assert embedding_text(both, "Caroline: adoption", envelope, datetime(2023, 5, 8, 13, 56)) \
        == "[1:56 pm on 8 May, 2023] Caroline: adoption (previous: Melanie: what did you " \
           "research?)"


@pytest.mark.skipif(minilm_path() is None, reason="the embeddings extra is not installed")
@pytest.mark.parametrize("freeze", [True, False])
def test_loading_the_model_freezes_the_collected_heap_unless_told_not_to(freeze: bool) -> None:
    import gc

    gc.unfreeze()
    try:
        embedder = FlagEmbedder(minilm_path() or "", model_id=MINILM, dims=384, pooling="mean",
                                freeze_gc=freeze)
        embedder.load()
        frozen = gc.get_freeze_count()
        if freeze:
            assert frozen > 100_000  # torch and the model: the objects a full collection walks
        else:
            assert frozen == 0
        embedder.load()  # loaded already: nothing again
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
