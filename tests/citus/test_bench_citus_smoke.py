"""bench.citus runs end to end at a tiny size; the result structure, not timings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench._report import _citus_lines
from bench.citus import main
from tests.citus._cluster import Cluster
from tests.conftest import PostgresHandle


def test_bench_citus_runs_small_and_writes_every_measurement(
        pg: PostgresHandle, cluster: Cluster, coordinator: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # ``coordinator``: the session's migration first, so the suite's first migrate of the
    # reference specs is the one that applies their plans
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    out = tmp_path / "citus.json"
    assert main(["--tenants", "3", "--writers", "2", "--seconds", "0.5", "--rounds", "2",
                 "--searches", "50", "--out", str(out)], cluster=cluster) == 0
    result = json.loads(out.read_text())
    assert result["command"].startswith("python -m bench.citus --tenants 3")
    assert result["tenants"] == 3 and len(result["writes"]["rounds"]) == 2
    for round_ in result["writes"]["rounds"]:
        for where in ("one", "cluster"):
            assert round_[where]["writes"] > 0 and round_[where]["writes_per_s"] > 0
        assert round_["ratio"] > 0
    search = result["search"]
    assert search["searches_each"] == 50
    assert search["one"]["p95_ms"] > 0 and search["cluster"]["p95_ms"] > 0
    assert search["p95_ratio"] > 0 and result["load_average_1m"] >= 0
    rendered = "\n".join(_citus_lines(result))
    assert "cluster / one node" in rendered and "search p95" in rendered
