"""Tenant transactions in as few messages as they have statements.

A statement through :func:`tenant_transaction` costs three round trips (``BEGIN; SET LOCAL``,
the statement, ``COMMIT; RESET ALL``). :class:`OnceTransaction` sends ``BEGIN; SET LOCAL``
with the first statement and ``COMMIT; RESET ALL`` with the one marked last, so a
one-statement read or write (:func:`read_once`, ``Engine.observe``) is one query string::

    BEGIN; SET LOCAL primitives.tenant = '<tenant>'; EXECUTE <name>(<literals>); COMMIT; RESET ALL

``<name>`` is a server-side prepared statement made once per connection with ``PREPARE``
(so the plan is cached as with psycopg's own prepared statements), its parameter types
declared as psycopg would send them (``unknown`` for text and NULL, so the server infers
those from context exactly as it does for a bound parameter); the parameters travel as
literals quoted by psycopg. A statement run with other parameter types gets a prepared
statement of its own. The tenant rule is unchanged: it is set with ``SET LOCAL`` inside an
explicit transaction, and the session is reset afterwards.

Only statements written with named placeholders (``%(name)s``) are prepared. One the server
cannot prepare, or with a parameter of a type psycopg cannot name, runs as an ordinary bound
statement inside the same transaction: nothing is lost, only the saved round trips. A session
that lost its statement, or holds one whose result type a migration changed, prepares it
again (``OnceTransaction._sent``).

Example::

    cursor = read_once(conn, "acme", "SELECT * FROM notes WHERE id = %(id)s", {"id": 7})
    rows = cursor.fetchall()
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import select
import threading
import weakref
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any, Literal, NamedTuple, TypeVar
from uuid import UUID

import psycopg
from psycopg import errors, sql
from psycopg.abc import Transformer as RowLoader
from psycopg.adapt import PyFormat, Transformer
from psycopg.pq import ExecStatus, TransactionStatus
from psycopg.pq.abc import PGresult
from psycopg.rows import tuple_row
from psycopg.types.json import Jsonb

from primitives.db._tenant import begin_statement, translate_error

__all__ = ["AsyncOnceTransaction", "OnceTransaction", "aread_once", "read_once", "server_form"]


T = TypeVar("T")

_PLACEHOLDER = re.compile(r"%%|%\((\w+)\)s|%s")
_END = "; COMMIT; RESET ALL"
_ROLLBACK = "ROLLBACK; RESET ALL"
_UNDEFINED_STATEMENT = "26000"  # invalid_sql_statement_name: not prepared on this session
_PLAN_CHANGED = "0A000"
"""feature_not_supported, what ``EXECUTE`` raises as "cached plan must not change result
type" when a migration changed the type of a column the statement returns after the session
prepared it. The session keeps the old statement until it is deallocated."""
_PREPARE_AGAIN = frozenset({_UNDEFINED_STATEMENT, _PLAN_CHANGED})
_IS_PREPARED = "SELECT 1 FROM pg_catalog.pg_prepared_statements WHERE name = %s"

# Per connection, the names prepared on its session. Connections are not hashable by
# value, so the map holds them weakly by identity; a closed and reopened connection is a
# new object with an empty set.
_prepared: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
_unfit: set[str] = set()
# Per connection, the names whose statement on the session is out of date (its result type
# changed since it was prepared): deallocated before they are prepared again.
_stale: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
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
    if kind is list and all(type(item) is str for item in value):
        return "unknown"  # psycopg sends a list of text (or an empty list) untyped
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


_FORMS: dict[tuple[str, str], tuple[str, str]] = {}
"""(statement base name, parameter types) -> (prepared name, PREPARE text), made once."""


class _LazyTransformer:
    """psycopg's adapter lookup, made only when a parameter is not of a common type."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._transformer: Any = None

    def get_dumper(self, value: Any, format: PyFormat) -> Any:
        if self._transformer is None:
            self._transformer = Transformer(self.conn)
        return self._transformer.get_dumper(value, format)


