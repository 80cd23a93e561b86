"""Seed 001 §6 replay: a MACE job of 200+ events, run with one seed on three fresh databases
(the third after the server was stopped and started again), writes the same journal (event
ids, kinds, memory ids, payloads, seeded times, chain hashes) and the same memory rows, byte
for byte. Read back as the app role; the chains verified as the auditor."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from primitives._project import migrate
from primitives.audit import verify_chains
from primitives.db import (
    app_dsn,
    apply_migrations,
    auditor_dsn,
    server_status,
    start_server,
    stop_server,
)
from primitives.engine import Engine
from primitives.engine._determinism import seeded_epoch
from primitives.spec import AgentSpec, load_spec
from tests.integration._mace_job import journal, memory_rows, run_job, table_rows

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")

ROUNDS = 12
"""Rounds of the job: 16 events each (after the first), with the SEM writes and the job's
end: a little over 200 events."""


def _database(admin: str, spec: AgentSpec) -> str:
    """A new database on the server of ``admin`` with the framework and ``spec`` migrated;
    returns its admin DSN."""
    name = f"replay_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    params = conninfo_to_dict(admin)
    params["dbname"] = name
    dsn = make_conninfo("", **params)
    apply_migrations(dsn)
    migrate([spec], dsn=dsn)
    return dsn


def _run(admin: str, spec: AgentSpec, anchor: dict[str, str]) -> str:
    """The job on a fresh database, through the app role; returns that database's app DSN."""
    dsn = app_dsn(_database(admin, spec))
    with Engine.connect(spec, dsn, max_connections=1) as engine:
        run_job(engine, anchor, rounds=ROUNDS)
    return dsn


def test_a_200_event_job_replays_byte_for_byte_twice_and_after_a_server_restart(
        make_home: Callable[[], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    # a server of its own: stopping it must not touch the session's
    home = make_home()
    for name in ("PRIMITIVES_DSN", "PRIMITIVES_APP_DSN", "PRIMITIVES_AUDITOR_DSN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PRIMITIVES_HOME", str(home))
    spec = load_spec(ROOT / "agents" / "mace.yaml")
    anchor = {"user_id": "u-replay", "job_seed": "seed-replay-1", "trace_id": "tr-1"}
    admin = start_server(home)

    first = _run(admin, spec, anchor)
    ran = journal(first, spec, anchor["user_id"])
    rows = memory_rows(first, spec, anchor["user_id"])
    stored = table_rows(first, spec, anchor["user_id"])
    assert len(ran) >= 200
    kinds = [r[2] for r in ran]
    assert kinds.count("promoted") == 2 * ROUNDS and kinds.count("ticked") == 2 * ROUNDS
    assert ran[0][6] == seeded_epoch(anchor["job_seed"])
    # one second per tick: the clock reads the seed's epoch plus the ticks before an event
    ticks_before = [kinds[:n].count("ticked") for n in range(len(kinds))]
    assert [r[6].replace(microsecond=0) - ran[0][6] for r in ran] == [
        timedelta(seconds=n) for n in ticks_before]

    second = _run(admin, spec, anchor)
    assert journal(second, spec, anchor["user_id"]) == ran
    assert memory_rows(second, spec, anchor["user_id"]) == rows
    assert table_rows(second, spec, anchor["user_id"]) == stored

    stop_server(home)
    assert not server_status(home).running
    admin = start_server(home)
    third = _run(admin, spec, anchor)
    assert journal(third, spec, anchor["user_id"]) == ran
    assert memory_rows(third, spec, anchor["user_id"]) == rows
    assert table_rows(third, spec, anchor["user_id"]) == stored
    assert journal(first, spec, anchor["user_id"]) == ran  # what the restart kept, unchanged

    for dsn in (first, second, third):
        with psycopg.connect(auditor_dsn(dsn), autocommit=True) as conn:
            [report] = verify_chains(conn, spec, tenants=[anchor["user_id"]])
        assert report.intact and report.events == len(ran) and report.head_hash == ran[-1][8]
