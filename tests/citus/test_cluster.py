"""The five reference agents on a real Citus cluster: distributed plans, isolation on the
workers, the journal chain, the delete guard, tenant moves.

Every isolation check runs as the application role on the coordinator: the statements reach
the shards on the workers, whose policies read the tenant that ``primitives.set_tenant``
forwarded with ``SET LOCAL``.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from primitives._project import MigrateReport, migrate
from primitives.compile import Tables, compile_plan
from primitives.db import apply_plan
from primitives.errors import MigrationError
from primitives.spec import AgentSpec
from tests.citus._cluster import Cluster
from tests.security._support import (
    SPEC_BY_AGENT,
    SPECS,
    TABLES_BY_AGENT,
    Refs,
    insert_sql,
    minimal_row,
    persistent_write,
    verify_chain,
)

AGENTS = sorted(SPEC_BY_AGENT)


def _refs() -> Refs:
    return Refs(uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), uuid.uuid4())


def _memory(spec: AgentSpec, tables: Tables, tenant: str, *,
            persistent: bool = False) -> dict[str, Any]:
    row = minimal_row(spec, tables, tables.memories, tenant, _refs())
    if persistent:
        row["tier"], row["typology"] = persistent_write(spec)
    return row


def _as_tenant(conn: psycopg.Connection[Any], tenant: str) -> None:
    conn.execute("SELECT primitives.set_tenant(%s)", (tenant,))


def _insert(conn: psycopg.Connection[Any], tables: Tables, row: dict[str, Any]) -> None:
    conn.execute(insert_sql(tables.memories, row), row)


def _count(conn: psycopg.Connection[Any], tables: Tables) -> int:
    found = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(tables.memories.ident))
    row = found.fetchone()
    assert row is not None
    return int(row[0])


def test_migrate_distributes_every_table_of_every_agent_by_its_tenant(
    migrated: MigrateReport, coordinator: str, cluster: Cluster
) -> None:
    assert migrated.target == "citus"
    assert {p.agent for p in migrated.plans if p.applied} == set(AGENTS)
    with psycopg.connect(coordinator) as conn:
        for spec in SPECS:
            plan = compile_plan(spec)
            tables = plan.tables
            expected = {d.table.qualified for d in plan.definitions}
            rows = conn.execute(
                "SELECT logicalrelid::regclass::text, column_to_column_name(logicalrelid, "
                "partkey), colocationid FROM pg_dist_partition "
                "WHERE logicalrelid = ANY(%s::regclass[])",
                ([d.table.ident.as_string(conn) for d in plan.definitions],),
            ).fetchall()
            assert len(rows) == len(expected), spec.agent
            assert {column for _, column, _ in rows} == {tables.tenant_column}
            assert len({colocation for _, _, colocation in rows}) == 1, \
                f"{spec.agent}: tables not colocated"
        # the shards of the tables distributed by tenant (a reference table, such as the
        # non-mirror guard's index, has a copy on the coordinator too)
        workers = conn.execute(
            "SELECT DISTINCT p.nodeport FROM pg_dist_shard_placement AS p "
            "JOIN pg_dist_shard AS s ON s.shardid = p.shardid "
            "JOIN pg_dist_partition AS d ON d.logicalrelid = s.logicalrelid "
            "WHERE d.partmethod = 'h'").fetchall()
    assert {port for (port,) in workers} == {w.port for w in cluster.workers}


def test_a_second_migrate_changes_nothing(coordinator: str) -> None:
    report = migrate(list(SPECS), dsn=coordinator, progress=lambda _: None)
    assert report.target == "citus"
    assert report.migrations == []
    assert not any(p.applied for p in report.plans)


def test_the_single_node_plan_is_refused_on_a_coordinator(coordinator: str) -> None:
    with pytest.raises(MigrationError, match="never reach a Citus cluster"):
        migrate([SPECS[0]], dsn=coordinator, progress=lambda _: None, target="single")
    plan = compile_plan(SPECS[0])
    with psycopg.connect(coordinator, autocommit=True) as conn, \
            pytest.raises(MigrationError, match="citus extension"):
        apply_plan(conn, "some_new_agent", plan.checksum, plan.statements)


@pytest.mark.parametrize("agent", AGENTS)
def test_each_tenant_sees_only_its_rows_on_the_workers(
    app: psycopg.Connection[Any], agent: str
) -> None:
    spec, tables = SPEC_BY_AGENT[agent], TABLES_BY_AGENT[agent]
    a, b = f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
    for tenant, rows in ((a, 2), (b, 3)):
        with app.transaction():
            _as_tenant(app, tenant)
            for _ in range(rows):
                _insert(app, tables, _memory(spec, tables, tenant))
    for tenant, rows in ((a, 2), (b, 3), ("nobody", 0)):
        with app.transaction():
            _as_tenant(app, tenant)
            assert _count(app, tables) == rows, tenant
    with app.transaction():
        assert _count(app, tables) == 0  # no tenant set: no row at all


@pytest.mark.parametrize("agent", AGENTS)
def test_a_row_for_another_tenant_is_refused_by_the_shard(
    app: psycopg.Connection[Any], agent: str
) -> None:
    spec, tables = SPEC_BY_AGENT[agent], TABLES_BY_AGENT[agent]
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"), \
            app.transaction():
        _as_tenant(app, "mine")
        _insert(app, tables, _memory(spec, tables, "theirs"))


def test_set_config_alone_does_not_reach_the_workers(app: psycopg.Connection[Any]) -> None:
    """Why the runtime calls primitives.set_tenant: a plain set_config stays on the
    coordinator, and the shards' policies see no tenant."""
    spec = SPEC_BY_AGENT["spectral"]
    tables = TABLES_BY_AGENT["spectral"]
    tenant = f"s-{uuid.uuid4().hex[:8]}"
    with app.transaction():
        _as_tenant(app, tenant)
        _insert(app, tables, _memory(spec, tables, tenant))
    with app.transaction():
        app.execute("SELECT pg_catalog.set_config('primitives.tenant', %s, true)", (tenant,))
        assert _count(app, tables) == 0
    with app.transaction():
        _as_tenant(app, tenant)
        assert _count(app, tables) == 1