def _prepared_form(conn: Any, text: str, base: str, types: list[str]) -> tuple[str, str]:
    """``(name, PREPARE statement)`` for these parameter types, made once per signature."""
    signature = ",".join(types)
    known = _FORMS.get((base, signature))
    if known is not None:
        return known
    name = f"{base}_{hashlib.sha256(signature.encode()).hexdigest()[:8]}"
    # The type names come from psycopg's type registry, the text from a statement the engine
    # composed with psycopg.sql and rendered: both are SQL already, not values.
    declared = sql.SQL("({})").format(sql.SQL(signature)) if types else sql.SQL("")
    prepare = sql.SQL("PREPARE {}{} AS {}").format(sql.Identifier(name), declared, sql.SQL(text))
    form = (name, prepare.as_string(conn))
    if len(_FORMS) >= 4096:
        _FORMS.clear()
    _FORMS[(base, signature)] = form
    return form


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
        if type(value.obj) is dict and not value.obj and value.dumps is None:
            return "'{}'::jsonb"  # an empty object, as json.dumps writes it
        text = (value.dumps or json.dumps)(value.obj)
        if "\x00" not in text:
            return _quote_text(text) + "::jsonb"
    if kind is list and plain_strings and all(type(item) is str and "\x00" not in item
                                              for item in value):
        return _quote_text(_text_array(value))
    return sql.Literal(value).as_string(conn)


def _text_array(items: list[str]) -> str:
    """A list of text in an array's text form, written as psycopg writes it (so the statement
    reads the same text whether it was bound or inlined): an element is double-quoted, its
    quotes and backslashes escaped, when it is empty, is the word NULL, or holds a brace,
    comma, quote, backslash or white space."""
    return "{" + ",".join(
        '"' + item.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if not item or _NEEDS_QUOTES.search(item) or item.lower() == "null" else item
        for item in items) + "}"


_NEEDS_QUOTES = re.compile(
    r'[{},"\\ \t\n\r\f\v\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]')
"""Characters that make an array element need quotes (ASCII white space and the Unicode
spaces psycopg also quotes)."""


def _typed_literals(conn: Any, order: tuple[str, ...],
                    params: Mapping[str, Any]) -> tuple[list[str], list[str]] | None:
    """Each parameter's declared type (:func:`_type_name`) and literal (:func:`_literal`) in
    ``$`` order, in one pass: text and NULL, the most common, without a call each. ``None``
    when a parameter is missing or of a type psycopg cannot name."""
    plain = conn.pgconn.parameter_status(b"standard_conforming_strings") == b"on"
    transformer = _LazyTransformer(conn)
    types: list[str] = []
    literals: list[str] = []
    for key in order:
        try:
            value = params[key]
        except KeyError:
            return None
        if type(value) is str and plain and "\x00" not in value:
            types.append("unknown")
            literals.append(_quote_text(value))
        elif value is None:
            types.append("unknown")
            literals.append("NULL")
        else:
            name = _type_name(conn, transformer, value)
            if name is None:
                return None
            types.append(name)
            literals.append(_literal(conn, value, plain))
    return types, literals


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


def _forget(conn: Any, name: str, err: psycopg.Error) -> None:
    """After ``err`` from executing ``name``: when the session's statement is out of date,
    it is no longer taken as prepared, and is deallocated before it is prepared again."""
    if err.sqlstate == _PLAN_CHANGED:
        _mark(conn, name, False)
        with _lock:
            _stale.setdefault(conn, set()).add(name)


def _is_stale(conn: Any, name: str) -> bool:
    with _lock:
        return name in _stale.get(conn, ())


def _unstale(conn: Any, name: str) -> None:
    with _lock:
        _stale.get(conn, set()).discard(name)


def _deallocate(name: str) -> sql.Composed:
    return sql.SQL("DEALLOCATE {}").format(sql.Identifier(name))


@lru_cache(maxsize=4096)
def _begin(tenant: str) -> str:
    """``BEGIN; SET LOCAL primitives.tenant = <literal>`` as text, validated and built once per
    tenant (psycopg renders a literal with a backslash in the ``E''`` form, which reads the
    same whatever ``standard_conforming_strings`` is)."""
    return begin_statement(tenant).as_string(None)


def read_once(conn: psycopg.Connection[Any], tenant: str, statement: str,
              params: Mapping[str, Any] | None) -> psycopg.Cursor[Any]:
    """Run the one-statement read ``statement`` for ``tenant`` as a whole tenant transaction
    in one message; a cursor on its rows. ``conn`` must be an idle autocommit connection.
    Errors come out as :func:`~primitives.db.translate_error` makes them, with the
    transaction rolled back and the session reset."""
    tx = OnceTransaction(conn, tenant)
    try:
        return tx.execute(statement, params, last=True)
    except psycopg.Error as err:
        tx.rollback()
        raise translate_error(err, tenant=tenant) from err


