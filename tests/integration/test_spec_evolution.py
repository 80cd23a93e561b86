"""Changing a spec that is already applied: each change classified, applied or refused.

Every case ends in a correct migration or a refusal that names the spec file and line
(``primitives plan`` / ``primitives migrate``, issue 21). The store is built from a spec file
written to a temporary folder, so the line numbers are real.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives._doctor import run_doctor
from primitives._project import migrate, plan_specs
from primitives.cli import main
from primitives.compile import compile_plan
from primitives.errors import SpecChangeRefused
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.db

TEMPLATE = """\
version: 1
agent: {agent}
anchor:
  keys: [team_id, {user_key}]
  required_at_write: [team_id]
  nullable_for_cross_scope: [{user_key}]{anchor_extra}
typology:
  run: [episodic]
  {persistent}: [episodic, semantic]
tiers:
  - {{name: run, boundary: {{lifecycle: run_end}}}}
  - name: {persistent}
    boundary: {{scope_change: team_id}}
    persistent: true{tier_extra}
    retention: {{audit_retention: {retention}}}
persistence:
  checkpointer: {{enabled: false}}
  store: {{schema: {schema}, prefix: {prefix}}}
retrieval:
  signals: [lexical, semantic]
  embedding: {{dims: {dims}}}
"""


class Store:
    """One agent's spec file, rewritten per case, and its store."""

    def __init__(self, folder: Path, pg: PostgresHandle) -> None:
        self.agent = f"evo_{uuid.uuid4().hex[:8]}"
        self.schema = self.agent
        self.path = folder / f"{self.agent}.yaml"
        self.pg = pg

    def write(self, **overrides: Any) -> AgentSpec:
        values: dict[str, Any] = {
            "agent": self.agent, "user_key": "user_id", "anchor_extra": "",
            "persistent": "team", "tier_extra": "", "retention": "365d",
            "schema": self.schema, "prefix": "evo", "dims": 8,
        }
        values.update(overrides)
        self.path.write_text(TEMPLATE.format(**values), encoding="utf-8")
        return load_spec(self.path)

    def line_of(self, text: str) -> int:
        lines = self.path.read_text(encoding="utf-8").splitlines()
        return next(n for n, line in enumerate(lines, 1) if text in line)

    def migrate(self, spec: AgentSpec, **kwargs: Any) -> Any:
        return migrate([spec], dsn=self.pg.admin_dsn, progress=lambda _: None, **kwargs)


@pytest.fixture
def store(tmp_path: Path, pg: PostgresHandle,
          admin_conn: psycopg.Connection[Any]) -> Iterator[Store]:
    made = Store(tmp_path, pg)
    yield made
    admin_conn.execute(_q(made, "DROP SCHEMA IF EXISTS {s} CASCADE"))
    admin_conn.execute("DELETE FROM primitives.agent_plans WHERE agent = %s", (made.agent,))


def _q(store: Store, text: str) -> sql.Composed:
    """``text`` with ``{s}`` as the store's schema."""
    return sql.SQL(text).format(s=sql.Identifier(store.schema))


def _insert(conn: psycopg.Connection[Any], store: Store, tier: str, key: str) -> None:
    conn.execute(_q(store,
        "INSERT INTO {s}.evo_memories (team_id, tier, typology, key, content) "
        "VALUES ('t1', %s, 'episodic', %s, 'kept')"), (tier, key))


def _persistent_expression(conn: psycopg.Connection[Any], store: Store) -> str:
    row = conn.execute(
        "SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef AS d JOIN pg_attribute AS a "
        "ON a.attrelid = d.adrelid AND a.attnum = d.adnum "
        "WHERE d.adrelid = %s::regclass AND a.attname = 'persistent'",
        (f'"{store.schema}".evo_memories',)).fetchone()
    assert row is not None
    return str(row[0])


def _history(conn: psycopg.Connection[Any], store: Store) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT allowed, reason, changes FROM primitives.plan_history WHERE agent = %s "
        "ORDER BY id", (store.agent,)).fetchall()


def test_an_unchanged_spec_plans_no_changes_and_migrates_as_unchanged(store: Store) -> None:
    spec = store.write()
    first = store.migrate(spec)
    assert [c.kind for c in first.specs[0].evolution.changes] == ["additive"]
    assert first.plans[0].applied
    again = store.migrate(spec)
    assert again.specs[0].unchanged and not again.plans[0].applied


