"""Seed 001's golden tests of tick-based working memory, on agents/mace.yaml as the app role.

M-T1 (WM TTL and removal) and M-T2 (WM -> CWM promotion) do what seed 001 §8 says; the
other tests pin what the tick operations promise around them: the journal, idempotence per
WM id, CWM written only through promotion, CWM re-reference, refusals.
M-T7 runs a job twice with one seed and compares the journals byte for byte.
(M-T4, M-T5, M-T6, M-T8 are in test_mace_golden_sem.py; the 200-event replay across a server
restart is in test_mace_replay.py.)
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives._project import migrate
from primitives.compile import agent_tables
from primitives.db import tenant_transaction
from primitives.engine import AsyncEngine, Engine
from primitives.errors import GovernanceError, PolicyViolation, TenancyError
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

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


def _user() -> dict[str, str]:
    return {"user_id": f"u-{uuid.uuid4().hex[:10]}"}


def _events(pg: PostgresHandle, spec: AgentSpec, user: dict[str, str]) -> list[tuple[Any, ...]]:
    """The tenant's journal in order (kind, memory_id, payload), read as the app role."""
    tables = agent_tables(spec)
    with psycopg.connect(pg.app_dsn, autocommit=True) as conn, \
            tenant_transaction(conn, user["user_id"]):
        return conn.execute(sql.SQL("SELECT kind, memory_id, payload FROM {} ORDER BY seq")
                            .format(tables.events.ident)).fetchall()


def test_m_t1_wm_item_with_ttl_2_is_removed_after_two_ticks(
        engine: Engine, mace: AgentSpec, pg: PostgresHandle) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        item = mem.observe("wm", "the user prefers short answers", scope_id="job-1",
                           ttl_ticks=2)
        other = mem.observe("wm", "intermediate fact", scope_id="job-1")  # the tier's 3
        assert [(r.id, r.ttl_ticks) for r in mem.ticked("wm")] == [
            (r.id, r.ttl_ticks) for r in mem.ticked("wm")]  # readable, stable
        assert {r.id: r.ttl_ticks for r in mem.ticked("wm")} == {item.id: 2, other.id: 3}
    with engine.tenant(user) as mem:
        assert mem.tick() == (0, 0, 2)
        assert {r.id: (r.ttl_ticks, r.age_ticks) for r in mem.ticked("wm")} == {
            item.id: (1, 1), other.id: (2, 1)}
    with engine.tenant(user) as mem:
        assert mem.tick() == (0, 1, 1)
        assert [r.id for r in mem.ticked("wm")] == [other.id]
        assert mem.get(item.id) is None
    kinds = [(k, m) for k, m, _ in _events(pg, mace, user) if k in ("expired", "ticked")]
    assert kinds == [("ticked", None), ("expired", item.id), ("ticked", None)]


def test_m_t2_wm_item_referenced_twice_within_the_window_moves_to_cwm(
        engine: Engine, mace: AgentSpec, pg: PostgresHandle) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        item = mem.observe("wm", "budget meeting moved to Friday", scope_id="job-1")
        stays = mem.observe("wm", "referenced once only", scope_id="job-1")
        mem.use([item.id, stays.id])
        assert mem.tick() == (0, 0, 2)  # one reference is not enough
        mem.use([item.id])  # the second, one tick later: within PROMOTION_WINDOW=4
        result = mem.tick(into_scope="session-1")
        assert result.promoted == 1
        cwm = mem.ticked("cwm")
        assert [(r.content, r.scope_id, r.ttl_ticks, r.derived_from) for r in cwm] == [
            ("budget meeting moved to Friday", "session-1", 10, [str(item.id)])]
        assert [r.id for r in mem.ticked("wm")] == [stays.id]
        assert mem.get(item.id) is None
        assert mem.tick(into_scope="session-1").promoted == 0  # nothing left to promote
    journal = _events(pg, mace, user)
    promoted = [(m, p) for k, m, p in journal if k == "promoted"]
    assert len(promoted) == 1 and promoted[0][0] == cwm[0].id
    assert promoted[0][1]["derived_from"] == [str(item.id)]
    assert promoted[0][1]["references"] == 2
    assert [m for k, m, _ in journal if k == "removed_at_promotion"] == [item.id]
    assert [m for k, m, _ in journal if k == "referenced"].count(item.id) == 2


