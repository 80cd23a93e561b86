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


def test_validation_messages_print_bracketed_patterns_unmangled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "agents" / "bad.yaml"
    bad.parent.mkdir()
    bad.write_text(SPECTRAL.read_text().replace("prefix: spectral", "prefix: Spectral-X"))
    (tmp_path / "policies").symlink_to(ROOT / "policies")
    assert main(["validate", str(bad)]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "persistence.store.prefix" in err
    assert "^[a-z][a-z0-9_]{0,47}$" in err  # the terminal markup would eat [a-z]


def test_the_json_schema_has_an_id_and_init_adds_the_editor_line(tmp_path: Path) -> None:
    from primitives.spec import spec_json_schema
    from primitives.spec._schema import SCHEMA_ID

    assert spec_json_schema()["$id"] == SCHEMA_ID
    out = tmp_path / "agents" / "bot.yaml"
    assert main(["init", "bot", "--yes", "-o", str(out)]) == 0
    assert out.read_text().splitlines()[0] == \
        "# yaml-language-server: $schema=spec.schema.json"
    written = json.loads((tmp_path / "agents" / "spec.schema.json").read_text())
    assert written["$id"] == SCHEMA_ID and "anchor" in written["properties"]


def test_init_checks_each_answer_and_asks_again() -> None:
    from primitives._scaffold import ScaffoldAnswers, walk

    replies = {"1. Anchor": ["Tenant-ID", "tenant_id"], "2-3. How many": ["two", "2"],
               "   tier 1 name": ["session"], "   tier 'session' boundary": ["lifecycle=nope",
                                                                          "lifecycle=session_end"],
               "   tier 'session' typology": ["episodc", "episodic"],
               "5. Retrieval": ["semantic,vibes", "semantic,recency"],
               "   Cross-context": ["sometimes", "none"]}
    told: list[str] = []

    def ask(question: str, default: str) -> str:
        for start, answers in replies.items():
            if question.startswith(start) and answers:
                return answers.pop(0)
        return default

    answers = walk(ScaffoldAnswers(agent="bot"), ask, told.append)
    assert answers.anchor == ["tenant_id"] and len(answers.tiers) == 2
    assert answers.tiers[0].boundary == ("lifecycle", "session_end")
    assert answers.signals == ["semantic", "recency"]
    assert len(told) == 6
    assert told[0].startswith("'Tenant-ID': Tenant-ID: a scope key is lower_snake_case")
    assert "episodc: not a typology" in told[3] and "vibes: not a signal" in told[4]


def test_init_checks_for_an_existing_file_before_asking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import primitives.cli as cli

    out = tmp_path / "a.yaml"
    out.write_text("keep me")
    monkeypatch.setattr(cli.sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(cli.Prompt, "ask", lambda *a, **k: pytest.fail("asked first"))
    assert main(["init", "a", "-o", str(out)]) == 1
    assert "exists; pass --force" in capsys.readouterr().err and out.read_text() == "keep me"


def test_init_exits_cleanly_on_ctrl_c(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import primitives.cli as cli

    def interrupt(*args: object, **kwargs: object) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(cli.Prompt, "ask", interrupt)
    out = tmp_path / "a.yaml"
    assert main(["init", "a", "-o", str(out)]) == 130
    assert "init cancelled; nothing written" in capsys.readouterr().err
    assert not out.exists() and not (tmp_path / "spec.schema.json").exists()
