"""Tenant transactions in as few round trips as they have statements, every value bound.

A statement through :func:`tenant_transaction` costs three round trips (``BEGIN`` and the
tenant, the statement, ``COMMIT; RESET ALL``). :class:`OnceTransaction` queues ``BEGIN`` and
the tenant with the first statement and ``COMMIT; RESET ALL`` with the one marked last, in
libpq's pipeline (:mod:`primitives.db._pipeline`), so a one-statement read or write
(:func:`read_once`, ``Engine.observe``) is one round trip::

    BEGIN | SELECT set_config('primitives.tenant', $1, true) | EXECUTE <name>($1..$n) | COMMIT | RESET ALL

``<name>`` is a server-side prepared statement made once per connection with ``PREPARE``
(so the plan is cached as with psycopg's own prepared statements), its parameter types
declared as psycopg would send them (``unknown`` for text and NULL, so the server infers
those from context exactly as it does for a bound parameter). The tenant and every parameter
travel as bind values in text form: no statement text the server sees, logs or shows in
``pg_stat_activity`` carries a tenant's value. A statement run with other parameter types
gets a prepared statement of its own. The tenant is set for the transaction only
(``set_config(..., true)``) inside an explicit transaction, and the session is reset
afterwards.

Only statements written with named placeholders (``%(name)s``) are prepared. One the server
cannot prepare, or with a parameter of a type psycopg cannot name, runs as an ordinary bound
statement inside the same transaction: nothing is lost, only the saved client work. A session
that lost its statement, or holds one whose result type a migration changed, prepares it
again (``OnceTransaction._sent``).

Example::

    cursor = read_once(conn, "acme", "SELECT * FROM notes WHERE id = %(id)s", {"id": 7})
    rows = cursor.fetchall()
"""

from __future__ import annotations

import hashlib
import re
import threading
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any, Literal, NamedTuple, TypeVar
from uuid import UUID

import psycopg
from psycopg import sql
from psycopg.abc import Transformer as RowLoader
from psycopg.adapt import PyFormat, Transformer
from psycopg.pq import TransactionStatus
from psycopg.pq.abc import PGresult
from psycopg.rows import tuple_row
from psycopg.types.json import Jsonb

from primitives.db._pipeline import (
    SET_TENANT,
    SET_TENANT_BOUND,
    Command,
    aexchange,
    aexchange_each,
    begin,
    exchange,
)
from primitives.db._tenant import check_tenant, translate_error

__all__ = ["NOT_SENT", "AsyncOnceTransaction", "OnceCall", "OnceTransaction", "afetch_each",
           "aread_once", "read_once", "server_form"]

T = TypeVar("T")

_PLACEHOLDER = re.compile(r"%%|%\((\w+)\)s|%s")
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


def _typed_values(conn: Any, order: tuple[str, ...],
                  params: Mapping[str, Any]) -> tuple[list[str], list[bytes | None]] | None:
    """Each parameter's declared type (:func:`_type_name`) and its value in text form, in
    ``$`` order, in one pass: text and NULL, the most common, without a call each. ``None``
    when a parameter is missing, is text with a NUL (libpq would cut it there; the bound path
    refuses it as psycopg does) or is of a type psycopg cannot name."""
    encoding = conn.info.encoding
    transformer = _LazyTransformer(conn)
    types: list[str] = []
    values: list[bytes | None] = []
    for key in order:
        try:
            value = params[key]
        except KeyError:
            return None
        if type(value) is str:
            if "\x00" in value:
                return None
            types.append("unknown")
            values.append(value.encode(encoding))
        elif value is None:
            types.append("unknown")
            values.append(None)
        elif type(value) is list and all(type(item) is str and "\x00" not in item
                                         for item in value):
            types.append("unknown")  # psycopg sends a list of text (or an empty one) untyped
            values.append(_text_array(value).encode(encoding))
        else:
            name = _type_name(conn, transformer, value)
            if name is None:
                return None
            text = bytes(transformer.get_dumper(value, PyFormat.TEXT).dump(value))
            if b"\x00" in text:
                return None
            types.append(name)
            values.append(text)
    return types, values



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


