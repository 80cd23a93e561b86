"""Seed 001 §8 golden tests M-T4, M-T5, M-T6 and M-T8 on ``agents/mace.yaml``, as the app role,
with the governed SEM paths around them: user intent, approval, PROMOTION_LOOP, deletion."""

from __future__ import annotations

import threading
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
from primitives.engine._retry import backoff_seconds
from primitives.engine._sem import canonical_key
from primitives.errors import (
    GovernanceError,
    MemoryWriteFail,
    PrivacyBlocked,
    PromotionLoop,
    StorageFull,
)
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")

WRITE_FAIL_TEXT = ("I tried to save that but my memory failed. I might not remember this next "
                   "time.")


@pytest.fixture(scope="module")
def mace(pg: PostgresHandle) -> AgentSpec:
    spec = load_spec(ROOT / "agents" / "mace.yaml")
    migrate([spec], dsn=pg.admin_dsn, progress=lambda _: None)
    return spec


@pytest.fixture(scope="module")
def engine(pg: PostgresHandle, mace: AgentSpec) -> Iterator[Engine]:
    with Engine.connect(mace, pg.app_dsn, max_connections=2) as eng:
        yield eng


def _anchor() -> dict[str, str]:
    return {"user_id": f"u-{uuid.uuid4().hex[:10]}"}


def _events(mem: Any) -> list[tuple[str, Any, Any]]:
    assert mem.connection.info.user == "primitives_app"
    return [(k, m, p) for k, m, p in mem.connection.execute(sql.SQL(
        "SELECT kind, memory_id, payload FROM {} ORDER BY seq").format(
        mem.ctx.tables.events.ident)).fetchall()]


def _requests(mem: Any) -> list[tuple[Any, ...]]:
    return mem.connection.execute(sql.SQL(
        "SELECT id, kind, memory_id, target_key, status, payload, justification FROM {} "
        "ORDER BY created_at").format(mem.ctx.tables.action_requests.ident)).fetchall()


def _episode(mem: Any, summary: str) -> Any:
    return mem.observe("long_term", summary, typology="episodic")


# M-T5 -------------------------------------------------------------------------------------------
def test_m_t5_promotion_waits_for_council_approval_then_sem_put_runs_once(
    engine: Engine,
) -> None:
    anchor = _anchor()
    key = "user/profile/user_tuff/favorite_color"
    with engine.tenant(anchor) as mem:
        episode = _episode(mem, "User said their favourite color is cerulean")
        request = mem.request_promotion(
            episode.id, key, value="cerulean", justification="the user asked to remember it",
            evidence=[{"episodic_id": str(episode.id)}])
        assert request.status == "pending" and request.kind == "memory_promote_request"
        stored = _requests(mem)
        assert [(r[1], r[2], r[3], r[4]) for r in stored] == [
            ("memory_promote_request", episode.id, key, "pending")]
        assert stored[0][5]["value"] == "cerulean"
        assert _events(mem)[-1][0] == "action_request"
        # no SEM write before the approval
        assert mem.sem_get(key) == {"exists": False, "key": key, "value": None, "meta": {}}
        assert mem.sem_search("user/profile") == []
    with engine.tenant(anchor) as mem:
        done = mem.approve(request.id, approver="council")
        assert done.status == "executed" and done.approvals == ("council",)
        assert done.memory is not None and done.memory.typology == "semantic"
        fact = mem.sem_get("User/Profile/user_tuff/Favorite_Color ")
        assert fact["exists"] and fact["value"] == "cerulean"
        assert fact["meta"]["id"] == str(done.memory.id)
        assert [f["key"] for f in mem.sem_search("USER/profile/")] == [key]
        kinds = [k for k, _, _ in _events(mem)]
        assert kinds[-4:] == ["approval", "observed", "sem_put", "request_executed"]
        assert [r[4] for r in _requests(mem)] == ["executed"]
        observed = [p for k, _, p in _events(mem) if k == "observed"][-1]
        assert observed["via"] == "approval" and observed["key"] == key
        # an executed request is closed: no second decision, no second write
        with pytest.raises(GovernanceError, match="executed already"):
            mem.approve(request.id, approver="admin")


