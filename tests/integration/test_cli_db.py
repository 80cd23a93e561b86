"""The ``primitives`` command's database verbs against the session's server."""

from __future__ import annotations

from pathlib import Path

import pytest

from primitives.cli import main
from tests.conftest import PostgresHandle

ROOT = Path(__file__).resolve().parents[2]
SPECTRAL = str(ROOT / "agents" / "spectral_agent.yaml")


def test_server_status_and_dsn_report_the_running_server(
    pg: PostgresHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    if pg.home is None:
        pytest.fail("this test needs the embedded server (PRIMITIVES_DSN is set)")
    assert main(["server", "status"]) == 0
    out = capsys.readouterr().out
    assert "running" in out and "True" in out
    assert main(["server", "dsn"]) == 0
    assert capsys.readouterr().out.strip() == pg.admin_dsn


def test_server_commands_honour_an_external_primitives_dsn(
    pg: PostgresHandle, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    external = pg.admin_dsn + " password=not-shown"
    monkeypatch.setenv("PRIMITIVES_DSN", external)
    assert main(["server", "dsn"]) == 0
    assert capsys.readouterr().out.strip() == external
    assert main(["server", "status"]) == 0
    out = capsys.readouterr().out
    assert "PRIMITIVES_DSN" in out and "True" in out and "not-shown" not in out
    assert main(["server", "stop"]) == 1  # not the framework's server to stop
    assert "does not manage" in capsys.readouterr().err
    # a server that does not answer is reported, with its cause, within the timeout
    monkeypatch.setenv("PRIMITIVES_DSN", "host=/nonexistent-socket-dir port=5999 user=x")
    assert main(["server", "status"]) == 1
    out = capsys.readouterr().out
    assert "False" in out and "error" in out


def test_an_unknown_runtime_role_is_reported_at_once_with_its_cause(
    pg: PostgresHandle,
) -> None:
    import time

    from primitives.engine import Engine
    from primitives.errors import StorageError
    from primitives.spec import load_spec
    started = time.perf_counter()
    with pytest.raises(StorageError, match='role "nobody_here" does not exist'):
        Engine.connect(load_spec(SPECTRAL), pg.app_dsn.replace("primitives_app", "nobody_here"))
    assert time.perf_counter() - started < 3


def test_migrate_applies_then_reports_unchanged(
    pg: PostgresHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["migrate", SPECTRAL]) == 0
    capsys.readouterr()
    assert main(["migrate", SPECTRAL]) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "agent spectral: platform.spectral_* unchanged" in out
    assert "0 agent plan(s) applied, 1 unchanged" in out
    # migrate warns, as validate does, about what the spec declares but the engine ignores
    from primitives.spec import load_spec, unenforced

    expected = [" ".join(str(u).split()) for u in unenforced(load_spec(SPECTRAL))]
    err = " ".join(captured.err.split())
    assert [e for e in expected if e not in err] == []
    assert err.count("declared but not enforced yet") == len(expected)


def test_compile_prints_forced_rls_and_no_vector_without_pgvector(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["compile", SPECTRAL]) == 0
    with_vector = capsys.readouterr().out
    assert "FORCE ROW LEVEL SECURITY" in with_vector and "halfvec(384)" in with_vector
    assert main(["compile", SPECTRAL, "--no-vector"]) == 0
    without = capsys.readouterr().out
    assert "halfvec" not in without and "FORCE ROW LEVEL SECURITY" in without


def test_compile_of_a_bad_spec_exits_1_with_location(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nagent: x\nanchor: {keys: [a], required_at_write: [a]}\n")
    assert main(["compile", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:1" in err and "missing foundational primitive 'typology'" in err


def test_compile_target_citus_distributes_every_table_by_the_tenant(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["compile", SPECTRAL, "--target", "citus"]) == 0
    out = capsys.readouterr().out
    assert "create_distributed_table" in out
    assert '\'"platform"."spectral_memories"\'::regclass, \'workspace_id\'' in out
    assert "FORCE ROW LEVEL SECURITY" in out


def test_explain_shows_each_signals_rank_for_the_tenants_hits_only(
    pg: PostgresHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    import warnings

    from primitives import Engine, load_spec

    spec = load_spec(SPECTRAL)
    assert main(["migrate", SPECTRAL]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        engine = Engine.connect(spec, pg.app_dsn)
    with engine:
        with engine.tenant({"workspace_id": "explain-a"}) as mem:
            mem.observe("cycle", "the invoice parser drops totals on scanned pages")
        with engine.tenant({"workspace_id": "explain-b"}) as mem:
            mem.observe("cycle", "the invoice parser is fine for tenant b")
    capsys.readouterr()
    assert main(["explain", SPECTRAL, "explain-a", "invoice totals", "--no-embedder"]) == 0
    out = capsys.readouterr().out
    assert "drops totals" in out and "tenant b" not in out
    assert "lexical #1" in out
