"""bench.locomo runs end to end on a tiny synthetic conversation (the LoCoMo file's shape,
text of our own): every case is measured, the store case of the minimal spec included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.locomo import main
from tests.conftest import PostgresHandle

TURNS = [
    ("Ana", "I adopted a grey cat called Miso last week."),
    ("Ben", "What does Miso like to eat?"),
    ("Ana", "Mostly salmon, and she naps on the windowsill."),
    ("Ben", "I started learning the cello in March."),
]
DATA = [{
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ana", "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": s, "dia_id": f"D1:{i + 1}", "text": t}
                      for i, (s, t) in enumerate(TURNS[:2])],
        "session_2_date_time": "10:02 am on 9 May, 2023",
        "session_2": [{"speaker": s, "dia_id": f"D2:{i + 1}", "text": t}
                      for i, (s, t) in enumerate(TURNS[2:])],
    },
    "qa": [
        {"question": "What is the name of Ana's cat?", "answer": "Miso", "evidence": ["D1:1"],
         "category": 4},
        {"question": "What does the cat eat?", "answer": "salmon", "evidence": ["D2:1; D1:2"],
         "category": 1},
        {"question": "Which instrument is Ben learning?", "answer": "cello",
         "evidence": ["D9:9"], "category": 4},
    ],
}]


def test_bench_locomo_measures_every_case_with_the_store_of_the_minimal_spec(
        pg: PostgresHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    data, out = tmp_path / "locomo.json", tmp_path / "result.json"
    data.write_text(json.dumps(DATA))
    assert main([str(data), "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result["recall"]) == {"fused", "semantic", "lexical", "store minimal spec"}
    assert result["questions"] == 2 and result["turns"] == 4
    assert result["evidence_cleaning"]["dropped_ids"] == ["D9:9"]
    # four turns, top 5: the fused cases rank every turn (lexical alone returns only the
    # turns that share a word with the question)
    assert result["recall"]["fused"]["5"] == result["recall"]["store minimal spec"]["5"] == 1.0
    assert "signals: [semantic, lexical]" in result["store_minimal_spec"]
    assert result["seconds"]["store_ingest"] >= 0 and result["seconds"]["store_queries"] >= 0
