"""``primitives maintain``: the lifecycle job as the maintainer role, per batch of tenants."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives._project import migrate
from primitives.cli import main
from primitives.compile import agent_tables
from primitives.engine import Engine
from primitives.lifecycle import maintain
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = ROOT / "agents" / "operations_agent.yaml"
pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")


@pytest.fixture(scope="module")
def operations(pg: PostgresHandle) -> AgentSpec:
    spec = load_spec(OPERATIONS)
    migrate([spec], dsn=pg.admin_dsn)
    return spec


def _idle_sessions(pg: PostgresHandle, spec: AgentSpec, admin: psycopg.Connection[Any],
                   count: int) -> list[str]:
    """``count`` operators, each with one session 31 days idle holding one episode."""
    operators = [f"op-x{uuid.uuid4().hex[:10]}" for _ in range(count)]
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine:
        for op in operators:
            with engine.tenant({"operator_id": op}) as mem:
                mem.observe("operator_session", f"{op} paused a review of world 3",
                            typology="episodic", scope_id="s1")
    tables = agent_tables(spec)
    admin.execute(sql.SQL(
        "UPDATE {} SET last_activity_at = now() - interval '31 days' WHERE {} = ANY(%s)").format(
        tables.scopes.ident, tables.tenant), (operators,))
    return operators


def _open_sessions(admin: psycopg.Connection[Any], spec: AgentSpec, operators: list[str]) -> int:
    tables = agent_tables(spec)
    row = admin.execute(sql.SQL(
        "SELECT count(*) FROM {} WHERE {} = ANY(%s) AND closed_at IS NULL").format(
        tables.scopes.ident, tables.tenant), (operators,)).fetchone()
    assert row is not None
    return int(row[0])


def test_the_app_role_cannot_become_the_maintainer(app_conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        app_conn.execute("SET ROLE primitives_maintainer")


def test_the_maintainer_cannot_log_in_and_bypasses_nothing(
        admin_conn: psycopg.Connection[Any]) -> None:
    row = admin_conn.execute(
        "SELECT rolcanlogin, rolsuper, rolbypassrls FROM pg_roles "
        "WHERE rolname = 'primitives_maintainer'").fetchone()
    assert row == (False, False, False)
    members = admin_conn.execute(
        "SELECT r.rolname FROM pg_auth_members AS m JOIN pg_roles AS r ON r.oid = m.member "
        "JOIN pg_roles AS g ON g.oid = m.roleid WHERE g.rolname = 'primitives_maintainer' "
        "AND r.rolname IN ('primitives_app', 'primitives_auditor', 'primitives_owner')"
    ).fetchall()
    assert members == []


def test_maintain_closes_idle_sessions_in_batches_and_a_second_run_changes_nothing(
        pg: PostgresHandle, operations: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    operators = _idle_sessions(pg, operations, admin_conn, 5)
    seen: list[tuple[int, int]] = []
    report = maintain([operations], pg.admin_dsn, batch_tenants=2,
                      progress=lambda agent, done, total: seen.append((done, total)))
    assert report.agents["operations"]["idle_scopes"] >= 5
    assert report.batches == len(seen) and seen[-1][0] == seen[-1][1]
    assert _open_sessions(admin_conn, operations, operators) == 0
    again = maintain([operations], pg.admin_dsn, batch_tenants=50)
    assert again.agents["operations"]["idle_scopes"] == 0
    tables = agent_tables(operations)
    promoted = admin_conn.execute(sql.SQL(
        "SELECT count(*) FROM {} WHERE {} = ANY(%s) AND tier = 'operator'").format(
        tables.memories.ident, tables.tenant), (operators,)).fetchone()
    assert promoted == (5,)


def test_maintain_journals_as_the_maintainer_and_the_chain_verifies(
        pg: PostgresHandle, operations: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    [op] = _idle_sessions(pg, operations, admin_conn, 1)
    maintain([operations], pg.admin_dsn)
    tables = agent_tables(operations)
    kinds = [r[0] for r in admin_conn.execute(sql.SQL(
        "SELECT kind FROM {} WHERE {} = %s ORDER BY seq").format(
        tables.events.ident, tables.tenant), (op,)).fetchall()]
    assert kinds[-1] == "scope_idle_closed" and "promoted" in kinds
    broken = admin_conn.execute(
        "SELECT primitives.verify_chain(%s::regclass, %s, %s)",
        (tables.events.qualified, tables.tenant_column, op)).fetchone()
    assert broken == (None,)  # no broken link


def test_cli_maintain_prints_a_json_summary(
        pg: PostgresHandle, operations: AgentSpec, admin_conn: psycopg.Connection[Any],
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _idle_sessions(pg, operations, admin_conn, 2)
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    assert main(["maintain", str(OPERATIONS), "--json", "--batch-tenants", "10"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["agents"]["operations"]["idle_scopes"] >= 2
    assert summary["batches"] >= 1 and summary["tenants"]["operations"] >= 2


def test_a_duty_below_one_sleeps_after_each_batch_in_proportion(
        pg: PostgresHandle, operations: AgentSpec, admin_conn: psycopg.Connection[Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    _idle_sessions(pg, operations, admin_conn, 2)
    import primitives.lifecycle._maintain as runner
    slept: list[float] = []
    monkeypatch.setattr(runner.time, "sleep", slept.append)
    report = maintain([operations], pg.admin_dsn, batch_tenants=1, duty=0.25)
    assert len(slept) == report.batches and all(s > 0 for s in slept)
    slept.clear()
    maintain([operations], pg.admin_dsn, batch_tenants=1)
    assert slept == []  # full duty: no pause
    with pytest.raises(ValueError, match="duty"):
        maintain([operations], pg.admin_dsn, duty=0)


def test_maintain_names_the_rows_that_await_a_disposition(
        pg: PostgresHandle, admin_conn: psycopg.Connection[Any],
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # Spectral's persistent episodes decay by forcing function (horizon 30d): past it, each
    # awaits promotion, exemption or archive, and maintain says which
    path = ROOT / "agents" / "spectral_agent.yaml"
    spec = load_spec(path)
    migrate([spec], dsn=pg.admin_dsn)
    tables = agent_tables(spec)
    ws = f"ws-{uuid.uuid4().hex[:10]}"
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine, \
            engine.tenant({"workspace_id": ws}) as mem:
        old = mem.observe("workspace", "a scan from last quarter", typology="episodic")
        mem.observe("workspace", "a scan from today", typology="episodic")
    admin_conn.execute(sql.SQL(
        "UPDATE {} SET event_time = now() - interval '45 days' WHERE id = %s").format(
        tables.memories.ident), (old.id,))
    assert maintain([spec], pg.admin_dsn).awaiting == {}  # counted, not named, by default
    report = maintain([spec], pg.admin_dsn, list_dispositions=10_000)
    assert str(old.id) in [row["id"] for row in report.awaiting["spectral"]]
    assert report.reported["spectral"]["dispositions"] >= 1
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    assert main(["maintain", str(path), "--list-dispositions", "10000"]) == 0
    out = capsys.readouterr().out
    assert "awaiting a decision" in out and str(old.id) in out


def test_registered_jobs_run_after_each_batchs_passes_with_what_maintain_was_given(
        pg: PostgresHandle, operations: AgentSpec, admin_conn: psycopg.Connection[Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from primitives.lifecycle import JobContext, MaintenanceJob

    operators = _idle_sessions(pg, operations, admin_conn, 3)
    seen: list[tuple[list[str], object, object, int]] = []

    def count_open(ctx: JobContext) -> int:
        # the batch's passes have committed: the idle sessions are closed by now
        seen.append((list(ctx.tenants), ctx.embedder, ctx.extractor,
                     _open_sessions(admin_conn, ctx.spec, operators)))
        return len(ctx.tenants)

    def build(spec: AgentSpec, tables: Any) -> list[MaintenanceJob]:
        return [MaintenanceJob("count_open", count_open)] if spec.agent == operations.agent \
            else []

    # the test's job alone: the registered ones would take "E" and "X" for real models
    monkeypatch.setattr("primitives.lifecycle._passes.job_builders", [build])
    report = maintain([operations], pg.admin_dsn, batch_tenants=2, embedder="E",
                      extractor="X")
    tenants = [t for batch, *_ in seen for t in batch]
    assert set(operators) <= set(tenants)
    assert all(embedder == "E" and extractor == "X" for _, embedder, extractor, _ in seen)
    assert seen[-1][3] == 0
    assert report.agents[operations.agent]["count_open"] == len(tenants)
