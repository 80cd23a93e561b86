"""bench.pii runs end to end at a tiny size; the result structure, not timings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench._report import _pii_lines
from bench.pii import main
from tests.conftest import PostgresHandle


def test_bench_pii_runs_small_and_writes_both_contents(
        pg: PostgresHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    out = tmp_path / "pii.json"
    assert main(["--writes", "20", "--rounds", "2", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["command"] == f"python -m bench.pii --writes 20 --rounds 2 --out {out}"
    for variant in ("clean", "with_pii"):
        r = result[variant]
        assert r["plain_p50_ms"] > 0 and r["guarded_p50_ms"] > 0 and r["ratio"] > 0
    assert result["target"] == 1.5 and isinstance(result["target_met"], bool)
    rendered = "\n".join(_pii_lines(result))
    assert "no personal data" in rendered and "redacted" in rendered
