"""The server-ceiling diagnostic: its replayed writes are real engine writes, and
``python -m bench.ceiling`` runs end to end with tiny counts (structure, not timings)."""

from __future__ import annotations

import json
import uuid
import warnings
from pathlib import Path
from typing import Any

import psycopg
import pytest

from bench._replay import ReplayTarget, one_message_call
from bench._targets import BENCH_SPEC, BENCH_TIER, payload
from bench.ceiling import KINDS, measure, render_table
from primitives.audit import connect_auditor, verify_chains
from primitives.db import tenant_transaction
from primitives.db._pipeline import SET_TENANT, Command
from primitives.engine import Engine
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle

FIELDS = dict(zip(("content", "envelope", "tags"), payload(0), strict=True))


def _rows(pg: PostgresHandle, tenant: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(pg.app_dsn, autocommit=True) as conn, \
            tenant_transaction(conn, tenant):
        return conn.execute(
            "SELECT m.id, m.workspace_id, m.tier, m.content, m.tags, e.seq, e.kind "
            "FROM platform.spectral_memories m JOIN platform.spectral_memory_events e "
            "ON e.workspace_id = m.workspace_id AND e.memory_id = m.id ORDER BY e.seq"
        ).fetchall()


@pytest.mark.parametrize("relaxed", [False, True])
def test_replayed_writes_are_whole_engine_writes_under_their_own_tenant(
    pg: PostgresHandle, spectral: AgentSpec, relaxed: bool,
) -> None:
    first, second = f"replay-{uuid.uuid4().hex[:8]}", f"o'replay-{uuid.uuid4().hex[:8]}"
    target = ReplayTarget(pg.app_dsn, BENCH_SPEC, BENCH_TIER, FIELDS, relaxed=relaxed)
    try:
        write = target.writer()
        for n in range(3):
            write(first, n)
        for n in range(2):
            write(second, n)
    finally:
        target.close()

    a, b = _rows(pg, first), _rows(pg, second)
    assert [(r[1], r[5], r[6]) for r in a] == [(first, s, "observed") for s in (1, 2, 3)]
    assert [(r[1], r[5], r[6]) for r in b] == [(second, s, "observed") for s in (1, 2)]
    assert len({r[0] for r in a + b}) == 5  # a fresh memory id for every write
    assert {(r[2], r[3], tuple(r[4])) for r in a + b} == {
        (BENCH_TIER, FIELDS["content"], tuple(FIELDS["tags"]))}
    with connect_auditor(pg.auditor_dsn) as conn:
        reports = verify_chains(conn, spectral, tenants=[first, second])
    assert sorted((r.tenant, r.events, r.intact) for r in reports) == sorted([
        (first, 3, True), (second, 2, True)])


def test_only_the_relaxed_replay_turns_synchronous_commit_off(
    pg: PostgresHandle, spectral: AgentSpec,
) -> None:
    heads = {}
    for relaxed in (False, True):
        target = ReplayTarget(pg.app_dsn, BENCH_SPEC, BENCH_TIER, FIELDS, relaxed=relaxed)
        try:
            heads[relaxed] = target._head(b"t-1")
        finally:
            target.close()
    assert heads[False] == [Command(b"BEGIN"), Command(SET_TENANT, (b"t-1",))]
    assert heads[True] == [*heads[False], Command(b"SET LOCAL synchronous_commit = off")]


def test_ceiling_runs_end_to_end_and_writes_its_json(
    pg: PostgresHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "ceiling.json"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PRIMITIVES_DSN", pg.admin_dsn)  # its databases on the session's server
        result = measure(writers=2, seconds=0.3, rounds=1, tenants=5, out=out,
                         command="python -m bench.ceiling (smoke)")
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    assert result["parameters"]["writers"] == 2 and result["parameters"]["mode"] == "processes"
    assert set(result["targets"]) == set(KINDS)
    for row in result["targets"].values():
        assert row["errors"] == 0 and row["writes"] > 0
        assert len(row["rounds_writes_per_s"]) == 1 and row["writes_per_s"] > 0
    rates = {kind: result["targets"][kind]["writes_per_s"] for kind in KINDS}
    assert result["ratios"] == {
        "engine_over_replay": round(rates["engine"] / rates["replay"], 2),
        "replay_over_replay_relaxed": round(rates["replay"] / rates["replay-relaxed"], 2)}
    table = render_table(result)
    assert "python -m bench.ceiling (smoke)" in table and "server ceiling" in table
    assert "wrote" in capsys.readouterr().out


def test_a_replay_target_refuses_a_shared_pool(pg: PostgresHandle) -> None:
    from bench._targets import TargetSpec, open_target

    with pytest.raises(ValueError, match="processes mode"):
        open_target(TargetSpec("replay", pg.app_dsn), connections=8)


def test_only_a_one_message_write_can_stand_in_for_the_engines(
    pg: PostgresHandle, spectral: AgentSpec,
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # no embedder: expected
        engine = Engine.connect(spectral, pg.app_dsn, max_connections=1)
    try:
        with psycopg.connect(pg.app_dsn, autocommit=True) as conn:
            call = one_message_call(engine, conn, "t-1", BENCH_TIER, "x", {"tags": ["a"]})
            assert call.tenant == "t-1" and call.written["tags"] == ["a"]
            # a keyed write takes the general path: the benchmarks refuse it
            with pytest.raises(AssertionError, match="one-message form"):
                one_message_call(engine, conn, "t-1", BENCH_TIER, "x", {"key": "k"})
    finally:
        engine.close()
