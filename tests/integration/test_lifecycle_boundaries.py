"""Tier boundaries: compounding upward, corroboration promotion, archive or removal, idle close.

Run as the application role (the engine) except where the maintain job's statements run;
those run as the admin connection here (tests/integration/test_maintain.py runs them as the
maintainer role through ``primitives maintain``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives._project import migrate
from primitives.embeddings import HashingEmbedder
from primitives.engine import Engine
from primitives.errors import PolicyViolation
from primitives.lifecycle._boundary import (
    boundary_passes,
    boundary_rules,
    corroboration_rules,
    corroboration_statement,
)
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")


@pytest.fixture(scope="module")
def operations(pg: PostgresHandle) -> AgentSpec:
    spec = load_spec(ROOT / "agents" / "operations_agent.yaml")
    migrate([spec], dsn=pg.admin_dsn)
    return spec


@pytest.fixture
def spectral_engine(pg: PostgresHandle, spectral: AgentSpec) -> Iterator[Engine]:
    with Engine.connect(spectral, pg.app_dsn, max_connections=2) as engine:
        yield engine


@pytest.fixture
def embedding_engine(pg: PostgresHandle, spectral: AgentSpec) -> Iterator[Engine]:
    with Engine.connect(spectral, pg.app_dsn, max_connections=2,
                        embedder=HashingEmbedder(spectral.retrieval.embedding.dims)) as engine:
        yield engine


def _ws() -> dict[str, str]:
    return {"workspace_id": f"ws-{uuid.uuid4().hex[:10]}"}


def _rows(conn: psycopg.Connection[Any], spec: AgentSpec, tenant: str, tier: str
          ) -> list[tuple[Any, ...]]:
    """(id, typology, content, provenance, archived) of a tier's rows, as the admin sees them."""
    from primitives.compile import agent_tables
    tables = agent_tables(spec)
    return conn.execute(sql.SQL(
        "SELECT id, typology, content, provenance, archived_at IS NOT NULL FROM {} "
        "WHERE {} = %s AND tier = %s ORDER BY event_time, created_at, id").format(
        tables.memories.ident, tables.tenant), (tenant, tier)).fetchall()


def _kinds(conn: psycopg.Connection[Any], spec: AgentSpec, tenant: str) -> list[str]:
    from primitives.compile import agent_tables
    tables = agent_tables(spec)
    return [r[0] for r in conn.execute(sql.SQL(
        "SELECT kind FROM {} WHERE {} = %s ORDER BY seq").format(
        tables.events.ident, tables.tenant), (tenant,)).fetchall()]


def test_spectral_rules_compound_each_transient_tier_into_the_next() -> None:
    spec = load_spec(ROOT / "agents" / "spectral_agent.yaml")
    assert [(r.from_tier, r.to_tier, r.leave, r.threshold) for r in boundary_rules(spec)] == [
        ("cycle", "run", "remove", 0.92), ("run", "workspace", "remove", 0.92)]
    [rule] = corroboration_rules(spec)
    assert (rule.name, rule.min_corroborations, rule.strip_anchors) == (
        "workspace.episodic->workspace.semantic", 3, ("workspace_id",))


