"""Compiled plans applied to a real PostgreSQL: ownership, forced RLS, grants, tenant isolation.

The plan is applied by the admin connection through ``primitives.db.apply_plan``; the
runtime checks run as the application and auditor roles.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives._project import migrate
from primitives.compile import Capabilities, Plan, Tables, compile_plan
from primitives.compile._tables import MEMORY_UPDATE_COLUMNS
from primitives.db import OWNER_ROLE, apply_plan, tenant_transaction
from primitives.engine._queries import delete_memory
from primitives.errors import PolicyViolation, StorageError
from primitives.spec import AgentSpec, load_spec, load_spec_text
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.db

ROOT = Path(__file__).resolve().parents[2]
SPECTRAL = ROOT / "agents" / "spectral_agent.yaml"

# Reserved words as names, graph and governed tables, a trigram defense (see test_compile.py).
ODD_SPEC = """\
version: 1
agent: odd_compile_apply
anchor:
  keys: [user, order]
  required_at_write: [user]
  nullable_for_cross_scope: [order]
typology:
  select: [episodic]
  group: [semantic, opinion]
tiers:
  - {name: select, boundary: {lifecycle: session_end}}
  - {name: group, boundary: {scope_change: user}, persistent: true}
persistence:
  checkpointer: {enabled: false}
  store: {schema: table, prefix: limit}
retrieval:
  signals: [lexical, graph, semantic]
  embedding: {dims: 8}
graph:
  edges: [temporal, supersedes]
  entity_types: [person, tool]
behavior:
  write_policy:
    semantic: {mode: governed, governance: {approvals_required: 1}, justification: approvals}
discipline:
  non_mirror:
    - {category: rule_text, defense: trigram_trigger, canonical_source: table.rules.body}