def _lost(conn: Any, *names: str) -> None:
    """The session may have lost ``names`` (or holds an out-of-date copy): each is prepared
    again, after a deallocation if the session still has it."""
    with _lock:
        prepared = _prepared.get(conn, set())
        stale = _stale.setdefault(conn, set())
        for name in names:
            prepared.discard(name)
            stale.add(name)


def _is_stale(conn: Any, name: str) -> bool:
    with _lock:
        return name in _stale.get(conn, ())


def _unstale(conn: Any, name: str) -> None:
    with _lock:
        _stale.get(conn, set()).discard(name)


def _deallocate(name: str) -> sql.Composed:
    return sql.SQL("DEALLOCATE {}").format(sql.Identifier(name))


def read_once(conn: psycopg.Connection[Any], tenant: str, statement: str,
              params: Mapping[str, Any] | None) -> psycopg.Cursor[Any]:
    """Run the one-statement read ``statement`` for ``tenant`` as a whole tenant transaction
    in one round trip; a cursor on its rows. ``conn`` must be an idle autocommit connection.
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


# -- a whole write transaction in as few round trips as it has statements -------------------------
class _Prepared(NamedTuple):
    """A statement's session-prepared form for one call: the ``PREPARE`` that makes it (text
    with ``$n`` placeholders and declared types, no values), the name to execute, and this
    call's values in text form, bound when it is executed."""

    name: str
    prepare: str
    values: tuple[bytes | None, ...]


def _prepared_call(conn: Any, statement: str,
                   params: Mapping[str, Any] | None) -> _Prepared | None:
    """``statement``'s prepared form for these parameters, or ``None`` when it runs bound
    through psycopg."""
    form = server_form(statement)
    if form is None or not isinstance(params, Mapping):
        return None
    base, text, order = form
    typed = _typed_values(conn, order, params)
    if typed is None:
        return None
    types, values = typed
    name, prepare = _prepared_form(conn, text, base, types)
    if name in _unfit:
        return None
    return _Prepared(name, prepare, tuple(values))


_TENANT = _Prepared("primitives_set_tenant",
                    "PREPARE primitives_set_tenant(text) AS " + SET_TENANT.decode(), ())
"""The tenant statement (:data:`~primitives.db._pipeline.SET_TENANT`) prepared once per
session, like the statements it opens transactions for: sent unnamed, the server parsed,
analysed and planned it again for every transaction (8% of an ``Engine.observe`` write's
server CPU, ``python -m bench.server_ab --message unnamed-tenant``). Its value is still bound,
and the transaction still sets it first."""

_END = (Command(b"COMMIT"), Command(b"RESET ALL"))
"""How a tenant transaction ends: every session setting goes back to its default, so nothing a
caller set on the connection (a tenant above all) outlives the transaction."""
_COMMIT = "COMMIT; RESET ALL"
_ROLLBACK = "ROLLBACK; RESET ALL"


def _commands(tenant: bytes | None, prepared: _Prepared, last: bool, *,
              tenant_prepared: bool = False) -> list[Command]:
    """``BEGIN`` and the tenant (when ``tenant`` is given: the transaction's first statement;
    with ``tenant_prepared``, through :data:`_TENANT`, prepared on the session), the prepared
    statement, and ``COMMIT; RESET ALL`` when it is the ``last``."""
    if tenant is None:
        commands = []
    elif tenant_prepared:
        commands = [Command(b"BEGIN"), Command(_TENANT.name.encode(), (tenant,), prepared=True)]
    else:
        commands = begin(tenant)
    commands.append(Command(prepared.name.encode(), prepared.values, prepared=True))
    if last:
        commands.extend(_END)
    return commands


def _tenant_value(conn: Any, tenant: str) -> bytes:
    return check_tenant(tenant).encode(conn.info.encoding)