def test_a_repeated_promotion_of_the_same_source_is_refused_with_promotion_loop(
    engine: Engine,
) -> None:
    anchor = _anchor()
    with engine.tenant(anchor) as mem:
        episode = _episode(mem, "the user prefers window seats")
        first = mem.request_promotion(episode.id, "user/prefs/seat", value="window",
                                      justification="stated twice")
        before = (len(_events(mem)), len(_requests(mem)))
        with pytest.raises(PromotionLoop) as caught:
            mem.request_promotion(episode.id, "user/prefs/seat", value="window",
                                  justification="stated again")
        assert (len(_events(mem)), len(_requests(mem))) == before
    envelope = caught.value.envelope()
    assert envelope["error"] == "PROMOTION_LOOP"
    assert envelope["request_id"] == str(first.id)
    assert envelope["user_message"] == PromotionLoop.user_message
    with engine.tenant(anchor) as mem:  # after the approval it stays refused
        mem.approve(first.id, approver="admin")
        with pytest.raises(PromotionLoop):
            mem.request_promotion(episode.id, "user/prefs/seat2", justification="again")


def test_a_rejected_request_writes_nothing_and_frees_the_source(engine: Engine) -> None:
    anchor = _anchor()
    with engine.tenant(anchor) as mem:
        episode = _episode(mem, "maybe the user likes jazz")
        request = mem.request_promotion(episode.id, "user/prefs/music", value="jazz",
                                        justification="a guess")
        rejected = mem.approve(request.id, approver="council", decision="reject")
        assert rejected.status == "rejected" and rejected.memory is None
        assert not mem.sem_get("user/prefs/music")["exists"]
        again = mem.request_promotion(episode.id, "user/prefs/music", value="jazz",
                                      justification="the user confirmed it")
        assert again.status == "pending"


def test_only_named_approvers_decide_and_each_once(engine: Engine) -> None:
    with engine.tenant(_anchor()) as mem:
        episode = _episode(mem, "the user works in Lisbon")
        request = mem.request_promotion(episode.id, "user/profile/city", value="Lisbon",
                                        justification="said so")
        with pytest.raises(GovernanceError, match="council, admin"):
            mem.approve(request.id, approver="intern")
        with pytest.raises(GovernanceError, match="no action request"):
            mem.approve(uuid.uuid4(), approver="council")


def test_direct_writes_and_tombstones_of_sem_are_refused_naming_the_governed_path(
    engine: Engine,
) -> None:
    anchor = _anchor()
    key = "user/profile/u/diet"
    with engine.tenant(anchor) as mem:
        with pytest.raises(GovernanceError, match="request is approved"):
            mem.observe("long_term", "vegetarian", typology="semantic", key=key)
        intent = mem.record_intent(key, "vegetarian")
        fact = mem.sem_put(key, "vegetarian", intent=intent)
        with pytest.raises(GovernanceError, match="deletion request approved by council, admin"):
            mem.tombstone(fact.id)
    with engine.tenant(anchor) as mem:
        assert mem.sem_get(key)["value"] == "vegetarian"


def test_user_intent_writes_sem_once_and_only_what_the_intent_names(engine: Engine) -> None:
    anchor = _anchor()
    key = "user/profile/u/favorite_color"
    with engine.tenant(anchor) as mem:
        intent = mem.record_intent("User/Profile/u/Favorite Color", "cerulean")
        with pytest.raises(GovernanceError, match="another key or value"):
            mem.sem_put(key, "teal", intent=intent)
        with pytest.raises(GovernanceError, match="no user-intent event"):
            mem.sem_put(key, "cerulean", intent=uuid.uuid4())
        written = mem.sem_put("user/profile/u/favorite color", "cerulean", intent=intent)
        assert written.key == key
        kinds = [k for k, _, _ in _events(mem)]
        assert kinds == ["user_intent", "observed", "sem_put"]
        with pytest.raises(PromotionLoop):
            mem.sem_put(key, "cerulean", intent=intent)
        assert mem.sem_get(key)["value"] == "cerulean"


