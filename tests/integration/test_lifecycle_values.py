"""Values of the lifecycle language that change what the engine does: a promotion rule's
``idempotency_key``, an anchor escalation's ``to``, an auto write policy's ``sampling``.

Every write and boundary runs through the engine as the application role; the admin
connection only reads what was stored and journalled.
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
from primitives.engine._core import SAMPLED_OUT_EVENT, sampled_in
from primitives.lifecycle._boundary import corroboration_rules, corroboration_statement
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")


def _custom(tmp_path: Path, pg: PostgresHandle, name: str, text: str) -> AgentSpec:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    spec = load_spec(path)
    migrate([spec], dsn=pg.admin_dsn)
    return spec


def _rows(conn: psycopg.Connection[Any], spec: AgentSpec, tenant: str, tier: str
          ) -> list[tuple[Any, ...]]:
    tables = agent_tables(spec)
    return conn.execute(sql.SQL(
        "SELECT typology, content, provenance FROM {} WHERE {} = %s AND tier = %s "
        "ORDER BY typology, created_at").format(tables.memories.ident, tables.tenant),
        (tenant, tier)).fetchall()


# idempotency_key --------------------------------------------------------------------------------
def _two_targets(name: str, key: str) -> str:
    return f"""\
version: 1
agent: idem_{name}
anchor:
  keys: [world_id]
  required_at_write: [world_id]
typology:
  interaction: [episodic]
  session: [episodic]
  world: [semantic, procedural]
tiers:
  - name: interaction
    boundary: {{lifecycle: interaction_end}}
  - name: session
    boundary: {{lifecycle: session_end}}
  - name: world
    boundary: {{scope_change: world_id}}
    persistent: true
persistence:
  store: {{schema: idem_{name}, prefix: idem{name}}}
retrieval:
  signals: [lexical, recency]
behavior:
  promotion:
    - from: session.episodic
      to: world.semantic
      idempotency_key: {key}
      justification: one observation, two targets
    - from: session.episodic
      to: world.procedural
      idempotency_key: {key}
      justification: one observation, two targets
"""


@pytest.mark.parametrize(("key", "promoted", "typologies"), [
    ("source_and_target", 2, ["procedural", "semantic"]),
    ("source_id", 1, ["semantic"]),
])
def test_the_idempotency_key_decides_whether_one_source_reaches_two_targets(
        pg: PostgresHandle, tmp_path: Path, admin_conn: psycopg.Connection[Any],
        key: str, promoted: int, typologies: list[str]) -> None:
    """Three independent reports corroborate one session row; two rules promote it into
    world.semantic and world.procedural. Keyed on (source, target) it reaches each target
    once; keyed on the source alone (the default), the first rule's promotion refuses the
    second's. Either way a repeat to the same target is refused."""
    name = uuid.uuid4().hex[:6]
    spec = _custom(tmp_path, pg, name, _two_targets(name, key))
    world = f"world-{uuid.uuid4().hex[:8]}"
    claim = "caravans avoid the salt flats after the first frost"
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine:
        counts = []
        for n in (1, 2, 3):
            with engine.tenant({"world_id": world}) as mem:
                mem.observe("interaction", claim, scope_id=f"q{n}", source=f"operator-{n}")
                counts.append(mem.end_scope("interaction", f"q{n}",
                                            into_scope="s1").corroboration_promoted)
        assert counts == [0, 0, promoted]
        with engine.tenant({"world_id": world}) as mem:  # the rules run again: nothing twice
            assert mem.end_scope("session", "s1").corroboration_promoted == 0
    assert [r[0] for r in _rows(admin_conn, spec, world, "world")] == typologies
    tables = agent_tables(spec)
    ledger = admin_conn.execute(sql.SQL(
        "SELECT rule, count(*) FROM {} WHERE {} = %s AND rule LIKE '%%->world.%%' "
        "GROUP BY rule ORDER BY rule").format(
        tables.promotions.ident, tables.tenant), (world,)).fetchall()
    expected = {"session.episodic->world.procedural": 1, "session.episodic->world.semantic": 1}
    assert dict(ledger) == {k: v for k, v in expected.items()
                            if k.rsplit(".", 1)[1] in typologies}
    # the procedural rule's statement run directly (as the maintain pass would) promotes
    # nothing: its own ledger row (source_and_target), or the semantic rule's (source_id)
    [rule] = [r for r in corroboration_rules(spec) if r.to_typology == "procedural"]
    statement = corroboration_statement(spec, tables, rule, embedding=False)
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        conn.execute("SET ROLE primitives_maintainer")
        assert conn.execute(statement, {"tenants": [world], "actor": "t"}).fetchone() == (0,)


# anchor_escalation.to ---------------------------------------------------------------------------
def _escalating(name: str, to: str) -> str:
    return f"""\
version: 1
agent: esc_{name}
anchor:
  keys: [org_id, team_id, session_id]
  required_at_write: [org_id]
  nullable_for_cross_scope: [team_id, session_id]
typology:
  session: [episodic]
  org: [episodic]
tiers:
  - name: session
    boundary: {{anchor_escalation: {{from: session_id, to: {to}}}}}
  - name: org
    boundary: {{scope_change: org_id}}
    persistent: true
persistence:
  store: {{schema: esc_{name}, prefix: esc{name}}}
retrieval:
  signals: [lexical, recency]
"""