NOT_SENT: Any = object()
"""What ``fetch_prepared`` returns when the call must go through ``fetch`` instead."""

Fetch = Literal["none", "one", "all"]
"""What :meth:`OnceTransaction.fetch` returns: nothing, one row (or ``None``), every row."""



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
    """A tenant transaction whose ``BEGIN`` and tenant travel with its first statement and whose
    ``COMMIT; RESET ALL`` travels with the statement marked ``last``, every value bound.

    Each statement goes as the execution of a statement prepared on the session, queued in
    libpq's pipeline (:mod:`primitives.db._pipeline`), so a one-statement write is one round
    trip. A statement that cannot be prepared runs as an ordinary bound statement inside the
    same transaction. Use :meth:`rollback` on any error; :meth:`commit` when the operation
    ends (a no-op if the ``last`` statement committed already).
    """

    def __init__(self, conn: psycopg.Connection[Any], tenant: str) -> None:
        if not conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE:
            raise psycopg.ProgrammingError(
                "OnceTransaction needs an idle autocommit connection (it opens the transaction)")
        self.conn, self.tenant = conn, tenant
        self.tenant_value = _tenant_value(conn, tenant)  # validates the tenant
        self.open = False
        self.committed = False

    def execute(self, statement: str, params: Mapping[str, Any] | None, *,
                last: bool = False) -> psycopg.Cursor[Any]:
        """Run one statement of the transaction; a cursor on its result (psycopg's own
        pipeline: the statement's values bound, ``BEGIN`` and ``COMMIT`` in the same round
        trip)."""
        if self.committed:
            raise psycopg.ProgrammingError("this tenant transaction has committed already")
        conn = self.conn
        with conn.pipeline():
            if not self.open:
                conn.execute("BEGIN", prepare=False)
                conn.execute(SET_TENANT_BOUND, (self.tenant,), prepare=False)
                self.open = True
            cursor = conn.cursor()
            cursor.execute(statement, params)
            if last:
                for command in _END:
                    conn.execute(command.text.decode(), prepare=False)
        self.committed = last
        return cursor

    def fetch(self, statement: str, params: Mapping[str, Any] | None, *,
              last: bool = False, fetch: Fetch = "none") -> Any:
        """Run one statement of the transaction and return its rows as tuples (``fetch="one"``:
        the first row or ``None``; ``"all"``: a list; ``"none"``: nothing).

        A prepared statement is exchanged with libpq directly, without a cursor, which saves
        most of the client's CPU per round trip. A connection with a row factory of its own
        goes through :meth:`execute`, so its rows keep their shape."""
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
        """:meth:`fetch` of a call its caller put in prepared form already (its values in text
        form, as :func:`_prepared_call` writes them). :data:`NOT_SENT` when it cannot go that
        way (a connection with a row factory of its own, a statement the server would not
        prepare): nothing was sent, and the caller runs the statement through :meth:`fetch`
        instead."""
        if self.committed:
            raise psycopg.ProgrammingError("this tenant transaction has committed already")
        if self.conn.row_factory is not tuple_row or not self._ensure(prepared):
            return NOT_SENT
        return self._fetch(prepared, last, fetch)

    def _fetch(self, prepared: _Prepared, last: bool, fetch: Fetch) -> Any:
        conn = self.conn
        first = not self.open
        named = first and self._ensure(_TENANT)
        commands = _commands(self.tenant_value if first else None, prepared, last,
                             tenant_prepared=named)
        results = self._sent(prepared, first, lambda: exchange(conn, commands))
        self.open, self.committed = True, last
        return _rows(conn, results[2 if first else 0], fetch)

    def _sent(self, prepared: _Prepared, first: bool, send: Callable[[], T]) -> T:
        """``send()`` of commands that execute ``prepared``. When the session lost the
        statement (DISCARD ALL, a pooler) or holds it with a result type that a migration has
        changed since, and nothing else ran in this transaction before it: roll back,
        prepare it again and send the same commands once more. Later in a transaction the
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
            # which of the two it was (the tenant statement, or the call's) the error
            # does not say: both are prepared again, each deallocated first if still there
            _lost(self.conn, prepared.name, _TENANT.name)
            if not (self._ensure(_TENANT) and self._ensure(prepared)):
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
    """The async twin of :class:`OnceTransaction`: the same commands, awaited."""

    def __init__(self, conn: psycopg.AsyncConnection[Any], tenant: str) -> None:
        if not conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE:
            raise psycopg.ProgrammingError(
                "OnceTransaction needs an idle autocommit connection (it opens the transaction)")
        self.conn, self.tenant = conn, tenant
        self.tenant_value = _tenant_value(conn, tenant)
        self.open = False
        self.committed = False

    async def execute(self, statement: str, params: Mapping[str, Any] | None, *,
                      last: bool = False) -> psycopg.AsyncCursor[Any]:
        if self.committed:
            raise psycopg.ProgrammingError("this tenant transaction has committed already")
        conn = self.conn
        async with conn.pipeline():
            if not self.open:
                await conn.execute("BEGIN", prepare=False)
                await conn.execute(SET_TENANT_BOUND, (self.tenant,), prepare=False)
                self.open = True
            cursor = conn.cursor()
            await cursor.execute(statement, params)
            if last:
                for command in _END:
                    await conn.execute(command.text.decode(), prepare=False)
        self.committed = last
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
        named = first and await self._ensure(_TENANT)
        commands = _commands(self.tenant_value if first else None, prepared, last,
                             tenant_prepared=named)
        results = await self._sent(prepared, first, lambda: aexchange(conn, commands))
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
            _lost(self.conn, prepared.name, _TENANT.name)
            if not (await self._ensure(_TENANT) and await self._ensure(prepared)):
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


class OnceCall(NamedTuple):
    """One tenant's one-statement transaction for :func:`afetch_each`."""

    tenant: str
    statement: str
    params: Mapping[str, Any] | None
    fetch: Fetch