def test_deletion_needs_council_and_admin_and_is_a_deletion_event(engine: Engine) -> None:
    anchor = _anchor()
    key = "user/profile/u/nickname"
    with engine.tenant(anchor) as mem:
        intent = mem.record_intent(key, "Tuff")
        fact = mem.sem_put(key, "Tuff", intent=intent)
        request = mem.request_deletion(key, justification="the user asked to forget it")
        half = mem.approve(request.id, approver="council")
        assert half.status == "pending" and mem.sem_get(key)["exists"]
        with pytest.raises(GovernanceError, match=r"decided action request .* already"):
            mem.approve(request.id, approver="council")
        done = mem.approve(request.id, approver="admin")
        assert done.status == "executed" and done.approvals == ("council", "admin")
        assert not mem.sem_get(key)["exists"]
        row = mem.get(fact.id)  # never a hard delete
        assert row is not None and row.tombstoned_at is not None
        kinds = [k for k, m, _ in _events(mem) if m == fact.id]
        assert kinds[-4:] == ["approval", "tombstoned", "deletion_event", "request_executed"]


# M-T6 -------------------------------------------------------------------------------------------
def test_m_t6_pii_in_a_promotion_is_redacted_with_a_hash_and_raw_sem_needs_consent(
    engine: Engine,
) -> None:
    anchor = _anchor()
    email = "jane.doe@example.com"
    key = "user/profile/u/email"
    with engine.tenant(anchor) as mem:
        episode = _episode(mem, f"the user said to write to {email}")
        assert email not in episode.content  # the episodic write itself was redacted
        request = mem.request_promotion(episode.id, key, value=email,
                                        justification=f"reach them at {email}")
        stored = _requests(mem)[0]
        assert email not in str(stored) and "[email redacted]" in stored[5]["value"]
        hashes = [f["sha256"] for f in stored[5]["pii"]["value"]]
        assert hashes and all(len(h) == 64 for h in hashes)
        redactions = [p for k, m, p in _events(mem) if k == "pii_redacted" and m == episode.id]
        assert [p["fields"] for p in redactions][-2:] == [["value"], ["justification"]]
        done = mem.approve(request.id, approver="council")
        assert email not in done.memory.content
        assert email not in str(_events(mem))
    # raw storage without consent: PRIVACY_BLOCKED, nothing written
    with engine.tenant(anchor) as mem:
        intent = mem.record_intent(key + "_raw", email)
        before = len(_events(mem))
        with pytest.raises(PrivacyBlocked) as caught:
            mem.sem_put(key + "_raw", email, intent=intent, raw=True)
        assert len(_events(mem)) == before and not mem.sem_get(key + "_raw")["exists"]
    envelope = caught.value.envelope()
    assert envelope["error"] == "PRIVACY_BLOCKED"
    assert envelope["user_message"] == engine.spec.policies["mace_pii"].refusal_message
    # with the user's consent logged, the raw value is kept for the privacy admin
    with engine.tenant(anchor) as mem:
        consent = mem.record_consent(kinds=["email"], reason="user confirmed")
        intent = mem.record_intent(key + "_raw", email)
        fact = mem.sem_put(key + "_raw", email, intent=intent, raw=True, consent=consent)
        assert email not in fact.content  # the row itself stays redacted
        kept = [p for k, m, p in _events(mem) if k == "pii_redacted" and m == fact.id]
        assert kept == [kept[0]] and kept[0]["action"] == "kept_with_consent"
        assert kept[0]["consent_event"] == str(consent)