def test_m_t3_ending_the_job_appends_an_episodic_summary_of_cwm(
        engine: Engine, mace: AgentSpec, pg: PostgresHandle) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        first = mem.observe("wm", "budget meeting moved to Friday", scope_id="job-7")
        second = mem.observe("wm", "the user prefers short answers", scope_id="job-7")
        mem.observe("wm", "scratch value", scope_id="job-7")
        mem.use([first.id, second.id])
        mem.use([first.id, second.id])
        assert mem.tick(into_scope="session-1").promoted == 2
        cwm = {r.content: r for r in mem.ticked("cwm")}
        ended = mem.end_scope("wm", "job-7", reflective_log_id="rl-42")
        assert ended.removed == 1  # the WM row left; CWM stays for the session
        assert sorted(r.content for r in mem.ticked("cwm")) == sorted(cwm)
    journal = _events(pg, mace, user)
    [summary_id] = [m for k, m, p in journal
                    if k == "observed" and p.get("via") == "job_summary"]
    with engine.tenant(user) as mem:
        summary = mem.get(summary_id)
        assert summary is not None
        assert (summary.tier, summary.typology) == ("long_term", "episodic")
        assert summary.content == ("job job-7: budget meeting moved to Friday; "
                                   "the user prefers short answers")
        value = summary.value
        assert value["job"] == "job-7" and value["reflective_log_id"] == "rl-42"
        assert [i["content"] for i in value["items"]] == [
            "budget meeting moved to Friday", "the user prefers short answers"]
        assert [i["id"] for i in value["items"]] == [
            str(cwm["budget meeting moved to Friday"].id),
            str(cwm["the user prefers short answers"].id)]
        assert [i["derived_from"] for i in value["items"]] == [[str(first.id)],
                                                               [str(second.id)]]
        # no SEM rows yet: the hash of the empty snapshot
        assert value["sem_snapshot_hash"] == hashlib.sha256(b"").hexdigest()
        # append-only: ending the job again appends nothing new
        mem.end_scope("wm", "job-7", reflective_log_id="rl-42")
    assert sum(1 for k, _, p in _events(pg, mace, user)
               if k == "observed" and p.get("via") == "job_summary") == 1


def test_a_job_without_cwm_rows_writes_no_summary(
        engine: Engine, mace: AgentSpec, pg: PostgresHandle) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        mem.observe("wm", "never referenced", scope_id="job-1")
        assert mem.end_scope("wm", "job-1").removed == 1
    assert not [k for k, _, p in _events(pg, mace, user) if p.get("via") == "job_summary"]


def test_references_outside_the_window_do_not_promote(engine: Engine) -> None:
    with engine.tenant(_user()) as mem:
        item = mem.observe("wm", "an old hint", scope_id="job-1", ttl_ticks=9)
        mem.use([item.id])
        for _ in range(4):
            assert mem.tick().promoted == 0
        mem.use([item.id])  # 4 ticks after the first: the first fell out of the window
        assert mem.tick().promoted == 0
        mem.use([item.id])  # two within the window now
        assert mem.tick().promoted == 1


def test_promotion_is_idempotent_per_wm_id_even_when_the_source_stays(
        engine: Engine, mace: AgentSpec, pg: PostgresHandle) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        item = mem.observe("wm", "linked to an action", scope_id="job-1")
        mem.link_action("act-1", [item.id], "evidence")  # action-linked rows stay
        mem.use([item.id, item.id])
        mem.use([item.id])
        assert mem.tick().promoted == 1
        assert [r.id for r in mem.ticked("wm")] == [item.id]  # kept: action-linked
        mem.use([item.id])
        assert mem.tick().promoted == 0  # the ledger has this WM id
    assert [k for k, _, _ in _events(pg, mace, user)].count("promoted") == 1


def test_cwm_is_written_only_through_promotion(engine: Engine) -> None:
    with engine.tenant(_user()) as mem, pytest.raises(GovernanceError, match="only by promotion"):
        mem.observe("cwm", "a direct write", scope_id="session-1")


def test_a_re_referenced_cwm_row_gets_its_ttl_back(engine: Engine) -> None:
    with engine.tenant(_user()) as mem:
        item = mem.observe("wm", "keep me around", scope_id="job-1")
        mem.use([item.id])
        mem.use([item.id])
        mem.tick(into_scope="s")
        (row,) = mem.ticked("cwm")
        for _ in range(3):
            mem.tick()
        assert mem.ticked("cwm")[0].ttl_ticks == 7
        mem.use([row.id])
        assert mem.ticked("cwm")[0].ttl_ticks == 10
        for _ in range(10):
            mem.tick()
        assert mem.ticked("cwm") == []


