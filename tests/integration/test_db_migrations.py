"""The migrations runner and apply_plan against real PostgreSQL databases."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from psycopg import sql

from primitives.db import (
    OWNER_ROLE,
    apply_migrations,
    apply_plan,
    load_migrations,
    migrations_dir,
)
from primitives.errors import MigrationError

if TYPE_CHECKING:
    from conftest import PostgresHandle

pytestmark = pytest.mark.db

FRAMEWORK = [m.name for m in load_migrations()]


def _recorded(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT name FROM primitives.schema_migrations ORDER BY name"
        ).fetchall()
    return [name for (name,) in rows]


def _copy_framework_migrations(target: Path) -> Path:
    source = migrations_dir()
    target.mkdir()
    for entry in source.iterdir():
        if entry.name.endswith(".sql"):
            (target / entry.name).write_bytes(entry.read_bytes())
    return target


def test_second_run_applies_nothing(pg: PostgresHandle, fresh_database: Callable[[], str]) -> None:
    assert apply_migrations(pg.admin_dsn) == []  # the session database is migrated already

    dsn = fresh_database()
    assert apply_migrations(dsn) == FRAMEWORK
    assert apply_migrations(dsn) == []
    assert _recorded(dsn) == FRAMEWORK


def test_applied_migration_whose_file_was_edited_is_refused(
    fresh_database: Callable[[], str], tmp_path: Path
) -> None:
    folder = _copy_framework_migrations(tmp_path / "migrations")
    dsn = fresh_database()
    apply_migrations(dsn, directory=folder)

    edited = folder / FRAMEWORK[-1]
    edited.write_text(edited.read_text() + "\n-- an innocent-looking edit\n")
    with pytest.raises(MigrationError) as caught:
        apply_migrations(dsn, directory=folder)
    assert caught.value.context["file"] == FRAMEWORK[-1]
    assert FRAMEWORK[-1] in str(caught.value)


def test_concurrent_migrators_serialise_and_apply_each_migration_once(
    fresh_database: Callable[[], str],
) -> None:
    dsn = fresh_database()
    start = threading.Barrier(2)
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def migrate() -> None:
        try:
            start.wait()
            results.append(apply_migrations(dsn))
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=migrate) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert sorted(results, key=len) == [[], FRAMEWORK]
    assert _recorded(dsn) == FRAMEWORK


def test_failing_migration_rolls_back_and_names_its_file(
    fresh_database: Callable[[], str], tmp_path: Path
) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "0001_broken.sql").write_text(
        "CREATE TABLE primitives.half_done (id int);\nSELECT 1 / 0;\n"
    )
    dsn = fresh_database()
    with pytest.raises(MigrationError) as caught:
        apply_migrations(dsn, directory=folder)
    assert caught.value.context["file"] == "0001_broken.sql"
    assert caught.value.context["sqlstate"] == "22012"  # division_by_zero
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT to_regclass('primitives.half_done')").fetchone() == (None,)
        assert conn.execute("SELECT count(*) FROM primitives.schema_migrations").fetchone() == (0,)


def test_framework_migrations_leave_their_objects_to_the_owner_role(
    admin_conn: psycopg.Connection[Any],
) -> None:
    owners = admin_conn.execute(
        """
        SELECT DISTINCT pg_get_userbyid(owner) FROM (
            SELECT nspowner AS owner FROM pg_namespace WHERE nspname = 'primitives'
            UNION ALL
            SELECT relowner FROM pg_class WHERE relnamespace = 'primitives'::regnamespace
            UNION ALL
            SELECT proowner FROM pg_proc WHERE pronamespace = 'primitives'::regnamespace
        ) AS objects
        """
    ).fetchall()
    assert owners == [(OWNER_ROLE,)]


def test_apply_plan_runs_once_per_checksum_as_the_owner(
    admin_conn: psycopg.Connection[Any],
) -> None:
    agent = f"agent_{uuid.uuid4().hex[:8]}"
    schema = sql.Identifier(agent)
    create_schema = sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema)
    create_table = sql.SQL("CREATE TABLE IF NOT EXISTS {}.notes (id int)").format(schema)
    create_index = sql.SQL("CREATE INDEX IF NOT EXISTS notes_id ON {}.notes (id)").format(schema)
    try:
        assert apply_plan(admin_conn, agent, "v1", [create_schema, create_table]) is True
        assert apply_plan(admin_conn, agent, "v1", [create_schema, create_table]) is False
        assert apply_plan(admin_conn, agent, "v2", [create_schema, create_table, create_index])

        row = admin_conn.execute(
            "SELECT checksum, statement_count FROM primitives.agent_plans WHERE agent = %s",
            (agent,),
        ).fetchone()
        assert row == ("v2", 3)
        owner = admin_conn.execute(
            "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = %s::regclass",
            (f"{agent}.notes",),
        ).fetchone()
        assert owner == (OWNER_ROLE,)
    finally:
        admin_conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(schema))
        admin_conn.execute("DELETE FROM primitives.agent_plans WHERE agent = %s", (agent,))


def test_failing_plan_leaves_nothing_behind(admin_conn: psycopg.Connection[Any]) -> None:
    agent = f"agent_{uuid.uuid4().hex[:8]}"
    schema = sql.Identifier(agent)
    statements = [
        sql.SQL("CREATE SCHEMA {}").format(schema),
        sql.SQL("CREATE TABLE {}.notes (id no_such_type)").format(schema),
    ]
    with pytest.raises(MigrationError) as caught:
        apply_plan(admin_conn, agent, "v1", statements)
    assert caught.value.context["agent"] == agent
    assert admin_conn.execute("SELECT to_regnamespace(%s)", (agent,)).fetchone() == (None,)
    assert admin_conn.execute(
        "SELECT count(*) FROM primitives.agent_plans WHERE agent = %s", (agent,)
    ).fetchone() == (0,)


def test_migrations_refuse_a_connection_inside_a_transaction(pg: PostgresHandle) -> None:
    with psycopg.connect(pg.admin_dsn) as conn:
        conn.execute("SELECT 1")  # opens a transaction (autocommit is off)
        with pytest.raises(MigrationError):
            apply_migrations(conn)


def test_framework_migrations_are_found_in_the_checkout_or_the_wheel() -> None:
    assert FRAMEWORK[:2] == ["0001_roles_and_bookkeeping.sql", "0002_audit_functions.sql"]
