"""``behavior.promotion[].idempotency_key`` on every path that promotes a row: compounding at a
scope's end, ``references`` promotion at a tick, extraction at consolidation. A repeat is a
no-op (nothing written, nothing journalled), never a duplicate; keyed ``source_id`` a row is
promoted once between the rules of its source (and criteria), keyed ``source_and_target``
once per target.

Every write, boundary and tick runs through the engine as the application role; the admin
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
from primitives.errors import SpecError
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")


def _custom(tmp_path: Path, pg: PostgresHandle, name: str, text: str) -> AgentSpec:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    spec = load_spec(path)
    migrate([spec], dsn=pg.admin_dsn)
    return spec


def _count(conn: psycopg.Connection[Any], spec: AgentSpec, tenant: str, table: str,
           where: str, *params: Any) -> int:
    tables = agent_tables(spec)
    row = conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE {} = %s AND {}").format(
        getattr(tables, table).ident, tables.tenant, sql.SQL(where)),  # type: ignore[arg-type]
        (tenant, *params)).fetchone()
    assert row is not None
    return int(row[0])


def _promoted(conn: psycopg.Connection[Any], spec: AgentSpec, tenant: str, tier: str
              ) -> list[tuple[str, list[str]]]:
    tables = agent_tables(spec)
    return [(r[0], r[1]) for r in conn.execute(sql.SQL(
        "SELECT typology, provenance -> 'derived_from' FROM {} WHERE {} = %s AND tier = %s "
        "ORDER BY typology").format(tables.memories.ident, tables.tenant),
        (tenant, tier)).fetchall()]


# compounding at a scope's end -------------------------------------------------------------------
def _compounding(name: str, key: str, targets: tuple[str, ...]) -> str:
    rules = "".join(f"""\
    - from: cycle.episodic
      to: workspace.{target}
      criteria: compounding
      at: tier_boundary
      dedup_similarity: 0.9
      idempotency_key: {key}
      justification: one cycle observation, {len(targets)} target(s)
""" for target in targets)
    return f"""\
version: 1
agent: cmp_{name}
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
  store: {{schema: cmp_{name}, prefix: cmp{name}}}
retrieval:
  signals: [lexical, recency]
behavior:
  promotion:
{rules}"""


def test_ending_a_scope_again_never_compounds_an_action_linked_row_twice(
        pg: PostgresHandle, tmp_path: Path, admin_conn: psycopg.Connection[Any]) -> None:
    """An action-linked row stays in its closed scope; ending the scope again (or a late
    write reopening it) must not compound it a second time: the ledger already holds it, so
    the repeat corroborates nothing, journals no ``compounded`` or ``corroborated`` event
    and leaves the promoted row's ``derived_from`` as it was."""
    name = uuid.uuid4().hex[:6]
    spec = _custom(tmp_path, pg, name, _compounding(name, "source_id", ("episodic",)))
    ws = f"ws-{uuid.uuid4().hex[:8]}"
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine, \
            engine.tenant({"workspace_id": ws}) as mem:
        row = mem.observe("cycle", "the scanner retries timeouts twice", scope_id="c1")
        mem.link_action("finding-1", [row.id], "published_finding")
        first = mem.end_scope("cycle", "c1")
        assert (first.promoted, first.kept) == (1, 1)
        again = mem.end_scope("cycle", "c1")
        assert (again.promoted, again.corroborated, again.compounded, again.kept) == (0, 0, 0, 1)
    assert _promoted(admin_conn, spec, ws, "workspace") == [("episodic", [str(row.id)])]
    assert _count(admin_conn, spec, ws, "events", "kind = %s", "compounded") == 1
    assert _count(admin_conn, spec, ws, "events", "kind = %s", "corroborated") == 0
    assert _count(admin_conn, spec, ws, "promotions", "source_id = %s", row.id) == 1


@pytest.mark.parametrize(("key", "typologies"), [
    ("source_and_target", ["episodic", "semantic"]),
    ("source_id", ["episodic"]),
])
def test_the_idempotency_key_decides_how_many_compounding_targets_a_row_reaches(
        pg: PostgresHandle, tmp_path: Path, admin_conn: psycopg.Connection[Any],
        key: str, typologies: list[str]) -> None:
    """Two compounding rules read the same cycle rows. Keyed on (source, target) a row is
    compounded into each target once; keyed on the source alone, the first rule in spec
    order takes it and the second does not. Ending the scope again adds nothing."""
    name = uuid.uuid4().hex[:6]
    spec = _custom(tmp_path, pg, name, _compounding(name, key, ("episodic", "semantic")))
    ws = f"ws-{uuid.uuid4().hex[:8]}"
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine, \
            engine.tenant({"workspace_id": ws}) as mem:
        row = mem.observe("cycle", "the scanner retries timeouts twice", scope_id="c1")
        mem.link_action("finding-1", [row.id], "published_finding")
        assert mem.end_scope("cycle", "c1").promoted == len(typologies)
        again = mem.end_scope("cycle", "c1")
        assert (again.promoted, again.corroborated) == (0, 0)
    assert _promoted(admin_conn, spec, ws, "workspace") == [
        (typ, [str(row.id)]) for typ in typologies]
    assert _count(admin_conn, spec, ws, "promotions", "source_id = %s", row.id) == len(
        typologies)


