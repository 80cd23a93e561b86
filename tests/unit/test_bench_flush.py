"""The disk's flush latency that every benchmark result records, and how the report shows it."""

from __future__ import annotations

from pathlib import Path

from bench._env import flush_latency_us
from bench._report import _flush


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