async def aread_once(conn: psycopg.AsyncConnection[Any], tenant: str, statement: str,
                     params: Mapping[str, Any] | None) -> psycopg.AsyncCursor[Any]:
    """The async twin of :func:`read_once`."""
    tx = AsyncOnceTransaction(conn, tenant)
    try:
        return await tx.execute(statement, params, last=True)
    except psycopg.Error as err:
        await tx.rollback()
        raise translate_error(err, tenant=tenant) from err


# -- a whole write transaction in as few messages as it has statements ---------------------------
class _Prepared(NamedTuple):
    """A statement's session-prepared form for one call: the ``PREPARE`` that makes it, the
    name to ``EXECUTE`` and this call's arguments as literals."""

    name: str
    prepare: str
    arguments: str


def _prepared_call(conn: Any, statement: str,
                   params: Mapping[str, Any] | None) -> _Prepared | None:
    """``statement``'s prepared form for these parameters, or ``None`` when it runs bound."""
    form = server_form(statement)
    if form is None or not isinstance(params, Mapping):
        return None
    base, text, order = form
    typed = _typed_literals(conn, order, params)
    if typed is None:
        return None
    types, literals = typed
    name, prepare = _prepared_form(conn, text, base, types)
    if name in _unfit:
        return None
    # the literals are SQL already (quoted above or by psycopg): joined as text on the hot path
    return _Prepared(name, prepare, f"({', '.join(literals)})" if literals else "")


def _message(begin: str | None, prepared: _Prepared, last: bool) -> str:
    # Joined as text on the hot path: each piece is SQL already (BEGIN and the tenant literal
    # rendered by psycopg.sql, a hex name of ours, arguments quoted as literals).
    head = f"{begin}; " if begin is not None else ""
    return f"{head}EXECUTE {prepared.name}{prepared.arguments}{_END if last else ''}"


_COMMIT = _END.removeprefix("; ")

NOT_SENT: Any = object()
"""What ``fetch_prepared`` returns when the call must go through ``fetch`` instead."""

Fetch = Literal["none", "one", "all"]
"""What :meth:`OnceTransaction.fetch` returns: nothing, one row (or ``None``), every row."""

_OK = (ExecStatus.TUPLES_OK, ExecStatus.COMMAND_OK, ExecStatus.EMPTY_QUERY)


def _exchange(conn: psycopg.Connection[Any], message: bytes) -> list[PGresult]:
    """Send ``message`` (a simple query of several statements) and read all its results
    straight from libpq, as psycopg's cursor would but without building one; raise the
    error of the first failed statement (the server ran none after it).

    The wait for the server is ``select`` on the socket, outside the GIL. Interrupted (Ctrl-C),
    the query is cancelled and its results drained before the interrupt goes on, so the
    connection is left idle or in a failed transaction, never mid-query."""
    pgconn = conn.pgconn
    results: list[PGresult] = []
    with conn.lock:
        pgconn.send_query(message)
        try:
            while pgconn.flush():
                select.select([], [pgconn.socket], [])
            while True:
                # The socket is read only once select says there is something to read: a read
                # before the reply (or between results already buffered) is a wasted call.
                if pgconn.is_busy():  # the next result is not all here yet
                    select.select([pgconn.socket], [], [])
                    pgconn.consume_input()
                    continue
                result = pgconn.get_result()
                if result is None:  # the message's last result was read
                    break
                results.append(result)
        except BaseException:
            if pgconn.transaction_status == TransactionStatus.ACTIVE:
                _cancel_and_drain(conn)
            raise
    return _checked(conn, results)


def _checked(conn: Any, results: list[PGresult]) -> list[PGresult]:
    """``results``, or the error of the first that failed, as psycopg's cursor raises it."""
    for result in results:
        if result.status not in _OK:
            if result.status == ExecStatus.FATAL_ERROR:
                raise errors.error_from_result(result, encoding=conn.info.encoding)
            raise psycopg.InternalError(
                f"unexpected result status {ExecStatus(result.status).name} from the message")
    return results


async def _aexchange(conn: psycopg.AsyncConnection[Any], message: bytes) -> list[PGresult]:
    """The async twin of :func:`_exchange`: the waits go through the event loop (a reader or
    writer on the socket), and a cancelled task cancels the query and drains it."""
    pgconn = conn.pgconn
    results: list[PGresult] = []
    async with conn.lock:
        pgconn.send_query(message)
        try:
            while pgconn.flush():
                await _socket_ready(pgconn.socket, write=True)
            while True:
                if pgconn.is_busy():  # as in _exchange: read only what the socket has
                    await _socket_ready(pgconn.socket)
                    pgconn.consume_input()
                    continue
                result = pgconn.get_result()
                if result is None:
                    break
                results.append(result)
        except BaseException:  # CancelledError included
            if pgconn.transaction_status == TransactionStatus.ACTIVE:
                await _acancel_and_drain(conn)
            raise
    return _checked(conn, results)


