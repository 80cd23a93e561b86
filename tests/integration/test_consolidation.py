"""Consolidation (seed 002 §10.1, §15): a session's episodes become facts, procedures and
opinions through an extractor, with entities, mentions and derived_from edges, once.

The engine runs as the application role (``pg.app_dsn``) under row-level security; the
maintain job as ``primitives_maintainer``. The LLM extractor is driven by langchain_core's
fake chat models, so its real code path (prompt, reply parsing, validation) runs.
"""

from __future__ import annotations

import json
import threading
import uuid
import warnings
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from psycopg import sql

from primitives._project import migrate
from primitives.audit._chain import verify_chains
from primitives.cli import main
from primitives.compile import agent_tables
from primitives.engine import Engine, TenantMemory
from primitives.errors import GovernanceError, PolicyViolation
from primitives.extraction import (
    Extraction,
    ExtractionRequest,
    LLMExtractor,
    RuleBasedExtractor,
)
from primitives.lifecycle import maintain
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle
from tests.integration._awaiting import engine_sessions

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")
START = datetime(2026, 5, 4, 9, tzinfo=UTC)


@pytest.fixture(scope="module")
def assistant(pg: PostgresHandle) -> AgentSpec:
    spec = load_spec(ROOT / "agents" / "assistant_memory.yaml")
    migrate([spec], dsn=pg.admin_dsn)
    return spec


@pytest.fixture
def engine(pg: PostgresHandle, assistant: AgentSpec) -> Iterator[Engine]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eng = Engine.connect(assistant, pg.app_dsn)
    with eng:
        yield eng


def _user() -> dict[str, str]:
    return {"user_id": f"u-{uuid.uuid4().hex[:10]}"}


def _episodes(mem: TenantMemory, scope_id: str, texts: Sequence[str]) -> list[uuid.UUID]:
    return [mem.observe("long_term", text, typology="episodic", scope_id=scope_id,
                        event_time=START + timedelta(minutes=n)).id
            for n, text in enumerate(texts)]


def _model(answer: dict[str, Any]) -> GenericFakeChatModel:
    """A fake chat model whose one reply is ``answer`` as JSON text."""
    return GenericFakeChatModel(messages=iter([AIMessage(json.dumps(answer, default=str))]))


class _Refusing:
    """An extractor that must not be asked: a run that calls it failed its idempotency."""

    name = "refusing"

    def extract(self, request: ExtractionRequest) -> Extraction:
        raise AssertionError("the extractor was asked again")


def _state(admin: psycopg.Connection[Any], spec: AgentSpec, tenant: str) -> dict[str, Any]:
    """Everything a consolidation can change for ``tenant``, to compare before and after."""
    tables = agent_tables(spec)
    assert tables.edges is not None and tables.entities is not None
    assert tables.node_entities is not None

    def rows(statement: str, table: Any) -> list[Any]:
        return admin.execute(sql.SQL(statement).format(table, tables.tenant),
                             (tenant,)).fetchall()

    return {
        "memories": rows("SELECT id, typology, key, content, confidence, superseded_at, "
                         "invalidated_at, provenance FROM {} WHERE {} = %s ORDER BY id",
                         tables.memories.ident),
        "events": rows("SELECT kind, count(*) FROM {} WHERE {} = %s GROUP BY kind "
                       "ORDER BY kind", tables.events.ident),
        "edges": rows("SELECT source_id, target_id, relation_type FROM {} WHERE {} = %s "
                      "ORDER BY 1, 2, 3", tables.edges.ident),
        "entities": rows("SELECT canonical_name, type, mention_count FROM {} WHERE {} = %s "
                         "ORDER BY 1, 2", tables.entities.ident),
        "mentions": rows("SELECT memory_id, entity_id FROM {} WHERE {} = %s ORDER BY 1, 2",
                         tables.node_entities.ident),
        "ledger": rows("SELECT rule, source_id FROM {} WHERE {} = %s ORDER BY 1, 2",
                       tables.promotions.ident),
    }


