"""One-round-trip reads: a whole tenant transaction around one prepared statement.

A read through :func:`tenant_transaction` costs three round trips (``BEGIN; SET LOCAL``,
the statement, ``COMMIT; RESET ALL``). For a read that is one statement, this module sends
all of it as one query string::

    BEGIN; SET LOCAL primitives.tenant = '<tenant>'; EXECUTE <name>(<literals>); COMMIT; RESET ALL

``<name>`` is a server-side prepared statement made once per connection with ``PREPARE``
(so the plan is cached as with psycopg's own prepared statements), its parameter types
declared as psycopg would send them (``unknown`` for text and NULL, so the server infers
those from context exactly as it does for a bound parameter); the parameters travel as
literals quoted by psycopg. A statement run with other parameter types gets a prepared
statement of its own. The tenant rule is unchanged: it is set with ``SET LOCAL`` inside an
explicit transaction, and the session is reset afterwards.

Only statements written with named placeholders (``%(name)s``) qualify. When the server
cannot prepare one, or a parameter has a type psycopg cannot name, the caller runs it in an
ordinary tenant transaction instead: nothing is lost, only the saved round trips.

Example::

    cursor = read_once(conn, "acme", "SELECT * FROM notes WHERE id = %(id)s", {"id": 7})
    rows = cursor.fetchall() if cursor is not None else ...  # None: use tenant_transaction
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import weakref
from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any, TypeVar
from uuid import UUID

import psycopg
from psycopg import sql
from psycopg.adapt import PyFormat, Transformer
from psycopg.pq import ExecStatus, TransactionStatus
from psycopg.types.json import Jsonb

from primitives.db._tenant import begin_statement, translate_error

__all__ = ["AsyncOnceTransaction", "OnceTransaction", "aread_once", "read_once", "server_form"]

C = TypeVar("C", psycopg.Cursor[Any], psycopg.AsyncCursor[Any])

_PLACEHOLDER = re.compile(r"%%|%\((\w+)\)s|%s")
_END = "; COMMIT; RESET ALL"
_ROLLBACK = "ROLLBACK; RESET ALL"
_UNDEFINED_STATEMENT = "26000"  # invalid_sql_statement_name: not prepared on this session

# Per connection, the names prepared on its session. Connections are not hashable by
# value, so the map holds them weakly by identity; a closed and reopened connection is a
# new object with an empty set.
_prepared: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
_unfit: set[str] = set()
_lock = threading.Lock()


@lru_cache(maxsize=512)
def server_form(text: str) -> tuple[str, str, tuple[str, ...]] | None:
    """``(name, text with $1..$n, parameter names in $ order)``, or ``None`` if ``text`` uses
    positional ``%s`` placeholders. ``%%`` becomes ``%``; a name used twice is one ``$k``."""
    order: list[str] = []
    positional = False

    def replace(match: re.Match[str]) -> str:
        nonlocal positional
        token = match.group(0)
        if token == "%%":
            return "%"
        if token == "%s":
            positional = True
            return token
        name = match.group(1)
        if name not in order:
            order.append(name)
        return f"${order.index(name) + 1}"

    converted = _PLACEHOLDER.sub(replace, text)
    if positional:
        return None
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return f"primitives_once_{digest}", converted, tuple(order)


# The types psycopg binds for the common Python types, without asking its adapters each time
# (ints depend on their size, as psycopg's choice does). Anything else goes through psycopg.
_FIXED_TYPES: dict[type, str] = {
    str: "unknown", type(None): "unknown", bool: "boolean", float: "double precision",
    UUID: "uuid", Jsonb: "jsonb",
}


def _int_type(value: int) -> str:
    if -(2**15) <= value < 2**15:
        return "smallint"
    if -(2**31) <= value < 2**31:
        return "integer"
    if -(2**63) <= value < 2**63:
        return "bigint"
    return "numeric"


def _type_name(conn: Any, transformer: Any, value: Any) -> str | None:
    """The SQL type psycopg would declare for ``value``: ``unknown`` for text and NULL."""
    kind = type(value)
    fixed = _FIXED_TYPES.get(kind)
    if fixed is not None:
        return fixed
    if kind is int:
        return _int_type(value)
    if kind is datetime and value.tzinfo is not None:
        return "timestamp with time zone"
    oid = transformer.get_dumper(value, PyFormat.AUTO).oid
    if oid == 0:
        return "unknown"
    info = conn.adapters.types.get(oid)
    if info is None:
        return None
    base = info.regtype or info.name
    return f"{base}[]" if oid == info.array_oid and oid != info.oid else base


_NAMES: dict[tuple[str, str], str] = {}


class _LazyTransformer:
    """psycopg's adapter lookup, made only when a parameter is not of a common type."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._transformer: Any = None

    def get_dumper(self, value: Any, format: PyFormat) -> Any:
        if self._transformer is None:
            self._transformer = Transformer(self.conn)
        return self._transformer.get_dumper(value, format)


