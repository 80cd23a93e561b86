"""The maintain job's pass registry and its own pass: toy passes run per batch of tenants,
a run stopped half-way is finished by the next, and long orphans are tombstoned
(``tiers[].retention.tombstone_orphans_after``), journalled, once."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives._project import migrate
from primitives.cli import main
from primitives.compile import Tables, agent_tables
from primitives.engine import Engine
from primitives.lifecycle import MaintenancePass, maintain, pass_builders
from primitives.lifecycle._access import AccessLog
from primitives.lifecycle._passes import PassBuilder, Similarity
from primitives.lifecycle._retention import retention_passes
from primitives.spec import AgentSpec, load_spec_text
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")

RETENTION_SPEC = """\
version: 1
agent: maint_retention
anchor:
  keys: [user_id]
  required_at_write: [user_id]
typology:
  session: [episodic]
  user: [episodic, procedural]
tiers:
  - {name: session, boundary: {lifecycle: session_end}}
  - name: user
    boundary: {scope_change: user_id}
    persistent: true
    retention: {orphan_after: 30d, tombstone_orphans_after: 60d}
persistence:
  checkpointer: {enabled: false}
  store: {schema: maint_test, prefix: mr}
retrieval:
  signals: [lexical]
"""


@pytest.fixture(scope="module")
def retention_spec(pg: PostgresHandle) -> AgentSpec:
    spec = load_spec_text(RETENTION_SPEC, policies={})
    migrate([spec], dsn=pg.admin_dsn)
    return spec


def _users(spec: AgentSpec, pg: PostgresHandle, admin: psycopg.Connection[Any], count: int,
           *, age_days: int, typology: str = "episodic") -> list[str]:
    """``count`` users, each with two persistent rows of ``typology`` written ``age_days``
    ago: "old note" and "linked note" (an action links the second)."""
    users = [f"u-{uuid.uuid4().hex[:10]}" for _ in range(count)]
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine:
        for user in users:
            with engine.tenant({"user_id": user}) as mem:
                mem.observe("user", "old note about invoices", typology=typology)
                linked = mem.observe("user", "linked note about refunds", typology=typology)
                mem.link_action(f"act-{user}", [linked.id], "decision")
    tables = agent_tables(spec)
    admin.execute(sql.SQL(
        "UPDATE {} SET created_at = now() - make_interval(days => %s) WHERE {} = ANY(%s)"
    ).format(tables.memories.ident, tables.tenant), (age_days, users))
    return users


def _tombstoned(admin: psycopg.Connection[Any], tables: Tables, users: list[str]
                ) -> dict[tuple[str, str], bool]:
    rows = admin.execute(sql.SQL(
        "SELECT {t}, content, tombstoned_at IS NOT NULL FROM {} WHERE {t} = ANY(%s)").format(
        tables.memories.ident, t=tables.tenant), (users,)).fetchall()
    return {(user, content): dead for user, content, dead in rows}


def test_the_spec_without_tombstone_orphans_after_has_no_retention_pass(
        spectral: AgentSpec, retention_spec: AgentSpec) -> None:
    assert retention_passes(spectral, agent_tables(spectral)) == []
    assert [p.name for p in retention_passes(retention_spec, agent_tables(retention_spec))] == [
        "tombstone_orphans"]


def test_a_retention_policy_file_declares_tombstone_orphans_after_too() -> None:
    from datetime import timedelta as td

    from primitives.lifecycle._retention import tombstone_after
    from primitives.spec._policies import RetentionPolicy
    text = RETENTION_SPEC.replace(
        "retention: {orphan_after: 30d, tombstone_orphans_after: 60d}",
        "retention: {policy: user_retention}")
    policy = RetentionPolicy(kind="retention", name="user_retention",
                             orphan_after=td(days=30), tombstone_orphans_after=td(days=7))
    spec = load_spec_text(text, policies={"user_retention": policy})
    assert tombstone_after(spec) == td(days=7)
    [step] = retention_passes(spec, agent_tables(spec))
    assert "'37 days'" in step.statement.as_string(None)
    bare = load_spec_text(text, policies={"user_retention": RetentionPolicy(
        kind="retention", name="user_retention", orphan_after=td(days=30))})
    assert retention_passes(bare, agent_tables(bare)) == []


def test_long_orphans_are_tombstoned_journalled_once_and_read_or_linked_rows_stay(
        pg: PostgresHandle, retention_spec: AgentSpec, admin_conn: psycopg.Connection[Any],
        auditor_conn: psycopg.Connection[Any]) -> None:
    tables = agent_tables(retention_spec)
    old = _users(retention_spec, pg, admin_conn, 2, age_days=100)  # past 30d + 60d
    young = _users(retention_spec, pg, admin_conn, 1, age_days=60)  # ORPHANED, not yet 90d
    read = _users(retention_spec, pg, admin_conn, 1, age_days=100)
    with Engine.connect(retention_spec, pg.app_dsn, max_connections=2) as engine:
        engine.access = AccessLog(max_ids=10_000, max_age=3600)
        assert engine.search({"user_id": read[0]}, "invoices")
    # the engine flushed its marks on close: the read row's clock restarted
    report = maintain([retention_spec], pg.admin_dsn, batch_tenants=2)
    assert report.agents["maint_retention"]["tombstone_orphans"] == 2
    dead = _tombstoned(admin_conn, tables, old + young + read)
    assert {k for k, v in dead.items() if v} == {(u, "old note about invoices") for u in old}
    events = admin_conn.execute(sql.SQL(
        "SELECT {t}, kind, actor, payload ->> 'reason' FROM {} WHERE {t} = ANY(%s) "
        "AND kind = 'tombstoned'").format(tables.events.ident, t=tables.tenant),
        (old + young + read,)).fetchall()
    assert sorted(events) == sorted((u, "tombstoned", "maintain", "orphaned") for u in old)
    states = dict(auditor_conn.execute(sql.SQL(
        "SELECT r.{t} || '/' || m.content, r.retention_state FROM {} AS r JOIN {} AS m "
        "ON m.{t} = r.{t} AND m.id = r.memory_id WHERE r.{t} = ANY(%s)").format(
        tables.audit_retention_state.ident, tables.memories.ident, t=tables.tenant),
        (old + young,)).fetchall())
    assert states[f"{old[0]}/old note about invoices"] == "TOMBSTONED"
    assert states[f"{old[0]}/linked note about refunds"] == "REFERENCED"
    assert states[f"{young[0]}/old note about invoices"] == "ORPHANED"
    for user in old:
        assert admin_conn.execute(
            "SELECT primitives.verify_chain(%s::regclass, %s, %s)",
            (tables.events.qualified, tables.tenant_column, user)).fetchone() == (None,)
    again = maintain([retention_spec], pg.admin_dsn)
    assert again.agents["maint_retention"]["tombstone_orphans"] == 0


def test_indefinite_rows_are_never_tombstoned_as_orphans(
        pg: PostgresHandle, retention_spec: AgentSpec,
        admin_conn: psycopg.Connection[Any]) -> None:
    # procedural memory lives `persistent: indefinite` (the default): only its archive_on
    # triggers end it, so the orphan timer that tombstones episodes leaves it
    tables = agent_tables(retention_spec)
    assert retention_spec.behavior.lifecycle["procedural"].persistent == "indefinite"
    assert retention_spec.behavior.lifecycle["episodic"].persistent == "forcing_function"
    episodes = _users(retention_spec, pg, admin_conn, 1, age_days=400)
    procedures = _users(retention_spec, pg, admin_conn, 1, age_days=400, typology="procedural")
    report = maintain([retention_spec], pg.admin_dsn, now=datetime.now(UTC) + timedelta(
        days=3650))
    assert report.agents["maint_retention"]["tombstone_orphans"] >= 1
    dead = _tombstoned(admin_conn, tables, episodes + procedures)
    assert dead[(episodes[0], "old note about invoices")]
    assert not dead[(procedures[0], "old note about invoices")]
    assert not dead[(procedures[0], "linked note about refunds")]
    kinds = admin_conn.execute(sql.SQL(
        "SELECT count(*) FROM {} WHERE {t} = %s AND kind IN ('tombstoned', 'archived')").format(
        tables.events.ident, t=tables.tenant), (procedures[0],)).fetchone()
    assert kinds == (0,)


def _toy(calls: list[list[str]], boom: str | None = None) -> PassBuilder:
    """A pass that changes nothing and returns its batch's size (or fails on ``boom``)."""
    failing = sql.SQL("CASE WHEN u = {} THEN 1 / (length(u) - length(u)) ELSE 0 END").format(
        sql.Literal(boom)) if boom else sql.SQL("0")

    def build(spec: AgentSpec, tables: Tables, embedding: bool,
              similarity: Similarity) -> list[MaintenancePass]:
        calls.append([spec.agent])
        return [MaintenancePass("toy", sql.SQL(
            "SELECT count(*) + sum({}) FROM unnest(%(tenants)s::text[]) AS u").format(failing))]
    return build


