"""A pooled connection never carries a tenant from one transaction into the next.

The engine runs with one pooled connection (``max_connections=1``), so every check below
runs on the very connection the tenant transaction used (asserted by backend pid), except
after a failed transaction on a Citus coordinator, where the engine closes that connection
and the pool opens another (docs/scaling.md): there the check asserts it is a new one. The
checks reach into ``engine._pool`` on purpose: they ask what a transaction that does *not*
go through ``engine.tenant`` would see on that connection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives.db import tenant_transaction
from primitives.engine import AsyncEngine, Engine
from primitives.errors import PolicyViolation
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle
from tests.security._support import (
    SPEC_BY_AGENT,
    anchor_for,
    connect_engine,
    count,
    insert_row,
    new_tenant,
    on_citus,
    seed_tenant,
)

pytestmark = [pytest.mark.db,
              pytest.mark.filterwarnings("ignore:.*signal.*:RuntimeWarning")]

SPEC = SPEC_BY_AGENT["spectral"]
STATE = ("SELECT current_setting('primitives.tenant', true), primitives.current_tenant(), "
         "pg_backend_pid()")


def _counts_of(engine: Engine, tenant: str) -> tuple[int, int]:
    """(memories, journal events) the tenant holds."""
    with engine.tenant(anchor_for(SPEC, tenant)) as mem:
        return (count(mem.connection, engine.tables.memories),
                count(mem.connection, engine.tables.events))


@pytest.fixture
def engine(pg: PostgresHandle, specs: tuple[AgentSpec, ...]) -> Iterator[Engine]:
    with connect_engine(SPEC, pg.app_dsn, max_connections=1) as eng:
        yield eng


def _pid(engine: Engine, tenant: str) -> int:
    with engine.tenant(anchor_for(SPEC, tenant)) as mem:
        row = mem.connection.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])


def _assert_pool_connection_has_no_tenant(engine: Engine, pid: int, *,
                                          replaced: bool = False) -> None:
    """Outside engine.tenant the pooled connection has no tenant and sees no rows, both in
    autocommit statements and in an explicit transaction. ``replaced``: the transaction
    failed on a Citus coordinator, so the pool holds a new connection instead."""
    with engine._pool.connection() as conn:
        setting, tenant, backend = conn.execute(STATE).fetchone() or (None, None, None)
        if replaced:
            assert backend != pid, "a connection whose transaction failed is not reused"
        else:
            assert backend == pid, "max_connections=1 must hand back the same connection"
        assert setting in (None, "") and tenant is None
        assert count(conn, engine.tables.memories) == 0
        assert count(conn, engine.tables.events) == 0
        with conn.transaction():
            setting, tenant, _ = conn.execute(STATE).fetchone() or (None, None, None)
            assert setting in (None, "") and tenant is None
            assert count(conn, engine.tables.memories) == 0


def test_pooled_connection_has_no_tenant_after_a_tenant_transaction(engine: Engine) -> None:
    seeded = seed_tenant(engine, new_tenant("pool"))
    pid = _pid(engine, seeded.tenant)
    _assert_pool_connection_has_no_tenant(engine, pid)


def test_pooled_connection_has_no_tenant_after_a_transaction_that_raised(
    engine: Engine, on_cluster: bool,
) -> None:
    tenant = new_tenant("pool")
    seed_tenant(engine, tenant)
    pid = _pid(engine, tenant)
    with pytest.raises(RuntimeError, match="boom"), \
            engine.tenant(anchor_for(SPEC, tenant)) as mem:
        mem.observe("cycle", "written, then rolled back")
        raise RuntimeError("boom")
    _assert_pool_connection_has_no_tenant(engine, pid, replaced=on_cluster)


def test_pooled_connection_has_no_tenant_after_a_refused_statement(
    engine: Engine, on_cluster: bool,
) -> None:
    victim = seed_tenant(engine, new_tenant("victim"))
    tenant = new_tenant("pool")
    pid = _pid(engine, tenant)
    with pytest.raises(PolicyViolation), engine.tenant(anchor_for(SPEC, tenant)) as mem:
        insert_row(mem.connection, SPEC.agent, engine.tables.memories, victim.tenant,
                   victim.refs)
    _assert_pool_connection_has_no_tenant(engine, pid, replaced=on_cluster)


def test_session_level_tenant_does_not_reach_a_later_engine_transaction(
    engine: Engine,
) -> None:
    victim = seed_tenant(engine, new_tenant("victim"))
    caller = new_tenant("caller")
    with engine._pool.connection() as conn:  # a malicious caller sets it for the session
        conn.execute(sql.SQL("SET primitives.tenant = {}").format(sql.Literal(victim.tenant)))
        seen = count(conn, engine.tables.memories)
        if on_citus(conn):
            # a session-level SET stays on the coordinator (Citus forwards only SET LOCAL):
            # the rows are on the workers, where the session has no tenant and sees nothing
            assert seen == 0
        else:
            assert seen > 0  # the session itself sees the victim
    with engine.tenant(anchor_for(SPEC, caller)) as mem:
        setting = mem.connection.execute("SELECT primitives.current_tenant()").fetchone()
        assert setting == (caller,)
        assert count(mem.connection, engine.tables.memories) == 0
        assert mem.search(victim.marker, tiers=list(SPEC.tier_names)) == []
        assert all(mem.get(i) is None for i in victim.memory_ids)


@pytest.mark.parametrize("statement", [
    "SET primitives.tenant = {}",
    "SELECT set_config('primitives.tenant', {}, false)",
])
def test_tenant_switched_inside_an_engine_transaction_does_not_widen_engine_calls(
    engine: Engine, statement: str,
) -> None:
    victim = seed_tenant(engine, new_tenant("victim"))
    caller = new_tenant("caller")
    switch = sql.SQL(statement).format(sql.Literal(victim.tenant))  # type: ignore[arg-type]
    with engine.tenant(anchor_for(SPEC, caller)) as mem:
        mem.connection.execute(switch)
        # every engine statement also filters on its own tenant: nothing of the victim shows
        assert mem.search(victim.marker, tiers=list(SPEC.tier_names)) == []
        assert all(mem.get(i) is None for i in victim.memory_ids)
        assert all(mem.history(i) == [] for i in victim.memory_ids)
    with engine._pool.connection() as conn:
        cluster = on_citus(conn)
    if cluster:
        # The switch stays on the coordinator (Citus forwards only SET LOCAL): the workers,
        # where the rows and their policies are, keep the caller's tenant from set_tenant.
        # The caller's write is then not refused; it lands in the caller's tenant, and the
        # victim's rows and journal gain nothing.
        before = _counts_of(engine, victim.tenant)
        with engine.tenant(anchor_for(SPEC, caller)) as mem:
            mem.connection.execute(switch)
            written = mem.observe("cycle", "written for the caller while the setting "
                                           "names the victim")
        with engine.tenant(anchor_for(SPEC, caller)) as mem:
            assert mem.get(written.id) is not None
        with engine.tenant(anchor_for(SPEC, victim.tenant)) as mem:
            assert mem.get(written.id) is None
        assert _counts_of(engine, victim.tenant) == before
    else:
        with pytest.raises(PolicyViolation) as refused, \
                engine.tenant(anchor_for(SPEC, caller)) as mem:
            mem.connection.execute(switch)
            mem.observe("cycle", "written for the caller while the setting names the victim")
        assert refused.value.context["sqlstate"] == "42501"
    # and the next engine transaction is scoped to its own tenant again
    with engine.tenant(anchor_for(SPEC, victim.tenant)) as mem:
        assert {h.memory.id for h in mem.search(victim.marker, tiers=list(SPEC.tier_names))}


def test_session_level_tenant_set_through_the_connection_does_not_stay_in_the_pool(
    engine: Engine,
) -> None:
    victim = seed_tenant(engine, new_tenant("victim"))
    caller = new_tenant("caller")
    pid = _pid(engine, caller)
    with engine.tenant(anchor_for(SPEC, caller)) as mem:
        mem.connection.execute(
            sql.SQL("SET primitives.tenant = {}").format(sql.Literal(victim.tenant)))
    _assert_pool_connection_has_no_tenant(engine, pid)


def test_session_level_tenant_does_not_reach_a_later_tenant_transaction(
    pg: PostgresHandle, specs: tuple[AgentSpec, ...], engine: Engine,
) -> None:
    victim = seed_tenant(engine, new_tenant("victim"))
    caller = new_tenant("caller")
    with psycopg.connect(pg.app_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET primitives.tenant = {}").format(sql.Literal(victim.tenant)))
        with tenant_transaction(conn, caller):
            assert conn.execute("SELECT primitives.current_tenant()").fetchone() == (caller,)
            assert count(conn, engine.tables.memories) == 0


# -- the async engine ---------------------------------------------------------------------------


@pytest.fixture
async def aengine(pg: PostgresHandle, specs: tuple[AgentSpec, ...]) -> AsyncIterator[AsyncEngine]:
    eng = await AsyncEngine.connect(SPEC, pg.app_dsn, max_connections=1)
    try:
        yield eng
    finally:
        await eng.close()


async def _apool_state(aengine: AsyncEngine, *, in_transaction: bool) -> tuple[Any, ...]:
    query = sql.SQL("SELECT current_setting('primitives.tenant', true), pg_backend_pid(), "
                    "(SELECT count(*) FROM {})").format(aengine.tables.memories.ident)
    async with aengine._pool.connection() as conn:
        if in_transaction:
            async with conn.transaction():
                cursor = await conn.execute(query)
                return await cursor.fetchone() or ()
        cursor = await conn.execute(query)
        return await cursor.fetchone() or ()


@pytest.mark.parametrize("raised", [False, True], ids=["committed", "raised"])
async def test_async_pooled_connection_has_no_tenant_after_a_tenant_transaction(
    aengine: AsyncEngine, raised: bool, on_cluster: bool,
) -> None:
    tenant = new_tenant("apool")
    try:
        async with aengine.tenant(anchor_for(SPEC, tenant)) as mem:
            await mem.observe("cycle", "async pooled write")
            cursor = await mem.connection.execute("SELECT pg_backend_pid()")
            pid = (await cursor.fetchone() or (None,))[0]
            if raised:
                raise RuntimeError("boom")
    except RuntimeError:
        assert raised
    for in_transaction in (False, True):
        setting, backend, visible = await _apool_state(aengine, in_transaction=in_transaction)
        # a connection whose transaction failed on a coordinator is replaced (see above)
        assert (backend != pid) if raised and on_cluster else (backend == pid)
        assert setting in (None, "") and visible == 0


async def test_async_session_level_tenant_set_through_the_connection_does_not_stay_in_the_pool(
    aengine: AsyncEngine,
) -> None:
    caller = new_tenant("acaller")
    async with aengine.tenant(anchor_for(SPEC, caller)) as mem:
        await mem.connection.execute(
            sql.SQL("SET primitives.tenant = {}").format(sql.Literal("someone-else")))
        cursor = await mem.connection.execute("SELECT pg_backend_pid()")
        pid = (await cursor.fetchone() or (None,))[0]
    for in_transaction in (False, True):
        setting, backend, visible = await _apool_state(aengine, in_transaction=in_transaction)
        assert backend == pid and setting in (None, "") and visible == 0
