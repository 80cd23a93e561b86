"""Tenant-scoped transactions: the tenant is set for the transaction, never per session.

``set_config('primitives.tenant', $1, true)`` lasts until the transaction ends, so a
pooled connection cannot carry one tenant's setting into the next transaction
(DESIGN §5 rule 3). The tenant is a bound value, never part of the statement's text, so no
other session reads it in ``pg_stat_activity`` and no statement log records it; ``BEGIN``
and the tenant go in one round trip (:mod:`primitives.db._pipeline`). Row-level security
policies read it through ``current_setting('primitives.tenant')``.

Errors the database raises inside the block come out translated: a refusal on
policy grounds (RLS ``WITH CHECK``, missing grant: SQLSTATE 42501; append-only
journal; guarded delete) as ``PolicyViolation``, anything else as ``StorageError``,
each carrying ``sqlstate`` and ``tenant`` in its context.

Example::

    with psycopg.connect(app_dsn(admin), autocommit=True) as conn:
        with tenant_transaction(conn, "acme") as tx:
            tx.execute("SELECT * FROM notes")   # acme's rows only
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus

from primitives.db._names import POLICY_SQLSTATES, SQLSTATE_CAPACITY, SQLSTATE_NON_MIRROR
from primitives.db._pipeline import SET_TENANT_BOUND, aexchange, begin, exchange
from primitives.errors import (
    NonMirrorViolation,
    PolicyViolation,
    StorageError,
    StorageFull,
    TenancyError,
)

__all__ = ["atenant_transaction", "check_tenant", "set_tenant_statement", "tenant_transaction",
           "translate_error"]

Row = TypeVar("Row")

_SET_TENANT = sql.SQL("SET LOCAL primitives.tenant = {}")
_DISK_FULL = "53100"


def check_tenant(tenant: str) -> str:
    """``tenant``, or ``TenancyError`` when it is not a non-empty string without NUL."""
    if not isinstance(tenant, str) or not tenant.strip():
        raise TenancyError(
            f"a tenant is required for every memory transaction, got {tenant!r}", tenant=tenant
        )
    if "\x00" in tenant:
        raise TenancyError("a tenant may not contain NUL characters", tenant=tenant)
    return tenant


def set_tenant_statement(tenant: str) -> sql.Composed:
    """``SET LOCAL primitives.tenant = <literal>``: the form a Citus coordinator forwards to
    its workers (``citus.propagate_set_commands = 'local'``). The single-node runtime does not
    use it (its text would carry the tenant); it binds the tenant with ``set_config``."""
    return _SET_TENANT.format(sql.Literal(check_tenant(tenant)))


def translate_error(
    err: psycopg.Error, *, tenant: str | None = None
) -> StorageError | PolicyViolation:
    """The framework error for a psycopg error: PolicyViolation, StorageFull or StorageError."""
    sqlstate = err.sqlstate
    primary = err.diag.message_primary or str(err)
    context = {"sqlstate": sqlstate, "tenant": tenant, "table": err.diag.table_name}
    if sqlstate == SQLSTATE_NON_MIRROR:
        return _non_mirror(err, primary, context)
    if sqlstate in POLICY_SQLSTATES:
        who = f" for tenant {tenant!r}" if tenant is not None else ""
        return PolicyViolation(f"the database refused this{who}: {primary}", **context)
    if sqlstate == SQLSTATE_CAPACITY:
        return _capacity(err, primary, context)
    if sqlstate == _DISK_FULL:
        return StorageFull(f"the database is out of disk space: {primary}", **context)
    return StorageError(f"database error: {primary}", **context)


def _capacity(err: psycopg.Error, primary: str, context: dict[str, Any]) -> StorageFull:
    """The capacity guard's refusal: STORAGE_FULL, with what its DETAIL (JSON) names (the
    tier, the bound, what is used, the refused content's sha256) in the context."""
    try:
        detail = json.loads(err.diag.message_detail or "{}")
    except ValueError:
        detail = {}
    return StorageFull(primary, capacity=True, **context,
                       **{k: detail.get(k) for k in (
                           "tier", "per", "scope_id", "rows", "tokens", "used_rows",
                           "used_tokens", "write_tokens", "content_sha256")})


