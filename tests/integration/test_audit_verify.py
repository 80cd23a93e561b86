"""``primitives audit verify`` as the auditor role: every tenant's chain, tampering, anchors.

Tampering is done the way an attacker with superuser rights would: disable the journal's
triggers, change or remove events, re-enable them. Each test does it in its own fresh
database, so no broken chain is left where other tests read.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb
from rich.console import Console

from primitives import cli
from primitives._project import migrate
from primitives.audit import connect_auditor, verify_chains
from primitives.cli import main
from primitives.db import app_dsn, auditor_dsn, tenant_transaction
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.db

ROOT = Path(__file__).resolve().parents[2]
SPECTRAL = str(ROOT / "agents" / "spectral_agent.yaml")
EVENTS = sql.Identifier("platform", "spectral_memory_events")


@pytest.fixture(scope="module")
def spectral() -> AgentSpec:
    return load_spec(SPECTRAL)


@pytest.fixture
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rich tables as wide as they need, so a status is never wrapped across lines."""
    monkeypatch.setattr(cli, "console", Console(width=250, highlight=False, soft_wrap=True))
    monkeypatch.setattr(cli, "errors", Console(width=250, stderr=True, highlight=False,
                                               soft_wrap=True))


@pytest.fixture
def database(
    pg: PostgresHandle, spectral: AgentSpec, fresh_database: Callable[[], str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[str]:
    """A fresh database with spectral migrated; the CLI resolves to it."""
    admin = fresh_database()
    migrate([spectral], dsn=admin)
    monkeypatch.setenv("PRIMITIVES_DSN", admin)
    monkeypatch.delenv("PRIMITIVES_AUDITOR_DSN", raising=False)
    monkeypatch.delenv("PRIMITIVES_APP_DSN", raising=False)
    yield admin


def _write(spec: AgentSpec, admin: str, tenant: str, count: int) -> None:
    """Append ``count`` journal events as the app role; the chain trigger links them."""
    insert = sql.SQL("INSERT INTO {} (workspace_id, kind, memory_id, actor, payload) "
                     "VALUES (%s, 'observed', %s, 'agent', %s)").format(EVENTS)
    with psycopg.connect(app_dsn(admin), autocommit=True) as conn, \
            tenant_transaction(conn, tenant):
        for i in range(count):
            conn.execute(insert, (tenant, uuid.uuid4(), Jsonb({"n": i})))


def _tamper(admin: str, statement: sql.Composed, params: tuple[Any, ...]) -> None:
    """As the superuser: switch the journal's triggers off, change it, switch them back on."""
    with psycopg.connect(admin, autocommit=True) as conn, conn.transaction():
        conn.execute(sql.SQL("ALTER TABLE {} DISABLE TRIGGER USER").format(EVENTS))
        conn.execute(statement, params)
        conn.execute(sql.SQL("ALTER TABLE {} ENABLE TRIGGER USER").format(EVENTS))


def _verify_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[Any]]:
    code = main(["audit", "verify", SPECTRAL, "--json", *args])
    return code, json.loads(capsys.readouterr().out)


def _tenant() -> str:
    return f"ws-{uuid.uuid4().hex[:8]}"


def test_auditor_verifies_every_tenant_it_finds_in_the_journal(
    database: str, spectral: AgentSpec, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = sorted([_tenant(), _tenant()])
    _write(spectral, database, a, 3)
    _write(spectral, database, b, 2)
    code, rows = _verify_json(capsys)
    assert code == 0
    assert [(r["tenant"], r["events"], r["last_seq"], r["intact"]) for r in rows] == [
        (a, 3, 3, True), (b, 2, 2, True)]
    assert all(len(r["head_hash"]) == 64 for r in rows)


def test_verify_chain_runs_as_the_auditor_across_tenants(
    database: str, spectral: AgentSpec
) -> None:
    tenant = _tenant()
    _write(spectral, database, tenant, 2)
    with connect_auditor(auditor_dsn(database)) as conn:
        assert conn.info.user == "primitives_auditor"
        reports = verify_chains(conn, spectral, tenants=[tenant, "ws-never-written"])
    assert [(r.tenant, r.events, r.intact) for r in reports] == [
        (tenant, 2, True), ("ws-never-written", 0, True)]


def test_edited_payload_breaks_the_chain_at_that_seq_and_exits_1(
    database: str, spectral: AgentSpec, capsys: pytest.CaptureFixture[str],
    wide_console: None,
) -> None:
    victim, bystander = _tenant(), _tenant()
    _write(spectral, database, victim, 4)
    _write(spectral, database, bystander, 2)
    _tamper(database, sql.SQL(
        "UPDATE {} SET payload = payload || '{{\"note\": \"rewritten\"}}' "
        "WHERE workspace_id = %s AND seq = 2").format(EVENTS), (victim,))
    assert main(["audit", "verify", SPECTRAL]) == 1
    captured = capsys.readouterr()
    assert f"spectral/{victim} broken at seq 2" in captured.err
    assert "1 of 2 chain(s) broken" in captured.err
    code, rows = _verify_json(capsys)
    assert code == 1
    status = {r["tenant"]: r["broken_at"] for r in rows}
    assert status == {victim: 2, bystander: None}


def test_removed_middle_event_breaks_the_chain_at_the_gap(
    database: str, spectral: AgentSpec, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = _tenant()
    _write(spectral, database, tenant, 4)
    _tamper(database, sql.SQL("DELETE FROM {} WHERE workspace_id = %s AND seq = 3").format(
        EVENTS), (tenant,))
    code, rows = _verify_json(capsys, "--tenant", tenant)
    assert code == 1 and rows[0]["broken_at"] == 3


def test_removed_newest_events_pass_alone_but_fail_against_an_anchor(
    database: str, spectral: AgentSpec, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    tenant = _tenant()
    _write(spectral, database, tenant, 3)
    code, before = _verify_json(capsys, "--tenant", tenant)
    assert code == 0
    anchor = tmp_path / "anchor.json"
    anchor.write_text(json.dumps(before))
    _tamper(database, sql.SQL("DELETE FROM {} WHERE workspace_id = %s AND seq = 3").format(
        EVENTS), (tenant,))
    code, rows = _verify_json(capsys, "--tenant", tenant)
    assert code == 0 and rows[0]["last_seq"] == 2  # a shortened chain is still a valid chain
    code, rows = _verify_json(capsys, "--tenant", tenant, "--anchor", str(anchor))
    assert code == 1
    assert rows[0]["anchor_broken_at"] == 3 and rows[0]["broken_at"] is None


def test_anchor_of_a_tenant_whose_events_are_all_gone_is_reported(
    database: str, spectral: AgentSpec, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    tenant = _tenant()
    _write(spectral, database, tenant, 1)
    _, before = _verify_json(capsys)
    anchor = tmp_path / "anchor.json"
    anchor.write_text(json.dumps(before))
    _tamper(database, sql.SQL("DELETE FROM {} WHERE workspace_id = %s").format(EVENTS),
            (tenant,))
    code, rows = _verify_json(capsys, "--anchor", str(anchor))
    assert code == 1
    assert [(r["tenant"], r["events"], r["anchor_broken_at"]) for r in rows] == [(tenant, 0, 1)]


def test_verify_prints_one_row_per_agent_and_tenant(
    database: str, spectral: AgentSpec, capsys: pytest.CaptureFixture[str],
    wide_console: None,
) -> None:
    tenant = _tenant()
    _write(spectral, database, tenant, 2)
    assert main(["audit", "verify", SPECTRAL, "--tenant", tenant]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if tenant in line)
    assert "spectral" in row and "intact" in row
    assert "ok: 1 chain(s) of 1 agent(s) intact" in out


def test_unreadable_anchor_file_exits_1(
    database: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["audit", "verify", SPECTRAL, "--anchor", str(tmp_path / "nope.json")]) == 1
    assert "cannot read the anchor file" in capsys.readouterr().err