def test_renaming_the_persistent_tier_with_no_rows_moves_the_generated_column(
    store: Store, admin_conn: psycopg.Connection[Any]
) -> None:
    store.migrate(store.write())
    renamed = store.write(persistent="org", tier_extra="\n    renamed_from: team")
    report = store.migrate(renamed)
    kinds = {c.summary: c.kind for c in report.specs[0].evolution.changes}
    assert kinds["tier 'team' renamed to 'org'"] == "rebuild"
    assert "'org'" in _persistent_expression(admin_conn, store)
    _insert(admin_conn, store, "org", "k")
    assert admin_conn.execute(
        _q(store, "SELECT persistent FROM {s}.evo_memories")).fetchall() == [(True,)]


def test_renaming_the_persistent_tier_with_rows_moves_them_and_every_check_follows(
    store: Store, admin_conn: psycopg.Connection[Any]
) -> None:
    store.migrate(store.write())
    _insert(admin_conn, store, "team", "a")
    _insert(admin_conn, store, "team", "b")
    store.migrate(store.write(persistent="org", tier_extra="\n    renamed_from: team"))
    assert admin_conn.execute(
        _q(store, "SELECT tier, persistent FROM {s}.evo_memories ORDER BY key")).fetchall() \
        == [("org", True), ("org", True)]
    with pytest.raises(psycopg.errors.CheckViolation):
        _insert(admin_conn, store, "team", "c")  # the old name is no longer a tier
    unvalidated = admin_conn.execute(
        "SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'c' "
        "AND NOT convalidated", (f'"{store.schema}".evo_memories',)).fetchall()
    assert unvalidated == []


def test_removing_a_tier_that_holds_rows_is_refused_naming_the_spec_line(
    store: Store, admin_conn: psycopg.Connection[Any]
) -> None:
    store.migrate(store.write())
    _insert(admin_conn, store, "team", "a")
    renamed = store.write(persistent="org")  # no renamed_from: 'team' disappears
    with pytest.raises(SpecChangeRefused) as refused:
        store.migrate(renamed)
    message = str(refused.value)
    assert f"{store.path}:{store.line_of('tiers:')}" in message
    assert "tier 'team' removed while 1 row(s) still hold it" in message
    assert "renamed_from: team" in message  # the way forward
    with pytest.raises(SpecChangeRefused):  # not even when allowed: rows would break
        store.migrate(renamed, allow=["destructive"], reason="try")
    assert "'team'" in _persistent_expression(admin_conn, store)  # nothing applied


def test_renaming_an_anchor_key_declared_renames_the_column_in_every_table(
    store: Store, admin_conn: psycopg.Connection[Any]
) -> None:
    store.migrate(store.write())
    _insert(admin_conn, store, "team", "a")
    undeclared = store.write(user_key="member_id")
    with pytest.raises(SpecChangeRefused) as refused:
        store.migrate(undeclared)
    assert f"{store.path}:{store.line_of('keys:')}: anchor.keys" in str(refused.value)
    assert "anchor key 'user_id' removed" in str(refused.value)
    declared = store.write(user_key="member_id",
                           anchor_extra="\n  renamed_from: {member_id: user_id}")
    store.migrate(declared)
    left = admin_conn.execute(
        "SELECT table_name FROM information_schema.columns WHERE table_schema = %s "
        "AND column_name = 'user_id'", (store.schema,)).fetchall()
    assert left == []
    assert admin_conn.execute(
        _q(store, "SELECT count(*) FROM {s}.evo_memories WHERE member_id IS NULL")).fetchone() == (1,)
    assert admin_conn.execute(
        _q(store, "SELECT count(*) FROM {s}.evo_active_memories")).fetchone() == (1,)


def test_changing_embedding_dims_is_refused_with_the_way_forward(
    store: Store, admin_conn: psycopg.Connection[Any]
) -> None:
    store.migrate(store.write(dims=8))
    with pytest.raises(SpecChangeRefused) as refused:
        store.migrate(store.write(dims=16), allow=["destructive"], reason="bigger model")
    message = str(refused.value)
    assert f"{store.path}:{store.line_of('embedding:')}: retrieval.embedding.dims" in message
    assert "embedding dims 8 -> 16" in message and "keep dims: 8" in message
    assert admin_conn.execute(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
        "%s::regclass AND attname = 'embedding'",
        (f'"{store.schema}".evo_memories',)).fetchone() in {("vector(8)",), ("halfvec(8)",)}


