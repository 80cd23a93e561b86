"""Seed 001's bounds on memory, on agents/mace.yaml and a capped variant, as the app role.

* CWM's token budget (``tiers[].capacity`` with ``on_full: evict``, seed 001 §1.B): a tick's
  promotion that takes a session's CWM past 512 estimated tokens evicts the rows with the
  fewest ticks left, journalled; a re-referenced row regains its ticks and stays.
* STORAGE_FULL from a declared capacity (``on_full: refuse``, seed 001 §9): a write past it
  is refused in its own statement by the database's capacity guard, with the seed's
  envelope and user message; nothing stored is touched, a ``storage_full`` event is
  journalled for the admin, and two writers at the edge cannot both pass.
* ``discipline.visibility.policy: mace_access`` (seed 001 §5, §10): the auditor role reads
  the compliance views the policy lists and no payload column; without the policy it does.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import errors as pg_errors
from psycopg import sql

from primitives._project import migrate
from primitives.compile import agent_tables
from primitives.db import SQLSTATE_CAPACITY, tenant_transaction
from primitives.engine import AsyncEngine, Engine
from primitives.errors import SpecError, StorageFull
from primitives.spec import AgentSpec, load_spec, load_spec_text
from tests.conftest import PostgresHandle

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")

FULL_TEXT = ("My memory is full, so I couldn't save that. Nothing was lost; an admin has to "
             "make room.")


def _variant(text: str, **replace: str) -> AgentSpec:
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new, 1)
    return load_spec_text(text, file="<mace variant>", policies_dir=ROOT / "policies")


MACE_TEXT = (ROOT / "agents" / "mace.yaml").read_text()
CAPPED_TEXT = MACE_TEXT.replace("agent: mace", "agent: mace_capped", 1).replace(
    "prefix: mace", "prefix: mcap", 1).replace(
    "    retention: {policy: mace_retention}\n",
    "    retention: {policy: mace_retention}\n    capacity: {rows: 3, tokens: 60}\n", 1).replace(
    "    ttl_ticks: 3                          # seed default; decremented on every tick()\n",
    "    ttl_ticks: 3\n    capacity: {rows: 2, per: scope}\n", 1)
CAPPED_TEXT = "".join(line for line in CAPPED_TEXT.splitlines(keepends=True)
                      if not line.lstrip().startswith("policy: mace_access"))


@pytest.fixture(scope="module")
def mace(pg: PostgresHandle) -> AgentSpec:
    spec = load_spec(ROOT / "agents" / "mace.yaml")
    migrate([spec], dsn=pg.admin_dsn, progress=lambda _: None)
    return spec


@pytest.fixture(scope="module")
def capped(pg: PostgresHandle) -> AgentSpec:
    """mace with 3 rows / 60 tokens of long-term memory per user, 2 WM rows per job, and no
    access policy."""
    spec = _variant(CAPPED_TEXT)
    assert spec.tier("long_term").capacity is not None and spec.tier("wm").capacity is not None
    assert spec.discipline.visibility.policy is None
    migrate([spec], dsn=pg.admin_dsn, progress=lambda _: None)
    return spec


@pytest.fixture(scope="module")
def engine(pg: PostgresHandle, mace: AgentSpec) -> Iterator[Engine]:
    with Engine.connect(mace, pg.app_dsn, max_connections=2) as eng:
        yield eng


@pytest.fixture(scope="module")
def capped_engine(pg: PostgresHandle, capped: AgentSpec) -> Iterator[Engine]:
    with Engine.connect(capped, pg.app_dsn, max_connections=3) as eng:
        yield eng


def _user() -> dict[str, str]:
    return {"user_id": f"u-{uuid.uuid4().hex[:10]}"}


def _events(pg: PostgresHandle, spec: AgentSpec, user: dict[str, str]) -> list[tuple[Any, ...]]:
    """The tenant's journal in order (kind, memory_id, payload), read as the app role."""
    with psycopg.connect(pg.app_dsn, autocommit=True) as conn, \
            tenant_transaction(conn, user["user_id"]):
        assert conn.info.user == "primitives_app"
        return conn.execute(sql.SQL("SELECT kind, memory_id, payload FROM {} ORDER BY seq")
                            .format(agent_tables(spec).events.ident)).fetchall()


def _text(label: str, tokens: int) -> str:
    """A text of exactly ``tokens`` estimated tokens (4 characters each)."""
    body = (label + " ") * (tokens * 4)
    return body[: tokens * 4]


