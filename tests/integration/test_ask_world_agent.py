"""Cross-context visibility, tool-mediated (seed 003 §15): ``ask_world_agent``.

The Operations Agent's chat asks the World Agent's memory through a tool bound to the
World Agent's engine and one world: the world's row-level security decides what is read,
its hedge_map gate what crosses, and "I don't know" is the answer without coverage.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from primitives._project import migrate
from primitives.compile import agent_tables
from primitives.engine import Engine
from primitives.errors import SpecError
from primitives.langgraph import ask_agent_tools
from primitives.spec import AgentSpec, SanitizationPolicy, load_spec, load_spec_text
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")

ROOT = Path(__file__).resolve().parents[2]


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


def _hedges(spec: AgentSpec) -> dict[str, str]:
    policy = spec.policies["world_hedge_map"]
    assert isinstance(policy, SanitizationPolicy)
    return dict(policy.hedges)


def _corroborated_fact(engine: Engine, anchor: dict[str, str], text: str) -> None:
    """Three operators' sessions observe ``text``; the session ends and it is promoted."""
    with engine.tenant(anchor) as mem:
        for n in (1, 2, 3):
            mem.observe("interaction", text, scope_id=f"i{n}", source=f"operator-{n}")
            mem.end_scope("interaction", f"i{n}", into_scope="s1")
        mem.end_scope("session", "s1")


def _ask(engine: Engine, anchor: dict[str, str], question: str) -> dict[str, Any]:
    [tool] = ask_agent_tools(engine, anchor)
    assert tool.name == "ask_world_agent"
    result: dict[str, Any] = tool.invoke({"question": question})
    return result


def test_ask_world_agent_answers_hedged_by_provenance_tier(
        world_engine: Engine, world: AgentSpec, admin_conn: psycopg.Connection[Any],
        auditor_conn: psycopg.Connection[Any]) -> None:
    anchor = _world()
    hedges = _hedges(world)
    _corroborated_fact(world_engine, anchor, "harbour tolls double during storms")
    with world_engine.tenant(anchor) as mem:
        rule = mem.observe("world", "harbour tolls are paid at the lighthouse",
                           typology="procedural")
    tables = agent_tables(world)
    admin_conn.execute(sql.SQL("UPDATE {} SET provenance = %s WHERE id = %s").format(
        tables.memories.ident), (Jsonb({"canonical_ref": "rule:tolls@v2"}), rule.id))
    answer = _ask(world_engine, anchor, "harbour tolls")
    assert answer["status"] == "answered"
    claims = {a["claim"] for a in answer["answers"]}
    assert f"{hedges['canonical']} harbour tolls are paid at the lighthouse" in claims
    assert f"{hedges['corroborated']} harbour tolls double during storms" in claims
    assert all(set(a) == {"claim", "provenance_tier"} for a in answer["answers"])
    crossings = auditor_conn.execute(sql.SQL(
        "SELECT gate, payload ->> 'via' FROM {} WHERE {} = %s").format(
        tables.audit_sanitization.ident, tables.tenant), (anchor["world_id"],)).fetchall()
    assert {g for g, _ in crossings} == {"hedge_semantic_for_operators",
                                         "hedge_procedural_for_operators"}
    assert {v for _, v in crossings} == {"tool:ask_world_agent"}


def test_ask_world_agent_reads_only_the_world_it_is_bound_to(
        world_engine: Engine, world: AgentSpec) -> None:
    mine, other = _world(), _world()
    with world_engine.tenant(other) as mem:
        mem.observe("world", "dragons nest under the northern bridge", typology="procedural")
    unknown = _hedges(world)["unknown"]
    assert _ask(world_engine, mine, "dragons northern bridge") == {
        "status": "unknown", "answer": unknown, "answers": []}
    answered = _ask(world_engine, other, "dragons northern bridge")
    assert [a["provenance_tier"] for a in answered["answers"]] == ["single_observation"]


ASKED_SPEC = """\
version: 1
agent: asked_test
anchor:
  keys: [world_id]
  required_at_write: [world_id]
typology:
  world: [episodic, procedural]
tiers:
  - {name: world, boundary: {scope_change: world_id}, persistent: true}
persistence:
  checkpointer: {enabled: false}
  store: {schema: asked_test, prefix: at}
retrieval:
  signals: [lexical]
discipline:
  sanitization:
    - {name: procedures_out, from: world.procedural, to: operator_chat, transform: none}
  visibility: {rls: session_var, cross_context: tool_mediated, tools: [ask_asked_agent]}
"""


def test_ask_carries_only_memory_a_gate_lets_out(pg: PostgresHandle) -> None:
    spec = load_spec_text(ASKED_SPEC, policies={})
    migrate([spec], dsn=pg.admin_dsn)
    anchor = _world()
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine:
        with engine.tenant(anchor) as mem:
            mem.observe("world", "the operator mentioned the smugglers cove",
                        typology="episodic")
            mem.observe("world", "smugglers cove is closed at night", typology="procedural")
            assert len(mem.search("smugglers cove")) == 2  # both are found...
        [tool] = ask_agent_tools(engine, anchor)
        assert tool.name == "ask_asked_agent"
        answer = tool.invoke({"question": "smugglers cove"})
    # ...only the row of the gate's from crosses; no hedge_map policy: the plain fallback
    assert answer == {"status": "answered", "answers": [
        {"claim": "smugglers cove is closed at night", "provenance_tier": "single_observation"}]}
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine:
        [tool] = ask_agent_tools(engine, anchor)
        assert tool.invoke({"question": "lighthouse keeper"})["answer"] == "I don't know."


def test_an_agent_not_read_through_tools_has_no_ask_tool(
        pg: PostgresHandle, spectral: AgentSpec) -> None:
    with Engine.connect(spectral, pg.app_dsn, max_connections=1) as engine, \
            pytest.raises(SpecError, match="not read through tools"):
        ask_agent_tools(engine, {"workspace_id": "ws-1"})
