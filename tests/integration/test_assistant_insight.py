"""Seed 002's observability and the assistant's remaining tools (issue 24), against real
Postgres as the application role, on agents/assistant_memory.yaml: confidence by source,
causal edges from an LLM extractor, ``memory_stats`` in the seed's shape, ``explain_fact``'s
provenance chain, the weak facts report (engine, tool and CLI) and ``forget_fact``.
"""

from __future__ import annotations

import json
import uuid
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from psycopg import sql

from primitives._project import migrate
from primitives.cli import main
from primitives.compile import agent_tables
from primitives.engine import AsyncEngine, Engine
from primitives.errors import TenancyError
from primitives.extraction import Extraction, ExtractionRequest, LLMExtractor, RuleBasedExtractor
from primitives.langgraph import WRITE_PATH_TOOL_NAMES, memory_tools, write_path_tools
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")


@pytest.fixture(scope="module")
def assistant(pg: PostgresHandle) -> AgentSpec:
    spec = load_spec(ROOT / "agents" / "assistant_memory.yaml")
    migrate([spec], dsn=pg.admin_dsn)
    return spec


def _connect(spec: AgentSpec, pg: PostgresHandle) -> Engine:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no embedder: semantic stands down, with a warning
        return Engine.connect(spec, pg.app_dsn)


@pytest.fixture
def engine(pg: PostgresHandle, assistant: AgentSpec) -> Iterator[Engine]:
    with _connect(assistant, pg) as eng:
        yield eng


def _user() -> dict[str, str]:
    return {"user_id": f"u-{uuid.uuid4().hex[:10]}"}


def _session(engine: Engine, user: dict[str, str], scope: str,
             turns: list[str]) -> list[uuid.UUID]:
    """Turns written on the hot path, then the session ended (consolidated)."""
    with engine.tenant(user) as mem:
        ids = [mem.observe("long_term", text, typology="episodic", scope_id=scope).id
               for text in turns]
        mem.end_scope("session", scope)
    return ids


def _fact(engine: Engine, user: dict[str, str], key: str) -> Any:
    [memory] = [h.memory for h in engine.search(user, tiers=["long_term"], limit=100)
                if h.memory.key == key]
    return memory


# 1. confidence by source (seed 002 §12.1) --------------------------------------------------------
def test_a_write_starts_at_its_sources_declared_confidence(
        engine: Engine, assistant: AgentSpec, pg: PostgresHandle) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        stated = mem.observe("long_term", "I am allergic to peanuts", typology="semantic")
        inferred = mem.observe("long_term", "the user probably likes Thai food",
                               typology="semantic", source="inference")
        tool = mem.observe("long_term", "the user has a cat", typology="semantic",
                           source="tool:remember_fact")
    assert (stated.confidence, tool.confidence) == (1.0, 1.0)   # graph.confidence.user
    assert inferred.confidence == pytest.approx(0.6)             # graph.confidence.inference
    assert engine.search(user, "peanuts")[0].memory.confidence == 1.0  # what was stored
    # the declared value is what a write gets, not the column's default of 1
    graph = assistant.graph
    assert graph is not None
    lower = assistant.model_copy(update={"graph": graph.model_copy(update={
        "confidence": {**graph.confidence, "user": 0.9}})})
    with _connect(lower, pg) as eng, eng.tenant(user) as mem:
        said = mem.observe("long_term", "I live in Lisbon", typology="semantic")
        corrected = mem.supersede(said.id, "I live in Porto")
    assert said.confidence == pytest.approx(0.9) and corrected.confidence == pytest.approx(0.9)


