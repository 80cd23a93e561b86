"""bench.maintain runs end to end at a tiny size; the result structure, not timings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench._report import _maintain_lines
from bench.maintain import main
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")


def test_bench_maintain_runs_small_and_writes_every_measurement(
        pg: PostgresHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    out = tmp_path / "maintain.json"
    assert main(["--rows", "2000", "--tenants", "20", "--rounds", "1", "--seconds", "0.5",
                 "--searches", "50", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["rows"] == 2000 and result["tenants"] == 20
    assert result["command"].startswith("python -m bench.maintain --rows 2000")
    catch_up = result["catch_up"]
    assert catch_up["seq_scan_s"] > 0 and catch_up["maintain_s"] > 0
    # every 500th row carries three evidence keys: the first pass promotes them, and counts
    # the lapsed validity windows of the semantic rows loaded up to 400 days old
    promote = "promote workspace.episodic->workspace.semantic"
    assert catch_up["changed"]["spectral"][promote] > 0
    assert catch_up["changed"]["spectral"]["corroboration"] > 0
    [round_] = result["rounds"]
    assert round_["day"] == 1 and round_["seq_scan_s"] > 0 and round_["maintain_s"] > 0
    assert round_["changed"]["spectral"][promote] == 0      # promoted once, never again
    assert result["maintain_vs_scan"]["worst"] == round_["ratio"]
    [writes] = result["writers"]["rounds"]
    assert writes["alone_writes_per_s"] > 0 and writes["beside_writes_per_s"] > 0
    assert writes["passes_during"] >= 1
    search = result["search_access_tracking"]
    assert search["tracked"]["p95_ms"] > 0 and search["untracked"]["p95_ms"] > 0
    assert search["p95_ratio"] > 0 and search["target"] == 1.1
    rendered = "\n".join(_maintain_lines(result))
    assert "sequential scan" in rendered and "access tracking" in rendered
    assert "never maintained history" in rendered
