"""bench.graph runs end to end at a tiny size; the load's shape and the result structure, not
timings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench._report import _graph_lines
from bench.graph import main, shape
from tests.conftest import PostgresHandle


def test_bench_graph_runs_small_and_writes_every_measurement(
        pg: PostgresHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    out = tmp_path / "graph.json"
    assert main(["--nodes", "2000", "--rounds", "6", "--writes", "2", "--warm-writes", "5",
                 "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["command"].startswith("python -m bench.graph --nodes 2000")
    sizes = shape(2000)
    counts = result["counts"]
    assert counts["entities"] == sizes["entities"] == 100
    assert sum(counts["by_typology"].values()) == sizes["memories"] == 1900
    assert counts["by_typology"]["episodic"] == sizes["episodes"] == 1330
    # every edge type of the spec is loaded; temporal: from each turn to the next of its
    # session (66 sessions of 20 turns, then one of 10)
    assert set(counts["edges_by_type"]) == {"temporal", "causal", "entity", "derived_from",
                                            "supersedes"}
    assert counts["edges_by_type"]["temporal"] == 66 * 19 + 9
    assert counts["edges_by_type"]["derived_from"] == 2 * 570
    assert counts["mentions"] > 570 and counts["most_mentioned_entity"] > 1
    # 5 warm writes, then 2 per round over 10 untimed and 6 timed rounds
    assert result["hot_path_writes"] == 5 + 2 * 16
    assert result["write"]["p95_ms"] > 0 and result["plain"]["p95_ms"] > 0
    for kind in ("why", "when"):
        assert result[kind]["p95_ms"] > 0 and result[f"{kind}_vs_plain_p95"] > 0
        assert sum(result[kind]["routed"].values()) == 16      # every question routed so
    # the temporal walk reaches rows from any start: each when question's graph signal did
    assert result["when"]["graph_rows_nonzero_share"] == 1.0
    assert result["target"] == 2.0 and isinstance(result["target_met"], bool)
    rendered = "\n".join(_graph_lines(result))
    assert "plain hybrid search" in rendered and "why question" in rendered
    assert "hot-path write" in rendered
