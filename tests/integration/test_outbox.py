"""Cross-context visibility, event-driven (seed 003 §15): the outbox, as the application role.

A write into a gate's ``from`` publishes the spec's event through ``<prefix>_outbox`` with
the sanitized payload, in the write's own transaction, and NOTIFYs ``<prefix>.<event>``.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives._project import migrate
from primitives.cli import main
from primitives.compile import agent_tables
from primitives.compile._outbox import outbox_channel
from primitives.db import tenant_transaction
from primitives.engine import Engine, _sync
from primitives.errors import PolicyViolation, SpecError
from primitives.spec import AgentSpec, SanitizationPolicy, load_spec_text
from tests.conftest import PostgresHandle
from tests.integration._awaiting import engine_sessions

pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")

EVENT = "platform.team_memory.written"

OUTBOX_SPEC = """\
version: 1
agent: outbox_test
anchor:
  keys: [team_id]
  required_at_write: [team_id]
typology:
  scratch: [episodic]
  team: [episodic, semantic]
tiers:
  - {name: scratch, boundary: {lifecycle: session_end}}
  - {name: team, boundary: {scope_change: team_id}, persistent: true}
persistence:
  checkpointer: {enabled: false}
  store: {schema: outbox_test, prefix: ob}
retrieval:
  signals: [lexical]
behavior:
  write_policy:
    semantic: {mode: auto, justification: the tests write facts directly}
discipline:
  sanitization:
    - {name: strip_team, from: team.semantic, to: team_signal, strip: [team_id],
       policy: team_strip}
  visibility:
    rls: session_var
    cross_context: event_driven
    events: [platform.team_memory.written]
"""

POLICIES = {"team_strip": SanitizationPolicy(
    kind="sanitization", name="team_strip", strip_keys=["host"],
    strip_patterns=[r"\bteam-[0-9a-f]+\b"], replacement="[team]")}


@pytest.fixture(scope="module")
def spec(pg: PostgresHandle) -> AgentSpec:
    loaded = load_spec_text(OUTBOX_SPEC, policies=dict(POLICIES))
    migrate([loaded], dsn=pg.admin_dsn)
    return loaded


@pytest.fixture
def engine(pg: PostgresHandle, spec: AgentSpec) -> Iterator[Engine]:
    with Engine.connect(spec, pg.app_dsn, max_connections=4) as eng:
        yield eng


def _team() -> dict[str, str]:
    return {"team_id": f"team-{uuid.uuid4().hex[:10]}"}


def _outbox(conn: psycopg.Connection[Any], spec: AgentSpec, tenant: str
            ) -> list[tuple[Any, ...]]:
    """(event, gate, to_ref, memory_id, payload, delivered) of the tenant's entries, read as
    the application role inside the tenant's transaction."""
    tables = agent_tables(spec)
    assert tables.outbox is not None
    with tenant_transaction(conn, tenant):
        return conn.execute(sql.SQL(
            "SELECT event, gate, to_ref, memory_id, payload, delivered_at IS NOT NULL "
            "FROM {} WHERE {} = %s ORDER BY created_at, id").format(
            tables.outbox.ident, tables.tenant), (tenant,)).fetchall()


