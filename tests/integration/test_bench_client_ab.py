"""The client CPU A/B diagnostic (``python -m bench.client_ab``): both engines write every
write, and the variant takes its connections through the pool's ``connection()`` context
(structure, not timings)."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from bench._targets import BENCH_SPEC
from bench.client_ab import (
    _ContextPool,
    _engine,
    _Skip,
    main,
    measure,
    render_table,
    unhashed_payload,
)
from primitives.engine import _core, _observe_message
from primitives.engine._core import checked_write, observed_payload
from primitives.engine._records import Memory
from primitives.spec import AgentSpec, load_spec
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


class _Owner:
    @staticmethod
    def plain(x: int) -> int:
        return x + 1

    @classmethod
    def made(cls, x: int) -> str:
        return f"{cls.__name__}:{x}"


def test_a_skipped_step_is_skipped_only_while_on_and_restored_after() -> None:
    skip = _Skip()
    skip.patch(_Owner, "plain", lambda x: 0)
    skip.patch(_Owner, "made", lambda x: "skipped")
    assert (_Owner.plain(1), _Owner.made(1)) == (2, "_Owner:1")
    skip.on = True
    assert (_Owner.plain(1), _Owner.made(1)) == (0, "skipped")
    skip.undo()
    assert (_Owner.plain(1), _Owner.made(1)) == (2, "_Owner:1")
    assert isinstance(_Owner.__dict__["made"], classmethod)


def test_the_unhashed_payload_keeps_the_journal_payloads_shape() -> None:
    spec = load_spec(BENCH_SPEC)
    w = checked_write(spec, "cycle", "text", typology=None, key=None, namespace=["a"],
                      value=None, envelope={"k": 1}, tags=(), scope_id="s")
    real, unhashed = observed_payload(w, "key-1", "direct"), unhashed_payload(w, "key-1", "direct")
    assert list(unhashed) == list(real)
    assert {k: v for k, v in unhashed.items() if not k.endswith("sha256")} == {
        k: v for k, v in real.items() if not k.endswith("sha256")}
    assert unhashed["content_sha256"] == "0" * 64 != real["content_sha256"]


@pytest.mark.parametrize("variant", ["no-limits", "no-memory", "no-content-hash"])
def test_each_upper_bound_variant_runs_and_leaves_the_engine_as_it_was(
    pg: PostgresHandle, monkeypatch: pytest.MonkeyPatch, variant: str,
) -> None:
    before = (_core.check_limits, Memory.__dict__["from_written"],
              _observe_message.observed_payload)
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    result = measure(variant=variant, writes=6, rounds=1, warmup=1, tenants=2, out=None,
                     progress=lambda _: None)
    assert result["rounds"][0]["variant"] > 0
    assert (_core.check_limits, Memory.__dict__["from_written"],
            _observe_message.observed_payload) == before
