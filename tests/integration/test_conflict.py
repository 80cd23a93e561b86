"""Conflict resolution by typology (seed 003 primitive 10; seed 002 §12.3), as the app role.

episodic: noop (a keyed rewrite is a plain new version); semantic: update_with_validity (the
old fact's validity ends, its confidence drops to 0.3 and its decay rate rises to 0.5);
procedural: update_with_supersession (latest wins, the prior is archived). Detection by key,
or (``detect: similarity``) by a close text of the same tier and typology.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives._project import migrate
from primitives.compile import agent_tables
from primitives.engine import Engine
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle
from tests.integration._awaiting import engine_sessions

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")

_SPEC = """\
version: 1
agent: {agent}
anchor:
  keys: [user_id]
  required_at_write: [user_id]
typology:
  profile: [episodic, semantic, procedural]
tiers:
  - name: profile
    boundary: {{scope_change: user_id}}
    persistent: true
persistence:
  store: {{schema: conflicts, prefix: {agent}}}
retrieval:
  signals: [lexical, recency]
behavior:
  write_policy:
    semantic:
      mode: explicit
      justification: the test writes facts directly
{conflict}
"""

_SIMILARITY = """\
  conflict:
    semantic:
      strategy: update_with_validity
      detect: similarity
      similarity: 0.5
      contradicted_confidence: 0.2
      contradicted_decay_rate: 1.0
      justification: facts about one subject with another value contradict it