def test_a_write_of_the_gates_from_publishes_the_sanitized_payload(
        engine: Engine, spec: AgentSpec, app_conn: psycopg.Connection[Any],
        auditor_conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    anchor = _team()
    team = anchor["team_id"]
    # the one-statement write path (Engine.observe) publishes like any other
    one_statement: list[Any] = []
    send = _sync._run_call
    monkeypatch.setattr(_sync, "_run_call",
                        lambda conn, call: one_statement.append(call) or send(conn, call))
    row = engine.observe(anchor, "team", f"{team} deploys from web-7 stall on cold caches",
                         typology="semantic", envelope={"host": "web-7", "area": "deploy"})
    assert len(one_statement) == 1
    with engine.tenant(anchor) as mem:
        mem.observe("team", "an episode is not published", typology="episodic")
    [(event, gate, to, memory_id, payload, delivered)] = _outbox(app_conn, spec, team)
    assert (event, gate, to, memory_id, delivered) == (EVENT, "strip_team", "team_signal",
                                                       row.id, False)
    assert payload["content"] == "[team] deploys from [team] stall on cold caches"
    assert payload["envelope"] == {"area": "deploy"}
    assert team not in json.dumps(payload) and "web-7" not in json.dumps(payload)
    tables = agent_tables(spec)
    [(gate_name, stripped, audited)] = auditor_conn.execute(sql.SQL(
        "SELECT gate, stripped, payload FROM {} WHERE {} = %s").format(
        tables.audit_sanitization.ident, tables.tenant), (team,)).fetchall()
    assert gate_name == "strip_team" and sorted(stripped["keys"]) == ["host", "team_id"]
    assert audited["via"] == "outbox" and len(audited["outbox"]) == 1


def test_a_failed_write_leaves_no_outbox_entry(
        engine: Engine, spec: AgentSpec, app_conn: psycopg.Connection[Any]) -> None:
    anchor = _team()
    with pytest.raises(RuntimeError, match="after the write"), engine.tenant(anchor) as mem:
        mem.observe("team", "caches warm in ten minutes", typology="semantic")
        raise RuntimeError("the caller fails after the write")
    assert _outbox(app_conn, spec, anchor["team_id"]) == []
    with engine.tenant(anchor) as mem:
        assert list(mem.search("caches warm")) == []


def test_a_row_the_gate_keeps_behind_publishes_nothing(
        engine: Engine, spec: AgentSpec, app_conn: psycopg.Connection[Any]) -> None:
    anchor = _team()
    engine.observe(anchor, "team", anchor["team_id"], typology="semantic")
    assert _outbox(app_conn, spec, anchor["team_id"]) == []


def test_the_publication_is_announced_on_the_events_channel_with_ids_only(
        engine: Engine, spec: AgentSpec, pg: PostgresHandle) -> None:
    anchor = _team()
    channel = outbox_channel(agent_tables(spec), EVENT)
    received: list[psycopg.Notify] = []
    with psycopg.connect(pg.app_dsn, autocommit=True) as listener:
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        row = engine.observe(anchor, "team", "rollouts pause on friday evenings",
                             typology="semantic")
        for note in listener.notifies(timeout=5, stop_after=1):
            received.append(note)
    [note] = received
    assert note.channel == channel
    body = json.loads(note.payload)
    assert set(body) == {"id", "event"} and body["event"] == EVENT
    with engine.tenant(anchor) as mem:
        [entry] = mem.claim_outbox(consumer="test")
    assert str(entry.id) == body["id"] and entry.memory_id == row.id
    assert "rollouts" not in note.payload


def test_claiming_hands_each_entry_out_once(engine: Engine, spec: AgentSpec,
                                           auditor_conn: psycopg.Connection[Any]) -> None:
    anchor = _team()
    for n in range(3):
        engine.observe(anchor, "team", f"fact number {n} about the build farm",
                       typology="semantic")
    with engine.tenant(anchor) as mem:
        first = mem.claim_outbox(consumer="worlds", limit=2)
    with engine.tenant(anchor) as mem:
        second = mem.claim_outbox(consumer="worlds", limit=2)
    with engine.tenant(anchor) as mem:
        assert mem.claim_outbox(consumer="worlds") == []
    assert [e.payload["content"] for e in first + second] == [
        f"fact number {n} about the build farm" for n in range(3)]
    tables = agent_tables(spec)
    claims = auditor_conn.execute(sql.SQL(
        "SELECT payload FROM {} WHERE {} = %s AND kind = 'outbox_delivered' ORDER BY seq"
    ).format(tables.events.ident, tables.tenant), (anchor["team_id"],)).fetchall()
    assert [len(c[0]["entries"]) for c in claims] == [2, 1]


def test_a_rolled_back_claim_leaves_the_entries_for_the_next_consumer(
        engine: Engine) -> None:
    anchor = _team()
    engine.observe(anchor, "team", "retries hide flaky tests", typology="semantic")
    with pytest.raises(RuntimeError), engine.tenant(anchor) as mem:
        assert len(mem.claim_outbox(consumer="crashes")) == 1
        raise RuntimeError("the consumer fails while processing")
    with engine.tenant(anchor) as mem:
        assert len(mem.claim_outbox(consumer="next")) == 1


def test_concurrent_consumers_skip_each_others_entries(engine: Engine) -> None:
    """A consumer holding entries in an open transaction does not hand them to another;
    the other takes the rest (its journal event then waits for the first to commit: one
    tenant's journal is one chain)."""
    anchor = _team()
    for n in range(4):
        engine.observe(anchor, "team", f"queue fact {n}", typology="semantic")
    held = threading.Event()
    release = threading.Event()
    taken: dict[str, list[Any]] = {}

    def consume(name: str, limit: int, hold: bool) -> None:
        with engine.tenant(anchor) as mem:
            taken[name] = mem.claim_outbox(consumer=name, limit=limit)
            if hold:
                held.set()
                release.wait(10)

    slow = threading.Thread(target=consume, args=("slow", 2, True))
    fast = threading.Thread(target=consume, args=("fast", 10, False))
    slow.start()
    try:
        assert held.wait(10)
        fast.start()
        fast.join(0.5)
    finally:
        release.set()
        slow.join(10)
        fast.join(10)
    slow_ids = {e.id for e in taken["slow"]}
    fast_ids = {e.id for e in taken["fast"]}
    assert len(slow_ids) == 2 and len(fast_ids) == 2 and not slow_ids & fast_ids


def test_a_tenant_never_sees_another_tenants_outbox(
        engine: Engine, spec: AgentSpec, app_conn: psycopg.Connection[Any]) -> None:
    one, two = _team(), _team()
    engine.observe(one, "team", "team one keeps its caches warm", typology="semantic")
    tables = agent_tables(spec)
    assert tables.outbox is not None
    with tenant_transaction(app_conn, two["team_id"]):
        # no filter on the tenant: row-level security alone decides
        assert app_conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
            tables.outbox.ident)).fetchone() == (0,)
    with engine.tenant(two) as mem:
        assert mem.claim_outbox(consumer="spy") == []
    assert len(_outbox(app_conn, spec, one["team_id"])) == 1