def test_ticks_are_refused_where_they_do_not_apply(engine: Engine) -> None:
    user = _user()
    with engine.tenant(user) as mem, pytest.raises(PolicyViolation, match="declares no ttl_ticks"):
        mem.observe("long_term", "an episode", typology="episodic", ttl_ticks=2)
    with engine.tenant(user) as mem, pytest.raises(PolicyViolation, match="positive integer"):
        mem.observe("wm", "bad ttl", ttl_ticks=0)
    with engine.tenant(user) as mem:
        item = mem.observe("wm", "real", scope_id="job-1")
    with pytest.raises(PolicyViolation, match="nothing was referenced"), \
            engine.tenant(user) as mem:
        mem.use([item.id, uuid.uuid4()])
    with engine.tenant(user) as mem:
        assert mem.ticked("wm")[0].references == 0  # the refused call changed nothing


def test_a_tick_of_one_job_leaves_other_jobs_and_tenants_alone(engine: Engine) -> None:
    user, other = _user(), _user()
    with engine.tenant(user) as mem:
        mem.observe("wm", "job one", scope_id="job-1", ttl_ticks=1)
        mem.observe("wm", "job two", scope_id="job-2", ttl_ticks=1)
    with engine.tenant(other) as mem:
        mem.observe("wm", "someone else's", scope_id="job-1", ttl_ticks=1)
    with engine.tenant(user) as mem:
        assert mem.tick(scope_id="job-1").expired == 1
        assert [r.content for r in mem.ticked("wm")] == ["job two"]
    with engine.tenant(other) as mem:
        assert [r.content for r in mem.ticked("wm")] == ["someone else's"]


async def test_the_async_engine_ticks_through_the_same_core(
        pg: PostgresHandle, mace: AgentSpec) -> None:
    async with await AsyncEngine.connect(mace, pg.app_dsn, max_connections=2) as engine:
        async with engine.tenant(_user()) as mem:
            item = await mem.observe("wm", "async item", scope_id="job-1")
            await mem.use([item.id])
            await mem.use([item.id])
            assert (await mem.tick()).promoted == 1
            assert [r.content for r in await mem.ticked("cwm")] == ["async item"]


def test_the_declared_provenance_keys_are_accepted_and_recorded_with_each_write(
        engine: Engine, mace: AgentSpec, pg: PostgresHandle) -> None:
    user = _user()
    anchor = {**user, "job_seed": "seed-7", "trace_id": "tr-1", "reflective_log_id": "rl-9"}
    fast = engine.observe(anchor, "long_term", "an episode", typology="episodic")
    with engine.tenant(anchor) as mem:
        item = mem.observe("wm", "a working item", scope_id="job-1")
        mem.use([item.id])
        mem.use([item.id])
        mem.tick()
        mem.end_scope("wm", "job-1")  # the reflective-log id comes from the anchor
    tables = agent_tables(mace)
    with psycopg.connect(pg.app_dsn, autocommit=True) as conn, \
            tenant_transaction(conn, user["user_id"]):
        rows = dict(conn.execute(sql.SQL("SELECT id, provenance FROM {}").format(
            tables.memories.ident)).fetchall())
    expected = {"job_seed": "seed-7", "trace_id": "tr-1", "reflective_log_id": "rl-9"}
    assert {k: rows[fast.id][k] for k in expected} == expected
    summaries = [p for p in rows.values() if "job" in p]
    assert len(summaries) == 1 and summaries[0]["reflective_log_id"] == "rl-9"
    observed = [p for k, _, p in _events(pg, mace, user) if k == "observed"]
    assert all(p["provenance"] == expected for p in observed) and len(observed) == 3
    with pytest.raises(TenancyError, match="provenance keys: job_seed"):
        engine.observe({**user, "session": "x"}, "wm", "refused", scope_id="job-1")


def test_every_write_path_gives_a_wm_row_its_ticks(engine: Engine) -> None:
    with engine.tenant(_user()) as mem:
        many = mem.observe_many([{"tier": "wm", "content": "one", "scope_id": "job-1"},
                                 {"tier": "wm", "content": "two", "scope_id": "job-1",
                                  "ttl_ticks": 1}])
        assert {r.id: r.ttl_ticks for r in mem.ticked("wm")} == {many[0].id: 3, many[1].id: 1}
        assert mem.tick().expired == 1