def test_the_tenant_ends_with_the_transaction_on_the_workers(
    app: psycopg.Connection[Any]
) -> None:
    spec, tables = SPEC_BY_AGENT["world"], TABLES_BY_AGENT["world"]
    tenant = f"w-{uuid.uuid4().hex[:8]}"
    with app.transaction():
        _as_tenant(app, tenant)
        _insert(app, tables, _memory(spec, tables, tenant))
        assert _count(app, tables) == 1
    with app.transaction():
        assert _count(app, tables) == 0


@pytest.mark.parametrize("agent", AGENTS)
def test_the_journal_chain_stays_linear_per_tenant(
    app: psycopg.Connection[Any], agent: str
) -> None:
    spec, tables = SPEC_BY_AGENT[agent], TABLES_BY_AGENT[agent]
    tenants = [f"j{i}-{uuid.uuid4().hex[:8]}" for i in range(2)]
    for round_ in range(3):
        for tenant in tenants:
            with app.transaction():
                _as_tenant(app, tenant)
                memory = _memory(spec, tables, tenant)
                _insert(app, tables, memory)
                event = {tables.tenant_column: tenant, "kind": "sanitized",
                         "memory_id": memory["id"], "actor": "citus-test",
                         "payload": Jsonb({"round": round_})}
                app.execute(insert_sql(tables.events, event), event)
    for tenant in tenants:
        with app.transaction():
            _as_tenant(app, tenant)
            assert verify_chain(app, tables, tenant) is None
            seqs = [s for (s,) in app.execute(
                sql.SQL("SELECT seq FROM {} ORDER BY seq").format(tables.events.ident))]
            assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) == 3