"""


def server_capabilities(conn: psycopg.Connection[Any]) -> Capabilities:
    installed = {row[0] for row in conn.execute("SELECT extname FROM pg_catalog.pg_extension")}
    return Capabilities(
        vector="vector" in installed,
        trigram="pg_trgm" in installed,
        btree_gin="btree_gin" in installed,
        server_version=conn.info.server_version,
    )


def apply(conn: psycopg.Connection[Any], plan: Plan, *, force: bool = False) -> bool:
    """Apply ``plan``; with ``force``, run its statements even if this checksum is recorded."""
    if force:
        apply_plan(conn, plan.agent, plan.checksum + ":forced", plan.statements)
    return apply_plan(conn, plan.agent, plan.checksum, plan.statements)


@pytest.fixture(scope="module", autouse=True)
def framework_migrated(pg: PostgresHandle) -> None:
    """The framework's own migrations (roles, functions, operator classes) that every plan
    uses: applied here, so this module runs alone as well as after the others."""
    migrate([], dsn=pg.admin_dsn)


@pytest.fixture(scope="module")
def spectral() -> AgentSpec:
    return load_spec(SPECTRAL)


@pytest.fixture
def spectral_plan(admin_conn: psycopg.Connection[Any], spectral: AgentSpec) -> Plan:
    plan = compile_plan(spectral, capabilities=server_capabilities(admin_conn))
    apply(admin_conn, plan)
    return plan


@pytest.fixture
def odd_schema(admin_conn: psycopg.Connection[Any]) -> Iterator[None]:
    yield
    admin_conn.execute('DROP SCHEMA IF EXISTS "table" CASCADE')
    admin_conn.execute("DELETE FROM primitives.agent_plans WHERE agent = 'odd_compile_apply'")


def relations(conn: psycopg.Connection[Any], tables: Tables) -> dict[str, tuple[Any, ...]]:
    rows = conn.execute(
        "SELECT c.relname, c.relkind, pg_get_userbyid(c.relowner), c.relrowsecurity,"
        " c.relforcerowsecurity FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = ANY(%s) AND c.relname LIKE %s AND c.relkind IN ('r', 'v')",
        ([tables.schema, tables.checkpointer_schema], tables.prefix + "\\_%"),
    ).fetchall()
    return {row[0]: row[1:] for row in rows}


def insert_memory(
    conn: psycopg.Connection[Any], tables: Tables, tenant: str, *, tier: str = "run"
) -> uuid.UUID:
    row = conn.execute(
        sql.SQL(
            "INSERT INTO {} ({}, tier, typology, scope_id, key, content)"
            " VALUES (%s, %s, 'episodic', 'run-1', %s, 'scan finished') RETURNING id"
        ).format(tables.memories.ident, tables.tenant),
        (tenant, tier, f"k-{uuid.uuid4().hex[:8]}"),
    ).fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


def test_spectral_plan_is_owned_by_the_owner_with_rls_forced_on_every_table(
    admin_conn: psycopg.Connection[Any], spectral_plan: Plan
) -> None:
    tables = spectral_plan.tables
    found = relations(admin_conn, tables)
    for table in tables.tables:
        kind, owner, enabled, forced = found[table.name]
        assert (kind, owner, enabled, forced) == ("r", OWNER_ROLE, True, True), table.name
    for view in tables.views:
        kind, owner, _, _ = found[view.name]
        assert (kind, owner) == ("v", OWNER_ROLE), view.name
    coverage = admin_conn.execute(
        sql.SQL("SELECT table_name, present, rls_enabled, rls_forced, tenant_policy,"
                " auditor_policy, owner FROM {}").format(tables.audit_policy_coverage.ident)
    ).fetchall()
    assert sorted(coverage) == sorted(
        (t.name, True, True, True, True, True, OWNER_ROLE) for t in tables.tables
    )


def test_reapplying_the_plan_is_harmless(
    admin_conn: psycopg.Connection[Any], spectral_plan: Plan
) -> None:
    assert apply(admin_conn, spectral_plan) is False  # same checksum: nothing to do
    apply(admin_conn, spectral_plan, force=True)  # every statement again
    policies = admin_conn.execute(
        "SELECT count(*) FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
        (spectral_plan.tables.schema, spectral_plan.tables.memories.name),
    ).fetchone()
    # tenant (app), auditor read, tenant (owner, for its functions), maintainer (all tenants)
    assert policies == (4,)


def test_reapplying_takes_table_level_update_and_delete_from_an_older_database(
    admin_conn: psycopg.Connection[Any], spectral_plan: Plan
) -> None:
    """Earlier plans granted UPDATE and DELETE on whole tables; a migrate converts them."""
    memories = spectral_plan.tables.memories
    admin_conn.execute(sql.SQL("GRANT UPDATE, DELETE ON {} TO primitives_app").format(
        memories.ident))
    apply(admin_conn, spectral_plan, force=True)
    held = admin_conn.execute(
        "SELECT has_table_privilege('primitives_app', %s, 'UPDATE'), "
        "has_table_privilege('primitives_app', %s, 'DELETE'), "
        "has_column_privilege('primitives_app', %s, 'tombstoned_at', 'UPDATE'), "
        "has_column_privilege('primitives_app', %s, %s, 'UPDATE')",
        (memories.qualified, memories.qualified, memories.qualified, memories.qualified,
         spectral_plan.tables.tenant_column)).fetchone()
    assert held == (False, False, True, False)


def test_every_unique_index_leads_with_the_tenant_column(
    admin_conn: psycopg.Connection[Any], spectral_plan: Plan
) -> None:
    tables = spectral_plan.tables
    rows = admin_conn.execute(
        "SELECT i.indexrelid::regclass::text, a.attname FROM pg_index i"
        " JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
        " LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]"
        " WHERE i.indisunique AND n.nspname = ANY(%s) AND c.relname LIKE %s",
        ([tables.schema, tables.checkpointer_schema], tables.prefix + "\\_%"),
    ).fetchall()
    assert rows
    assert {attname for _, attname in rows} == {tables.tenant_column}, rows


def test_app_role_inserts_in_its_tenant_and_is_refused_in_another(
    app_conn: psycopg.Connection[Any], spectral_plan: Plan
) -> None:
    tables = spectral_plan.tables
    mine, theirs = f"ws-{uuid.uuid4().hex[:8]}", f"ws-{uuid.uuid4().hex[:8]}"
    with tenant_transaction(app_conn, mine):
        memory_id = insert_memory(app_conn, tables, mine)
    with pytest.raises(PolicyViolation):
        with tenant_transaction(app_conn, mine):
            insert_memory(app_conn, tables, theirs)
    with tenant_transaction(app_conn, theirs):
        seen = app_conn.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE id = %s").format(tables.memories.ident),
            (memory_id,),
        ).fetchone()
    assert seen == (0,)  # another tenant sees nothing
    with tenant_transaction(app_conn, mine):
        active = app_conn.execute(
            sql.SQL("SELECT persistent, tsv IS NOT NULL FROM {} WHERE id = %s").format(
                tables.active_memories.ident), (memory_id,),
        ).fetchone()
        assert active == (False, True)
        # transient, unlinked: scope-end removal is allowed, through the owner's function
        app_conn.execute(delete_memory(tables), {"id": memory_id})
        gone = app_conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE id = %s").format(
            tables.memories.ident), (memory_id,)).fetchone()
        assert gone == (0,)


def test_app_role_without_a_tenant_sees_and_writes_nothing(
    app_conn: psycopg.Connection[Any], spectral_plan: Plan
) -> None:
    tables = spectral_plan.tables
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        with app_conn.transaction():
            insert_memory(app_conn, tables, "ws-none")


def test_persistent_memory_delete_and_journal_update_are_refused(
    app_conn: psycopg.Connection[Any], spectral_plan: Plan
) -> None:
    tables = spectral_plan.tables
    tenant = f"ws-{uuid.uuid4().hex[:8]}"
    with tenant_transaction(app_conn, tenant):
        memory_id = insert_memory(app_conn, tables, tenant, tier="workspace")
        app_conn.execute(
            sql.SQL("INSERT INTO {} ({}, kind, memory_id) VALUES (%s, 'written', %s)").format(
                tables.events.ident, tables.tenant), (tenant, memory_id),
        )
    with pytest.raises(PolicyViolation, match="permission denied"):  # no DELETE grant
        with tenant_transaction(app_conn, tenant):
            app_conn.execute(
                sql.SQL("DELETE FROM {} WHERE id = %s").format(tables.memories.ident),
                (memory_id,),
            )
    with pytest.raises(PolicyViolation, match="persistent"):  # the function meets the guard
        with tenant_transaction(app_conn, tenant):
            app_conn.execute(delete_memory(tables), {"id": memory_id})
    with pytest.raises(PolicyViolation):  # no UPDATE grant on the journal
        with tenant_transaction(app_conn, tenant):
            app_conn.execute(sql.SQL("UPDATE {} SET kind = 'x'").format(tables.events.ident))
    with tenant_transaction(app_conn, tenant):
        lineage = app_conn.execute(
            sql.SQL("SELECT step, seq, kind FROM {} WHERE memory_id = %s").format(
                tables.audit_lineage.ident), (memory_id,),
        ).fetchall()
    assert lineage == [(1, 1, "written")]


def test_auditor_reads_every_tenant_and_writes_nothing(
    app_conn: psycopg.Connection[Any],
    auditor_conn: psycopg.Connection[Any],
    spectral_plan: Plan,
) -> None:
    tables = spectral_plan.tables
    tenants = [f"ws-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    for tenant in tenants:
        with tenant_transaction(app_conn, tenant):
            insert_memory(app_conn, tables, tenant, tier="workspace")
    states = auditor_conn.execute(
        sql.SQL("SELECT {}, retention_state FROM {} WHERE {} = ANY(%s)").format(
            tables.tenant, tables.audit_retention_state.ident, tables.tenant), (tenants,),
    ).fetchall()
    assert sorted(states) == sorted((t, "ACTIVE") for t in tenants)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        auditor_conn.execute(sql.SQL("UPDATE {} SET content = ''").format(tables.memories.ident))


@pytest.mark.usefixtures("odd_schema")
def test_reserved_word_names_graph_and_governed_tables_apply_with_and_without_extensions(
    admin_conn: psycopg.Connection[Any], app_conn: psycopg.Connection[Any]
) -> None:
    spec = load_spec_text(ODD_SPEC, policies={})
    for capabilities in (server_capabilities(admin_conn),
                         Capabilities(vector=False, trigram=False, btree_gin=False)):
        admin_conn.execute('DROP SCHEMA IF EXISTS "table" CASCADE')
        plan = compile_plan(spec, capabilities=capabilities)
        apply(admin_conn, plan, force=True)
        tables = plan.tables
        found = relations(admin_conn, tables)
        # the non-mirror guard's own index of canonical texts: not tenant data, owner only
        guard = {tables.object_name("canonical_indexed"),
                 tables.object_name("canonical_postings"),
                 tables.object_name("canonical_signatures")} if capabilities.trigram else set()
        assert ({t.name for t in tables.tables} | {v.name for v in tables.views} | guard
                == set(found))
        assert all(row[1:] == (OWNER_ROLE, True, True)
                   for name, row in found.items() if row[0] == "r" and name not in guard)
        for name in guard:
            assert found[name][1] == OWNER_ROLE
            assert admin_conn.execute(
                "SELECT has_table_privilege('primitives_app', %s, 'SELECT')",
                (f'"{tables.schema}"."{name}"',)).fetchone() == (False,)
        with tenant_transaction(app_conn, "u1"):
            source = app_conn.execute(
                sql.SQL('INSERT INTO {} ("user", tier, typology, key, content)'
                        " VALUES ('u1', 'select', 'episodic', 'a', 'one') RETURNING id").format(
                    tables.memories.ident)).fetchone()
            assert source is not None
            app_conn.execute(
                sql.SQL('INSERT INTO {} ("user", source_id, target_id, relation_type)'
                        " VALUES ('u1', %s, %s, 'temporal')").format(tables.edges.ident),  # type: ignore[union-attr]
                (source[0], source[0]),
            )
            request = app_conn.execute(
                sql.SQL("INSERT INTO {} (\"user\", kind) VALUES ('u1', 'memory_promote_request')"
                        " RETURNING id").format(tables.action_requests.ident)).fetchone()  # type: ignore[union-attr]
            assert request is not None
            app_conn.execute(
                sql.SQL("INSERT INTO {} (\"user\", request_id, approver, decision)"
                        " VALUES ('u1', %s, 'admin', 'approve')").format(
                    tables.approvals.ident), (request[0],))  # type: ignore[union-attr]
        with pytest.raises(PolicyViolation):  # approvals are append-only (no DELETE grant)
            with tenant_transaction(app_conn, "u1"):
                app_conn.execute(sql.SQL("DELETE FROM {}").format(tables.approvals.ident))  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "spec_path", sorted((ROOT / "agents").glob("*.yaml")), ids=lambda p: p.stem
)
def test_every_reference_spec_applies_with_rls_forced(
    admin_conn: psycopg.Connection[Any], spec_path: Path
) -> None:
    plan = compile_plan(load_spec(spec_path), capabilities=server_capabilities(admin_conn))
    apply(admin_conn, plan)
    found = relations(admin_conn, plan.tables)
    for table in plan.tables.tables:
        assert found[table.name] == ("r", OWNER_ROLE, True, True), table.name
    assert {v.name for v in plan.tables.views} <= set(found)


@pytest.mark.usefixtures("odd_schema")
def test_reapplying_a_changed_spec_replaces_its_checks(
    admin_conn: psycopg.Connection[Any], app_conn: psycopg.Connection[Any]
) -> None:
    admin_conn.execute('DROP SCHEMA IF EXISTS "table" CASCADE')
    capabilities = server_capabilities(admin_conn)
    before = compile_plan(load_spec_text(ODD_SPEC, policies={}), capabilities=capabilities)
    apply(admin_conn, before)
    insert = sql.SQL('INSERT INTO {} ("user", tier, typology, key, content)'
                     " VALUES ('u1', 'select', 'procedural', 'p', 'how to')").format(
        before.tables.memories.ident)
    with pytest.raises(StorageError, match="typology_check"):
        with tenant_transaction(app_conn, "u1"):
            app_conn.execute(insert)

    grown = ODD_SPEC.replace("select: [episodic]", "select: [episodic, procedural]")
    after = compile_plan(load_spec_text(grown, policies={}), capabilities=capabilities)
    assert apply(admin_conn, after) is True
    with tenant_transaction(app_conn, "u1"):
        app_conn.execute(insert)


BROKEN_BOUNDS = [
    # (the separate constraint an earlier plan had, the column, a value that breaks it)
    ("spectral_memories_tier_check", "tier", "no_such_tier"),
    ("spectral_memories_typology_check", "typology", "semantic"),  # not a 'run' typology
    ("spectral_memories_content_check", "content", "x" * 4001),
    ("spectral_memories_value_check", "value", {"v": "x" * 40_000}),
    ("spectral_memories_envelope_check", "envelope", {"e": "x" * 9000}),
    ("spectral_memories_provenance_check", "provenance", {"p": "x" * 40_000}),
    ("spectral_memories_confidence_check", "confidence", 1.5),
    ("spectral_memories_erasure_check", "erased_at", "2026-11-26T00:00:00Z"),
]


@pytest.mark.parametrize(("constraint", "column", "value"), BROKEN_BOUNDS,
                         ids=[b[0].removeprefix("spectral_memories_") for b in BROKEN_BOUNDS])
def test_each_broken_bound_fails_under_its_own_constraint_name_as_the_app_role(
    spectral_plan: Plan, app_conn: psycopg.Connection[Any], constraint: str, column: str,
    value: Any,
) -> None:
    tables = spectral_plan.tables
    literal = psycopg.types.json.Jsonb(value) if isinstance(value, dict) else value
    row = {"tier": "run", "typology": "episodic", "key": f"k-{uuid.uuid4().hex}",
           "content": "fits"}
    updated = column in MEMORY_UPDATE_COLUMNS
    if not updated:  # the app role may not UPDATE it: the INSERT carries the broken value
        row[column] = literal
    with pytest.raises(StorageError) as caught, tenant_transaction(app_conn, "bounds-t1"):
        app_conn.execute(sql.SQL("INSERT INTO {} ({}, {}) VALUES (%s, {}) RETURNING id").format(
            tables.memories.ident, tables.tenant, sql.SQL(", ").join(map(sql.Identifier, row)),
            sql.SQL(", ").join(sql.Placeholder() * len(row))), ("bounds-t1", *row.values()))
        # the same row, one column changed: an UPDATE is held to the bounds as an INSERT is
        assert updated
        app_conn.execute(sql.SQL("UPDATE {} SET {} = %s WHERE {} = %s").format(
            tables.memories.ident, sql.Identifier(column), tables.tenant),
            (literal, "bounds-t1"))
    cause = caught.value.__cause__
    assert isinstance(cause, psycopg.errors.CheckViolation)
    assert cause.diag.constraint_name == constraint
    assert cause.diag.table_name == "spectral_memories"
    assert str(caught.value).endswith(
        f'new row for relation "spectral_memories" violates check constraint "{constraint}"')
    with tenant_transaction(app_conn, "bounds-t1"):  # nothing of the failed transaction stayed
        assert app_conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
            tables.memories.ident)).fetchone() == (0,)


def test_an_earlier_plans_separate_checks_give_way_to_the_bounds_function(
    admin_conn: psycopg.Connection[Any], spectral_plan: Plan, as_owner: Any,
) -> None:
    memories = spectral_plan.tables.memories.ident
    # what a database migrated by an earlier plan holds: the checks as separate constraints
    as_owner(sql.SQL("ALTER TABLE {} DROP CONSTRAINT spectral_memories_bounds_check, "
                     "ADD CONSTRAINT spectral_memories_tier_check "
                     "CHECK (tier IN ('cycle', 'run', 'workspace')), "
                     "ADD CONSTRAINT spectral_memories_content_check "
                     "CHECK (char_length(content) <= 4000)").format(memories))
    apply(admin_conn, spectral_plan, force=True)
    checks = admin_conn.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = %s::regclass AND contype = 'c'",
        [memories.as_string(None)]).fetchall()
    assert [name for name, _ in checks] == ["spectral_memories_bounds_check"]
    assert "spectral_memories_bounds(tier, typology, content" in checks[0][1]
    # owned by the owner, executable by the app role and by no one else
    owner, public, app, auditor = admin_conn.execute(
        "SELECT pg_get_userbyid(p.proowner), "
        "has_function_privilege('public', p.oid, 'EXECUTE'), "
        "has_function_privilege('primitives_app', p.oid, 'EXECUTE'), "
        "has_function_privilege('primitives_auditor', p.oid, 'EXECUTE') "
        "FROM pg_proc p WHERE p.proname = 'spectral_memories_bounds'").fetchone() or ()
    assert (owner, app, auditor) == (OWNER_ROLE, True, False)
    assert public is False


OLDER_SPEC = """\
version: 1
agent: older_memories
anchor:
  keys: [team_id]
  required_at_write: [team_id]
