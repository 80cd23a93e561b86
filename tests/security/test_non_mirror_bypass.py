"""The non-mirror guard lives in the database: the application role cannot write a copy of
canonical text around the engine, switch the guard off, read the canonical table, or
reference another tenant's memory."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives._project import migrate
from primitives.compile import agent_tables
from primitives.db import tenant_transaction
from primitives.errors import NonMirrorViolation, PolicyViolation, StorageError
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle
from tests.integration._canonical import NEAR_COPY, RULE_12, canonical_table, make_spec


@pytest.fixture
def canon(admin_conn: psycopg.Connection[Any]) -> Iterator[str]:
    yield from canonical_table(admin_conn)


@pytest.fixture
def spec(tmp_path: Path, pg: PostgresHandle, canon: str) -> AgentSpec:
    spec = make_spec(tmp_path, canon)
    migrate([spec], dsn=pg.admin_dsn)
    return spec


def _insert(spec: AgentSpec) -> sql.Composed:
    return sql.SQL("INSERT INTO {} (world_id, tier, typology, key, content) "
                   "VALUES (%s, 'world', 'procedural', %s, %s)").format(
        agent_tables(spec).memories.ident)


@pytest.mark.parametrize("content", [RULE_12, NEAR_COPY], ids=["verbatim", "near"])
def test_raw_insert_of_a_copy_by_the_app_role_is_refused(
        content: str, spec: AgentSpec, app_conn: psycopg.Connection[Any],
        admin_conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(NonMirrorViolation) as refused, tenant_transaction(app_conn, "w-1"):
        app_conn.execute(_insert(spec), ("w-1", f"raw-{uuid.uuid4().hex[:8]}", content))
    assert refused.value.context["canonical_key"] == "12"
    assert refused.value.context["sqlstate"] == "PM005"
    rows = admin_conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
        agent_tables(spec).memories.ident)).fetchone()
    assert rows == (0,)


@pytest.mark.parametrize("statement", [
    "SET session_replication_role = replica",
    "ALTER TABLE {memories} DISABLE TRIGGER primitives_non_mirror_guard",
    "DROP TRIGGER primitives_non_mirror_guard ON {memories}",
    "ALTER TABLE {memories} DISABLE TRIGGER ALL",
], ids=["replica-role", "disable-trigger", "drop-trigger", "disable-all"])
def test_app_role_cannot_switch_the_guard_off(
        statement: str, spec: AgentSpec, app_conn: psycopg.Connection[Any]) -> None:
    memories = agent_tables(spec).memories.ident
    with pytest.raises(PolicyViolation) as refused, tenant_transaction(app_conn, "w-1"):
        app_conn.execute(sql.SQL(statement).format(memories=memories))
    assert refused.value.context["sqlstate"] == "42501"
    # and the guard still refuses
    with pytest.raises(NonMirrorViolation), tenant_transaction(app_conn, "w-1"):
        app_conn.execute(_insert(spec), ("w-1", "after", RULE_12))


def test_app_role_cannot_read_the_canonical_table_or_call_the_guard(
        spec: AgentSpec, canon: str, app_conn: psycopg.Connection[Any]) -> None:
    tables = agent_tables(spec)
    for statement in (
        sql.SQL("SELECT body_text FROM {}").format(sql.Identifier(*canon.split("."))),
        sql.SQL("SELECT {}()").format(sql.Identifier(tables.schema,
                                                     tables.object_name("non_mirror_guard"))),
    ):
        with pytest.raises(PolicyViolation) as refused, tenant_transaction(app_conn, "w-1"):
            app_conn.execute(statement)
        assert refused.value.context["sqlstate"] == "42501"


def test_app_role_cannot_reference_another_tenants_memory(
        spec: AgentSpec, app_conn: psycopg.Connection[Any]) -> None:
    tables = agent_tables(spec)
    assert tables.canonical_refs is not None
    with tenant_transaction(app_conn, "w-2"):
        row = app_conn.execute(_insert(spec).as_string(app_conn) + " RETURNING id",
                               ("w-2", "theirs", "a note of tenant w-2")).fetchone()
    assert row is not None
    forged = sql.SQL("INSERT INTO {} (world_id, memory_id, category, canonical_key, "
                     "canonical_version) VALUES (%s, %s, 'rule_content', '12', '1')").format(
        tables.canonical_refs.ident)
    # under its own tenant: the memory is not there (foreign key, the tenant leads it)
    with pytest.raises(StorageError) as missing, tenant_transaction(app_conn, "w-1"):
        app_conn.execute(forged, ("w-1", row[0]))
    assert missing.value.context["sqlstate"] == "23503"
    # under the other tenant's value: row-level security refuses it
    with pytest.raises(PolicyViolation), tenant_transaction(app_conn, "w-1"):
        app_conn.execute(forged, ("w-2", row[0]))