@pytest.mark.parametrize("agent", AGENTS)
def test_a_persistent_row_is_never_deleted_on_a_shard(
    app: psycopg.Connection[Any], agent: str
) -> None:
    spec, tables = SPEC_BY_AGENT[agent], TABLES_BY_AGENT[agent]
    tenant = f"p-{uuid.uuid4().hex[:8]}"
    row = _memory(spec, tables, tenant, persistent=True)
    with app.transaction():
        _as_tenant(app, tenant)
        _insert(app, tables, row)
    with pytest.raises(psycopg.Error) as refused, app.transaction():
        _as_tenant(app, tenant)
        app.execute(sql.SQL("DELETE FROM {} WHERE id = %s").format(tables.memories.ident),
                    (row["id"],))
    assert refused.value.sqlstate in ("PM002", "42501")
    with app.transaction():
        _as_tenant(app, tenant)
        assert _count(app, tables) == 1


def test_the_auditor_reads_every_tenant_and_writes_nothing(
    app: psycopg.Connection[Any], auditor: psycopg.Connection[Any]
) -> None:
    spec, tables = SPEC_BY_AGENT["operations"], TABLES_BY_AGENT["operations"]
    tenants = [f"o{i}-{uuid.uuid4().hex[:8]}" for i in range(3)]
    for tenant in tenants:
        with app.transaction():
            _as_tenant(app, tenant)
            _insert(app, tables, _memory(spec, tables, tenant))
    column = sql.Identifier(tables.tenant_column)
    seen = auditor.execute(
        sql.SQL("SELECT count(DISTINCT {}) FROM {} WHERE {} = ANY(%s)").format(
            column, tables.memories.ident, column), (tenants,)).fetchone()
    assert seen == (3,)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        _insert(auditor, tables, _memory(spec, tables, tenants[0]))


def test_a_tenant_isolated_and_moved_keeps_every_row_and_event(
    app: psycopg.Connection[Any], coordinator: str, cluster: Cluster
) -> None:
    spec, tables = SPEC_BY_AGENT["spectral"], TABLES_BY_AGENT["spectral"]
    big = f"big-{uuid.uuid4().hex[:8]}"
    for _ in range(20):
        with app.transaction():
            _as_tenant(app, big)
            memory = _memory(spec, tables, big)
            _insert(app, tables, memory)
            event = {tables.tenant_column: big, "kind": "sanitized", "memory_id": memory["id"],
                     "actor": "citus-test", "payload": Jsonb({})}
            app.execute(insert_sql(tables.events, event), event)

    def counts() -> tuple[int, int, int | None]:
        with app.transaction():
            _as_tenant(app, big)
            events = app.execute(sql.SQL("SELECT count(*) FROM {}").format(
                tables.events.ident)).fetchone()
            assert events is not None
            return _count(app, tables), int(events[0]), verify_chain(app, tables, big)

    before = counts()
    assert before == (20, 20, None)
    memories = tables.memories.ident.as_string(None)
    with psycopg.connect(coordinator, autocommit=True) as admin:
        shard = admin.execute(
            "SELECT isolate_tenant_to_new_shard(%s::regclass, %s::text, 'CASCADE', "
            "shard_transfer_mode => 'block_writes')",
            (memories, big)).fetchone()
        assert shard is not None
        node = admin.execute(
            "SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = %s",
            (shard[0],)).fetchone()
        assert node is not None
        target = next(w.port for w in cluster.workers if w.port != node[0])
        admin.execute(
            "SELECT citus_move_shard_placement(%s, '127.0.0.1', %s, '127.0.0.1', %s, "
            "shard_transfer_mode => 'block_writes')", (shard[0], node[0], target))
        moved = admin.execute(
            "SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = %s",
            (shard[0],)).fetchone()
    assert moved == (target,)
    assert counts() == before


def _engine(cluster: Cluster, agent: str) -> Any:
    from primitives.db import APP_ROLE
    from tests.security._support import connect_engine

    return connect_engine(SPEC_BY_AGENT[agent], cluster.coordinator.dsn(APP_ROLE))


