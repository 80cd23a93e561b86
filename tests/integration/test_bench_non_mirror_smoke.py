"""bench.non_mirror runs end to end at a tiny size; the result structure, not timings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench._report import _non_mirror_lines
from bench.non_mirror import main
from tests.conftest import PostgresHandle


def test_bench_non_mirror_runs_small_and_reports_each_canonical_size(
        pg: PostgresHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    out = tmp_path / "non_mirror.json"
    assert main(["--canonical", "10,40", "--writes", "10", "--rounds", "2",
                 "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["command"] == ("python -m bench.non_mirror --canonical 10,40 --writes 10 "
                                 f"--rounds 2 --out {out}")
    assert [r["canonical_rows"] for r in result["sizes"]] == [10, 40]
    for r in result["sizes"]:
        assert r["plain_p50_ms"] > 0 and r["guarded_p50_ms"] > 0 and r["ratio"] > 0
    rendered = "\n".join(_non_mirror_lines(result))
    assert "| 40 |" in rendered and "trigram" in rendered
    for r in result["sizes"]:  # the candidate lookups, timed on their own
        assert r["shingle_lookup_ms"] > 0 and r["signature_lookup_ms"] > 0
        assert r["signature_entries"] >= 0