"""


def _load(pg: PostgresHandle, tmp_path: Path, agent: str, conflict: str = "") -> AgentSpec:
    path = tmp_path / f"{agent}.yaml"
    path.write_text(_SPEC.format(agent=agent, conflict=conflict), encoding="utf-8")
    spec = load_spec(path)
    migrate([spec], dsn=pg.admin_dsn)
    return spec


@pytest.fixture(scope="module")
def keyed(pg: PostgresHandle, tmp_path_factory: pytest.TempPathFactory) -> AgentSpec:
    return _load(pg, tmp_path_factory.mktemp("keyed"), "keyed")


@pytest.fixture(scope="module")
def similar(pg: PostgresHandle, tmp_path_factory: pytest.TempPathFactory) -> AgentSpec:
    return _load(pg, tmp_path_factory.mktemp("similar"), "similar", _SIMILARITY)


@pytest.fixture(params=["sync", "async"])
async def session(request: pytest.FixtureRequest, pg: PostgresHandle,
                  keyed: AgentSpec) -> AsyncIterator[Callable[..., Any]]:
    """``session(anchor)``: a tenant transaction of the sync or the async engine, whose
    calls are awaited alike."""
    async with engine_sessions(request.param, keyed, pg.app_dsn,
                               max_connections=2) as session:
        yield session


def _state(admin: psycopg.Connection[Any], spec: AgentSpec, memory_id: Any) -> tuple[Any, ...]:
    """(superseded_by, invalidated, archived, confidence, decay_rate) of a row."""
    tables = agent_tables(spec)
    row = admin.execute(sql.SQL(
        "SELECT superseded_by, invalidated_at IS NOT NULL, archived_at IS NOT NULL, "
        "round(confidence::numeric, 2), round(decay_rate::numeric, 2) FROM {} WHERE id = %s"
    ).format(tables.memories.ident), (memory_id,)).fetchone()
    assert row is not None
    return tuple(float(v) if hasattr(v, "as_integer_ratio") and not isinstance(v, bool)
                 else v for v in row)


def _kinds(admin: psycopg.Connection[Any], spec: AgentSpec, memory_id: Any) -> list[str]:
    tables = agent_tables(spec)
    return [k for (k,) in admin.execute(sql.SQL(
        "SELECT kind FROM {} WHERE memory_id = %s ORDER BY seq").format(tables.events.ident),
        (memory_id,)).fetchall()]


def _user() -> dict[str, str]:
    return {"user_id": f"u-{uuid.uuid4().hex[:10]}"}


async def test_a_keyed_fact_update_ends_the_old_facts_validity(
        session: Any, keyed: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    async with session(_user()) as mem:
        old = await mem.observe("profile", "lives in Paris", typology="semantic", key="city")
        new = await mem.observe("profile", "lives in Berlin", typology="semantic", key="city")
    assert _state(admin_conn, keyed, old.id) == (new.id, True, False, 0.3, 0.5)
    assert _state(admin_conn, keyed, new.id)[1:4] == (False, False, 1.0)
    assert _kinds(admin_conn, keyed, old.id) == ["observed", "superseded", "conflict_resolved"]


async def test_a_procedural_update_archives_the_prior_preference(
        session: Any, keyed: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    async with session(_user()) as mem:
        old = await mem.observe("profile", "prefers long reports", typology="procedural",
                                key="reports")
        new = await mem.observe("profile", "prefers short reports", typology="procedural",
                                key="reports")
    assert _state(admin_conn, keyed, old.id) == (new.id, False, True, 1.0, None)


async def test_an_episodic_rewrite_is_a_plain_new_version(
        session: Any, keyed: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    async with session(_user()) as mem:
        old = await mem.observe("profile", "opened the dashboard", typology="episodic", key="e")
        new = await mem.observe("profile", "opened the settings", typology="episodic", key="e")
    assert _state(admin_conn, keyed, old.id) == (new.id, False, False, 1.0, None)
    assert "conflict_resolved" not in _kinds(admin_conn, keyed, old.id)


async def test_supersede_follows_the_typologys_strategy(
        session: Any, keyed: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    async with session(_user()) as mem:
        old = await mem.observe("profile", "works at Acme", typology="semantic")
        new = await mem.supersede(old.id, "works at Globex", reason="user correction")
    assert _state(admin_conn, keyed, old.id) == (new.id, True, False, 0.3, 0.5)


def test_similarity_detection_finds_the_fact_a_new_one_contradicts(
        pg: PostgresHandle, similar: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    with Engine.connect(similar, pg.app_dsn, max_connections=2) as engine, \
            engine.tenant(_user()) as mem:
        paris = mem.observe("profile", "the user lives in Paris", typology="semantic")
        tea = mem.observe("profile", "enjoys green tea", typology="semantic")
        berlin = mem.observe("profile", "the user lives in Berlin", typology="semantic")
        hits = mem.search("lives")
    # the spec's contradicted_confidence and contradicted_decay_rate, not the 0.3 / 0.5 default
    assert _state(admin_conn, similar, paris.id) == (berlin.id, True, False, 0.2, 1.0)
    assert [h.memory.id for h in hits] == [berlin.id]
    assert _state(admin_conn, similar, tea.id) == (None, False, False, 1.0, None)
    assert _kinds(admin_conn, similar, paris.id)[-1] == "conflict_resolved"


def test_the_one_statement_observe_path_still_detects_by_similarity(
        pg: PostgresHandle, similar: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    user = _user()
    with Engine.connect(similar, pg.app_dsn, max_connections=2) as engine:
        paris = engine.observe(user, "profile", "the user lives in Paris", typology="semantic")
        berlin = engine.observe(user, "profile", "the user lives in Berlin", typology="semantic")
    assert _state(admin_conn, similar, paris.id) == (berlin.id, True, False, 0.2, 1.0)


def test_without_similarity_detection_a_fresh_key_contradicts_nothing(
        pg: PostgresHandle, keyed: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    with Engine.connect(keyed, pg.app_dsn, max_connections=2) as engine, \
            engine.tenant(_user()) as mem:
        paris = mem.observe("profile", "the user lives in Paris", typology="semantic")
        mem.observe("profile", "the user lives in Berlin", typology="semantic")
    assert _state(admin_conn, keyed, paris.id) == (None, False, False, 1.0, None)


def test_correct_fact_in_a_graph_spec_links_new_to_old_by_a_supersedes_edge(
        pg: PostgresHandle, admin_conn: psycopg.Connection[Any]) -> None:
    spec = load_spec(ROOT / "agents" / "assistant_memory.yaml")
    migrate([spec], dsn=pg.admin_dsn)
    tables = agent_tables(spec)
    from primitives.langgraph import memory_tools
    anchor = _user()
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine:
        with engine.tenant(anchor) as mem:
            old = mem.observe("long_term", "the user's manager is Dana", typology="semantic")
        tools = {t.name: t for t in memory_tools(engine, anchor)}
        result = tools["correct_fact"].invoke(
            {"fact_id": str(old.id), "corrected_fact": "the user's manager is Priya"})
    new_id = result["id"] if isinstance(result, dict) else None
    assert new_id is not None
    # the assistant's semantic strategy (seed 002 §12.3): validity ends, confidence 0.3,
    # decay rate 0.5, the row stays unarchived
    assert _state(admin_conn, spec, old.id)[1:] == (True, False, 0.3, 0.5)
    edges = admin_conn.execute(sql.SQL(
        "SELECT source_id::text, target_id::text FROM {} WHERE relation_type = 'supersedes' "
        "AND target_id = %s").format(tables.edges.ident), (old.id,)).fetchall()
    assert edges == [(str(new_id), str(old.id))]


def test_invalidating_a_procedural_memory_archives_it_an_episode_stays_unarchived(
        pg: PostgresHandle, keyed: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    # procedural's lifecycle archives on explicit invalidation; episodic's does not
    with Engine.connect(keyed, pg.app_dsn, max_connections=2) as engine, \
            engine.tenant(_user()) as mem:
        rule = mem.observe("profile", "always cc the team lead", typology="procedural")
        note = mem.observe("profile", "cc'd the team lead once", typology="episodic")
        mem.invalidate(rule.id, reason="the user revoked it")
        mem.invalidate(note.id, reason="wrong")
    assert _state(admin_conn, keyed, rule.id)[1:3] == (True, True)
    assert _state(admin_conn, keyed, note.id)[1:3] == (True, False)
    assert _kinds(admin_conn, keyed, rule.id) == ["observed", "invalidated", "archived"]


def test_an_append_only_typology_never_replaces_an_entry(
        pg: PostgresHandle, admin_conn: psycopg.Connection[Any]) -> None:
    # MACE's long-term episodic memory is append-only (seed 001 §1.C)
    from primitives.errors import GovernanceError
    spec = load_spec(ROOT / "agents" / "mace.yaml")
    migrate([spec], dsn=pg.admin_dsn)
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine:
        anchor = {"user_id": f"u-{uuid.uuid4().hex[:8]}"}
        with engine.tenant(anchor) as mem:
            entry = mem.observe("long_term", "job 7 finished with 3 findings",
                                typology="episodic", key="job-7")
        with pytest.raises(GovernanceError, match="append-only"), engine.tenant(anchor) as mem:
            mem.observe("long_term", "job 7 finished with 4 findings", typology="episodic",
                        key="job-7")
        with pytest.raises(GovernanceError, match="append-only"), engine.tenant(anchor) as mem:
            mem.supersede(entry.id, "job 7 finished with 5 findings")
        with engine.tenant(anchor) as mem:
            same = mem.observe("long_term", "job 7 finished with 3 findings",
                               typology="episodic", key="job-7")
            other = mem.observe("long_term", "job 8 finished", typology="episodic")
    assert same.id == entry.id and other.id != entry.id  # an unchanged write, a new entry
    assert _state(admin_conn, spec, entry.id)[:3] == (None, False, False)
