"""The ``primitives`` command without a database: validate, schema, init, compile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from primitives.cli import main
from primitives.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPECTRAL = ROOT / "agents" / "spectral_agent.yaml"


def test_validate_accepts_every_reference_spec(capsys: pytest.CaptureFixture[str]) -> None:
    specs = sorted(str(p) for p in (ROOT / "agents").glob("*.yaml"))
    assert main(["validate", *specs]) == 0
    out = capsys.readouterr().out
    for path in specs:
        assert f"ok {path}" in out


def test_validate_reports_file_line_and_field_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "agents" / "bad.yaml"
    bad.parent.mkdir()
    text = SPECTRAL.read_text().replace("lifecycle: run_end", "lifecycle: rn_end")
    bad.write_text(text)
    line = text.splitlines().index("    boundary: {lifecycle: rn_end}") + 1
    (tmp_path / "policies").symlink_to(ROOT / "policies")
    assert main(["validate", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:{line}: tiers[1].boundary.lifecycle: unknown value 'rn_end'" in err
    assert "did you mean 'run_end'" in err
    assert "session_end" in err  # lists what is allowed


def test_schema_prints_json_schema_with_every_foundational_primitive(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    for key in ("anchor", "typology", "tiers", "persistence", "retrieval", "behavior",
                "discipline", "audit"):
        assert key in schema["properties"]
    assert set(schema["required"]) >= {"anchor", "typology", "tiers", "persistence", "retrieval"}


def test_init_non_interactive_writes_a_spec_that_loads(tmp_path: Path) -> None:
    out = tmp_path / "support_bot.yaml"
    code = main([
        "init", "support_bot", "--anchor", "tenant_id,user_id",
        "--tier", "conversation:lifecycle=conversation_end:episodic",
        "--tier", "account:scope_change=tenant_id:episodic,semantic,procedural:persistent",
        "--schema", "support", "--non-mirror", "billing_records", "--yes", "-o", str(out),
    ])
    assert code == 0
    spec = load_spec(out, policies={})
    assert spec.anchor.keys == ["tenant_id", "user_id"]
    assert spec.anchor.nullable_for_cross_scope == ["user_id"]
    assert spec.persistent_tier.name == "account"
    assert [m.category for m in spec.discipline.non_mirror] == ["billing_records"]
    # Sections appear in the doctrine's order: anchor first, audit last.
    text = out.read_text()
    order = [text.index(f"\n{key}:") for key in
             ("anchor", "typology", "tiers", "persistence", "retrieval", "behavior",
              "discipline", "audit")]
    assert order == sorted(order)


def test_init_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    out = tmp_path / "a.yaml"
    out.write_text("keep me")
    assert main(["init", "a", "--yes", "-o", str(out)]) == 1
    assert out.read_text() == "keep me"
    assert main(["init", "a", "--yes", "-o", str(out), "--force"]) == 0
    assert load_spec(out, policies={}).agent == "a"


def test_init_rejects_a_malformed_tier_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", "a", "--tier", "only-a-name", "--yes"]) == 1
    assert "NAME:BOUNDARY:TYPOLOGY" in capsys.readouterr().err


def test_init_interactive_walk_asks_anchor_first_and_audit_last() -> None:
    from primitives._scaffold import ScaffoldAnswers, walk

    asked: list[str] = []

    def ask(question: str, default: str) -> str:
        asked.append(question)
        return default

    answers = walk(ScaffoldAnswers(agent="bot"), ask)
    assert asked[0].startswith("1. Anchor")
    assert asked[-1].startswith("8. Audit")
    firsts = [int(q.split(".")[0].split("-")[0]) for q in asked if q[0].isdigit()]
    assert firsts == sorted(firsts)
    assert firsts[0] == 1 and firsts[-1] == 8
    assert answers.tiers[-1].persistent


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    from primitives import __version__
    from primitives.cli import main as cli_main
    with pytest.raises(SystemExit) as done:
        cli_main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"primitives {__version__}"


def test_the_package_is_marked_typed() -> None:
    import primitives
    assert (Path(primitives.__file__).parent / "py.typed").is_file()