async def afetch_each(conn: psycopg.AsyncConnection[Any], calls: Sequence[OnceCall]) -> list[Any]:
    """Each call as a tenant transaction of its own (``BEGIN``, its tenant, its statement
    prepared on the session, ``COMMIT; RESET ALL``), all of them sent in one round trip on
    ``conn``, an idle autocommit connection (:func:`~primitives.db._pipeline.aexchange_each`).
    For each call, its rows as its ``fetch`` asks, or :data:`NOT_SENT` where it did not run
    (a statement the server would not prepare) or failed, and so wrote nothing: the caller
    runs it again its own way. A failure leaves the later calls failed too (they ran
    nothing); the connection is rolled back to idle before this returns."""
    results: list[Any] = [NOT_SENT] * len(calls)
    sent: list[tuple[int, _Prepared]] = []
    transactions: list[list[Command]] = []
    for n, call in enumerate(calls):
        prepared = _prepared_call(conn, call.statement, call.params)
        tx = AsyncOnceTransaction(conn, call.tenant)
        if prepared is None or not await tx._ensure(prepared):
            continue
        sent.append((n, prepared))
        transactions.append(_commands(tx.tenant_value, prepared, last=True,
                                      tenant_prepared=await tx._ensure(_TENANT)))
    outcomes = await aexchange_each(conn, transactions) if transactions else []
    failed = False
    for (n, prepared), outcome in zip(sent, outcomes, strict=True):
        if isinstance(outcome, psycopg.Error):
            failed = True
            if outcome.sqlstate in _PREPARE_AGAIN:
                _forget(conn, prepared.name, outcome)
                _lost(conn, prepared.name, _TENANT.name)
            continue
        results[n] = _rows(conn, outcome[2], calls[n].fetch)
    if failed and conn.info.transaction_status != TransactionStatus.IDLE:
        await conn.execute(_ROLLBACK)
    return results