def test_cycle_end_compounds_duplicates_upward_instead_of_deleting_them(
        spectral_engine: Engine, spectral: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    anchor = _ws()
    with spectral_engine.tenant(anchor) as mem:
        a = mem.observe("cycle", "login route returns 500 under load", scope_id="c1")
        b = mem.observe("cycle", "login route returns 500 under load!", scope_id="c1")
        c = mem.observe("cycle", "cache headers missing on the assets route", scope_id="c1")
        ended = mem.end_scope("cycle", "c1", into_scope="r1")
        assert ended == (3, 0)
        assert (ended.compounded, ended.promoted, ended.corroborated) == (3, 2, 0)
        assert all(mem.get(i) is None for i in (a.id, b.id, c.id))
    run = _rows(admin_conn, spectral, anchor["workspace_id"], "run")
    assert [r[2] for r in run] == ["login route returns 500 under load",
                                   "cache headers missing on the assets route"]
    assert sorted(run[0][3]["derived_from"]) == sorted([str(a.id), str(b.id)])
    assert run[1][3]["derived_from"] == [str(c.id)]
    assert run[0][3]["corroborated_by"] == ["scope:cycle/c1"]
    kinds = _kinds(admin_conn, spectral, anchor["workspace_id"])
    assert kinds.count("compounded") == 3 and kinds.count("promoted") == 2
    assert kinds.count("removed_at_scope_end") == 3 and kinds[-1] == "scope_ended"


def test_a_cycle_that_compounds_into_a_transient_tier_must_name_its_scope(
        spectral_engine: Engine) -> None:
    anchor = _ws()
    with spectral_engine.tenant(anchor) as mem:
        kept = mem.observe("cycle", "an observation", scope_id="c1")
        with pytest.raises(PolicyViolation, match="into_scope"):
            mem.end_scope("cycle", "c1")
    with spectral_engine.tenant(anchor) as mem:
        assert mem.get(kept.id) is not None  # refused before anything changed


def _three_sources(mem: Any, content: str) -> None:
    """Three scan cycles of one run, each from its own source, observing ``content``."""
    for n in (1, 2, 3):
        mem.observe("cycle", content, scope_id=f"c{n}", source=f"scanner-{n}")
        mem.end_scope("cycle", f"c{n}", into_scope="r1")


def test_three_independent_observations_promote_a_semantic_row_stripped_of_the_workspace(
        spectral_engine: Engine, spectral: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    anchor = _ws()
    ws = anchor["workspace_id"]
    content = f"checkout route in {ws} times out when the payment stub is slow"
    with spectral_engine.tenant(anchor) as mem:
        _three_sources(mem, content)
    run = _rows(admin_conn, spectral, ws, "run")
    assert len(run) == 1 and run[0][3]["corroborated_by"] == [
        "source:scanner-1", "source:scanner-2", "source:scanner-3"]
    with spectral_engine.tenant(anchor) as mem:
        ended = mem.end_scope("run", "r1")
        assert (ended.promoted, ended.corroboration_promoted) == (1, 1)
    [episode] = [r for r in _rows(admin_conn, spectral, ws, "workspace") if r[1] == "episodic"]
    semantic = [r for r in _rows(admin_conn, spectral, ws, "workspace") if r[1] == "semantic"]
    assert len(semantic) == 1
    assert semantic[0][2] == "checkout route in times out when the payment stub is slow"
    assert ws not in semantic[0][2]
    assert semantic[0][3]["derived_from"] == [str(episode[0])]
    assert len(semantic[0][3]["corroborated_by"]) == 3
    # a repeat is refused by the ledger, not duplicated
    [rule] = corroboration_rules(spectral)
    from primitives.compile import agent_tables
    again = admin_conn.execute(corroboration_statement(
        spectral, agent_tables(spectral), rule, embedding=True),
        {"tenants": [ws], "actor": "test"}).fetchone()
    assert again == (0,)
    assert len([r for r in _rows(admin_conn, spectral, ws, "workspace")
                if r[1] == "semantic"]) == 1


def test_a_promoted_persistent_episode_is_archived_as_disposed_only_where_its_lifecycle_says(
        pg: PostgresHandle, tmp_path: Path, admin_conn: psycopg.Connection[Any]) -> None:
    kept_spec = _custom(tmp_path, pg, "derivations_kept", _GRAPH.replace(
        "      transient: archive_at_scope_end\n",
        "      transient: archive_at_scope_end\n      archive_on: [explicit_invalidation]\n"
    ).replace("agent: derivations", "agent: derivations_kept").replace(
        "prefix: der}", "prefix: derk}"))
    for spec, disposed in ((_custom(tmp_path, pg, "derivations", _GRAPH), True),
                           (kept_spec, False)):
        team = f"team-{uuid.uuid4().hex[:8]}"
        with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine, \
                engine.tenant({"team_id": team}) as mem:
            for n in (1, 2, 3):
                mem.observe("session", "the nightly export skips archived invoices",
                            scope_id=f"s{n}", source=f"reviewer-{n}")
                ended = mem.end_scope("session", f"s{n}")
            assert ended.corroboration_promoted == 1
        [episode] = [r for r in _rows(admin_conn, spec, team, "team") if r[1] == "episodic"]
        assert episode[4] is disposed
        from primitives.compile import agent_tables
        events = admin_conn.execute(sql.SQL(
            "SELECT payload FROM {} WHERE memory_id = %s AND kind = 'archived'").format(
            agent_tables(spec).events.ident), (episode[0],)).fetchall()
        assert [e[0]["cause"] for e in events] == (["disposition"] if disposed else [])


def test_two_observations_are_not_enough_for_promotion(
        spectral_engine: Engine, spectral: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    anchor = _ws()
    with spectral_engine.tenant(anchor) as mem:
        for n in (1, 2):
            mem.observe("cycle", "search route ignores the locale", scope_id=f"c{n}",
                        source=f"scanner-{n}")
            mem.end_scope("cycle", f"c{n}", into_scope="r1")
        assert mem.end_scope("run", "r1").corroboration_promoted == 0
    assert [r[1] for r in _rows(admin_conn, spectral, anchor["workspace_id"], "workspace")] == [
        "episodic"]


def test_a_later_run_corroborates_the_workspace_row_instead_of_duplicating_it(
        spectral_engine: Engine, spectral: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    anchor = _ws()
    with spectral_engine.tenant(anchor) as mem:
        for run in ("r1", "r2"):
            mem.observe("run", "profile page renders twice", scope_id=run, source=f"scan-{run}")
            ended = mem.end_scope("run", run)
        assert (ended.promoted, ended.corroborated) == (0, 1)
    [row] = _rows(admin_conn, spectral, anchor["workspace_id"], "workspace")
    assert row[3]["corroborated_by"] == ["source:scan-r1", "source:scan-r2"]
    assert len(row[3]["derived_from"]) == 2


def test_action_linked_rows_stay_and_still_compound(
        spectral_engine: Engine, spectral: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    anchor = _ws()
    with spectral_engine.tenant(anchor) as mem:
        basis = mem.observe("run", "the basis of a published decision", scope_id="r1")
        mem.link_action("decision-1", [basis.id], "published_decision")
        assert mem.end_scope("run", "r1") == (0, 1)
        assert mem.get(basis.id) is not None
    [row] = _rows(admin_conn, spectral, anchor["workspace_id"], "workspace")
    assert row[3]["derived_from"] == [str(basis.id)]


def test_embedding_similarity_compounds_when_rows_have_vectors(
        embedding_engine: Engine, spectral: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    anchor = _ws()
    with embedding_engine.tenant(anchor) as mem:
        mem.observe("cycle", "the export job leaks file handles", scope_id="c1")
        mem.observe("cycle", "the export job leaks file handles", scope_id="c1")
        mem.observe("cycle", "an unrelated note about fonts", scope_id="c1")
        ended = mem.end_scope("cycle", "c1", into_scope="r1")
        assert (ended.compounded, ended.promoted) == (3, 2)
    run = {r[2]: r for r in _rows(admin_conn, spectral, anchor["workspace_id"], "run")}
    assert len(run) == 2
    assert len(run["the export job leaks file handles"][3]["derived_from"]) == 2
    vectors = admin_conn.execute(sql.SQL(
        "SELECT count(*) FROM platform.spectral_memories WHERE workspace_id = %s "
        "AND tier = 'run' AND embedding IS NOT NULL"), (anchor["workspace_id"],)).fetchone()
    assert vectors == (2,)  # promoted rows keep their evidence's vector


def test_operations_session_close_archives_with_compounding_into_the_operator_tier(
        pg: PostgresHandle, operations: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    anchor = {"operator_id": f"op-x{uuid.uuid4().hex[:10]}"}
    with Engine.connect(operations, pg.app_dsn, max_connections=2) as engine, \
            engine.tenant(anchor) as mem:
        e = mem.observe("operator_session", "operator reviewed gate coverage for world 7",
                        typology="episodic", scope_id="s1")
        ended = mem.end_scope("operator_session", "s1")
        assert ended == (0, 0) and (ended.archived, ended.promoted) == (1, 1)
        archived = mem.get(e.id)
        assert archived is not None and archived.archived_at is not None
    operator = _rows(admin_conn, operations, anchor["operator_id"], "operator")
    assert [r[2] for r in operator] == ["operator reviewed gate coverage for world 7"]
    kinds = _kinds(admin_conn, operations, anchor["operator_id"])
    assert "archived_at_scope_end" in kinds and "removed_at_scope_end" not in kinds


def test_thirty_days_idle_closes_an_operator_session_in_the_maintain_pass(
        pg: PostgresHandle, operations: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    from primitives.compile import agent_tables
    tables = agent_tables(operations)
    idle, busy = (f"op-x{uuid.uuid4().hex[:10]}" for _ in range(2))
    with Engine.connect(operations, pg.app_dsn, max_connections=2) as engine:
        for op in (idle, busy):
            with engine.tenant({"operator_id": op}) as mem:
                mem.observe("operator_session", f"{op} was drafting a change set",
                            typology="episodic", scope_id="s1")
    admin_conn.execute(sql.SQL(
        "UPDATE {} SET last_activity_at = now() - interval '31 days' WHERE {} = %s").format(
        tables.scopes.ident, tables.tenant), (idle,))
    passes = {p.name: p for p in boundary_passes(operations, tables, embedding=True,
                                                 similarity="trigram")}
    params = {"tenants": [idle, busy], "now": datetime.now(UTC), "actor": "maintain"}
    assert admin_conn.execute(passes["idle_scopes"].statement, params).fetchone() == (1,)
    assert admin_conn.execute(passes["idle_scopes"].statement, params).fetchone() == (0,)
    assert [r[4] for r in _rows(admin_conn, operations, idle, "operator_session")] == [True]
    assert [r[2] for r in _rows(admin_conn, operations, idle, "operator")] == [
        f"{idle} was drafting a change set"]
    assert "scope_idle_closed" in _kinds(admin_conn, operations, idle)
    assert [r[4] for r in _rows(admin_conn, operations, busy, "operator_session")] == [False]


_ESCALATING = """\
version: 1
agent: escalating
anchor:
  keys: [team_id, session_id]
  required_at_write: [team_id]
  nullable_for_cross_scope: [session_id]
typology:
  session: [episodic]
  team: [episodic]
tiers:
  - name: session
    boundary: {anchor_escalation: {from: session_id, to: team_id}}
  - name: team
    boundary: {scope_change: team_id}
    persistent: true
persistence:
  store: {schema: escalating, prefix: esc}
retrieval:
  signals: [lexical, recency]
"""


def test_an_anchor_escalation_boundary_clears_the_narrower_key_on_promotion(
        pg: PostgresHandle, tmp_path: Path, admin_conn: psycopg.Connection[Any]) -> None:
    path = tmp_path / "escalating.yaml"
    path.write_text(_ESCALATING, encoding="utf-8")
    spec = load_spec(path)
    migrate([spec], dsn=pg.admin_dsn)
    team = f"team-{uuid.uuid4().hex[:8]}"
    anchor = {"team_id": team, "session_id": "sess-1"}
    read = "SELECT tier, session_id, content FROM escalating.esc_memories WHERE team_id = %s"
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine:
        with engine.tenant(anchor) as mem:
            mem.observe("session", "the deploy checklist skips the smoke test",
                        scope_id="sess-1")
        assert admin_conn.execute(read, (team,)).fetchall() == [
            ("session", "sess-1", "the deploy checklist skips the smoke test")]
        with engine.tenant(anchor) as mem:
            assert mem.end_scope("session", "sess-1").promoted == 1
    assert admin_conn.execute(read, (team,)).fetchall() == [
        ("team", None, "the deploy checklist skips the smoke test")]


def _custom(tmp_path: Path, pg: PostgresHandle, name: str, text: str) -> AgentSpec:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    spec = load_spec(path)
    migrate([spec], dsn=pg.admin_dsn)
    return spec


_GRAPH = """\
version: 1
agent: derivations
anchor:
  keys: [team_id]
  required_at_write: [team_id]
typology:
  session: [episodic]
  team: [episodic, semantic]
tiers:
  - name: session
    boundary: {lifecycle: session_end}
  - name: team
    boundary: {scope_change: team_id}
    persistent: true
persistence:
  store: {schema: derivations, prefix: der}
graph:
  edges: [derived_from]
  entity_types: [concept]
retrieval:
  signals: [lexical, recency]
behavior:
  lifecycle:
    episodic:
      transient: archive_at_scope_end
      justification: sessions are kept for audit
"""


def test_a_graph_spec_links_promoted_rows_to_their_evidence_by_derived_from_edges(
        pg: PostgresHandle, tmp_path: Path, admin_conn: psycopg.Connection[Any]) -> None:
    spec = _custom(tmp_path, pg, "derivations", _GRAPH)
    team = f"team-{uuid.uuid4().hex[:8]}"
    content = "the nightly export skips archived invoices"
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine, \
            engine.tenant({"team_id": team}) as mem:
        evidence = []
        for n in (1, 2, 3):
            evidence.append(mem.observe("session", content, scope_id=f"s{n}",
                                        source=f"reviewer-{n}").id)
            ended = mem.end_scope("session", f"s{n}")
        assert ended.corroboration_promoted == 1
    rows = {(r[1], r[4]): r for r in _rows(admin_conn, spec, team, "team")}
    # the team episode, once promoted, is disposed of (episodic archives on disposition)
    episode, semantic = rows[("episodic", True)], rows[("semantic", False)]
    edges = admin_conn.execute(
        "SELECT source_id, target_id FROM derivations.der_edges WHERE team_id = %s "
        "AND relation_type = 'derived_from'", (team,)).fetchall()
    # the team episode derives from the three archived session rows, the fact from the episode
    assert sorted(edges) == sorted([(episode[0], e) for e in evidence]
                                   + [(semantic[0], episode[0])])


def _threshold_spec(name: str, dedup: str) -> str:
    return f"""\
version: 1
agent: thresholds_{name}
anchor:
  keys: [team_id]
  required_at_write: [team_id]
typology:
  session: [episodic]
  team: [episodic]
tiers:
  - name: session
    boundary: {{lifecycle: session_end}}
  - name: team
    boundary: {{scope_change: team_id}}
    persistent: true
persistence:
  store: {{schema: thresholds, prefix: th_{name}}}
retrieval:
  signals: [lexical, recency]
behavior:
{dedup}
"""


@pytest.mark.parametrize(("behavior", "promoted"), [
    ("  promotion: []", 2),                                    # default 0.92: two rows
    ("  promotion:\n    - from: session.episodic\n      to: team.episodic\n"
     "      dedup_similarity: 0.5\n      justification: looser merging", 1),
    ("  consolidation:\n    episodic:\n      method: compounding\n      dedup_similarity: 0.5\n"
     "      justification: looser merging", 1),
    ("  consolidation:\n    episodic:\n      method: none\n"
     "      justification: episodes are never merged", 3),
], ids=["default", "rule_dedup_similarity", "consolidation_dedup_similarity",
        "consolidation_none"])
def test_the_spec_threshold_and_method_decide_what_compounds(
        pg: PostgresHandle, tmp_path: Path, admin_conn: psycopg.Connection[Any],
        behavior: str, promoted: int) -> None:
    name = uuid.uuid4().hex[:6]
    spec = _custom(tmp_path, pg, name, _threshold_spec(name, behavior))
    team = f"team-{uuid.uuid4().hex[:8]}"
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine, \
            engine.tenant({"team_id": team}) as mem:
        mem.observe("session", "the build cache misses on every branch", scope_id="s1")
        mem.observe("session", "the build cache misses on every branch", scope_id="s1")
        mem.observe("session", "the build cache misses on most branches", scope_id="s1")
        ended = mem.end_scope("session", "s1")
        assert (ended.compounded, ended.promoted) == (3, promoted)
    assert len(_rows(admin_conn, spec, team, "team")) == promoted


def test_keep_if_specific_leaves_an_observation_that_is_only_the_workspace_unpromoted(
        spectral_engine: Engine, spectral: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    anchor = _ws()
    ws = anchor["workspace_id"]
    with spectral_engine.tenant(anchor) as mem:
        _three_sources(mem, f"{ws}")
        ended = mem.end_scope("run", "r1")
        assert (ended.promoted, ended.corroboration_promoted) == (1, 0)
    assert [r[1] for r in _rows(admin_conn, spectral, ws, "workspace")] == ["episodic"]
    assert _kinds(admin_conn, spectral, ws).count("kept_specific") == 1
    [rule] = corroboration_rules(spectral)
    from primitives.compile import agent_tables
    again = admin_conn.execute(corroboration_statement(
        spectral, agent_tables(spectral), rule, embedding=True),
        {"tenants": [ws], "actor": "test"}).fetchone()
    assert again == (0,)
    assert _kinds(admin_conn, spectral, ws).count("kept_specific") == 1  # journalled once


def test_the_promoted_event_records_the_gate_and_what_it_stripped(
        spectral_engine: Engine, spectral: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    anchor = _ws()
    ws = anchor["workspace_id"]
    with spectral_engine.tenant(anchor) as mem:
        _three_sources(mem, f"{ws}: the upload route accepts empty files")
        mem.end_scope("run", "r1")
    [payload] = [r[0] for r in admin_conn.execute(
        "SELECT e.payload FROM platform.spectral_memory_events AS e "
        "JOIN platform.spectral_memories AS m ON m.workspace_id = e.workspace_id "
        "AND m.id = e.memory_id WHERE e.workspace_id = %s AND e.kind = 'promoted' "
        "AND m.typology = 'semantic'", (ws,)).fetchall()]
    assert payload["sanitization"] == "strip_workspace_identifiers"
    assert payload["stripped"] == ["workspace_id"] and payload["changed"] is True
    [semantic] = [r for r in _rows(admin_conn, spectral, ws, "workspace") if r[1] == "semantic"]
    assert semantic[2] == ": the upload route accepts empty files"


def test_ending_a_closed_archived_session_again_promotes_nothing_twice(
        pg: PostgresHandle, operations: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    anchor = {"operator_id": f"op-x{uuid.uuid4().hex[:10]}"}
    with Engine.connect(operations, pg.app_dsn, max_connections=2) as engine, \
            engine.tenant(anchor) as mem:
        mem.observe("operator_session", "operator prefers dry runs before applying",
                    typology="episodic", scope_id="s1")
        assert mem.end_scope("operator_session", "s1").promoted == 1
        again = mem.end_scope("operator_session", "s1")
        assert (again.promoted, again.corroborated, again.archived) == (0, 0, 0)
    assert len(_rows(admin_conn, operations, anchor["operator_id"], "operator")) == 1


async def test_the_async_engine_ends_a_scope_with_the_same_statements(
        pg: PostgresHandle, spectral: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    from primitives.engine import AsyncEngine
    anchor = _ws()
    engine = await AsyncEngine.connect(spectral, pg.app_dsn)
    try:
        async with engine.tenant(anchor) as mem:
            for n in (1, 2, 3):
                await mem.observe("cycle", "the search index lags writes by minutes",
                                  scope_id=f"c{n}", source=f"scanner-{n}")
                await mem.end_scope("cycle", f"c{n}", into_scope="r1")
            with pytest.raises(PolicyViolation, match="into_scope"):
                await mem.end_scope("cycle", "c9")
            ended = await mem.end_scope("run", "r1")
            assert (ended.promoted, ended.corroboration_promoted) == (1, 1)
    finally:
        await engine.close()
    typologies = sorted(r[1] for r in _rows(admin_conn, spectral, anchor["workspace_id"],
                                            "workspace"))
    assert typologies == ["episodic", "semantic"]


def test_a_corroboration_promotion_within_a_transient_tier_stays_in_its_scope(
        pg: PostgresHandle, operations: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    """Operations' ``operator_session.episodic -> operator_session.semantic`` rule: the fact
    lands in the session its evidence came from, and is archived with it."""
    from primitives.compile import agent_tables
    tables = agent_tables(operations)
    op = f"op-x{uuid.uuid4().hex[:10]}"
    with Engine.connect(operations, pg.app_dsn, max_connections=2) as engine, \
            engine.tenant({"operator_id": op}) as mem:
        row = mem.observe("operator_session", "operator is mid-way through gate coverage",
                          typology="episodic", scope_id="s1")
    # three independent confirmations, as compounding into the session would record them
    admin_conn.execute(sql.SQL(
        "UPDATE {} SET provenance = provenance || "
        "'{{\"corroborated_by\": [\"source:a\", \"source:b\", \"source:c\"]}}'::jsonb "
        "WHERE {} = %s AND id = %s").format(tables.memories.ident, tables.tenant), (op, row.id))
    [rule] = [r for r in corroboration_rules(operations)
              if r.name == "operator_session.episodic->operator_session.semantic"]
    statement = corroboration_statement(operations, tables, rule, embedding=True)
    assert admin_conn.execute(statement, {"tenants": [op], "actor": "t"}).fetchone() == (1,)
    assert admin_conn.execute(statement, {"tenants": [op], "actor": "t"}).fetchone() == (0,)
    fact = admin_conn.execute(sql.SQL(
        "SELECT scope_id, content FROM {} WHERE {} = %s AND typology = 'semantic'").format(
        tables.memories.ident, tables.tenant), (op,)).fetchall()
    assert fact == [("s1", "operator is mid-way through gate coverage")]
    with Engine.connect(operations, pg.app_dsn, max_connections=2) as engine, \
            engine.tenant({"operator_id": op}) as mem:
        assert mem.end_scope("operator_session", "s1").archived == 2


def test_world_interactions_compound_into_a_session_and_three_sources_make_world_knowledge(
        pg: PostgresHandle, admin_conn: psycopg.Connection[Any]) -> None:
    """World end to end: each interaction compounds into its session; three independent
    observations promote the session row into world.semantic and world.procedural (its two
    corroboration rules) with derived_from kept; the session's end then removes its rows."""
    world = load_spec(ROOT / "agents" / "world_agent.yaml")
    migrate([world], dsn=pg.admin_dsn)
    anchor = {"world_id": f"world-{uuid.uuid4().hex[:8]}"}
    content = "travellers need a permit before crossing the northern pass"
    with Engine.connect(world, pg.app_dsn, max_connections=2) as engine, \
            engine.tenant(anchor) as mem:
        ends = []
        for n in (1, 2, 3):
            mem.observe("interaction", content, scope_id=f"i{n}", source=f"operator-{n}")
            ends.append(mem.end_scope("interaction", f"i{n}", into_scope="s1"))
        assert [(e.promoted, e.corroborated, e.corroboration_promoted) for e in ends] == [
            (1, 0, 0), (0, 1, 0), (0, 1, 2)]
    [session_row] = _rows(admin_conn, world, anchor["world_id"], "session")
    with Engine.connect(world, pg.app_dsn, max_connections=2) as engine, \
            engine.tenant(anchor) as mem:
        ended = mem.end_scope("session", "s1")
        assert ended == (1, 0) and ended.corroboration_promoted == 0  # refused: ledger
    rows = _rows(admin_conn, world, anchor["world_id"], "world")
    assert sorted(r[1] for r in rows) == ["procedural", "semantic"]
    assert all(r[2] == content and r[3]["derived_from"] == [str(session_row[0])]
               for r in rows)
    assert _rows(admin_conn, world, anchor["world_id"], "session") == []
    assert _rows(admin_conn, world, anchor["world_id"], "interaction") == []


@pytest.mark.parametrize("at", ["tier_boundary", "session_end", "job_end"])
def test_a_compounding_rule_at_each_boundary_value_runs_when_the_scope_ends(
        pg: PostgresHandle, tmp_path: Path, admin_conn: psycopg.Connection[Any], at: str) -> None:
    name = uuid.uuid4().hex[:6]
    behavior = ("  promotion:\n    - from: session.episodic\n      to: team.episodic\n"
                f"      at: {at}\n      justification: the session's end is its boundary")
    spec = _custom(tmp_path, pg, name, _threshold_spec(name, behavior))
    assert [r.name for r in boundary_rules(spec)] == ["session.episodic->team.episodic"]
    team = f"team-{uuid.uuid4().hex[:8]}"
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine, \
            engine.tenant({"team_id": team}) as mem:
        mem.observe("session", "the staging database is reset every monday", scope_id="s1")
        assert mem.end_scope("session", "s1").promoted == 1
    assert [r[2] for r in _rows(admin_conn, spec, team, "team")] == [
        "the staging database is reset every monday"]


_GATED = """\
version: 1
agent: gated_{name}
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
  store: {{schema: gated, prefix: g_{name}}}
retrieval:
  signals: [lexical, recency]
behavior:
  promotion:
    - from: team.episodic
      to: team.semantic
      sanitization: strip_team
discipline:
  sanitization:
    - name: strip_team
      from: team.semantic
      to: shared_signal
      strip: [team_id]
      transform: strip_identifiers
      keep_if_specific: {keep}
"""


@pytest.mark.parametrize(("keep", "promoted"), [
    ("true", ["the build flakes"]), ("false", ["ok", "the build flakes"])])
def test_keep_if_specific_decides_whether_a_row_short_once_stripped_is_promoted(
        pg: PostgresHandle, tmp_path: Path, admin_conn: psycopg.Connection[Any],
        keep: str, promoted: list[str]) -> None:
    name = uuid.uuid4().hex[:6]
    spec = _custom(tmp_path, pg, name, _GATED.format(name=name, keep=keep))
    team = f"team-{uuid.uuid4().hex[:8]}"
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine, \
            engine.tenant({"team_id": team}) as mem:
        for n in (1, 2, 3):
            for text in (f"{team} the build flakes", f"{team} ok", team):
                mem.observe("session", text, scope_id=f"s{n}", source=f"dev-{n}")
            mem.end_scope("session", f"s{n}")
    semantic = sorted(r[2] for r in _rows(admin_conn, spec, team, "team") if r[1] == "semantic")
    assert semantic == promoted  # a row with no text left is never promoted
    kept = 3 - len(promoted)
    assert _kinds(admin_conn, spec, team).count("kept_specific") == kept


def test_drop_at_scope_end_removes_the_rows_without_compounding_them_upward(
        pg: PostgresHandle, spectral: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    # Spectral with episodic rows dropped at scope end (same tables: lifecycle changes no DDL)
    behavior = spectral.behavior
    episodic = behavior.lifecycle["episodic"].model_copy(
        update={"transient": "drop_at_scope_end"})
    spec = spectral.model_copy(update={"behavior": behavior.model_copy(
        update={"lifecycle": {**behavior.lifecycle, "episodic": episodic}})})
    assert boundary_rules(spec) == []
    anchor = _ws()
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine, \
            engine.tenant(anchor) as mem:
        note = mem.observe("run", "a scratch note", scope_id="r1")
        ended = mem.end_scope("run", "r1")
        assert (ended.removed, ended.compounded, ended.promoted) == (1, 0, 0)
        assert mem.get(note.id) is None
    assert _rows(admin_conn, spectral, anchor["workspace_id"], "workspace") == []
    assert "compounded" not in _kinds(admin_conn, spectral, anchor["workspace_id"])
