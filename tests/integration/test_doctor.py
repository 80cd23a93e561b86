"""``primitives doctor`` on real catalogs: clean after migrate, and each broken rule named.

Every break happens in a fresh database (as the superuser, the way a careless migration
or a manual fix would), so no test leaves a broken object where others read. Roles are
cluster-wide: a test that changes one undoes it in ``finally``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from rich.console import Console

from primitives import cli
from primitives._doctor import run_doctor
from primitives._project import migrate
from primitives.audit import connect_auditor
from primitives.cli import main
from primitives.db import APP_ROLE, OWNER_ROLE, app_dsn, auditor_dsn
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.db

ROOT = Path(__file__).resolve().parents[2]
SPECS = [str(p) for p in sorted((ROOT / "agents").glob("*.yaml"))]
SPECTRAL = str(ROOT / "agents" / "spectral_agent.yaml")
WORLD = str(ROOT / "agents" / "world_agent.yaml")
MEMORIES = sql.Identifier("platform", "spectral_memories")


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "console", Console(width=300, highlight=False, soft_wrap=True))
    monkeypatch.setattr(cli, "errors", Console(width=300, stderr=True, highlight=False,
                                               soft_wrap=True))


@pytest.fixture
def use_database(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    def use(admin: str) -> None:
        monkeypatch.setenv("PRIMITIVES_DSN", admin)
        monkeypatch.delenv("PRIMITIVES_AUDITOR_DSN", raising=False)
        monkeypatch.delenv("PRIMITIVES_APP_DSN", raising=False)

    return use


@pytest.fixture
def database(
    pg: PostgresHandle, fresh_database: Callable[[], str], use_database: Callable[[str], None]
) -> str:
    """A fresh database with spectral migrated; the CLI resolves to it."""
    admin = fresh_database()
    migrate([load_spec(SPECTRAL)], dsn=admin)
    use_database(admin)
    return admin


def _admin(admin: str, *statements: sql.Composed, as_owner: bool = False) -> None:
    with psycopg.connect(admin, autocommit=True) as conn, conn.transaction():
        if as_owner:
            conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(OWNER_ROLE)))
        for statement in statements:
            conn.execute(statement)


def _doctor(capsys: pytest.CaptureFixture[str], *specs: str) -> tuple[int, str]:
    code = main(["doctor", *(specs or (SPECTRAL,))])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_doctor_passes_on_the_five_freshly_migrated_reference_specs(
    pg: PostgresHandle, fresh_database: Callable[[], str], use_database: Callable[[str], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    admin = fresh_database()
    migrate([load_spec(p) for p in SPECS], dsn=admin)
    use_database(admin)
    code, out = _doctor(capsys, *SPECS)
    assert code == 0, out
    assert "of 5 agent(s) pass all 18 checks" in out


def test_doctor_runs_as_the_auditor_role(database: str) -> None:
    spec: AgentSpec = load_spec(SPECTRAL)
    with connect_auditor(auditor_dsn(database)) as conn:
        assert conn.info.user == "primitives_auditor"
        report = run_doctor(conn, [spec])
    assert report.ok and report.agents == ("spectral",)


BREAKS = [
    pytest.param(
        [sql.SQL("ALTER TABLE {} NO FORCE ROW LEVEL SECURITY").format(MEMORIES)], False,
        "rls_forced", "table platform.spectral_memories", id="no-force-rls"),
    pytest.param(
        [sql.SQL("ALTER TABLE {} DISABLE ROW LEVEL SECURITY").format(
            sql.Identifier("platform", "spectral_scopes"))], False,
        "rls_enabled", "table platform.spectral_scopes", id="rls-disabled"),
    pytest.param(
        [sql.SQL("CREATE UNIQUE INDEX spectral_global_key ON {} (key)").format(MEMORIES)], True,
        "tenant_leading_unique", "index platform.spectral_global_key", id="global-unique"),
    pytest.param(
        [sql.SQL("ALTER VIEW {} SET (security_invoker = false)").format(
            sql.Identifier("platform", "spectral_audit_erasures"))], True,
        "security_invoker", "view platform.spectral_audit_erasures", id="definer-view"),
    pytest.param(
        [sql.SQL("ALTER POLICY spectral_tenant_isolation ON {} WITH CHECK (true)").format(
            sql.Identifier("platform", "spectral_scopes"))], True,
        "tenant_policy", "policy spectral_tenant_isolation on table platform.spectral_scopes",
        id="with-check-differs"),
    pytest.param(
        [sql.SQL("CREATE POLICY leak ON {} FOR SELECT TO {} USING (true)").format(
            MEMORIES, sql.Identifier(APP_ROLE))], True,
        "extra_policy", "policy leak on table platform.spectral_memories", id="extra-policy"),
    pytest.param(
        [sql.SQL("GRANT TRUNCATE ON {} TO {}").format(MEMORIES, sql.Identifier(APP_ROLE))],
        True, "grants", "table platform.spectral_memories", id="truncate-grant"),
    pytest.param(
        [sql.SQL("ALTER TABLE {} OWNER TO {}").format(
            sql.Identifier("platform", "spectral_promotions"), sql.Identifier(APP_ROLE))],
        False, "owner", "table platform.spectral_promotions", id="app-owns-table"),
    pytest.param(
        [sql.SQL("CREATE TABLE {} () INHERITS ({})").format(
            sql.Identifier("platform", "spectral_scopes_2024"),
            sql.Identifier("platform", "spectral_scopes")),
         sql.SQL("GRANT SELECT ON {} TO {}").format(
            sql.Identifier("platform", "spectral_scopes_2024"), sql.Identifier(APP_ROLE))],
        True, "partition_grant", "partition platform.spectral_scopes_2024", id="child-grant"),
    pytest.param(
        [sql.SQL("ALTER TABLE {} DISABLE TRIGGER primitives_refuse_truncate").format(
            sql.Identifier("platform", "spectral_memory_events"))], False,
        "triggers", "table platform.spectral_memory_events", id="journal-trigger-off"),
    pytest.param(
        [sql.SQL("DROP TRIGGER primitives_guard_delete ON {}").format(MEMORIES)], True,
        "triggers", "table platform.spectral_memories", id="guard-dropped"),
    pytest.param(
        [sql.SQL("GRANT UPDATE ON {} TO {}").format(MEMORIES, sql.Identifier(APP_ROLE))],
        True, "grants", "table platform.spectral_memories", id="table-update-grant"),
    pytest.param(
        [sql.SQL("GRANT UPDATE (workspace_id) ON {} TO {}").format(
            MEMORIES, sql.Identifier(APP_ROLE))],
        True, "grants", "table platform.spectral_memories", id="tenant-column-update"),
    pytest.param(
        [sql.SQL("GRANT EXECUTE ON FUNCTION pg_catalog.pg_terminate_backend(integer, bigint) "
                 "TO {}").format(sql.Identifier(APP_ROLE))], False,
        "runtime_functions", f"role {APP_ROLE}", id="app-may-terminate"),
    pytest.param(
        [sql.SQL("GRANT EXECUTE ON FUNCTION pg_catalog.pg_advisory_lock(bigint) TO PUBLIC")],
        False, "runtime_functions", f"role {APP_ROLE}", id="public-advisory-lock"),
    pytest.param(
        [sql.SQL("GRANT SELECT ON pg_catalog.pg_stat_user_tables TO primitives_auditor")], False,
        "runtime_functions", "role primitives_auditor", id="auditor-reads-table-stats"),
    pytest.param(
        [sql.SQL("CREATE FUNCTION platform.probe() RETURNS int LANGUAGE sql SECURITY DEFINER "
                 "AS 'SELECT 1'")], True,
        "security_definer", "function platform.probe()", id="definer-without-search-path"),
    pytest.param(
        [sql.SQL("CREATE FUNCTION platform.probe() RETURNS int LANGUAGE sql SECURITY DEFINER "
                 "SET search_path = pg_catalog, pg_temp AS 'SELECT 1'"),
         sql.SQL("GRANT EXECUTE ON FUNCTION platform.probe() TO PUBLIC")], True,
        "security_definer", "function platform.probe()", id="definer-for-public"),
]


@pytest.mark.parametrize(("statements", "as_owner", "check", "offender"), BREAKS)
def test_doctor_names_the_broken_object_and_exits_non_zero(
    database: str, capsys: pytest.CaptureFixture[str], statements: list[sql.Composed],
    as_owner: bool, check: str, offender: str,
) -> None:
    _admin(database, *statements, as_owner=as_owner)
    code, out = _doctor(capsys)
    assert code == 1, out
    lines = [line for line in out.splitlines() if offender in line]
    assert any(check in line for line in lines), out


def test_a_setting_a_session_persists_on_its_role_is_named(
    database: str, capsys: pytest.CaptureFixture[str],
) -> None:
    """Scoped to the fresh database (IN DATABASE), which is dropped with its settings."""
    name = conninfo_to_dict(database)["dbname"]
    with psycopg.connect(app_dsn(database), autocommit=True) as app:
        app.execute(sql.SQL("ALTER ROLE CURRENT_USER IN DATABASE {} SET statement_timeout = 1")
                    .format(sql.Identifier(name)))
    code, out = _doctor(capsys)
    assert code == 1, out
    assert any("role_settings" in line and f"role {APP_ROLE}" in line
               and "statement_timeout=1" in line for line in out.splitlines()), out


def test_doctor_lists_every_offending_object_at_once(
    database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _admin(database,
           sql.SQL("ALTER TABLE {} NO FORCE ROW LEVEL SECURITY").format(MEMORIES),
           sql.SQL("CREATE UNIQUE INDEX spectral_global_key ON {} (key)").format(MEMORIES))
    code, out = _doctor(capsys)
    assert code == 1
    assert "rls_forced" in out and "index platform.spectral_global_key" in out
    assert "2 finding(s)" in out


def test_bypassrls_on_the_app_role_is_named(
    database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    app = sql.Identifier(APP_ROLE)
    try:
        _admin(database, sql.SQL("ALTER ROLE {} BYPASSRLS").format(app))
        code, out = _doctor(capsys)
    finally:
        _admin(database, sql.SQL("ALTER ROLE {} NOBYPASSRLS").format(app))
    assert code == 1
    assert "role primitives_app" in out and "BYPASSRLS" in out


def test_bypassrls_on_a_member_of_the_app_role_is_named(
    database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"t_svc_{uuid.uuid4().hex[:8]}"
    member = sql.Identifier(name)
    try:
        _admin(database, sql.SQL("CREATE ROLE {} NOLOGIN BYPASSRLS").format(member),
               sql.SQL("GRANT {} TO {}").format(sql.Identifier(APP_ROLE), member))
        code, out = _doctor(capsys)
    finally:
        _admin(database, sql.SQL("DROP ROLE IF EXISTS {}").format(member))
    assert code == 1
    line = next(line for line in out.splitlines() if f"role {name}" in line)
    assert "runtime_role" in line and "a member of primitives_app" in line


@pytest.mark.parametrize("grant", [
    sql.SQL("GRANT CREATE ON SCHEMA platform TO {}").format(sql.Identifier(APP_ROLE)),
    sql.SQL("GRANT CREATE ON SCHEMA public TO PUBLIC"),
], ids=["app-on-platform", "public-on-public"])
def test_a_runtime_role_that_may_create_in_a_schema_is_named(
    database: str, capsys: pytest.CaptureFixture[str], grant: sql.Composed,
) -> None:
    _admin(database, grant)  # this database only: it goes with the test
    code, out = _doctor(capsys)
    assert code == 1, out
    schema = "platform" if "platform" in grant.as_string(None) else "public"
    flagged = [line for line in out.splitlines() if "runtime_create" in line]
    assert any("role primitives_app" in line and f"schema {schema}" in line
               for line in flagged), out


def test_a_runtime_role_that_may_create_schemas_is_named(
    database: str, capsys: pytest.CaptureFixture[str],
) -> None:
    with psycopg.connect(database) as conn:
        name = conn.info.dbname
    _admin(database, sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
        sql.Identifier(name), sql.Identifier(APP_ROLE)))
    code, out = _doctor(capsys)
    assert code == 1, out
    assert any("runtime_create" in line and f"database {name}" in line
               for line in out.splitlines()), out


def test_spec_never_migrated_is_reported_missing(
    database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _doctor(capsys, WORLD)
    assert code == 1
    assert "present" in out and "table worlds.world_agent_memories" in out


def test_doctor_json_reports_the_same_findings_with_the_same_exit_status(
    database: str, capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["doctor", SPECTRAL, "--json"]) == 0
    clean = json.loads(capsys.readouterr().out)
    assert clean["ok"] is True and clean["findings"] == []
    assert clean["agents"] == ["spectral"] and clean["relations"] > 0
    assert len(clean["checks"]) == 18 and "runtime_create" in clean["checks"]
    _admin(database, sql.SQL("ALTER TABLE {} NO FORCE ROW LEVEL SECURITY").format(MEMORIES),
           sql.SQL("GRANT TRUNCATE ON {} TO {}").format(MEMORIES, sql.Identifier(APP_ROLE)))
    assert main(["doctor", SPECTRAL, "--json"]) == 1
    broken = json.loads(capsys.readouterr().out)  # nothing but the JSON on standard output
    assert broken["ok"] is False
    assert {(f["check"], f["object"]) for f in broken["findings"]} == {
        ("rls_forced", "table platform.spectral_memories"),
        ("grants", "table platform.spectral_memories")}
    assert all(f["problem"] for f in broken["findings"])


def test_a_runtime_role_made_a_member_of_the_maintainer_is_named(
    database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    maintainer, app = sql.Identifier("primitives_maintainer"), sql.Identifier(APP_ROLE)
    code, out = _doctor(capsys)
    assert code == 0 and not any(line.startswith("maintainer_role") for line in
                                 out.splitlines()), out
    try:
        _admin(database, sql.SQL("GRANT {} TO {}").format(maintainer, app),
               sql.SQL("ALTER ROLE {} LOGIN").format(maintainer))
        code, out = _doctor(capsys)
    finally:
        _admin(database, sql.SQL("REVOKE {} FROM {}").format(maintainer, app),
               sql.SQL("ALTER ROLE {} NOLOGIN").format(maintainer))
    assert code == 1
    lines = [line for line in out.splitlines() if "role primitives_maintainer" in line]
    assert any("runtime role primitives_app" in line for line in lines), out
    assert any("can log in" in line for line in lines), out
