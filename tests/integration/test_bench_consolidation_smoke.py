"""bench.consolidation runs end to end at a tiny size; the result structure, not timings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench._report import _consolidation_lines
from bench.consolidation import main
from tests.conftest import PostgresHandle


def test_bench_consolidation_runs_small_and_writes_every_measurement(
        pg: PostgresHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    out = tmp_path / "consolidation.json"
    assert main(["--sessions", "3", "--episodes", "10", "--rounds", "2",
                 "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["command"].startswith("python -m bench.consolidation --sessions 3")
    assert len(result["rounds"]) == 2
    for row in result["rounds"]:
        assert row["write_ms"] > 0 and row["consolidate_ms"] > 0 and row["rerun_ms"] > 0
        # ten episodes of the mix: facts and entities are really extracted, every time
        assert row["done"]["episodes"] == 30 and row["done"]["added"] >= 3 * 4
        assert row["done"]["mentions"] > 0 and row["done"]["edges"] >= row["done"]["added"]
    assert result["consolidate_vs_write"]["worst"] > 0
    rendered = "\n".join(_consolidation_lines(result))
    assert "bench.consolidation" in rendered and "consolidate" in rendered
