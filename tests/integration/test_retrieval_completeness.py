"""A tenant filter never returns fewer rows than asked: tenants of 1, 50 and 20,000 rows
among 200,000, in a fresh database built by one bulk INSERT ... SELECT (synthetic vectors).

Small tenants are scanned exactly; the large one goes through the HNSW index with iterative
scans (checked with EXPLAIN), and an index walk that comes back short is completed exactly.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives._project import migrate
from primitives.db import app_dsn
from primitives.embeddings import HashingEmbedder
from primitives.engine import Engine
from primitives.engine import _core as core
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

ROOT = Path(__file__).resolve().parents[2]
DIMS = 16  # completeness does not depend on the width; a narrow vector builds the index fast
MODEL = "synthetic/sines-16"
TENANTS = {"solo": 1, "fifty": 50, "big": 20_000}
TOTAL = 200_000
FILLERS = 100


@pytest.fixture(scope="module")
def big_table(pg: PostgresHandle) -> Iterator[tuple[AgentSpec, str]]:
    base = load_spec(ROOT / "agents" / "spectral_agent.yaml")
    embedding = base.retrieval.embedding.model_copy(update={"dims": DIMS})
    spec = base.model_copy(update={"retrieval": base.retrieval.model_copy(
        update={"embedding": embedding, "semantic_exact_below": 10_000})})
    name = "t_completeness"
    with psycopg.connect(pg.admin_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(name)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = psycopg.conninfo.make_conninfo(pg.admin_dsn, dbname=name)
    try:
        migrate([spec], dsn=dsn)
        _fill(dsn, spec)
        yield spec, app_dsn(dsn)
    finally:
        with psycopg.connect(pg.admin_dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))


def _fill(dsn: str, spec: AgentSpec) -> None:
    """One INSERT ... SELECT as admin, the HNSW index dropped first and rebuilt after."""
    table = Engine.tables_for(spec).memories
    named = sum(TENANTS.values())
    tenant_of = sql.SQL(
        "CASE WHEN i <= 1 THEN 'solo' WHEN i <= 51 THEN 'fifty' WHEN i <= {} THEN 'big' "
        "ELSE 'filler-' || (i % {}) END").format(sql.Literal(named), sql.Literal(FILLERS))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '256MB'")
        row = conn.execute(
            "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index "
            "WHERE indrelid = %s::regclass AND pg_get_indexdef(indexrelid) LIKE '%%hnsw%%'",
            (table.qualified,)).fetchone()
        assert row is not None, "the plan has an HNSW index"
        index_name, index_def = row
        conn.execute(sql.SQL("DROP INDEX {}").format(sql.SQL(index_name)))
        conn.execute(sql.SQL(
            "INSERT INTO {} (workspace_id, tier, typology, key, content, embedding, "
            "embedding_model) SELECT {}, 'cycle', 'episodic', i::text, 'synthetic row ' || i, "
            "(SELECT array_agg(sin(i * j + j)::real) FROM generate_series(1, {}) AS j)::halfvec, "
            "{} FROM generate_series(1, {}) AS i"
        ).format(table.ident, tenant_of, sql.Literal(DIMS), sql.Literal(MODEL),
                 sql.Literal(TOTAL)))
        # A sparser graph builds faster and is, if anything, harder on the iterative scan.
        conn.execute(index_def + " WITH (m = 8, ef_construction = 32)")
        conn.execute(sql.SQL("ANALYZE {}").format(table.ident))


@pytest.fixture(scope="module")
def engine(big_table: tuple[AgentSpec, str]) -> Iterator[Engine]:
    spec, dsn = big_table
    with Engine.connect(spec, dsn, embedder=HashingEmbedder(DIMS, model_id=MODEL)) as eng:
        yield eng


@pytest.mark.parametrize("tenant, limit, mode", [
    ("solo", 10, "exact"),
    ("fifty", 10, "exact"),
    ("fifty", 100, "exact"),
    ("big", 10, "hnsw"),
    ("big", 200, "hnsw"),
    ("big", 1000, None),
])
def test_tenant_filter_never_returns_fewer_rows_than_asked(
    engine: Engine, tenant: str, limit: int, mode: str | None,
) -> None:
    with engine.tenant({"workspace_id": tenant}) as mem:
        inside = mem.search("synthetic row 17", limit=limit, explain=True)
    # the same search as a transaction of its own, sent in as few messages as it has statements
    alone = engine.search({"workspace_id": tenant}, "synthetic row 17", limit=limit,
                          explain=True)
    for explained in (inside, alone):
        assert len(explained.hits) == min(limit, TENANTS[tenant])
        assert {h.memory.content.split()[0] for h in explained.hits} == {"synthetic"}
        if mode is not None:
            assert explained.semantic_mode == mode
        else:  # 5,000 candidates: the index walk may stop short; the exact scan completes it
            assert explained.semantic_mode in ("hnsw", "hnsw+exact")
    assert [h.memory.id for h in alone.hits] == [h.memory.id for h in inside.hits]


def _plan(engine: Engine, tenant: str, limit: int) -> str:
    """EXPLAIN of the search statement as the engine would run it, as the application role."""
    with engine.tenant({"workspace_id": tenant}) as mem:
        conn: psycopg.Connection[Any] = mem.connection
        op = core.explain_search(mem.ctx, "synthetic row 17", limit=limit)
        step = next(op)
        while True:
            if isinstance(step, core.Embed):
                step = op.send(step.compute())
                continue
            if "semantic_ann AS" in step.statement.as_string(conn):  # the search, not settings
                rows = conn.execute(sql.SQL("EXPLAIN (ANALYZE, COSTS OFF) ") + step.statement,
                                    step.params).fetchall()
                return "\n".join(r[0] for r in rows)
            step = op.send(conn.execute(step.statement, step.params).fetchone())


def test_large_tenant_walks_the_hnsw_index_and_small_tenant_does_not(engine: Engine) -> None:
    big = _plan(engine, "big", 10)
    assert "memories_embedding_idx" in big
    small = _plan(engine, "fifty", 10)
    ann = small.split("CTE semantic_ann")[1].split("CTE semantic_exact")[0]
    assert "never executed" in ann