def test_the_engine_runs_on_a_cluster_and_its_writes_reach_the_tenants_shard(
    cluster: Cluster, coordinator: str
) -> None:
    """The engine's writes in their cluster form: the one-statement write (row, event, scope
    mark), a keyed rewrite (supersession), erasure, each journalled, the chain linear, and
    the rows on the worker that holds the tenant's shard."""
    from tests.security._support import anchor_for, persistent_write, transient_tier

    engine = _engine(cluster, "spectral")
    spec, tables = engine.spec, engine.tables
    assert engine.citus
    tenant = f"e-{uuid.uuid4().hex[:8]}"
    tier, typology = persistent_write(spec)
    try:
        note = engine.observe(anchor_for(spec, tenant), transient_tier(spec), "a first note",
                              scope_id="s1")
        with engine.tenant(anchor_for(spec, tenant)) as mem:
            first = mem.observe(tier, "v1 of the plan", typology=typology, key="plan")
            second = mem.observe(tier, "v2 of the plan", typology=typology, key="plan")
            doomed = mem.observe(tier, "about jane", typology=typology,
                                 envelope={"subject": "jane"})
            assert mem.erase("jane", approvals=["council", "admin", "dpo", "security-review"],
                             reason="asked") == 1
            again = mem.observe(tier, "v2 of the plan", typology=typology, key="plan")
            assert again.id == second.id  # unchanged: the current version comes back
            assert mem.get(first.id).superseded_at is not None
            assert mem.get(doomed.id).content.startswith("sha256:")
            assert mem.get(note.id).content == "a first note"
        with engine.tenant(anchor_for(spec, tenant)) as mem:
            kinds = [k for (k,) in mem.connection.execute(sql.SQL(
                "SELECT kind FROM {} ORDER BY seq").format(tables.events.ident))]
            assert verify_chain(mem.connection, tables, tenant) is None
    finally:
        engine.close()
    assert kinds.count("observed") == 4 and kinds.count("superseded") == 1
    assert kinds.count("erased") == 1
    with psycopg.connect(coordinator) as admin:
        placed = admin.execute(
            "SELECT p.nodeport FROM pg_dist_shard_placement AS p "
            "WHERE p.shardid = get_shard_id_for_distribution_column(%s::regclass, %s::text)",
            (tables.memories.qualified, tenant)).fetchone()
    assert placed is not None
    worker = next(w for w in cluster.workers if w.port == placed[0])
    with psycopg.connect(worker.dsn()) as direct:  # the shard itself, on its worker
        rows = direct.execute(sql.SQL(
            "SELECT count(*), count(*) FILTER (WHERE content LIKE 'sha256:%%') FROM {} "
            "WHERE {} = %s").format(tables.memories.ident, sql.Identifier(tables.tenant_column)),
            (tenant,)).fetchone()
    assert rows == (4, 1)


def test_the_engine_s_sessions_forward_set_local_to_the_workers(cluster: Cluster,
                                                                 coordinator: str) -> None:
    """The application role's sessions forward ``SET LOCAL`` (the distributed plan sets
    ``citus.propagate_set_commands`` for the role), so the tenant reaches the workers."""
    engine = _engine(cluster, "world")
    try:
        from tests.security._support import anchor_for
        with engine.tenant(anchor_for(engine.spec, "w-set")) as mem:
            shown = mem.connection.execute("SHOW citus.propagate_set_commands").fetchone()
    finally:
        engine.close()
    assert shown == ("local",)


def test_a_reused_id_is_refused_on_the_cluster_and_a_retry_returns_its_row(
    cluster: Cluster, coordinator: str
) -> None:
    from primitives.errors import PolicyViolation
    from tests.security._support import anchor_for

    engine = _engine(cluster, "operations")
    anchor = anchor_for(engine.spec, f"r-{uuid.uuid4().hex[:8]}")
    memory_id = uuid.uuid4()
    try:
        tier = engine.spec.tiers[0].name
        written = engine.observe(anchor, tier, "once", memory_id=memory_id)
        retried = engine.observe(anchor, tier, "once", memory_id=memory_id)
        assert retried.id == written.id == memory_id
        with pytest.raises(PolicyViolation, match=str(memory_id)):
            engine.observe(anchor, tier, "something else", memory_id=memory_id)
        with engine.tenant(anchor) as mem:
            events = mem.connection.execute(sql.SQL("SELECT count(*) FROM {}").format(
                engine.tables.events.ident)).fetchone()
    finally:
        engine.close()
    assert events == (1,)


# A planning error leaves a Citus backend unable to delegate a function call ----------------

