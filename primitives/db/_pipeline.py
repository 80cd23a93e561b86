"""Several statements in one round trip, every value bound: libpq's pipeline mode.

A tenant transaction's statements (``BEGIN``, ``primitives.set_tenant``, the prepared
statement, ``COMMIT``, ``RESET ALL``) are queued as extended-protocol messages and sent with
one ``Sync``: one round trip, as a simple-query string of several statements would be, but
the statement texts hold only ``$n`` placeholders. Values travel as bind parameters, so no
tenant, content, key or query text ever appears in ``pg_stat_activity`` or a server log of
statements (``tests/security/test_statement_text.py``).

:func:`exchange` talks to libpq directly (psycopg's ``pgconn``), under the connection's lock,
and leaves pipeline mode before it returns, so psycopg's own state never sees it. After a
failed command the server skips the rest up to the ``Sync``; the first failure is raised once
every result is read, and the connection is left in a failed transaction for the caller to
roll back. Interrupted (Ctrl-C, a cancelled task), the query is cancelled and the pipeline
drained, so the connection is never left mid-query.

Example::

    results = exchange(conn, [Command(b"BEGIN"), Command(SET_TENANT, (b"acme",)),
                              Command(b"stmt_name", (b"7",), prepared=True),
                              Command(b"COMMIT")])
"""

from __future__ import annotations

import asyncio
import select
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import psycopg
from psycopg import errors
from psycopg.pq import ExecStatus
from psycopg.pq.abc import PGconn, PGresult

__all__ = ["SET_TENANT", "SET_TENANT_BOUND", "Command", "aexchange", "aexchange_each", "begin",
           "exchange"]

SET_TENANT = b"SELECT primitives.set_tenant($1)"
"""Sets the transaction's tenant from a bound value, local to the transaction, so it ends with
it (DESIGN §5 rule 3). ``primitives.set_tenant`` (migration 0007) is ``set_config`` on one
node, and ``SET LOCAL`` on a Citus coordinator, which forwards that to its workers."""
SET_TENANT_BOUND = "SELECT primitives.set_tenant(%s)"
""":data:`SET_TENANT` as psycopg binds it (``conn.execute(SET_TENANT_BOUND, (tenant,))``)."""

_OK = (ExecStatus.TUPLES_OK, ExecStatus.COMMAND_OK, ExecStatus.EMPTY_QUERY)


class Command(NamedTuple):
    """One queued statement: a query text with ``$n`` placeholders (or, with ``prepared``,
    the name of a statement prepared on the session) and its values in text form."""

    text: bytes
    values: Sequence[bytes | None] | None = None
    prepared: bool = False


def begin(tenant: bytes) -> list[Command]:
    """``BEGIN`` and the bound tenant: how every tenant transaction opens."""
    return [Command(b"BEGIN"), Command(SET_TENANT, (tenant,))]


def _send(pgconn: PGconn, commands: Sequence[Command]) -> None:
    pgconn.enter_pipeline_mode()
    for command in commands:
        if command.prepared:
            pgconn.send_query_prepared(command.text, command.values)
        else:
            pgconn.send_query_params(command.text, command.values)
    pgconn.pipeline_sync()


def _take(pgconn: PGconn, results: list[PGresult]) -> bool:
    """Read what libpq has buffered into ``results``; True once the ``Sync`` is read."""
    while not pgconn.is_busy():
        result = pgconn.get_result()
        if result is None:  # the end of one command's results
            if pgconn.status != 0:  # CONNECTION_OK is 0: the connection broke
                raise psycopg.OperationalError(
                    f"the connection was lost: {pgconn.get_error_message()}")
            continue
        if result.status == ExecStatus.PIPELINE_SYNC:
            return True
        results.append(result)
    return False


def _leave(pgconn: PGconn) -> None:
    try:
        pgconn.exit_pipeline_mode()
    except psycopg.Error:
        pass  # results still pending: only after a broken connection, which the pool drops


def _checked(conn: Any, results: list[PGresult]) -> list[PGresult]:
    """``results``, or the error of the first that failed, as psycopg's cursor raises it."""
    for result in results:
        if result.status not in _OK:
            if result.status == ExecStatus.FATAL_ERROR:
                raise errors.error_from_result(result, encoding=conn.info.encoding)
            if result.status == ExecStatus.PIPELINE_ABORTED:
                continue  # skipped after the failure, which comes first
            raise psycopg.InternalError(
                f"unexpected result status {ExecStatus(result.status).name} in a pipeline")
    return results


def exchange(conn: psycopg.Connection[Any], commands: Sequence[Command]) -> list[PGresult]:
    """Send ``commands`` in one round trip; one result per command, or the first error.

    The waits for the server are ``select`` on the socket, outside the GIL."""
    pgconn = conn.pgconn
    results: list[PGresult] = []
    synced = False
    with conn.lock:
        try:
            _send(pgconn, commands)
            while pgconn.flush():
                select.select([], [pgconn.socket], [])
            while not synced:
                synced = _take(pgconn, results)
                if not synced:
                    select.select([pgconn.socket], [], [])
                    pgconn.consume_input()
        except BaseException:
            # Until the sync is read, a command may still run on the server (the transaction
            # status can read idle between two commands' results): cancel it and drain.
            if not synced and pgconn.status == 0:
                _cancel_and_drain(conn)
            raise
        finally:
            _leave(pgconn)
    return _checked(conn, results)


