"""Index entries the write path pays for: none for the envelope and the tags (no query of the
application role can use such an index under row-level security, so a plan drops those an
earlier plan built) and none in the journal's kind index for ``observed`` events (the kinds
the audit views look up are still served by it)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives import migrate
from primitives.compile import OBSERVED_EVENT_KIND, RETIRED_MEMORY_INDEXES
from primitives.db import tenant_transaction
from primitives.embeddings import HashingEmbedder
from primitives.engine import Engine
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.db


def _index_names(conn: psycopg.Connection[Any], table: str) -> set[str]:
    rows = conn.execute("SELECT indexrelid::regclass::text FROM pg_index "
                        "WHERE indrelid = %s::regclass", (table,)).fetchall()
    return {name.split(".")[-1] for (name,) in rows}


def test_containment_is_not_served_by_a_gin_index_under_row_level_security(
    tenant_table: Callable[..., sql.Identifier], app_conn: psycopg.Connection[Any],
) -> None:
    # A table shaped like a memories table: forced RLS on the tenant, GIN indexes on the
    # envelope and the tags as earlier plans built them, and no other index.
    table = tenant_table("notes", "tenant text NOT NULL, id int, envelope jsonb, tags text[]",
                         indexes=("CREATE INDEX notes_envelope ON {} USING gin "
                                  "(envelope jsonb_path_ops)",
                                  "CREATE INDEX notes_tags ON {} USING gin (tags)"))
    with tenant_transaction(app_conn, "acme"):
        app_conn.execute(sql.SQL(
            "INSERT INTO {} SELECT 'acme', i, jsonb_build_object('n', i), "
            "ARRAY['t' || (i % 10)] FROM generate_series(1, 200) AS i").format(table))
    for condition, value, found in (
            (sql.SQL("envelope @> %s::jsonb"), '{"n": 7}', 1),
            (sql.SQL("tags @> %s::text[]"), "{t7}", 20)):
        with tenant_transaction(app_conn, "acme"):
            app_conn.execute("SET LOCAL enable_seqscan = off")  # an index if any is allowed
            plan = "\n".join(row[0] for row in app_conn.execute(sql.SQL(
                "EXPLAIN (ANALYZE, COSTS OFF) SELECT id FROM {} WHERE {}"
            ).format(table, condition), (value,)))
        # The containment is not leakproof: it runs as a filter over the tenant's rows after
        # the policy, never as an index condition, whatever the planner's costs say.
        assert "Index Cond" not in plan and "notes_envelope" not in plan, plan
        assert "notes_tags" not in plan, plan
        assert f"rows={found}.00" in plan.split("\n")[0], plan


def test_migrate_drops_the_envelope_and_tags_indexes_of_an_earlier_plan(
    fresh_database: Callable[[], str], spectral: AgentSpec,
) -> None:
    dsn = fresh_database()
    tables = Engine.tables_for(spectral)
    table = tables.memories.qualified
    prefix = spectral.persistence.store.prefix
    report = migrate([spectral], dsn=dsn, progress=lambda _: None)
    assert report.plans[0].applied
    with psycopg.connect(dsn, autocommit=True) as admin:
        before = _index_names(admin, table)
        assert not {f"{prefix}_{n}" for n in RETIRED_MEMORY_INDEXES} & before
        # what an earlier plan left behind
        admin.execute(sql.SQL(
            "CREATE INDEX {} ON {} USING gin ({}, envelope jsonb_path_ops); "
            "CREATE INDEX {} ON {} USING gin ({}, tags)").format(
            sql.Identifier(f"{prefix}_memories_envelope_idx"), tables.memories.ident,
            tables.tenant, sql.Identifier(f"{prefix}_memories_tags_idx"),
            tables.memories.ident, tables.tenant))
        admin.execute("UPDATE primitives.agent_plans SET checksum = 'an earlier plan' "
                      "WHERE agent = %s", (spectral.agent,))
        assert {f"{prefix}_{n}" for n in RETIRED_MEMORY_INDEXES} <= _index_names(admin, table)
    report = migrate([spectral], dsn=dsn, progress=lambda _: None)
    assert report.plans[0].applied
    with psycopg.connect(dsn, autocommit=True) as admin:
        assert _index_names(admin, table) == before


def test_the_journal_kind_index_holds_no_observations_and_serves_the_other_kinds(
    pg: PostgresHandle, spectral: AgentSpec, app_conn: psycopg.Connection[Any],
) -> None:
    tables = Engine.tables_for(spectral)
    prefix = spectral.persistence.store.prefix
    anchor = {"workspace_id": f"ws-{uuid.uuid4().hex[:8]}"}
    with Engine.connect(spectral, pg.app_dsn, embedder=HashingEmbedder()) as engine:
        written = [engine.observe(anchor, "cycle", f"note {i}") for i in range(60)]
        for memory in written[:3]:
            engine.write(anchor, lambda mem, m=memory: mem.tombstone(m.id, reason="test"))
    query = sql.SQL("EXPLAIN (ANALYZE, COSTS OFF) SELECT seq FROM {} WHERE kind = %s").format(
        tables.events.ident)
    plans = {}
    for kind in ("tombstoned", OBSERVED_EVENT_KIND):
        with tenant_transaction(app_conn, anchor["workspace_id"]):
            app_conn.execute("SET LOCAL enable_seqscan = off")
            plans[kind] = "\n".join(r[0] for r in app_conn.execute(query, (kind,)))
    index = f"{prefix}_memory_events_kind_rare_idx"
    assert index in plans["tombstoned"] and "rows=3.00" in plans["tombstoned"].split("\n")[0]
    assert index not in plans[OBSERVED_EVENT_KIND]  # its predicate leaves observations out
    assert "rows=60.00" in plans[OBSERVED_EVENT_KIND].split("\n")[0]
    with psycopg.connect(pg.admin_dsn, autocommit=True) as admin:
        names = _index_names(admin, tables.events.qualified)
        assert f"{prefix}_memory_events_kind_idx" not in names  # replaced
        definition = admin.execute("SELECT pg_get_indexdef(%s::regclass)",
                                   (f"{tables.events.schema}.{index}",)).fetchone()
    assert definition is not None and "WHERE (kind <> 'observed'::text)" in definition[0]
