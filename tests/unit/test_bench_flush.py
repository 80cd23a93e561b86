"""What every benchmark result records and how it is written: the disk's flush latency, how the
report shows it, and the results file itself."""

from __future__ import annotations

import json
from pathlib import Path

from bench._env import flush_latency_us, write_result
from bench._report import _flush
from bench._targets import ROOT


def test_flush_latency_is_measured_in_the_folder_and_leaves_nothing_behind(
        tmp_path: Path) -> None:
    latency = flush_latency_us(str(tmp_path), seconds=0.05)
    assert latency is not None and 0 < latency < 1_000_000
    assert list(tmp_path.iterdir()) == []  # the probe file is removed


def test_flush_latency_of_a_folder_that_cannot_be_written_is_none(tmp_path: Path) -> None:
    assert flush_latency_us(str(tmp_path / "missing"), seconds=0.05) is None


def test_the_report_names_both_flush_figures_or_neither() -> None:
    line = _flush({"disk_flush_us_at_start": 176.4, "disk_flush_us_at_end": 912.0})
    assert "176 us at the start and 912 us at the end" in line
    assert _flush({"disk_flush_us_at_start": 176.4}) == ""  # a run on another server's disk
    assert _flush({}) == ""  # results from before the probe


def test_a_result_is_written_as_indented_json_and_shown_relative_to_the_project(
    tmp_path: Path,
) -> None:
    result = {"benchmark": "x", "rows": [1, 2], "nested": {"a": None}}
    outside = tmp_path / "new" / "folder" / "r.json"
    assert write_result(outside, result) == str(outside)  # its folders made
    assert outside.read_text(encoding="utf-8") == json.dumps(result, indent=2) + "\n"
    inside = ROOT / "bench" / "results" / "quick" / "_write_result_test.json"
    try:
        assert write_result(inside, result) == "bench/results/quick/_write_result_test.json"
        assert json.loads(inside.read_text(encoding="utf-8")) == result
    finally:
        inside.unlink(missing_ok=True)
