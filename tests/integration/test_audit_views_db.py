"""The compliance views through SQLAlchemy, as the auditor role, on the embedded server.

The app role writes one tenant's story through the engine (observe, supersede, link an
action, erase, tombstone); the auditor reads it back through ``primitives.audit.views``
over the ``postgresql+psycopg`` dialect and the server's unix socket.
"""

from __future__ import annotations

import csv
import io
import json
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import sqlalchemy as sa
from rich.console import Console

from primitives import cli
from primitives._project import migrate
from primitives.audit.views import AuditViews, audit_tables, create_audit_engine
from primitives.cli import main
from primitives.engine import Engine
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.db

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted((ROOT / "agents").glob("*.yaml"))
SPECTRAL = str(ROOT / "agents" / "spectral_agent.yaml")


@dataclass(frozen=True)
class Story:
    tenant: str
    other_tenant: str
    old: UUID
    new: UUID
    erased: UUID
    tombstoned: UUID


@pytest.fixture(scope="module")
def specs(pg: PostgresHandle) -> list[AgentSpec]:
    loaded = [load_spec(path) for path in SPECS]
    migrate(loaded, dsn=pg.admin_dsn)
    return loaded


@pytest.fixture(scope="module")
def spectral(specs: list[AgentSpec]) -> AgentSpec:
    return next(s for s in specs if s.agent == "spectral")


@pytest.fixture(scope="module")
def auditor(pg: PostgresHandle) -> Iterator[sa.Engine]:
    engine = create_audit_engine(pg.auditor_dsn)
    yield engine
    engine.dispose()