# M-T7 -------------------------------------------------------------------------------------------
def test_m_t7_a_replay_with_the_same_seed_reproduces_promotions_and_episodic_writes(
        engine: Engine, mace: AgentSpec, pg: PostgresHandle) -> None:
    from primitives.engine._determinism import seeded_epoch
    from primitives.engine._ids import seeded_uuid
    from tests.integration._mace_job import journal, memory_rows, run_job, table_rows

    seed = f"seed-{uuid.uuid4().hex[:8]}"
    first, replay, other = _user(), _user(), _user()
    run_job(engine, {**first, "job_seed": seed}, rounds=2)
    run_job(engine, {**replay, "job_seed": seed}, rounds=2)  # the replay: same seed, same calls
    run_job(engine, {**other, "job_seed": seed + "-other"}, rounds=2)
    ran, replayed = (journal(pg.app_dsn, mace, u["user_id"]) for u in (first, replay))
    kinds = [row[2] for row in ran]
    # two promotions a round; round 0's other items expire in round 1
    assert kinds.count("promoted") == 4 and kinds.count("expired") == 2
    assert kinds.count("sem_put") == 2 and kinds.count("approval") == 1
    assert memory_rows(pg.app_dsn, mace, replay["user_id"]) == memory_rows(
        pg.app_dsn, mace, first["user_id"])
    stored = table_rows(pg.app_dsn, mace, first["user_id"])
    assert all(stored[t] for t in ("mace_scopes", "mace_promotions", "mace_action_requests",
                                   "mace_approvals"))
    assert table_rows(pg.app_dsn, mace, replay["user_id"]) == stored
    # the same events, ids, payloads, seeded times and chain hashes, byte for byte
    assert replayed == ran
    episodic = [(r[0], r[6]) for r in memory_rows(pg.app_dsn, mace, first["user_id"])
                if (r[1], r[2]) == ("long_term", "episodic")]
    assert len(episodic) == 2  # the episode and the job-end summary
    assert [(r[0], r[6]) for r in memory_rows(pg.app_dsn, mace, replay["user_id"])
            if (r[1], r[2]) == ("long_term", "episodic")] == episodic
    summary = next(v for _, v in episodic if v.get("job") == "job-1")
    assert summary["sem_snapshot_hash"] == memory_sem_hash(pg, mace, first)
    with engine.tenant(first) as mem:
        snapshot = mem.sem_snapshot()
    assert snapshot.hash == summary["sem_snapshot_hash"]
    assert [(k, v) for k, v, _ in snapshot.rows] == [
        ("user/calendar/budget_meeting", {"value": {"day": "Friday"}}),
        ("user/profile/favorite_color", {"value": "cerulean"})]
    assert all(ts.startswith(str(seeded_epoch(seed).year)) for _, _, ts in snapshot.rows)
    # ids and times come from the seed: another seed, other ids; the clock starts at its epoch
    assert ran[0][6] == seeded_epoch(seed)
    assert ran[0][1] == seeded_uuid(f"{seed}:0:1")  # the first write's row is :0:0
    assert all(r[1].version == 8 for r in ran)
    # an event a set-based statement wrote takes its id from the seed and its seq; a promoted
    # row's id comes from the seed, the rule and its source
    for seq, event_id, kind, memory_id, _, payload, *_ in ran:
        if kind == "referenced":
            assert event_id == seeded_uuid(f"{seed}:event:{seq}")
        if kind == "promoted":
            assert memory_id == seeded_uuid(
                f"{seed}:{payload['rule']}:{payload['derived_from'][0]}")
    mine = {r[0] for r in memory_rows(pg.app_dsn, mace, first["user_id"])}
    assert mine and all(i.version == 8 for i in mine)
    assert mine.isdisjoint(r[0] for r in memory_rows(pg.app_dsn, mace, other["user_id"]))


def memory_sem_hash(pg: PostgresHandle, spec: AgentSpec, user: dict[str, str]) -> str:
    """The SEM snapshot hash recomputed here from the rows, as seed 001 §6 defines it."""
    tables = agent_tables(spec)
    with psycopg.connect(pg.app_dsn, autocommit=True) as conn, \
            tenant_transaction(conn, user["user_id"]):
        rows = conn.execute(sql.SQL(
            "SELECT key, value::text, to_char(created_at AT TIME ZONE 'UTC', "
            "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') FROM {} WHERE typology = 'semantic' "
            "AND superseded_at IS NULL AND tombstoned_at IS NULL").format(
                tables.memories.ident)).fetchall()
    import json
    lines = sorted(f"{k}{json.dumps(json.loads(v), sort_keys=True, separators=(',', ':'))}{ts}"
                   for k, v, ts in rows)
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()