def test_m_t6_the_raw_copy_is_readable_only_by_the_privacy_admin(
    engine: Engine, pg: PostgresHandle,
) -> None:
    anchor = _anchor()
    with engine.tenant(anchor) as mem:
        consent = mem.record_consent(kinds=["email"])
        intent = mem.record_intent("user/profile/u/email", "ann@example.org")
        fact = mem.sem_put("user/profile/u/email", "ann@example.org", intent=intent,
                           raw=True, consent=consent)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            mem.connection.execute(sql.SQL("SELECT content FROM {}").format(
                mem.ctx.tables.pii_raw.ident))
    assert fact.id is not None


# M-T8 -------------------------------------------------------------------------------------------
def _kill(admin: psycopg.Connection[Any], mem: Any) -> None:
    """The database goes away under the write, before it commits (the superuser ends the
    app session's backend, as a crash or failover would)."""
    pid = mem.connection.info.backend_pid
    admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))


def test_m_t8_episodic_write_failure_retries_once_then_returns_the_write_fail_envelope(
    engine: Engine, admin_conn: psycopg.Connection[Any],
) -> None:
    anchor = _anchor()
    envelopes = []
    for _ in range(2):  # the same job twice: the same response
        waits: list[float] = []
        calls = 0

        def episodic_write(mem: Any) -> None:
            nonlocal calls
            calls += 1
            _episode(mem, "the job summary that meets a dead server")
            _kill(admin_conn, mem)

        with pytest.raises(MemoryWriteFail) as caught:
            engine.write(anchor, episodic_write, seed="seed-m-t8", sleep=waits.append)
        assert calls == 2 and waits == [backoff_seconds("seed-m-t8")]
        envelopes.append({k: v for k, v in caught.value.envelope().items() if k != "message"})
    assert envelopes[0] == envelopes[1]
    assert envelopes[0]["error"] == "MEMORY_WRITE_FAIL" and envelopes[0]["attempts"] == 2
    assert envelopes[0]["user_message"] == WRITE_FAIL_TEXT
    with engine.tenant(anchor) as mem:
        assert _events(mem) == []  # nothing half-written


def test_m_t8_a_write_that_fails_once_commits_once_on_its_retry(
    engine: Engine, admin_conn: psycopg.Connection[Any],
) -> None:
    anchor = _anchor()
    calls = 0

    def episodic_write(mem: Any) -> None:
        nonlocal calls
        calls += 1
        _episode(mem, "a summary written on the retry")
        if calls == 1:
            _kill(admin_conn, mem)

    engine.write(anchor, episodic_write, seed="seed-m-t8b", sleep=lambda s: None)
    with engine.tenant(anchor) as mem:
        assert [k for k, _, _ in _events(mem)] == ["observed"]


def test_canonical_key_is_the_one_form_of_a_key() -> None:
    assert canonical_key(" User/Profile//u1/Favorite Color ") == "user/profile/u1/favorite_color"
    assert canonical_key("a/b/") == canonical_key("A / B") == "a/b"
    with pytest.raises(Exception, match="segment"):
        canonical_key(" / ")


# M-T4 -------------------------------------------------------------------------------------------
def test_m_t4_episodic_query_ranks_by_token_overlap_then_time_then_id(engine: Engine) -> None:
    anchor = _anchor()
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    at = {n: t0 + timedelta(ticks) for n, ticks in (("t0", 0), ("t1", 1), ("t2", 2),
                                                     ("t3", 3), ("t4", 4), ("t5", 5))}
    entries = [  # summary, seeded time: overlap with "budget meeting" / entry tokens
        ("A", "Budget meeting moved to Friday", "t1"),   # 2/5 = 0.4
        ("B", "budget review", "t2"),                    # 1/2 = 0.5
        ("C", "Meeting notes: budget!", "t3"),           # 2/3
        ("D", "meeting", "t4"),                          # 1/1
        ("E", "lunch with the team", "t5"),              # 0: not returned
        ("F", "Budget, review", "t2"),                   # 1/2, same time as B: by id
        ("G", "budget meeting", "t0"),                   # 1/1, older than D
    ]
    with engine.tenant(anchor) as mem:
        ids = {name: mem.observe("long_term", text, typology="episodic",
                                 event_time=at[when]).id for name, text, when in entries}
        intent = mem.record_intent("k/budget", "budget meeting")
        mem.sem_put("k/budget", "budget meeting", intent=intent)
        ranked = mem.episodic_query("Budget MEETING")
        windowed = mem.episodic_query("budget meeting", since=at["t1"])
        top = mem.episodic_query("budget meeting", max_results=3)
        searched = mem.search("budget meeting", limit=20)
    b_f = sorted([ids["B"], ids["F"]], key=str)
    expected = [ids["D"], ids["G"], ids["C"], *b_f, ids["A"]]
    assert [h.memory.id for h in ranked] == expected
    assert [round(h.score, 4) for h in ranked] == [1.0, 1.0, 0.6667, 0.5, 0.5, 0.4]
    assert [h.memory.id for h in windowed] == [i for i in expected if i != ids["G"]]
    assert [h.memory.id for h in top] == expected[:3]
    # search ranks the same way under retrieval.lexical.ranking: token_overlap, over every
    # typology of the scope (the semantic row ties with D and G at 1.0 and is the newest)
    assert [h.memory.id for h in searched][1:] == expected
    assert searched[0].memory.typology == "semantic"


