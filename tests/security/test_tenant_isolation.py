"""Database-enforced tenancy over every table and view of every reference spec.

Runs as the application role (and the auditor role where said). Tenants ``a`` and ``b``
hold rows in every table and every tenant view; ``c`` holds none (see ``conftest.py``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives.compile import Table, Tables
from primitives.compile._access import auditor_access
from primitives.db import APP_ROLE, OWNER_ROLE, tenant_transaction
from primitives.engine import Engine
from primitives.errors import PolicyViolation, StorageError, TenancyError
from tests.conftest import PostgresHandle
from tests.security._support import (
    APPROVERS,
    AUDIT_VIEW_PARAMS,
    CITUS_REKEY,
    CITUS_VIEW_WRITE,
    COVERAGE,
    SPEC_BY_AGENT,
    SPEC_PARAMS,
    TABLE_PARAMS,
    TABLES_BY_AGENT,
    TENANT_RELATION_PARAMS,
    VIEW_PARAMS,
    World,
    anchor_for,
    citus_refusal,
    citus_workers,
    count,
    insert_row,
    into_scope,
    on_citus,
    relation_counts,
    shard_names,
    suffix,
    transient_tier,
    verify_chain,
)

pytestmark = pytest.mark.db

Conn = psycopg.Connection[Any]


def _has_privilege(conn: Conn, relation: Table, privilege: str) -> bool:
    row = conn.execute("SELECT has_table_privilege(current_user, %s, %s)",
                       (relation.qualified, privilege)).fetchone()
    return bool(row and row[0])


def _tenants_visible(conn: Conn, agent: str, relation: Table) -> set[str]:
    column = sql.Identifier(TABLES_BY_AGENT[agent].tenant_column)
    query = sql.SQL("SELECT DISTINCT {} FROM {}").format(column, relation.ident)
    return {row[0] for row in conn.execute(query)}


def _counts_of(conn: Conn, agent: str, tenant: str) -> dict[str, int]:
    with tenant_transaction(conn, tenant):
        return dict(relation_counts(conn, TABLES_BY_AGENT[agent], tenant))


# -- reads --------------------------------------------------------------------------------------


@pytest.mark.parametrize("agent, relation", TENANT_RELATION_PARAMS)
def test_cross_tenant_read_returns_nothing(
    agent: str, relation: Table, world: dict[str, World], app_session: Conn
) -> None:
    a, b = world[agent].a, world[agent].b
    tenant_column = TABLES_BY_AGENT[agent].tenant_column
    with tenant_transaction(app_session, b.tenant) as conn:
        visible = _tenants_visible(conn, agent, relation)
        of_a = count(conn, relation, tenant_column, a.tenant)
    assert of_a == 0
    assert visible == {b.tenant}, ("b must see its own rows, and only those (no rows at all: "
                                   "extend tests/security/_support.py:seed_tenant for this view)")


@pytest.mark.parametrize("agent, relation", TENANT_RELATION_PARAMS)
def test_tenant_without_rows_sees_an_empty_relation(
    agent: str, relation: Table, world: dict[str, World], app_session: Conn
) -> None:
    with tenant_transaction(app_session, world[agent].c) as conn:
        assert count(conn, relation) == 0


@pytest.mark.parametrize("agent", SPEC_PARAMS)
def test_engine_cross_tenant_read_returns_nothing(
    agent: str, world: dict[str, World], engines: dict[str, Engine]
) -> None:
    engine, a, b = engines[agent], world[agent].a, world[agent].b
    spec = engine.spec
    tiers = list(spec.tier_names)
    with engine.tenant(anchor_for(spec, b.tenant)) as mem:
        for memory_id in a.memory_ids:
            assert mem.get(memory_id) is None
            assert mem.history(memory_id) == []
        assert mem.search(a.marker, tiers=tiers) == []
        assert mem.search("", envelope={"marker": a.marker}, tiers=tiers) == []
        assert mem.search("", envelope={"subject": a.subject}, tiers=tiers) == []
        # controls: the same calls find b's own rows
        own = {h.memory.id for h in mem.search(b.marker, tiers=tiers, limit=100)}
        assert own and own <= set(b.memory_ids)
        assert mem.get(b.memory_ids[0]) is not None
        assert mem.history(b.memory_ids[0])
        if "envelope" in engine.signals:
            assert mem.search("", envelope={"marker": b.marker}, tiers=tiers)


@pytest.mark.parametrize("agent", SPEC_PARAMS)
def test_engine_cross_tenant_writes_change_nothing(
    agent: str, world: dict[str, World], engines: dict[str, Engine], app_session: Conn
) -> None:
    engine, a, b = engines[agent], world[agent].a, world[agent].b
    spec = engine.spec
    before = _counts_of(app_session, agent, a.tenant)
    as_b = anchor_for(spec, b.tenant)
    target = a.memory_ids[0]
    for attempt in (
        lambda mem: mem.supersede(target, "rewritten by another tenant"),
        lambda mem: mem.tombstone(target),
        lambda mem: mem.invalidate(target),
        lambda mem: mem.archive(target),
        lambda mem: mem.link_action("foreign-action", [target], "basis"),
    ):
        with pytest.raises(TenancyError, match="no memory"), engine.tenant(as_b) as mem:
            attempt(mem)
    with engine.tenant(as_b) as mem:
        assert mem.erase(a.subject, approvals=APPROVERS, reason="x", memory_ids=[target]) == 0
        tier = transient_tier(spec)
        assert mem.end_scope(tier, a.scope_id, **into_scope(spec, tier, a.scope_id)) == (0, 0)
    assert _counts_of(app_session, agent, a.tenant) == before
    with engine.tenant(anchor_for(spec, a.tenant)) as mem:
        memory = mem.get(target)
        assert memory is not None and memory.active and memory.content.startswith(a.marker)


# -- writes -------------------------------------------------------------------------------------


@pytest.mark.parametrize("agent, relation", TABLE_PARAMS)
def test_cross_tenant_insert_is_refused_with_42501(
    agent: str, relation: Table, world: dict[str, World], app_session: Conn
) -> None:
    a, b = world[agent].a, world[agent].b
    before = _counts_of(app_session, agent, a.tenant)
    with pytest.raises(PolicyViolation) as refused, \
            tenant_transaction(app_session, b.tenant) as conn:
        insert_row(conn, agent, relation, a.tenant, a.refs)
    assert refused.value.context["sqlstate"] == "42501"
    assert _counts_of(app_session, agent, a.tenant) == before


@pytest.mark.parametrize("agent, relation", TABLE_PARAMS)
@pytest.mark.parametrize("verb", ["UPDATE", "DELETE"])
def test_cross_tenant_update_or_delete_affects_no_rows(
    agent: str, relation: Table, verb: str, world: dict[str, World], app_session: Conn
) -> None:
    a, b = world[agent].a, world[agent].b
    column = sql.Identifier(TABLES_BY_AGENT[agent].tenant_column)
    statement = {
        "UPDATE": sql.SQL("UPDATE {} SET {} = {} WHERE {} = %s").format(
            relation.ident, column, column, column),
        "DELETE": sql.SQL("DELETE FROM {} WHERE {} = %s").format(relation.ident, column),
    }[verb]
    before = _counts_of(app_session, agent, a.tenant)
    if _has_privilege(app_session, relation, verb):
        with tenant_transaction(app_session, b.tenant) as conn:
            assert conn.execute(statement, (a.tenant,)).rowcount == 0
    else:  # append-only tables: the grant is missing, whatever the tenant
        with pytest.raises(PolicyViolation) as refused, \
                tenant_transaction(app_session, b.tenant) as conn:
            conn.execute(statement, (a.tenant,))
        assert refused.value.context["sqlstate"] == "42501"
    assert _counts_of(app_session, agent, a.tenant) == before


@pytest.mark.parametrize("agent, relation", TABLE_PARAMS)
def test_moving_own_rows_to_another_tenant_is_refused(
    agent: str, relation: Table, world: dict[str, World], app_session: Conn
) -> None:
    a, b = world[agent].a, world[agent].b
    column = sql.Identifier(TABLES_BY_AGENT[agent].tenant_column)
    statement = sql.SQL("UPDATE {} SET {} = %s").format(relation.ident, column)
    before = _counts_of(app_session, agent, b.tenant)
    others = _counts_of(app_session, agent, a.tenant)
    with pytest.raises((PolicyViolation, StorageError)) as refused, \
            tenant_transaction(app_session, b.tenant) as conn:
        conn.execute(statement, (a.tenant,))
    if on_citus(app_session):
        # Citus refuses any change of the distribution column (the tenant column) before
        # row-level security is checked: 0A000 in its own words, not 42501; the counts
        # below show the rows stayed with their tenant
        assert citus_refusal(refused.value, CITUS_REKEY), refused.value
    else:
        assert isinstance(refused.value, PolicyViolation), refused.value
        assert refused.value.context["sqlstate"] == "42501"
    assert _counts_of(app_session, agent, b.tenant) == before
    assert _counts_of(app_session, agent, a.tenant) == others


# -- no tenant ----------------------------------------------------------------------------------


def test_session_has_no_tenant_outside_a_tenant_transaction(app_session: Conn) -> None:
    row = app_session.execute("SELECT current_setting('primitives.tenant', true), "
                              "primitives.current_tenant()").fetchone()
    assert row is not None and row[0] in (None, "") and row[1] is None


@pytest.mark.parametrize("agent, relation", TENANT_RELATION_PARAMS)
def test_no_tenant_set_sees_nothing(
    agent: str, relation: Table, world: dict[str, World], app_session: Conn
) -> None:
    assert count(app_session, relation) == 0


@pytest.mark.parametrize("agent, relation", TABLE_PARAMS)
def test_no_tenant_set_insert_is_refused(
    agent: str, relation: Table, world: dict[str, World], app_session: Conn
) -> None:
    a = world[agent].a
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        insert_row(app_session, agent, relation, a.tenant, a.refs)


@pytest.mark.parametrize("agent, relation", TABLE_PARAMS)
def test_no_tenant_set_update_and_delete_affect_no_rows(
    agent: str, relation: Table, world: dict[str, World], app_session: Conn
) -> None:
    a = world[agent].a
    column = sql.Identifier(TABLES_BY_AGENT[agent].tenant_column)
    before = _counts_of(app_session, agent, a.tenant)
    for verb, statement in (
        ("UPDATE", sql.SQL("UPDATE {} SET {} = {}").format(relation.ident, column, column)),
        ("DELETE", sql.SQL("DELETE FROM {}").format(relation.ident)),
    ):
        if _has_privilege(app_session, relation, verb):
            assert app_session.execute(statement).rowcount == 0, verb
        else:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                app_session.execute(statement)
    assert _counts_of(app_session, agent, a.tenant) == before


# -- views --------------------------------------------------------------------------------------


@pytest.mark.parametrize("agent, view", VIEW_PARAMS)
def test_view_runs_with_the_readers_rights_security_invoker(
    agent: str, view: Table, app_session: Conn
) -> None:
    row = app_session.execute("SELECT c.reloptions FROM pg_catalog.pg_class AS c "
                              "WHERE c.oid = %s::regclass", (view.qualified,)).fetchone()
    assert row is not None and "security_invoker=true" in (row[0] or [])


@pytest.mark.parametrize("agent", SPEC_PARAMS)
def test_policy_coverage_shows_rls_enabled_and_forced_on_every_table(
    agent: str, world: dict[str, World], app_session: Conn, auditor_session: Conn
) -> None:
    tables = TABLES_BY_AGENT[agent]
    query = sql.SQL("SELECT table_schema, table_name, present, rls_enabled, rls_forced, "
                    "tenant_policy, auditor_policy, owner FROM {}").format(
        tables.audit_policy_coverage.ident)
    expected = {(t.schema, t.name, True, True, True, True, True, OWNER_ROLE)
                for t in tables.tables}
    with tenant_transaction(app_session, world[agent].b.tenant) as conn:
        as_tenant = set(conn.execute(query).fetchall())
    assert as_tenant == expected
    assert set(app_session.execute(query).fetchall()) == expected
    assert set(auditor_session.execute(query).fetchall()) == expected


# -- the auditor --------------------------------------------------------------------------------


@pytest.mark.parametrize("agent, view", AUDIT_VIEW_PARAMS)
def test_auditor_reads_audit_views_across_tenants(
    agent: str, view: Table, world: dict[str, World], auditor_session: Conn
) -> None:
    tables = TABLES_BY_AGENT[agent]
    access = auditor_access(SPEC_BY_AGENT[agent], tables)
    if access is not None and view.name not in access.views:
        # discipline.visibility.policy: a view the access policy does not list is refused
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            count(auditor_session, view)
        return
    if suffix(tables, view) == COVERAGE:
        assert count(auditor_session, view) == len(tables.tables)
        return
    a, b = world[agent].a.tenant, world[agent].b.tenant
    query = sql.SQL("SELECT DISTINCT {} FROM {} WHERE {} = ANY(%s)").format(
        tables.tenant, view.ident, tables.tenant)
    assert {row[0] for row in auditor_session.execute(query, ([a, b],))} == {a, b}


@pytest.mark.parametrize("agent, relation", TABLE_PARAMS + VIEW_PARAMS)
def test_auditor_cannot_insert_update_or_delete(
    agent: str, relation: Table, world: dict[str, World], auditor_session: Conn,
    app_session: Conn,
) -> None:
    tables = TABLES_BY_AGENT[agent]
    a = world[agent].a
    is_table = relation.kind == "table"
    coverage = suffix(tables, relation) == COVERAGE
    column = sql.Identifier("table_name") if coverage else tables.tenant
    before = _counts_of(app_session, agent, a.tenant)
    statements: list[tuple[str, sql.Composable, tuple[Any, ...]]] = [
        ("UPDATE", sql.SQL("UPDATE {} SET {} = {}").format(relation.ident, column, column), ()),
        ("DELETE", sql.SQL("DELETE FROM {}").format(relation.ident), ()),
    ]
    if is_table:
        statements.append(("TRUNCATE", sql.SQL("TRUNCATE {}").format(relation.ident), ()))
        insert = sql.SQL("INSERT INTO {} ({}) VALUES (%s)").format(relation.ident, column)
    else:
        insert = sql.SQL("INSERT INTO {} DEFAULT VALUES").format(relation.ident)
    statements.append(("INSERT", insert, (a.tenant,) if is_table else ()))
    # tables: the grant is missing (42501); views the rewriter cannot update say so (55000)
    refusals = {"42501"} if is_table else {"42501", "55000"}
    # on a Citus coordinator a write through a view over distributed tables is refused by
    # Citus before PostgreSQL checks privileges (0A000, its own words): refused all the same,
    # and the counts below show that nothing changed
    citus = not is_table and on_citus(auditor_session)
    for verb, statement, params in statements:
        with pytest.raises(psycopg.Error) as refused:
            auditor_session.execute(statement, params)
        assert refused.value.sqlstate in refusals or (
            citus and citus_refusal(refused.value, CITUS_VIEW_WRITE)), (verb, refused.value)
    assert _counts_of(app_session, agent, a.tenant) == before


@pytest.mark.parametrize("agent, relation", TABLE_PARAMS)
def test_auditor_holds_select_only(agent: str, relation: Table, auditor_session: Conn) -> None:
    held = [p for p in ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES",
                        "TRIGGER") if _has_privilege(auditor_session, relation, p)]
    # raw personal data kept with consent: not even the auditor reads it
    tables = TABLES_BY_AGENT[agent]
    access = auditor_access(SPEC_BY_AGENT[agent], tables)
    withheld = access.withheld.get(relation.name, ()) if access is not None else ()
    if withheld:
        # an access policy keeps the payload columns from the auditor: SELECT on the others
        assert held == []
        columns = [r[0] for r in auditor_session.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
            "AND NOT attisdropped", (relation.qualified,))]
        readable = {c for c in columns if auditor_session.execute(
            "SELECT has_column_privilege(current_user, %s, %s, 'SELECT')",
            (relation.qualified, c)).fetchone() == (True,)}
        assert readable == set(columns) - set(withheld) and readable
        return
    assert held == ([] if relation == tables.pii_raw else ["SELECT"])


# -- side channels ------------------------------------------------------------------------------


_LEAK = ("(text) RETURNS boolean LANGUAGE plpgsql COST 0.0000001 "
         "AS $$ BEGIN RAISE NOTICE 'leak:%', $1; RETURN true; END $$")
"""A cheap non-leakproof function that reports each value it is shown."""


@pytest.fixture(scope="module")
def leak(app_session: Conn, pg: PostgresHandle,
         on_cluster: bool) -> Iterator[tuple[sql.Identifier, list[str]]]:
    """The leaky function to call and the notices it raised. On one node the session makes
    it in its own pg_temp. On a Citus cluster the filter runs on the workers, which have no
    pg_temp schema of this session (the test checks that such a query is refused), so there
    the admin makes it in a schema of its own, which Citus creates on the workers too, and
    grants EXECUTE to the application role: the same kind of function, callable by that
    role and not LEAKPROOF."""
    app_session.execute(f"CREATE FUNCTION pg_temp.leak{_LEAK}")
    seen: list[str] = []
    app_session.add_notice_handler(
        lambda diag: seen.append(diag.message_primary or "")
        if (diag.message_primary or "").startswith("leak:") else None)
    if not on_cluster:
        yield sql.Identifier("pg_temp", "leak"), seen
        return
    schema = f"leak_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg.admin_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL(
            "CREATE SCHEMA {s}; CREATE FUNCTION {s}.leak" + _LEAK + "; "
            "GRANT USAGE ON SCHEMA {s} TO {app}; "
            "GRANT EXECUTE ON FUNCTION {s}.leak(text) TO {app}").format(
                s=sql.Identifier(schema), app=sql.Identifier(APP_ROLE)))
        try:
            yield sql.Identifier(schema, "leak"), seen
        finally:
            admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


@pytest.mark.parametrize("agent, relation", TENANT_RELATION_PARAMS)
def test_leaky_function_in_where_sees_only_the_tenants_rows(
    agent: str, relation: Table, world: dict[str, World], app_session: Conn,
    leak: tuple[sql.Identifier, list[str]], on_cluster: bool,
) -> None:
    function, leak_notices = leak
    b = world[agent].b.tenant
    column = TABLES_BY_AGENT[agent].tenant
    query = sql.SQL("SELECT count(*) FROM {} WHERE {}({}::text)")
    leak_notices.clear()
    if on_cluster:  # the session's pg_temp function cannot reach the workers: refused
        with pytest.raises(StorageError) as refused, tenant_transaction(app_session, b) as conn:
            conn.execute(query.format(relation.ident, sql.Identifier("pg_temp", "leak"),
                                      column))
        assert refused.value.context["sqlstate"] == "3F000"
        assert leak_notices == []
    with tenant_transaction(app_session, b) as conn:
        conn.execute(query.format(relation.ident, function, column))
    assert leak_notices and set(leak_notices) == {f"leak:{b}"}


@pytest.mark.parametrize("agent", SPEC_PARAMS)
def test_planner_statistics_do_not_reveal_other_tenants_values(
    agent: str, world: dict[str, World], pg: PostgresHandle, app_session: Conn
) -> None:
    tables = TABLES_BY_AGENT[agent]
    with psycopg.connect(pg.admin_dsn, autocommit=True) as admin:
        for relation in tables.tables:
            admin.execute(sql.SQL("ANALYZE {}").format(relation.ident))
        if on_citus(admin):
            # on a Citus coordinator the statistics live with the rows, in the workers'
            # shards (the coordinator's pg_stats of a distributed table are empty): the same
            # two reads run on every worker, over the shards, as the admin and as the
            # application role in a transaction of tenant b
            _shard_statistics_hidden(admin, tables, world[agent].b.tenant)
            return
        visible_to_admin = admin.execute(
            "SELECT count(*) FROM pg_catalog.pg_stats WHERE schemaname = %s AND tablename = %s",
            (tables.schema, tables.memories.name)).fetchone()
    assert visible_to_admin is not None and visible_to_admin[0] > 0  # stats exist
    with tenant_transaction(app_session, world[agent].b.tenant) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_catalog.pg_stats WHERE schemaname = %s AND tablename = ANY(%s)",
            (tables.schema, [t.name for t in tables.tables])).fetchone()
    assert row == (0,)


def _shard_statistics_hidden(admin: Conn, tables: Tables, tenant: str) -> None:
    """On each worker: the admin reads statistics of the memories shards there (on some
    worker at least); the application role, in a transaction of ``tenant``, reads none of
    any shard of the agent."""
    memories = shard_names(admin, tables.memories)
    every = [name for relation in tables.tables for name in shard_names(admin, relation)]
    query = ("SELECT count(*) FROM pg_catalog.pg_stats WHERE schemaname = %s "
             "AND tablename = ANY(%s)")
    seen_by_admin = 0
    for worker_admin, worker_app in zip(citus_workers(admin, admin.info.user),
                                        citus_workers(admin, APP_ROLE), strict=True):
        with psycopg.connect(worker_admin, autocommit=True) as on_worker:
            row = on_worker.execute(query, (tables.schema, memories)).fetchone()
            seen_by_admin += row[0] if row else 0
        with psycopg.connect(worker_app) as on_worker, on_worker.transaction():
            # the setting the shards' tenant policies read, as the coordinator forwards it
            on_worker.execute("SELECT pg_catalog.set_config('primitives.tenant', %s, true)",
                              (tenant,))
            row = on_worker.execute(query, (tables.schema, every)).fetchone()
            assert row == (0,), worker_app
            # the shards are in this session's catalog: the statistics are withheld, not hidden
            shown = on_worker.execute(
                "SELECT count(*) FROM pg_catalog.pg_class WHERE relname = ANY(%s)",
                (every,)).fetchone()
            assert shown is not None and shown[0] > 0, worker_app
    assert seen_by_admin > 0  # stats exist


@pytest.mark.parametrize("agent", SPEC_PARAMS)
def test_refused_cross_tenant_journal_insert_does_not_hold_the_victims_journal(
    agent: str, world: dict[str, World], pg: PostgresHandle, app_session: Conn,
) -> None:
    """The journal trigger locks per (journal, tenant) before row-level security refuses the
    row; the refusal must release that lock, or b could stall a's writes."""
    a, b = world[agent].a, world[agent].b
    events = TABLES_BY_AGENT[agent].events
    with psycopg.connect(pg.app_dsn) as attacker:  # left in the aborted transaction
        attacker.execute(sql.SQL("SET LOCAL primitives.tenant = {}").format(
            sql.Literal(b.tenant)))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            insert_row(attacker, agent, events, a.tenant, a.refs)
        with tenant_transaction(app_session, a.tenant) as conn:
            conn.execute("SET LOCAL lock_timeout = '2s'")
            insert_row(conn, agent, events, a.tenant, a.refs)
            assert verify_chain(conn, TABLES_BY_AGENT[agent], a.tenant) is None


def test_spec_names_cover_every_reference_agent() -> None:
    """Guards the parametrisation itself: every spec contributes its tables and views."""
    assert {p.values[0] for p in TABLE_PARAMS} == set(SPEC_BY_AGENT)
    assert {p.values[0] for p in VIEW_PARAMS} == set(SPEC_BY_AGENT)
    assert {p.values[0] for p in AUDIT_VIEW_PARAMS} == set(SPEC_BY_AGENT)