def _promote(mem: Any, content: str, session: str) -> Any:
    """Write ``content`` to WM, reference it twice, tick: it moves to CWM ``session``."""
    item = mem.observe("wm", content, scope_id="job-1")
    mem.use([item.id])
    mem.use([item.id])
    assert mem.tick(into_scope=session).promoted == 1
    (row,) = [r for r in mem.ticked("cwm", scope_id=session) if r.derived_from == [str(item.id)]]
    return row


# CWM token budget -------------------------------------------------------------------------------
def test_mace_declares_cwm_token_budget_of_512_per_session(mace: AgentSpec) -> None:
    capacity = mace.tier("cwm").capacity
    assert capacity is not None
    assert (capacity.tokens, capacity.rows, capacity.per, capacity.on_full) == (
        512, None, "scope", "evict")


def test_cwm_past_its_token_budget_evicts_the_row_with_fewest_ticks_left(
        engine: Engine, mace: AgentSpec, pg: PostgresHandle) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        a = _promote(mem, _text("alpha", 200), "s-1")            # tick 1
        other = _promote(mem, _text("other", 200), "s-2")        # tick 2: another session
        b = _promote(mem, _text("bravo", 200), "s-1")            # tick 3
        assert {r.id: r.ttl_ticks for r in mem.ticked("cwm", scope_id="s-1")} == {
            a.id: 8, b.id: 10}
        c = _promote(mem, _text("charlie", 200), "s-1")          # tick 4: 600 > 512 tokens
        kept = {r.id: r.ttl_ticks for r in mem.ticked("cwm", scope_id="s-1")}
        assert kept == {b.id: 9, c.id: 10}                       # alpha had 7 ticks left
        assert mem.get(a.id) is None
        assert [r.id for r in mem.ticked("cwm", scope_id="s-2")] == [other.id]  # per session
    evicted = [(m, p) for k, m, p in _events(pg, mace, user) if k == "evicted"]
    assert [m for m, _ in evicted] == [a.id]
    payload = evicted[0][1]
    assert payload["tier"] == "cwm" and payload["scope_id"] == "s-1"
    assert payload["tokens"] == 200 and payload["tokens_with"] == 600
    assert payload["capacity"] == {"rows": None, "tokens": 512, "per": "scope"}
    assert payload["content_sha256"] == hashlib.sha256(
        _text("alpha", 200).encode()).hexdigest()
    assert "content" not in payload


def test_a_re_referenced_cwm_row_regains_its_ticks_and_is_kept_over_the_budget(
        engine: Engine) -> None:
    with engine.tenant(_user()) as mem:
        a = _promote(mem, _text("alpha", 200), "s-1")
        _promote(mem, _text("other", 10), "s-2")
        b = _promote(mem, _text("bravo", 200), "s-1")
        mem.tick()
        assert {r.id: r.ttl_ticks for r in mem.ticked("cwm", scope_id="s-1")} == {
            a.id: 7, b.id: 9}
        mem.use([a.id])                                          # alpha: 10 ticks again
        c = _promote(mem, _text("charlie", 200), "s-1")
        assert {r.id: r.ttl_ticks for r in mem.ticked("cwm", scope_id="s-1")} == {
            a.id: 9, c.id: 10}                                   # bravo (8 left) went
        assert mem.get(b.id) is None


def test_cwm_within_its_budget_evicts_nothing(engine: Engine, mace: AgentSpec,
                                             pg: PostgresHandle) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        rows = [_promote(mem, _text(f"item{i}", 128), "s-1") for i in range(4)]  # 512 exactly
        assert {r.id for r in mem.ticked("cwm", scope_id="s-1")} == {r.id for r in rows}
    assert not [k for k, _, _ in _events(pg, mace, user) if k == "evicted"]


def test_an_evicting_capacity_needs_a_tier_that_references_promotions_fill() -> None:
    text = MACE_TEXT.replace(
        "    ttl_ticks: 3                          # seed default; decremented on every tick()\n",
        "    ttl_ticks: 3\n    capacity: {tokens: 100, on_full: evict}\n", 1)
    with pytest.raises(SpecError, match="tier 'wm' evicts at tick"):
        _variant(text)
    with pytest.raises(SpecError, match="names rows, tokens or both"):
        _variant(MACE_TEXT.replace("capacity: {tokens: 512, per: scope, on_full: evict}",
                                   "capacity: {per: scope, on_full: evict}", 1))


