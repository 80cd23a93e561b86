"""Issue 17, defect 8: concurrent writers of one key get one linear history.

Threads write the same key (new, or existing) through ``Engine.observe``, tenant
transactions and the LangGraph store. Afterwards: exactly one live version, each older
version superseded by exactly the next one, every write a version of that history with its
``observed`` event (and one ``superseded`` event per replaced version), the tenant's hash
chain intact, and no raw psycopg error (duplicate key) ever reached a writer.
"""

from __future__ import annotations

import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from primitives.audit._chain import verify_chains
from primitives.engine import Engine, Memory
from primitives.errors import GovernanceError
from primitives.langgraph import MemoryStore
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle
from tests.security._support import SPEC_BY_AGENT, connect_engine, new_tenant

pytestmark = pytest.mark.db

TIER, TYPOLOGY = "workspace", "procedural"  # spectral: persistent, directly writable
MAX_THREADS = 6


@pytest.fixture(scope="module")
def spectral(specs: tuple[AgentSpec, ...]) -> AgentSpec:
    return SPEC_BY_AGENT["spectral"]


@pytest.fixture(scope="module")
def engine(pg: PostgresHandle, spectral: AgentSpec) -> Iterator[Engine]:
    made = connect_engine(spectral, pg.app_dsn, max_connections=MAX_THREADS)
    yield made
    made.close()


@pytest.fixture(scope="module")
def store(pg: PostgresHandle, spectral: AgentSpec) -> Iterator[MemoryStore]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # no embedder: lexical only
        made = MemoryStore.from_spec(spectral, pg.app_dsn, max_connections=MAX_THREADS)
    yield made
    made.close()


def _race(threads: int, work: Callable[[int], list[Any]]) -> tuple[list[Any], list[BaseException]]:
    """Run ``work(i)`` on ``threads`` threads released together; what they returned and
    raised."""
    barrier = threading.Barrier(threads)
    results: list[Any] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        barrier.wait()
        try:
            out = work(i)
        except BaseException as err:  # every error is a finding here
            with lock:
                errors.append(err)
            return
        with lock:
            results.extend(out)

    pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in pool), "a writer hung"
    return results, errors


def _assert_linear_history(engine: Engine, admin_conn: psycopg.Connection[Any], tenant: str,
                           key: str, written: list[str]) -> list[Any]:
    """One live version of ``key``; versions chained one after the other; every content in
    ``written`` is one version; each version journaled; the chain intact. The versions,
    oldest first."""
    tables = engine.tables
    with engine.tenant({"workspace_id": tenant}) as mem:
        conn = mem.connection
        rows = conn.execute(sql.SQL(
            "SELECT id, content, superseded_by, superseded_at IS NULL AND tombstoned_at IS NULL "
            "FROM {} WHERE key = %s").format(tables.memories.ident), [key]).fetchall()
        events = conn.execute(sql.SQL(
            "SELECT kind, memory_id, payload FROM {} ORDER BY seq").format(
                tables.events.ident)).fetchall()
    live = [r for r in rows if r[3]]
    assert len(live) == 1, f"{len(live)} live versions of one key"
    by_id = {r[0]: r for r in rows}
    successors = [r[2] for r in rows if r[2] is not None]
    assert len(successors) == len(set(successors)), "two versions superseded by one"
    assert all(s in by_id for s in successors), "superseded by a version that is not there"
    firsts = set(by_id) - set(successors)
    assert len(firsts) == 1, "the history is not one line"
    chain = [by_id[firsts.pop()]]
    while chain[-1][2] is not None:
        chain.append(by_id[chain[-1][2]])
    assert len(chain) == len(rows) and chain[-1] == live[0], "a version is off the line"
    contents = [r[1] for r in chain]
    assert sorted(contents) == sorted(written), "a write is not a version of the history"
    observed = [e[1] for e in events if e[0] == "observed"]
    superseded = [e[1] for e in events if e[0] == "superseded"]
    assert sorted(observed) == sorted(by_id), "a version without its observed event"
    assert sorted(superseded) == sorted(r[0] for r in chain[:-1])
    for kind, memory_id, payload in events:
        if kind == "superseded":
            assert uuid.UUID(payload["by"]) == by_id[memory_id][2]
    [report] = verify_chains(admin_conn, engine.spec, tenants=[tenant])
    assert report.intact and report.events == len(events)
    return chain


