"""Sanitization gates (seed 003 §14): one test per transform, as the application role.

A test spec declares one gate per transform over rows the test writes directly; each
crossing is asked for with ``mem.cross`` and read back from ``audit_sanitization``.
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
from primitives.spec import AgentSpec, SanitizationPolicy, load_spec_text
from primitives.spec._policies import HEDGE_TIERS
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")

GATES_SPEC = """\
version: 1
agent: gate_test
anchor:
  keys: [team_id, project_id]
  required_at_write: [team_id, project_id]
typology:
  team: [episodic, semantic, procedural]
tiers:
  - {name: team, boundary: {scope_change: team_id}, persistent: true}
persistence:
  checkpointer: {enabled: false}
  store: {schema: gate_test, prefix: gt}
retrieval:
  signals: [lexical]
behavior:
  write_policy:
    semantic: {mode: auto, justification: the tests write facts directly}
discipline:
  sanitization:
    - {name: strip_team, from: team.semantic, to: shared, strip: [project_id],
       policy: team_strip}
    - {name: strip_loose, from: team.semantic, to: shared, strip: [project_id],
       policy: team_strip, keep_if_specific: false}
    - {name: strip_pii, from: team.semantic, to: shared, policy: pii_strip}
    - {name: hedge_team, from: team.procedural, to: chat, transform: hedge_map,
       policy: hedges}
    - {name: aggregate_team, from: team.episodic, to: shared, transform: aggregate_only,
       min_sources: 3}
    - {name: pass_through, from: team.semantic, to: archive, transform: none,
       strip: [project_id], policy: team_strip}
