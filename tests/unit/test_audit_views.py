"""``primitives.audit.views`` without a database: table shapes, types, queries, URLs."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from uuid import UUID

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

import primitives.audit
from primitives.audit.views import (
    COLUMN_TYPES,
    SHORT_NAMES,
    audit_tables,
    show_query,
    sqlalchemy_url,
)
from primitives.cli import AUDIT_VIEWS, _csv_cell, _plain
from primitives.compile import VIEW_COLUMNS, agent_tables
from primitives.errors import StorageError
from primitives.spec import AgentSpec, load_spec

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted((ROOT / "agents").glob("*.yaml"))


@pytest.fixture(scope="module")
def spectral() -> AgentSpec:
    return load_spec(ROOT / "agents" / "spectral_agent.yaml")


def _sql(query: sa.Select[tuple[object, ...]]) -> str:
    return str(query.compile(dialect=postgresql.dialect()))


def test_public_surface_is_pinned() -> None:
    assert sorted(primitives.audit.__all__) == sorted([
        "SHORT_NAMES", "Anchor", "AuditViews", "ChainReport", "anchors_from_reports",
        "audit_tables", "connect_auditor", "create_audit_engine", "show_query",
        "sqlalchemy_url", "verify_chains",
    ])


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_one_schema_qualified_table_per_audit_view_with_the_view_columns(path: Path) -> None:
    spec = load_spec(path)
    tables = agent_tables(spec)
    views = audit_tables(spec)
    assert [t.fullname for t in views] == [v.qualified for v in tables.audit_views]
    for table in views:
        short = table.name.removeprefix(f"{tables.prefix}_")
        expected = list(VIEW_COLUMNS[short])
        if short != "audit_policy_coverage":
            expected.insert(0, tables.tenant_column)
        assert [c.name for c in table.columns] == expected
        assert table.schema == tables.schema
        assert table.comment


def test_every_view_column_has_a_declared_type_so_no_column_falls_back_to_text() -> None:
    names = {name for columns in VIEW_COLUMNS.values() for name in columns}
    assert names <= set(COLUMN_TYPES)


def test_columns_are_typed_for_python_values(spectral: AgentSpec) -> None:
    views = audit_tables(spectral)
    assert views.lineage.c.memory_id.type.python_type.__name__ == "UUID"
    assert isinstance(views.lineage.c.payload.type, postgresql.JSONB)
    assert isinstance(views.erasures.c.residue.type, sa.Boolean)
    assert views.retention_state.c.created_at.type.timezone is True  # type: ignore[attr-defined]
    assert isinstance(views.lineage.c.workspace_id.type, sa.Text)


def test_views_are_found_by_field_cli_or_view_name(spectral: AgentSpec) -> None:
    views = audit_tables(spectral)
    assert views.view("actions") is views.action_basis
    assert views.view("action_basis") is views.action_basis
    assert views.view("spectral_audit_action_basis") is views.action_basis
    assert views.view("coverage") is views.policy_coverage
    with pytest.raises(KeyError, match="no audit view 'nope'"):
        views.view("nope")


def test_cli_view_names_match_the_api() -> None:
    assert tuple(SHORT_NAMES) == AUDIT_VIEWS


def test_shared_metadata_collects_several_agents_and_returns_existing_tables() -> None:
    metadata = sa.MetaData()
    first = [audit_tables(load_spec(p), metadata) for p in SPECS]
    assert len(metadata.tables) == 8 * len(SPECS)
    again = audit_tables(load_spec(SPECS[0]), metadata)
    assert again.lineage is first[0].lineage


def test_show_query_filters_one_tenant_orders_and_limits(spectral: AgentSpec) -> None:
    views = audit_tables(spectral)
    text = _sql(show_query(views, "lineage", tenant="ws-a", limit=5))
    assert "FROM platform.spectral_audit_lineage" in text
    assert "WHERE platform.spectral_audit_lineage.workspace_id = " in text
    assert text.index("ORDER BY") < text.index("LIMIT")
    assert "workspace_id, platform.spectral_audit_lineage.memory_id, " in text


def test_coverage_has_no_tenant_so_a_tenant_filter_is_refused(spectral: AgentSpec) -> None:
    views = audit_tables(spectral)
    assert "WHERE" not in _sql(show_query(views, "coverage"))
    with pytest.raises(ValueError, match="no tenant column"):
        show_query(views, "coverage", tenant="ws-a")


def test_unix_socket_dsn_becomes_a_host_query_parameter() -> None:
    url = sqlalchemy_url("host=/tmp/x/pgdata port=5432 user=primitives_auditor dbname=postgres")
    assert url.drivername == "postgresql+psycopg"
    assert url.host is None and url.username == "primitives_auditor"
    assert url.database == "postgres"
    assert dict(url.query) == {"host": "/tmp/x/pgdata", "port": "5432"}


def test_tcp_dsn_keeps_host_port_password_and_options() -> None:
    url = sqlalchemy_url("postgresql://aud:p%40ss%2Fw@db.example:6543/app?sslmode=require")
    assert (url.host, url.port, url.username, url.password) == ("db.example", 6543, "aud",
                                                                "p@ss/w")
    assert url.database == "app" and dict(url.query) == {"sslmode": "require"}


def test_several_hosts_travel_in_the_query() -> None:
    url = sqlalchemy_url("host=a,b port=5432,5433 dbname=x")
    assert url.host is None and dict(url.query) == {"host": "a,b", "port": "5432,5433"}


def test_invalid_dsn_is_a_storage_error() -> None:
    with pytest.raises(StorageError, match="not a valid PostgreSQL DSN"):
        sqlalchemy_url("host=a port")


def test_audit_show_rejects_an_unknown_view_before_connecting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from primitives.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["audit", "show", "everything", str(SPECS[0])])
    assert exited.value.code == 2
    assert "invalid choice: 'everything'" in capsys.readouterr().err


def test_exported_values_keep_their_json_shape_and_csv_cells_are_whole() -> None:
    when = datetime(2026, 11, 26, 14, 0, tzinfo=UTC)
    ident = UUID("b078c97e-329e-4058-bac1-5b99854093c1")
    value = {"at": when, "ids": (ident,), "n": 1, "ok": True, "none": None, "x": Decimal("1.5")}
    assert _plain(value) == {"at": "2026-11-26T14:00:00+00:00", "ids": [str(ident)], "n": 1,
                             "ok": True, "none": None, "x": "1.5"}
    assert _csv_cell(None) == "" and _csv_cell(True) == "true" and _csv_cell(3) == "3"
    assert _csv_cell(when) == "2026-11-26T14:00:00+00:00" and _csv_cell(ident) == str(ident)
    assert _csv_cell(["a", "b,c"]) == '["a", "b,c"]'
    assert _csv_cell({"b": 1, "a": [when]}) == '{"a": ["2026-11-26T14:00:00+00:00"], "b": 1}'
    long = "x" * 500
    assert _csv_cell(long) == long  # never shortened, unlike the table's cells
