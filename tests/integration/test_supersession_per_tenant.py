"""The cluster's form of the audit supersession view gives the rows of the recursive one.

The Citus plan compiles ``<prefix>_audit_supersession`` without a recursive CTE (each
tenant's links grouped and walked by ``primitives.supersession_chains``,
:func:`primitives.compile._views.supersession_view_per_tenant`). Here, on one node, both forms
read the same rows: the recursive view first, then, in the same transaction, the function
and the per-tenant view put in its place, rolled back at the end (nothing of it stays on the
server). tests/citus/test_cluster_audit_views.py reads the cluster's view against one node's.
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
from primitives.compile._views import (
    supersession_chains_function,
    supersession_view_per_tenant,
)
from primitives.embeddings import HashingEmbedder
from primitives.engine import Engine
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.db

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def assistant(pg: PostgresHandle) -> AgentSpec:
    spec = load_spec(ROOT / "agents" / "assistant_memory.yaml")
    migrate([spec], dsn=pg.admin_dsn, progress=lambda _: None)
    return spec


def _chains(pg: PostgresHandle, spec: AgentSpec, tenant: str) -> None:
    """A chain of three versions, one of two (the engine), and as the application role two
    rows superseded by one, a two-row cycle, a link to no row, a self link."""
    tables = agent_tables(spec)
    embedder = HashingEmbedder(spec.retrieval.embedding.dims)
    with Engine.connect(spec, pg.app_dsn, embedder=embedder) as engine, \
            engine.tenant({"user_id": tenant}) as mem:
        first = mem.observe("long_term", "the deploy is on friday", typology="semantic")
        second = mem.supersede(first.id, "the deploy moved to monday")
        mem.supersede(second.id, "the deploy moved to tuesday")
        short = mem.observe("long_term", "lunch at noon", typology="semantic")
        mem.supersede(short.id, "lunch at one")
        free = [mem.observe("long_term", f"note {i}", typology="episodic").id
                for i in range(7)]
    links = [(free[0], free[2]), (free[1], free[2]), (free[3], free[4]), (free[4], free[3]),
             (free[5], uuid.uuid4()), (free[6], free[6])]
    with psycopg.connect(pg.app_dsn) as conn, conn.transaction():
        conn.execute("SELECT pg_catalog.set_config('primitives.tenant', %s, true)", (tenant,))
        for memory, successor in links:
            conn.execute(sql.SQL("UPDATE {} SET superseded_by = %s WHERE {} = %s AND id = %s")
                         .format(tables.memories.ident, tables.tenant), (successor, tenant, memory))


def test_the_per_tenant_supersession_view_reads_the_rows_of_the_recursive_one(
    pg: PostgresHandle, assistant: AgentSpec
) -> None:
    tables = agent_tables(assistant)
    tenants = [f"chains-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    for tenant in tenants:
        _chains(pg, assistant, tenant)
    query = sql.SQL("SELECT * FROM {} WHERE {} = ANY(%s) ORDER BY {}, root_id, depth, "
                    "memory_id").format(tables.audit_supersession.ident, tables.tenant,
                                        tables.tenant)
    with psycopg.connect(pg.admin_dsn) as admin, admin.transaction(force_rollback=True):
        recursive: list[tuple[Any, ...]] = admin.execute(query, (tenants,)).fetchall()
        admin.execute(supersession_chains_function())
        admin.execute(supersession_view_per_tenant(tables))
        definition = admin.execute("SELECT pg_catalog.pg_get_viewdef(%s::regclass)",
                                   (tables.audit_supersession.qualified,)).fetchone()
        per_tenant = admin.execute(query, (tenants,)).fetchall()
    assert definition is not None and "supersession_chains" in definition[0]
    assert "RECURSIVE" not in definition[0].upper()
    assert per_tenant == recursive
    # per tenant: the 3-chain (3 rows), the 2-chain (2), the merge's two roots (2 each), the
    # dangling link (1); the cycle and the self link have no root (every row in them has a
    # predecessor), so they give no row
    assert len(recursive) == 2 * 10
    assert {row[0] for row in recursive} == set(tenants)
    assert max(row[3] for row in recursive) == 2