def _non_mirror(err: psycopg.Error, primary: str, context: dict[str, Any]) -> NonMirrorViolation:
    """The guard's refusal, with what it names (its DETAIL is JSON) in the context."""
    try:
        detail = json.loads(err.diag.message_detail or "{}")
    except ValueError:
        detail = {}
    named = {k: detail.get(k) for k in ("category", "canonical_source", "canonical_key",
                                        "similarity", "threshold")}
    return NonMirrorViolation(primary, **context, **named)


_END = {True: "COMMIT; RESET ALL", False: "ROLLBACK; RESET ALL"}
"""How a tenant transaction ends: every session setting goes back to its default, so nothing a
caller set on the connection (a tenant above all) outlives the transaction."""


def _begin(conn: psycopg.Connection[Any], tenant: str) -> None:
    """``BEGIN`` and the bound tenant: one round trip opens the scope."""
    exchange(conn, begin(tenant.encode(conn.info.encoding)))


async def _abegin(conn: psycopg.AsyncConnection[Any], tenant: str) -> None:
    await aexchange(conn, begin(tenant.encode(conn.info.encoding)))


def _end_quietly(conn: psycopg.Connection[Any]) -> None:
    try:
        conn.execute(_END[False])
    except psycopg.Error:
        pass  # the connection is gone; the server rolled the transaction back already


async def _aend_quietly(conn: psycopg.AsyncConnection[Any]) -> None:
    try:
        await conn.execute(_END[False])
    except psycopg.Error:
        pass


@contextmanager
def tenant_transaction(
    conn: psycopg.Connection[Row], tenant: str
) -> Iterator[psycopg.Connection[Row]]:
    """Open a transaction on ``conn`` scoped to ``tenant``; yield ``conn``; commit or roll back.

    ``conn`` must not be inside a transaction already (the tenant would outlive
    this block in the enclosing one): use ``autocommit=True`` or commit first. On an
    autocommit connection the transaction opens and ends in one round trip each and ends with
    ``RESET ALL``; nested ``conn.transaction()`` blocks inside it are savepoints.
    """
    check_tenant(tenant)
    _require_idle(conn.info, tenant)
    if not conn.autocommit:
        try:
            with conn.transaction():
                conn.execute(SET_TENANT_BOUND, (tenant,))
                yield conn
        except psycopg.Error as err:
            raise translate_error(err, tenant=tenant) from err
        return
    try:
        _begin(conn, tenant)
    except psycopg.Error as err:
        _end_quietly(conn)
        raise translate_error(err, tenant=tenant) from err
    try:
        yield conn
    except BaseException as exc:
        _end_quietly(conn)
        if isinstance(exc, psycopg.Error):
            raise translate_error(exc, tenant=tenant) from exc
        raise
    try:
        conn.execute(_END[True])
    except psycopg.Error as err:
        _end_quietly(conn)
        raise translate_error(err, tenant=tenant) from err


@asynccontextmanager
async def atenant_transaction(
    conn: psycopg.AsyncConnection[Row], tenant: str
) -> AsyncIterator[psycopg.AsyncConnection[Row]]:
    """The async twin of ``tenant_transaction``: same statements, same checks, same errors."""
    check_tenant(tenant)
    _require_idle(conn.info, tenant)
    if not conn.autocommit:
        try:
            async with conn.transaction():
                await conn.execute(SET_TENANT_BOUND, (tenant,))
                yield conn
        except psycopg.Error as err:
            raise translate_error(err, tenant=tenant) from err
        return
    try:
        await _abegin(conn, tenant)
    except psycopg.Error as err:
        await _aend_quietly(conn)
        raise translate_error(err, tenant=tenant) from err
    try:
        yield conn
    except BaseException as exc:
        await _aend_quietly(conn)
        if isinstance(exc, psycopg.Error):
            raise translate_error(exc, tenant=tenant) from exc
        raise
    try:
        await conn.execute(_END[True])
    except psycopg.Error as err:
        await _aend_quietly(conn)
        raise translate_error(err, tenant=tenant) from err


def _require_idle(info: psycopg.ConnectionInfo, tenant: str) -> None:
    if info.transaction_status != TransactionStatus.IDLE:
        raise TenancyError(
            "a tenant transaction must open its own transaction, but the connection is already "
            f"in one ({info.transaction_status.name}); commit or roll back first, or connect "
            "with autocommit=True",
            tenant=tenant,
        )