def test_an_llm_extractors_facts_are_capped_at_extraction_and_its_causes_become_edges(
        engine: Engine, assistant: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        rain, cancel = (mem.observe("long_term", text, typology="episodic", scope_id="s-l").id
                        for text in ("It rained all morning.", "We called off the picnic."))
        answer = {"decisions": [{"action": "ADD", "typology": "semantic", "confidence": 0.95,
                                 "content": "The picnic was called off because of rain.",
                                 "evidence": [str(rain), str(cancel)]}],
                  "causes": [{"cause_id": str(rain), "effect_id": str(cancel)}]}
        model = GenericFakeChatModel(messages=iter([AIMessage(json.dumps(answer))]))
        [done] = mem.consolidate("s-l", extractor=LLMExtractor(model))
    assert done.extractor == "llm" and done.added == 1
    [fact] = [h.memory for h in engine.search(user, "picnic", tiers=["long_term"])
              if h.memory.typology == "semantic"]
    assert fact.confidence == pytest.approx(0.8)  # 0.95 stated, extraction's 0.8 at most
    tables = agent_tables(assistant)
    assert tables.edges is not None
    causal = admin_conn.execute(sql.SQL(
        "SELECT source_id, target_id, confidence FROM {} WHERE {} = %s "
        "AND relation_type = 'causal'").format(tables.edges.ident, tables.tenant),
        (user["user_id"],)).fetchall()
    assert [(s, t, round(float(c), 3)) for s, t, c in causal] == [(rain, cancel, 0.6)]
    why = engine.search(user, "Why was the picnic called off?", explain=True)
    assert why.intent == "why" and rain in {h.memory.id for h in why.hits
                                            if "graph" in h.ranks}


# 4. memory_stats in the seed's shape ------------------------------------------------------------
def test_memory_stats_reports_edges_entities_orphans_and_sessions(
        engine: Engine, assistant: AgentSpec) -> None:
    user = _user()
    before = datetime.now(UTC)
    _session(engine, user, "s-1", ["I work at Acme Corp.", "I prefer window seats."])
    with engine.tenant(user) as mem:
        mem.observe("long_term", "a note on its own", typology="semantic")        # an orphan
        mem.observe("long_term", "still talking", typology="episodic", scope_id="s-2")
        stats = mem.stats()
    assert stats["edges"] == {"temporal": 1, "causal": 0, "entity": 0, "derived_from": 2,
                              "supersedes": 0}
    assert stats["entities"] == 1                                  # Acme Corp
    # active: 3 episodes, 2 extracted facts, the note; 3 edges counted at both ends
    assert stats["nodes"]["episodic"] == 3 and stats["active"] == 6
    assert stats["avg_edges_per_node"] == pytest.approx(1.0)
    # the note and the open session's lone turn touch no edge and mention nothing
    assert stats["orphan_nodes"] == 2
    assert stats["unconsolidated_sessions"] == 1                   # s-2 is still open
    assert stats["last_consolidation"] is not None
    assert datetime.fromisoformat(stats["last_consolidation"]) >= before
    assert stats["last_decay_archive"] is None
    assert stats["storage_bytes"] > 0 and stats["storage_size_mb"] >= 0
    other = engine.tenant(_user())
    with other as mem:
        empty = mem.stats()
    assert empty["edges"] == dict.fromkeys(assistant.graph.edges, 0)  # type: ignore[union-attr]
    assert (empty["entities"], empty["orphan_nodes"], empty["unconsolidated_sessions"]) == (
        0, 0, 0)


def test_memory_stats_reports_the_last_complete_decay_run_and_nothing_else_of_maintain(
        pg: PostgresHandle, assistant: AgentSpec, app_conn: psycopg.Connection[Any]) -> None:
    """``last_decay_run`` is when maintain last completed a decay pass over the agent's
    tenants (primitives.maintenance_runs), read through primitives.last_maintenance_run: the
    same for every tenant, and the runtime role cannot read the table itself."""
    from primitives.lifecycle import maintain

    spec = assistant.model_copy(update={"agent": f"stats_{uuid.uuid4().hex[:6]}"})
    migrate([spec], dsn=pg.admin_dsn)
    users = [_user(), _user()]
    with _connect(spec, pg) as eng:
        for user in users:
            with eng.tenant(user) as mem:
                mem.observe("long_term", "I like tea", typology="opinion")
        with eng.tenant(users[0]) as mem:
            assert mem.stats()["last_decay_run"] is None        # maintain never ran
        nightly = datetime.now(UTC).replace(hour=3, minute=30, second=0, microsecond=0)
        maintain([spec], pg.admin_dsn, now=nightly)             # the nightly decay is due
        later = nightly + timedelta(hours=2)                    # not due: decay passes skipped
        report = maintain([spec], pg.admin_dsn, now=later)
        assert [s["pass"] for s in report.skipped[spec.agent]] == ["decay_archive"]
        seen = []
        for user in users:
            with eng.tenant(user) as mem:
                seen.append(mem.stats()["last_decay_run"])
        forced = later + timedelta(minutes=5)
        maintain([spec], pg.admin_dsn, now=forced, force=True)
        with eng.tenant(users[1]) as mem:
            assert mem.stats()["last_decay_run"] == forced.isoformat()
    assert seen == [nightly.isoformat()] * 2                    # the run, not a tenant's data
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        app_conn.execute("SELECT * FROM primitives.maintenance_runs")


# 2. explain_fact: the provenance chain ------------------------------------------------------------
def test_explain_fact_follows_supersedes_and_derived_from_to_the_episodes(
        engine: Engine) -> None:
    user = _user()
    [acme_turn] = _session(engine, user, "s-1", ["I work at Acme Corp."])
    acme = _fact(engine, user, "user:works_at")
    [hooli_turn] = _session(engine, user, "s-2", ["I work at Hooli now."])
    hooli = _fact(engine, user, "user:works_at")
    with engine.tenant(user) as mem:
        chain = mem.explain_fact(hooli.id)
        old = mem.explain_fact(acme.id)
        shallow = mem.explain_fact(hooli.id, depth=1)
    assert chain.memory.id == hooli.id
    assert [(d, r, m.id) for d, r, m in chain.chain] == [
        (1, "supersedes", acme.id), (1, "derived_from", hooli_turn),
        (2, "derived_from", acme_turn)]
    assert {m.id for m in chain.episodes} == {acme_turn, hooli_turn}
    assert "extracted" in {j["kind"] for j in chain.journal}
    assert [m.id for m in old.superseded_by] == [hooli.id]
    assert [m.id for m in old.episodes] == [acme_turn]
    assert acme_turn not in {m.id for _, _, m in shallow.chain}
    with engine.tenant(_user()) as mem, pytest.raises(TenancyError, match="no memory"):
        mem.explain_fact(hooli.id)                              # another tenant's fact


# 3. the weak facts report -----------------------------------------------------------------------
def test_weak_facts_names_low_single_source_and_fading_facts(engine: Engine) -> None:
    user = _user()
    _session(engine, user, "s-1", ["I work at Acme Corp."])
    extracted = _fact(engine, user, "user:works_at")                  # 0.8, one episode
    with engine.tenant(user) as mem:
        stated = mem.observe("long_term", "I am allergic to peanuts", typology="semantic")
        guess = mem.observe("long_term", "the user may like jazz", typology="semantic",
                            source="inference")                            # 0.6
        sure = mem.observe("long_term", "my sister is Ana", typology="semantic")
        mem.confirm(sure.id)
        now = mem.weak_facts(below=0.7)
        # c * exp(-0.1 * d^0.8) falls below the 0.05 threshold after about 55 days (0.6),
        # 63 (0.8) and 70 (1.0); the report looks 7 days ahead
        day45 = mem.weak_facts(below=0.01, now=datetime.now(UTC) + timedelta(days=45))
        day65 = mem.weak_facts(below=0.01, now=datetime.now(UTC) + timedelta(days=65))
    reasons = {w.id: w.reasons for w in now}
    assert reasons == {guess.id: ("low_confidence",), extracted.id: ("single_source",)}
    assert [w.id for w in now] == [guess.id, extracted.id]              # weakest first
    assert stated.id not in reasons and sure.id not in reasons
    assert "fading" not in {r for w in day45 for r in w.reasons}
    fading = {w.id: w for w in day65 if "fading" in w.reasons}
    assert set(fading) == {extracted.id, guess.id, stated.id}          # the confirmed stays
    assert fading[stated.id].confidence_at_horizon < 0.05 <= fading[stated.id].confidence


def test_weak_facts_cli_prints_one_json_line_per_fact(
        engine: Engine, pg: PostgresHandle, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        guess = mem.observe("long_term", "the user may like jazz", typology="semantic",
                            source="inference")
        mem.observe("long_term", "I am allergic to peanuts", typology="semantic")
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    capsys.readouterr()
    assert main(["weak-facts", str(ROOT / "agents" / "assistant_memory.yaml"),
                 "--tenant", user["user_id"], "--below", "0.7"]) == 0
    out = capsys.readouterr()
    lines = [json.loads(line) for line in out.out.splitlines()]
    assert [(f["id"], f["reasons"]) for f in lines] == [(str(guess.id), ["low_confidence"])]
    assert "1 weak fact" in out.err


# 5. the graph tools, refusals as the model's error text -------------------------------------------
def test_graph_tools_explain_report_and_forget_with_refusals_as_text(engine: Engine) -> None:
    user = _user()
    [turn] = _session(engine, user, "s-1", ["I work at Acme Corp."])
    fact = _fact(engine, user, "user:works_at")
    tools = {t.name: t for t in memory_tools(engine, user)}
    assert {"explain_fact", "weak_facts", "forget_fact"} <= set(tools)
    explained = tools["explain_fact"].invoke({"fact_id": str(fact.id)})
    assert explained["id"] == str(fact.id)
    assert [e["id"] for e in explained["episodes"]] == [str(turn)]
    assert explained["derived_from"][0]["relation"] == "derived_from"
    assert explained["episodes"][0]["event_time_iso"]
    weak = tools["weak_facts"].invoke({"below": 0.5})["weak_facts"]
    assert [(w["id"], w["reasons"]) for w in weak] == [(str(fact.id), ["single_source"])]
    stats = tools["memory_stats"].invoke({})
    assert stats["edges"]["derived_from"] == 1 and stats["entities"] == 1
    json.dumps(stats)                                          # what the model sees is JSON
    gone = tools["forget_fact"].invoke({"fact_id": str(fact.id), "reason": "I quit"})
    # the spec archives semantic rows on explicit_invalidation: kept, no longer recalled
    assert gone["status"] == "forgotten" and gone["state"] == "archived"
    assert fact.id not in {h.memory.id for h in engine.search(user, "Acme", limit=50)}
    # refusals come back as text: an episode is append-only, an id must be a memory's
    refused = tools["forget_fact"].invoke({"fact_id": str(turn)})
    assert isinstance(refused, str) and "episodic" in refused
    assert turn in {h.memory.id for h in engine.search(user, "Acme", limit=50)}
    unknown = tools["explain_fact"].invoke({"fact_id": str(uuid.uuid4())})
    assert isinstance(unknown, str) and "no memory" in unknown
    bad = tools["explain_fact"].invoke({"fact_id": "yesterday"})
    assert isinstance(bad, str) and "not a memory id" in bad


# 6. "when" questions: a time window bounds the timeline ------------------------------------------
def test_a_when_question_keeps_the_timeline_to_the_window_it_names(engine: Engine) -> None:
    user = _user()
    days = [datetime(2026, 1, 10, tzinfo=UTC), datetime(2026, 1, 20, tzinfo=UTC),
            datetime(2026, 2, 5, tzinfo=UTC), datetime(2026, 2, 15, tzinfo=UTC)]
    turns = ["we planned the garden", "we bought seeds", "we planted tomatoes",
             "we watered the tomatoes"]
    with engine.tenant(user) as mem:
        planned, seeds, planted, watered = (
            mem.observe("long_term", text, typology="episodic", scope_id="s-w",
                        event_time=when).id for text, when in zip(turns, days, strict=True))

    def walked(found: Any) -> set[uuid.UUID]:
        return {h.memory.id for h in found.hits if "graph" in h.ranks}

    open_ended = engine.search(user, "What did we do after we planned the garden?",
                               explain=True)
    assert open_ended.intent == "when" and open_ended.direction == "forward"
    assert open_ended.window is None and seeds in walked(open_ended)
    # "in February 2026": the walk still passes January, but ranks only February's turns
    february = engine.search(user, "What did we do after we planned the garden in "
                             "February 2026?", explain=True)
    assert february.window == (days[2].replace(day=1), datetime(2026, 3, 1, tzinfo=UTC))
    assert planted in walked(february) and not walked(february) & {planned, seeds}
    # a caller's window wins over the words, and applies to any question
    late_january = (datetime(2026, 1, 15, tzinfo=UTC), datetime(2026, 1, 25, tzinfo=UTC))
    chosen = engine.search(user, "What did we do after we planned the garden in February "
                           "2026?", window=late_january, explain=True)
    assert chosen.window == late_january and walked(chosen) == {seeds}
    # the tool's after / before bound the walk the same way
    tools = {t.name: t for t in memory_tools(engine, user)}
    found = tools["search_memory"].invoke({
        "query": "What did we do after we planned the garden?", "type": "episodic",
        "after": "2026-02-01", "before": "2026-03-01"})
    assert {r["id"] for r in found} <= {str(planted), str(watered)}
    assert str(planted) in {r["id"] for r in found}
    backwards = tools["search_memory"].invoke({"query": "x", "after": "2026-03-01",
                                               "before": "2026-02-01"})
    assert isinstance(backwards, str) and "must be before" in backwards


@pytest.mark.parametrize(("question", "days_back"), [
    ("Wann haben wir gestern die Tomaten gepflanzt?", 1),
    ("¿Cuándo plantamos los tomates hace 3 días?", 3),
    ("Quand avons-nous planté les tomates avant-hier ?", 2),
])
def test_a_when_question_in_another_language_names_its_window(
        engine: Engine, question: str, days_back: int) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        mem.observe("long_term", "we planted the tomatoes", typology="episodic", scope_id="s-x")
    now = datetime.now(UTC)
    day = datetime.combine(now.date(), datetime.min.time(), tzinfo=UTC) - timedelta(
        days=days_back)
    found = engine.search(user, question, as_of=now, explain=True)
    assert found.intent == "when"
    assert found.window == (day, day + timedelta(days=1))


# 7. the manifest's keys: episodes per consolidation chunk, conflict minimum confidence ------------
class _Counting:
    """The rule-based extractor, recording what each call was given."""

    name = "rule_based"

    def __init__(self) -> None:
        self.inner = RuleBasedExtractor()
        self.calls: list[tuple[int, set[str]]] = []

    def extract(self, request: ExtractionRequest) -> Extraction:
        self.calls.append((len(request.episodes), {m.content for m in request.existing}))
        return self.inner.extract(request)


def test_a_session_is_consolidated_in_chunks_of_episodes_per_chunk(
        engine: Engine, assistant: AgentSpec, pg: PostgresHandle) -> None:
    episodic = assistant.behavior.consolidation["episodic"]
    assert episodic.episodes_per_chunk == 30                   # the spec's declaration
    user = _user()
    turns = ["I work at Acme Corp.", "It is sunny.", "I prefer window seats.",
             "We talked about lunch.", "I live in Lisbon."]
    with engine.tenant(user) as mem:
        for text in turns:
            mem.observe("long_term", text, typology="episodic", scope_id="s-c")
        whole = _Counting()
        [one] = mem.consolidate("s-c", extractor=whole)
    assert one.calls == 1 and [n for n, _ in whole.calls] == [5]
    chunked_spec = assistant.model_copy(update={"behavior": assistant.behavior.model_copy(
        update={"consolidation": {**assistant.behavior.consolidation,
                                  "episodic": episodic.model_copy(
                                      update={"episodes_per_chunk": 2})}})})
    other = _user()
    with _connect(chunked_spec, pg) as eng, eng.tenant(other) as mem:
        for text in turns:
            mem.observe("long_term", text, typology="episodic", scope_id="s-c")
        chunked = _Counting()
        [three] = mem.consolidate("s-c", extractor=chunked)
    assert three.calls == 3 and [n for n, _ in chunked.calls] == [2, 2, 1]
    # each call sees what the earlier chunks wrote
    assert "User works at Acme Corp." in chunked.calls[1][1]
    assert "User works at Acme Corp." not in chunked.calls[0][1]
    assert (three.added, three.episodes) == (one.added, 5)


def test_an_extraction_weaker_than_the_conflict_minimum_leaves_the_fact(
        engine: Engine, assistant: AgentSpec) -> None:
    assert assistant.behavior.conflict["semantic"].min_confidence == 0.8
    user = _user()
    with engine.tenant(user) as mem:
        fact = mem.observe("long_term", "User works at Acme Corp.", typology="semantic",
                           key="user:works_at")
        turns = [mem.observe("long_term", text, typology="episodic", scope_id=scope).id
                 for text, scope in (("maybe I moved to Hooli", "s-1"),
                                     ("I work at Hooli now", "s-2"))]

        def update(confidence: float, evidence: uuid.UUID) -> LLMExtractor:
            answer = {"decisions": [{"action": "UPDATE", "target_id": str(fact.id),
                                     "content": "User works at Hooli.",
                                     "confidence": confidence, "evidence": [str(evidence)]}]}
            return LLMExtractor(GenericFakeChatModel(messages=iter([AIMessage(
                json.dumps(answer))])))

        [weak] = mem.consolidate("s-1", extractor=update(0.7, turns[0]))
        kept = mem.get(fact.id)
        [strong] = mem.consolidate("s-2", extractor=update(0.9, turns[1]))
        replaced = mem.get(fact.id)
    assert (weak.skipped, weak.updated) == (1, 0)
    assert kept is not None and kept.active and kept.confidence == 1.0
    assert (strong.skipped, strong.updated) == (0, 1)
    assert replaced is not None and replaced.superseded_at is not None
    assert _fact(engine, user, "user:works_at").content == "User works at Hooli."


# the async engine runs the same operations ------------------------------------------------------
async def test_the_async_engine_explains_reports_and_counts(
        engine: Engine, assistant: AgentSpec, pg: PostgresHandle) -> None:
    user = _user()
    [turn] = _session(engine, user, "s-1", ["I work at Acme Corp."])
    fact = _fact(engine, user, "user:works_at")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        aengine = await AsyncEngine.connect(assistant, pg.app_dsn)
    async with aengine, aengine.tenant(user) as mem:
        chain = await mem.explain_fact(fact.id)
        weak = await mem.weak_facts()
        stats = await mem.stats()
    assert [m.id for m in chain.episodes] == [turn]
    assert [(w.id, w.reasons) for w in weak] == [(fact.id, ("single_source",))]
    assert stats["edges"]["derived_from"] == 1 and stats["unconsolidated_sessions"] == 0


# the write-path agent's tools (seed 002 §10.3) ---------------------------------------------------
def test_write_path_tools_page_a_session_and_save_causal_edges_all_or_nothing(
        engine: Engine, assistant: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        turns = [mem.observe("long_term", text, typology="episodic", scope_id="s-w").id
                 for text in ("The build broke.", "Nobody could deploy.", "We rolled back.")]
        note = mem.observe("long_term", "deploys need a green build", typology="semantic").id
    tools = {t.name: t for t in write_path_tools(engine, user)}
    assert tuple(tools) == WRITE_PATH_TOOL_NAMES
    first = tools["get_session_episodes"].invoke({"session_id": "s-w", "limit": 2})
    rest = tools["get_session_episodes"].invoke({"session_id": "s-w", "limit": 2,
                                                 "offset": 2})
    assert [e["id"] for e in first["episodes"] + rest["episodes"]] == [str(t) for t in turns]
    assert first["consolidated"] is False

    def causal() -> list[tuple[uuid.UUID, uuid.UUID, float]]:
        tables = agent_tables(assistant)
        assert tables.edges is not None
        return [(s, t, round(float(c), 3)) for s, t, c in admin_conn.execute(sql.SQL(
            "SELECT source_id, target_id, confidence FROM {} WHERE {} = %s "
            "AND relation_type = 'causal' ORDER BY created_at").format(
            tables.edges.ident, tables.tenant), (user["user_id"],)).fetchall()]

    # a pair naming a fact is refused as text, and the valid pair before it is not kept
    refused = tools["save_causal_edges"].invoke({"pairs": [
        {"cause_id": str(turns[0]), "effect_id": str(turns[1])},
        {"cause_id": str(note), "effect_id": str(turns[2])}]})
    assert isinstance(refused, str) and "pairs[1]" in refused and "not an episode" in refused
    assert causal() == []
    saved = tools["save_causal_edges"].invoke({"pairs": [
        {"cause_id": str(turns[0]), "effect_id": str(turns[1])}]})
    assert saved["status"] == "saved" and saved["edges"][0]["confidence"] == pytest.approx(0.6)
    assert causal() == [(turns[0], turns[1], 0.6)]
    with engine.tenant(user) as mem:
        mem.end_scope("session", "s-w")
    assert tools["get_session_episodes"].invoke({"session_id": "s-w"})["consolidated"] is True


def test_write_path_tools_save_nodes_detect_conflicts_and_mark_the_session(
        engine: Engine, assistant: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    """Seed 002 §10.1 through the write-path agent's tools: episodes read, a conflict found,
    the extracted memories saved with derived_from edges (one correcting the old fact), the
    session marked consolidated once; every refusal is the tool's text, nothing half-kept."""
    from langchain_core.messages import ToolMessage
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    user = _user()
    with engine.tenant(user) as mem:
        moved, _sister, seats = (
            mem.observe("long_term", text, typology="episodic", scope_id="s-n").id
            for text in ("I moved to Porto last month.", "My sister Ana still lives in Lisbon.",
                         "I always take a window seat."))
        lisbon = mem.observe("long_term", "The user lives in Lisbon", typology="semantic",
                             key="home").id
    tools = {t.name: t for t in write_path_tools(engine, user)}
    assert tuple(tools) == WRITE_PATH_TOOL_NAMES
    tables = agent_tables(assistant)
    assert tables.edges is not None

    def journal() -> list[tuple[str, str, dict[str, Any]]]:
        return admin_conn.execute(sql.SQL(
            "SELECT kind, actor, payload FROM {} WHERE {} = %s ORDER BY seq").format(
            tables.events.ident, tables.tenant), (user["user_id"],)).fetchall()

    before = len(journal())
    conflicts = tools["detect_conflicts"].invoke({"content": "The user lives in Porto",
                                                  "type": "semantic"})
    assert str(lisbon) in [c["id"] for c in conflicts["candidates"]]
    assert all(c["type"] == "semantic" for c in conflicts["candidates"])
    porto = {"type": "semantic", "content": "The user lives in Porto", "confidence": 0.9,
             "evidence": [str(moved)], "replaces": str(lisbon),
             "entities": [{"name": "Porto", "type": "place"}]}
    seat = {"type": "opinion", "content": "The user prefers window seats",
            "evidence": [str(seats)]}
    # refusals reach the model as the tool's text, and the batch is all or nothing
    not_episode = tools["save_nodes_batch"].invoke({"session_id": "s-n", "nodes": [
        seat, {**porto, "evidence": [str(lisbon)]}]})
    assert isinstance(not_episode, str) and "decision 1" in not_episode
    assert "not an episode of scope 's-n'" in not_episode
    bad_id = tools["save_nodes_batch"].invoke({"session_id": "s-n", "nodes": [
        {**seat, "evidence": ["the third turn"]}]})
    assert isinstance(bad_id, str) and "nodes[0].evidence" in bad_id
    other = tools["save_nodes_batch"].invoke({"session_id": "s-other", "nodes": [seat]})
    assert isinstance(other, str) and "session 's-other' has no active" in other
    assert len(journal()) == before                    # nothing of a refused call was kept
    # in a LangGraph run the refusal is an error ToolMessage, the run goes on
    run = StateGraph(MessagesState)
    run.add_node("tools", ToolNode(list(tools.values())))
    run.add_edge(START, "tools")
    call = {"name": "save_nodes_batch", "id": "call-1", "type": "tool_call",
            "args": {"session_id": "s-n", "nodes": [{**seat, "evidence": [str(lisbon)]}]}}
    out = run.compile().invoke({"messages": [AIMessage("", tool_calls=[call])]})
    reply = out["messages"][-1]
    assert isinstance(reply, ToolMessage) and reply.status == "error"
    assert "not an episode of scope 's-n'" in str(reply.content)

    saved = tools["save_nodes_batch"].invoke({"session_id": "s-n", "nodes": [porto, seat]})
    assert saved["status"] == "saved" and (saved["updated"], saved["added"]) == (1, 1)
    new_home, opinion = (uuid.UUID(i) for i in saved["memory_ids"])
    with engine.tenant(user) as mem:
        old = mem.get(lisbon)
        chain = mem.explain_fact(new_home)
        assert mem.get(opinion) is not None
    assert old is not None and not old.active and old.confidence == pytest.approx(0.3)
    assert {(r, m.id) for _, r, m in chain.chain} >= {("derived_from", moved),
                                                      ("supersedes", lisbon)}
    assert chain.memory.confidence == pytest.approx(0.8)   # graph.confidence.extraction
    # saving does not consolidate: the agent marks the session once everything is saved
    page = tools["get_session_episodes"].invoke({"session_id": "s-n"})
    assert page["consolidated"] is False
    assert tools["mark_session_consolidated"].invoke({"session_id": "s-n"}) == {
        "status": "consolidated", "session_id": "s-n", "episodes": 3}
    assert tools["get_session_episodes"].invoke({"session_id": "s-n"})["consolidated"] is True
    assert tools["mark_session_consolidated"].invoke({"session_id": "s-n"}) == {
        "status": "already_consolidated", "session_id": "s-n", "episodes": 0}
    missing = tools["mark_session_consolidated"].invoke({"session_id": "s-none"})
    assert isinstance(missing, str) and "session 's-none' has no active" in missing
    kinds = [(k, a, p.get("extractor")) for k, a, p in journal()[before:]
             if k in ("extracted", "nodes_saved", "consolidated")]
    assert kinds == [("extracted", "memory_agent", "write_path_agent")] * 2 + [
        ("nodes_saved", "memory_agent", "write_path_agent"),
        ("consolidated", "memory_agent", "write_path_agent")]
    with engine.tenant(user) as mem:
        stats = mem.stats()
        assert mem.consolidate("s-n")[0].episodes == 0   # the ledger took them: no rerun
    assert stats["unconsolidated_sessions"] == 0 and stats["last_consolidation"] is not None


async def test_the_async_write_path_tools_save_and_mark(pg: PostgresHandle,
                                                         assistant: AgentSpec) -> None:
    user = _user()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eng = await AsyncEngine.connect(assistant, pg.app_dsn)
    async with eng:
        async with eng.tenant(user) as mem:
            turn = (await mem.observe("long_term", "I started learning Spanish.",
                                      typology="episodic", scope_id="s-a")).id
        tools = {t.name: t for t in write_path_tools(eng, user)}
        saved = await tools["save_nodes_batch"].ainvoke({"session_id": "s-a", "nodes": [
            {"type": "semantic", "content": "The user is learning Spanish",
             "evidence": [str(turn)]}]})
        assert saved["added"] == 1 and saved["edges"] == 1
        marked = await tools["mark_session_consolidated"].ainvoke({"session_id": "s-a"})
        assert marked["episodes"] == 1
        refused = await tools["mark_session_consolidated"].ainvoke({"session_id": "nope"})
        assert isinstance(refused, str) and "has no active" in refused
