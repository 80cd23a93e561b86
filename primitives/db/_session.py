"""The session settings every runtime connection starts with, whatever its role says.

Any session may ``ALTER ROLE CURRENT_USER SET`` a parameter, and every later connection of
that role starts with it: ``default_transaction_read_only = on`` stops every tenant's
writes, ``row_security = off`` turns every query into an error, ``search_path`` hides the
vector type. Settings sent in the connection's startup packet (libpq ``options``) rank
above role and database settings, and ``RESET ALL`` (which ends every tenant transaction)
goes back to them, not to the role's. So the framework's pools connect with
:func:`runtime_conninfo`: the DSN plus ``-c name=value`` for every parameter the engine
relies on.

Two kinds: :data:`PINNED_SETTINGS` are what the engine's correctness needs and always win;
:data:`DEFAULT_SETTINGS` (timeouts, ``synchronous_commit``) are the framework's choice,
and ``options`` in the DSN (or ``PGOPTIONS``) may choose others.

Example::

    pool = ConnectionPool(runtime_conninfo(app_dsn(admin)), ...)
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from primitives.db._connect import connect_failure, with_timeout
from primitives.errors import StorageError

__all__ = [
    "DEFAULT_SETTINGS",
    "PINNED_SETTINGS",
    "aruntime_conninfo",
    "runtime_conninfo",
    "session_options",
]

PINNED_SETTINGS: Final[Mapping[str, str]] = {
    "default_transaction_read_only": "off",
    # the journal's chain refuses anything else (SQLSTATE PM004)
    "default_transaction_isolation": "read committed",
    "default_transaction_deferrable": "off",
    # off makes every query on a table with row level security fail
    "row_security": "on",
    "client_encoding": "UTF8",
    "DateStyle": "ISO, MDY",
    "IntervalStyle": "postgres",
    "extra_float_digits": "1",
    "standard_conforming_strings": "on",
    "bytea_output": "hex",
    # a limit silently drops full-text matches
    "gin_fuzzy_search_limit": "0",
}
"""Parameters whose value the engine's correctness depends on; nothing overrides them."""

DEFAULT_SETTINGS: Final[Mapping[str, str]] = {
    "statement_timeout": "0",
    "lock_timeout": "0",
    "idle_in_transaction_session_timeout": "0",
    "idle_session_timeout": "0",
    "synchronous_commit": "on",
}
"""The framework's choice (PostgreSQL's defaults); ``-c`` options in the DSN take precedence."""

_SINCE_17: Final[Mapping[str, str]] = {"transaction_timeout": "0"}

# Where the framework's extension types and operators (halfvec, <=>) are found, after
# pg_catalog; public stays last (PostgreSQL 15+ gives PUBLIC no CREATE there, and
# `primitives doctor` names any runtime role that may create in a schema).
_EXTENSIONS: Final = ("vector", "pg_trgm", "btree_gin")
_PROBE: Final = (
    "SELECT pg_catalog.current_setting('server_version_num')::int, "
    "ARRAY(SELECT DISTINCT n.nspname::text FROM pg_catalog.pg_extension AS x "
    "JOIN pg_catalog.pg_namespace AS n ON n.oid = x.extnamespace "
    "WHERE x.extname = ANY (%s) AND n.nspname NOT IN ('pg_catalog', 'public') ORDER BY 1)"
)
_PLAIN_NAME = re.compile(r"^[a-z_][a-z0-9_$]*$")


def _quote_name(name: str) -> str:
    return name if _PLAIN_NAME.match(name) else '"' + name.replace('"', '""') + '"'


def _option(name: str, value: str) -> str:
    # libpq splits options at spaces; a backslash keeps one in the value
    escaped = value.replace("\\", "\\\\").replace(" ", "\\ ")
    return f"-c {name}={escaped}"


def session_options(server_version: int, extension_schemas: Sequence[str] = (),
                    given: str = "") -> str:
    """The libpq ``options`` of a runtime connection (pure).

    >>> session_options(150000, given="-c lock_timeout=5s").split(" -c ")[5]
    'lock_timeout=5s'
    """
    defaults = dict(DEFAULT_SETTINGS)
    if server_version >= 170000:
        defaults.update(_SINCE_17)
    pinned = dict(PINNED_SETTINGS)
    pinned["search_path"] = ",".join(
        ["pg_catalog", *map(_quote_name, extension_schemas), "public"])
    parts = [_option(k, v) for k, v in defaults.items()]
    if given.strip():
        parts.append(given.strip())
    parts += [_option(k, v) for k, v in pinned.items()]
    return " ".join(parts)


def _with_options(dsn: str, options: str) -> str:
    return make_conninfo(dsn, options=options)


def _given(dsn: str) -> tuple[str, tuple[str, str]]:
    """(the DSN's own options, or PGOPTIONS; the options to probe with: those of a server
    that has ``transaction_timeout``, then those safe on any server).

    The probe's own connection needs the options too: a ``transaction_timeout`` persisted on
    the role ends a connection whose startup does not outrank it, during its first
    transaction; a server before PostgreSQL 17 refuses the option at startup."""
    given = str(conninfo_to_dict(dsn).get("options") or os.environ.get("PGOPTIONS", ""))
    return given, (session_options(170000, given=given), session_options(0, given=given))


def _unknown_option(err: psycopg.OperationalError) -> bool:
    return any(f'unrecognized configuration parameter "{name}"' in str(err)
               for name in _SINCE_17)


def _conninfo(dsn: str, given: str, probe: tuple[Any, ...] | None) -> str:
    if probe is None:
        raise psycopg.OperationalError("the server did not answer the settings probe")
    version, schemas = probe
    return _with_options(dsn, session_options(int(version), list(schemas), given))


def runtime_conninfo(dsn: str, who: str = "the application role") -> str:
    """``dsn`` with the options of :func:`session_options` for its server (one short
    connection asks the server version and where the extensions live). A connection that
    fails raises :class:`StorageError` naming its cause, as ``who``, within the connect
    timeout (:mod:`primitives.db._connect`)."""
    given, (newer, safe) = _given(dsn)
    try:
        try:
            conn = psycopg.connect(with_timeout(_with_options(dsn, newer)), autocommit=True)
        except psycopg.OperationalError as err:
            if not _unknown_option(err):
                raise
            conn = psycopg.connect(with_timeout(_with_options(dsn, safe)), autocommit=True)
    except psycopg.OperationalError as err:
        raise StorageError(connect_failure(err, dsn, who)) from err
    with conn:
        probe = conn.execute(_PROBE, (list(_EXTENSIONS),)).fetchone()
    return _conninfo(with_timeout(dsn), given, probe)


async def aruntime_conninfo(dsn: str, who: str = "the application role") -> str:
    """The async twin of :func:`runtime_conninfo`."""
    given, (newer, safe) = _given(dsn)
    try:
        try:
            conn = await psycopg.AsyncConnection.connect(
                with_timeout(_with_options(dsn, newer)), autocommit=True)
        except psycopg.OperationalError as err:
            if not _unknown_option(err):
                raise
            conn = await psycopg.AsyncConnection.connect(
                with_timeout(_with_options(dsn, safe)), autocommit=True)
    except psycopg.OperationalError as err:
        raise StorageError(connect_failure(err, dsn, who)) from err
    async with conn:
        cursor = await conn.execute(_PROBE, (list(_EXTENSIONS),))
        probe = await cursor.fetchone()
    return _conninfo(with_timeout(dsn), given, probe)
