"""The reference agents' lifecycles end to end, as their users run them (DESIGN §9).

Spectral: scan cycles -> run -> workspace, a corroborated observation promoted to semantic
memory with its workspace stripped. Operations: a session idle 30 days closes in
``primitives maintain`` with compounding into the operator tier and archive. World:
interactions -> session -> world knowledge by corroboration.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives._project import migrate
from primitives.compile import agent_tables
from primitives.engine import Engine
from primitives.lifecycle import maintain
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")


def _spec(pg: PostgresHandle, name: str) -> AgentSpec:
    spec = load_spec(ROOT / "agents" / f"{name}.yaml")
    migrate([spec], dsn=pg.admin_dsn)
    return spec


def _rows(admin: psycopg.Connection[Any], spec: AgentSpec, tenant: str) -> list[tuple[Any, ...]]:
    """(tier, typology, content, derived_from, archived) of the tenant's rows."""
    tables = agent_tables(spec)
    return admin.execute(sql.SQL(
        "SELECT tier, typology, content, provenance -> 'derived_from', archived_at IS NOT NULL "
        "FROM {} WHERE {} = %s ORDER BY tier, typology, event_time, id").format(
        tables.memories.ident, tables.tenant), (tenant,)).fetchall()


def _kinds(admin: psycopg.Connection[Any], spec: AgentSpec, tenant: str) -> list[str]:
    tables = agent_tables(spec)
    return [k for (k,) in admin.execute(sql.SQL(
        "SELECT kind FROM {} WHERE {} = %s ORDER BY seq").format(
        tables.events.ident, tables.tenant), (tenant,)).fetchall()]


def test_spectral_scan_cycles_become_a_sanitized_fact(
        pg: PostgresHandle, admin_conn: psycopg.Connection[Any]) -> None:
    spec = _spec(pg, "spectral_agent")
    ws = f"ws-{uuid.uuid4().hex[:10]}"
    finding = f"the {ws} export endpoint drops rows past 10,000"
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine:
        for cycle, scanner in enumerate(("scanner-a", "scanner-b", "scanner-c")):
            with engine.tenant({"workspace_id": ws}) as mem:
                mem.observe("cycle", finding, scope_id=f"cycle-{cycle}", source=scanner)
                mem.observe("cycle", f"cycle {cycle} finished in {40 + cycle} s",
                            scope_id=f"cycle-{cycle}")
                mem.end_scope("cycle", f"cycle-{cycle}", into_scope="run-1")
        with engine.tenant({"workspace_id": ws}) as mem:
            ended = mem.end_scope("run", "run-1")
            assert ended.corroboration_promoted == 1
    rows = _rows(admin_conn, spec, ws)
    assert [r[:2] for r in rows].count(("workspace", "semantic")) == 1
    fact = next(r for r in rows if r[1] == "semantic")
    assert ws not in fact[2] and "export endpoint drops rows past 10,000" in fact[2]
    episode = next(r for r in rows if r[:3] == ("workspace", "episodic", finding))
    assert fact[3] and len(fact[3]) == 1 and episode[3] and len(episode[3]) == 1
    assert not any(r[0] in ("cycle", "run") for r in rows)  # transient rows left
    kinds = _kinds(admin_conn, spec, ws)
    assert kinds.count("scope_ended") == 4 and kinds.count("compounded") >= 6


