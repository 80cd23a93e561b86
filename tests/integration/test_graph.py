"""The graph (seed 002): entities, mentions and edges through the engine, and the graph signal
in the search statement, against real Postgres as the application role.

The engine here has no embedder, so retrieval runs lexical + graph + recency and the intent
comes from the keyword rules (the spec asks for the embedding classifier, which stands down
without an embedder).
"""

from __future__ import annotations

import itertools
import uuid
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives._project import migrate
from primitives.audit._chain import verify_chains
from primitives.engine import AsyncEngine, Engine, TenantMemory
from primitives.engine._core import content_hash
from primitives.errors import GovernanceError, PolicyViolation, TenancyError
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def assistant(pg: PostgresHandle) -> AgentSpec:
    spec = load_spec(ROOT / "agents" / "assistant_memory.yaml")
    migrate([spec], dsn=pg.admin_dsn)
    return spec


@pytest.fixture
def engine(pg: PostgresHandle, assistant: AgentSpec) -> Iterator[Engine]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no embedder: semantic stands down, with a warning
        eng = Engine.connect(assistant, pg.app_dsn)
    with eng:
        yield eng


@pytest.fixture
def admin(pg: PostgresHandle) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        yield conn


def _user() -> dict[str, str]:
    return {"user_id": f"u-{uuid.uuid4().hex[:10]}"}


TABLES = Engine.tables_for(load_spec(ROOT / "agents" / "assistant_memory.yaml"))
EVENTS, EDGES = TABLES.events.ident, TABLES.edges.ident  # type: ignore[union-attr]


def _events(admin: psycopg.Connection[Any], user: dict[str, str], kind: str) -> list[Any]:
    return admin.execute(sql.SQL("SELECT memory_id, payload FROM {} WHERE user_id = %s "
                                 "AND kind = %s ORDER BY seq").format(EVENTS),
                         (user["user_id"], kind)).fetchall()


def _fact(mem: TenantMemory, text: str, **fields: Any) -> Any:
    return mem.observe("long_term", text, typology="episodic", **fields)


# writes -----------------------------------------------------------------------------------------
def test_entities_are_created_once_and_merged(engine: Engine, admin: Any) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        alice = mem.entity("Alice Moreau", "person", aliases=["Ali"])
        again = mem.entity("alice moreau", "person")           # same name, any case
        merged = mem.entity("Alice Moreau", "person", aliases=["A. Moreau"], summary="runs ops")
        assert again.id == alice.id == merged.id
        assert merged.aliases == ("A. Moreau", "Ali") and merged.summary == "runs ops"
        assert [e.id for e in mem.find_entities("ALI")] == [alice.id]
        assert mem.find_entities("Bob") == []
        other = mem.entity("Alice Moreau", "project")           # another type, another entity
        assert other.id != alice.id
    events = _events(admin, user, "entity_recorded")
    # created, changed (alias + summary), created (project): the unchanged call added nothing
    assert [(p["created"], p["type"]) for _, p in events] == [
        (True, "person"), (False, "person"), (True, "project")]
    assert all("Alice" not in str(p) for _, p in events)  # names are hashed in the journal


def test_bad_entities_and_edges_are_refused_with_the_reason(engine: Engine) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        a, b = _fact(mem, "one"), _fact(mem, "two")
        with pytest.raises(PolicyViolation, match="unknown entity type 'planet'"):
            mem.entity("Mars", "planet")
        with pytest.raises(PolicyViolation, match="must not be blank"):
            mem.entity("  ", "person")
        with pytest.raises(PolicyViolation, match="unknown relation type 'likes'"):
            mem.relate(a.id, b.id, "likes")
        with pytest.raises(PolicyViolation, match="two different memories"):
            mem.relate(a.id, a.id, "causal")
        with pytest.raises(PolicyViolation, match="weight is a positive number"):
            mem.relate(a.id, b.id, "causal", weight=0)
        with pytest.raises(PolicyViolation, match="unknown confidence source 'rumour'"):
            mem.relate(a.id, b.id, "causal", source="rumour")
        with pytest.raises(GovernanceError, match="no entity is named 'Nobody'"):
            mem.mention(a.id, ["Nobody"])
        with pytest.raises(TenancyError, match="no memory"):
            mem.relate(a.id, uuid.uuid4(), "causal")
        edge = mem.relate(a.id, b.id, "causal", source="inference")
        assert edge.confidence == pytest.approx(0.6)        # graph.confidence.inference


