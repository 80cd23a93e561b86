"""The drift diagnostic (``python -m bench.drift``): bursts of our writes and PostgresStore's
puts, one after the other, and how it sums them up (structure, not timings)."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from bench.drift import FIGURES, _correlation, _quarters, _spread, main, measure, render_table
from tests.conftest import PostgresHandle


def _burst(engine_ms: float, store_ms: float) -> dict[str, float]:
    return {"at_s": 0.0, "engine_ms": engine_ms, "engine_cpu_us": engine_ms * 800,
            "store_ms": store_ms, "store_cpu_us": store_ms * 700,
            "engine_over_store": round(engine_ms / store_ms, 3)}


def test_a_run_writes_both_systems_in_every_burst_and_sums_them_up(
    pg: PostgresHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)  # its databases on the session's server
    seen: list[str] = []
    out = tmp_path / "drift.json"
    result = measure(seconds=0.2, burst=5, tenants=3, out=out,
                     command="python -m bench.drift (smoke)", progress=seen.append)
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    bursts = result["bursts"]
    assert bursts
    for row in bursts:
        assert all(row[key] > 0 for key in FIGURES)
        assert row["engine_over_store"] == round(row["engine_ms"] / row["store_ms"], 3)
    for key in FIGURES:
        spread = result["spread"][key]
        assert spread["p10"] <= spread["median"] <= spread["p90"]
    assert result["store_fastest_quarter"]["store_ms"] <= result["store_slowest_quarter"][
        "store_ms"]
    assert "python -m bench.drift (smoke)" in render_table(result)
    assert any("database" in line for line in seen)  # its progress went where it was told


def test_each_burst_lands_its_writes_in_the_engine_database(
    pg: PostgresHandle, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The engine's bursts are real writes: counted in the bench database before it is
    dropped, through a wrapper around the engine target's writer."""
    import bench.drift as drift

    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    counted: dict[str, int] = {}
    real = drift.EngineTarget

    class Counting(real):  # type: ignore[misc, valid-type]
        def close(self) -> None:
            conn = self.engine._pool.getconn()
            try:
                with conn.transaction():
                    conn.execute("SELECT set_config('primitives.tenant', 'bench-000', true)")
                    row = conn.execute(
                        "SELECT count(*) FROM platform.spectral_memories").fetchone()
                counted["tenant_0"] = int(row[0]) if row else -1
            except psycopg.Error as err:  # pragma: no cover - shown on failure
                counted["error"] = str(err)  # type: ignore[assignment]
            finally:
                self.engine._pool.putconn(conn)
            super().close()

    monkeypatch.setattr(drift, "EngineTarget", Counting)
    result = measure(seconds=0.1, burst=4, tenants=1, progress=lambda _: None)
    # warm-up (min(burst, 50) writes) plus every burst, all to the one tenant
    assert counted == {"tenant_0": 4 + 4 * len(result["bursts"])}


def test_the_quarters_follow_postgresstore_and_the_spread_is_ordered() -> None:
    bursts = [_burst(1.0 + k / 10, 0.5 + k / 20) for k in range(8)]
    quarters = _quarters(bursts)
    assert quarters["store_fastest_quarter"]["store_ms"] == pytest.approx(0.525)  # k = 0, 1
    assert quarters["store_slowest_quarter"]["engine_ms"] == pytest.approx(1.65)  # k = 6, 7
    spread = _spread(bursts)
    assert spread["engine_ms"] == {"p10": 1.0, "median": 1.35, "p90": 1.7}
    assert _correlation(bursts, "engine_ms", "store_ms") == pytest.approx(1.0)
    assert _correlation(bursts[:1], "engine_ms", "store_ms") is None  # one burst: no figure


def test_bad_arguments_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--seconds", "0"], ["--burst", "0"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
    assert "--seconds must be positive and --burst at least 1" in capsys.readouterr().err
    with pytest.raises(ValueError, match="burst at least 1"):
        measure(seconds=1, burst=0)


def test_a_server_whose_backends_are_not_here_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import bench.drift as drift

    def elsewhere(pid: int) -> int:
        raise FileNotFoundError(f"/proc/{pid}/schedstat")

    class OnePool:
        def getconn(self) -> object:
            return type("C", (), {"info": type("I", (), {"backend_pid": 12345})()})()

        def putconn(self, conn: object) -> None:
            pass

    monkeypatch.setattr(drift, "backend_cpu_ns", elsewhere)
    with pytest.raises(SystemExit, match="server must run on this machine"):
        drift._pid(OnePool())
