"""The registry of enforced spec fields: complete, pointing at real tests, and what the docs and
the reference specs may claim; ``validate`` warns about the rest and ``--strict`` refuses it."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

from primitives.cli import main
from primitives.spec import _enforcement as enforcement
from primitives.spec import load_spec, load_spec_text, unenforced
from primitives.spec._enforcement import (
    CLAIMS,
    REGISTRY,
    STRUCTURAL,
    TABLE_BEGIN,
    TABLE_END,
    VALUE_LABELS,
    enforcement_markdown,
    field_paths,
    registry_keys,
)

ROOT = Path(__file__).resolve().parents[2]
AGENTS = sorted((ROOT / "agents").glob("*.yaml"))
SPECTRAL = ROOT / "agents" / "spectral_agent.yaml"
CONCEPTS = ROOT / "docs" / "concepts.md"


def test_every_field_is_registered_or_structural() -> None:
    missing = [key for path, values in field_paths() for key in registry_keys(path, values)
               if key not in REGISTRY and not enforcement._structural(path)]
    assert missing == [], (
        "spec fields or values neither in REGISTRY nor STRUCTURAL (primitives/spec/"
        f"_enforcement.py): {missing}; register each, with () until a test enforces it")


def test_every_registry_key_names_a_field_and_value_of_the_models() -> None:
    known = {key for path, values in field_paths() for key in
             [*registry_keys(path, values), path]}
    assert [key for key in REGISTRY if key not in known] == []
    paths = {path for path, _ in field_paths()}
    assert [p for p in VALUE_LABELS if p not in paths] == []
    assert [p for p in STRUCTURAL if p not in paths and not any(
        q == p or q.startswith((p + ".", p + "[]")) for q in paths)] == []


def _tests_in(path: Path) -> dict[str, list[str]]:
    """Test functions of a file (``Class::test`` for methods) and their decorators' text."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: dict[str, list[str]] = {}
    for node in tree.body:
        bodies = [(node.name + "::", n) for n in node.body] if isinstance(
            node, ast.ClassDef) else [("", node)]
        for prefix, item in bodies:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and \
                    item.name.startswith("test_"):
                found[prefix + item.name] = [ast.unparse(d) for d in item.decorator_list]
    return found


def test_every_node_id_names_a_test_that_exists_and_is_not_skipped() -> None:
    files: dict[str, dict[str, list[str]]] = {}
    problems = []
    for key, node_ids in REGISTRY.items():
        for node_id in node_ids:
            file, _, name = node_id.partition("::")
            path = ROOT / file
            if not path.is_file():
                problems.append(f"{key}: no file {file}")
                continue
            tests = files.setdefault(file, _tests_in(path))
            base = name.split("[")[0]
            if base not in tests:
                problems.append(f"{key}: no test {node_id}")
            elif any("skip" in d or "xfail" in d for d in tests[base]):
                problems.append(f"{key}: {node_id} is skipped or expected to fail")
    assert problems == []


SMALL = """\
version: 1
agent: small
anchor: {keys: [user_id], required_at_write: [user_id]}
typology: {session: [episodic], account: [episodic, semantic]}
tiers:
  - {name: session, boundary: {lifecycle: session_end}}
  - {name: account, boundary: {scope_change: user_id}, persistent: true}
persistence: {store: {schema: memory, prefix: small}}
retrieval:
  signals: [lexical]
  fusion: {method: weighted}
behavior:
  decay:
    semantic:
      model: ebbinghaus
      rate: 0.1
      exponent: 0.8
      threshold: 0.05
      schedule: "0 3 * * *"
      justification: facts fade
determinism: {replay: none}
"""


def test_a_declared_value_without_a_test_is_named_with_its_file_and_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in ("behavior.decay.*.schedule", "determinism.clock=ticks"):
        monkeypatch.setitem(REGISTRY, key, ())  # as if no test showed them
    spec = load_spec_text(SMALL, file="agents/small.yaml", policies={})
    found = {(u.field, u.value): u for u in unenforced(spec)}
    lines = SMALL.splitlines()
    schedule = found[("behavior.decay.semantic.schedule", "0 3 * * *")]
    assert schedule.line == lines.index('      schedule: "0 3 * * *"') + 1
    assert str(schedule) == (f"agents/small.yaml:{schedule.line}: "
                             "behavior.decay.semantic.schedule = 0 3 * * *: declared but not "
                             "enforced yet")
    replay = found[("determinism.replay", "none")]
    assert replay.line == lines.index("determinism: {replay: none}") + 1
    # the decay model and weighted fusion are enforced: not named
    assert ("behavior.decay.semantic.model", "ebbinghaus") not in found
    assert ("retrieval.fusion.method", "weighted") not in found