def test_operations_idle_session_closes_with_compounding_and_archive(
        pg: PostgresHandle, admin_conn: psycopg.Connection[Any]) -> None:
    spec = _spec(pg, "operations_agent")
    tables = agent_tables(spec)
    op = f"op-x{uuid.uuid4().hex[:10]}"
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine, \
            engine.tenant({"operator_id": op}) as mem:
        for note in ("reviewing conformity-gate coverage for world 9",
                     "reviewing conformity-gate coverage for world 9",
                     "asked for the weekly signal digest"):
            mem.observe("operator_session", note, typology="episodic", scope_id="session-1")
    admin_conn.execute(sql.SQL(
        "UPDATE {} SET last_activity_at = now() - interval '30 days 1 minute' "
        "WHERE {} = %s").format(tables.scopes.ident, tables.tenant), (op,))
    report = maintain([spec], pg.admin_dsn)
    assert report.agents["operations"]["idle_scopes"] >= 1
    rows = _rows(admin_conn, spec, op)
    session = [r for r in rows if r[0] == "operator_session"]
    operator = [r for r in rows if r[0] == "operator"]
    assert len(session) == 3 and all(r[4] for r in session)  # archived, not deleted
    assert sorted(r[2] for r in operator) == ["asked for the weekly signal digest",
                                              "reviewing conformity-gate coverage for world 9"]
    assert max(len(r[3]) for r in operator) == 2  # the duplicate compounded into one
    assert "scope_idle_closed" in _kinds(admin_conn, spec, op)


def test_world_sessions_corroborate_into_world_knowledge(
        pg: PostgresHandle, admin_conn: psycopg.Connection[Any]) -> None:
    spec = _spec(pg, "world_agent")
    world = f"world-{uuid.uuid4().hex[:8]}"
    claim = "conformity gate failures cluster on Mondays"
    promoted = []
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine:
        for n, operator in enumerate(("op-1", "op-2", "op-3")):
            with engine.tenant({"world_id": world}) as mem:
                mem.observe("interaction", claim, scope_id=f"q-{n}", source=operator)
                promoted.append(mem.end_scope("interaction", f"q-{n}",
                                              into_scope="session-1").corroboration_promoted)
        # promotion is continuous: the third operator's report is the third corroboration,
        # and both declared rules (session.episodic -> world.semantic, -> world.procedural)
        # promote then; the session's end repeats neither (the ledger)
        assert promoted == [0, 0, 2]
        with engine.tenant({"world_id": world}) as mem:
            ended = mem.end_scope("session", "session-1")
            assert (ended.corroboration_promoted, ended.removed) == (0, 1)
    rows = _rows(admin_conn, spec, world)
    assert sorted(r[:3] for r in rows) == [("world", "procedural", claim),
                                           ("world", "semantic", claim)]


def test_a_corroboration_rule_at_the_tier_boundary_waits_for_its_scope_to_end(
        pg: PostgresHandle, admin_conn: psycopg.Connection[Any]) -> None:
    # World's rules with at: tier_boundary instead of continuous: the third report does not
    # promote; the session's end does (same tables: promotion timing changes no DDL)
    world_spec = _spec(pg, "world_agent")
    rules = [r.model_copy(update={"at": "tier_boundary"}) if r.criteria == "corroboration"
             else r for r in world_spec.behavior.promotion]
    spec = world_spec.model_copy(update={
        "behavior": world_spec.behavior.model_copy(update={"promotion": rules})})
    world = f"world-{uuid.uuid4().hex[:8]}"
    claim = "gate reviews stall when two approvers are out"
    promoted = []
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine:
        for n, operator in enumerate(("op-1", "op-2", "op-3")):
            with engine.tenant({"world_id": world}) as mem:
                mem.observe("interaction", claim, scope_id=f"q-{n}", source=operator)
                promoted.append(mem.end_scope("interaction", f"q-{n}",
                                              into_scope="session-1").corroboration_promoted)
        assert promoted == [0, 0, 0]
        passes = maintain([spec], pg.admin_dsn).agents["world"]
        assert not any(name.startswith("promote") for name in passes)  # no continuous rule
        with engine.tenant({"world_id": world}) as mem:
            assert mem.end_scope("session", "session-1").corroboration_promoted == 2
    assert sorted(r[:2] for r in _rows(admin_conn, spec, world) if r[0] == "world") == [
        ("world", "procedural"), ("world", "semantic")]
