"""``behavior.decay.<typology>.schedule``: ``primitives maintain`` runs a typology's decay
passes only when its cron schedule fired since their last complete run (recorded per agent
and typology in ``primitives.maintenance_runs``); ``--force`` runs them anyway, and the
summary names the passes it skipped as not due. Unscheduled typologies run every time."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from primitives._project import migrate
from primitives.cli import main
from primitives.engine import Engine
from primitives.lifecycle import maintain
from primitives.spec import AgentSpec, load_spec_text
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")

SPEC = """\
version: 1
agent: %(agent)s
anchor: {keys: [user_id], required_at_write: [user_id]}
typology:
  memory: [episodic, semantic]
tiers:
  - {name: memory, boundary: {scope_change: user_id}, persistent: true}
persistence:
  checkpointer: {enabled: false}
  store: {schema: dschedule, prefix: %(agent)s}
retrieval: {signals: [lexical]}
behavior:
  write_policy:
    semantic: {mode: mixed, extract_threshold: 0.6, justification: tests write facts directly}
  decay:
    episodic:
      model: forcing_function
      horizon: 1d
      schedule: "%(schedule)s"
      justification: a nightly decay run
    semantic: {model: validity_window, validity: 1d, justification: "unscheduled: every run"}
"""


def _spec(pg: PostgresHandle, agent: str, schedule: str) -> tuple[AgentSpec, str]:
    text = SPEC % {"agent": agent, "schedule": schedule}
    spec = load_spec_text(text, policies={})
    migrate([spec], dsn=pg.admin_dsn)
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine, \
            engine.tenant({"user_id": f"u-{uuid.uuid4().hex[:8]}"}) as mem:
        mem.observe("memory", "scan lowered temperature", typology="episodic")
        mem.observe("memory", "the gate needs corroboration", typology="semantic")
    return spec, text


def _last_runs(auditor: psycopg.Connection[Any], agent: str) -> dict[str, datetime]:
    return dict(auditor.execute(
        "SELECT typology, last_run_at FROM primitives.maintenance_runs "
        "WHERE agent = %s AND job = 'decay'", (agent,)).fetchall())


def test_a_scheduled_decay_pass_runs_only_when_due_and_force_runs_it(
        pg: PostgresHandle, auditor_conn: psycopg.Connection[Any]) -> None:
    spec, _ = _spec(pg, "sched_nightly", "0 3 * * *")
    day = (datetime.now(UTC) + timedelta(days=10)).replace(hour=4, minute=0, second=0,
                                                           microsecond=0)
    first = maintain([spec], pg.admin_dsn, now=day)           # never ran: due
    assert "dispositions" in first.agents["sched_nightly"]
    assert first.reported["sched_nightly"]["dispositions"] == 1
    assert first.skipped == {}
    # every completed decay pass is recorded; an unscheduled one each run (memory_stats's
    # last_decay_run), a scheduled one when it ran
    assert _last_runs(auditor_conn, "sched_nightly") == {"episodic": day, "semantic": day}

    later = maintain([spec], pg.admin_dsn, now=day + timedelta(hours=20))  # 00:00: not due
    assert "dispositions" not in later.agents["sched_nightly"]
    assert "dispositions" not in later.reported.get("sched_nightly", {})
    assert "corroboration" in later.agents["sched_nightly"]      # unscheduled: runs
    assert later.skipped == {"sched_nightly": [{
        "pass": "dispositions", "typologies": ["episodic"], "schedule": "0 3 * * *",
        "last_run": day.isoformat(),
        "next_due": (day + timedelta(hours=23)).isoformat()}]}
    assert later.as_dict()["skipped"] == later.skipped
    assert _last_runs(auditor_conn, "sched_nightly") == {
        "episodic": day, "semantic": day + timedelta(hours=20)}

    forced = maintain([spec], pg.admin_dsn, now=day + timedelta(hours=20), force=True)
    assert forced.skipped == {} and forced.reported["sched_nightly"]["dispositions"] == 1
    assert _last_runs(auditor_conn, "sched_nightly") == dict.fromkeys(
        ("episodic", "semantic"), day + timedelta(hours=20))

    night = day + timedelta(hours=23, minutes=30)             # 03:30 next day: 03:00 fired
    due = maintain([spec], pg.admin_dsn, now=night)
    assert due.skipped == {} and due.reported["sched_nightly"]["dispositions"] == 1
    assert _last_runs(auditor_conn, "sched_nightly") == {"episodic": night, "semantic": night}


def test_cli_maintain_json_names_the_passes_not_due_and_force_runs_them(
        pg: PostgresHandle, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _, text = _spec(pg, "sched_yearly", "0 3 1 1 *")          # 03:00 on 1 January
    spec_file = tmp_path / "sched_yearly.yaml"
    spec_file.write_text(text)
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)

    def run(*extra: str) -> dict[str, Any]:
        capsys.readouterr()
        assert main(["maintain", str(spec_file), "--json", *extra]) == 0
        return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]

    first = run()
    assert first["skipped"] == {} and "dispositions" in first["agents"]["sched_yearly"]
    second = run()
    [skip] = second["skipped"]["sched_yearly"]
    assert (skip["pass"], skip["typologies"], skip["schedule"]) == (
        "dispositions", ["episodic"], "0 3 1 1 *")
    assert skip["next_due"].endswith("-01-01T03:00:00+00:00")
    assert "dispositions" not in second["agents"]["sched_yearly"]
    forced = run("--force")
    assert forced["skipped"] == {} and "dispositions" in forced["agents"]["sched_yearly"]
    capsys.readouterr()
    assert main(["maintain", str(spec_file)]) == 0
    assert "dispositions (episodic): not due (schedule 0 3 1 1 *" in capsys.readouterr().out


def test_list_dispositions_names_nothing_while_the_dispositions_pass_is_not_due(
        pg: PostgresHandle, admin_conn: psycopg.Connection[Any],
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    spec, text = _spec(pg, "sched_listed", "0 3 1 1 *")        # 03:00 on 1 January
    admin_conn.execute(
        "UPDATE dschedule.sched_listed_memories SET event_time = now() - interval '5 days' "
        "WHERE typology = 'episodic'")
    first = maintain([spec], pg.admin_dsn, list_dispositions=10)   # never ran: due, listed
    [row] = first.awaiting["sched_listed"]
    assert row["typology"] == "episodic"

    skipped = maintain([spec], pg.admin_dsn, list_dispositions=10)  # not due: nothing named
    assert [s["pass"] for s in skipped.skipped["sched_listed"]] == ["dispositions"]
    assert skipped.awaiting == {} and "dispositions" not in skipped.reported.get(
        "sched_listed", {})

    forced = maintain([spec], pg.admin_dsn, list_dispositions=10, force=True)
    assert [r["id"] for r in forced.awaiting["sched_listed"]] == [row["id"]]

    spec_file = tmp_path / "sched_listed.yaml"
    spec_file.write_text(text)
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    capsys.readouterr()
    assert main(["maintain", str(spec_file), "--list-dispositions", "10"]) == 0
    out = capsys.readouterr().out
    assert "--list-dispositions: nothing listed for episodic: its dispositions pass is not " \
           "due (--force runs and lists it)" in out
    assert "awaiting a decision" not in out and row["id"] not in out
    assert main(["maintain", str(spec_file), "--list-dispositions", "10", "--force"]) == 0
    out = capsys.readouterr().out
    assert "awaiting a decision" in out and row["id"] in out and "nothing listed" not in out
