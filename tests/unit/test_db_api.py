"""primitives.db without a database: public surface, DSNs, statements, migration files."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

import primitives.db
from primitives.db import (
    POLICY_SQLSTATES,
    SQLSTATE_APPEND_ONLY,
    SQLSTATE_JOURNAL_ISOLATION,
    SQLSTATE_LINKED_DELETE,
    SQLSTATE_PERSISTENT_DELETE,
    app_dsn,
    auditor_dsn,
    check_tenant,
    load_migrations,
    migrations_dir,
    primitives_home,
    resolve_dsn,
    set_tenant_statement,
    translate_error,
)
from primitives.errors import (
    MigrationError,
    PolicyViolation,
    StorageError,
    StorageFull,
    TenancyError,
)


def test_public_surface_is_pinned() -> None:
    assert sorted(primitives.db.__all__) == [
        "APP_ROLE",
        "AUDITOR_ROLE",
        "AsyncOnceTransaction",
        "Migration",
        "OWNER_ROLE",
        "OnceTransaction",
        "POLICY_SQLSTATES",
        "PRIVACY_ADMIN_ROLE",
        "SETTINGS_FILE",
        "SQLSTATE_APPEND_ONLY",
        "SQLSTATE_CAPACITY",
        "SQLSTATE_JOURNAL_ISOLATION",
        "SQLSTATE_LINKED_DELETE",
        "SQLSTATE_NON_MIRROR",
        "SQLSTATE_PERSISTENT_DELETE",
        "ServerStatus",
        "TENANT_SETTING",
        "TEXT_MATCH_OPCLASS",
        "TEXT_MATCH_OPERATOR",
        "app_dsn",
        "apply_migrations",
        "apply_plan",
        "aread_once",
        "atenant_transaction",
        "auditor_dsn",
        "check_tenant",
        "ensure_text_match",
        "has_text_match",
        "load_migrations",
        "migrations_dir",
        "primitives_home",
        "privacy_admin_dsn",
        "read_once",
        "resolve_dsn",
        "server_settings",
        "server_status",
        "set_tenant_statement",
        "start_server",
        "stop_server",
        "tenant_transaction",
        "translate_error",
        "use_fast_json",
    ]
    for name in primitives.db.__all__:
        assert hasattr(primitives.db, name)


def test_set_tenant_statement_is_set_local_with_a_quoted_literal() -> None:
    statement = set_tenant_statement("o'brien")
    assert statement.as_string(None) == "SET LOCAL primitives.tenant = 'o''brien'"


@pytest.mark.parametrize("tenant", ["", " ", "\t", "a\x00b"])
def test_set_tenant_statement_refuses_empty_or_nul_tenants(tenant: str) -> None:
    with pytest.raises(TenancyError):
        set_tenant_statement(tenant)
    with pytest.raises(TenancyError):
        check_tenant(tenant)


def test_role_dsns_swap_the_user_and_drop_the_admin_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PRIMITIVES_APP_DSN", raising=False)
    monkeypatch.delenv("PRIMITIVES_AUDITOR_DSN", raising=False)
    admin = "postgresql://admin:secret@db.example:6432/memory?sslmode=require"
    app = conninfo_to_dict(app_dsn(admin))
    assert app == {
        "user": "primitives_app",
        "host": "db.example",
        "port": "6432",
        "dbname": "memory",
        "sslmode": "require",
    }
    assert conninfo_to_dict(auditor_dsn(admin))["user"] == "primitives_auditor"


def test_role_dsns_come_from_the_environment_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIMITIVES_APP_DSN", "host=app-host user=app password=a")
    monkeypatch.setenv("PRIMITIVES_AUDITOR_DSN", "host=audit-host user=aud password=b")
    assert app_dsn("host=x user=admin") == "host=app-host user=app password=a"
    assert auditor_dsn("host=x user=admin") == "host=audit-host user=aud password=b"


def test_invalid_admin_dsn_is_a_storage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRIMITIVES_APP_DSN", raising=False)
    with pytest.raises(StorageError):
        app_dsn("host=x nonsense_keyword=1")


def test_resolve_dsn_uses_primitives_dsn_without_starting_a_server(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PRIMITIVES_DSN", "host=elsewhere dbname=memory")
    assert resolve_dsn(tmp_path) == "host=elsewhere dbname=memory"
    assert list(tmp_path.iterdir()) == []  # nothing created, nothing started


def test_primitives_home_prefers_argument_then_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PRIMITIVES_HOME", str(tmp_path / "env"))
    assert primitives_home() == tmp_path / "env"
    assert primitives_home(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.delenv("PRIMITIVES_HOME")
    assert primitives_home().name == "primitives"


def test_framework_migrations_are_numbered_in_sequence() -> None:
    migrations = load_migrations()
    numbers = [int(m.name[:4]) for m in migrations]
    assert numbers == list(range(1, len(numbers) + 1))
    assert all(re.fullmatch(r"[0-9a-f]{64}", m.checksum) for m in migrations)


def test_sqlstate_constants_match_the_migration_sql() -> None:
    text = (migrations_dir() / "0002_audit_functions.sql").read_text()
    for code in (
        SQLSTATE_APPEND_ONLY,
        SQLSTATE_PERSISTENT_DELETE,
        SQLSTATE_LINKED_DELETE,
        SQLSTATE_JOURNAL_ISOLATION,
    ):
        assert f"ERRCODE = '{code}'" in text


def test_badly_named_migration_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "1_init.sql").write_text("SELECT 1;")
    with pytest.raises(MigrationError, match=re.escape("NNNN_lowercase_name.sql")):
        load_migrations(tmp_path)


def test_two_migrations_with_one_number_are_refused(tmp_path: Path) -> None:
    (tmp_path / "0001_a.sql").write_text("SELECT 1;")
    (tmp_path / "0001_b.sql").write_text("SELECT 2;")
    with pytest.raises(MigrationError, match="share the number 0001"):
        load_migrations(tmp_path)


def test_crlf_line_endings_do_not_change_the_checksum(tmp_path: Path) -> None:
    lf, crlf = tmp_path / "lf", tmp_path / "crlf"
    lf.mkdir()
    crlf.mkdir()
    (lf / "0001_x.sql").write_bytes(b"SELECT 1;\nSELECT 2;\n")
    (crlf / "0001_x.sql").write_bytes(b"SELECT 1;\r\nSELECT 2;\r\n")
    assert load_migrations(lf)[0].checksum == load_migrations(crlf)[0].checksum


def test_translate_error_maps_policy_disk_and_other_sqlstates() -> None:
    assert "42501" in POLICY_SQLSTATES
    refused = translate_error(psycopg.errors.InsufficientPrivilege("nope"), tenant="acme")
    assert isinstance(refused, PolicyViolation)
    assert refused.context["sqlstate"] == "42501" and refused.context["tenant"] == "acme"
    assert isinstance(translate_error(psycopg.errors.DiskFull("full")), StorageFull)
    other = translate_error(psycopg.errors.DivisionByZero("x"))
    assert type(other) is StorageError and other.context["sqlstate"] == "22012"


def test_server_settings_scale_with_memory_within_bounds() -> None:
    from primitives.db import server_settings

    gib = 1024**3
    small, mid = server_settings(2 * gib), server_settings(24 * gib)
    large = server_settings(256 * gib)
    assert small["shared_buffers"] == "512MB" and small["maintenance_work_mem"] == "128MB"
    assert mid["shared_buffers"] == "6144MB" and mid["maintenance_work_mem"] == "1024MB"
    assert mid["effective_cache_size"] == "12288MB"
    assert large["shared_buffers"] == "8192MB"  # capped
    assert server_settings(256 * 1024**2)["shared_buffers"] == "128MB"  # floor
