"""The assistant's life (seed 002, issue 24 part 4): agents/assistant_memory.yaml run end to end
against real Postgres, as the application role, with the maintain job as its maintainer.

One user, two sessions. The first is written on the hot path (each turn an episode chained to
the previous one by a temporal edge), goes quiet, and the maintain job rotates it after the
tier's ``idle_after`` and consolidates it with the default rule-based extractor into facts,
an opinion, entities, ``derived_from`` edges and a ``causal`` edge inferred from a "so"
turn. The second session corrects the employer: the old fact's validity ends, a
``supersedes`` edge links new to old. The decay pass, run at a clock four months later,
archives the unconfirmed opinion and keeps the confirmed fact. Then a why, a when, a who and
a what question are each answered through their intent's strategy (the engine has no
embedder, so the keyword classifier routes), and a point-in-time question is answered as of
before the correction. The corrected fact's provenance chain leads back to both sessions'
episodes, ``memory_stats`` counts the graph, and the journal verifies at the end.
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
from primitives.compile import agent_tables
from primitives.engine import Engine
from primitives.lifecycle import maintain
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")


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


def _edges(admin: psycopg.Connection[Any], spec: AgentSpec, tenant: str,
           kind: str) -> list[tuple[uuid.UUID, uuid.UUID, float]]:
    tables = agent_tables(spec)
    assert tables.edges is not None
    return [(s, t, float(c)) for s, t, c in admin.execute(sql.SQL(
        "SELECT source_id, target_id, confidence FROM {} WHERE {} = %s AND relation_type = %s "
        "ORDER BY created_at, source_id").format(tables.edges.ident, tables.tenant),
        (tenant, kind)).fetchall()]


def _ids(hits: Any) -> list[uuid.UUID]:
    return [h.memory.id for h in hits]


def _by_graph(found: Any) -> set[uuid.UUID]:
    return {h.memory.id for h in found.hits if "graph" in h.ranks}


def test_the_assistant_lives_through_sessions_correction_and_decay(
        engine: Engine, assistant: AgentSpec, pg: PostgresHandle,
        admin_conn: psycopg.Connection[Any]) -> None:
    user = {"user_id": f"u-{uuid.uuid4().hex[:10]}"}
    tenant = user["user_id"]
    tables = agent_tables(assistant)
    start = datetime.now(UTC) - timedelta(hours=3)

    # 1. the hot path: each turn an episode, chained to the previous turn of its session
    turns = ["I work at Acme Corp.",
             "Bob Stone works for Globex.",
             "I prefer window seats.",
             "The payment tests kept failing all week.",
             "So the release slipped to Friday."]
    with engine.tenant(user) as mem:
        s1 = [mem.observe("long_term", text, typology="episodic", scope_id="s-1",
                          event_time=start + timedelta(minutes=n)).id
              for n, text in enumerate(turns)]
    temporal = _edges(admin_conn, assistant, tenant, "temporal")
    assert {(s, t) for s, t, _ in temporal} == {(s1[n], s1[n + 1]) for n in range(4)}

    # 2. the session goes quiet; maintain rotates it after idle_after (30 min) and consolidates
    admin_conn.execute(sql.SQL("UPDATE {} SET created_at = created_at - interval '3 hours' "
                               "WHERE {} = %s AND scope_id = 's-1'").format(
        tables.memories.ident, tables.tenant), (tenant,))
    report = maintain([assistant], pg.admin_dsn)
    assert report.agents["assistant"]["consolidation"] >= 1
    with engine.tenant(user) as mem:
        facts = {h.memory.key: h.memory for h in mem.search(tiers=["long_term"], limit=100)
                 if h.memory.typology != "episodic"}
        acme_ents = mem.entity_memories("Acme Corp")[1]
        globex = mem.entity_memories("Globex")[1]
    assert {k: m.content for k, m in facts.items()} == {
        "user:works_at": "User works at Acme Corp.",
        "bob stone:works_at": "Bob Stone works at Globex.",
        "preference:window seats": "User prefers window seats."}
    acme_fact = facts["user:works_at"]
    assert acme_fact.confidence == pytest.approx(0.8)            # extraction's confidence
    assert s1[0] in {m.id for m in acme_ents} and acme_fact.id in {m.id for m in acme_ents}
    assert s1[1] in {m.id for m in globex}
    derived = {(s, t) for s, t, _ in _edges(admin_conn, assistant, tenant, "derived_from")}
    assert (acme_fact.id, s1[0]) in derived
    # the "so" turn is the effect of the turn before it: a causal edge at inference confidence
    assert _edges(admin_conn, assistant, tenant, "causal") == [(s1[3], s1[4], 0.6)]
    before_correction = datetime.now(UTC)

    # 3. the next session corrects the employer: validity ends, supersedes links new -> old
    with engine.tenant(user) as mem:
        hooli_turn = mem.observe("long_term", "I work at Hooli now.", typology="episodic",
                                 scope_id="s-2").id
        mem.end_scope("session", "s-2")
        current = [h.memory for h in mem.search(tiers=["long_term"], limit=100)
                   if h.memory.key == "user:works_at"]
        assert [m.content for m in current] == ["User works at Hooli."]
        hooli_fact = current[0]
        mem.confirm(hooli_fact.id, reason="the user said so twice")
        old = mem.get(acme_fact.id)
    assert old is not None and old.invalidated_at is not None
    assert old.confidence == pytest.approx(0.3)
    assert (hooli_fact.id, acme_fact.id) in {
        (s, t) for s, t, _ in _edges(admin_conn, assistant, tenant, "supersedes")}

    # 4. four months on, the decay pass archives the unconfirmed opinion, not the confirmed fact
    maintain([assistant], pg.admin_dsn, now=datetime.now(UTC) + timedelta(days=120))
    with engine.tenant(user) as mem:
        live = {h.memory.content for h in mem.search(tiers=["long_term"], limit=100)}
    assert "User works at Hooli." in live and "User prefers window seats." not in live
    assert "Bob Stone works at Globex." not in live                  # unconfirmed: decayed too
    archived = admin_conn.execute(sql.SQL(
        "SELECT content FROM {} WHERE {} = %s AND archived_at IS NOT NULL ORDER BY content"
    ).format(tables.memories.ident, tables.tenant), (tenant,)).fetchall()
    assert [c for (c,) in archived] == ["Bob Stone works at Globex.",
                                        "User prefers window seats."]
    assert set(s1) <= {h.memory.id for h in engine.search(user, limit=100)}  # episodes stay

    # 5. each question through its strategy
    why = engine.search(user, "Why did the release slip?", explain=True)
    assert why.intent == "why" and why.edge_types == ("causal",)
    assert s1[3] in _by_graph(why)                     # the cause, one causal hop from the match
    # "before": the walk goes back along the temporal chain (earlier turns), not forward
    when = engine.search(user, "What happened before the release slipped?", explain=True)
    assert when.intent == "when" and when.edge_types == ("temporal",)
    assert when.direction == "backward" and when.complexity == "simple"
    assert s1[3] in _by_graph(when) and not _by_graph(when) & set(s1[4:])
    after = engine.search(user, "What came after the payment tests failed?", explain=True)
    assert after.direction == "forward"
    assert s1[4] in _by_graph(after) and not _by_graph(after) & set(s1[:3])
    who = engine.search(user, "Who works for Globex?", explain=True)
    assert who.intent == "who" and who.edge_types == ("entity",)
    assert s1[1] in _by_graph(who)                     # the episode that mentions Globex
    what = engine.search(user, "What do you know about Hooli?", explain=True)
    assert what.intent == "what" and what.edge_types == ("entity",)
    assert {hooli_turn, hooli_fact.id} <= _by_graph(what)

    # 6. a point-in-time question: as of before the correction, the user worked at Acme
    now = {h.memory.content for h in engine.search(user, "where do I work")}
    then = {h.memory.content for h in engine.search(user, "where do I work",
                                                    as_of=before_correction)}
    assert "User works at Hooli." in now and "User works at Acme Corp." not in now
    assert "User works at Acme Corp." in then and "User works at Hooli." not in then

    # 7. how it knows what it knows, and what it holds (seed 002 phase 6)
    with engine.tenant(user) as mem:
        provenance = mem.explain_fact(hooli_fact.id)
        stats = mem.stats()
    assert (1, "supersedes", acme_fact.id) in {(d, r, m.id) for d, r, m in provenance.chain}
    assert {hooli_turn, s1[0]} <= {m.id for m in provenance.episodes}
    assert stats["edges"]["supersedes"] == 1 and stats["edges"]["causal"] == 1
    assert stats["edges"]["temporal"] == 4 and stats["entities"] >= 3
    assert stats["unconsolidated_sessions"] == 0
    assert stats["last_consolidation"] is not None and stats["last_decay_archive"] is not None
    assert stats["last_decay_run"] is not None                     # the maintain run above

    [chain] = verify_chains(admin_conn, assistant, tenants=[tenant])
    assert chain.intact


def test_query_complexity_sets_the_limit_and_the_graph_depth(engine: Engine) -> None:
    user = {"user_id": f"u-{uuid.uuid4().hex[:10]}"}
    with engine.tenant(user) as mem:
        notes = [mem.observe("long_term", f"garden note {n}: the tomatoes need water",
                             typology="episodic").id for n in range(30)]
        chain = [mem.observe("long_term", text, typology="episodic").id for text in (
            "the outage hit checkout", "the cache node ran out of memory",
            "a batch job filled the cache", "the batch job was scheduled at noon by mistake")]
        for effect, cause in itertools.pairwise(chain):
            mem.relate(cause, effect, "causal")
    simple = engine.search(user, "tomatoes water", explain=True)
    assert simple.complexity == "simple" and len(simple.hits) == 5          # top 5
    complex_ = engine.search(user, "tomatoes and water and garden", explain=True)
    assert complex_.complexity == "complex" and len(complex_.hits) == 20    # top 20
    assert len(engine.search(user, "tomatoes water", limit=7)) == 7         # the caller's limit
    assert set(notes) >= {h.memory.id for h in complex_.hits}
    # simple: graph depth 2; complex: depth 4, capped by the spec's graph.max_depth (3)
    near = {h.memory.id for h in engine.search(user, "why did the outage hit checkout")}
    assert chain[2] in near and chain[3] not in near
    far = engine.search(user, "why and how did the outage hit checkout or not", explain=True)
    assert far.complexity == "complex" and chain[3] in _by_graph(far)


def test_a_question_with_words_absent_from_every_row_still_starts_the_walk(
        engine: Engine, assistant: AgentSpec, pg: PostgresHandle) -> None:
    user = {"user_id": f"u-{uuid.uuid4().hex[:10]}"}
    with engine.tenant(user) as mem:
        failure = mem.observe("long_term", "the nightly backup failed", typology="episodic")
        cause = mem.observe("long_term", "the disk filled with logs", typology="episodic")
        mem.relate(cause.id, failure.id, "causal")
    question = "why exactly did the backup fail yesterday"
    # the default BM25 ranking matches any word: the failure starts the walk to its cause
    found = engine.search(user, question, explain=True)
    assert found.signal_rows["lexical"] >= 1
    assert _by_graph(found) == {cause.id}
    # websearch needs every word, and "yesterday" and "exactly" are in no row: the lexical
    # signal finds nothing, and the walk still starts from the rows holding any word
    retrieval = assistant.retrieval
    websearch = assistant.model_copy(update={"retrieval": retrieval.model_copy(update={
        "lexical": retrieval.lexical.model_copy(update={"ranking": "websearch"})})})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        strict = Engine.connect(websearch, pg.app_dsn)
    with strict:
        found = strict.search(user, question, explain=True)
    assert found.signal_rows["lexical"] == 0
    assert _by_graph(found) == {cause.id}


def test_the_context_budget_follows_the_inferred_complexity(engine: Engine) -> None:
    user = {"user_id": f"u-{uuid.uuid4().hex[:10]}"}
    filler = " ".join(f"word{n}" for n in range(40))
    with engine.tenant(user) as mem:
        for n in range(40):
            mem.observe("long_term", f"tomato fact {n}: water the tomatoes daily {filler}",
                        typology="semantic")
    simple = engine.context_pack(user, "tomatoes water")
    complex_ = engine.context_pack(user, "tomatoes and water and daily")
    assert 0 < simple.total_tokens_used <= 1000 < complex_.total_tokens_used <= 3000
    # a caller's complexity still wins
    assert engine.context_pack(user, "tomatoes water", complexity="complex"
                               ).total_tokens_used == complex_.total_tokens_used