"""

POLICIES = {
    "team_strip": SanitizationPolicy(
        kind="sanitization", name="team_strip", strip_keys=["host"],
        strip_patterns=[r"\bprj-[0-9]+\b", r"\b10\.[0-9]+\.[0-9]+\.[0-9]+\b"],
        replacement="[team]"),
    "pii_strip": SanitizationPolicy(kind="sanitization", name="pii_strip",
                                    strip_pii=["email"], replacement="[pii]"),
    "hedges": SanitizationPolicy(
        kind="sanitization", name="hedges", transform="hedge_map",
        hedges={tier: f"<{tier}>" for tier in HEDGE_TIERS}),
}


@pytest.fixture(scope="module")
def spec(pg: PostgresHandle) -> AgentSpec:
    loaded = load_spec_text(GATES_SPEC, policies=dict(POLICIES))
    migrate([loaded], dsn=pg.admin_dsn)
    return loaded


@pytest.fixture
def engine(pg: PostgresHandle, spec: AgentSpec) -> Iterator[Engine]:
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as eng:
        yield eng


def _team() -> dict[str, str]:
    return {"team_id": f"team-{uuid.uuid4().hex[:10]}", "project_id": "apollo"}


def _audit(auditor: psycopg.Connection[Any], spec: AgentSpec, tenant: str
           ) -> list[tuple[Any, ...]]:
    tables = agent_tables(spec)
    return auditor.execute(sql.SQL(
        "SELECT memory_id, gate, from_ref, to_ref, stripped, payload FROM {} WHERE {} = %s "
        "ORDER BY seq").format(tables.audit_sanitization.ident, tables.tenant),
        (tenant,)).fetchall()


def test_strip_identifiers_removes_keys_and_their_values_from_what_crosses(
        engine: Engine, spec: AgentSpec, auditor_conn: psycopg.Connection[Any]) -> None:
    anchor = _team()
    with engine.tenant(anchor) as mem:
        row = mem.observe("team", "deploys to apollo from web-7 stall on cold caches",
                          typology="semantic",
                          envelope={"host": "web-7", "project_id": "apollo", "area": "deploy"},
                          value={"host": "web-7", "n": 3})
        [crossing] = mem.cross("strip_team", [row.id])
    assert crossing.outcome == "crossed"
    assert crossing.content == "deploys to [team] from [team] stall on cold caches"
    assert crossing.envelope == {"area": "deploy"}
    assert crossing.value == {"n": 3}
    assert sorted(crossing.stripped["keys"]) == ["host", "project_id"]
    [(memory_id, gate, frm, to, stripped, payload)] = _audit(auditor_conn, spec,
                                                            anchor["team_id"])
    assert (memory_id, gate, frm, to) == (row.id, "strip_team", "team.semantic", "shared")
    assert sorted(stripped["keys"]) == ["host", "project_id"]
    assert payload["outcome"] == "crossed"
    # the journal names what was stripped, never the values
    assert "apollo" not in str(payload) and "web-7" not in str(payload)


def test_strip_identifiers_replaces_the_policys_patterns(engine: Engine) -> None:
    text = "builds of prj-4411 on 10.2.3.4 time out after 90 seconds"
    with engine.tenant(_team()) as mem:
        row = mem.observe("team", text, typology="semantic")
        [crossing] = mem.cross("strip_team", [row.id])
        stored = mem.get(row.id)
    assert crossing.content == "builds of [team] on [team] time out after 90 seconds"
    assert crossing.stripped["patterns"] == 2
    assert stored is not None and stored.content == text  # the memory itself is unchanged


def test_strip_identifiers_replaces_what_the_pii_detector_finds(
        engine: Engine, spec: AgentSpec, auditor_conn: psycopg.Connection[Any]) -> None:
    anchor = _team()
    with engine.tenant(anchor) as mem:
        row = mem.observe("team", "escalations go to ops.lead@example.com within the hour",
                          typology="semantic")
        [crossing] = mem.cross("strip_pii", [row.id])
    assert crossing.content == "escalations go to [pii] within the hour"
    assert crossing.stripped["pii"] == {"email": 1}
    [audited] = _audit(auditor_conn, spec, anchor["team_id"])
    assert audited[4]["pii"] == {"email": 1}
    assert "example.com" not in str(audited[5])


def test_keep_if_specific_keeps_a_row_that_means_nothing_once_stripped(
        engine: Engine, spec: AgentSpec, auditor_conn: psycopg.Connection[Any]) -> None:
    anchor = _team()
    with engine.tenant(anchor) as mem:
        specific = mem.observe("team", "apollo: prj-17", typology="semantic")
        general = mem.observe("team", "apollo retries hide flaky tests", typology="semantic")
        kept, crossed = mem.cross("strip_team", [specific.id, general.id])
        [loose] = mem.cross("strip_loose", [specific.id])
    assert (kept.memory_id, kept.outcome, kept.content) == (specific.id, "kept_specific", None)
    assert (crossed.outcome, crossed.content) == ("crossed", "[team] retries hide flaky tests")
    # without keep_if_specific the same row crosses, stripped
    assert (loose.outcome, loose.content) == ("crossed", "[team]: [team]")
    outcomes = [(r[1], r[5]["outcome"]) for r in _audit(auditor_conn, spec, anchor["team_id"])]
    assert outcomes == [("strip_team", "kept_specific"), ("strip_team", "crossed"),
                        ("strip_loose", "crossed")]


@pytest.mark.parametrize(("provenance", "tier"), [
    ({"canonical_ref": "rule:R-12@v3"}, "canonical"),
    ({"corroborated_by": ["source:a", "source:b"]}, "corroborated"),
    ({}, "single_observation"),
    ({"derived_from": ["0b6f5d6e-0000-4000-8000-000000000000"]}, "inferred"),
    ({"contradicted_by": ["source:c"], "corroborated_by": ["source:a", "source:b"]},
     "contradicted"),
])
def test_hedge_map_phrases_each_provenance_tier(
        engine: Engine, spec: AgentSpec, admin_conn: psycopg.Connection[Any],
        provenance: dict[str, Any], tier: str) -> None:
    anchor = _team()
    with engine.tenant(anchor) as mem:
        row = mem.observe("team", "rollbacks need two approvals", typology="procedural")
    if provenance:  # provenance is the engine's to write: set it as the owner would
        tables = agent_tables(spec)
        admin_conn.execute(sql.SQL("UPDATE {} SET provenance = %s::jsonb WHERE id = %s").format(
            tables.memories.ident), (psycopg.types.json.Jsonb(provenance), row.id))
    with engine.tenant(anchor) as mem:
        [crossing] = mem.cross("hedge_team", [row.id])
    assert crossing.provenance_tier == tier
    assert crossing.content == f"<{tier}> rollbacks need two approvals"


def test_a_hedge_map_gate_needs_a_phrasing_for_every_tier() -> None:
    partial = SanitizationPolicy(kind="sanitization", name="hedges", transform="hedge_map",
                                 hedges={"canonical": "Per the rules,"})
    broken = load_spec_text(GATES_SPEC, policies={**POLICIES, "hedges": partial})
    from primitives.compile._gates import resolve_gate
    with pytest.raises(SpecError, match="no phrasing for corroborated"):
        resolve_gate(broken, "hedge_team")


def test_aggregate_only_holds_a_fact_until_min_sources_corroborate_it(
        engine: Engine, spec: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    anchor = _team()
    with engine.tenant(anchor) as mem:
        row = mem.observe("team", "night builds fail when the cache is cold",
                          typology="episodic", source="ci-1")
    tables = agent_tables(spec)

    def evidence(*keys: str) -> None:
        admin_conn.execute(sql.SQL(
            "UPDATE {} SET provenance = jsonb_build_object('corroborated_by', %s::jsonb) "
            "WHERE id = %s").format(tables.memories.ident),
            (psycopg.types.json.Jsonb(list(keys)), row.id))

    evidence("source:ci-1", "source:ci-2")  # its own source again: still two
    with engine.tenant(anchor) as mem:
        [below] = mem.cross("aggregate_team", [row.id])
    assert (below.outcome, below.sources, below.content) == ("below_min_sources", 2, None)
    evidence("source:ci-1", "source:ci-2", "source:ci-3")
    with engine.tenant(anchor) as mem:
        [at] = mem.cross("aggregate_team", [row.id])
    assert (at.outcome, at.sources) == ("crossed", 3)
    assert at.content == "night builds fail when the cache is cold"


def test_transform_none_crosses_unchanged_and_is_journalled(
        engine: Engine, spec: AgentSpec, auditor_conn: psycopg.Connection[Any]) -> None:
    anchor = _team()
    with engine.tenant(anchor) as mem:
        row = mem.observe("team", "apollo prj-9 ships on fridays", typology="semantic",
                          envelope={"project_id": "apollo"})
        [crossing] = mem.cross("pass_through", [row.id])
    assert crossing.outcome == "crossed"
    assert crossing.content == "apollo prj-9 ships on fridays"
    assert crossing.envelope == {"project_id": "apollo"}
    [audited] = _audit(auditor_conn, spec, anchor["team_id"])
    assert audited[1:4] == ("pass_through", "team.semantic", "archive")
    assert audited[4] == {"keys": [], "patterns": 0, "pii": {}}


def test_a_crossing_carries_only_the_gates_from_rows_of_its_own_tenant(
        engine: Engine) -> None:
    one, two = _team(), _team()
    with engine.tenant(one) as mem:
        mine = mem.observe("team", "caches warm in ten minutes", typology="semantic")
        episode = mem.observe("team", "cache warmed slowly today", typology="episodic")
    with engine.tenant(two) as mem:
        theirs = mem.observe("team", "their caches never warm", typology="semantic")
        # another tenant's id, and a row outside the gate's from, cross nothing
        assert mem.cross("strip_team", [mine.id]) == []
    with engine.tenant(one) as mem:
        assert mem.cross("strip_team", [episode.id, theirs.id]) == []
        assert [c.memory_id for c in mem.cross("strip_team")] == [mine.id]


def test_an_unknown_gate_is_refused_by_name(engine: Engine) -> None:
    with engine.tenant(_team()) as mem, pytest.raises(SpecError, match="no sanitization gate"):
        mem.cross("strip_everything")