def test_a_spec_without_an_outbox_refuses_a_claim(pg: PostgresHandle) -> None:
    text = OUTBOX_SPEC.replace("cross_context: event_driven", "cross_context: none").replace(
        "prefix: ob", "prefix: ob_none").replace("agent: outbox_test", "agent: outbox_none")
    spec = load_spec_text(text, policies=dict(POLICIES))
    assert agent_tables(spec).outbox is None
    migrate([spec], dsn=pg.admin_dsn)
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine, \
            engine.tenant(_team()) as mem, pytest.raises(SpecError, match="no outbox"):
        mem.claim_outbox(consumer="x")


def test_spectral_promotion_publishes_a_world_signal_without_the_workspace(
        pg: PostgresHandle, spectral: AgentSpec,
        auditor_conn: psycopg.Connection[Any]) -> None:
    """The reference spec end to end: three scanners observe one thing, the run ends, the
    promoted semantic row is published as platform.t3_memory.written, stripped."""
    ws = f"ws-{uuid.uuid4().hex[:10]}"
    with Engine.connect(spectral, pg.app_dsn, max_connections=1) as engine:
        with engine.tenant({"workspace_id": ws}) as mem:
            for n in (1, 2, 3):
                mem.observe("cycle", f"checkout in {ws} times out when ws-billing is slow",
                            scope_id=f"c{n}", source=f"scanner-{n}")
                mem.end_scope("cycle", f"c{n}", into_scope="r1")
            assert mem.end_scope("run", "r1").corroboration_promoted == 1
        with engine.tenant({"workspace_id": ws}) as mem:
            [entry] = mem.claim_outbox(consumer="worlds")
    assert entry.event == "platform.t3_memory.written" and entry.to == "world_signal"
    assert entry.payload["content"] == "checkout in times out when [workspace] is slow"
    assert entry.payload["typology"] == "semantic"
    assert entry.payload["provenance_tier"] == "corroborated"
    assert ws not in json.dumps(entry.payload)
    # both crossings are in the audit view: the promotion through the gate, then publication
    tables = agent_tables(spectral)
    crossings = auditor_conn.execute(sql.SQL(
        "SELECT gate, from_ref, to_ref, stripped, payload FROM {} WHERE {} = %s ORDER BY seq"
    ).format(tables.audit_sanitization.ident, tables.tenant), (ws,)).fetchall()
    assert [(c[0], c[1], c[2], c[4]["via"], c[4]["outcome"]) for c in crossings] == [
        ("strip_workspace_identifiers", "workspace.episodic", "workspace.semantic",
         "promotion", "crossed"),
        ("strip_workspace_identifiers", "workspace.semantic", "world_signal", "outbox",
         "crossed")]
    # the workspace id and ws-billing both match the policy's ws- pattern in the episode
    assert crossings[0][3] == {"keys": ["workspace_id"], "patterns": 2}
    assert ws not in json.dumps([c[4] for c in crossings])


