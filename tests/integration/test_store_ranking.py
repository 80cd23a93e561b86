"""Store query search: ordered by meaning, each hit with a relevance score to threshold.

Run as the application role on a small spec (anchor, one tier, semantic + lexical +
recency) migrated into the session's database.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator

import pytest
from langgraph.store.base import PutOp

from primitives._project import migrate
from primitives.db import APP_ROLE
from primitives.embeddings import MINILM, HashingEmbedder
from primitives.errors import PolicyViolation
from primitives.langgraph import MemoryStore, RankedItem, compile_agent
from primitives.langgraph._agent import DEFAULT_EMBEDDER, store_embedder
from primitives.spec import AgentSpec, load_spec_text
from tests.conftest import PostgresHandle

SPEC = """
version: 1
agent: ranked_notes
anchor:
  keys: [user_id]
  required_at_write: [user_id]
typology:
  notes: [episodic]
tiers:
  - name: notes
    boundary: {scope_change: user_id}
    persistent: true
persistence:
  store: {schema: ranked, prefix: notes}
retrieval:
  signals: [SIGNALS]
"""


def _spec(signals: str) -> AgentSpec:
    return load_spec_text(SPEC.replace("SIGNALS", signals).replace(
        "ranked_notes", f"ranked_{signals.replace(', ', '_')}").replace(
        "prefix: notes", f"prefix: {signals.replace(', ', '_')}"))


def _store(pg: PostgresHandle, signals: str) -> Iterator[MemoryStore]:
    spec = _spec(signals)
    migrate([spec], dsn=pg.admin_dsn)
    with MemoryStore.from_spec(spec, pg.app_dsn, embedder=HashingEmbedder()) as s:
        with s.engine.tenant({"user_id": "probe"}) as mem:
            assert mem.connection.info.user == APP_ROLE
        yield s


@pytest.fixture(scope="module")
def store(pg: PostgresHandle) -> Iterator[MemoryStore]:
    yield from _store(pg, "semantic, lexical, recency")


@pytest.fixture(scope="module")
def recent(pg: PostgresHandle) -> Iterator[MemoryStore]:
    """Semantic and recency only: fused alone, recency weighs as much as meaning."""
    yield from _store(pg, "semantic, recency")


def _user() -> str:
    return f"u-{uuid.uuid4().hex[:8]}"


def _cosine(embedder: HashingEmbedder, query: str, text: str) -> float:
    q = embedder.embed_query(query)
    d = embedder.embed_documents([text])[0]
    return sum(a * b for a, b in zip(q, d, strict=True))


def test_the_best_match_ranks_first_however_many_newer_items_follow(
    recent: MemoryStore
) -> None:
    user = _user()
    ns = (user, "notes")
    recent.put(ns, "best", {"text": "the user prefers dark roast coffee in the morning"})
    for i in range(6):  # newer items, close in meaning: recency favours them
        recent.put(ns, f"newer-{i}", {"text": f"the user prefers dark tea in the morning {i}"})
    hits = recent.search((user,), query="prefers dark roast coffee in the morning", limit=5)
    assert hits[0].key == "best"
    assert isinstance(hits[0], RankedItem) and hits[0].ranks is not None
    # recency ranked the best match last; the engine's own search, which fuses every signal
    # alike, puts a newer item first
    assert hits[0].ranks == {"semantic": 1, "recency": 7}
    with recent.engine.tenant({"user_id": user}) as mem:
        fused = mem.search("prefers dark roast coffee in the morning", limit=5)
    assert fused[0].memory.key != "best"
    # semantic is the one content signal here: the relevance scores never increase
    assert all(a.score is not None and b.score is not None and a.score >= b.score
               for a, b in itertools.pairwise(hits))


@pytest.mark.parametrize("signals", ["recent", "store"])
def test_each_hit_scores_the_cosine_similarity_and_carries_the_fused_score(
    signals: str, request: pytest.FixtureRequest
) -> None:
    """With semantic the one content signal, hits come in cosine order; with lexical too,
    the two are fused, and the score stays the cosine similarity."""
    store: MemoryStore = request.getfixturevalue(signals)
    user = _user()
    ns = (user, "notes")
    texts = {"a": "the cat sleeps on the warm windowsill",
             "b": "a cat and a dog share the windowsill",
             "c": "quarterly tax forms are due in april"}
    for key, text in texts.items():
        store.put(ns, key, {"text": text})
    query = "cat on the windowsill"
    hits = store.search((user,), query=query)
    embedder = HashingEmbedder()
    expected = {k: _cosine(embedder, query, t) for k, t in texts.items()}
    if signals == "recent":
        assert [h.key for h in hits] == sorted(expected, key=lambda k: -expected[k])
    for hit in hits:
        assert isinstance(hit, RankedItem)
        assert hit.score == pytest.approx(expected[hit.key], abs=1e-5)
        # RRF of the content signals, k 5: 2 / 6 at most
        assert hit.fused_score is not None and 0 < hit.fused_score <= 2 / 6
        assert hit.signal_scores is not None
        assert hit.signal_scores["semantic"] == pytest.approx(hit.score)
    # a relevance cut-off a user writes keeps the related items and drops the tax forms
    assert {h.key for h in hits if h.score is not None and h.score > 0.2} == {"a", "b"}
    assert hits[0].dict()["score"] == hits[0].score


def test_a_listing_has_no_score(store: MemoryStore) -> None:
    user = _user()
    store.put((user, "notes"), "k", {"text": "anything"})
    [item] = store.search((user,))
    assert item.score is None


def test_without_a_semantic_signal_the_lexical_score_is_the_relevance(
    pg: PostgresHandle
) -> None:
    spec = _spec("lexical, recency")
    migrate([spec], dsn=pg.admin_dsn)
    with MemoryStore.from_spec(spec, pg.app_dsn) as lexical:
        user = _user()
        ns = (user, "notes")
        lexical.put(ns, "match", {"text": "invoice overdue invoice reminder"})
        for i in range(4):
            lexical.put(ns, f"newer-{i}", {"text": f"weekly reminder {i}"})
        hits = lexical.search((user,), query="invoice")
        assert [h.key for h in hits] == ["match"]
        assert isinstance(hits[0], RankedItem) and hits[0].signal_scores is not None
        assert hits[0].score == hits[0].signal_scores["lexical"] and hits[0].score > 0


def test_compile_agent_store_picks_the_default_embedder_and_none_opts_out(
    pg: PostgresHandle, store: MemoryStore
) -> None:
    agent = compile_agent(store.spec)
    with agent.store(pg.app_dsn) as chosen:
        assert chosen.engine.embedder is not None
        assert chosen.engine.embedder.model_id == MINILM  # no BGE weights on this machine
        user = _user()
        chosen.put((user, "notes"), "k", {"text": "the cat sleeps on the windowsill"})
        [hit] = chosen.search((user,), query="where does the cat nap")
        assert isinstance(hit, RankedItem) and hit.ranks is not None and "semantic" in hit.ranks
    with pytest.warns(RuntimeWarning, match="semantic signal needs an embedder"), \
            agent.store(pg.app_dsn, embedder=None) as plain:
        assert plain.engine.embedder is None
    assert store_embedder(_spec("lexical, recency"), DEFAULT_EMBEDDER) is None


def test_an_items_embed_context_goes_into_its_vector_not_its_content(
    store: MemoryStore
) -> None:
    user = _user()
    ns = (user, "notes")
    turn, previous = "Caroline: Adoption agencies.", "Melanie: What did you research?"
    store.put(ns, "D1:3", {"content": turn, "embed_context": {"previous": previous}})
    store.put(ns, "other", {"content": "Caroline: I went hiking."})
    query = "what did they research"
    [hit] = [h for h in store.search((user,), query=query) if h.key == "D1:3"]
    embedded = f"{turn} (previous: {previous})"
    assert hit.score == pytest.approx(_cosine(HashingEmbedder(), query, embedded), abs=1e-5)
    assert hit.score != pytest.approx(_cosine(HashingEmbedder(), query, turn), abs=1e-3)
    # the lexical signal reads the content alone: "research" is only in the context
    assert hit.ranks is not None and "lexical" not in hit.ranks
    with store.engine.tenant({"user_id": user}) as mem:
        row = mem.connection.execute(
            "SELECT content, envelope FROM ranked.semantic_lexical_recency_memories "
            "WHERE key = 'D1:3'").fetchone()
    assert row == (turn, {"embed_context": {"previous": previous}})
    store.put(ns, "plain", {"content": "x", "embed_context": "one text"})
    with pytest.raises(PolicyViolation, match="embed_context"):
        store.put(ns, "bad", {"content": "x", "embed_context": ["not", "a", "mapping"]})


def test_recency_orders_items_alike_in_meaning(recent: MemoryStore) -> None:
    """Sixty newer items, each close to the query, and one old item that matches it best:
    the best match comes first; items with the same text (the same cosine, alike in
    meaning, whatever order the semantic signal returned them in) come newest first."""
    user = _user()
    ns = (user, "notes")
    recent.put(ns, "best", {"text": "dark roast coffee beans"})
    recent.batch([PutOp(ns, f"n{i}", {"text": f"dark roast notes {i}"}) for i in range(60)])
    recent.put(ns, "twin-old", {"text": "green tea leaves"})
    recent.put(ns, "twin-new", {"text": "green tea leaves"})
    hits = recent.search((user,), query="dark roast coffee beans", limit=3)
    assert hits[0].key == "best"
    twins = [h.key for h in recent.search((user,), query="green tea leaves", limit=2)]
    assert twins == ["twin-new", "twin-old"]