_FAILS_WHILE_PLANNING = sql.SQL(
    "SELECT count(*) FROM (SELECT id FROM {} FOR UPDATE) AS locked")
"""Refused by Citus while it plans the subquery on its own ("could not run distributed query
with FOR UPDATE/SHARE commands"): the error that leaves the backend's planning count raised."""

_APPROVERS = ["council", "admin", "dpo", "security-review"]


def _write_and_erase(conn: psycopg.Connection[Any], tables: Tables, tenant: str) -> uuid.UUID:
    """One transaction: a row written as the application role, then the cluster's erasure
    function called for it (delegated to the tenant's worker, or refused)."""
    from primitives.db import tenant_transaction

    memory_id = uuid.uuid4()
    with tenant_transaction(conn, tenant):
        conn.execute(sql.SQL(
            "INSERT INTO {} ({}, id, tier, typology, key, content) "
            "VALUES (%s, %s, 'workspace', 'procedural', %s, 'about jane')").format(
                tables.memories.ident, sql.Identifier(tables.tenant_column)),
            (tenant, memory_id, str(memory_id)))
        conn.execute(sql.SQL(
            "SELECT {}.{}(%s::text, %s::uuid, 'asked'::text, %s::uuid, 'agent'::text, "
            "'{{}}'::jsonb)").format(sql.Identifier(tables.schema),
                                     sql.Identifier(tables.object_name("erase_row"))),
            (tenant, memory_id, uuid.uuid4()))
    return memory_id


def test_after_a_planning_error_a_backend_delegates_no_function_call(
    cluster: Cluster, app: psycopg.Connection[Any]
) -> None:
    """Why the engine closes a connection whose transaction failed on a coordinator: after
    Citus refused a statement while planning its subquery, the same backend no longer sends
    the erasure function to the tenant's worker; run on the coordinator as its owner, the
    function is refused the shard the transaction wrote as the application role, and the
    transaction writes nothing. A new connection erases as before."""
    from primitives.db import APP_ROLE, tenant_transaction
    from primitives.errors import StorageError

    tables = TABLES_BY_AGENT["spectral"]
    tenant = f"p-{uuid.uuid4().hex[:8]}"
    with pytest.raises(StorageError, match="FOR UPDATE"), tenant_transaction(app, tenant):
        app.execute(_FAILS_WHILE_PLANNING.format(tables.memories.ident))
    with pytest.raises(StorageError, match="modified in this transaction by a different user"):
        _write_and_erase(app, tables, tenant)
    with tenant_transaction(app, tenant):
        assert _count(app, tables) == 0  # rolled back whole
    with psycopg.connect(cluster.coordinator.dsn(APP_ROLE), autocommit=True) as fresh:
        erased = _write_and_erase(fresh, tables, tenant)
        with tenant_transaction(fresh, tenant):
            content = fresh.execute(sql.SQL("SELECT content FROM {} WHERE id = %s").format(
                tables.memories.ident), (erased,)).fetchone()
    assert content is not None and content[0].startswith("sha256:")


def test_the_engine_erases_after_a_failed_transaction_on_its_one_connection(
    cluster: Cluster, coordinator: str
) -> None:
    """An engine with one connection: a transaction refused while Citus plans a subquery,
    then a write and an erasure in the next one. The failed connection was replaced (a new
    backend), so the erasure runs on the tenant's worker: the row is hashed, its ``erased``
    event journalled, the chain linear."""
    from primitives.db import APP_ROLE
    from primitives.errors import StorageError
    from tests.security._support import anchor_for, connect_engine, persistent_write

    spec = SPEC_BY_AGENT["spectral"]
    tier, typology = persistent_write(spec)
    anchor = anchor_for(spec, f"q-{uuid.uuid4().hex[:8]}")
    with connect_engine(spec, cluster.coordinator.dsn(APP_ROLE), max_connections=1) as engine:
        tables = engine.tables
        with pytest.raises(StorageError, match="FOR UPDATE"), engine.tenant(anchor) as mem:
            failed_pid = mem.connection.info.backend_pid
            mem.connection.execute(_FAILS_WHILE_PLANNING.format(tables.memories.ident))
        with engine.tenant(anchor) as mem:
            assert mem.connection.info.backend_pid != failed_pid
            doomed = mem.observe(tier, "about jane", typology=typology,
                                 envelope={"subject": "jane"})
            assert mem.erase("jane", approvals=_APPROVERS, reason="asked") == 1
        with engine.tenant(anchor) as mem:
            erased = mem.get(doomed.id)
            kinds = [k for (k,) in mem.connection.execute(sql.SQL(
                "SELECT kind FROM {} ORDER BY seq").format(tables.events.ident))]
            assert verify_chain(mem.connection, tables, anchor[spec.anchor.tenant_key]) is None
    assert erased is not None and erased.content.startswith("sha256:")
    assert kinds == ["observed", "erased", "subject_erased"]