async def _socket_ready(fd: int, *, write: bool = False) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    if write:
        loop.add_writer(fd, wake)
    else:
        loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        if write:
            loop.remove_writer(fd)
        else:
            loop.remove_reader(fd)


async def _acancel_and_drain(conn: psycopg.AsyncConnection[Any]) -> None:
    pgconn = conn.pgconn
    try:
        await conn.cancel_safe(timeout=5.0)
        while True:
            pgconn.consume_input()
            if pgconn.is_busy():
                await asyncio.wait_for(_socket_ready(pgconn.socket), timeout=5.0)
                continue
            if pgconn.get_result() is None:
                break
    except BaseException:  # the connection is beyond use; the pool discards it
        pass


def _cancel_and_drain(conn: psycopg.Connection[Any]) -> None:
    pgconn = conn.pgconn
    mode = pgconn.nonblocking
    try:
        conn.cancel_safe(timeout=5.0)
        pgconn.nonblocking = 0  # a blocking read of what is left
        while pgconn.get_result() is not None:
            pass
    except Exception:  # the connection is beyond use; the pool discards it
        pass
    finally:
        pgconn.nonblocking = mode


_LOADER_ATTRIBUTE = "_primitives_row_loader"


def _row_loader(conn: Any) -> RowLoader:
    """The connection's row loader, made once and kept on the connection: a new one would
    look up the loader of every column's type again for each result (about 12 of 25 us per
    row read). Kept on the connection itself, not in a weak map, because the loader refers
    to its connection (a weak map could never let either go; the pair is collected with the
    connection). Adapters registered on the connection after its first result here are not
    seen for types it has loaded already; the engine registers its own when the pool opens
    the connection."""
    loader: RowLoader | None = getattr(conn, _LOADER_ATTRIBUTE, None)
    if loader is None:
        loader = Transformer(conn)
        setattr(conn, _LOADER_ATTRIBUTE, loader)
    return loader


def _rows(conn: Any, result: PGresult, fetch: Fetch) -> Any:
    """``result``'s rows as tuples, loaded by the connection's adapters (as a cursor would)."""
    if fetch == "none":
        return None
    loader = _row_loader(conn)
    loader.set_pgresult(result)
    if fetch == "one":
        return loader.load_row(0, tuple) if result.ntuples else None
    return loader.load_rows(0, result.ntuples, tuple)


async def afetch_rows(cursor: psycopg.AsyncCursor[Any], fetch: Fetch) -> Any:
    """The async twin of :func:`fetch_rows`."""
    if fetch == "one":
        return await cursor.fetchone()
    if fetch == "all":
        return await cursor.fetchall()
    return None