def test_an_event_driven_gate_that_strips_pii_is_refused_at_load() -> None:
    pii = SanitizationPolicy(kind="sanitization", name="team_strip", strip_pii=["email"])
    with pytest.raises(SpecError, match=r"strips PII \(email\).*discipline\.pii"):
        load_spec_text(OUTBOX_SPEC, policies={"team_strip": pii})


def test_a_promotion_by_maintain_publishes_as_the_maintainer(
        pg: PostgresHandle, spectral: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    from primitives.lifecycle import maintain
    ws = f"ws-{uuid.uuid4().hex[:10]}"
    with Engine.connect(spectral, pg.app_dsn, max_connections=1) as engine:
        with engine.tenant({"workspace_id": ws}) as mem:
            row = mem.observe("workspace", f"search in {ws} ignores the locale",
                              typology="episodic")
        tables = agent_tables(spectral)
        admin_conn.execute(sql.SQL("UPDATE {} SET provenance = %s WHERE id = %s").format(
            tables.memories.ident), (psycopg.types.json.Jsonb(
                {"corroborated_by": ["source:a", "source:b", "source:c"]}), row.id))
        maintain([spectral], pg.admin_dsn)
        with engine.tenant({"workspace_id": ws}) as mem:
            [entry] = mem.claim_outbox(consumer="worlds")
    assert entry.payload["content"] == "search in ignores the locale"


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_cross_and_claim_are_one_contract_on_both_engines(
        pg: PostgresHandle, spec: AgentSpec, mode: str) -> None:
    anchor = _team()
    async with engine_sessions(mode, spec, pg.app_dsn, max_connections=1) as session:
        async with session(anchor) as mem:
            row = await mem.observe("team", f"{anchor['team_id']} pins its base images",
                                    typology="semantic")
            [crossing] = await mem.cross("strip_team", [row.id])
        async with session(anchor) as mem:
            [entry] = await mem.claim_outbox(consumer=mode)
            assert await mem.claim_outbox(consumer=mode) == []
    assert crossing.content == entry.payload["content"] == "[team] pins its base images"
    assert entry.memory_id == row.id


def test_erasing_a_subject_scrubs_what_was_published_from_its_rows(
        engine: Engine, spec: AgentSpec, app_conn: psycopg.Connection[Any]) -> None:
    anchor = _team()
    engine.observe(anchor, "team", "dana reviews every release on thursdays",
                   typology="semantic", envelope={"subject": "dana"})
    kept = engine.observe(anchor, "team", "releases ship on fridays", typology="semantic")
    with engine.tenant(anchor) as mem:
        assert mem.erase("dana", approvals=["dpo"], reason="subject request") == 1
    entries = _outbox(app_conn, spec, anchor["team_id"])
    assert [e[4] for e in entries if e[3] != kept.id] == [{"erased": True}]
    assert [e[4]["content"] for e in entries if e[3] == kept.id] == ["releases ship on fridays"]
    assert "dana" not in json.dumps([e[4] for e in entries])


def test_a_spec_that_stops_publishing_drops_its_publish_trigger(pg: PostgresHandle) -> None:
    # another store is another agent (migrate refuses to move an agent's store)
    publishing = OUTBOX_SPEC.replace("prefix: ob", "prefix: ob_drop").replace(
        "agent: outbox_test", "agent: outbox_drop")
    quiet = publishing.replace("cross_context: event_driven", "cross_context: none")
    anchor = _team()
    before = load_spec_text(publishing, policies=dict(POLICIES))
    migrate([before], dsn=pg.admin_dsn)
    with Engine.connect(before, pg.app_dsn, max_connections=1) as engine:
        engine.observe(anchor, "team", "caches warm in ten minutes", typology="semantic")
    after = load_spec_text(quiet, policies=dict(POLICIES))
    migrate([after], dsn=pg.admin_dsn)
    with Engine.connect(after, pg.app_dsn, max_connections=1) as engine:
        engine.observe(anchor, "team", "caches warm faster now", typology="semantic")
    with psycopg.connect(pg.admin_dsn) as admin:
        row = admin.execute("SELECT count(*) FROM outbox_test.ob_drop_outbox").fetchone()
    assert row == (1,)  # the first write only


def test_the_outbox_command_shows_what_waits_and_claims_it_for_a_script(
        engine: Engine, spec: AgentSpec, pg: PostgresHandle, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "team_strip.yaml").write_text(
        "kind: sanitization\nname: team_strip\nstrip_keys: [host]\n"
        "strip_patterns: ['\\bteam-[0-9a-f]+\\b']\nreplacement: '[team]'\n")
    spec_file = tmp_path / "outbox_test.yaml"
    spec_file.write_text(OUTBOX_SPEC)
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    anchor = _team()
    for n in range(2):
        engine.observe(anchor, "team", f"the build farm fact {n} of {anchor['team_id']}",
                       typology="semantic")

    def status() -> dict[str, Any]:
        capsys.readouterr()
        assert main(["outbox", "status", str(spec_file), "--json"]) == 0
        [row] = [r for r in json.loads(capsys.readouterr().out) if r["event"] == EVENT]
        return dict(row)

    before = status()
    assert before["waiting"] >= 2 and before["tenants_waiting"] >= 1
    assert main(["outbox", "claim", str(spec_file), "--tenant", anchor["team_id"],
                 "--consumer", "script", "--limit", "5"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["payload"]["content"] for e in lines] == [
        f"the build farm fact {n} of [team]" for n in range(2)]
    assert {e["event"] for e in lines} == {EVENT}
    after = status()
    assert after["waiting"] == before["waiting"] - 2
    assert after["delivered"] == before["delivered"] + 2
    assert main(["outbox", "claim", str(spec_file), "--tenant", anchor["team_id"],
                 "--consumer", "script"]) == 0
    assert capsys.readouterr().out == ""


def test_a_delivered_entry_retried_is_claimed_again_and_the_retry_journalled(
        engine: Engine, spec: AgentSpec, pg: PostgresHandle, tmp_path: Path,
        app_conn: psycopg.Connection[Any], auditor_conn: psycopg.Connection[Any],
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    anchor, other = _team(), _team()
    engine.observe(anchor, "team", f"the cache fact of {anchor['team_id']}", typology="semantic")
    engine.observe(other, "team", "the other team's fact", typology="semantic")
    with engine.tenant(anchor) as mem:
        [first] = mem.claim_outbox(consumer="lost-worker")
        assert mem.claim_outbox(consumer="lost-worker") == []
    with engine.tenant(other) as mem:
        [theirs] = mem.claim_outbox(consumer="them")
        # another tenant's entry, or one of ours not delivered, is not retried
        assert mem.retry_outbox([first.id]) == []
    with engine.tenant(anchor) as mem:
        assert mem.retry_outbox([theirs.id]) == []
        with pytest.raises(PolicyViolation, match="must be UUIDs"):
            mem.retry_outbox(["not-a-uuid"])
        assert mem.retry_outbox([first.id]) == [first.id]
        assert mem.retry_outbox([first.id]) == []  # waiting again: nothing to retry
        [again] = mem.claim_outbox(consumer="second-worker")
    assert (again.id, again.payload) == (first.id, first.payload)
    [(_, _, _, _, _, delivered)] = _outbox(app_conn, spec, anchor["team_id"])
    assert delivered
    tables = agent_tables(spec)
    [payload] = [p for (p,) in auditor_conn.execute(sql.SQL(
        "SELECT payload FROM {} WHERE {} = %s AND kind = 'outbox_retried'").format(
        tables.events.ident, tables.tenant), (anchor["team_id"],)).fetchall()]
    assert payload == {"entries": [str(first.id)], "consumers": ["lost-worker"]}
    # the command line: retry what a script claimed, and claim it again
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "team_strip.yaml").write_text(
        "kind: sanitization\nname: team_strip\nstrip_keys: [host]\n"
        "strip_patterns: ['\\bteam-[0-9a-f]+\\b']\nreplacement: '[team]'\n")
    spec_file = tmp_path / "outbox_test.yaml"
    spec_file.write_text(OUTBOX_SPEC)
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    capsys.readouterr()
    assert main(["outbox", "retry", str(spec_file), "--tenant", anchor["team_id"],
                 str(first.id)]) == 0
    assert capsys.readouterr().out == f"{first.id}\n"
    assert main(["outbox", "retry", str(spec_file), "--tenant", anchor["team_id"],
                 str(first.id)]) == 1  # waiting: not retried, and the exit status says so
    assert main(["outbox", "claim", str(spec_file), "--tenant", anchor["team_id"],
                 "--consumer", "script"]) == 0
    assert [json.loads(line)["id"] for line in capsys.readouterr().out.splitlines()] == [
        str(first.id)]
