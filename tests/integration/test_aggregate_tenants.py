"""Aggregation across tenants (issue 19): an ``aggregate_only`` gate with ``min_tenants``.

The publish trigger runs as the writer and sees one tenant, so it holds the row; the
maintain pass (the maintainer sees every tenant) publishes each held row once enough
distinct tenants hold the same normalised content. Writes, claims and audit reads run as
the application and auditor roles.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives._project import migrate
from primitives.compile import agent_tables
from primitives.engine import Engine
from primitives.errors import SpecError
from primitives.lifecycle import maintain
from primitives.spec import AgentSpec, load_spec_text
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")

EVENT = "fleet.pattern.seen"

SPEC = """\
version: 1
agent: aggregate_test
anchor:
  keys: [team_id]
  required_at_write: [team_id]
typology:
  team: [episodic, semantic]
tiers:
  - {name: team, boundary: {scope_change: team_id}, persistent: true}
persistence:
  checkpointer: {enabled: false}
  store: {schema: aggregate_test, prefix: ag}
retrieval:
  signals: [lexical]
behavior:
  write_policy:
    semantic: {mode: auto, justification: the tests write facts directly}
discipline:
  sanitization:
    - {name: fleet, from: team.semantic, to: fleet_signal, transform: aggregate_only,
       strip: [team_id], min_tenants: 3}
  visibility:
    rls: session_var
    cross_context: event_driven
    events: [fleet.pattern.seen]
"""


@pytest.fixture(scope="module")
def spec(pg: PostgresHandle) -> AgentSpec:
    loaded = load_spec_text(SPEC)
    migrate([loaded], dsn=pg.admin_dsn)
    return loaded


@pytest.fixture
def engine(pg: PostgresHandle, spec: AgentSpec) -> Iterator[Engine]:
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as eng:
        yield eng


def _team() -> dict[str, str]:
    return {"team_id": f"team-{uuid.uuid4().hex[:10]}"}


def _outcomes(auditor: psycopg.Connection[Any], spec: AgentSpec, tenant: str
              ) -> list[tuple[str, str, Any]]:
    """(outcome, via, tenants) of the tenant's sanitization audit rows, in journal order."""
    tables = agent_tables(spec)
    return [(p["outcome"], p["via"], p.get("tenants")) for (p,) in auditor.execute(sql.SQL(
        "SELECT payload FROM {} WHERE {} = %s ORDER BY seq").format(
        tables.audit_sanitization.ident, tables.tenant), (tenant,)).fetchall()]


def test_a_fact_held_by_min_tenants_tenants_is_published_in_each_once(
        pg: PostgresHandle, engine: Engine, spec: AgentSpec,
        auditor_conn: psycopg.Connection[Any]) -> None:
    fact = "Night builds fail when the artifact cache is cold"
    spellings = [fact, "night builds  fail when the ARTIFACT cache is cold ", fact.lower()]
    teams = [_team() for _ in range(4)]
    ids = []
    for anchor, text in zip(teams[:2], spellings, strict=False):
        with engine.tenant(anchor) as mem:
            ids.append(mem.observe("team", text, typology="semantic").id)
    with engine.tenant(teams[3]) as mem:  # a fact only one tenant holds
        lonely = mem.observe("team", "our lint job flakes on mondays", typology="semantic")
    # written: held by the trigger, which sees one tenant
    assert _outcomes(auditor_conn, spec, teams[0]["team_id"]) == [
        ("below_min_tenants", "outbox", None)]
    report = maintain([spec], pg.admin_dsn)
    assert report.agents["aggregate_test"]["aggregate_fleet"] == 0  # two tenants: not enough
    for anchor in teams[:2]:
        with engine.tenant(anchor) as mem:
            assert mem.claim_outbox(consumer="fleet") == []

    with engine.tenant(teams[2]) as mem:
        ids.append(mem.observe("team", spellings[2], typology="semantic").id)
    report = maintain([spec], pg.admin_dsn, batch_tenants=1)
    assert report.agents["aggregate_test"]["aggregate_fleet"] == 3
    for anchor, memory_id in zip(teams[:3], ids, strict=True):
        tenant = anchor["team_id"]
        with engine.tenant(anchor) as mem:
            [entry] = mem.claim_outbox(consumer="fleet")
        assert (entry.event, entry.gate, entry.to, entry.memory_id) == (
            EVENT, "fleet", "fleet_signal", memory_id)
        assert tenant not in str(entry.payload)
        assert _outcomes(auditor_conn, spec, tenant)[-1] == ("crossed", "aggregate_tenants", 3)
    with engine.tenant(teams[3]) as mem:
        assert mem.claim_outbox(consumer="fleet") == []
    assert [o for o, _, _ in _outcomes(auditor_conn, spec, teams[3]["team_id"])] == [
        "below_min_tenants"]
    assert lonely.id not in ids

    again = maintain([spec], pg.admin_dsn)
    assert again.agents["aggregate_test"]["aggregate_fleet"] == 0
    with engine.tenant(teams[0]) as mem:
        assert mem.claim_outbox(consumer="fleet") == []


def test_min_tenants_needs_aggregate_only_on_an_event_driven_agent() -> None:
    with pytest.raises(SpecError, match="min_tenants counts tenants for an aggregate_only"):
        load_spec_text(SPEC.replace("transform: aggregate_only", "transform: none"))
    with pytest.raises(SpecError, match=r"needs\s+discipline.visibility.cross_context"):
        load_spec_text(SPEC.replace("cross_context: event_driven", "cross_context: none")
                       .replace("    events: [fleet.pattern.seen]\n", ""))