async def test_the_async_engine_erases_after_a_failed_transaction_on_its_one_connection(
    cluster: Cluster, coordinator: str
) -> None:
    """The same with :class:`~primitives.engine.AsyncEngine`."""
    from primitives.db import APP_ROLE
    from primitives.engine import AsyncEngine
    from primitives.errors import StorageError
    from tests.security._support import anchor_for, persistent_write

    spec = SPEC_BY_AGENT["spectral"]
    tier, typology = persistent_write(spec)
    anchor = anchor_for(spec, f"a-{uuid.uuid4().hex[:8]}")
    engine = await AsyncEngine.connect(spec, cluster.coordinator.dsn(APP_ROLE),
                                       max_connections=1)
    try:
        tables = engine.tables
        with pytest.raises(StorageError, match="FOR UPDATE"):
            async with engine.tenant(anchor) as mem:
                failed_pid = mem.connection.info.backend_pid
                await mem.connection.execute(_FAILS_WHILE_PLANNING.format(tables.memories.ident))
        async with engine.tenant(anchor) as mem:
            assert mem.connection.info.backend_pid != failed_pid
            doomed = await mem.observe(tier, "about jane", typology=typology,
                                       envelope={"subject": "jane"})
            assert await mem.erase("jane", approvals=_APPROVERS, reason="asked") == 1
            erased = await mem.get(doomed.id)
    finally:
        await engine.close()
    assert erased is not None and erased.content.startswith("sha256:")


# Non-mirror on the cluster -------------------------------------------------------------------


def test_the_non_mirror_guard_holds_on_the_workers_with_its_index_current(
    cluster: Cluster, coordinator: str, tmp_path: Any
) -> None:
    """A platform's canonical table (local on the coordinator when made) becomes a
    reference table when the guarded agent is migrated; the guard fires on the worker that
    holds the tenant's shard: a copy is refused (nothing written), a note is kept and
    references the canonical row (the foreign key to the reference table holds it), read
    back with the row's current version (read on the coordinator). On each
    worker the guard's index records every canonical row at the version that node's copy
    has, so the guard compares only the rows a write shares words with."""
    from primitives.compile import agent_tables
    from primitives.db import APP_ROLE
    from primitives.errors import NonMirrorViolation
    from tests.integration._canonical import RULE_12, canonical_table, make_spec
    from tests.security._support import connect_engine

    with psycopg.connect(coordinator, autocommit=True) as admin:
        made = canonical_table(admin)
        canon = next(made)
        try:
            spec = make_spec(tmp_path, canon)
            migrate([spec], dsn=coordinator, progress=lambda _: None)
            placed = admin.execute(
                "SELECT partmethod FROM pg_dist_partition WHERE logicalrelid = %s::regclass",
                (canon,)).fetchone()
            assert placed == ("n",)  # a reference table
            tables = agent_tables(spec)
            with connect_engine(spec, cluster.coordinator.dsn(APP_ROLE)) as engine:
                with pytest.raises(NonMirrorViolation) as refused, \
                        engine.tenant({"world_id": "w-1"}) as mem:
                    mem.observe("world", RULE_12, typology="procedural")
                assert refused.value.context["canonical_key"] == "12"
                with engine.tenant({"world_id": "w-1"}) as mem:
                    note = mem.observe("world", "retreats after melee: open rule 12",
                                       typology="procedural")
                    ref = mem.reference(note.id, "rule_content", "12")
                    assert _count(mem.connection, tables) == 1
                with engine.tenant({"world_id": "w-1"}) as mem:
                    again = mem.references(note.id)
                    kinds = [e["kind"] for e in mem.history(note.id)]
            assert ref.version == ref.current_version == "1" and not ref.stale
            assert [(r.key, r.version, r.current_version) for r in again] == [("12", "1", "1")]
            assert kinds == ["observed", "canonical_referenced"]
            indexed = sql.SQL(
                "SELECT count(*) FROM {rules} AS c JOIN {rows} AS x ON x.canonical_key = "
                "c.id::text AND x.row_version = md5(c.body_text)").format(
                rules=sql.Identifier(*canon.split(".")),
                rows=sql.Identifier(tables.schema, tables.object_name("canonical_indexed")))
            for worker in cluster.workers:
                with psycopg.connect(worker.dsn()) as direct:
                    assert direct.execute(indexed).fetchone() == (2,)
        finally:
            next(made, None)


