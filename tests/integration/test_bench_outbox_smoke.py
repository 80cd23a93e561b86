"""bench.outbox runs end to end at a tiny size; the result structure, not timings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench._report import _outbox_lines
from bench.outbox import main
from tests.conftest import PostgresHandle


def test_bench_outbox_runs_small_and_writes_both_writes(
        pg: PostgresHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    out = tmp_path / "outbox.json"
    assert main(["--writes", "20", "--rounds", "2", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["command"] == f"python -m bench.outbox --writes 20 --rounds 2 --out {out}"
    for variant in ("unpublished", "published"):
        r = result[variant]
        assert r["private_p50_ms"] > 0 and r["published_p50_ms"] > 0 and r["ratio"] > 0
    assert result["outbox_entries"] == 20 * 2 + 20  # every semantic write, warm-up included
    assert result["target"] == 1.1 and isinstance(result["target_met"], bool)
    rendered = "\n".join(_outbox_lines(result))
    assert "outside the gate" in rendered and "published" in rendered