def _prepared_form(conn: Any, text: str, order: tuple[str, ...], base: str,
                   params: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(name, PREPARE statement)`` for these parameter types, or ``None``."""
    transformer = _LazyTransformer(conn)
    types: list[str] = []
    for key in order:
        if key not in params:
            return None
        name = _type_name(conn, transformer, params[key])
        if name is None:
            return None
        types.append(name)
    signature = ",".join(types)
    name = _NAMES.get((base, signature))
    if name is None:
        name = f"{base}_{hashlib.sha256(signature.encode()).hexdigest()[:8]}"
        _NAMES[(base, signature)] = name
    declared = f"({signature})" if types else ""
    return name, f"PREPARE {name}{declared} AS {text}"


def _quote_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _literal(conn: Any, value: Any, plain_strings: bool) -> str:
    """``value`` as an SQL literal: the common types directly, the rest through psycopg.

    Text is quoted by doubling quotes only when the server reads backslashes literally
    (``standard_conforming_strings``, on by default) and the text has no NUL (which
    PostgreSQL text cannot hold; psycopg refuses it).
    """
    kind = type(value)
    if kind is str and plain_strings and "\x00" not in value:
        return _quote_text(value)
    if value is None:
        return "NULL"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if kind is UUID:
        return f"'{value}'::uuid"
    if kind is datetime and value.tzinfo is not None:
        return f"'{value.isoformat()}'::timestamptz"
    if kind is Jsonb and plain_strings:
        text = (value.dumps or json.dumps)(value.obj)
        if "\x00" not in text:
            return _quote_text(text) + "::jsonb"
    return sql.Literal(value).as_string(conn)


def _arguments(conn: Any, order: tuple[str, ...], params: Mapping[str, Any]) -> str:
    if not order:
        return ""
    plain = conn.pgconn.parameter_status(b"standard_conforming_strings") == b"on"
    return "(" + ", ".join(_literal(conn, params[name], plain) for name in order) + ")"


def _is_prepared(conn: Any, name: str) -> bool:
    with _lock:
        return name in _prepared.get(conn, ())


def _mark(conn: Any, name: str, prepared: bool) -> None:
    with _lock:
        names = _prepared.setdefault(conn, set())
        if prepared:
            names.add(name)
        else:
            names.discard(name)


def _fits(conn: Any, tenant: str, params: Mapping[str, Any] | None) -> bool:
    return (
        isinstance(params, Mapping)
        and conn.autocommit
        and conn.info.transaction_status == TransactionStatus.IDLE
        and bool(tenant)
    )


@lru_cache(maxsize=4096)
def _begin_text(tenant: str) -> str:
    """``BEGIN; SET LOCAL primitives.tenant = '<tenant>'`` as text, for standard strings."""
    text = begin_statement(tenant).as_string(None)  # validates; the literal needs no connection
    return text


def _begin(conn: Any, tenant: str) -> str:
    if conn.pgconn.parameter_status(b"standard_conforming_strings") == b"on":
        return _begin_text(tenant)
    return begin_statement(tenant).as_string(conn)


def _query(tenant: str, name: str, arguments: str, conn: Any) -> str:
    return f"{_begin(conn, tenant)}; EXECUTE {name}{arguments}{_END}"


def _rows_result(cursor: C) -> C:
    """Move ``cursor`` to the EXECUTE's result (the only one that returns rows)."""
    while cursor.pgresult is None or cursor.pgresult.status != ExecStatus.TUPLES_OK:
        if not cursor.nextset():
            raise psycopg.InterfaceError("the one-round-trip read returned no rows result")
    return cursor


def read_once(conn: psycopg.Connection[Any], tenant: str, statement: str,
              params: Mapping[str, Any] | None) -> psycopg.Cursor[Any] | None:
    """Run the read ``statement`` for ``tenant`` in one round trip; a cursor on its rows.

    ``None`` when it cannot go this way (see the module docstring): the caller runs it in
    :func:`~primitives.db.tenant_transaction`. Errors come out as
    :func:`~primitives.db.translate_error` makes them, with the transaction rolled back.
    """
    form = server_form(statement)
    if form is None or not _fits(conn, tenant, params):
        return None
    base, text, order = form
    assert params is not None
    prepared = _prepared_form(conn, text, order, base, params)
    if prepared is None:
        return None
    name, prepare = prepared
    if name in _unfit:
        return None
    query = _query(tenant, name, _arguments(conn, order, params), conn)
    for attempt in (1, 2):
        if not _is_prepared(conn, name):
            try:
                conn.execute(prepare)
            except psycopg.Error:
                _unfit.add(name)  # the server cannot plan it with these types
                return None
            _mark(conn, name, True)
        cursor = conn.cursor()
        try:
            cursor.execute(query)
            return _rows_result(cursor)
        except psycopg.Error as err:
            if conn.info.transaction_status != TransactionStatus.IDLE:
                try:
                    conn.execute(_ROLLBACK)
                except psycopg.Error:
                    pass  # the connection is gone; the server rolled back already
            if err.sqlstate == _UNDEFINED_STATEMENT and attempt == 1:
                _mark(conn, name, False)  # the session lost it (DISCARD ALL): prepare again
                continue
            raise translate_error(err, tenant=tenant) from err
    return None  # pragma: no cover - the loop returns or raises


async def aread_once(conn: psycopg.AsyncConnection[Any], tenant: str, statement: str,
                     params: Mapping[str, Any] | None) -> psycopg.AsyncCursor[Any] | None:
    """The async twin of :func:`read_once`: same statements, same fallbacks, same errors."""
    form = server_form(statement)
    if form is None or not _fits(conn, tenant, params):
        return None
    base, text, order = form
    assert params is not None
    prepared = _prepared_form(conn, text, order, base, params)
    if prepared is None:
        return None
    name, prepare = prepared
    if name in _unfit:
        return None
    query = _query(tenant, name, _arguments(conn, order, params), conn)
    for attempt in (1, 2):
        if not _is_prepared(conn, name):
            try:
                await conn.execute(prepare)
            except psycopg.Error:
                _unfit.add(name)
                return None
            _mark(conn, name, True)
        cursor = conn.cursor()
        try:
            await cursor.execute(query)
            return _rows_result(cursor)
        except psycopg.Error as err:
            if conn.info.transaction_status != TransactionStatus.IDLE:
                try:
                    await conn.execute(_ROLLBACK)
                except psycopg.Error:
                    pass
            if err.sqlstate == _UNDEFINED_STATEMENT and attempt == 1:
                _mark(conn, name, False)
                continue
            raise translate_error(err, tenant=tenant) from err
    return None  # pragma: no cover


# -- a whole write transaction in as few messages as it has statements ---------------------------
class OnceTransaction:
    """A tenant transaction whose ``BEGIN; SET LOCAL`` travels with its first statement and whose
    ``COMMIT; RESET ALL`` travels with the statement marked ``last``.

    Each statement goes as ``EXECUTE`` of a statement prepared on the session (see
    :func:`read_once`), so a one-statement write is one round trip. A statement that cannot
    be prepared runs as an ordinary bound statement inside the same transaction. Use
    :meth:`rollback` on any error; :meth:`commit` when the operation ends (a no-op if the
    ``last`` statement committed already).
    """

    def __init__(self, conn: psycopg.Connection[Any], tenant: str) -> None:
        if not conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE:
            raise psycopg.ProgrammingError(
                "OnceTransaction needs an idle autocommit connection (it opens the transaction)")
        self.conn, self.tenant = conn, tenant
        self.begin = _begin(conn, tenant)  # validates the tenant
        self.open = False
        self.committed = False

    def execute(self, statement: str, params: Mapping[str, Any] | None, *,
                last: bool = False) -> psycopg.Cursor[Any]:
        """Run one statement of the transaction; a cursor on its result."""
        if self.committed:
            raise psycopg.ProgrammingError("this tenant transaction has committed already")
        conn = self.conn
        prepared = _ensure_prepared(conn, statement, params)
        if prepared is None:
            if not self.open:
                conn.execute(self.begin)
                self.open = True
            cursor = conn.execute(statement, params)
            if last:
                conn.execute(_END.removeprefix("; "))
                self.committed = True
            return cursor
        name, arguments = prepared
        head = f"{self.begin}; " if not self.open else ""
        tail = _END if last else ""
        cursor = conn.cursor()
        cursor.execute(f"{head}EXECUTE {name}{arguments}{tail}")
        self.open, self.committed = True, last
        for _ in range(2 if head else 0):  # past BEGIN and SET LOCAL to the EXECUTE's result
            cursor.nextset()
        return cursor

    def commit(self) -> None:
        if self.open and not self.committed:
            self.conn.execute(_END.removeprefix("; "))
        self.committed = True

    def rollback(self) -> None:
        if self.conn.info.transaction_status != TransactionStatus.IDLE:
            try:
                self.conn.execute(_ROLLBACK)
            except psycopg.Error:
                pass  # the connection is gone; the server rolled back already


def _ensure_prepared(conn: psycopg.Connection[Any], statement: str,
                     params: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """``(prepared name, literal arguments)`` for ``statement`` on ``conn``, or ``None``."""
    form = server_form(statement)
    if form is None or not isinstance(params, Mapping):
        return None
    base, text, order = form
    prepared = _prepared_form(conn, text, order, base, params)
    if prepared is None:
        return None
    name, prepare = prepared
    if name in _unfit:
        return None
    if not _is_prepared(conn, name):
        idle = conn.info.transaction_status == TransactionStatus.IDLE
        try:
            conn.execute(prepare)  # session-level: it survives the transaction's end
        except psycopg.Error:
            if not idle:
                # Inside the transaction the failed PREPARE aborted it. Its types are those
                # psycopg would bind, so the statement itself would have failed the same way.
                raise
            _unfit.add(name)
            return None
        _mark(conn, name, True)
    return name, _arguments(conn, order, params)


class AsyncOnceTransaction:
    """The async twin of :class:`OnceTransaction`."""

    def __init__(self, conn: psycopg.AsyncConnection[Any], tenant: str) -> None:
        if not conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE:
            raise psycopg.ProgrammingError(
                "OnceTransaction needs an idle autocommit connection (it opens the transaction)")
        self.conn, self.tenant = conn, tenant
        self.begin = _begin(conn, tenant)
        self.open = False
        self.committed = False

    async def execute(self, statement: str, params: Mapping[str, Any] | None, *,
                      last: bool = False) -> psycopg.AsyncCursor[Any]:
        if self.committed:
            raise psycopg.ProgrammingError("this tenant transaction has committed already")
        conn = self.conn
        prepared = await _aensure_prepared(conn, statement, params)
        if prepared is None:
            if not self.open:
                await conn.execute(self.begin)
                self.open = True
            cursor = await conn.execute(statement, params)
            if last:
                await conn.execute(_END.removeprefix("; "))
                self.committed = True
            return cursor
        name, arguments = prepared
        head = f"{self.begin}; " if not self.open else ""
        tail = _END if last else ""
        cursor = conn.cursor()
        await cursor.execute(f"{head}EXECUTE {name}{arguments}{tail}")
        self.open, self.committed = True, last
        for _ in range(2 if head else 0):
            cursor.nextset()
        return cursor

    async def commit(self) -> None:
        if self.open and not self.committed:
            await self.conn.execute(_END.removeprefix("; "))
        self.committed = True

    async def rollback(self) -> None:
        if self.conn.info.transaction_status != TransactionStatus.IDLE:
            try:
                await self.conn.execute(_ROLLBACK)
            except psycopg.Error:
                pass


async def _aensure_prepared(conn: psycopg.AsyncConnection[Any], statement: str,
                            params: Mapping[str, Any] | None) -> tuple[str, str] | None:
    form = server_form(statement)
    if form is None or not isinstance(params, Mapping):
        return None
    base, text, order = form
    prepared = _prepared_form(conn, text, order, base, params)
    if prepared is None:
        return None
    name, prepare = prepared
    if name in _unfit:
        return None
    if not _is_prepared(conn, name):
        idle = conn.info.transaction_status == TransactionStatus.IDLE
        try:
            await conn.execute(prepare)
        except psycopg.Error:
            if not idle:
                raise
            _unfit.add(name)
            return None
        _mark(conn, name, True)
    return name, _arguments(conn, order, params)