def test_a_registered_toy_pass_runs_once_per_batch_over_every_tenant(
        pg: PostgresHandle, retention_spec: AgentSpec, admin_conn: psycopg.Connection[Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    _users(retention_spec, pg, admin_conn, 3, age_days=1)
    calls: list[list[str]] = []
    monkeypatch.setattr("primitives.lifecycle._passes.pass_builders",
                        [*pass_builders, _toy(calls)])
    report = maintain([retention_spec], pg.admin_dsn, batch_tenants=2)
    tenants = report.tenants["maint_retention"]
    assert tenants >= 3 and calls == [["maint_retention"]]
    assert report.agents["maint_retention"]["toy"] == tenants  # each tenant in one batch
    assert report.batches == -(-tenants // 2)


def test_a_run_stopped_half_way_is_finished_by_the_next(
        pg: PostgresHandle, retention_spec: AgentSpec, admin_conn: psycopg.Connection[Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    tables = agent_tables(retention_spec)
    users = _users(retention_spec, pg, admin_conn, 4, age_days=200)
    every = [r[0] for r in admin_conn.execute(sql.SQL(
        "SELECT DISTINCT {t} FROM {} ORDER BY 1").format(
        tables.memories.ident, t=tables.tenant)).fetchall()]
    boom = sorted(users)[2]
    monkeypatch.setattr("primitives.lifecycle._passes.pass_builders",
                        [*pass_builders, _toy([], boom=boom)])
    with pytest.raises(psycopg.errors.DivisionByZero):
        maintain([retention_spec], pg.admin_dsn, batch_tenants=1)
    dead = _tombstoned(admin_conn, tables, users)
    # batches before the failing tenant's committed; its own and later ones did not
    assert {u for (u, c), v in dead.items() if v} == {u for u in users if u < boom}
    assert every.index(boom) > 0
    monkeypatch.setattr("primitives.lifecycle._passes.pass_builders", list(pass_builders))
    report = maintain([retention_spec], pg.admin_dsn, batch_tenants=1)
    assert report.agents["maint_retention"]["tombstone_orphans"] == len(
        [u for u in users if u >= boom])
    dead = _tombstoned(admin_conn, tables, users)
    assert {u for (u, c), v in dead.items() if v} == set(users)


def test_cli_maintain_reports_progress_as_plain_lines_off_a_terminal(
        pg: PostgresHandle, retention_spec: AgentSpec, admin_conn: psycopg.Connection[Any],
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Any) -> None:
    users = _users(retention_spec, pg, admin_conn, 2, age_days=120)
    spec_file = tmp_path / "maint_retention.yaml"
    spec_file.write_text(RETENTION_SPEC)
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    assert main(["maintain", str(spec_file), "--batch-tenants", "1"]) == 0
    out = capsys.readouterr()
    lines = [x for x in out.err.splitlines() if x.startswith("maintain maint_retention:")]
    total = int(lines[-1].split("/")[1].split()[0])
    assert len(lines) == total and "\r" not in out.err
    assert "tombstone_orphans: 2" in out.out
    tables = agent_tables(retention_spec)
    assert all(v for (u, c), v in _tombstoned(admin_conn, tables, users).items()
               if c == "old note about invoices")


def test_maintain_uses_the_clock_it_is_given(
        pg: PostgresHandle, retention_spec: AgentSpec, admin_conn: psycopg.Connection[Any]
        ) -> None:
    users = _users(retention_spec, pg, admin_conn, 1, age_days=10)
    tables = agent_tables(retention_spec)
    maintain([retention_spec], pg.admin_dsn)
    assert not any(_tombstoned(admin_conn, tables, users).values())
    later = datetime.now(UTC) + timedelta(days=85)  # 95 days after the write
    report = maintain([retention_spec], pg.admin_dsn, now=later)
    assert report.agents["maint_retention"]["tombstone_orphans"] >= 1
    assert _tombstoned(admin_conn, tables, users)[(users[0], "old note about invoices")]


IDLE_SPEC = RETENTION_SPEC.replace("agent: maint_retention", "agent: maint_idle").replace(
    "prefix: mr}", "prefix: mi}").replace(
    "    retention: {orphan_after: 30d, tombstone_orphans_after: 60d}",
    "    retention: {orphan_after: 30d}") + """\
behavior:
  lifecycle:
    procedural:
      archive_on: [explicit_invalidation, idle]
      justification: notes nobody reads for a month leave retrieval
"""


def test_a_typology_that_archives_on_idle_is_archived_once_orphaned(
        pg: PostgresHandle, admin_conn: psycopg.Connection[Any]) -> None:
    spec = load_spec_text(IDLE_SPEC, policies={})
    migrate([spec], dsn=pg.admin_dsn)
    tables = agent_tables(spec)
    assert [p.name for p in retention_passes(spec, tables)] == ["archive_idle"]
    old = _users(spec, pg, admin_conn, 1, age_days=45, typology="procedural")
    young = _users(spec, pg, admin_conn, 1, age_days=10, typology="procedural")
    report = maintain([spec], pg.admin_dsn)
    assert report.agents["maint_idle"]["archive_idle"] == 1
    rows = admin_conn.execute(sql.SQL(
        "SELECT {t}, content, archived_at IS NOT NULL FROM {} WHERE {t} = ANY(%s)").format(
        tables.memories.ident, t=tables.tenant), (old + young,)).fetchall()
    archived = {(u, c) for u, c, a in rows if a}
    assert archived == {(old[0], "old note about invoices")}  # the linked one stays
    kinds = admin_conn.execute(sql.SQL(
        "SELECT kind, payload ->> 'cause' FROM {} WHERE {t} = %s AND kind = 'archived'").format(
        tables.events.ident, t=tables.tenant), (old[0],)).fetchall()
    assert kinds == [("archived", "idle")]
    assert maintain([spec], pg.admin_dsn).agents["maint_idle"]["archive_idle"] == 0
    # without idle in archive_on (the procedural default) there is no such pass
    assert retention_passes(load_spec_text(RETENTION_SPEC, policies={}), tables)[0].name == \
        "tombstone_orphans"
