"""A hostile application session cannot stall, kill, lock out or watch other tenants.

Every runtime connection is the same role, so whatever ``primitives_app`` may do in one
session it may do to every tenant's sessions. Each test plays the attacker with a plain
connection as a runtime role (never a superuser) and names what it must not manage.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives.compile import Table
from primitives.db import APP_ROLE, tenant_transaction
from primitives.embeddings import HashingEmbedder
from primitives.engine import Engine
from primitives.errors import PolicyViolation
from tests.conftest import PostgresHandle
from tests.security._support import (
    SPEC_BY_AGENT,
    SPEC_PARAMS,
    TABLE_PARAMS,
    TABLES_BY_AGENT,
    World,
    anchor_for,
    connect_engine,
    new_tenant,
    on_citus,
    transient_tier,
)

pytestmark = pytest.mark.db

Conn = psycopg.Connection[Any]

ROLES = [pytest.param("app", id="app"), pytest.param("auditor", id="auditor")]


def _dsn(pg: PostgresHandle, role: str) -> str:
    return pg.app_dsn if role == "app" else pg.auditor_dsn


def _advisory_functions(conn: Conn) -> list[str]:
    rows = conn.execute(
        "SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc AS p "
        "WHERE p.pronamespace = 'pg_catalog'::regnamespace "
        "AND p.proname ~ '^pg_(try_)?advisory_' ORDER BY 1").fetchall()
    assert len(rows) >= 20  # every overload: session and transaction, shared, try, unlock
    return [name for (name,) in rows]


def _call(function: str) -> str:
    """A call of ``function`` (an ``oid::regprocedure`` text) with arguments of its types."""
    args = function[function.index("(") + 1:-1]
    values = {"bigint": "1::bigint", "integer": "1"}
    return f"SELECT {function[:function.index('(')]}(" + ", ".join(
        values[a.strip()] for a in args.split(",") if a.strip()) + ")"


# -- breaking every tenant through role settings (issue 17, defect 4) ---------------------

HOSTILE_SETTINGS = {
    "default_transaction_read_only": "on",
    "default_transaction_isolation": "serializable",
    "statement_timeout": "1",
    "lock_timeout": "1",
    "search_path": "nowhere",
    "row_security": "off",
    "client_encoding": "LATIN1",
    "gin_fuzzy_search_limit": "1",
}


def _reset_role_settings(pg: PostgresHandle) -> None:
    with psycopg.connect(pg.admin_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("ALTER ROLE {} RESET ALL").format(sql.Identifier(APP_ROLE)))


def test_settings_a_session_persists_on_its_role_do_not_reach_the_engines_connections(
    pg: PostgresHandle, specs: object,
) -> None:
    spec = SPEC_BY_AGENT["spectral"]
    tenant = new_tenant("settings")
    with psycopg.connect(pg.app_dsn, autocommit=True) as attacker:
        try:
            for name, value in HOSTILE_SETTINGS.items():
                attacker.execute(sql.SQL("ALTER ROLE CURRENT_USER SET {} = {}").format(
                    sql.Identifier(name), sql.Literal(value)))
            embedder = HashingEmbedder(dims=spec.retrieval.embedding.dims)
            with connect_engine(spec, pg.app_dsn, max_connections=1,
                                embedder=embedder) as engine:
                # one write in a tenant transaction, one on the one-message path; the
                # second reuses the pooled connection after its RESET ALL
                with engine.tenant(anchor_for(spec, tenant)) as mem:
                    mem.observe(transient_tier(spec), "Zoë's note 0 survives the attack")
                engine.observe(anchor_for(spec, tenant), transient_tier(spec),
                               "Zoë's note 1 survives the attack")
                with engine.tenant(anchor_for(spec, tenant)) as mem:
                    hits = mem.search("note survives the attack")
                assert {h.memory.content for h in hits} == {
                    "Zoë's note 0 survives the attack", "Zoë's note 1 survives the attack"}
        finally:
            _reset_role_settings(pg)



# Each class of setting an ordinary role may persist on itself, with what it would do to the
# engine's statements if it reached them. On a Citus cluster the coordinator reaches the
# workers as the application role, so the role's settings are those connections' defaults
# (Citus propagates ALTER ROLE ... SET): the statements below read the settings where the
# tenant's rows are (on the worker that holds its shard), inside the engine's transaction.
ROLE_SETTING_CLASSES = {
    # every write refused; a serializable engine transaction refused by the chain (PM004)
    "transaction-mode": {"default_transaction_read_only": "on",
                         "default_transaction_isolation": "serializable"},
    # every statement, lock wait, pause between statements or transaction cut short
    "timeouts": {"statement_timeout": "1", "lock_timeout": "1",
                 "idle_in_transaction_session_timeout": "1", "transaction_timeout": "1"},
    # every query refused (row_security), the vector type hidden, full-text matches dropped
    "visibility": {"row_security": "off", "search_path": "nowhere",
                   "gin_fuzzy_search_limit": "1"},
    # a committed write acknowledged before it is on disk
    "durability": {"synchronous_commit": "off"},
    # every connection ended when it waits between two transactions
    "idle-session": {"idle_session_timeout": "1"},
    # literals and results read another way
    "formats": {"standard_conforming_strings": "off", "DateStyle": "SQL, DMY",
                "IntervalStyle": "sql_standard", "extra_float_digits": "-15",
                "bytea_output": "escape", "client_encoding": "LATIN1"},
}
ENGINE_VALUES = {  # what the engine's statements run with (primitives.db._session)
    "transaction_read_only": "off", "transaction_isolation": "read committed",
    "statement_timeout": "0", "lock_timeout": "0", "idle_in_transaction_session_timeout": "0",
    "transaction_timeout": "0", "idle_session_timeout": "0", "row_security": "on",
    "gin_fuzzy_search_limit": "0",
    "synchronous_commit": "on", "standard_conforming_strings": "on",
    "DateStyle": "ISO, MDY", "IntervalStyle": "postgres", "extra_float_digits": "1",
    "bytea_output": "hex",
}
_EFFECT = {"default_transaction_read_only": "transaction_read_only",
           "default_transaction_isolation": "transaction_isolation"}


@pytest.mark.parametrize("settings", ROLE_SETTING_CLASSES.values(),
                         ids=list(ROLE_SETTING_CLASSES))
def test_role_settings_of_each_class_do_not_reach_the_engines_statements(
    pg: PostgresHandle, specs: object, settings: dict[str, str],
) -> None:
    spec = SPEC_BY_AGENT["spectral"]
    tables = TABLES_BY_AGENT["spectral"]
    tenant = new_tenant("settings")
    read = [_EFFECT.get(name, name) for name in settings if name != "client_encoding"]
    if "search_path" in read:
        read.remove("search_path")  # the engine's own value, read on its connection below
    shown = sql.SQL(", ").join(
        sql.SQL("pg_catalog.current_setting({})").format(sql.Literal(n))
        for n in [*read, "search_path"])
    content = "Zoë's note \\ 0 survives the attack"
    with psycopg.connect(pg.app_dsn, autocommit=True) as attacker:
        try:
            for name, value in settings.items():
                attacker.execute(sql.SQL("ALTER ROLE CURRENT_USER SET {} = {}").format(
                    sql.Identifier(name), sql.Literal(value)))
            embedder = HashingEmbedder(dims=spec.retrieval.embedding.dims)
            with connect_engine(spec, pg.app_dsn, max_connections=1,
                                embedder=embedder) as engine:
                with engine.tenant(anchor_for(spec, tenant)) as mem:
                    written = mem.observe(transient_tier(spec), content)
                    # read where the tenant's row is (a worker, on a cluster) and on the
                    # engine's own connection
                    where_the_rows_are = mem.connection.execute(sql.SQL(
                        "SELECT {} FROM {} WHERE {} = %s AND id = %s").format(
                            shown, tables.memories.ident, sql.Identifier(tables.tenant_column)),
                        (tenant, written.id)).fetchone()
                    engines_own = mem.connection.execute(
                        sql.SQL("SELECT {}").format(shown)).fetchone()
                engine.observe(anchor_for(spec, tenant), transient_tier(spec),
                               "Zoë's note 1 survives the attack")
                with engine.tenant(anchor_for(spec, tenant)) as mem:
                    hits = mem.search("note survives the attack")
                    again = mem.get(written.id)
            assert {h.memory.content for h in hits} == {
                content, "Zoë's note 1 survives the attack"}
            assert again is not None and again.content == content
            assert (again.created_at, again.confidence) == (written.created_at, written.confidence)
            assert where_the_rows_are == engines_own
            assert engines_own is not None
            assert dict(zip(read, engines_own, strict=False)) == {
                n: ENGINE_VALUES[n] for n in read}
            assert engines_own[-1] != "nowhere"
        finally:
            _reset_role_settings(pg)


# -- locking every tenant out (issue 17, defect 5) -----------------------------------------

# Every mode that blocks other sessions' reads or writes (or VACUUM). PostgreSQL grants them
# to table-level UPDATE, DELETE, TRUNCATE or MAINTAIN, none of which the app role holds any
# more; ACCESS SHARE, ROW SHARE (SELECT) and ROW EXCLUSIVE (INSERT) block only DDL.
LOCK_MODES = ["ACCESS EXCLUSIVE", "EXCLUSIVE", "SHARE ROW EXCLUSIVE", "SHARE",
              "SHARE UPDATE EXCLUSIVE"]


@pytest.mark.parametrize("agent, relation", TABLE_PARAMS)
def test_app_session_cannot_lock_a_table_against_every_tenant(
    agent: str, relation: Table, app_session: Conn,
) -> None:
    for mode in LOCK_MODES:
        with pytest.raises(psycopg.errors.InsufficientPrivilege), app_session.transaction():
            app_session.execute(sql.SQL("LOCK TABLE {} IN {} MODE").format(
                relation.ident, sql.SQL(mode)))


@pytest.mark.parametrize("agent, relation", TABLE_PARAMS)
def test_app_session_cannot_delete_truncate_or_rekey_rows(
    agent: str, relation: Table, app_session: Conn, world: dict[str, World],
) -> None:
    """Hard deletes go through the owner's functions; no column that places a row (the
    tenant) may be updated."""
    tenant = sql.Identifier(TABLES_BY_AGENT[agent].tenant_column)
    for statement in (sql.SQL("DELETE FROM {}").format(relation.ident),
                      sql.SQL("TRUNCATE {}").format(relation.ident),
                      sql.SQL("UPDATE {} SET {} = {}").format(relation.ident, tenant, tenant)):
        with pytest.raises(PolicyViolation, match="permission denied") as caught, \
                tenant_transaction(app_session, world[agent].a.tenant) as conn:
            conn.execute(statement)
        assert caught.value.context["sqlstate"] == "42501"


@pytest.mark.parametrize("agent", [p.values[0] for p in SPEC_PARAMS])
@pytest.mark.parametrize("column", ["content", "value", "envelope", "tags", "source",
                                    "erasure_reason"])
def test_app_session_cannot_rewrite_what_a_memory_holds(
    agent: str, column: str, app_session: Conn, world: dict[str, World],
) -> None:
    """Content and the fields written with it change only through a governed erasure (the
    owner's ``<prefix>_erase_row``): an UPDATE would leave no journal event."""
    memories = TABLES_BY_AGENT[agent].memories
    with pytest.raises(PolicyViolation, match="permission denied") as caught, \
            tenant_transaction(app_session, world[agent].a.tenant) as conn:
        conn.execute(sql.SQL("UPDATE {} SET {} = {}").format(
            memories.ident, sql.Identifier(column), sql.Identifier(column)))
    assert caught.value.context["sqlstate"] == "42501"


# -- killing and stalling other tenants (issue 17, defect 6) -------------------------------

@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("function", ["pg_terminate_backend", "pg_cancel_backend"])
def test_runtime_session_cannot_kill_or_cancel_another_tenants_backend(
    pg: PostgresHandle, role: str, function: str, on_cluster: bool,
) -> None:
    # the pid as integer, the built-in function's argument: Citus adds an overload taking a
    # bigint (a cluster-wide process id), beside which a smallint argument is ambiguous
    call = sql.SQL("SELECT pg_catalog.{}(%s::integer)").format(sql.Identifier(function))
    with psycopg.connect(pg.app_dsn, autocommit=True) as victim, \
            psycopg.connect(_dsn(pg, role), autocommit=True) as attacker:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            attacker.execute(call, (victim.info.backend_pid,))
        if on_cluster:  # and Citus's own overload, with the victim's cluster-wide id
            gpid = victim.execute("SELECT pg_catalog.citus_backend_gpid()").fetchone()
            assert gpid is not None
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                attacker.execute(sql.SQL("SELECT pg_catalog.{}(%s::bigint)").format(
                    sql.Identifier(function)), (gpid[0],))
        assert victim.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.parametrize("role", ROLES)
def test_runtime_session_cannot_take_any_advisory_lock(
    pg: PostgresHandle, role: str,
) -> None:
    with psycopg.connect(_dsn(pg, role), autocommit=True) as attacker:
        for function in _advisory_functions(attacker):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                attacker.execute(_call(function))


@pytest.mark.parametrize("agent", SPEC_PARAMS)
def test_session_lock_on_a_tenants_journal_key_cannot_stall_its_writes(
    agent: str, world: dict[str, World], engines: dict[str, Engine], pg: PostgresHandle,
) -> None:
    """The journal lock key used to be hashtextextended(journal oid | tenant): guessable, and
    any session could hold it. Now only the transaction's own tenant may take it."""
    a, b = world[agent].a, world[agent].b
    events = TABLES_BY_AGENT[agent].events
    with psycopg.connect(pg.app_dsn, autocommit=True) as attacker:
        oid = attacker.execute("SELECT %s::regclass::oid::text",
                               (events.qualified,)).fetchone()
        assert oid is not None
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            attacker.execute("SELECT pg_catalog.pg_advisory_lock("
                             "pg_catalog.hashtextextended(%s || '|' || %s, 0))",
                             (oid[0], a.tenant))
        with pytest.raises(PolicyViolation, match="tenant of the current transaction"), \
                tenant_transaction(attacker, b.tenant) as conn:
            conn.execute("SELECT primitives.tenant_xact_lock(%s, %s)",
                         (a.tenant, f"journal {oid[0]}"))
        engine = engines[agent]
        done = threading.Event()

        def write() -> None:
            with engine.tenant(anchor_for(engine.spec, a.tenant)) as mem:
                mem.observe(transient_tier(engine.spec), "written while b attacks")
            done.set()

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        writer.join(10)
        assert done.is_set(), "a's write waited on a lock b holds"


def test_a_non_superuser_migrator_is_warned_and_the_revocations_are_skipped(
    pg: PostgresHandle,
) -> None:
    """Only a superuser may change built-in functions' privileges: migration 0004's first
    statement must then warn (doctor keeps failing) rather than fail the migration."""
    text = (Path(__file__).resolve().parents[2] / "migrations" /
            "0004_runtime_role_limits.sql").read_text(encoding="utf-8")
    revoke = text[:text.index("SET LOCAL ROLE primitives_owner;")]
    notices: list[str] = []
    with psycopg.connect(pg.app_dsn, autocommit=True) as not_super:
        not_super.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        not_super.execute(revoke)
    assert any("is not a superuser" in n and "runtime_functions" in n for n in notices), notices


# -- side channels (issue 17, defect 7) ----------------------------------------------------

STAT_VIEWS = ["pg_stat_user_tables", "pg_stat_all_tables", "pg_stat_xact_user_tables",
              "pg_statio_user_tables", "pg_stat_user_indexes", "pg_statio_user_indexes",
              "pg_stat_database"]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("view", STAT_VIEWS)
def test_runtime_session_cannot_read_per_table_activity_of_every_tenant(
    pg: PostgresHandle, role: str, view: str, world: dict[str, World],
) -> None:
    with psycopg.connect(_dsn(pg, role), autocommit=True) as spy, \
            pytest.raises(psycopg.errors.InsufficientPrivilege):
        spy.execute(sql.SQL("SELECT * FROM pg_catalog.{}").format(sql.Identifier(view)))


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("function", ["pg_stat_get_live_tuples", "pg_stat_get_tuples_inserted",
                                      "pg_stat_get_xact_tuples_inserted",
                                      "pg_stat_get_blocks_fetched"])
def test_runtime_session_cannot_count_a_tables_rows_through_the_stats_functions(
    pg: PostgresHandle, role: str, function: str, world: dict[str, World],
) -> None:
    memories = TABLES_BY_AGENT["spectral"].memories
    with psycopg.connect(_dsn(pg, role), autocommit=True) as spy, \
            pytest.raises(psycopg.errors.InsufficientPrivilege):
        spy.execute(sql.SQL("SELECT pg_catalog.{}(%s::regclass)").format(
            sql.Identifier(function)), (memories.qualified,))


def _rows_removed_by_filter(plan: dict[str, Any]) -> int:
    removed = plan.get("Rows Removed by Filter", 0)
    return int(removed) + sum(_rows_removed_by_filter(p) for p in plan.get("Plans", []))


def _tenant_in_the_shard_of(admin: Conn, relation: Table, tenant: str, label: str) -> str:
    """A new tenant whose rows of ``relation`` go to the shard that holds ``tenant``'s."""
    row = admin.execute(
        "SELECT t FROM unnest(%(candidates)s::text[]) AS t "
        "WHERE pg_catalog.get_shard_id_for_distribution_column(%(r)s::regclass, t) "
        "= pg_catalog.get_shard_id_for_distribution_column(%(r)s::regclass, %(tenant)s::text) "
        "LIMIT 1",
        {"candidates": [new_tenant(label) for _ in range(2000)], "r": relation.qualified,
         "tenant": tenant}).fetchone()
    assert row is not None
    return str(row[0])


def _rows_removed_on_the_shard(plan: dict[str, Any]) -> int:
    """``Rows Removed by Filter`` in the plan of the one shard a routed Citus query ran on."""
    job = plan["Distributed Query"]["Job"]
    assert job["Task Count"] == 1, job  # routed to the tenant's shard
    return sum(_rows_removed_by_filter(remote["Plan"])
               for task in job["Tasks"] for part in task["Remote Plan"] for remote in part)


def test_explain_analyze_of_a_vector_search_still_tells_whether_another_tenant_holds_a_guess(
    pg: PostgresHandle, specs: object,
) -> None:
    """RESIDUAL RISK, measured (docs/threat-model.md): EXPLAIN needs no privilege, and an
    HNSW scan meets every tenant's rows before the tenant filter removes them. A tenant
    that stores near copies of a guess sees a row removed only when another tenant holds
    text nearer the guess. If this test fails, the channel closed: update the threat model."""
    spec = SPEC_BY_AGENT["spectral"]
    embedder = HashingEmbedder(dims=spec.retrieval.embedding.dims)
    marker = new_tenant("m")
    secret = f"the merger with {marker} closes on friday at noon"
    wrong = f"the merger with {marker} closes on monday at dawn"
    victim, spy = new_tenant("victim"), new_tenant("spy")
    memories = TABLES_BY_AGENT["spectral"].memories
    with psycopg.connect(pg.admin_dsn, autocommit=True) as admin:
        citus = on_citus(admin)
        if citus:
            # on a Citus coordinator each tenant's rows live in one shard, and the HNSW scan
            # of the spy's query runs in the spy's shard: it meets the rows of the tenants
            # of that shard only, so the victim is one of them (the channel's premise)
            spy = _tenant_in_the_shard_of(admin, memories, victim, "spy")
    with connect_engine(spec, pg.app_dsn, max_connections=1, embedder=embedder) as engine:
        with engine.tenant(anchor_for(spec, victim)) as mem:
            mem.observe("cycle", secret)
        with engine.tenant(anchor_for(spec, spy)) as mem:
            for guess in (secret, wrong):
                for extra in ("really", "surely", "maybe"):
                    mem.observe("cycle", f"{guess} {extra}")

    def removed(guess: str) -> int:
        vector = "[" + ",".join(f"{x:.7g}" for x in embedder.embed_query(guess)) + "]"
        with psycopg.connect(pg.app_dsn, autocommit=True) as conn, \
                tenant_transaction(conn, spy) as tx:
            tx.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            tx.execute("SET LOCAL enable_sort = off")  # the HNSW index serves ORDER BY
            row = tx.execute(sql.SQL(
                "EXPLAIN (ANALYZE, FORMAT JSON) SELECT id FROM {} WHERE {} = %s "
                "ORDER BY embedding <=> %s::halfvec LIMIT 3").format(
                    TABLES_BY_AGENT["spectral"].memories.ident,
                    sql.Identifier(TABLES_BY_AGENT["spectral"].tenant_column)),
                (spy, vector)).fetchone()
        assert row is not None
        if citus:  # the shard's plan, as the worker ran it
            return _rows_removed_on_the_shard(row[0][0]["Plan"])
        return _rows_removed_by_filter(row[0][0]["Plan"])

    assert (removed(secret), removed(wrong)) == (1, 0)
