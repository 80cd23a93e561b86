"""Two ``primitives maintain`` runs at once over the same tenants: they take turns per batch
(a transaction-scoped advisory lock per tenant), so no idle scope is closed, compounded or
promoted twice."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives._project import migrate
from primitives.compile import agent_tables
from primitives.db._names import MAINTAINER_ROLE
from primitives.engine import Engine
from primitives.lifecycle import MaintainReport, maintain
from primitives.lifecycle._maintain import tenant_lock_statement
from primitives.lifecycle._passes import passes_for
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")


def _spec(tmp_path: Path, pg: PostgresHandle) -> AgentSpec:
    name = uuid.uuid4().hex[:6]
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"""\
version: 1
agent: twin_{name}
anchor:
  keys: [operator_id]
  required_at_write: [operator_id]
typology:
  session: [episodic]
  main: [episodic, semantic]
tiers:
  - name: session
    boundary: {{lifecycle: session_end, idle_after: 30d}}
  - name: main
    boundary: {{scope_change: operator_id}}
    persistent: true
persistence:
  store: {{schema: twin_{name}, prefix: twin{name}}}
retrieval:
  signals: [lexical, recency]
behavior:
  promotion:
    - from: main.episodic
      to: main.semantic
      criteria: corroboration
      at: continuous
      min_corroborations: 2
      justification: two operators' reports make a fact