def _events(admin: psycopg.Connection[Any], spec: AgentSpec, tenant: str,
            kind: str) -> list[Any]:
    tables = agent_tables(spec)
    return admin.execute(sql.SQL("SELECT memory_id, payload FROM {} WHERE {} = %s "
                                 "AND kind = %s ORDER BY seq").format(
        tables.events.ident, tables.tenant), (tenant, kind)).fetchall()


def _active(mem: TenantMemory, typology: str) -> list[Any]:
    return [m for m in mem.search(tiers=["long_term"], limit=100)
            if m.memory.typology == typology]


# the fake-model run -----------------------------------------------------------------------------
def test_a_fake_model_run_creates_facts_entities_and_edges_once_and_a_rerun_changes_nothing(
        engine: Engine, assistant: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        employer = mem.observe("long_term", "User works at Initech.", typology="semantic",
                               key="user:employer")
        meetings = mem.observe("long_term", "User likes long meetings.", typology="opinion",
                               key="preference:meetings")
        tea = mem.observe("long_term", "User drinks tea.", typology="semantic",
                          key="user:drink")
        e1, e2, e3, e4 = _episodes(mem, "s-1", [
            "I just started at Globex as a data engineer.",
            "Honestly I prefer short async standups; long meetings drain me.",
            "For the rollout, writing the runbook first worked well.",
            "Dana Reyes from the platform team reviewed it, over tea as usual.",
        ])
    answer = {
        "decisions": [
            {"action": "UPDATE", "target_id": str(employer.id), "content": "User works at Globex.",
             "confidence": 0.9, "evidence": [str(e1)],
             "entities": [{"name": "Globex", "type": "organization"}]},
            {"action": "ADD", "typology": "opinion", "key": "preference:standups",
             "content": "User prefers short async standups.", "confidence": 0.8,
             "evidence": [str(e2)]},
            {"action": "ADD", "typology": "procedural",
             "content": "Write the runbook before a rollout.", "confidence": 0.7,
             "evidence": [str(e3)]},
            {"action": "DELETE", "target_id": str(meetings.id), "evidence": [str(e2)]},
            {"action": "NOOP", "target_id": str(tea.id), "evidence": [str(e4)]},
        ],
        "mentions": [{"episode_id": str(e1), "name": "Globex", "type": "organization"},
                     {"episode_id": str(e4), "name": "Dana Reyes", "type": "person"}],
    }
    with engine.tenant(user) as mem:
        mem.end_scope("session", "s-1", extractor=LLMExtractor(_model(answer)))
        facts = {m.memory.content: m.memory for m in _active(mem, "semantic")}
        opinions = {m.memory.content for m in _active(mem, "opinion")}
        procedures = {m.memory.content: m.memory for m in _active(mem, "procedural")}
        old, gone = mem.get(employer.id), mem.get(meetings.id)
        globex, mentioning = mem.entity_memories("Globex")
        [dana] = mem.find_entities("Dana Reyes")
    new_fact = facts["User works at Globex."]
    assert set(facts) == {"User works at Globex.", "User drinks tea."}
    assert opinions == {"User prefers short async standups."}       # long meetings retracted
    assert set(procedures) == {"Write the runbook before a rollout."}
    # the UPDATE went through the semantic conflict policy (seed 002 §12.3)
    assert old is not None and old.superseded_at is not None and old.invalidated_at is not None
    assert old.confidence == pytest.approx(0.3)
    assert gone is not None and gone.invalidated_at is not None and gone.superseded_at is None
    # the model said 0.9; an extracted row starts at most at graph.confidence.extraction
    assert new_fact.key == "user:employer" and new_fact.confidence == pytest.approx(0.8)
    assert procedures["Write the runbook before a rollout."].confidence == pytest.approx(0.7)
    # entities and mentions: the episode and the fact both mention Globex
    assert globex.type == "organization" and {m.id for m in mentioning} == {e1, new_fact.id}
    assert dana.type == "person" and dana.mention_count == 1
    state = _state(admin_conn, assistant, user["user_id"])
    written = {row[0]: row for row in state["memories"]}
    assert written[new_fact.id][7]["derived_from"] == [str(e1)]
    derived = {(s, t) for s, t, kind in state["edges"] if kind == "derived_from"}
    assert derived == {(new_fact.id, e1), (procedures["Write the runbook before a rollout."].id,
                                           e3)} | {(m, e2) for m, *_ in state["memories"]
                                                   if written[m][2] == "preference:standups"}
    assert (new_fact.id, employer.id, "supersedes") in state["edges"]
    assert sorted(src for _, src in state["ledger"]) == sorted([e1, e2, e3, e4])
    [(_, summary)] = _events(admin_conn, assistant, user["user_id"], "consolidated")
    assert (summary["added"], summary["updated"], summary["deleted"], summary["skipped"],
            summary["episodes"], summary["extractor"]) == (2, 1, 1, 1, 4, "llm")
    vias = [p["via"] for _, p in _events(admin_conn, assistant, user["user_id"], "observed")]
    assert vias.count("consolidation") == 3
    # a re-run, at the session's end or directly, asks nothing and changes nothing
    with engine.tenant(user) as mem:
        mem.end_scope("session", "s-1", extractor=_Refusing())
        [again] = mem.consolidate("s-1", extractor=_Refusing())
    assert again.episodes == 0 and again.changed == 0
    after = _state(admin_conn, assistant, user["user_id"])
    # ending the session again is journalled as such (scope_ended); nothing else happened
    ended = dict(state["events"])["scope_ended"]
    assert dict(after.pop("events")) == {**dict(state.pop("events")), "scope_ended": ended + 1}
    assert after == state
    [report] = verify_chains(admin_conn, assistant, tenants=[user["user_id"]])
    assert report.intact


def test_the_structured_output_of_a_model_that_has_one_is_used(
        engine: Engine, admin_conn: psycopg.Connection[Any], assistant: AgentSpec) -> None:
    asked: list[Any] = []

    class Structured(GenericFakeChatModel):
        def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:
            from langchain_core.runnables import RunnableLambda

            def answer(messages: Any) -> Any:
                asked.append(messages)
                return schema.model_validate({"decisions": [{
                    "action": "ADD", "typology": "semantic", "key": "user:city",
                    "content": "User lives in Porto.", "confidence": 0.85}]})
            return RunnableLambda(answer)

    user = _user()
    with engine.tenant(user) as mem:
        [episode] = _episodes(mem, "s-2", ["We moved to Porto last spring."])
        [done] = mem.consolidate("s-2", extractor=LLMExtractor(
            Structured(messages=iter([]))))
        assert done.added == 1
        [fact] = _active(mem, "semantic")
    assert fact.memory.content == "User lives in Porto."
    assert str(episode) in asked[0][1].content          # the episodes went to the model
    derived = [r for r in _state(admin_conn, assistant, user["user_id"])["edges"]
               if r[2] == "derived_from"]
    assert derived == [(fact.memory.id, episode, "derived_from")]   # no evidence given: all


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_both_executors_consolidate_at_the_session_end_and_only_once(
        pg: PostgresHandle, assistant: AgentSpec, admin_conn: psycopg.Connection[Any],
        mode: str) -> None:
    user = _user()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        async with engine_sessions(mode, assistant, pg.app_dsn, max_connections=2) as session:
            async with session(user) as mem:
                [episode] = [(await mem.observe("long_term", "I work at Pied Piper.",
                                                typology="episodic", scope_id="s-9")).id]
                await mem.end_scope("session", "s-9", extractor=LLMExtractor(_model({
                    "decisions": [{"action": "ADD", "typology": "semantic",
                                   "key": "user:employer", "content": "User works at Pied Piper.",
                                   "entities": [{"name": "Pied Piper",
                                                 "type": "organization"}]}]})))
            state = _state(admin_conn, assistant, user["user_id"])
            async with session(user) as mem:
                [again] = await mem.consolidate("s-9", extractor=_Refusing())
    assert again.episodes == 0
    assert _state(admin_conn, assistant, user["user_id"]) == state
    [(fact_id, *_)] = [r for r in state["memories"] if r[1] == "semantic"]
    assert (fact_id, episode, "derived_from") in state["edges"]
    assert [(n, t) for n, t, _ in state["entities"]] == [("Pied Piper", "organization")]


# interrupted runs -------------------------------------------------------------------------------
def test_an_interrupted_run_leaves_nothing_and_running_again_completes_it(
        engine: Engine, assistant: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        e1, _ = _episodes(mem, "s-3", ["I work at Hooli.", "I love hiking in Sintra."])
    before = _state(admin_conn, assistant, user["user_id"])
    good = {"action": "ADD", "typology": "semantic", "key": "user:employer",
            "content": "User works at Hooli.", "evidence": [str(e1)],
            "entities": [{"name": "Hooli", "type": "organization"}]}
    too_long = {"action": "ADD", "typology": "opinion", "content": "x" * 100_000}
    # the second decision fails after the first was written: the transaction rolls back
    with pytest.raises(PolicyViolation, match=r"decision 1 .*content is 100000 characters"):
        with engine.tenant(user) as mem:
            mem.end_scope("session", "s-3", extractor=LLMExtractor(_model(
                {"decisions": [good, too_long]})))
    # a reply that is not the schema, and a model that fails: refused, nothing written
    with pytest.raises(PolicyViolation, match=r"does not fit the schema: decisions\.0\.action"):
        with engine.tenant(user) as mem:
            mem.consolidate("s-3", extractor=LLMExtractor(_model(
                {"decisions": [{"action": "MERGE"}]})))
    with pytest.raises(RuntimeError, match="extractor 'llm' failed"):
        with engine.tenant(user) as mem:       # the fake model has no reply left
            mem.consolidate("s-3", extractor=LLMExtractor(GenericFakeChatModel(
                messages=iter([]))))
    with engine.tenant(_user()) as other:      # another tenant's fact: RLS hides it
        foreign = other.observe("long_term", "User works at Initech.", typology="semantic")
    for target in (foreign.id, e1):               # nor may it touch an episode
        with pytest.raises(PolicyViolation, match=f"target {target} is not an active"):
            with engine.tenant(user) as mem:
                mem.consolidate("s-3", extractor=LLMExtractor(_model(
                    {"decisions": [good, {"action": "DELETE", "target_id": str(target)}]})))
    with pytest.raises(PolicyViolation, match="not an episode of scope 's-3'"):
        with engine.tenant(user) as mem:
            mem.consolidate("s-3", extractor=LLMExtractor(_model(
                {"decisions": [{**good, "evidence": [str(uuid.uuid4())]}]})))
    assert _state(admin_conn, assistant, user["user_id"]) == before
    with engine.tenant(user) as mem:
        [done] = mem.consolidate("s-3", extractor=LLMExtractor(_model({"decisions": [good]})))
        assert (done.episodes, done.added) == (2, 1)
        assert [e.canonical_name for e in mem.find_entities("hooli")] == ["Hooli"]


def test_two_concurrent_runs_of_a_session_consolidate_it_once(engine: Engine) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        _episodes(mem, "s-c", ["I work at Hooli."])
    entered, release = threading.Event(), threading.Event()

    class Slow:
        name = "slow"

        def extract(self, request: ExtractionRequest) -> Extraction:
            entered.set()              # the first run holds its claims from here
            release.wait(30)
            return RuleBasedExtractor().extract(request)

    done: dict[str, Any] = {}

    def run(label: str, extractor: Any) -> None:
        with engine.tenant(user) as mem:
            [done[label]] = mem.consolidate("s-c", extractor=extractor)

    first = threading.Thread(target=run, args=("first", Slow()))
    first.start()
    assert entered.wait(30)
    second = threading.Thread(target=run, args=("second", _Refusing()))
    second.start()
    second.join(0.5)
    assert second.is_alive()           # its claim waits for the first run's transaction
    release.set()
    first.join(30)
    second.join(30)
    assert done["first"].added == 1
    assert done["second"].episodes == 0     # the first committed: nothing left to claim
    with engine.tenant(user) as mem:
        assert [m.memory.content for m in _active(mem, "semantic")] == [
            "User works at Hooli."]


def test_a_decision_below_the_extract_threshold_is_skipped(
        engine: Engine) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        _episodes(mem, "s-4", ["maybe I like jazz?"])
        [done] = mem.consolidate("s-4", extractor=LLMExtractor(_model({"decisions": [
            {"action": "ADD", "typology": "opinion", "content": "User likes jazz.",
             "confidence": 0.5}]})))            # write_policy.opinion.extract_threshold 0.6
        assert (done.added, done.skipped) == (0, 1)
        assert _active(mem, "opinion") == []


def test_an_add_of_what_a_key_already_holds_writes_nothing(
        engine: Engine, assistant: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        held = mem.observe("long_term", "User prefers tea.", typology="opinion",
                           key="preference:tea")
        _episodes(mem, "s-10", ["tea again, as always"])
        [done] = mem.consolidate("s-10", extractor=LLMExtractor(_model({"decisions": [
            {"action": "ADD", "typology": "opinion", "key": "preference:tea",
             "content": "User prefers tea."}]})))
        assert (done.added, done.unchanged) == (0, 1)
        assert [h.memory.id for h in _active(mem, "opinion")] == [held.id]
    assert not [e for e in _state(admin_conn, assistant, user["user_id"])["edges"]
                if e[2] == "derived_from"]


def test_a_merge_typology_folds_a_repeated_fact_into_the_one_it_repeats(
        engine: Engine, assistant: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    user = _user()
    add = {"action": "ADD", "typology": "semantic",
           "content": "User's daughter is called Mia."}
    with engine.tenant(user) as mem:
        [first] = _episodes(mem, "s-5", ["my daughter is called Mia"])
        mem.consolidate("s-5", extractor=LLMExtractor(_model({"decisions": [add]})))
        [second] = _episodes(mem, "s-6", ["Mia, my daughter, started school"])
        [done] = mem.consolidate("s-6", extractor=LLMExtractor(_model({"decisions": [
            {**add, "content": "User's daughter is called Mia!"}]})))
        assert (done.added, done.merged) == (0, 1)      # semantic: method merge, 0.92
        [fact] = _active(mem, "semantic")
    row = next(r for r in _state(admin_conn, assistant, user["user_id"])["memories"]
               if r[0] == fact.memory.id)
    assert row[7]["derived_from"] == [str(first), str(second)]
    edges = _state(admin_conn, assistant, user["user_id"])["edges"]
    assert sorted(t for s, t, k in edges if k == "derived_from") == sorted([first, second])


# the rule-based default -------------------------------------------------------------------------
def test_four_episodes_naming_companies_create_their_entities_with_the_default_extractor(
        engine: Engine, assistant: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        episodes = _episodes(mem, "s-7", [
            "I work at Acme Corp.",
            "Acme Corp signed a deal with Initech Labs yesterday.",
            "Bob Stone works for Globex.",
            "We compared Globex and Umbrella Group on pricing.",
        ])
        ended = mem.end_scope("session", "s-7")          # no extractor: rule_based
        assert ended.removed == 0
        facts = {m.memory.key: m.memory.content for m in _active(mem, "semantic")}
        companies = {name: mem.entity_memories(name)[1]
                     for name in ("Acme Corp", "Initech Labs", "Globex", "Umbrella Group")}
    assert facts == {"user:works_at": "User works at Acme Corp.",
                     "bob stone:works_at": "Bob Stone works at Globex."}
    assert {n: sorted(m.id for m in ms if m.typology == "episodic")
            for n, ms in companies.items()} == {
        "Acme Corp": sorted(episodes[:2]), "Initech Labs": [episodes[1]],
        "Globex": sorted(episodes[2:]), "Umbrella Group": [episodes[3]]}
    entities = _state(admin_conn, assistant, user["user_id"])["entities"]
    assert {(n, t) for n, t, _ in entities} >= {
        ("Acme Corp", "organization"), ("Globex", "organization"),
        ("Initech Labs", "organization"), ("Umbrella Group", "organization"),
        ("Bob Stone", "person")}
    # the next session corrects the employer: the key's fact is superseded, not duplicated
    with engine.tenant(user) as mem:
        _episodes(mem, "s-8", ["I work at Hooli now."])
        mem.end_scope("session", "s-8")
        facts = {m.memory.key: m.memory.content for m in _active(mem, "semantic")}
    assert facts["user:works_at"] == "User works at Hooli."


# the maintain job -------------------------------------------------------------------------------
def test_maintain_consolidates_a_missed_session_once_and_leaves_a_live_one(
        engine: Engine, assistant: AgentSpec, pg: PostgresHandle,
        admin_conn: psycopg.Connection[Any]) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        missed = _episodes(mem, "s-missed", ["I prefer window seats."])
        _episodes(mem, "s-live", ["I hate early flights."])
    tables = agent_tables(assistant)
    # the missed session went quiet two hours ago (idle_after of the session tier: 30 min)
    admin_conn.execute(sql.SQL("UPDATE {} SET created_at = now() - interval '2 hours' "
                               "WHERE {} = %s AND scope_id = 's-missed'").format(
        tables.memories.ident, tables.tenant), (user["user_id"],))
    report = maintain([assistant], pg.admin_dsn)
    assert report.agents["assistant"]["consolidation"] >= 1
    with engine.tenant(user) as mem:
        assert [m.memory.content for m in _active(mem, "opinion")] == [
            "User prefers window seats."]
    ledger = _state(admin_conn, assistant, user["user_id"])["ledger"]
    assert [src for _, src in ledger] == missed
    state = _state(admin_conn, assistant, user["user_id"])
    maintain([assistant], pg.admin_dsn)
    assert _state(admin_conn, assistant, user["user_id"]) == state
    # once its session tier scope is closed, the live session is no longer live
    admin_conn.execute(sql.SQL("INSERT INTO {} ({}, tier, scope_id, closed_at) "
                               "VALUES (%s, 'session', 's-live', now())").format(
        tables.scopes.ident, tables.tenant), (user["user_id"],))
    maintain([assistant], pg.admin_dsn)
    with engine.tenant(user) as mem:
        assert {m.memory.content for m in _active(mem, "opinion")} == {
            "User prefers window seats.", "User dislikes early flights."}


# a spec without a graph, writing promotion_only memory --------------------------------------------
_PLAIN = """\
version: 1
agent: {name}
anchor:
  keys: [team_id]
  required_at_write: [team_id]
typology:
  session: [episodic]
  team: [semantic]
tiers:
  - name: session
    boundary: {{lifecycle: session_end}}
  - name: team
    boundary: {{scope_change: team_id}}
    persistent: true
persistence:
  store: {{schema: {name}, prefix: {name}}}
retrieval:
  signals: [lexical, recency]
behavior:
  promotion:
    - from: session.episodic
      to: team.semantic
      criteria: extraction
      at: session_end
      justification: facts are extracted when a session ends
"""


def test_consolidation_writes_promotion_only_memory_that_observe_refuses(
        pg: PostgresHandle, tmp_path: Path, admin_conn: psycopg.Connection[Any]) -> None:
    name = f"plain_{uuid.uuid4().hex[:6]}"
    path = tmp_path / f"{name}.yaml"
    path.write_text(_PLAIN.format(name=name), encoding="utf-8")
    spec = load_spec(path)
    migrate([spec], dsn=pg.admin_dsn)
    team = {"team_id": "t-1"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eng = Engine.connect(spec, pg.app_dsn)
    with eng, eng.tenant(team) as mem:
        with pytest.raises(GovernanceError, match="written only by the promotion engine"):
            mem.observe("team", "Bob works at Globex.", typology="semantic")
        [episode] = _episodes_in(mem, "session", "sess-1", ["Bob works at Globex."])
        ended = mem.end_scope("session", "sess-1")
        assert ended.removed == 1                  # extracted first, then the episode left
        [fact] = mem.search(tiers=["team"])
    assert fact.memory.content == "Bob works at Globex." and fact.memory.tier == "team"
    tables = agent_tables(spec)
    [(provenance,)] = admin_conn.execute(sql.SQL(
        "SELECT provenance FROM {} WHERE id = %s").format(tables.memories.ident),
        (fact.memory.id,)).fetchall()
    assert provenance["derived_from"] == [str(episode)]   # no graph: provenance only


def _episodes_in(mem: TenantMemory, tier: str, scope_id: str,
                 texts: Sequence[str]) -> list[uuid.UUID]:
    return [mem.observe(tier, text, typology="episodic", scope_id=scope_id).id
            for text in texts]


_LLM_NIGHTLY = """\
version: 1
agent: {name}
anchor:
  keys: [team_id]
  required_at_write: [team_id]
typology:
  session: [episodic]
  team: [episodic, semantic]
tiers:
  - name: session
    boundary: {{lifecycle: session_end}}
  - name: team
    boundary: {{scope_change: team_id}}
    persistent: true
persistence:
  store: {{schema: {name}, prefix: {name}}}
retrieval:
  signals: [lexical, recency]
behavior:
  consolidation:
    semantic:
      method: none
      extractor: llm
      trigger: nightly
      justification: facts are free text; the nightly job extracts them with a chat model
  promotion:
    - from: team.episodic
      to: team.semantic
      criteria: extraction
      at: session_end
      justification: a session's episodes stay in the team tier, facts are drawn from them
"""


def test_an_llm_spec_needs_an_extractor_and_a_nightly_trigger_waits_for_maintain(
        pg: PostgresHandle, tmp_path: Path, admin_conn: psycopg.Connection[Any]) -> None:
    name = f"nightly_{uuid.uuid4().hex[:6]}"
    path = tmp_path / f"{name}.yaml"
    path.write_text(_LLM_NIGHTLY.format(name=name), encoding="utf-8")
    spec = load_spec(path)
    migrate([spec], dsn=pg.admin_dsn)
    team = {"team_id": f"t-{uuid.uuid4().hex[:6]}"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eng = Engine.connect(spec, pg.app_dsn)
    with eng:
        with eng.tenant(team) as mem:
            with pytest.raises(PolicyViolation, match=r"extractor=LLMExtractor\(chat_model\)"):
                mem.consolidate("sess-1")
            episode = mem.observe("team", "Bob joined Globex.", typology="episodic",
                                  scope_id="sess-1").id
            # trigger: nightly: the session's end leaves the extraction to maintain
            mem.end_scope("session", "sess-1", extractor=_Refusing())
        tables = agent_tables(spec)
        ledger = sql.SQL("SELECT count(*) FROM {} WHERE {} = %s").format(
            tables.promotions.ident, tables.tenant)
        assert admin_conn.execute(ledger, (team["team_id"],)).fetchone() == (0,)
        report = maintain([spec], pg.admin_dsn)         # no extractor handed: it waits
        assert report.agents[spec.agent]["consolidation"] == 0
        answer = {"decisions": [{"action": "ADD", "typology": "semantic",
                                 "content": "Bob works at Globex.", "evidence": [str(episode)]}]}
        report = maintain([spec], pg.admin_dsn, extractor=LLMExtractor(_model(answer)))
        assert report.agents[spec.agent]["consolidation"] == 1
        with eng.tenant(team) as mem:
            facts = [h.memory.content for h in mem.search(tiers=["team"])
                     if h.memory.typology == "semantic"]
    assert facts == ["Bob works at Globex."]


def test_the_maintain_command_takes_the_rule_based_extractor(
        pg: PostgresHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"cli_{uuid.uuid4().hex[:6]}"
    path = tmp_path / f"{name}.yaml"
    path.write_text(_LLM_NIGHTLY.format(name=name), encoding="utf-8")
    spec = load_spec(path)
    migrate([spec], dsn=pg.admin_dsn)
    team = {"team_id": "t-1"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eng = Engine.connect(spec, pg.app_dsn)
    with eng:
        with eng.tenant(team) as mem:
            mem.observe("team", "Bob works at Globex.", typology="episodic", scope_id="sess-1")
            mem.end_scope("session", "sess-1")
        monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
        # the spec asks for an LLM: without --extractor the session waits
        assert main(["maintain", str(path), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["agents"][name]["consolidation"] == 0
        assert main(["maintain", str(path), "--json", "--extractor", "rule_based"]) == 0
        assert json.loads(capsys.readouterr().out)["agents"][name]["consolidation"] == 1
        with eng.tenant(team) as mem:
            facts = [h.memory.content for h in mem.search(tiers=["team"])
                     if h.memory.typology == "semantic"]
    assert facts == ["Bob works at Globex."]


# erasure ----------------------------------------------------------------------------------------
def test_erasing_a_subject_erases_the_facts_extracted_from_its_episodes(
        engine: Engine, assistant: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        about = mem.observe("long_term", "Bob Stone works for Globex.", typology="episodic",
                            scope_id="s-e", envelope={"subject": "Bob Stone"},
                            event_time=START)
        other = mem.observe("long_term", "I work at Acme Corp.", typology="episodic",
                            scope_id="s-e", event_time=START + timedelta(minutes=1))
        mem.end_scope("session", "s-e")
        facts = {m.memory.content: m.memory for m in _active(mem, "semantic")}
        assert set(facts) == {"Bob Stone works at Globex.", "User works at Acme Corp."}
        derived = facts["Bob Stone works at Globex."]
    provenance = {row[0]: row[7] for row in
                  _state(admin_conn, assistant, user["user_id"])["memories"]}
    assert provenance[derived.id]["derived_from"] == [str(about.id)]
    with engine.tenant(user) as mem:
        erased = mem.erase("Bob Stone", approvals=["user", "admin"], reason="user asked")
        assert erased == 2  # the episode and the fact extracted from it
        left = {m.memory.content for m in _active(mem, "semantic")
                if not m.memory.content.startswith("sha256:")}
        kept = mem.get(other.id)
        gone = mem.get(derived.id)
    assert left == {"User works at Acme Corp."}
    assert kept is not None and kept.content == "I work at Acme Corp."
    assert gone is not None and gone.content.startswith("sha256:")
    assert "Globex" not in json.dumps(_state(admin_conn, assistant, user["user_id"])["memories"],
                                      default=str)


def test_an_append_with_supersession_typology_replaces_the_row_an_add_nearly_repeats(
        engine: Engine, assistant: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    """opinion: method append_with_supersession (its typology default), threshold 0.92."""
    user = _user()
    add = {"action": "ADD", "typology": "opinion", "content": "User prefers green tea."}
    with engine.tenant(user) as mem:
        _episodes(mem, "s-11", ["green tea, please"])
        mem.consolidate("s-11", extractor=LLMExtractor(_model({"decisions": [add]})))
        [old] = _active(mem, "opinion")
        _episodes(mem, "s-12", ["green tea again!"])
        [done] = mem.consolidate("s-12", extractor=LLMExtractor(_model({"decisions": [
            {**add, "content": "User prefers green tea!"}]})))
        assert (done.added, done.updated, done.merged) == (0, 1, 0)
        [new] = _active(mem, "opinion")
        _episodes(mem, "s-13", ["and coffee in the morning"])
        [other] = mem.consolidate("s-13", extractor=LLMExtractor(_model({"decisions": [
            {**add, "content": "User drinks coffee in the morning."}]})))
        assert (other.added, other.updated) == (1, 0)   # not near: appended beside
        assert len(_active(mem, "opinion")) == 2
    assert new.memory.content == "User prefers green tea!"
    rows = {r[0]: r for r in _state(admin_conn, assistant, user["user_id"])["memories"]}
    assert rows[old.memory.id][5] is not None            # superseded_at
    assert rows[new.memory.id][5] is None
    superseded = _events(admin_conn, assistant, user["user_id"], "superseded")
    assert [(m, p["by"]) for m, p in superseded] == [(old.memory.id, str(new.memory.id))]