def test_changing_the_prefix_is_refused_unless_allowed_and_the_move_is_journalled(
    store: Store, admin_conn: psycopg.Connection[Any], auditor_conn: psycopg.Connection[Any]
) -> None:
    store.migrate(store.write())
    moved = store.write(prefix="moved")
    with pytest.raises(SpecChangeRefused) as refused:
        store.migrate(moved)
    message = str(refused.value)
    assert f"{store.path}:{store.line_of('store:')}: persistence.store.prefix" in message
    assert "old tables and their journal stay behind" in message
    with pytest.raises(Exception, match="--reason"):
        store.migrate(moved, allow=["destructive"])
    store.migrate(moved, allow=["destructive"], reason="fresh store for the new product line")
    rows = auditor_conn.execute(
        "SELECT allowed, reason FROM primitives.plan_history WHERE agent = %s ORDER BY id",
        (store.agent,)).fetchall()
    assert rows[-1] == (["destructive"], "fresh store for the new product line")


def test_shortening_audit_retention_needs_allow_with_a_reason_and_is_journalled(
    store: Store, admin_conn: psycopg.Connection[Any], auditor_conn: psycopg.Connection[Any]
) -> None:
    store.migrate(store.write(retention="365d"))
    shorter = store.write(retention="30d")
    with pytest.raises(SpecChangeRefused) as refused:
        store.migrate(shorter)
    assert "audit retention 365d -> 30d" in str(refused.value)
    assert f"{store.path}:{store.line_of('retention:')}" in str(refused.value)
    store.migrate(shorter, allow=["weakening"], reason="legal approved 30 days (ticket 42)")
    allowed, reason, changes = _history(auditor_conn, store)[-1]
    assert (allowed, reason) == (["weakening"], "legal approved 30 days (ticket 42)")
    assert [c["kind"] for c in changes] == ["weakening"]
    with pytest.raises(psycopg.Error, match="append-only"):  # the journal stays
        admin_conn.execute("DELETE FROM primitives.plan_history WHERE agent = %s",
                           (store.agent,))
    longer = store.write(retention="400d")
    report = store.migrate(longer)
    assert [c.kind for c in report.specs[0].evolution.changes] == ["additive"]


def test_dry_run_classifies_and_applies_nothing(
    store: Store, admin_conn: psycopg.Connection[Any]
) -> None:
    store.migrate(store.write())
    renamed = store.write(persistent="org", tier_extra="\n    renamed_from: team")
    report = store.migrate(renamed, dry_run=True)
    assert [c.kind for c in report.specs[0].evolution.changes] == ["rebuild", "rebuild"]
    assert report.plans == []
    assert "'team'" in _persistent_expression(admin_conn, store)