# references at a tick ---------------------------------------------------------------------------
def _referencing(name: str, key: str) -> str:
    rules = "".join(f"""\
    - from: wm.episodic
      to: cwm.{target}
      criteria: references
      at: tick
      min_references: 2
      window_ticks: 4
      idempotency_key: {key}
      justification: one working item, two targets
""" for target in ("episodic", "semantic"))
    return f"""\
version: 1
agent: ref_{name}
anchor:
  keys: [user_id]
  required_at_write: [user_id]
typology:
  wm: [episodic]
  cwm: [episodic, semantic]
  long_term: [episodic]
tiers:
  - name: wm
    boundary: {{lifecycle: job_end}}
    ttl_ticks: 3
  - name: cwm
    boundary: {{lifecycle: session_end}}
    ttl_ticks: 10
  - name: long_term
    boundary: {{scope_change: user_id}}
    persistent: true
persistence:
  store: {{schema: ref_{name}, prefix: ref{name}}}
retrieval:
  signals: [lexical, recency]
behavior:
  promotion:
{rules}determinism:
  clock: ticks
"""


@pytest.mark.parametrize(("key", "typologies"), [
    ("source_and_target", ["episodic", "semantic"]),
    ("source_id", ["episodic"]),
])
def test_the_idempotency_key_decides_how_many_references_targets_a_row_reaches(
        pg: PostgresHandle, tmp_path: Path, admin_conn: psycopg.Connection[Any],
        key: str, typologies: list[str]) -> None:
    """A working item referenced twice qualifies for two ``references`` rules; it is
    action-linked, so it stays in WM once promoted. Keyed on (source, target) each rule
    promotes it once; keyed on the source alone, the first rule's ledger row refuses the
    second's. Later ticks promote nothing more."""
    name = uuid.uuid4().hex[:6]
    spec = _custom(tmp_path, pg, name, _referencing(name, key))
    user = f"user-{uuid.uuid4().hex[:8]}"
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine, \
            engine.tenant({"user_id": user}) as mem:
        item = mem.observe("wm", "the budget meeting moved to friday", scope_id="job-1")
        mem.link_action("decision-1", [item.id], "decided")
        mem.use([item.id])
        mem.use([item.id])
        assert mem.tick(into_scope="s1").promoted == len(typologies)
        assert mem.tick(into_scope="s1").promoted == 0
        assert [r.id for r in mem.ticked("wm")] == [item.id]  # linked: it stayed
    assert _promoted(admin_conn, spec, user, "cwm") == [
        (typ, [str(item.id)]) for typ in typologies]
    assert _count(admin_conn, spec, user, "events", "kind = %s", "promoted") == len(
        typologies)


# extraction at consolidation --------------------------------------------------------------------
def test_an_extraction_rule_keyed_on_source_and_target_is_refused_at_load(
        tmp_path: Path) -> None:
    """Consolidation claims a source episode once for every target of its source (one
    extractor call derives them all), so a repeat derives nothing; a per-target key cannot
    be honoured and is refused, naming the rule."""
    path = tmp_path / "ext.yaml"
    path.write_text("""\
version: 1
agent: ext_refused
anchor:
  keys: [user_id]
  required_at_write: [user_id]
typology:
  long_term: [episodic, semantic]
  session: [episodic]
tiers:
  - name: session
    boundary: {lifecycle: session_end}
  - name: long_term
    boundary: {scope_change: user_id}
    persistent: true
persistence:
  store: {schema: ext_refused, prefix: extr}
retrieval:
  signals: [lexical, recency]
behavior:
  promotion:
    - from: long_term.episodic
      to: long_term.semantic
      criteria: extraction
      at: session_end
      idempotency_key: source_and_target
      justification: one fact per episode and target
""", encoding="utf-8")
    with pytest.raises(SpecError, match="idempotency_key: source_and_target"):
        load_spec(path)