def test_a_spec_without_graph_refuses_graph_writes(pg: PostgresHandle,
                                                    spectral: AgentSpec) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eng = Engine.connect(spectral, pg.app_dsn)
    with eng, eng.tenant({"workspace_id": f"ws-{uuid.uuid4().hex[:8]}"}) as mem:
        with pytest.raises(PolicyViolation, match="has no graph: section"):
            mem.entity("Alice", "person")


def test_mentions_count_once_and_are_journalled(engine: Engine, admin: Any) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        note = _fact(mem, "met with the platform lead about the migration")
        [alice] = mem.mention(note.id, [("Alice Moreau", "person")])
        assert alice.mention_count == 1
        [same] = mem.mention(note.id, ["alice moreau"])       # known name: resolved, no recount
        assert same.id == alice.id and same.mention_count == 1
        later = _fact(mem, "the platform lead signed off")
        [counted] = mem.mention(later.id, [alice.id])
        assert counted.mention_count == 2
        found, memories = mem.entity_memories("Alice Moreau")
        assert found.id == alice.id and [m.id for m in memories] == [later.id, note.id]
    assert [row[0] for row in _events(admin, user, "entity_mentioned")] == [note.id, later.id]


def test_writes_in_a_scope_are_chained_by_temporal_edges(engine: Engine, admin: Any) -> None:
    user = _user()
    start = datetime(2026, 5, 1, 9, tzinfo=UTC)
    with engine.tenant(user) as mem:
        turns = [_fact(mem, f"turn {n}", scope_id="s-1",
                       event_time=start + timedelta(minutes=n)) for n in range(3)]
        elsewhere = _fact(mem, "another session", scope_id="s-2", event_time=start)
        unscoped = _fact(mem, "no session")
    # the engine's own one-message write links too
    last = engine.observe(user, "long_term", "turn 3", typology="episodic", scope_id="s-1",
                          event_time=start + timedelta(minutes=3))
    edges = admin.execute(sql.SQL(
        "SELECT source_id, target_id FROM {} WHERE user_id = %s "
        "AND relation_type = 'temporal'").format(EDGES), (user["user_id"],)).fetchall()
    ids = [t.id for t in turns] + [last.id]
    assert sorted(edges) == sorted(itertools.pairwise(ids))
    assert all(elsewhere.id not in e and unscoped.id not in e for e in edges)
    recorded = _events(admin, user, "edge_recorded")
    assert len(recorded) == 3 and all(p["automatic"] for _, p in recorded)
    [report] = verify_chains(admin, engine.spec, tenants=[user["user_id"]])
    assert report.intact


def test_an_ended_edge_stays_and_is_journalled(engine: Engine, admin: Any) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        a, b = _fact(mem, "cause"), _fact(mem, "effect")
        edge = mem.relate(a.id, b.id, "causal", predicate="led_to")
        ended = mem.end_edge(edge.id, reason="wrong link")
        assert ended.valid_until is not None
        assert mem.end_edge(edge.id).valid_until == ended.valid_until   # idempotent
        with pytest.raises(GovernanceError, match="does not exist"):
            mem.end_edge(uuid.uuid4())
    assert admin.execute(sql.SQL("SELECT count(*) FROM {} WHERE id = %s").format(EDGES),
                         (edge.id,)).fetchone() == (1,)
    # the journal keeps the reason's hash only (docs/compliance.md, erasure)
    assert [p["reason_sha256"] for _, p in _events(admin, user, "edge_ended")] == [
        content_hash("wrong link")]


