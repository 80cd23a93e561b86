"""The write benchmarks run end to end with tiny counts; the result structure, not timings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench._report import render_markdown
from bench.run import Settings, run
from tests.conftest import PostgresHandle

TINY = Settings(writes=24, warmup=4, block=12, writers=2, seconds=0.4, rounds=1, tenants=5,
                modes=("threads", "processes"), shared_store=True, breakdown_writes=10)

LATENCY_KEYS = {"p50_ms", "p95_ms", "p99_ms", "mean_ms", "min_ms", "max_ms"}


@pytest.fixture(scope="module")
def results(pg: PostgresHandle,
            tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, object], Path]:
    folder = tmp_path_factory.mktemp("bench")
    with pytest.MonkeyPatch.context() as env:
        # the session's server; the benchmark makes (and drops) its own two databases there
        env.setenv("PRIMITIVES_DSN", pg.admin_dsn)
        result = run(TINY, out_dir=folder, docs=folder / "benchmarks.md",
                     command="python -m bench.run (smoke)")
    return result, folder


def test_bench_run_writes_json_with_machine_parameters_and_every_measurement(
    results: tuple[dict[str, object], Path],
) -> None:
    result, folder = results
    stored = json.loads((folder / "writes.json").read_text())
    assert stored == json.loads(json.dumps(result))
    assert stored["command"] == "python -m bench.run (smoke)"
    machine = stored["machine"]
    assert machine["cores"] >= 1 and machine["python"] and machine["postgresql"]
    assert stored["parameters"]["writes"] == 24 and stored["parameters"]["writers"] == 2

    single = {r["target"]: r for r in stored["single_writer"]}
    assert set(single) == {"engine", "langgraph"}
    for row in single.values():
        assert row["writes"] == 24
        assert set(row["latency"]) == LATENCY_KEYS
        assert row["writes_per_s"] > 0

    load = {(r["target"], r["mode"]): r for r in stored["concurrent"]}
    assert set(load) == {("engine", "threads"), ("langgraph", "threads"),
                         ("engine", "processes"), ("langgraph", "processes"),
                         ("langgraph-shared-store", "threads")}
    for row in load.values():
        assert row["errors"] == 0
        assert row["writes"] == sum(row["per_writer"]) > 0
        assert len(row["per_writer"]) == 2
        assert set(row["latency"]) == LATENCY_KEYS

    assert set(stored["ratios"]) == {
        "single_p50_ms_ours_over_theirs", "single_p95_ms_ours_over_theirs",
        "single_p99_ms_ours_over_theirs", "writes_per_s_threads_ours_over_theirs",
        "writes_per_s_processes_ours_over_theirs"}
    assert set(stored["targets_met"]) == {"goals", "single_p50_ms", "single_p95_ms",
                                          "writes_per_s_8", "writes_per_s_8_by_mode"}
    assert set(stored["targets_met"]["writes_per_s_8_by_mode"]) == {"threads", "processes"}
    assert stored["breakdown"]["total"]["p50_ms"] > 0


def test_bench_markdown_names_the_command_machine_and_both_systems(
    results: tuple[dict[str, object], Path],
) -> None:
    result, folder = results
    page = (folder / "benchmarks.md").read_text()
    assert page == render_markdown(result)
    assert "python -m bench.run (smoke)" in page
    assert "PostgresStore.put" in page and "engine.observe" in page
    assert "| *ours / theirs* | threads |" in page
    assert "connected as the admin" in page