def test_no_runtime_role_reads_the_values_in_the_workers_statement_texts(
    cluster: Cluster, coordinator: str, app: psycopg.Connection[Any],
) -> None:
    """The coordinator deparses each statement it sends to a worker with the values as
    literals; the worker runs it over a connection of the application role. No session of a
    runtime role may read those texts: not through a query the coordinator routes to the
    worker (its functions run there), not through ``citus_stat_activity`` (which reads every
    node's ``pg_stat_activity`` as the caller), not on the worker itself."""
    from primitives.db import APP_ROLE, AUDITOR_ROLE

    spec, tables = SPEC_BY_AGENT["spectral"], TABLES_BY_AGENT["spectral"]
    mark = f"zq{uuid.uuid4().hex[:14]}"
    victim, spy = f"victim-{mark}", f"spy-{uuid.uuid4().hex[:8]}"
    with app.transaction():
        _as_tenant(app, spy)
        _insert(app, tables, _memory(spec, tables, spy))
    routed = sql.SQL("SELECT a.query FROM {} AS m, "
                     "LATERAL pg_catalog.pg_stat_get_activity(NULL) AS a "
                     "WHERE m.{} = %s").format(tables.memories.ident,
                                               sql.Identifier(tables.tenant_column))
    with psycopg.connect(cluster.coordinator.dsn(APP_ROLE)) as writer:
        # the victim's transaction stays open: its worker connection shows the insert's text
        _as_tenant(writer, victim)
        row = _memory(spec, tables, victim)
        row["content"] = f"{mark} the victim's secret"
        _insert(writer, tables, row)
        with psycopg.connect(coordinator, autocommit=True) as admin:
            texts = [q for (q,) in admin.execute(
                "SELECT query FROM pg_catalog.citus_stat_activity WHERE NOT is_worker_query "
                "OR query <> ''").fetchall() if q]
        assert any(mark in text for text in texts)  # the premise: the value is in a text
        for role in (APP_ROLE, AUDITOR_ROLE):
            with psycopg.connect(cluster.coordinator.dsn(role), autocommit=True) as other:
                seen = [q for (q,) in other.execute(
                    "SELECT query FROM pg_catalog.citus_stat_activity").fetchall() if q]
                assert seen and not any(mark in text for text in seen), role
            for worker in cluster.workers:
                with psycopg.connect(worker.dsn(role), autocommit=True) as direct:
                    for statement in ("SELECT query FROM pg_catalog.pg_stat_activity",
                                      "SELECT pg_catalog.pg_stat_get_backend_activity(1)"):
                        with pytest.raises(psycopg.errors.InsufficientPrivilege):
                            direct.execute(statement)
        with pytest.raises(psycopg.errors.InsufficientPrivilege,
                           match="pg_stat_get_activity"), app.transaction():
            _as_tenant(app, spy)
            app.execute(routed, (spy,))
        writer.rollback()