def fetch_rows(cursor: psycopg.Cursor[Any], fetch: Fetch) -> Any:
    """A cursor's rows as ``fetch`` asks: one (or ``None``), all, or nothing."""
    if fetch == "one":
        return cursor.fetchone()
    if fetch == "all":
        return cursor.fetchall()
    return None


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
        self.begin = _begin(tenant)  # validates the tenant
        self.open = False
        self.committed = False

    def execute(self, statement: str, params: Mapping[str, Any] | None, *,
                last: bool = False) -> psycopg.Cursor[Any]:
        """Run one statement of the transaction; a cursor on its result."""
        if self.committed:
            raise psycopg.ProgrammingError("this tenant transaction has committed already")
        conn = self.conn
        prepared = _prepared_call(conn, statement, params)
        if prepared is not None and not self._ensure(prepared):
            prepared = None
        if prepared is None:
            if not self.open:
                conn.execute(self.begin)
                self.open = True
            cursor = conn.execute(statement, params)
            if last:
                conn.execute(_COMMIT)
                self.committed = True
            return cursor
        first = not self.open
        message = _message(self.begin if first else None, prepared, last)

        def send() -> psycopg.Cursor[Any]:
            cursor = conn.cursor()
            # prepare=False: the text differs on every call (its arguments are in it) and holds
            # several statements, so psycopg's own prepared-statement cache could never use it.
            cursor.execute(message, prepare=False)
            return cursor

        cursor = self._sent(prepared, first, send)
        self.open, self.committed = True, last
        for _ in range(2 if first else 0):  # past BEGIN and SET LOCAL to the EXECUTE's result
            cursor.nextset()
        return cursor

    def fetch(self, statement: str, params: Mapping[str, Any] | None, *,
              last: bool = False, fetch: Fetch = "none") -> Any:
        """Run one statement of the transaction and return its rows as tuples (``fetch="one"``:
        the first row or ``None``; ``"all"``: a list; ``"none"``: nothing).

        The same messages as :meth:`execute`; a prepared statement's message is exchanged with
        libpq directly, without a cursor, which saves most of the client's CPU per round trip
        (about 80 of 320 us for a write, measured). A connection with a row factory of its
        own goes through :meth:`execute`, so its rows keep their shape."""
        conn = self.conn
        if conn.row_factory is not tuple_row:
            return fetch_rows(self.execute(statement, params, last=last), fetch)
        if self.committed:
            raise psycopg.ProgrammingError("this tenant transaction has committed already")
        prepared = _prepared_call(conn, statement, params)
        if prepared is not None and not self._ensure(prepared):
            prepared = None
        if prepared is None:
            return fetch_rows(self.execute(statement, params, last=last), fetch)
        return self._fetch(prepared, last, fetch)

    def fetch_prepared(self, prepared: _Prepared, *, last: bool = False,
                       fetch: Fetch = "none") -> Any:
        """:meth:`fetch` of a call its caller put in prepared form already (its arguments
        written as literals, as :func:`_prepared_call` writes them). :data:`NOT_SENT` when it
        cannot go that way (a connection with a row factory of its own, a statement the
        server would not prepare): nothing was sent, and the caller runs the statement
        through :meth:`fetch` instead."""
        if self.committed:
            raise psycopg.ProgrammingError("this tenant transaction has committed already")
        if self.conn.row_factory is not tuple_row or not self._ensure(prepared):
            return NOT_SENT
        return self._fetch(prepared, last, fetch)

    def _fetch(self, prepared: _Prepared, last: bool, fetch: Fetch) -> Any:
        conn = self.conn
        first = not self.open
        message = _message(self.begin if first else None, prepared, last).encode(
            conn.info.encoding)
        results = self._sent(prepared, first, lambda: _exchange(conn, message))
        self.open, self.committed = True, last
        return _rows(conn, results[2 if first else 0], fetch)

    def _sent(self, prepared: _Prepared, first: bool, send: Callable[[], T]) -> T:
        """``send()`` of a message that executes ``prepared``. When the session lost the
        statement (DISCARD ALL, a pooler) or holds it with a result type that a migration has
        changed since, and nothing else ran in this transaction before it: roll back,
        prepare it again and send the same message once more. Later in a transaction the
        error stands (the transaction's earlier work is lost with it, so the caller decides)
        and the next transaction prepares the statement afresh."""
        try:
            return send()
        except psycopg.Error as err:
            if err.sqlstate not in _PREPARE_AGAIN:
                raise
            _forget(self.conn, prepared.name, err)
            if not first:
                raise
            self.rollback()
            _mark(self.conn, prepared.name, False)
            if not self._ensure(prepared):
                raise
            return send()

    def _ensure(self, prepared: _Prepared) -> bool:
        """Prepare on the session unless done; False if the statement must run bound."""
        conn, name = self.conn, prepared.name
        if _is_prepared(conn, name):
            return True
        if _is_stale(conn, name):  # the out-of-date statement goes first, if still there
            if conn.execute(_IS_PREPARED, (name,), prepare=False).fetchone():
                conn.execute(_deallocate(name))
            _unstale(conn, name)
        idle = conn.info.transaction_status == TransactionStatus.IDLE
        try:
            conn.execute(prepared.prepare)  # session-level: survives the transaction
        except psycopg.Error:
            if not idle:
                # Inside the transaction the failed PREPARE aborted it. Its types are those
                # psycopg would bind, so the statement itself would have failed the same way.
                raise
            _unfit.add(prepared.name)  # runs bound from now on
            return False
        _mark(self.conn, prepared.name, True)
        return True

    def commit(self) -> None:
        if self.open and not self.committed:
            self.conn.execute(_COMMIT)
        self.committed = True

    def rollback(self) -> None:
        if self.conn.info.transaction_status != TransactionStatus.IDLE:
            try:
                self.conn.execute(_ROLLBACK)
            except psycopg.Error:
                pass  # the connection is gone; the server rolled back already


