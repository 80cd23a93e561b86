"""The runtime roles cannot change the rules they are held to.

The application role may not alter, drop, truncate or un-secure any agent table or view,
become the owner, or persist a tenant for its sessions; its only policy on every table is
the tenant policy. The auditor's side is in ``test_tenant_isolation.py``.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives.compile import Table, Tables
from primitives.db import APP_ROLE, AUDITOR_ROLE, OWNER_ROLE, tenant_transaction
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle
from tests.security._support import (
    CITUS_VIEW_WRITE,
    SPECS,
    TABLE_PARAMS,
    TABLES_BY_AGENT,
    VIEW_PARAMS,
    World,
    on_citus,
    relation_counts,
    suffix,
)

pytestmark = pytest.mark.db

Conn = psycopg.Connection[Any]

TABLE_STATEMENTS = {
    "disable-rls": "ALTER TABLE {table} DISABLE ROW LEVEL SECURITY",
    "no-force-rls": "ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY",
    "drop-table": "DROP TABLE {table}",
    "truncate": "TRUNCATE {table}",
    "add-column": "ALTER TABLE {table} ADD COLUMN probe text",
    "rename": "ALTER TABLE {table} RENAME TO probe",
    "owner": "ALTER TABLE {table} OWNER TO primitives_app",
    "disable-triggers": "ALTER TABLE {table} DISABLE TRIGGER ALL",
    "drop-policy": "DROP POLICY {policy} ON {table}",
    "alter-policy": "ALTER POLICY {policy} ON {table} USING (true) WITH CHECK (true)",
    "create-policy": "CREATE POLICY probe ON {table} FOR ALL TO primitives_app USING (true)",
    "create-trigger": "CREATE TRIGGER probe BEFORE INSERT ON {table} FOR EACH ROW "
                      "EXECUTE FUNCTION primitives.current_tenant()",
    "create-index": "CREATE INDEX probe ON {table} ((1))",
    "create-rule": "CREATE RULE probe AS ON INSERT TO {table} DO INSTEAD NOTHING",
    "comment": "COMMENT ON TABLE {table} IS 'probe'",
}
VIEW_STATEMENTS = {
    "drop-view": "DROP VIEW {table}",
    "security-definer": "ALTER VIEW {table} SET (security_invoker = false)",
    "reset-invoker": "ALTER VIEW {table} RESET (security_invoker)",
    "owner": "ALTER VIEW {table} OWNER TO primitives_app",
    "rename": "ALTER VIEW {table} RENAME TO probe",
    "insert": "INSERT INTO {table} DEFAULT VALUES",
    "delete": "DELETE FROM {table}",
}


def _refused(conn: Conn, statements: dict[str, str], relation: Table, policy: str,
             codes: set[str]) -> list[str]:
    """The names of the statements that were NOT refused with one of ``codes``."""
    allowed = []
    for name, template in statements.items():
        statement = sql.SQL(template).format(  # type: ignore[arg-type]
            table=relation.ident, policy=sql.Identifier(policy))
        try:
            with conn.transaction():  # rolled back even if it were allowed
                conn.execute(statement)
                raise _Allowed
        except _Allowed:
            allowed.append(f"{name}: allowed")
        except psycopg.Error as err:
            if err.sqlstate not in codes:
                allowed.append(f"{name}: {err.sqlstate} {err}")
    return allowed


class _Allowed(Exception):
    pass


@pytest.fixture(scope="module")
def app(pg: PostgresHandle, specs: tuple[AgentSpec, ...]) -> Any:
    with psycopg.connect(pg.app_dsn, autocommit=True) as conn:
        yield conn


@pytest.mark.parametrize("agent, relation", TABLE_PARAMS)
def test_app_role_cannot_alter_drop_truncate_or_disable_rls_on_agent_table(
    agent: str, relation: Table, app: Conn,
) -> None:
    policy = TABLES_BY_AGENT[agent].object_name("tenant_isolation")
    assert _refused(app, TABLE_STATEMENTS, relation, policy, {"42501"}) == []


@pytest.mark.parametrize("agent, view", VIEW_PARAMS)
def test_app_role_cannot_alter_drop_or_write_through_agent_view(
    agent: str, view: Table, app: Conn, world: dict[str, World],
) -> None:
    tables = TABLES_BY_AGENT[agent]
    seeded = world[agent].a.tenant
    before = _rows_of(app, tables, seeded)
    # 55000: a view the rewriter cannot update refuses before privileges are checked
    not_refused = _refused(app, VIEW_STATEMENTS, view, "unused", {"42501", "55000"})
    if on_citus(app):
        # on a Citus coordinator a write through a view over distributed tables is refused
        # by Citus before privileges are checked (0A000, its own words): refused all the
        # same (ALTER and DROP still answer 42501), and the rows below did not change
        not_refused = [r for r in not_refused if not (
            r.split(":", 1)[0] in ("insert", "delete") and " 0A000 " in r
            and CITUS_VIEW_WRITE in r)]
    assert not_refused == []
    assert _rows_of(app, tables, seeded) == before


def _rows_of(app: Conn, tables: Tables, tenant: str) -> dict[str, int]:
    """The rows ``tenant`` holds in each table of the agent, read in a tenant transaction."""
    with tenant_transaction(app, tenant):
        return dict(relation_counts(app, tables, tenant))


@pytest.mark.parametrize("statement", [
    "SET ROLE primitives_owner",
    "SET ROLE {other}",
    "SELECT set_config('role', 'primitives_owner', false)",
    "SET SESSION AUTHORIZATION primitives_owner",
    "GRANT primitives_owner TO primitives_app",
    "ALTER ROLE primitives_app BYPASSRLS",
    "ALTER ROLE primitives_app SUPERUSER",
    "ALTER ROLE CURRENT_USER SET primitives.tenant = 'victim'",
    "CREATE ROLE probe",
    "CREATE SCHEMA probe",
    "CREATE TABLE primitives.probe (a int)",
    "CREATE TABLE public.probe (a int)",
    "CREATE OR REPLACE FUNCTION primitives.current_tenant() RETURNS text "
    "LANGUAGE sql AS $$ SELECT 'victim' $$",
    "DROP FUNCTION primitives.chain_event()",
    "DROP FUNCTION primitives.guard_memory_delete()",
    "ALTER FUNCTION primitives.verify_chain(regclass, text, text) SECURITY DEFINER",
    "DELETE FROM primitives.schema_migrations",
    "UPDATE primitives.agent_plans SET checksum = 'x'",
])
@pytest.mark.parametrize("role_dsn", ["app", "auditor"])
def test_runtime_role_cannot_escalate_or_persist_a_tenant(
    pg: PostgresHandle, specs: tuple[AgentSpec, ...], statement: str, role_dsn: str,
) -> None:
    dsn, other = (pg.app_dsn, AUDITOR_ROLE) if role_dsn == "app" else (pg.auditor_dsn, APP_ROLE)
    with psycopg.connect(dsn, autocommit=True) as conn, \
            pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(sql.SQL(statement).format(other=sql.Identifier(other)))  # type: ignore[arg-type]


def test_role_default_set_by_the_app_role_cannot_make_it_the_owner(
    pg: PostgresHandle, specs: tuple[AgentSpec, ...],
) -> None:
    """A role may store its own defaults; a ``role`` it is no member of is ignored at login."""
    try:
        with psycopg.connect(pg.app_dsn, autocommit=True) as conn:
            conn.execute("ALTER ROLE CURRENT_USER SET role = 'primitives_owner'")
        with psycopg.connect(pg.app_dsn, autocommit=True) as conn:
            who = conn.execute("SELECT current_user, session_user").fetchone()
            assert who == (APP_ROLE, APP_ROLE)
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("ALTER TABLE primitives.agent_plans DISABLE ROW LEVEL SECURITY")
    finally:
        with psycopg.connect(pg.app_dsn, autocommit=True) as conn:
            conn.execute("ALTER ROLE CURRENT_USER RESET role")


@pytest.mark.parametrize("agent, relation", TABLE_PARAMS)
def test_row_security_off_makes_queries_fail_instead_of_bypassing(
    agent: str, relation: Table, pg: PostgresHandle, specs: tuple[AgentSpec, ...],
    world: dict[str, World],
) -> None:
    b = world[agent].b.tenant
    with psycopg.connect(pg.app_dsn, autocommit=True) as conn:
        conn.execute("SET row_security = off")
        for tenant in (None, b):
            with pytest.raises(psycopg.errors.InsufficientPrivilege,
                               match="row-level security"), conn.transaction():
                if tenant is not None:
                    conn.execute(sql.SQL("SET LOCAL primitives.tenant = {}").format(
                        sql.Literal(tenant)))
                conn.execute(sql.SQL("SELECT count(*) FROM {}").format(relation.ident))


@pytest.mark.parametrize("agent", sorted(TABLES_BY_AGENT))
def test_app_role_cannot_create_objects_in_agent_schemas(
    agent: str, app: Conn,
) -> None:
    tables = TABLES_BY_AGENT[agent]
    schemas = {tables.schema, *(s for s in [tables.checkpointer_schema] if s)}
    for schema in schemas:
        for template in ("CREATE TABLE {}.probe (a int)", "CREATE VIEW {}.probe AS SELECT 1",
                         "CREATE FUNCTION {}.probe() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$",
                         "DROP SCHEMA {} CASCADE"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                app.execute(sql.SQL(template).format(sql.Identifier(schema)))  # type: ignore[arg-type]


@pytest.mark.parametrize("agent, relation", TABLE_PARAMS)
def test_only_the_tenant_policy_applies_to_the_app_role(
    agent: str, relation: Table, app: Conn,
) -> None:
    """Permissive policies are OR-ed: any second one for the app role (or PUBLIC) would
    widen what a tenant sees."""
    tables = TABLES_BY_AGENT[agent]
    rows = app.execute(
        "SELECT policyname, permissive, cmd, qual, with_check FROM pg_catalog.pg_policies "
        "WHERE schemaname = %s AND tablename = %s AND roles && %s::name[]",
        (relation.schema, relation.name, [APP_ROLE, "public"])).fetchall()
    assert len(rows) == 1, rows
    name, permissive, cmd, qual, with_check = rows[0]
    assert (name, permissive, cmd) == (tables.object_name("tenant_isolation"), "PERMISSIVE",
                                       "ALL")
    assert qual == with_check
    assert qual.startswith(f"({tables.tenant_column} = ") and "'primitives.tenant'" in qual


@pytest.mark.parametrize("agent, relation", TABLE_PARAMS)
def test_app_role_holds_only_the_grants_its_table_needs(
    agent: str, relation: Table, app: Conn,
) -> None:
    rows = app.execute(
        "SELECT privilege_type, is_grantable FROM information_schema.role_table_grants "
        "WHERE grantee = %s AND table_schema = %s AND table_name = %s",
        (APP_ROLE, relation.schema, relation.name)).fetchall()
    held = {p for p, _ in rows}
    assert not any(grantable == "YES" for _, grantable in rows)
    assert held <= {"SELECT", "INSERT"}  # UPDATE is column-level; deletes are functions
    kind = suffix(TABLES_BY_AGENT[agent], relation)
    if kind in ("memory_events", "action_links", "approvals", "promotions"):
        assert held == {"SELECT", "INSERT"}, "append-only tables take no UPDATE or DELETE"


def test_roles_are_what_the_design_says(app: Conn) -> None:
    rows = app.execute(
        "SELECT rolname, rolsuper, rolbypassrls, rolcreaterole, rolcreatedb, rolcanlogin "
        "FROM pg_catalog.pg_roles WHERE rolname = ANY(%s) ORDER BY rolname",
        ([APP_ROLE, AUDITOR_ROLE, OWNER_ROLE],)).fetchall()
    # On a Citus coordinator the owner logs in: the coordinator connects to the workers as
    # the user that runs a statement, the owner while plans and maintenance run (it has no
    # password: an authentication method other than trust keeps clients out). Every other
    # attribute is the same on both.
    owner_logs_in = on_citus(app)
    assert rows == [
        (APP_ROLE, False, False, False, False, True),
        (AUDITOR_ROLE, False, False, False, False, True),
        (OWNER_ROLE, False, False, False, False, owner_logs_in),
    ]
    memberships = app.execute(
        "SELECT r.rolname FROM pg_catalog.pg_auth_members AS m "
        "JOIN pg_catalog.pg_roles AS r ON r.oid = m.roleid "
        "JOIN pg_catalog.pg_roles AS u ON u.oid = m.member WHERE u.rolname = ANY(%s)",
        ([APP_ROLE, AUDITOR_ROLE],)).fetchall()
    assert memberships == []


def test_every_reference_table_is_owned_by_the_owner_role(app: Conn) -> None:
    names = [r.qualified for s in SPECS for r in (*TABLES_BY_AGENT[s.agent].tables,
                                                  *TABLES_BY_AGENT[s.agent].views)]
    owners = app.execute(
        "SELECT DISTINCT pg_catalog.pg_get_userbyid(c.relowner) FROM pg_catalog.pg_class AS c "
        "WHERE c.oid = ANY(SELECT to_regclass(n) FROM unnest(%s::text[]) AS n)",
        (names,)).fetchall()
    assert owners == [(OWNER_ROLE,)]