""", encoding="utf-8")
    spec = load_spec(path)
    migrate([spec], dsn=pg.admin_dsn)
    return spec


def _idle_sessions(pg: PostgresHandle, spec: AgentSpec, admin: psycopg.Connection[Any],
                   count: int) -> list[str]:
    """``count`` operators, each with one session 31 days idle holding one claim reported by
    two sources: its idle close compounds them into one row corroborated twice, which the
    corroboration pass promotes into a fact."""
    operators = [f"op-{uuid.uuid4().hex[:10]}" for _ in range(count)]
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine:
        for op in operators:
            with engine.tenant({"operator_id": op}) as mem:
                for source in ("src-a", "src-b"):
                    mem.observe("session", "dry runs catch the broken migrations",
                                scope_id="s1", source=source)
    tables = agent_tables(spec)
    admin.execute(sql.SQL(
        "UPDATE {} SET last_activity_at = now() - interval '31 days' WHERE {} = ANY(%s)").format(
        tables.scopes.ident, tables.tenant), (operators,))
    return operators


def _outcome(admin: psycopg.Connection[Any], spec: AgentSpec, operators: list[str]
             ) -> dict[str, tuple[int, int, int, int]]:
    """Per operator: main.episodic rows, main.semantic rows, idle-close events, promoted
    events."""
    tables = agent_tables(spec)
    rows = admin.execute(sql.SQL(
        "SELECT o.op, "
        "(SELECT count(*) FROM {mem} AS m WHERE m.{t} = o.op AND m.tier = 'main' "
        " AND m.typology = 'episodic'), "
        "(SELECT count(*) FROM {mem} AS m WHERE m.{t} = o.op AND m.tier = 'main' "
        " AND m.typology = 'semantic'), "
        "(SELECT count(*) FROM {ev} AS e WHERE e.{t} = o.op AND e.kind = 'scope_idle_closed'), "
        "(SELECT count(*) FROM {ev} AS e WHERE e.{t} = o.op AND e.kind = 'promoted') "
        "FROM unnest(%s::text[]) AS o(op)").format(
        mem=tables.memories.ident, ev=tables.events.ident, t=tables.tenant),
        (operators,)).fetchall()
    return {r[0]: (int(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in rows}


def test_a_second_maintain_waits_for_the_first_ones_batch_and_then_promotes_nothing_twice(
        pg: PostgresHandle, tmp_path: Path, admin_conn: psycopg.Connection[Any]) -> None:
    """The first run is held mid-batch: it has taken its tenants' lock and done its passes,
    uncommitted. The second waits on the lock instead of passing over the rows the first
    holds; once the first commits, the second finds everything done."""
    spec = _spec(tmp_path, pg)
    [op] = _idle_sessions(pg, spec, admin_conn, 1)
    tables = agent_tables(spec)
    reports: list[MaintainReport] = []
    with psycopg.connect(pg.admin_dsn) as first:
        first.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(MAINTAINER_ROLE)))
        first.execute(tenant_lock_statement(tables), {"tenants": [op]})
        second = threading.Thread(target=lambda: reports.append(
            maintain([spec], pg.admin_dsn)), daemon=True)
        second.start()
        deadline = time.monotonic() + 20
        waiting = False
        while time.monotonic() < deadline and not waiting:
            waiting = bool(admin_conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            ).fetchone() == (1,))
            time.sleep(0.05)
        assert waiting and second.is_alive(), "the second run did not wait for the first"
        # the first run's batch: its passes, as maintain runs them, then COMMIT
        params = {"tenants": [op], "now": datetime.now(UTC), "actor": "first"}
        for step in passes_for(spec, tables, embedding=False, similarity="trigram"):
            first.execute(step.statement, params)
        first.commit()
    second.join(timeout=60)
    assert not second.is_alive()
    [report] = reports
    assert report.agents[spec.agent]["idle_scopes"] == 0
    assert sum(v for k, v in report.agents[spec.agent].items() if k.startswith("promote")) == 0
    assert _outcome(admin_conn, spec, [op]) == {op: (1, 1, 1, 2)}


def test_two_maintains_at_once_close_compound_and_promote_each_tenant_once(
        pg: PostgresHandle, tmp_path: Path, admin_conn: psycopg.Connection[Any]) -> None:
    spec = _spec(tmp_path, pg)
    operators = _idle_sessions(pg, spec, admin_conn, 12)
    reports: list[MaintainReport] = []
    start = threading.Barrier(2)

    def run() -> None:
        start.wait()
        reports.append(maintain([spec], pg.admin_dsn, batch_tenants=3))

    threads = [threading.Thread(target=run, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(reports) == 2
    assert sum(r.agents[spec.agent]["idle_scopes"] for r in reports) == 12
    assert _outcome(admin_conn, spec, operators) == {op: (1, 1, 1, 2) for op in operators}


def test_an_end_scope_beside_a_maintain_batch_of_its_tenant_compounds_nothing_twice(
        pg: PostgresHandle, tmp_path: Path, admin_conn: psycopg.Connection[Any]) -> None:
    """A maintain batch closes an idle session holding an action-linked row (it compounds
    the row upward; the row stays) while the application ends the same session. The
    application's ``end_scope`` waits for the batch's tenant lock, then finds the row in the
    ledger: it compounds and corroborates nothing."""
    spec = _spec(tmp_path, pg)
    [op] = _idle_sessions(pg, spec, admin_conn, 1)
    tables = agent_tables(spec)
    ended: list[Any] = []
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine:
        with engine.tenant({"operator_id": op}) as mem:
            rows = admin_conn.execute(sql.SQL(
                "SELECT id FROM {} WHERE {} = %s ORDER BY created_at").format(
                tables.memories.ident, tables.tenant), (op,)).fetchall()
            mem.link_action("review-1", [r[0] for r in rows], "published_decision")
        with psycopg.connect(pg.admin_dsn) as first:
            first.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(MAINTAINER_ROLE)))
            first.execute(tenant_lock_statement(tables), {"tenants": [op]})

            def end() -> None:
                with engine.tenant({"operator_id": op}) as mem:
                    ended.append(mem.end_scope("session", "s1"))

            app = threading.Thread(target=end, daemon=True)
            app.start()
            deadline = time.monotonic() + 20
            waiting = False
            while time.monotonic() < deadline and not waiting:
                waiting = admin_conn.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                    "AND NOT granted").fetchone() == (1,)
                time.sleep(0.05)
            assert waiting and app.is_alive(), "end_scope did not wait for the batch"
            params = {"tenants": [op], "now": datetime.now(UTC), "actor": "first"}
            for step in passes_for(spec, tables, embedding=False, similarity="trigram"):
                first.execute(step.statement, params)
            first.commit()
        app.join(timeout=60)
    [result] = ended
    assert (result.promoted, result.corroborated, result.compounded) == (0, 0, 0)
    assert _outcome(admin_conn, spec, [op]) == {op: (1, 1, 1, 2)}
    assert admin_conn.execute(sql.SQL(
        "SELECT count(*) FROM {} WHERE {} = %s AND kind IN ('compounded', 'corroborated')"
    ).format(tables.events.ident, tables.tenant), (op,)).fetchone() == (2,)
