"""The audit supersession view on the Citus cluster: the same rows as on one node for the same
memory rows, for the auditor (every tenant) and for a tenant (its own rows only).

The cluster's plan compiles the view without a recursive CTE (Citus refuses one over a
distributed table unless it filters on the distribution column, so an auditor could not
read it): each tenant's links are grouped and walked by ``primitives.supersession_chains``
on the shard. The rows are written once on a single node beside the cluster through the
engine (supersessions), with the shapes the engine does not write made there as the
application role (two versions superseded by one, a cycle, a link to no row), then copied
row for row onto the cluster as the application role (``INSERT ... VALUES``), so both hold
the same ids; the view is then read on both.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from primitives._project import migrate
from primitives.compile import agent_tables
from primitives.db import APP_ROLE, AUDITOR_ROLE
from primitives.embeddings import HashingEmbedder
from primitives.engine import Engine
from primitives.spec import load_spec
from tests.citus._cluster import Cluster
from tests.conftest import PostgresHandle, single_node

ROOT = Path(__file__).resolve().parents[2]
ASSISTANT = load_spec(ROOT / "agents" / "assistant_memory.yaml")
TABLES = agent_tables(ASSISTANT)
TENANT = sql.Identifier(TABLES.tenant_column)

Conn = psycopg.Connection[Any]


@pytest.fixture(scope="module")
def single(make_home: Callable[[], Path]) -> Iterator[PostgresHandle]:
    """One node beside the cluster (in this suite ``pg`` is the coordinator)."""
    for handle in single_node(make_home):
        migrate([ASSISTANT], dsn=handle.admin_dsn, progress=lambda _: None)
        yield handle


def _in_tenant(conn: Conn, tenant: str) -> None:
    conn.execute("SELECT pg_catalog.set_config('primitives.tenant', %s, true)", (tenant,))


def _link(conn: Conn, tenant: str, memory: uuid.UUID, successor: uuid.UUID) -> None:
    conn.execute(sql.SQL("UPDATE {} SET superseded_by = %s WHERE {} = %s AND id = %s").format(
        TABLES.memories.ident, TENANT), (successor, tenant, memory))


def _write(single: PostgresHandle, tenant: str) -> None:
    """On the single node: a chain of three versions, a chain of two, and the shapes only a
    direct write makes: two roots superseded by one row, a two-row cycle, a dangling link."""
    embedder = HashingEmbedder(ASSISTANT.retrieval.embedding.dims)
    with Engine.connect(ASSISTANT, single.app_dsn, embedder=embedder) as engine, \
            engine.tenant({"user_id": tenant}) as mem:
        first = mem.observe("long_term", f"{tenant}: the deploy is on friday",
                            typology="semantic")
        second = mem.supersede(first.id, f"{tenant}: the deploy moved to monday")
        mem.supersede(second.id, f"{tenant}: the deploy moved to tuesday")
        short = mem.observe("long_term", f"{tenant}: lunch at noon", typology="semantic")
        mem.supersede(short.id, f"{tenant}: lunch at one")
        free = [mem.observe("long_term", f"{tenant}: note {i}", typology="episodic").id
                for i in range(6)]
    with psycopg.connect(single.app_dsn) as conn, conn.transaction():
        _in_tenant(conn, tenant)
        _link(conn, tenant, free[0], free[2])      # merge: free[0] and free[1] -> free[2]
        _link(conn, tenant, free[1], free[2])
        _link(conn, tenant, free[3], free[4])      # cycle: free[3] <-> free[4], no root
        _link(conn, tenant, free[4], free[3])
        _link(conn, tenant, free[5], uuid.uuid4())  # a link to a row that does not exist


def _columns(conn: Conn) -> list[str]:
    return [name for (name,) in conn.execute(
        "SELECT attname FROM pg_catalog.pg_attribute WHERE attrelid = %s::regclass "
        "AND attnum > 0 AND NOT attisdropped AND attgenerated = '' ORDER BY attnum",
        (TABLES.memories.qualified,))]


def _copy(single: PostgresHandle, cluster: Cluster, tenant: str) -> int:
    """The tenant's memory rows from the single node onto the cluster, one ``INSERT ...
    VALUES`` per row, as the application role on both; the rows copied."""
    with psycopg.connect(single.app_dsn) as source, \
            psycopg.connect(cluster.coordinator.dsn(APP_ROLE)) as target, \
            source.transaction(), target.transaction():
        _in_tenant(source, tenant)
        target.execute("SELECT primitives.set_tenant(%s)", (tenant,))
        columns = _columns(source)
        names = sql.SQL(", ").join(map(sql.Identifier, columns))
        rows = source.execute(sql.SQL("SELECT {} FROM {}").format(
            names, TABLES.memories.ident)).fetchall()
        write = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            TABLES.memories.ident, names, sql.SQL(", ").join(sql.Placeholder() * len(columns)))
        for row in rows:
            target.execute(write, [Jsonb(v) if isinstance(v, dict) else v for v in row])
    return len(rows)


@pytest.fixture(scope="module")
def tenants(single: PostgresHandle, cluster: Cluster, coordinator: str) -> tuple[str, str]:
    pair = (f"chains-a-{uuid.uuid4().hex[:8]}", f"chains-b-{uuid.uuid4().hex[:8]}")
    for tenant in pair:
        _write(single, tenant)
        assert _copy(single, cluster, tenant) == 11  # 3 + 2 + 6 rows
    return pair


def _rows(conn: Conn, tenants: tuple[str, ...]) -> list[tuple[Any, ...]]:
    query = sql.SQL("SELECT * FROM {} WHERE {} = ANY(%s) ORDER BY {}, root_id, depth, "
                    "memory_id").format(TABLES.audit_supersession.ident, TENANT, TENANT)
    return conn.execute(query, (list(tenants),)).fetchall()


def _shape(rows: list[tuple[Any, ...]]) -> dict[str, list[tuple[int, bool]]]:
    """Per tenant, the (depth, is_latest) of its rows in order: what the writes should give."""
    out: dict[str, list[tuple[int, bool]]] = {}
    for row in rows:
        out.setdefault(row[0], []).append((row[3], row[5]))
    return out


def test_the_auditor_reads_the_same_supersession_rows_on_the_cluster_as_on_one_node(
    single: PostgresHandle, cluster: Cluster, tenants: tuple[str, str]
) -> None:
    with psycopg.connect(single.auditor_dsn, autocommit=True) as one, \
            psycopg.connect(cluster.coordinator.dsn(AUDITOR_ROLE), autocommit=True) as many:
        on_one, on_cluster = _rows(one, tenants), _rows(many, tenants)
        plan = many.execute(sql.SQL("EXPLAIN SELECT * FROM {}").format(
            TABLES.audit_supersession.ident)).fetchall()
    assert on_cluster == on_one
    # per tenant: the 3-chain (0, 1, 2 latest), the 2-chain, the merge's two roots (each
    # 0 then 1 latest), the dangling link (0 and its missing successor's row dropped, as the
    # recursive form drops it); the cycle has no root, so no row
    shapes = _shape(on_cluster)
    assert set(shapes) == set(tenants)
    for tenant in tenants:
        assert sorted(shapes[tenant]) == sorted(
            [(0, False), (1, False), (2, True), (0, False), (1, True), (0, False), (1, True),
             (0, False), (1, True), (0, False)])
    assert "Citus" in " ".join(str(line[0]) for line in plan)  # read on the shards


def test_a_tenant_reads_only_its_own_supersession_rows_on_the_cluster_as_on_one_node(
    single: PostgresHandle, cluster: Cluster, tenants: tuple[str, str]
) -> None:
    a = tenants[0]
    with psycopg.connect(single.app_dsn) as one, \
            psycopg.connect(cluster.coordinator.dsn(APP_ROLE)) as many, \
            one.transaction(), many.transaction():
        _in_tenant(one, a)
        many.execute("SELECT primitives.set_tenant(%s)", (a,))
        on_one, on_cluster = _rows(one, tenants), _rows(many, tenants)
    assert on_cluster == on_one
    assert {row[0] for row in on_cluster} == {a}
    assert len(on_cluster) == 10
