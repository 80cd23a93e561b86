"""The generated spec reference (docs/reference/spec.md) stays in step with the spec models."""

from __future__ import annotations

from pathlib import Path

import pytest

from primitives.cli import main
from primitives.spec import AgentSpec, spec_reference_markdown
from primitives.spec._reference import _NOTES

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference" / "spec.md"


def test_committed_spec_reference_matches_the_models() -> None:
    assert REFERENCE.read_text(encoding="utf-8") == spec_reference_markdown(), (
        "docs/reference/spec.md is out of date with the spec models: run `make docs`"
    )


def test_spec_reference_is_deterministic() -> None:
    assert spec_reference_markdown() == spec_reference_markdown()


def test_spec_reference_covers_every_spec_key() -> None:
    text = spec_reference_markdown()
    loader_filled = {"policies", "deviations", "source"}
    for key, info in AgentSpec.model_fields.items():
        name = info.alias or key
        if name not in loader_filled:
            assert f"`{name}" in text, name


def test_reference_notes_name_keys_that_exist() -> None:
    text = spec_reference_markdown()
    stale = [path for path in _NOTES if f"| `{path}` |" not in text]
    assert not stale, f"notes for keys the models no longer have: {stale}"


def test_schema_markdown_flag_prints_the_reference(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "--markdown"]) == 0
    assert capsys.readouterr().out == spec_reference_markdown()


def test_benchmarks_page_is_what_the_committed_results_render_to() -> None:
    import json

    from bench._report import render_markdown

    results = ROOT / "bench" / "results"
    written = json.loads((results / "writes.json").read_text(encoding="utf-8"))
    assert (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8") == render_markdown(
        written), "docs/benchmarks.md is out of date with bench/results: run " \
                  "`python -m bench.run --report`"