async def aexchange(conn: psycopg.AsyncConnection[Any],
                    commands: Sequence[Command]) -> list[PGresult]:
    """The async twin of :func:`exchange`: the waits go through the event loop."""
    pgconn = conn.pgconn
    results: list[PGresult] = []
    synced = False
    async with conn.lock:
        try:
            _send(pgconn, commands)
            while pgconn.flush():
                await _socket_ready(pgconn.socket, write=True)
            while not synced:
                synced = _take(pgconn, results)
                if not synced:
                    await _socket_ready(pgconn.socket)
                    pgconn.consume_input()
        except BaseException:  # CancelledError included
            if not synced and pgconn.status == 0:  # as in exchange
                await _acancel_and_drain(conn)
            raise
        finally:
            _leave(pgconn)
    return _checked(conn, results)


async def aexchange_each(conn: psycopg.AsyncConnection[Any],
                         transactions: Sequence[Sequence[Command]],
                         ) -> list[list[PGresult] | psycopg.Error]:
    """Send several transactions in one round trip, each closed by its own ``Sync``; for each,
    its results or its first error. Each transaction must open and close itself (``BEGIN`` ...
    ``COMMIT``). After one fails, its transaction stays open and aborted, so those after it
    fail too (at their ``BEGIN``, having run nothing) until the caller rolls back.

    Interrupted before every result is read, the connection is closed (the server rolls back
    what had not committed), and the pool discards it."""
    pgconn = conn.pgconn
    out: list[list[PGresult] | psycopg.Error] = []
    current: list[PGresult] = []
    async with conn.lock:
        try:
            pgconn.enter_pipeline_mode()
            for commands in transactions:
                for command in commands:
                    if command.prepared:
                        pgconn.send_query_prepared(command.text, command.values)
                    else:
                        pgconn.send_query_params(command.text, command.values)
                pgconn.pipeline_sync()
            while pgconn.flush():
                await _socket_ready(pgconn.socket, write=True)
            while len(out) < len(transactions):
                while len(out) < len(transactions) and not pgconn.is_busy():
                    result = pgconn.get_result()
                    if result is None:  # the end of one command's results
                        if pgconn.status != 0:
                            raise psycopg.OperationalError(
                                f"the connection was lost: {pgconn.get_error_message()}")
                        continue
                    if result.status == ExecStatus.PIPELINE_SYNC:
                        try:
                            out.append(_checked(conn, current))
                        except psycopg.Error as err:
                            out.append(err)
                        current = []
                        continue
                    current.append(result)
                if len(out) < len(transactions):
                    await _socket_ready(pgconn.socket)
                    pgconn.consume_input()
        except BaseException:
            if len(out) < len(transactions):
                pgconn.finish()  # not read to the end: closed, never handed on mid-pipeline
            raise
        finally:
            _leave(pgconn)
    return out


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


_CANCEL_EVERY = 0.2
"""Seconds between cancel requests while a pipeline drains: a request that reaches the
backend between two commands (while it reads the next one) is dropped, so it is sent again
until the sync comes back."""
_DRAIN_FOR = 10.0


def _drained(pgconn: PGconn) -> bool:
    """Read and drop what libpq has; True once the sync (or a broken connection) is reached."""
    try:
        return _take(pgconn, [])
    except psycopg.OperationalError:
        return True


def _cancel_and_drain(conn: psycopg.Connection[Any]) -> None:
    pgconn = conn.pgconn
    # poll, not select: the wait must not go through anything an interrupt handler replaced
    poller = select.poll()
    poller.register(pgconn.socket, select.POLLIN)
    deadline = time.monotonic() + _DRAIN_FOR
    try:
        while time.monotonic() < deadline:
            conn.cancel_safe(timeout=5.0)
            until = time.monotonic() + _CANCEL_EVERY
            while time.monotonic() < until:
                if poller.poll(20):
                    pgconn.consume_input()
                if _drained(pgconn):
                    return
    except Exception:  # the connection is beyond use; the pool discards it
        pass


async def _acancel_and_drain(conn: psycopg.AsyncConnection[Any]) -> None:
    pgconn = conn.pgconn
    deadline = time.monotonic() + _DRAIN_FOR
    try:
        while time.monotonic() < deadline:
            await conn.cancel_safe(timeout=5.0)
            until = time.monotonic() + _CANCEL_EVERY
            while time.monotonic() < until:
                try:
                    await asyncio.wait_for(_socket_ready(pgconn.socket), timeout=0.02)
                    pgconn.consume_input()
                except TimeoutError:
                    pass
                if _drained(pgconn):
                    return
    except BaseException:  # the connection is beyond use; the pool discards it
        pass