def _writes(threads: int, each: int) -> list[str]:
    return [f"version {i}.{j}" for i in range(threads) for j in range(each)]


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(threads=st.integers(2, MAX_THREADS), each=st.integers(1, 4), existing=st.booleans())
def test_concurrent_observe_of_one_key_keeps_one_linear_history(
    engine: Engine, admin_conn: psycopg.Connection[Any], threads: int, each: int,
    existing: bool,
) -> None:
    tenant, key = new_tenant("race"), "policy"
    anchor = {"workspace_id": tenant}
    written = _writes(threads, each)
    if existing:
        engine.observe(anchor, TIER, "version 0", typology=TYPOLOGY, key=key)
        written.append("version 0")

    def work(i: int) -> list[Memory]:
        return [engine.observe(anchor, TIER, f"version {i}.{j}", typology=TYPOLOGY, key=key)
                for j in range(each)]

    results, errors = _race(threads, work)
    assert errors == [], f"writers got errors: {errors!r}"
    chain = _assert_linear_history(engine, admin_conn, tenant, key, written)
    assert {m.id for m in results} <= {r[0] for r in chain}


@settings(max_examples=4, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(threads=st.integers(2, MAX_THREADS), each=st.integers(1, 3), existing=st.booleans())
def test_concurrent_tenant_transactions_of_one_key_keep_one_linear_history(
    engine: Engine, admin_conn: psycopg.Connection[Any], threads: int, each: int,
    existing: bool,
) -> None:
    tenant, key = new_tenant("race"), "policy"
    anchor = {"workspace_id": tenant}
    written = _writes(threads, each)
    if existing:
        with engine.tenant(anchor) as mem:
            mem.observe(TIER, "version 0", typology=TYPOLOGY, key=key)
        written.append("version 0")

    def work(i: int) -> list[Memory]:
        out = []
        for j in range(each):
            with engine.tenant(anchor) as mem:
                out.append(mem.observe(TIER, f"version {i}.{j}", typology=TYPOLOGY, key=key))
        return out

    _, errors = _race(threads, work)
    assert errors == [], f"writers got errors: {errors!r}"
    _assert_linear_history(engine, admin_conn, tenant, key, written)


@settings(max_examples=4, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(threads=st.integers(2, MAX_THREADS), each=st.integers(1, 3), existing=st.booleans())
def test_concurrent_store_puts_of_one_key_keep_one_linear_history(
    engine: Engine, store: MemoryStore, admin_conn: psycopg.Connection[Any], threads: int,
    each: int, existing: bool,
) -> None:
    tenant, key = new_tenant("race"), "style"
    namespace = (tenant, TIER, TYPOLOGY)
    written = _writes(threads, each)
    if existing:
        store.put(namespace, key, {"text": "version 0"})
        written.append("version 0")

    def work(i: int) -> list[None]:
        for j in range(each):
            store.put(namespace, key, {"text": f"version {i}.{j}"})
        return []

    _, errors = _race(threads, work)
    assert errors == [], f"writers got errors: {errors!r}"
    _assert_linear_history(engine, admin_conn, tenant, key, written)
    item = store.get(namespace, key)
    assert item is not None and item.value["text"] in written


def test_concurrent_supersessions_of_one_version_are_refused_not_lost(
    engine: Engine, admin_conn: psycopg.Connection[Any],
) -> None:
    tenant = new_tenant("race")
    anchor = {"workspace_id": tenant}
    first = engine.observe(anchor, TIER, "version 0", typology=TYPOLOGY, key="policy")
    threads = 4

    def work(i: int) -> list[Memory]:
        with engine.tenant(anchor) as mem:
            return [mem.supersede(first.id, f"rewrite {i}", reason=f"writer {i}")]

    results, errors = _race(threads, work)
    # one supersession wins; the others find the version superseded and are told so
    assert len(results) == 1
    assert len(errors) == threads - 1
    assert all(isinstance(e, GovernanceError) and "not active (superseded)" in str(e)
               for e in errors), errors
    _assert_linear_history(engine, admin_conn, tenant, "policy",
                           ["version 0", results[0].content])


def test_a_supersession_waiting_on_another_is_refused_once_that_one_commits(
    engine: Engine, admin_conn: psycopg.Connection[Any],
) -> None:
    """The interleaving the race above may or may not hit, made certain: A has superseded
    the version and holds its transaction open while B asks to supersede the same version."""
    tenant = new_tenant("race")
    anchor = {"workspace_id": tenant}
    first = engine.observe(anchor, TIER, "version 0", typology=TYPOLOGY, key="policy")
    a_wrote, b_started = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    def writer_b() -> None:
        a_wrote.wait(30)
        b_started.set()
        try:
            with engine.tenant(anchor) as mem:
                outcome["b"] = mem.supersede(first.id, "B's rewrite")
        except Exception as err:  # the finding, whatever it is
            outcome["b"] = err

    thread = threading.Thread(target=writer_b)
    thread.start()
    with engine.tenant(anchor) as mem:
        outcome["a"] = mem.supersede(first.id, "A's rewrite")
        a_wrote.set()
        b_started.wait(30)
        time.sleep(0.5)  # B is now waiting on the version A holds
    thread.join(60)
    assert isinstance(outcome["b"], GovernanceError), outcome["b"]
    assert "not active (superseded)" in str(outcome["b"])
    _assert_linear_history(engine, admin_conn, tenant, "policy", ["version 0", "A's rewrite"])
