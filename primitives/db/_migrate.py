"""Forward-only migrations, and compiled agent plans, each applied with its bookkeeping row.

Framework migrations are the files ``NNNN_name.sql`` of the repository's
``migrations/`` folder (shipped in the wheel as ``primitives/_migrations``).
``apply_migrations`` holds a session advisory lock for the whole run, so two
migrators serialise; each pending file runs in its own transaction together with
its row in ``primitives.schema_migrations``. A file whose sha256 no longer
matches the checksum recorded when it was applied is refused: applied
migrations are never edited, a new one is added instead.

``apply_plan`` does the same for one agent's compiled DDL, recorded in
``primitives.agent_plans``: same checksum, nothing to do; new checksum, the
(idempotent, ``IF NOT EXISTS``) statements run as ``primitives_owner``. With a
:class:`PlanRecord` (what ``primitives migrate`` passes) it also records the spec's shape,
runs a declared rename's steps first, journals the plan in ``primitives.plan_history`` and,
after the commit, validates the CHECKs the plan added ``NOT VALID``.

Example::

    applied = apply_migrations(resolve_dsn())   # ["0001_roles_and_bookkeeping.sql", ...]
    apply_migrations(resolve_dsn())             # [] the second time
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.abc import Query
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb

from primitives.db._names import OWNER_ROLE
from primitives.errors import MigrationError, StorageError

__all__ = [
    "Migration",
    "PlanRecord",
    "apply_migrations",
    "apply_plan",
    "load_migrations",
    "migrations_dir",
    "recorded_plan",
]

_log = logging.getLogger("primitives.db")

_FILE_NAME = re.compile(r"^(?P<number>\d{4})_(?P<slug>[a-z0-9_]+)\.sql$")

# Two-int4 advisory key ('prim', 1) taken by every schema change of the framework.
_DDL_LOCK_KEY = (0x7072696D, 1)

_LOCK = sql.SQL("SELECT pg_advisory_lock({}, {})").format(*map(sql.Literal, _DDL_LOCK_KEY))
_UNLOCK = sql.SQL("SELECT pg_advisory_unlock({}, {})").format(*map(sql.Literal, _DDL_LOCK_KEY))
DDL_XACT_LOCK = sql.SQL("SELECT pg_advisory_xact_lock({}, {})").format(
    *map(sql.Literal, _DDL_LOCK_KEY)
)

# The runner needs its bookkeeping table before the first migration can be
# recorded; migration 0001 hands both to the owner role.
_BOOTSTRAP = (
    sql.SQL("CREATE SCHEMA IF NOT EXISTS primitives"),
    sql.SQL(
        "CREATE TABLE IF NOT EXISTS primitives.schema_migrations ("
        " name text PRIMARY KEY,"
        " checksum text NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT now())"
    ),
)
_APPLIED = sql.SQL("SELECT name, checksum FROM primitives.schema_migrations")
_RECORD_MIGRATION = sql.SQL(
    "INSERT INTO primitives.schema_migrations (name, checksum) VALUES (%s, %s)"
)
_RESET_ROLE = sql.SQL("RESET ROLE")

_PLAN_CHECKSUM = sql.SQL("SELECT checksum, shape FROM primitives.agent_plans WHERE agent = %s")
_HAS_CITUS = sql.SQL(
    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')")
_AS_OWNER = sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(OWNER_ROLE))
_RECORD_PLAN = sql.SQL(
    "INSERT INTO primitives.agent_plans (agent, checksum, statement_count) VALUES (%s, %s, %s)"
    " ON CONFLICT (agent) DO UPDATE SET checksum = EXCLUDED.checksum,"
    " statement_count = EXCLUDED.statement_count, applied_at = now()"
)
_RECORD_SHAPE = sql.SQL("UPDATE primitives.agent_plans SET shape = %s WHERE agent = %s")
_RECORD_HISTORY = sql.SQL(
    "INSERT INTO primitives.plan_history (agent, checksum, shape, changes, allowed, reason)"
    " VALUES (%s, %s, %s, %s, %s, %s)"
)

Directory = str | os.PathLike[str] | Traversable


@dataclass(frozen=True)
class Migration:
    """One migration file: its name (``0001_roles_and_bookkeeping.sql``), sha256 and SQL."""

    name: str
    checksum: str
    sql: bytes


def migrations_dir() -> Traversable:
    """The framework migrations: packaged in the wheel, else ``<repo>/migrations``."""
    packaged = files("primitives") / "_migrations"
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parents[2] / "migrations"
    if checkout.is_dir():
        return checkout
    raise MigrationError(
        "no migrations found: neither primitives/_migrations (wheel) nor "
        f"{checkout} (source checkout) exists"
    )


def load_migrations(directory: Directory | None = None) -> list[Migration]:
    """Read the ``NNNN_name.sql`` files of ``directory`` (default: the framework's), in order."""
    folder: Traversable = (
        migrations_dir()
        if directory is None
        else Path(directory)
        if isinstance(directory, str | os.PathLike)
        else directory
    )
    found: dict[str, Migration] = {}
    numbers: dict[str, str] = {}
    for entry in folder.iterdir():
        if not entry.name.endswith(".sql"):
            continue
        match = _FILE_NAME.match(entry.name)
        if match is None:
            raise MigrationError(
                f"{entry.name}: migration files are named NNNN_lowercase_name.sql", file=entry.name
            )
        number = match["number"]
        if number in numbers:
            raise MigrationError(
                f"{entry.name} and {numbers[number]} share the number {number}", file=entry.name
            )
        numbers[number] = entry.name
        # LF line endings, so a checkout with CRLF conversion keeps the same checksum
        body = entry.read_bytes().replace(b"\r\n", b"\n")
        found[entry.name] = Migration(entry.name, hashlib.sha256(body).hexdigest(), body)
    return [found[name] for name in sorted(found)]


def apply_migrations(
    conn_or_dsn: psycopg.Connection[Any] | str, *, directory: Directory | None = None
) -> list[str]:
    """Apply the pending migrations in order; return the names applied (``[]`` if none).

    Needs an admin connection outside any transaction (a DSN is connected to and
    closed). Raises ``MigrationError`` for a failing migration, naming the file,
    and before applying anything if an applied migration's file was edited.
    """
    migrations = load_migrations(directory)
    if isinstance(conn_or_dsn, str):
        try:
            conn = psycopg.connect(conn_or_dsn, autocommit=True)
        except psycopg.Error as err:
            raise StorageError(f"cannot connect to apply migrations: {err}") from err
        with conn:
            return _apply_migrations(conn, migrations)
    return _apply_migrations(conn_or_dsn, migrations)


@dataclass(frozen=True)
class PlanRecord:
    """What ``apply_plan`` journals besides the checksum (``primitives.plan_history``)."""

    shape: dict[str, Any]
    changes: list[dict[str, Any]]
    before: tuple[Query, ...] = ()
    """Statements run ahead of the plan (a declared rename's steps)."""
    allowed: tuple[str, ...] = ()
    reason: str | None = None
    validations: tuple[Query, ...] = ()
    """Run after the plan commits, each in its own transaction (``VALIDATE CONSTRAINT``)."""


def recorded_plan(conn: psycopg.Connection[Any], name: str) -> tuple[str, Any] | None:
    """The checksum and recorded shape of an agent's applied plan, or None if never applied."""
    row = conn.execute(_PLAN_CHECKSUM, (name,)).fetchone()
    return (str(row[0]), row[1]) if row is not None else None


def apply_plan(
    conn: psycopg.Connection[Any], name: str, checksum: str, statements: Sequence[Query],
    record: PlanRecord | None = None,
) -> bool:
    """Apply an agent's compiled DDL once per checksum; True if it ran, False if already applied.

    One transaction: the framework DDL lock, the check against
    ``primitives.agent_plans``, ``SET LOCAL ROLE primitives_owner`` (so the owner
    owns what is created), the statements (no parameters: DDL), the bookkeeping
    row. A changed checksum re-runs all statements, so they must be idempotent.
    """
    _require_idle(conn, "apply_plan")
    try:
        with conn.transaction():
            conn.execute(DDL_XACT_LOCK)
            row = conn.execute(_PLAN_CHECKSUM, (name,)).fetchone()
            if row is not None and row[0] == checksum and (
                    record is None or row[1] == record.shape):
                return False
            citus = conn.execute(_HAS_CITUS).fetchone()
            if citus is not None and citus[0]:
                raise MigrationError(
                    f"plan for agent {name!r}: this database has the citus extension, and "
                    "the single-node plan must never reach a Citus cluster (its tables "
                    "would stay on the coordinator, undistributed); apply the distributed "
                    "plan instead: `primitives migrate` does so on a coordinator "
                    "(`--target citus`)", agent=name)
            apply_plan_statements(conn, name, checksum, statements, record)
    except psycopg.Error as err:
        raise MigrationError(
            f"plan for agent {name!r} failed: {_describe(err)}", agent=name, sqlstate=err.sqlstate
        ) from err
    validate_plan(conn, name, record)
    _log.info("applied plan for agent %s (%d statements)", name, len(statements))
    return True


def apply_plan_statements(conn: psycopg.Connection[Any], name: str, checksum: str,
                          statements: Sequence[Query], record: PlanRecord | None) -> None:
    """``apply_plan``'s work inside the caller's transaction (which holds the framework DDL
    lock): the rebuild steps, the plan as the owner, the bookkeeping rows. The role stays
    the owner until the transaction ends."""
    # the rebuild steps run as the migrating role: the owner is bound by the
    # tables' forced row-level security, and moving a tier's rows crosses tenants
    for statement in record.before if record else ():
        conn.execute(statement)
    conn.execute(_AS_OWNER)
    for statement in statements:
        conn.execute(statement)
    conn.execute(_RECORD_PLAN, (name, checksum, len(statements)))
    if record is not None:
        conn.execute(_RECORD_SHAPE, (Jsonb(record.shape), name))
        conn.execute(_RECORD_HISTORY, (
            name, checksum, Jsonb(record.shape), Jsonb(record.changes),
            list(record.allowed), record.reason))


def validate_plan(conn: psycopg.Connection[Any], name: str, record: PlanRecord | None) -> None:
    """The record's ``VALIDATE CONSTRAINT`` steps, each in its own transaction, after the
    plan committed."""
    for statement in record.validations if record else ():
        try:
            with conn.transaction():
                conn.execute(_AS_OWNER)
                conn.execute(statement)
        except psycopg.Error as err:
            raise MigrationError(
                f"plan for agent {name!r} applied, but existing rows break one of its CHECKs "
                f"({_describe(err)}): new rows are checked; fix the rows and migrate again "
                "(`primitives doctor` reports the constraint NOT VALID until then)",
                agent=name, sqlstate=err.sqlstate) from err


def _apply_migrations(conn: psycopg.Connection[Any], migrations: list[Migration]) -> list[str]:
    _require_idle(conn, "apply_migrations")
    autocommit = conn.autocommit
    conn.autocommit = True  # each migration commits on its own; the lock spans them
    try:
        conn.execute(_LOCK)
        try:
            return _apply_locked(conn, migrations)
        finally:
            if not conn.closed:
                conn.execute(_UNLOCK)
    except psycopg.Error as err:
        raise MigrationError(f"migrations failed: {_describe(err)}", sqlstate=err.sqlstate) from err
    finally:
        if not conn.closed:
            conn.autocommit = autocommit


def _apply_locked(conn: psycopg.Connection[Any], migrations: list[Migration]) -> list[str]:
    with conn.transaction():
        for statement in _BOOTSTRAP:
            conn.execute(statement)
    applied = {str(name): str(checksum) for name, checksum in conn.execute(_APPLIED).fetchall()}
    for migration in migrations:
        recorded = applied.get(migration.name)
        if recorded is not None and recorded != migration.checksum:
            raise MigrationError(
                f"migration {migration.name} was edited after it was applied (recorded sha256 "
                f"{recorded[:12]}…, file now {migration.checksum[:12]}…); applied migrations are "
                "never changed: restore the file and add a new migration instead",
                file=migration.name,
            )
    done: list[str] = []
    for migration in migrations:
        if migration.name in applied:
            continue
        try:
            with conn.transaction():
                conn.execute(migration.sql)
                conn.execute(_RESET_ROLE)  # a migration may SET LOCAL ROLE
                conn.execute(_RECORD_MIGRATION, (migration.name, migration.checksum))
        except psycopg.Error as err:
            raise MigrationError(
                f"migration {migration.name} failed: {_describe(err)}",
                file=migration.name,
                sqlstate=err.sqlstate,
            ) from err
        _log.info("applied migration %s", migration.name)
        done.append(migration.name)
    return done


def _require_idle(conn: psycopg.Connection[Any], what: str) -> None:
    if conn.info.transaction_status != TransactionStatus.IDLE:
        raise MigrationError(
            f"{what} runs its own transactions: commit or roll back the connection's open "
            "transaction first (or use autocommit=True)"
        )


def _describe(err: psycopg.Error) -> str:
    primary = err.diag.message_primary or str(err)
    return f"{primary} (SQLSTATE {err.sqlstate})" if err.sqlstate else primary