@pytest.mark.parametrize(("to", "kept"), [("team_id", "team-a"), ("org_id", None)])
def test_an_anchor_escalation_promotes_into_the_anchor_named_by_to(
        pg: PostgresHandle, tmp_path: Path, admin_conn: psycopg.Connection[Any],
        to: str, kept: str | None) -> None:
    """The session's row is promoted with every anchor key narrower than ``to`` cleared:
    escalating to team_id keeps the team, to org_id leaves the row org-wide."""
    name = uuid.uuid4().hex[:6]
    spec = _custom(tmp_path, pg, name, _escalating(name, to))
    org = f"org-{uuid.uuid4().hex[:8]}"
    anchor = {"org_id": org, "team_id": "team-a", "session_id": "sess-1"}
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine:
        with engine.tenant(anchor) as mem:
            mem.observe("session", "the release train leaves on thursdays", scope_id="sess-1")
            assert mem.end_scope("session", "sess-1").promoted == 1
    rows = admin_conn.execute(sql.SQL(
        "SELECT tier, team_id, session_id, content FROM {} WHERE org_id = %s").format(
        agent_tables(spec).memories.ident), (org,)).fetchall()
    assert rows == [("org", kept, None, "the release train leaves on thursdays")]


# write_policy sampling --------------------------------------------------------------------------
def _sampled(name: str, sampling: float) -> str:
    policy = ("  write_policy:\n    episodic:\n      mode: auto\n"
              f"      sampling: {sampling}\n      justification: scan events are many\n"
              if sampling < 1 else "")
    return f"""\
version: 1
agent: samp_{name}
anchor:
  keys: [workspace_id]
  required_at_write: [workspace_id]
typology:
  cycle: [episodic]
  workspace: [episodic, semantic]
tiers:
  - name: cycle
    boundary: {{lifecycle: cycle_end}}
  - name: workspace
    boundary: {{scope_change: workspace_id}}
    persistent: true
persistence:
  store: {{schema: samp_{name}, prefix: samp{name}}}
retrieval:
  signals: [lexical, recency]
behavior:
{policy}"""


def _ids(n: int) -> list[uuid.UUID]:
    return [uuid.uuid5(uuid.NAMESPACE_URL, f"scan-{i}") for i in range(n)]


@pytest.mark.parametrize("sampling", [0.25, 1.0])
def test_auto_write_sampling_writes_the_share_seeded_by_row_id_and_journals_the_rest(
        pg: PostgresHandle, tmp_path: Path, admin_conn: psycopg.Connection[Any],
        sampling: float) -> None:
    name = uuid.uuid4().hex[:6]
    spec = _custom(tmp_path, pg, name, _sampled(name, sampling))
    ws = f"ws-{uuid.uuid4().hex[:8]}"
    ids = _ids(80)
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine:
        results = [engine.observe({"workspace_id": ws}, "cycle", f"scan {i} finished clean",
                                  scope_id="c1", memory_id=mid) for i, mid in enumerate(ids)]
        with engine.tenant({"workspace_id": ws}) as mem:  # the tenant path decides alike
            again = mem.observe("cycle", "scan 0 finished clean", scope_id="c1",
                                memory_id=ids[0])
        retried = [engine.observe({"workspace_id": ws}, "cycle", f"scan {i} finished clean",
                                  scope_id="c1", memory_id=mid) for i, mid in enumerate(ids)]
    tables = agent_tables(spec)
    stored = {r[0] for r in admin_conn.execute(sql.SQL(
        "SELECT id FROM {} WHERE {} = %s").format(tables.memories.ident, tables.tenant),
        (ws,)).fetchall()}
    journal = admin_conn.execute(sql.SQL(
        "SELECT memory_id, payload FROM {} WHERE {} = %s AND kind = %s").format(
        tables.events.ident, tables.tenant), (ws, SAMPLED_OUT_EVENT)).fetchall()
    out = [r.id for r in results if r.sampled_out]
    assert stored == {r.id for r in results if not r.sampled_out}
    assert again.sampled_out == results[0].sampled_out
    assert [r.sampled_out for r in retried] == [r.sampled_out for r in results]
    if sampling == 1.0:
        assert len(stored) == 80 and journal == []
        return
    # seeded by the row id: the same ids give the same share every run, near the declared one
    assert out == [i for i in ids if not sampled_in(i, sampling)]
    assert 0.1 < len(stored) / 80 < 0.4
    # a retry (the same id, so the same decision) journals nothing new: one event per id
    assert sorted(r[0] for r in journal) == sorted(out)
    payload = journal[0][1]
    assert payload["sampling"] == sampling and payload["tier"] == "cycle"
    assert "content" not in payload and len(payload["content_sha256"]) == 64


def test_sampling_leaves_keyed_writes_alone(
        pg: PostgresHandle, tmp_path: Path, admin_conn: psycopg.Connection[Any]) -> None:
    name = uuid.uuid4().hex[:6]
    spec = _custom(tmp_path, pg, name, _sampled(name, 0.01))
    ws = f"ws-{uuid.uuid4().hex[:8]}"
    out = next(i for i in _ids(50) if not sampled_in(i, 0.01))
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine, \
            engine.tenant({"workspace_id": ws}) as mem:
        assert mem.observe("cycle", "an unkeyed scan event", scope_id="c1",
                           memory_id=out).sampled_out
        keyed = mem.observe("workspace", "the workspace's scan cadence is daily",
                            typology="episodic", key="cadence", memory_id=out)
        assert not keyed.sampled_out
    assert [r[1] for r in _rows(admin_conn, spec, ws, "workspace")] == [
        "the workspace's scan cadence is daily"]
    assert _rows(admin_conn, spec, ws, "cycle") == []
