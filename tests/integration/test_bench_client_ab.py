"""The client CPU A/B diagnostic (``python -m bench.client_ab``): both engines write every
write, and the variant takes its connections through the pool's ``connection()`` context
(structure, not timings)."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from bench.client_ab import _ContextPool, _engine, main, measure, render_table
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle


def test_a_run_writes_through_both_engines_and_reports_each(
    pg: PostgresHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)  # its databases on the session's server
    out = tmp_path / "ab.json"
    result = measure(variant="pool-context", writes=12, rounds=2, warmup=2, tenants=3,
                     out=out, command="python -m bench.client_ab (smoke)",
                     progress=lambda _: None)
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    assert len(result["rounds"]) == 2
    for row in result["rounds"]:
        assert set(row) == {"engine", "variant"} and row["engine"] > 0 and row["variant"] > 0
    assert result["variant_over_engine"]["per_round"] == [
        round(r["variant"] / r["engine"], 3) for r in result["rounds"]]
    assert "python -m bench.client_ab (smoke)" in render_table(result)


def test_the_pool_context_variant_takes_and_returns_through_the_context(
    pg: PostgresHandle, spectral: AgentSpec,
) -> None:
    engine = _engine(pg.app_dsn, "pool-context")
    try:
        pool = engine._pool
        assert isinstance(pool, _ContextPool)
        conn = pool.getconn()
        assert isinstance(conn, psycopg.Connection) and pool._open  # the context is open
        assert pool.get_stats().get("pool_available", 0) == 0  # its one connection is out
        pool.putconn(conn)
        assert not pool._open
        assert pool.get_stats()["pool_available"] == 1  # back in the real pool
        memory = engine.observe({"workspace_id": "client-ab"}, "cycle", "through the context")
        assert memory.content == "through the context" and not pool._open
    finally:
        engine.close()


def test_an_unknown_variant_or_count_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="unknown variant"):
        measure(variant="nope", progress=lambda _: None)
    with pytest.raises(SystemExit):
        main(["--rounds", "0"])
    assert "at least 1" in capsys.readouterr().err
