"""bench.embed_deferred runs end to end at a tiny size; the result structure, not timings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench._report import _embed_deferred_lines
from bench.embed_deferred import main
from tests.conftest import PostgresHandle


def test_bench_embed_deferred_runs_small_and_writes_every_measurement(
        pg: PostgresHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    out = tmp_path / "embed_deferred.json"
    assert main(["--rounds", "2", "--block", "5", "--tenants", "3", "--rows", "10",
                 "--batch", "4", "--embedder", "hashing", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["command"].startswith("python -m bench.embed_deferred --rounds 2")
    writes = result["writes"]
    for mode in ("none", "deferred", "inline"):
        assert writes[mode]["p50_ms"] > 0
    assert writes["p50_ratio_deferred_over_none"] > 0 and writes["target"] == 1.2
    worker = result["worker"]
    assert worker["rows"] == 10 and worker["batch"] == 4 and len(worker["rounds"]) == 2
    assert all(r["worker_rows_per_s"] > 0 and r["encode_rows_per_s"] > 0
               for r in worker["rounds"])
    assert worker["target"] == 0.8
    rendered = "\n".join(_embed_deferred_lines(result))
    assert "deferred" in rendered and "embed_pending" in rendered