def test_plan_command_prints_each_change_and_exits_1_on_a_refusal(
    store: Store, pg: PostgresHandle, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    store.migrate(store.write())
    store.write(retention="30d")
    assert main(["plan", str(store.path)]) == 1
    out = capsys.readouterr().out
    assert "! weakening   tier 'team': audit retention 365d -> 30d" in out
    assert "-> refused" in out and "way forward:" in out
    assert main(["plan", "--json", str(store.path)]) == 1
    assert '"kind": "weakening"' in capsys.readouterr().out
    store.write()
    assert main(["plan", str(store.path)]) == 0
    assert "no changes" in capsys.readouterr().out
    assert plan_specs([store.write()], dsn=pg.admin_dsn)[0].unchanged


def test_doctor_fails_on_a_catalog_that_drifted_from_the_spec(
    store: Store, admin_conn: psycopg.Connection[Any]
) -> None:
    spec = store.write()
    store.migrate(spec)
    assert [f for f in run_doctor(admin_conn, [spec]).findings if f.check == "drift"] == []
    admin_conn.execute(_q(store, "ALTER TABLE {s}.evo_memories ALTER COLUMN persistent "
                                 "SET EXPRESSION AS (tier = 'run')"))
    admin_conn.execute(_q(store, "ALTER TABLE {s}.evo_memory_events DISABLE TRIGGER "
                                 "primitives_refuse_mutation"))
    admin_conn.execute(_q(store, "ALTER TABLE {s}.evo_scopes DROP CONSTRAINT "
                                 "evo_scopes_tier_check"))
    report = run_doctor(admin_conn, [spec])
    drift = sorted(f.problem for f in report.findings if f.check == "drift")
    assert not report.ok
    assert any(p.startswith("generated column persistent is (tier = 'run'::text)")
               for p in drift), drift
    assert "trigger primitives_refuse_mutation is disabled" in drift
    assert "CHECK constraint evo_scopes_tier_check is missing" in drift


def test_checks_are_added_not_valid_and_validated_without_blocking_readers_or_writers(
    store: Store, pg: PostgresHandle, admin_conn: psycopg.Connection[Any]
) -> None:
    spec = store.write()
    plan = compile_plan(spec)
    added = [s.statement.as_string(None) for s in plan.steps
             if "ADD CONSTRAINT" in s.statement.as_string(None)]
    assert added and all(text.count("NOT VALID") == text.count("ADD CONSTRAINT")
                         for text in added)
    assert plan.validations and all("VALIDATE CONSTRAINT" in s.statement.as_string(None)
                                    for s in plan.validations)
    store.migrate(spec)
    _insert(admin_conn, store, "team", "a")
    memories = next(s.statement for s in plan.validations
                    if s.title.startswith(f"{store.schema}.evo_memories"))
    with psycopg.connect(pg.admin_dsn) as validator, \
            psycopg.connect(pg.admin_dsn, autocommit=True) as other:
        validator.execute(memories)  # its transaction stays open, holding the VALIDATE lock
        other.execute("SET lock_timeout = '1s'")
        assert other.execute(_q(store, "SELECT count(*) FROM {s}.evo_memories")).fetchone() \
            == (1,)
        _insert(other, store, "team", "b")  # a writer is not blocked either
        validator.rollback()
    unvalidated = admin_conn.execute(
        "SELECT count(*) FROM pg_constraint WHERE connamespace = %s::regnamespace "
        "AND contype = 'c' AND NOT convalidated", (store.schema,)).fetchone()
    assert unvalidated == (0,)  # migrate validated them after its plan committed


def test_renaming_the_tenant_key_keeps_isolation_rows_and_the_journal_chain(
    store: Store, pg: PostgresHandle, admin_conn: psycopg.Connection[Any]
) -> None:
    from primitives.compile import agent_tables
    from primitives.embeddings import HashingEmbedder
    from primitives.engine import Engine

    old = store.write()
    store.migrate(old)
    with Engine.connect(old, pg.app_dsn, embedder=HashingEmbedder(8)) as engine:
        for team, text in (("t1", "the first team's boiler"), ("t2", "the second team's van")):
            engine.observe({"team_id": team}, "team", text, typology="episodic")
    # team_id (the tenant key) becomes org_id everywhere the spec names it
    text = store.path.read_text(encoding="utf-8").replace("team_id", "org_id").replace(
        "nullable_for_cross_scope: [user_id]",
        "nullable_for_cross_scope: [user_id]\n  renamed_from: {org_id: team_id}")
    store.path.write_text(text, encoding="utf-8")
    new = load_spec(store.path)
    assert new.anchor.keys[0] == "org_id"
    report = store.migrate(new)
    assert "anchor key 'team_id' renamed to 'org_id'" in {
        c.summary for c in report.specs[0].evolution.changes}
    assert admin_conn.execute(
        "SELECT count(*) FROM information_schema.columns WHERE table_schema = %s "
        "AND column_name = 'team_id'", (store.schema,)).fetchone() == (0,)
    policies = admin_conn.execute(
        "SELECT string_agg(qual, ' ') FROM pg_policies WHERE schemaname = %s",
        (store.schema,)).fetchone()
    assert policies is not None and "org_id" in policies[0] and "team_id" not in policies[0]
    with Engine.connect(new, pg.app_dsn, embedder=HashingEmbedder(8)) as engine:
        def seen(team: str) -> list[str]:
            return sorted(h.memory.content for h in engine.search(
                {"org_id": team}, "boiler van row renamed key team"))

        assert seen("t1") == ["the first team's boiler"]  # the app role sees its tenant only
        engine.observe({"org_id": "t1"}, "team", "a row under the renamed key",
                       typology="episodic")
        assert seen("t1") == ["a row under the renamed key", "the first team's boiler"]
        assert seen("t2") == ["the second team's van"]
    tables = agent_tables(new)
    for team in ("t1", "t2"):
        assert admin_conn.execute(
            "SELECT primitives.verify_chain(%s::regclass, %s, %s)",
            (tables.events.qualified, tables.tenant_column, team)).fetchone() == (None,)
