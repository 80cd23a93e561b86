"""Seeded ids and the tick clock on agents/mace.yaml, as the app role: the compiled functions
agree with Python, a transaction without the job seed stays random and on the wall clock, and
the async engine writes the same job as the sync one."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives._project import migrate
from primitives.engine import AsyncEngine, Engine
from primitives.engine._determinism import seeded_epoch
from primitives.engine._ids import seeded_uuid
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle
from tests.integration._mace_job import journal, memory_rows

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")


@pytest.fixture(scope="module")
def mace(pg: PostgresHandle) -> AgentSpec:
    spec = load_spec(ROOT / "agents" / "mace.yaml")
    migrate([spec], dsn=pg.admin_dsn)
    return spec


@pytest.fixture
def engine(pg: PostgresHandle, mace: AgentSpec) -> Iterator[Engine]:
    with Engine.connect(mace, pg.app_dsn, max_connections=2) as eng:
        yield eng


def _user() -> str:
    return f"u-{uuid.uuid4().hex[:10]}"


def test_the_compiled_seeded_id_and_epoch_functions_agree_with_python(
        mace: AgentSpec, app_conn: psycopg.Connection[Any]) -> None:
    for name in ("seed-7", "seed-7:0:0", "café:event:12", ""):
        found = app_conn.execute("SELECT mace.mace_seeded_uuid(%s), mace.mace_seeded_epoch(%s)",
                                 (name, name)).fetchone()
        assert found == (seeded_uuid(name), seeded_epoch(name))


def test_a_transaction_without_the_job_seed_keeps_random_ids_and_the_wall_clock(
        engine: Engine, mace: AgentSpec, pg: PostgresHandle) -> None:
    user = _user()
    before = datetime.now(UTC)
    with engine.tenant({"user_id": user}) as mem:
        item = mem.observe("wm", "no job here", scope_id="job-1")
        mem.tick()
    after = datetime.now(UTC)
    assert item.id.version == 4
    events = journal(pg.app_dsn, mace, user)
    assert all(e[1].version == 4 for e in events)
    assert all(before - timedelta(seconds=5) <= e[6] <= after + timedelta(seconds=5)
               for e in events)


def test_a_job_writes_seeded_ids_and_times_from_its_seed(
        engine: Engine, mace: AgentSpec, pg: PostgresHandle) -> None:
    user, seed = _user(), f"seed-{uuid.uuid4().hex[:8]}"
    with engine.tenant({"user_id": user, "job_seed": seed}) as mem:
        first = mem.observe("wm", "first", scope_id="job-1")
        second = mem.observe("wm", "second", scope_id="job-1")
        mem.tick()
        third = mem.observe("wm", "third", scope_id="job-1")
    # ids: the seed, the journal head the transaction began at (0) and a counter, in the
    # order the engine drew them: a write's row, then its observed event; the ticked event
    assert [first.id, second.id, third.id] == [seeded_uuid(f"{seed}:0:{n}") for n in (0, 2, 5)]
    events = journal(pg.app_dsn, mace, user)
    assert [e[2] for e in events] == ["observed", "observed", "ticked", "observed"]
    assert [e[1] for e in events] == [seeded_uuid(f"{seed}:0:{n}") for n in (1, 3, 4, 6)]
    epoch = seeded_epoch(seed)
    assert [e[6] for e in events] == [epoch, epoch + timedelta(microseconds=1),
                                      epoch + timedelta(microseconds=2),
                                      epoch + timedelta(seconds=1)]
    rows = {r[0]: r for r in memory_rows(pg.app_dsn, mace, user)}
    assert rows[first.id][9] == epoch and rows[third.id][9] == epoch + timedelta(seconds=1)
    assert first.created_at == epoch and first.event_time == epoch
    # the next transaction starts from the journal head: new ids, the clock goes on
    with engine.tenant({"user_id": user, "job_seed": seed}) as mem:
        fourth = mem.observe("wm", "fourth", scope_id="job-1")
    assert fourth.id == seeded_uuid(f"{seed}:4:0")
    assert journal(pg.app_dsn, mace, user)[-1][6] == epoch + timedelta(seconds=1,
                                                                       microseconds=1)
    # a one-call write with the job's anchor is a job transaction too; a read just reads
    anchor = {"user_id": user, "job_seed": seed}
    fifth = engine.observe(anchor, "long_term", "an episode of the job", typology="episodic")
    assert fifth.id == seeded_uuid(f"{seed}:5:0")
    assert fifth.created_at == epoch + timedelta(seconds=1, microseconds=2)
    assert [h.memory.id for h in engine.search(anchor, "episode of the job")] == [fifth.id]


def test_a_transaction_of_another_tenant_inside_a_jobs_block_takes_no_seeded_id(
        engine: Engine) -> None:
    with engine.tenant({"user_id": _user(), "job_seed": "seed-outer"}) as mem:
        inner = engine.observe({"user_id": _user()}, "long_term", "elsewhere",
                               typology="episodic")
        outer = mem.observe("wm", "in the job", scope_id="job-1")
    assert inner.id.version == 4
    assert outer.id == seeded_uuid("seed-outer:0:0")


def _sync_job(engine: Engine, anchor: dict[str, str]) -> None:
    with engine.tenant(anchor) as mem:
        a = mem.observe("wm", "alpha", scope_id="job-1")
        b = mem.observe("wm", "beta", scope_id="job-1")
        mem.use([a.id, b.id])
        mem.use([a.id])
        mem.tick()
    with engine.tenant(anchor) as mem:
        mem.tick()
        mem.end_scope("wm", "job-1", reflective_log_id="rl-1")


async def _async_job(engine: AsyncEngine, anchor: dict[str, str]) -> None:
    async with engine.tenant(anchor) as mem:
        a = await mem.observe("wm", "alpha", scope_id="job-1")
        b = await mem.observe("wm", "beta", scope_id="job-1")
        await mem.use([a.id, b.id])
        await mem.use([a.id])
        await mem.tick()
    async with engine.tenant(anchor) as mem:
        await mem.tick()
        await mem.end_scope("wm", "job-1", reflective_log_id="rl-1")


async def test_the_async_engine_writes_the_same_job_as_the_sync_one(
        engine: Engine, mace: AgentSpec, pg: PostgresHandle) -> None:
    seed = f"seed-{uuid.uuid4().hex[:8]}"
    sync_user, async_user = _user(), _user()
    _sync_job(engine, {"user_id": sync_user, "job_seed": seed})
    async with await AsyncEngine.connect(mace, pg.app_dsn, max_connections=2) as aengine:
        await _async_job(aengine, {"user_id": async_user, "job_seed": seed})
    ran = journal(pg.app_dsn, mace, sync_user)
    assert "promoted" in [e[2] for e in ran] and "observed" in [e[2] for e in ran]
    assert journal(pg.app_dsn, mace, async_user) == ran
    assert memory_rows(pg.app_dsn, mace, async_user) == memory_rows(pg.app_dsn, mace, sync_user)


def test_the_journal_head_read_is_the_app_roles_own_tenant(
        engine: Engine, mace: AgentSpec, pg: PostgresHandle) -> None:
    # another tenant's long journal does not move this tenant's ids
    busy, quiet = _user(), _user()
    with engine.tenant({"user_id": busy}) as mem:
        for n in range(3):
            mem.observe("wm", f"noise {n}", scope_id="job-1")
    with engine.tenant({"user_id": quiet, "job_seed": "seed-q"}) as mem:
        assert mem.observe("wm", "mine", scope_id="job-1").id == seeded_uuid("seed-q:0:0")
    with psycopg.connect(pg.app_dsn, autocommit=True) as conn:
        # outside any tenant the app role sees no journal at all
        assert conn.execute(sql.SQL("SELECT count(*) FROM mace.mace_memory_events")
                            ).fetchone() == (0,)