class AsyncOnceTransaction:
    """The async twin of :class:`OnceTransaction`: the same messages, awaited."""

    def __init__(self, conn: psycopg.AsyncConnection[Any], tenant: str) -> None:
        if not conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE:
            raise psycopg.ProgrammingError(
                "OnceTransaction needs an idle autocommit connection (it opens the transaction)")
        self.conn, self.tenant = conn, tenant
        self.begin = _begin(tenant)
        self.open = False
        self.committed = False

    async def execute(self, statement: str, params: Mapping[str, Any] | None, *,
                      last: bool = False) -> psycopg.AsyncCursor[Any]:
        if self.committed:
            raise psycopg.ProgrammingError("this tenant transaction has committed already")
        conn = self.conn
        prepared = _prepared_call(conn, statement, params)
        if prepared is not None and not await self._ensure(prepared):
            prepared = None
        if prepared is None:
            if not self.open:
                await conn.execute(self.begin)
                self.open = True
            cursor = await conn.execute(statement, params)
            if last:
                await conn.execute(_COMMIT)
                self.committed = True
            return cursor
        first = not self.open
        message = _message(self.begin if first else None, prepared, last)

        async def send() -> psycopg.AsyncCursor[Any]:
            cursor = conn.cursor()
            await cursor.execute(message, prepare=False)
            return cursor

        cursor = await self._sent(prepared, first, send)
        self.open, self.committed = True, last
        for _ in range(2 if first else 0):
            cursor.nextset()
        return cursor

    async def fetch(self, statement: str, params: Mapping[str, Any] | None, *,
                    last: bool = False, fetch: Fetch = "none") -> Any:
        """The async twin of :meth:`OnceTransaction.fetch`."""
        conn = self.conn
        if conn.row_factory is not tuple_row:
            return await afetch_rows(await self.execute(statement, params, last=last), fetch)
        if self.committed:
            raise psycopg.ProgrammingError("this tenant transaction has committed already")
        prepared = _prepared_call(conn, statement, params)
        if prepared is not None and not await self._ensure(prepared):
            prepared = None
        if prepared is None:
            return await afetch_rows(await self.execute(statement, params, last=last), fetch)
        return await self._fetch(prepared, last, fetch)

    async def fetch_prepared(self, prepared: _Prepared, *, last: bool = False,
                             fetch: Fetch = "none") -> Any:
        """The async twin of :meth:`OnceTransaction.fetch_prepared`."""
        if self.committed:
            raise psycopg.ProgrammingError("this tenant transaction has committed already")
        if self.conn.row_factory is not tuple_row or not await self._ensure(prepared):
            return NOT_SENT
        return await self._fetch(prepared, last, fetch)

    async def _fetch(self, prepared: _Prepared, last: bool, fetch: Fetch) -> Any:
        conn = self.conn
        first = not self.open
        message = _message(self.begin if first else None, prepared, last).encode(
            conn.info.encoding)
        results = await self._sent(prepared, first, lambda: _aexchange(conn, message))
        self.open, self.committed = True, last
        return _rows(conn, results[2 if first else 0], fetch)

    async def _sent(self, prepared: _Prepared, first: bool,
                    send: Callable[[], Awaitable[T]]) -> T:
        """The async twin of :meth:`OnceTransaction._sent`."""
        try:
            return await send()
        except psycopg.Error as err:
            if err.sqlstate not in _PREPARE_AGAIN:
                raise
            _forget(self.conn, prepared.name, err)
            if not first:
                raise
            await self.rollback()
            _mark(self.conn, prepared.name, False)
            if not await self._ensure(prepared):
                raise
            return await send()

    async def _ensure(self, prepared: _Prepared) -> bool:
        conn, name = self.conn, prepared.name
        if _is_prepared(conn, name):
            return True
        if _is_stale(conn, name):
            cursor = await conn.execute(_IS_PREPARED, (name,), prepare=False)
            if await cursor.fetchone():
                await conn.execute(_deallocate(name))
            _unstale(conn, name)
        idle = conn.info.transaction_status == TransactionStatus.IDLE
        try:
            await conn.execute(prepared.prepare)
        except psycopg.Error:
            if not idle:
                raise
            _unfit.add(prepared.name)
            return False
        _mark(self.conn, prepared.name, True)
        return True

    async def commit(self) -> None:
        if self.open and not self.committed:
            await self.conn.execute(_COMMIT)
        self.committed = True

    async def rollback(self) -> None:
        if self.conn.info.transaction_status != TransactionStatus.IDLE:
            try:
                await self.conn.execute(_ROLLBACK)
            except psycopg.Error:
                pass
