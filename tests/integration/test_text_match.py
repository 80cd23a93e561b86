"""The leakproof full-text match: installed by a superuser's migrate, served by the GIN index
under row-level security, the same results as the built-in match."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from primitives import migrate
from primitives.compile import Capabilities, compile_plan
from primitives.db import (
    APP_ROLE,
    apply_migrations,
    apply_plan,
    ensure_text_match,
    has_text_match,
    tenant_transaction,
)
from primitives.embeddings import HashingEmbedder
from primitives.engine import Engine
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.db

_WORDS = ("lowering", "temperature", "removed", "fabrication", "summary", "retrieval",
          "stale", "context", "workspace", "scan", "cache", "index")


def _indexes(conn: psycopg.Connection[Any], table: str) -> dict[str, str]:
    rows = conn.execute("SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) "
                        "FROM pg_index WHERE indrelid = %s::regclass", (table,)).fetchall()
    return {name.split(".")[-1]: definition for name, definition in rows}


@pytest.mark.parametrize("ranking", ["bm25", "websearch"])
def test_the_engine_uses_the_leakproof_match_and_finds_what_the_builtin_finds(
    pg: PostgresHandle, spectral: AgentSpec, ranking: str,
) -> None:
    anchor = {"workspace_id": f"ws-{uuid.uuid4().hex[:8]}"}
    retrieval = spectral.retrieval
    hybrid = spectral.model_copy(update={"retrieval": retrieval.model_copy(update={
        "signals": ["semantic", "lexical"],
        "lexical": retrieval.lexical.model_copy(update={"ranking": ranking})})})
    # BM25 matches any word; web search needs every word
    query = "stale retrieval cache" if ranking == "bm25" else "stale retrieval"
    with Engine.connect(hybrid, pg.app_dsn, embedder=HashingEmbedder()) as engine:
        assert engine.text_match  # the test server is migrated by its superuser
        with engine.tenant(anchor) as mem:
            mem.observe_many([{"tier": "cycle", "content": " ".join(
                _WORDS[(i * 5 + k) % len(_WORDS)] for k in range(4))} for i in range(40)])
            indexed = mem.search(query, limit=15, explain=True)
        engine.text_match = False  # the built-in @@, as on a database without it
        with engine.tenant(anchor) as mem:
            builtin = mem.search(query, limit=15, explain=True)
    assert indexed.signal_rows["lexical"] > 0
    assert [(h.memory.id, h.ranks) for h in indexed.hits] == [
        (h.memory.id, h.ranks) for h in builtin.hits]
    assert indexed.signal_rows == builtin.signal_rows


def test_row_level_security_lets_the_index_serve_only_the_leakproof_match(
    tenant_table: Callable[..., sql.Identifier], app_conn: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
) -> None:
    assert ensure_text_match(admin_conn) in ("installed", "present")  # the test server's admin
    # A table shaped like a memories table (forced RLS on the tenant, the full-text index on
    # the leakproof class) and no other index, so each plan shows what the index may do.
    table = tenant_table("notes", "tenant text NOT NULL, id int, tsv tsvector", indexes=(
        "CREATE INDEX notes_tsv ON {} USING gin (tenant, tsv primitives.tsvector_match_ops)",))
    with tenant_transaction(app_conn, "acme"):
        app_conn.execute(sql.SQL(
            "INSERT INTO {} SELECT 'acme', i, to_tsvector('english', 'scan ' || i) "
            "FROM generate_series(1, 50) AS i").format(table))
    query = sql.SQL("EXPLAIN (ANALYZE, COSTS OFF) SELECT id FROM {} WHERE tsv {} "
                    "to_tsquery('english', 'scan & 7')")
    plans = {}
    for name, operator in (("builtin", "@@"), ("leakproof", "OPERATOR(primitives.@@)")):
        with tenant_transaction(app_conn, "acme"):
            app_conn.execute("SET LOCAL enable_seqscan = off")
            plans[name] = "\n".join(row[0] for row in app_conn.execute(
                query.format(table, sql.SQL(operator))))
    def index_scan(plan: str) -> tuple[str, str]:
        lines = plan.split("\n")
        at = next(i for i, line in enumerate(lines) if "Bitmap Index Scan on notes_tsv" in line)
        return lines[at], lines[at + 1]

    # The policy's tenant condition goes to the index either way; the match only when it is
    # leakproof: the built-in one reads all 50 rows of the tenant and filters them after.
    scan, cond = index_scan(plans["leakproof"])
    assert "rows=1.00" in scan
    assert "Index Cond: ((tenant = " in cond and "AND (tsv OPERATOR(primitives.@@) " in cond
    scan, cond = index_scan(plans["builtin"])
    assert "rows=50.00" in scan and "@@" not in cond
    assert "Filter: (tsv @@ " in plans["builtin"]
    assert "Rows Removed by Filter: 49" in plans["builtin"]


def test_only_a_superuser_installs_it_and_a_second_migrate_finds_it(
    pg: PostgresHandle, fresh_database: Callable[[], str],
) -> None:
    dsn = fresh_database()
    params = conninfo_to_dict(dsn)
    params["user"] = APP_ROLE
    with psycopg.connect(make_conninfo("", **params), autocommit=True) as app:
        assert ensure_text_match(app) == "not superuser"
        assert not has_text_match(app)
    with psycopg.connect(dsn, autocommit=True) as admin:
        apply_migrations(admin)
        assert ensure_text_match(admin) == "installed"
        assert ensure_text_match(admin) == "present"
        leakproof = admin.execute("SELECT proleakproof FROM pg_proc WHERE oid = "
                                  "'primitives.ts_match(tsvector, tsquery)'::regprocedure"
                                  ).fetchone()
        assert leakproof == (True,)


def test_migrate_replaces_the_plain_fulltext_index_of_an_earlier_plan(
    fresh_database: Callable[[], str], spectral: AgentSpec,
) -> None:
    dsn = fresh_database()
    table = Engine.tables_for(spectral).memories.qualified
    prefix = spectral.persistence.store.prefix
    with psycopg.connect(dsn, autocommit=True) as admin:
        apply_migrations(admin)
        earlier = compile_plan(spectral, capabilities=Capabilities(text_match=False))
        apply_plan(admin, spectral.agent, earlier.checksum, earlier.statements)
        assert f"{prefix}_memories_tsv_idx" in _indexes(admin, table)
    report = migrate([spectral], dsn=dsn, progress=lambda _: None)
    assert report.capabilities.text_match and report.plans[0].applied
    assert not any("leakproof" in w for w in report.warnings)
    with psycopg.connect(dsn, autocommit=True) as admin:
        indexes = _indexes(admin, table)
    assert f"{prefix}_memories_tsv_idx" not in indexes
    assert "tsvector_match_ops" in indexes[f"{prefix}_memories_tsv_match_idx"]