# STORAGE_FULL from a declared capacity ----------------------------------------------------------
def test_a_write_past_the_declared_rows_is_refused_with_storage_full_and_loses_nothing(
        capped_engine: Engine, capped: AgentSpec, pg: PostgresHandle) -> None:
    user = _user()
    kept = [capped_engine.observe(user, "long_term", f"episode {i}", typology="episodic")
            for i in range(3)]
    with pytest.raises(StorageFull) as caught:   # the one-statement write path
        capped_engine.observe(user, "long_term", "episode 3", typology="episodic")
    envelope = caught.value.envelope()
    assert envelope["error"] == "STORAGE_FULL" and envelope["user_message"] == FULL_TEXT
    assert (envelope["tier"], envelope["rows"], envelope["used_rows"]) == ("long_term", 3, 3)
    assert envelope["per"] == "tenant"
    with pytest.raises(StorageFull):             # the general path, inside a transaction
        with capped_engine.tenant(user) as mem:
            mem.observe("long_term", "episode 4", typology="episodic", tags=["x"])
    with capped_engine.tenant(user) as mem:
        assert [mem.get(m.id).content for m in kept] == [  # type: ignore[union-attr]
            "episode 0", "episode 1", "episode 2"]
        count = mem.connection.execute(sql.SQL("SELECT count(*) FROM {} WHERE tier = %s")
                                       .format(mem.ctx.tables.memories.ident),
                                       ("long_term",)).fetchone()
        assert count == (3,)
    journal = _events(pg, capped, user)
    full = [p for k, _, p in journal if k == "storage_full"]
    assert len(full) == 2
    assert full[0]["content_sha256"] == hashlib.sha256(b"episode 3").hexdigest()
    assert full[0]["error"] == "STORAGE_FULL" and full[0]["tier"] == "long_term"
    assert all("episode" not in str(p) for p in full)
    assert [k for k, _, _ in journal].count("observed") == 3


def test_the_envelope_names_the_journalled_event(
        capped_engine: Engine, capped: AgentSpec, pg: PostgresHandle) -> None:
    user = _user()
    for i in range(3):
        capped_engine.observe(user, "long_term", f"e{i}", typology="episodic")
    with pytest.raises(StorageFull) as caught:
        capped_engine.observe(user, "long_term", "e3", typology="episodic")
    with psycopg.connect(pg.app_dsn, autocommit=True) as conn, \
            tenant_transaction(conn, user["user_id"]):
        row = conn.execute(sql.SQL("SELECT kind FROM {} WHERE event_id = %s").format(
            agent_tables(capped).events.ident), (caught.value.envelope()["event_id"],)).fetchone()
    assert row == ("storage_full",)


def test_a_write_past_the_declared_tokens_is_refused(capped_engine: Engine) -> None:
    user = _user()
    capped_engine.observe(user, "long_term", _text("long", 50), typology="episodic")
    with pytest.raises(StorageFull) as caught:
        capped_engine.observe(user, "long_term", _text("more", 11), typology="episodic")
    envelope = caught.value.envelope()
    assert (envelope["tokens"], envelope["used_tokens"], envelope["write_tokens"]) == (60, 50, 11)
    capped_engine.observe(user, "long_term", _text("fits", 10), typology="episodic")  # 60: fits


def test_a_per_scope_capacity_counts_each_job_apart(capped_engine: Engine) -> None:
    user = _user()
    with capped_engine.tenant(user) as mem:
        mem.observe("wm", "one", scope_id="job-1")
        mem.observe("wm", "two", scope_id="job-1")
        mem.observe("wm", "one", scope_id="job-2")       # another job: room of its own
    with pytest.raises(StorageFull) as caught:
        with capped_engine.tenant(user) as mem:
            mem.observe("wm", "three", scope_id="job-1")
    assert caught.value.envelope()["scope_id"] == "job-1"
    with capped_engine.tenant(user) as mem:
        assert sorted(r.content for r in mem.ticked("wm", scope_id="job-1")) == ["one", "two"]


def test_superseded_and_expired_rows_free_their_room(capped_engine: Engine) -> None:
    user = _user()
    with capped_engine.tenant(user) as mem:
        first = mem.observe("wm", "one", scope_id="job-1", ttl_ticks=1)
        mem.observe("wm", "two", scope_id="job-1")
        mem.tick()                                       # "one" expires
        assert mem.get(first.id) is None
        mem.observe("wm", "three", scope_id="job-1")     # fits again
    with capped_engine.tenant(user) as mem:
        mem.observe("wm", "first version", scope_id="job-2", key="k")
        mem.observe("wm", "second version", scope_id="job-2", key="k")  # supersedes it
        mem.observe("wm", "another", scope_id="job-2")   # 2 live rows in job-2: fits
        assert sorted(r.content for r in mem.ticked("wm", scope_id="job-2")) == [
            "another", "second version"]