# the graph signal -------------------------------------------------------------------------------
def _ids(hits: Any) -> list[uuid.UUID]:
    return [h.memory.id for h in hits]


def test_a_named_entity_finds_the_memories_that_mention_it(engine: Engine) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        note = _fact(mem, "she prefers async standups on Tuesdays")
        _fact(mem, "the office plants need water")
        mem.mention(note.id, [("Alice Moreau", "person")])
        mem.entity("Alice Moreau", "person", aliases=["Ali"])
    for query in ("who is Alice Moreau?", "who is ali"):
        found = engine.search(user, query, explain=True)
        assert found.intent == "who" and found.edge_types == ("entity",)
        assert _ids(found) == [note.id]          # no word of the query is in the text
        assert found.hits[0].ranks["graph"] == 1 and "lexical" not in found.hits[0].ranks
        assert found.signal_rows["graph"] == 1 and found.signal_rows["lexical"] == 0
    # a partial name is not a mention: "Alice" alone, or a word inside another word
    assert engine.search(user, "who is Alicexyz") == []


def test_a_why_query_walks_causal_edges_from_the_text_matches(engine: Engine) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        failure = _fact(mem, "the friday deploy failed halfway")
        cause = _fact(mem, "a schema migration locked the orders table")
        root = _fact(mem, "nobody reviewed the migration script")
        unrelated = _fact(mem, "lunch was tacos")
        mem.relate(cause.id, failure.id, "causal")
        mem.relate(root.id, cause.id, "causal", weight=0.5)
        mem.relate(unrelated.id, failure.id, "temporal")
    found = engine.search(user, "why did the deploy fail", explain=True)
    assert found.intent == "why" and found.edge_types == ("causal",)
    assert found.weights["graph"] == 1.0 and found.weights["lexical"] == 0.5  # the why route
    ranked = _ids(found)
    assert ranked[0] in (failure.id, cause.id) and set(ranked) == {failure.id, cause.id,
                                                                   root.id}
    graph = {h.memory.id: (h.ranks["graph"], h.scores["graph"]) for h in found.hits
             if "graph" in h.ranks}
    assert set(graph) == {cause.id, root.id}                 # the text match is not re-ranked
    assert graph[cause.id][0] == 1 and graph[cause.id][1] == pytest.approx(0.5)    # one hop
    assert graph[root.id][1] == pytest.approx(0.5 / 3)                             # two hops
    # a when query follows temporal edges instead
    when = engine.search(user, "when did the deploy fail", explain=True)
    assert when.intent == "when" and set(_ids(when)) == {failure.id, unrelated.id}


def test_the_walk_respects_state_time_and_tenant(engine: Engine) -> None:
    user, other = _user(), _user()
    with engine.tenant(user) as mem:
        failure = _fact(mem, "the nightly backup failed")
        cause = _fact(mem, "the disk filled with logs")
        edge = mem.relate(cause.id, failure.id, "causal")
    before = datetime.now(UTC)
    with engine.tenant(other) as mem:                 # same words, another tenant
        _fact(mem, "the nightly backup failed")
    assert set(_ids(engine.search(user, "why did the backup fail"))) == {failure.id, cause.id}
    with engine.tenant(user) as mem:
        mem.end_edge(edge.id)
    assert _ids(engine.search(user, "why did the backup fail")) == [failure.id]
    # at a time the edge was valid, the walk still follows it
    then = engine.search(user, "why did the backup fail", as_of=before)
    assert set(_ids(then)) == {failure.id, cause.id}
    with engine.tenant(user) as mem:
        mem.relate(cause.id, failure.id, "causal")
        mem.tombstone(cause.id, reason="wrong")
    assert _ids(engine.search(user, "why did the backup fail")) == [failure.id]


def test_the_async_engine_records_and_walks_the_same_graph(pg: PostgresHandle,
                                                           assistant: AgentSpec) -> None:
    import asyncio

    user = _user()

    async def run() -> list[uuid.UUID]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            eng = await AsyncEngine.connect(assistant, pg.app_dsn)
        async with eng:
            async with eng.tenant(user) as mem:
                note = await mem.observe("long_term", "prefers tea", typology="episodic")
                await mem.mention(note.id, [("Bob Stone", "person")])
                ids = [note.id]
            hits = await eng.search(user, "what about Bob Stone")
            return ids + _ids(hits)

    note, *hits = asyncio.run(run())
    assert hits == [note]