def test_two_concurrent_requests_for_one_source_cannot_both_pass_the_loop_check(
    engine: Engine,
) -> None:
    anchor = _anchor()
    with engine.tenant(anchor) as mem:
        episode = _episode(mem, "the user likes tea")
    outcome: list[BaseException | None] = []
    second_started = threading.Event()

    def second() -> None:
        try:
            with engine.tenant(anchor) as other:
                second_started.set()
                other.request_promotion(episode.id, "user/prefs/drink", value="tea",
                                        justification="the second")
            outcome.append(None)
        except BaseException as err:  # the thread reports what it met
            outcome.append(err)

    with engine.tenant(anchor) as mem:
        mem.request_promotion(episode.id, "user/prefs/drink", value="tea",
                              justification="the first")
        thread = threading.Thread(target=second)
        thread.start()
        second_started.wait(10)
        thread.join(1.0)
        assert thread.is_alive(), "the second request did not wait for the first's lock"
    thread.join(20)
    assert len(outcome) == 1 and isinstance(outcome[0], PromotionLoop)
    with engine.tenant(anchor) as mem:
        assert len(_requests(mem)) == 1


async def test_the_async_engine_runs_the_same_governed_paths(
    pg: PostgresHandle, mace: AgentSpec,
) -> None:
    anchor = _anchor()
    engine = await AsyncEngine.connect(mace, pg.app_dsn)
    try:
        async with engine.tenant(anchor) as mem:
            episode = await mem.observe("long_term", "the user is vegan", typology="episodic")
            request = await mem.request_promotion(episode.id, "user/profile/diet",
                                                  value="vegan", justification="said so")
            assert not (await mem.sem_get("user/profile/diet"))["exists"]
            done = await mem.approve(request.id, approver="admin")
            assert done.status == "executed"
            intent = await mem.record_intent("user/profile/city", "Porto")
            await mem.sem_put("user/profile/city", "Porto", intent=intent)
            facts = await mem.sem_search("user/profile")
            ranked = await mem.episodic_query("vegan user")
        assert [(f["key"], f["value"]) for f in facts] == [
            ("user/profile/city", "Porto"), ("user/profile/diet", "vegan")]
        assert [h.memory.id for h in ranked] == [episode.id]
    finally:
        await engine.close()


def test_the_seed_errors_carry_their_user_facing_text() -> None:
    assert StorageFull("disk").envelope()["user_message"] == (
        "My memory is full, so I couldn't save that. Nothing was lost; an admin has to make "
        "room.")
    assert MemoryWriteFail("x").envelope()["user_message"] == WRITE_FAIL_TEXT
    loop = PromotionLoop("again", source="s").envelope()
    assert loop["error"] == "PROMOTION_LOOP" and loop["source"] == "s"
    assert loop["user_message"] == "I already asked to remember that; the first request still stands."