typology:
  session: [episodic]
  team: [episodic, semantic]
tiers:
  - {name: session, boundary: {lifecycle: session_end}}
  - {name: team, boundary: {scope_change: team_id}, persistent: true}
persistence:
  store: {schema: older_memories, prefix: old}
retrieval:
  signals: [lexical, recency]
"""


def test_a_memories_table_without_corroborated_at_gains_it_when_the_plan_is_reapplied(
    pg: PostgresHandle, admin_conn: psycopg.Connection[Any]
) -> None:
    """A database migrated before ``corroborated_at`` existed: re-applying the plan through
    ``migrate`` adds the column (and the app role's UPDATE grant on it) to the existing table,
    keeping its rows."""
    spec = load_spec_text(OLDER_SPEC)
    migrate([spec], dsn=pg.admin_dsn)
    try:
        admin_conn.execute(
            "INSERT INTO older_memories.old_memories (team_id, tier, typology, key, content) "
            "VALUES ('t1', 'team', 'episodic', 'k1', 'kept across the migrate')")
        admin_conn.execute(
            "ALTER TABLE older_memories.old_memories DROP COLUMN corroborated_at CASCADE")
        # the plan recorded for the older database is not this one
        admin_conn.execute(
            "UPDATE primitives.agent_plans SET checksum = 'older' WHERE agent = 'older_memories'")
        column = ("SELECT count(*) FROM information_schema.columns WHERE table_schema = "
                  "'older_memories' AND table_name = 'old_memories' "
                  "AND column_name = 'corroborated_at'")
        assert admin_conn.execute(column).fetchone() == (0,)
        migrate([spec], dsn=pg.admin_dsn)
        assert admin_conn.execute(column).fetchone() == (1,)
        assert admin_conn.execute(
            "SELECT has_column_privilege('primitives_app', 'older_memories.old_memories', "
            "'corroborated_at', 'UPDATE')").fetchone() == (True,)
        assert admin_conn.execute(
            "SELECT content, corroborated_at FROM older_memories.old_memories").fetchall() == [
            ("kept across the migrate", None)]
    finally:
        admin_conn.execute("DROP SCHEMA IF EXISTS older_memories CASCADE")
        admin_conn.execute("DELETE FROM primitives.agent_plans WHERE agent = 'older_memories'")