def test_an_implied_typology_default_names_the_typology(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(REGISTRY, "behavior.lifecycle.*.failed_corroborations", ())
    spec = load_spec_text(SMALL, file="agents/small.yaml", policies={})
    found = {(u.field, u.value): u for u in unenforced(spec)}
    trigger = found[("behavior.lifecycle.semantic.failed_corroborations", "3")]
    assert trigger.line is None and trigger.implied_by == "typology default for semantic"
    assert str(trigger) == ("agents/small.yaml: behavior.lifecycle.semantic."
                            "failed_corroborations = 3: declared but not enforced yet "
                            "(typology default for semantic)")
    # a pydantic default inside a typology default is not the typology's declaration
    assert not any(u.field.endswith(".sampling") for u in found.values())


def test_enforced_values_are_not_named_and_registering_a_test_silences_a_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = load_spec_text(SMALL, file="agents/small.yaml", policies={})
    fields = {u.field for u in unenforced(spec)}
    assert "behavior.write_policy.semantic.mode" not in fields  # promotion_only: enforced
    assert "tiers[0].boundary.lifecycle" not in fields
    monkeypatch.setitem(REGISTRY, "behavior.decay.*.model=ebbinghaus",
                        ("tests/unit/test_enforcement.py::test_x",))
    assert "behavior.decay.semantic.model" not in {u.field for u in unenforced(spec)}
    # an unregistered field (one the models gain later) counts as not enforced
    monkeypatch.delitem(REGISTRY, "behavior.write_policy.*.mode=promotion_only")
    assert "behavior.write_policy.semantic.mode" in {u.field for u in unenforced(spec)}


@pytest.mark.parametrize("path", AGENTS, ids=lambda p: p.name)
def test_a_spec_not_from_the_loader_declares_what_pydantic_was_given(
    path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in list(REGISTRY):
        monkeypatch.setitem(REGISTRY, key, ())  # every declared field is then named
    spec = load_spec(path)
    bare = spec.model_copy()
    bare._declared = None  # as if built in code: no YAML to locate keys in
    with_lines = {(u.field, u.value) for u in unenforced(spec)}
    assert with_lines and {(u.field, u.value) for u in unenforced(bare)} == with_lines
    assert all(u.line is None and u.implied_by is None for u in unenforced(bare))


def test_validate_warns_and_strict_refuses(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    # every value the reference specs declare is enforced: take one back, as if it were not
    monkeypatch.setitem(REGISTRY, "behavior.decay.*.schedule", ())
    monkeypatch.setitem(REGISTRY, "behavior.lifecycle.*.persistent=corroborated", ())
    assert main(["validate", str(SPECTRAL)]) == 0
    err = capsys.readouterr().err
    spec = load_spec(SPECTRAL)
    expected = [str(u) for u in unenforced(spec)]
    assert expected, "the blanked entries are declared by the spectral spec"
    for line in expected:
        assert f"warning {line}" in " ".join(err.split())  # rich may wrap long lines
    assert main(["validate", "--strict", str(SPECTRAL)]) == 1
    assert "--strict" in capsys.readouterr().err


@pytest.mark.parametrize("path", AGENTS, ids=lambda p: p.name)
def test_every_reference_spec_passes_validate_strict(
    path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    assert unenforced(load_spec(path)) == []
    assert main(["validate", "--strict", str(path)]) == 0
    assert "warning" not in capsys.readouterr().err


def test_strict_accepts_a_spec_that_declares_only_enforced_fields(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "small.yaml"
    path.write_text(SMALL)
    spec = load_spec(path, policies={})
    for item in unenforced(spec):
        monkeypatch.setitem(REGISTRY, item.key, ("tests/unit/test_enforcement.py::test_x",))
    monkeypatch.setenv("PRIMITIVES_POLICIES", str(ROOT / "policies"))
    assert main(["validate", "--strict", str(path)]) == 0
    assert "warning" not in capsys.readouterr().err


def test_concepts_carries_the_registry_table() -> None:
    text = CONCEPTS.read_text(encoding="utf-8")
    start, end = text.index(TABLE_BEGIN), text.index(TABLE_END) + len(TABLE_END)
    table = enforcement_markdown()
    if os.environ.get("PRIMITIVES_UPDATE_DOCS"):
        CONCEPTS.write_text(text[:start] + table + text[end:], encoding="utf-8")
        return
    assert text[start:end] == table, (
        "docs/concepts.md's enforcement table is out of date with the registry: run "
        "PRIMITIVES_UPDATE_DOCS=1 pytest tests/unit/test_enforcement.py")


def _header(path: Path) -> list[str]:
    """The spec's header comment and description: what it says about itself."""
    lines = path.read_text(encoding="utf-8").splitlines()
    head = [line for line in lines[:lines.index("version: 1")] if line.startswith("#")]
    description = load_spec(path).description or ""
    return head + description.split(". ")


@pytest.mark.parametrize("path", AGENTS, ids=lambda p: p.name)
def test_reference_spec_headers_claim_only_what_the_registry_shows(path: Path) -> None:
    wrong = []
    for line in _header(path):
        if "not enforced yet" in line:
            continue
        for phrase, keys in CLAIMS.items():
            if re.search(phrase, line, re.IGNORECASE):
                wrong += [f"{line.strip()!r} claims {key}" for key in keys if not REGISTRY[key]]
    assert wrong == []