def test_two_concurrent_writers_at_the_edge_cannot_both_pass(
        capped_engine: Engine, capped: AgentSpec) -> None:
    user = _user()
    for i in range(2):
        capped_engine.observe(user, "long_term", f"seed {i}", typology="episodic")
    outcome: list[BaseException | None] = []
    started = threading.Event()

    def second() -> None:
        try:
            started.set()
            capped_engine.observe(user, "long_term", "the second writer", typology="episodic")
            outcome.append(None)
        except BaseException as err:  # the thread reports what it met
            outcome.append(err)

    with capped_engine.tenant(user) as mem:
        mem.observe("long_term", "the first writer", typology="episodic")   # the 3rd row
        thread = threading.Thread(target=second)
        thread.start()
        started.wait(10)
        thread.join(1.0)
        assert thread.is_alive(), "the second writer did not wait for the first's lock"
    thread.join(20)
    assert len(outcome) == 1 and isinstance(outcome[0], StorageFull)
    with capped_engine.tenant(user) as mem:
        rows = mem.connection.execute(sql.SQL("SELECT content FROM {} WHERE tier = %s")
                                      .format(mem.ctx.tables.memories.ident),
                                      ("long_term",)).fetchall()
    assert sorted(r[0] for r in rows) == ["seed 0", "seed 1", "the first writer"]


def test_a_writer_at_the_edge_passes_when_the_first_rolls_back(capped_engine: Engine) -> None:
    user = _user()
    for i in range(2):
        capped_engine.observe(user, "long_term", f"seed {i}", typology="episodic")
    outcome: list[BaseException | None] = []

    def second() -> None:
        try:
            capped_engine.observe(user, "long_term", "the second writer", typology="episodic")
            outcome.append(None)
        except BaseException as err:
            outcome.append(err)

    thread = threading.Thread(target=second)
    with pytest.raises(RuntimeError):
        with capped_engine.tenant(user) as mem:
            mem.observe("long_term", "the first writer", typology="episodic")
            thread.start()
            thread.join(1.0)
            assert thread.is_alive()
            raise RuntimeError("the first writer gives up")
    thread.join(20)
    assert outcome == [None]


def test_the_database_refuses_plain_sql_past_the_capacity_as_the_app_role(
        capped_engine: Engine, capped: AgentSpec, pg: PostgresHandle) -> None:
    user = _user()
    for i in range(3):
        capped_engine.observe(user, "long_term", f"e{i}", typology="episodic")
    with psycopg.connect(pg.app_dsn, autocommit=True) as conn, \
            tenant_transaction(conn, user["user_id"]):
        assert conn.info.user == "primitives_app"
        with pytest.raises(psycopg.Error) as caught:
            conn.execute(sql.SQL(
                "INSERT INTO {} (user_id, id, tier, typology, key, content, actor) "
                "SELECT user_id, gen_random_uuid(), tier, typology, gen_random_uuid()::text, "
                "'copied', actor FROM {} LIMIT 1").format(
                agent_tables(capped).memories.ident, agent_tables(capped).memories.ident))
        assert caught.value.sqlstate == SQLSTATE_CAPACITY
        assert "tier long_term is full: 3 of 3 rows" in str(caught.value)


async def test_the_async_engine_meets_the_same_capacity(
        pg: PostgresHandle, capped: AgentSpec) -> None:
    user = _user()
    async with await AsyncEngine.connect(capped, pg.app_dsn, max_connections=2) as eng:
        for i in range(3):
            await eng.observe(user, "long_term", f"e{i}", typology="episodic")
        with pytest.raises(StorageFull) as caught:
            await eng.observe(user, "long_term", "e3", typology="episodic")
        assert caught.value.envelope()["user_message"] == FULL_TEXT
        assert "event_id" in caught.value.envelope()
        with pytest.raises(StorageFull):
            async with eng.tenant(user) as mem:
                await mem.observe("long_term", "e4", typology="episodic")
    kinds = [k for k, _, _ in _events(pg, capped, user)]
    assert kinds.count("storage_full") == 2 and kinds.count("observed") == 3
    await asyncio.sleep(0)


