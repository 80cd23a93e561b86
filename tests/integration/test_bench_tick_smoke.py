"""bench.tick runs end to end at a tiny size; the result structure, not timings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench._report import _tick_lines
from bench.tick import main
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")


def test_bench_tick_runs_small_and_compares_the_tick_with_an_update(
        pg: PostgresHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    out = tmp_path / "tick.json"
    assert main(["--rows", "200", "--jobs", "4", "--rounds", "2", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["rows"] == 200 and result["jobs"] == 4
    assert result["command"].startswith("python -m bench.tick --rows 200")
    assert len(result["rounds"]) == 2
    assert all(r["update_ms"] > 0 and r["tick_ms"] > 0 for r in result["rounds"])
    assert result["tick_vs_update"]["target"] == 2.0
    rendered = "\n".join(_tick_lines(result))
    assert "bench.tick" in rendered and "UPDATE" in rendered