def test_a_coordinator_started_with_pgoptions_outranks_the_roles_idle_session_timeout(
) -> None:
    """``idle_session_timeout`` persisted on the application role ends the coordinator's
    cached connections to the workers between transactions (no ``SET LOCAL`` holds there:
    the ``idle-session`` class of ``test_role_settings_of_each_class_do_not_reach_the_engines_statements``
    fails on the cluster). A coordinator whose environment holds ``PGOPTIONS`` gives the
    connections Citus opens those startup options, which outrank a role setting."""
    import time

    from primitives.db import APP_ROLE
    from primitives.embeddings import HashingEmbedder
    from tests.citus._cluster import running_cluster
    from tests.security._support import anchor_for, connect_engine, transient_tier

    spec = SPEC_BY_AGENT["spectral"]
    with running_cluster({"PGOPTIONS": "-c idle_session_timeout=0"}) as other:
        migrate([spec], dsn=other.coordinator.dsn(), progress=lambda _: None)
        with psycopg.connect(other.coordinator.dsn(APP_ROLE), autocommit=True) as attacker:
            attacker.execute("ALTER ROLE CURRENT_USER SET idle_session_timeout = 1")
        anchor = anchor_for(spec, f"idle-{uuid.uuid4().hex[:8]}")
        embedder = HashingEmbedder(dims=spec.retrieval.embedding.dims)
        with connect_engine(spec, other.coordinator.dsn(APP_ROLE), max_connections=1,
                            embedder=embedder) as engine:
            for i in range(3):
                with engine.tenant(anchor) as mem:
                    mem.observe(transient_tier(spec), f"note {i} survives the idle timeout")
                time.sleep(0.05)  # the worker connections wait, cached, between transactions
            with engine.tenant(anchor) as mem:
                hits = mem.search("note survives the idle timeout")
                shown = mem.connection.execute(sql.SQL(
                    "SELECT pg_catalog.current_setting('idle_session_timeout') FROM {} "
                    "LIMIT 1").format(engine.tables.memories.ident)).fetchone()
        assert len(hits) == 3
        assert shown == ("0",)  # on the worker that holds the tenant's shard


# A changed spec migrated again onto a cluster ------------------------------------------------


def test_a_changed_spec_is_migrated_again_onto_a_distributed_agent(coordinator: str) -> None:
    """Re-applying a changed distributed plan to an agent already on the cluster: every
    statement of the plan runs again over distributed tables (Citus refuses an ``ALTER TABLE``
    that adds a constraint beside other subcommands there), and the rows stay."""
    import yaml

    from primitives.spec import load_spec_text
    from tests.security._support import ROOT

    data = yaml.safe_load((ROOT / "agents" / "spectral_agent.yaml").read_text(encoding="utf-8"))
    data["agent"] = data["persistence"]["store"]["prefix"] = "spectral_evolve"

    def spec_of(data: dict[str, Any]) -> AgentSpec:
        return load_spec_text(yaml.safe_dump(data), policies_dir=ROOT / "policies")

    first = spec_of(data)
    migrate([first], dsn=coordinator, progress=lambda _: None)
    tables = compile_plan(first).tables
    tenant = f"evolve-{uuid.uuid4().hex[:8]}"
    with psycopg.connect(coordinator, autocommit=True) as admin:
        with admin.transaction():
            _as_tenant(admin, tenant)
            _insert(admin, tables, _memory(first, tables, tenant))
    data["typology"]["run"].append("semantic")  # the memories' CHECK changes
    changed = spec_of(data)
    assert compile_plan(changed).checksum != compile_plan(first).checksum
    report = migrate([changed], dsn=coordinator, progress=lambda _: None)
    assert [p.applied for p in report.plans] == [True]
    with psycopg.connect(coordinator, autocommit=True) as admin:
        with admin.transaction():
            _as_tenant(admin, tenant)
            assert _count(admin, tables) == 1
            # the changed CHECK is the one in force on the shards
            row = _memory(changed, tables, tenant)
            row["tier"], row["typology"] = "run", "semantic"
            _insert(admin, tables, row)
            assert _count(admin, tables) == 2
        with pytest.raises(psycopg.errors.CheckViolation), admin.transaction():
            _as_tenant(admin, tenant)
            row = _memory(changed, tables, tenant)
            row["tier"], row["typology"] = "run", "procedural"
            _insert(admin, tables, row)