# discipline.visibility.policy: mace_access ------------------------------------------------------
def _as_auditor(pg: PostgresHandle, query: sql.Composable) -> list[tuple[Any, ...]]:
    with psycopg.connect(pg.auditor_dsn, autocommit=True) as conn:
        assert conn.info.user == "primitives_auditor"
        return conn.execute(query).fetchall()


def test_mace_access_keeps_payloads_and_unlisted_views_from_the_auditor(
        engine: Engine, mace: AgentSpec, pg: PostgresHandle) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        episode = mem.observe("long_term", "the user moved to Lisbon", typology="episodic",
                              value={"city": "Lisbon"})
    tables = agent_tables(mace)
    # allowed: a listed compliance view, and the memory rows' non-payload columns
    lineage = _as_auditor(pg, sql.SQL("SELECT memory_id, kind FROM {} WHERE user_id = {}")
                          .format(tables.audit_lineage.ident, sql.Literal(user["user_id"])))
    assert (episode.id, "observed") in lineage
    assert _as_auditor(pg, sql.SQL("SELECT id, tier, content FROM {} WHERE id = {}").format(
        tables.memories.ident, sql.Literal(str(episode.id)))) == [
        (episode.id, "long_term", "the user moved to Lisbon")]
    # refused: the payload, a view the policy does not list, an action request's payload
    refused = [
        sql.SQL("SELECT value FROM {}").format(tables.memories.ident),
        sql.SQL("SELECT * FROM {}").format(tables.memories.ident),
        sql.SQL("SELECT count(*) FROM {}").format(tables.audit_erasures.ident),
        sql.SQL("SELECT payload FROM {}").format(tables.action_requests.ident),  # type: ignore[union-attr]
    ]
    for query in refused:
        with pytest.raises(pg_errors.InsufficientPrivilege):
            _as_auditor(pg, query)


def test_without_an_access_policy_the_auditor_reads_payloads(
        capped_engine: Engine, capped: AgentSpec, pg: PostgresHandle) -> None:
    user = _user()
    episode = capped_engine.observe(user, "long_term", "the user moved to Porto",
                                    typology="episodic", value={"city": "Porto"})
    tables = agent_tables(capped)
    assert _as_auditor(pg, sql.SQL("SELECT value FROM {} WHERE id = {}").format(
        tables.memories.ident, sql.Literal(str(episode.id)))) == [({"city": "Porto"},)]
    assert _as_auditor(pg, sql.SQL("SELECT count(*) FROM {} WHERE user_id = {}").format(
        tables.audit_erasures.ident, sql.Literal(user["user_id"]))) == [(0,)]


def test_the_app_role_still_reads_its_own_payloads_under_mace_access(engine: Engine) -> None:
    user = _user()
    with engine.tenant(user) as mem:
        episode = mem.observe("long_term", "the user likes jazz", typology="episodic",
                              value={"genre": "jazz"})
    with engine.tenant(user) as mem:
        assert mem.connection.info.user == "primitives_app"
        assert mem.get(episode.id).value == {"genre": "jazz"}  # type: ignore[union-attr]


def test_a_capacity_taken_out_of_the_spec_stops_refusing_after_migrate(
        pg: PostgresHandle, admin_conn: psycopg.Connection[Any]) -> None:
    capped_text = CAPPED_TEXT.replace("agent: mace_capped", "agent: mace_uncapped", 1).replace(
        "prefix: mcap", "prefix: mdrop", 1)
    capped = _variant(capped_text)
    migrate([capped], dsn=pg.admin_dsn, progress=lambda _: None)
    user = _user()
    with Engine.connect(capped, pg.app_dsn, max_connections=2) as engine:
        for i in range(3):
            engine.observe(user, "long_term", f"e{i}", typology="episodic")
        with pytest.raises(StorageFull):
            engine.observe(user, "long_term", "e3", typology="episodic")
    uncapped = _variant(capped_text, **{"    capacity: {rows: 3, tokens: 60}\n": "",
                                        "    capacity: {rows: 2, per: scope}\n": ""})
    assert uncapped.tier("long_term").capacity is None and uncapped.tier("wm").capacity is None
    migrate([uncapped], dsn=pg.admin_dsn, progress=lambda _: None)
    with Engine.connect(uncapped, pg.app_dsn, max_connections=2) as engine:
        written = engine.observe(user, "long_term", "e3", typology="episodic")
    assert written.content == "e3"
    assert admin_conn.execute(
        "SELECT count(*) FROM pg_trigger WHERE tgrelid = %s::regclass AND tgname = %s",
        (agent_tables(uncapped).memories.qualified, "primitives_capacity_guard"),
    ).fetchone() == (0,)