@pytest.fixture(scope="module")
def story(pg: PostgresHandle, spectral: AgentSpec) -> Story:
    tenant, other = (f"ws-{uuid.uuid4().hex[:8]}" for _ in range(2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # no embedder: semantic signal off
        engine = Engine.connect(spectral, pg.app_dsn)
    with engine:
        with engine.tenant({"workspace_id": tenant}) as mem:
            old = mem.observe("workspace", "prefers concise outputs", typology="procedural",
                              key="style")
            new = mem.supersede(old.id, "prefers exhaustive outputs", reason="asked")
            phone = mem.observe("workspace", "Dana's phone is 555-0101", typology="procedural",
                                envelope={"subject": "dana"})
            mem.link_action("ticket-1", [phone.id], "support_reply")
            mem.erase("dana", approvals=["dpo"], reason="gdpr request")
            gone = mem.observe("workspace", "prefers dark mode", typology="procedural")
            mem.tombstone(gone.id, reason="user asked")
        with engine.tenant({"workspace_id": other}) as mem:
            mem.observe("workspace", "another tenant's preference", typology="procedural")
    return Story(tenant, other, old.id, new.id, phone.id, gone.id)


@pytest.fixture(scope="module")
def views(spectral: AgentSpec) -> AuditViews:
    return audit_tables(spectral)


def _all(engine: sa.Engine, query: sa.Select[Any]) -> list[sa.Row[Any]]:
    with engine.connect() as conn:
        return list(conn.execute(query).all())


def test_auditor_engine_connects_over_the_unix_socket_as_the_auditor_read_only(
    pg: PostgresHandle, auditor: sa.Engine
) -> None:
    if pg.home is not None:
        assert auditor.url.host is None and str(auditor.url.query["host"]).startswith("/")
    with auditor.connect() as conn:
        user, read_only = conn.execute(sa.text(
            "SELECT current_user, current_setting('transaction_read_only')")).one()
    assert (user, read_only) == ("primitives_auditor", "on")


def test_auditor_engine_cannot_write(auditor: sa.Engine) -> None:
    with auditor.connect() as conn, pytest.raises(sa.exc.DBAPIError, match="read-only"):
        conn.execute(sa.text("CREATE TEMP TABLE scratch (a int)"))


def test_declared_column_types_match_the_views_in_the_catalog(
    specs: list[AgentSpec], auditor: sa.Engine
) -> None:
    query = sa.text(
        "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) "
        "FROM pg_catalog.pg_attribute AS a JOIN pg_catalog.pg_class AS c ON c.oid = a.attrelid "
        "JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace "
        "WHERE n.nspname = :schema AND c.relname = :name AND a.attnum > 0 ORDER BY a.attnum")
    dialect = auditor.dialect
    with auditor.connect() as conn:
        for spec in specs:
            for table in audit_tables(spec):
                rows = conn.execute(query, {"schema": table.schema, "name": table.name}).all()
                declared = [(c.name, c.type.compile(dialect=dialect).lower())
                            for c in table.columns]
                # pg_get_userbyid() returns `name`, read as text
                actual = [(n, "text" if t == "name" else t) for n, t in rows]
                assert actual == declared, table.fullname


def test_docstring_example_finds_no_erasure_residue(
    story: Story, views: AuditViews, auditor: sa.Engine
) -> None:
    e = views.erasures
    query = sa.select(e.c.workspace_id, e.c.memory_id, e.c.residue).where(e.c.residue)
    assert _all(auditor, query) == []
    rows = _all(auditor, sa.select(e).where(e.c.workspace_id == story.tenant))
    assert [(r.memory_id, r.erasure_reason, r.residue) for r in rows] == [
        (story.erased, "gdpr request", False)]
    assert rows[0].erasure_event_seq is not None


def test_lineage_lists_each_memory_s_events_in_order(
    story: Story, views: AuditViews, auditor: sa.Engine
) -> None:
    lin = views.lineage
    rows = _all(auditor, sa.select(lin.c.step, lin.c.kind, lin.c.payload).where(
        lin.c.workspace_id == story.tenant, lin.c.memory_id == story.old).order_by(lin.c.step))
    assert [(r.step, r.kind) for r in rows][:2] == [(1, "observed"), (2, "superseded")]
    assert [r.step for r in rows] == list(range(1, len(rows) + 1))
    assert isinstance(rows[0].payload, dict)


def test_supersession_chain_runs_from_root_to_latest(
    story: Story, views: AuditViews, auditor: sa.Engine
) -> None:
    sup = views.supersession
    rows = _all(auditor, sa.select(sup).where(sup.c.workspace_id == story.tenant)
                .order_by(sup.c.depth))
    assert [(r.root_id, r.memory_id, r.depth, r.is_latest) for r in rows] == [
        (story.old, story.old, 0, False), (story.old, story.new, 1, True)]


def test_action_basis_shows_the_erased_memory_the_action_relied_on(
    story: Story, views: AuditViews, auditor: sa.Engine
) -> None:
    act = views.action_basis
    rows = _all(auditor, sa.select(act).where(act.c.workspace_id == story.tenant))
    assert [(r.action_id, r.memory_id, r.memory_state) for r in rows] == [
        ("ticket-1", story.erased, "ERASED")]
    assert "555" not in rows[0].content


def test_retention_state_names_each_row(
    story: Story, views: AuditViews, auditor: sa.Engine
) -> None:
    ret = views.retention_state
    rows = _all(auditor, sa.select(ret.c.memory_id, ret.c.retention_state)
                .where(ret.c.workspace_id == story.tenant))
    assert dict(rows) == {  # type: ignore[arg-type]
        story.old: "ORPHANED", story.new: "ACTIVE", story.erased: "REFERENCED",
        story.tombstoned: "TOMBSTONED",
    }


def test_auditor_reads_every_tenant(
    story: Story, views: AuditViews, auditor: sa.Engine
) -> None:
    lin = views.lineage
    tenants = {t for (t,) in _all(auditor, sa.select(lin.c.workspace_id).distinct())}
    assert {story.tenant, story.other_tenant} <= tenants


def test_policy_coverage_shows_every_table_forced(
    spectral: AgentSpec, views: AuditViews, auditor: sa.Engine
) -> None:
    rows = _all(auditor, sa.select(views.policy_coverage))
    assert rows and all(r.present and r.rls_enabled and r.rls_forced and r.tenant_policy
                        for r in rows)


def test_audit_show_prints_one_tenant_s_lineage(
    story: Story, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "console", Console(width=400, highlight=False))
    assert main(["audit", "show", "lineage", SPECTRAL, "--tenant", story.tenant,
                 "--full"]) == 0
    out = capsys.readouterr().out
    assert "platform.spectral_audit_lineage" in out
    assert str(story.old) in out and "superseded" in out and "erased" in out
    assert story.other_tenant not in out


def test_audit_show_limits_rows(
    story: Story, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "console", Console(width=400, highlight=False))
    assert main(["audit", "show", "retention", SPECTRAL, "--tenant", story.tenant,
                 "--limit", "2"]) == 0
    assert "(2 row(s))" in capsys.readouterr().out


def test_audit_show_exports_every_value_whole_as_json_and_csv(
    story: Story, views: AuditViews, capsys: pytest.CaptureFixture[str]
) -> None:
    columns = [c.name for c in views.lineage.columns]
    assert main(["audit", "show", "lineage", SPECTRAL, "--tenant", story.tenant,
                 "--format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)  # standard output holds the JSON only
    assert records and all(list(r) == columns for r in records)
    assert {r["workspace_id"] for r in records} == {story.tenant}
    assert str(story.old) in {r["memory_id"] for r in records}
    observed = next(r for r in records if r["kind"] == "observed")
    assert isinstance(observed["payload"], dict) and len(observed["hash"]) == 64  # not cut
    assert datetime.fromisoformat(observed["occurred_at"]).tzinfo is not None
    assert main(["audit", "show", "lineage", SPECTRAL, "--tenant", story.tenant,
                 "--format", "csv"]) == 0
    header, *rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert header == columns and len(rows) == len(records)
    by_column = [dict(zip(header, row, strict=True)) for row in rows]
    assert [r["hash"] for r in by_column] == [r["hash"] for r in records]
    assert [json.loads(r["payload"]) for r in by_column] == [r["payload"] for r in records]
    assert story.other_tenant not in "".join(",".join(row) for row in rows)


def test_audit_show_refuses_a_tenant_filter_on_coverage(
    capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", "show", "coverage", SPECTRAL, "--tenant", "ws-x"]) == 1
    assert "has no tenant column" in capsys.readouterr().err


def test_audit_show_is_readable_at_100_columns(
    story: Story, views: AuditViews, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "console", Console(width=100, highlight=False))
    assert main(["audit", "show", "lineage", SPECTRAL, "--tenant", story.tenant]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert all(len(line) <= 100 for line in lines)
    # one block per row, one line per column: each name beside its whole (shortened) value
    assert out.count("-- row ") == len(lines[1:]) // (len(views.lineage.columns) + 1)
    assert any(line.split() == ["workspace_id", story.tenant] for line in lines)
    assert any(line.split()[:2] == ["memory_id", str(story.old)] for line in lines)


def test_audit_show_json_flag_is_format_json(
    story: Story, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", "show", "lineage", SPECTRAL, "--tenant", story.tenant,
                 "--json"]) == 0
    by_flag = json.loads(capsys.readouterr().out)
    assert main(["audit", "show", "lineage", SPECTRAL, "--tenant", story.tenant,
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == by_flag and by_flag