def test_the_context_pack_profiles_the_entities_of_the_query_and_the_hits(
        engine: Engine) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        fact = mem.observe("long_term", "the platform lead prefers written standups",
                           typology="semantic")
        alice = mem.entity("Alice Moreau", "person", summary="platform lead since 2024")
        bob = mem.entity("Bob Stone", "person")
        mem.entity("Carol Fry", "person")                 # neither named nor mentioned
        mem.mention(fact.id, [alice.id, bob.id])          # the graph finds it for "Alice"
    pack = engine.context_pack(user, "what does Alice Moreau think of standups?")
    profiles = pack.block("entity_profiles").items
    assert [e.id for e in profiles] == [alice.id, bob.id]   # named first, then mentioned
    assert "- Alice Moreau (person): platform lead since 2024" in pack.text
    assert [m.id for m in pack.block("facts").items] == [fact.id]
    # on-demand profile blocks stay empty when on-demand blocks are off
    off = engine.context_pack(user, "Alice Moreau", include_on_demand=False)
    assert off.block("entity_profiles").items == ()


def test_the_context_pack_quotes_the_sources_of_its_facts_as_evidence(engine: Engine) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        # the source shares no word with the question: the lexical signal (BM25, any word)
        # would otherwise find it and place it in the temporal block instead
        turn = mem.observe("long_term", "Me: honestly I'd rather write my update down",
                           typology="episodic")
        other = mem.observe("long_term", "Alice: lunch at noon?", typology="episodic")
        fact = mem.observe("long_term", "the platform lead prefers written standups",
                           typology="semantic")
        mem.mention(fact.id, [("Alice Moreau", "person")])
        mem.relate(fact.id, turn.id, "derived_from")
        ended = mem.relate(fact.id, other.id, "derived_from")
        mem.end_edge(ended.id)                                  # no longer a source
    pack = engine.context_pack(user, "what does Alice Moreau think of standups?")
    assert [m.id for m in pack.block("facts").items] == [fact.id]
    assert [m.id for m in pack.block("evidence").items] == [turn.id]
    assert "## evidence\n- Me: honestly I'd rather write my update down" in pack.text


def test_explain_shows_the_intent_and_the_edges_followed(engine: Engine) -> None:
    from primitives.retrieval import render_explanation

    user = _user()
    with engine.tenant(user) as mem:
        failure = _fact(mem, "the friday deploy failed halfway")
        cause = _fact(mem, "a schema migration locked the orders table")
        mem.relate(cause.id, failure.id, "causal")
    found = engine.search(user, "why did the deploy fail", explain=True)
    text = render_explanation(found, query="why did the deploy fail")
    assert "intent: why" in text and "graph follows: causal" in text
    assert "graph #1 (0.5)" in text                     # the cause, one hop from the match


def test_another_tenants_entities_and_memories_cannot_be_linked(engine: Engine) -> None:
    a, b = _user(), _user()
    with engine.tenant(a) as mem:
        alice = mem.entity("Alice Moreau", "person")
        note_a = _fact(mem, "a's note")
        mem.mention(note_a.id, [alice.id])
    with engine.tenant(b) as mem:
        note_b = _fact(mem, "b's note")
        with pytest.raises(GovernanceError, match="does not exist for this tenant"):
            mem.mention(note_b.id, [alice.id])
        with pytest.raises(TenancyError, match="no memory"):
            mem.relate(note_b.id, note_a.id, "causal")
        assert mem.find_entities("Alice Moreau") == []
        with pytest.raises(GovernanceError, match="no entity is named"):
            mem.entity_memories("Alice Moreau")
    assert engine.search(b, "who is Alice Moreau") == []     # a's mention stays a's
