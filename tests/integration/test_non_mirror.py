"""Non-mirror discipline, as the app role: the trigram guard refuses a copy of canonical text
(verbatim, near, embedded in a longer note) on every write path and accepts a real note;
canonical references with foreign keys and version pinning; a canonical table that does not
exist yet, and a server without pg_trgm, degrade with a warning."""

from __future__ import annotations

import hashlib
import random
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives._doctor import run_doctor
from primitives._project import migrate
from primitives.compile import agent_tables
from primitives.db import tenant_transaction
from primitives.engine import Engine
from primitives.errors import NonMirrorViolation, PolicyViolation, StorageError, TenancyError
from primitives.lifecycle import maintain
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle
from tests.integration._canonical import (
    EMBEDDED,
    NEAR_COPY,
    REAL_NOTE,
    RULE_7,
    RULE_12,
    canonical_table,
    make_spec,
)


@pytest.fixture
def spec(tmp_path: Path, pg: PostgresHandle, canon: str) -> AgentSpec:
    spec = make_spec(tmp_path, canon)
    migrate([spec], dsn=pg.admin_dsn)
    return spec


@pytest.fixture
def engine(pg: PostgresHandle, spec: AgentSpec) -> Iterator[Engine]:
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine:
        yield engine


@pytest.fixture
def canon(admin_conn: psycopg.Connection[Any]) -> Iterator[str]:
    yield from canonical_table(admin_conn)


def _counts(admin: psycopg.Connection[Any], spec: AgentSpec, tenant: str) -> tuple[int, int]:
    tables = agent_tables(spec)
    row = admin.execute(sql.SQL(
        "SELECT (SELECT count(*) FROM {} WHERE world_id = %(t)s), "
        "(SELECT count(*) FROM {} WHERE world_id = %(t)s)").format(
            tables.memories.ident, tables.events.ident), {"t": tenant}).fetchone()
    assert row is not None
    return row[0], row[1]


def _similarities(admin: psycopg.Connection[Any], note: str) -> tuple[float, float]:
    row = admin.execute("SELECT similarity(%s, %s), word_similarity(%s, %s)",
                        (note, RULE_12, RULE_12, note)).fetchone()
    assert row is not None
    return float(row[0]), float(row[1])


def test_verbatim_copy_is_refused_naming_category_source_and_key(
        engine: Engine, spec: AgentSpec, canon: str, admin_conn: psycopg.Connection[Any]) -> None:
    # the one-round-trip observe (no key, no embedder) carries the check: it is the database's
    with pytest.raises(NonMirrorViolation) as refused:
        engine.observe({"world_id": "w-1"}, "world", RULE_12, typology="procedural")
    err = refused.value
    assert isinstance(err, PolicyViolation)
    assert err.context["category"] == "rule_content"
    assert err.context["canonical_source"] == f"{canon}.body_text"
    assert err.context["canonical_key"] == "12"
    assert err.context["similarity"] == 1.0
    assert "rule_content" in err.message and f"{canon}.body_text" in err.message
    assert "row 12" in err.message
    assert _counts(admin_conn, spec, "w-1") == (0, 0)


def test_near_copy_is_refused_on_the_general_path(
        engine: Engine, spec: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(NonMirrorViolation) as refused, engine.tenant({"world_id": "w-1"}) as mem:
        mem.observe("world", NEAR_COPY, typology="procedural", key="combat-rule")
    assert refused.value.context["canonical_key"] == "12"
    assert refused.value.context["similarity"] >= 0.6
    assert _counts(admin_conn, spec, "w-1") == (0, 0)


def test_near_copy_embedded_in_a_longer_note_is_refused_where_similarity_would_pass(
        engine: Engine, spec: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    # why word_similarity(canonical, note): the whole-note similarity of a padded copy falls
    # under the threshold, while the stretch of the note that copies the rule still scores high
    whole, stretch = _similarities(admin_conn, EMBEDDED)
    assert whole < 0.6 <= stretch
    with pytest.raises(NonMirrorViolation):
        engine.observe({"world_id": "w-1"}, "session", EMBEDDED, scope_id="s-1")
    assert _counts(admin_conn, spec, "w-1") == (0, 0)


def test_a_copy_padded_far_past_the_canonical_length_is_found(
        engine: Engine, spec: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    # candidates come from the canonical rows' prefix trigrams, not from whole-note
    # similarity: a long session log that copies a rule is refused although its similarity
    # is tiny
    padding = "Tickets closed today: " + " ".join(
        hashlib.sha256(str(n).encode()).hexdigest()[:12] for n in range(80))
    note = padding + ". " + RULE_7
    row = admin_conn.execute("SELECT similarity(%s, %s), word_similarity(%s, %s)",
                             (RULE_7, note, RULE_7, note)).fetchone()
    assert row is not None and row[0] < 0.2 and row[1] >= 0.6
    with pytest.raises(NonMirrorViolation) as refused:
        engine.observe({"world_id": "w-1"}, "world", note, typology="procedural")
    assert refused.value.context["canonical_key"] == "7"
    assert _counts(admin_conn, spec, "w-1") == (0, 0)


def _reordered(text: str) -> str:
    words = text.split()
    random.Random(7).shuffle(words)
    return " ".join(words)


def _shingles(text: str) -> set[tuple[str, ...]]:
    words = [w for w in re.split(r"[^0-9a-z]+", text.lower()) if w]
    return {tuple(words[i:i + 3]) for i in range(len(words) - 2)}


def test_a_copy_with_its_words_reordered_is_found_by_its_word_signature(
        engine: Engine, spec: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    # no three consecutive words in common with the rule, so the shingle postings miss it;
    # the rule's word signature (its eight smallest word hashes) is covered by the note's
    # words, which makes the rule a candidate, and word_similarity finds the copy
    copy = _reordered(RULE_12)
    assert not _shingles(copy) & _shingles(RULE_12)
    assert _similarities(admin_conn, copy)[1] >= 0.6
    for write in (lambda: engine.observe({"world_id": "w-1"}, "world", copy,
                                         typology="procedural"),
                  lambda: engine.observe({"world_id": "w-1"}, "session",
                                         "Pinned for operators: " + copy, scope_id="s-1")):
        with pytest.raises(NonMirrorViolation) as refused:
            write()
        assert refused.value.context["canonical_key"] == "12"
    assert _counts(admin_conn, spec, "w-1") == (0, 0)
    # a real note shares subject words with the rule, not its word set: still accepted
    engine.observe({"world_id": "w-1"}, "world", REAL_NOTE, typology="procedural")
    assert _counts(admin_conn, spec, "w-1") == (1, 1)


def test_the_guards_index_is_refreshed_and_a_row_added_since_is_still_compared(
        engine: Engine, spec: AgentSpec, canon: str, pg: PostgresHandle,
        admin_conn: psycopg.Connection[Any]) -> None:
    tables = agent_tables(spec)
    shingles = sql.Identifier(tables.schema, tables.object_name("canonical_indexed"))
    refresh = sql.SQL("SELECT {}.{}()").format(
        sql.Identifier(tables.schema), sql.Identifier(tables.object_name(
            "refresh_canonical_index")))
    indexed = sql.SQL("SELECT canonical_key, row_version FROM {} ORDER BY 1").format(shingles)
    admin_conn.execute(refresh)
    before = admin_conn.execute(indexed).fetchall()
    assert [k for k, _ in before] == ["12", "7"]  # migrate shingled the canonical rows
    assert admin_conn.execute(refresh).fetchone() == (0,)  # nothing changed: nothing to do
    new_rule = ("Scouts that end their move in woods may not be targeted by artillery "
                "unless an enemy unit is adjacent to them at the start of the turn.")
    admin_conn.execute(sql.SQL("INSERT INTO {} (id, body_text) VALUES (31, %s)").format(
        sql.Identifier(*canon.split("."))), (new_rule,))
    try:
        # not refreshed yet: the new row is compared all the same
        with pytest.raises(NonMirrorViolation) as refused:
            engine.observe({"world_id": "w-1"}, "world", new_rule, typology="procedural")
        assert refused.value.context["canonical_key"] == "31"
        report = maintain([spec], pg.admin_dsn)
        assert report.agents[spec.agent]["canonical_index"] == 1
        assert [k for k, _ in admin_conn.execute(indexed).fetchall()] == ["12", "31", "7"]
        with pytest.raises(NonMirrorViolation):
            engine.observe({"world_id": "w-1"}, "world", new_rule, typology="procedural")
        # the maintainer role refreshes through the function only; the app role not at all
        with psycopg.connect(pg.app_dsn, autocommit=True) as app:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                app.execute(refresh)
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                app.execute(sql.SQL("SELECT count(*) FROM {}").format(shingles))
    finally:
        admin_conn.execute(sql.SQL("DELETE FROM {} WHERE id = 31").format(
            sql.Identifier(*canon.split("."))))
    assert maintain([spec], pg.admin_dsn).agents[spec.agent]["canonical_index"] == 1


def test_a_real_note_about_the_rule_is_accepted_and_references_it(
        engine: Engine, spec: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    assert _similarities(admin_conn, REAL_NOTE)[1] < 0.6
    with engine.tenant({"world_id": "w-1"}) as mem:
        note = mem.observe("world", REAL_NOTE, typology="procedural")
        # the guard put back the threshold it set for its candidate search
        assert mem.connection.execute(
            "SELECT current_setting('pg_trgm.similarity_threshold')").fetchone() == ("0.3",)
        ref = mem.reference(note.id, "rule_content", "12")
        assert (ref.key, ref.version, ref.current_version, ref.stale) == ("12", "1", "1", False)
        assert mem.references(note.id) == [ref]
        again = mem.reference(note.id, "rule_content", "12")  # unchanged: no second event
        events = mem.connection.execute(sql.SQL(
            "SELECT kind, payload FROM {} WHERE memory_id = %s ORDER BY seq").format(
                mem.ctx.tables.events.ident), (note.id,)).fetchall()
    assert again == ref
    assert [kind for kind, _ in events] == ["observed", "canonical_referenced"]
    assert events[1][1] == {"category": "rule_content", "key": "12", "version": "1"}


def test_supersede_with_a_copy_is_refused_and_the_note_stays(
        engine: Engine, spec: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    with engine.tenant({"world_id": "w-1"}) as mem:
        note = mem.observe("world", REAL_NOTE, typology="procedural")
    with pytest.raises(NonMirrorViolation), engine.tenant({"world_id": "w-1"}) as mem:
        mem.supersede(note.id, NEAR_COPY)
    with engine.tenant({"world_id": "w-1"}) as mem:
        kept = mem.get(note.id)
    assert kept is not None and kept.content == REAL_NOTE and kept.superseded_at is None


def test_a_copy_carried_up_at_a_scope_end_is_refused_and_nothing_moves(
        engine: Engine, spec: AgentSpec, canon: str,
        admin_conn: psycopg.Connection[Any]) -> None:
    # written before the platform added the rule it now copies; the boundary's set-based
    # insert into the session tier meets the guard
    text = "Artillery must stay in the deployment zone on the first turn of every scenario."
    with engine.tenant({"world_id": "w-1"}) as mem:
        mem.observe("scratch", text, scope_id="x1")
    admin_conn.execute(sql.SQL("INSERT INTO {} (id, body_text) VALUES (13, %s)").format(
        sql.Identifier(*canon.split("."))), (text,))
    before = _counts(admin_conn, spec, "w-1")
    with pytest.raises(NonMirrorViolation) as refused, engine.tenant({"world_id": "w-1"}) as mem:
        mem.end_scope("scratch", "x1", into_scope="s1")
    assert refused.value.context["canonical_key"] == "13"
    assert _counts(admin_conn, spec, "w-1") == before


def test_the_guard_is_global_every_tenant_is_refused(
        engine: Engine, spec: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    # canonical tables are platform-wide: a copy is a copy in whichever tenant it is written
    for tenant in ("w-1", "w-2"):
        with pytest.raises(NonMirrorViolation) as refused:
            engine.observe({"world_id": tenant}, "world", RULE_7, typology="procedural")
        assert refused.value.context["canonical_key"] == "7"
        assert _counts(admin_conn, spec, tenant) == (0, 0)


@pytest.mark.parametrize("side", ["below", "at"])
def test_the_threshold_is_respected_on_both_sides(
        side: str, tmp_path: Path, pg: PostgresHandle, canon: str,
        admin_conn: psycopg.Connection[Any]) -> None:
    score = _similarities(admin_conn, NEAR_COPY)[1]
    # a threshold just above the note's score lets it through; one at its score refuses it
    threshold = round(score, 4) + 0.0001 if side == "below" else round(score - 0.00005, 4)
    spec = make_spec(tmp_path, canon, threshold=threshold)
    migrate([spec], dsn=pg.admin_dsn)
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine:
        if side == "below":
            engine.observe({"world_id": "w-1"}, "world", NEAR_COPY, typology="procedural")
            assert _counts(admin_conn, spec, "w-1") == (1, 1)
        else:
            with pytest.raises(NonMirrorViolation) as refused:
                engine.observe({"world_id": "w-1"}, "world", NEAR_COPY, typology="procedural")
            assert refused.value.context["threshold"] == threshold
            assert _counts(admin_conn, spec, "w-1") == (0, 0)


def test_a_backstop_trigram_trigger_guards_too(
        tmp_path: Path, pg: PostgresHandle, canon: str,
        admin_conn: psycopg.Connection[Any]) -> None:
    spec = make_spec(tmp_path, canon, defense="workshop_discipline", backstop="trigram_trigger")
    migrate([spec], dsn=pg.admin_dsn)
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine:
        with pytest.raises(NonMirrorViolation):
            engine.observe({"world_id": "w-1"}, "world", NEAR_COPY, typology="procedural")
        engine.observe({"world_id": "w-1"}, "world", REAL_NOTE, typology="procedural")
    assert _counts(admin_conn, spec, "w-1") == (1, 1)


def test_without_a_trigram_defense_nothing_is_compared(
        tmp_path: Path, pg: PostgresHandle, canon: str,
        admin_conn: psycopg.Connection[Any]) -> None:
    # workshop discipline alone: the agent reads rules through its tools; the engine compares
    # nothing (reference_only with a canonical source compares: test_non_mirror_defenses.py)
    spec = make_spec(tmp_path, canon, defense="workshop_discipline")
    migrate([spec], dsn=pg.admin_dsn)
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine:
        engine.observe({"world_id": "w-1"}, "world", RULE_12, typology="procedural")
    assert _counts(admin_conn, spec, "w-1") == (1, 1)


def test_a_reference_pins_its_version_and_reads_stale_once_the_row_moves_on(
        engine: Engine, spec: AgentSpec, canon: str,
        admin_conn: psycopg.Connection[Any]) -> None:
    with engine.tenant({"world_id": "w-1"}) as mem:
        note = mem.observe("world", REAL_NOTE, typology="procedural")
        mem.reference(note.id, "rule_content", "12")
        mem.reference(note.id, "rule_content", "7")
    admin_conn.execute(sql.SQL("UPDATE {} SET body_text = body_text || ' Cavalry ignore this.', "
                               "version = 2 WHERE id = 12").format(
        sql.Identifier(*canon.split("."))))
    with engine.tenant({"world_id": "w-1"}) as mem:
        refs = {ref.key: ref for ref in mem.references(note.id)}
    assert (refs["12"].version, refs["12"].current_version, refs["12"].stale) == ("1", "2", True)
    assert refs["7"].stale is False


def test_references_need_an_existing_canonical_row_or_an_explicit_version(
        engine: Engine, spec: AgentSpec) -> None:
    with engine.tenant({"world_id": "w-1"}) as mem:
        note = mem.observe("world", REAL_NOTE, typology="procedural")
        with pytest.raises(PolicyViolation, match="no canonical row '99'"):
            mem.reference(note.id, "rule_content", "99")
        with pytest.raises(PolicyViolation, match="pass version="):
            mem.reference(note.id, "scan_traces", "trace-1")
        with pytest.raises(PolicyViolation, match="not a non-mirror category"):
            mem.reference(note.id, "billing", "1")
        with pytest.raises(TenancyError, match="no memory"):
            mem.reference(uuid.uuid4(), "rule_content", "12")
        trace = mem.reference(note.id, "scan_traces", "trace-1", version="2026-11-01")
    assert (trace.version, trace.current_version, trace.stale) == ("2026-11-01", None, False)


def test_references_carry_real_foreign_keys_raw_inserts_are_refused(
        engine: Engine, spec: AgentSpec, pg: PostgresHandle, canon: str) -> None:
    tables = agent_tables(spec)
    assert tables.canonical_refs is not None
    with engine.tenant({"world_id": "w-1"}) as mem:
        note = mem.observe("world", REAL_NOTE, typology="procedural")
    insert = sql.SQL("INSERT INTO {} (world_id, memory_id, category, canonical_key, "
                     "canonical_version) VALUES ('w-1', %s, %s, %s, '1')").format(
        tables.canonical_refs.ident)
    with psycopg.connect(pg.app_dsn, autocommit=True) as conn:
        for memory_id, key, constraint in ((uuid.uuid4(), "12", "memory_fkey"),
                                           (note.id, "99", "rules_id_fkey")):
            with pytest.raises(StorageError) as refused, tenant_transaction(conn, "w-1"):
                conn.execute(insert, (memory_id, "rule_content", key))
            assert refused.value.context["sqlstate"] == "23503"  # foreign_key_violation
            assert constraint in refused.value.message
        with tenant_transaction(conn, "w-1"):
            conn.execute(insert, (note.id, "rule_content", "7"))


def test_a_canonical_table_created_after_migrate_is_guarded_at_once(
        tmp_path: Path, pg: PostgresHandle, admin_conn: psycopg.Connection[Any]) -> None:
    schema = f"late_{uuid.uuid4().hex[:8]}"
    spec = make_spec(tmp_path, f"{schema}.rules")
    report = migrate([spec], dsn=pg.admin_dsn)
    assert any(f"{schema}.rules does not exist yet" in w for w in report.warnings)
    tables = agent_tables(spec)
    fk = sql.SQL("SELECT count(*) FROM pg_constraint WHERE conrelid = %s::regclass "
                 "AND contype = 'f'")
    assert admin_conn.execute(fk, (tables.canonical_refs.qualified,)).fetchone() == (1,)
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine:
        engine.observe({"world_id": "w-1"}, "world", RULE_12, typology="procedural")
        admin_conn.execute(sql.SQL(
            "CREATE SCHEMA {s}; CREATE TABLE {s}.rules (id integer PRIMARY KEY, "
            "body_text text NOT NULL, version integer NOT NULL DEFAULT 1); "
            "GRANT USAGE ON SCHEMA {s} TO primitives_owner; "
            "GRANT SELECT, REFERENCES ON {s}.rules TO primitives_owner; "
            "INSERT INTO {s}.rules (id, body_text) VALUES (12, {rule})").format(
                s=sql.Identifier(schema), rule=sql.Literal(RULE_12)))
        try:
            with pytest.raises(NonMirrorViolation):
                engine.observe({"world_id": "w-1"}, "world", RULE_12, typology="procedural")
            # migrate again: the plan changed (the table is there), references gain its key
            again = migrate([spec], dsn=pg.admin_dsn)
            assert again.plans[0].applied
            # no index on the canonical column is asked for: the guard keeps its own
            assert [w for w in again.warnings if spec.agent in w] == []
            assert admin_conn.execute(fk, (tables.canonical_refs.qualified,)).fetchone() == (2,)
        finally:
            admin_conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def test_without_pg_trgm_migrate_warns_and_the_guard_is_off(
        tmp_path: Path, pg: PostgresHandle, fresh_database: Callable[[], str]) -> None:
    dsn = fresh_database()
    migrate([], dsn=dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP EXTENSION pg_trgm")
    spec = make_spec(tmp_path, "platform_rules.rules")
    report = migrate([spec], dsn=dsn)
    assert report.capabilities.trigram is False
    assert any("pg_trgm is not installed" in w and "trigram guard is off" in w
               for w in report.warnings)
    with psycopg.connect(dsn, autocommit=True) as conn:
        guards = conn.execute("SELECT count(*) FROM pg_trigger "
                              "WHERE tgname = 'primitives_non_mirror_guard'").fetchone()
    assert guards == (0,)


def test_doctor_requires_the_guard_and_warns_of_a_missing_canonical_table(
        tmp_path: Path, spec: AgentSpec, pg: PostgresHandle,
        admin_conn: psycopg.Connection[Any], auditor_conn: psycopg.Connection[Any]) -> None:
    late = make_spec(tmp_path, "not_yet_there.rules")
    migrate([late], dsn=pg.admin_dsn)
    report = run_doctor(auditor_conn, [spec, late])
    assert report.ok, report.findings
    assert [w for w in report.warnings if late.agent in w] == [
        f"agent {late.agent}: non-mirror category rule_content (canonical source "
        "not_yet_there.rules.body_text): table not_yet_there.rules does not exist yet; the "
        "guard compares nothing and references carry no foreign key to it until it does "
        "(migrate again once the platform creates it)"]
    assert not [w for w in report.warnings if spec.agent in w]
    memories = agent_tables(spec).memories.ident
    admin_conn.execute(sql.SQL("ALTER TABLE {} DISABLE TRIGGER primitives_non_mirror_guard"
                               ).format(memories))
    try:
        report = run_doctor(auditor_conn, [spec])
    finally:
        admin_conn.execute(sql.SQL("ALTER TABLE {} ENABLE TRIGGER primitives_non_mirror_guard"
                                   ).format(memories))
    assert [(f.check, f.problem) for f in report.findings] == [
        ("triggers", f"the BEFORE INSERT trigger calling nm_tests.{spec.persistence.store.prefix}"
                     "_non_mirror_guard() is disabled"),
        ("drift", "trigger primitives_non_mirror_guard is disabled")]  # the plan's view of it



def test_maintain_archives_facts_whose_canonical_rows_changed_and_only_those(
        engine: Engine, spec: AgentSpec, canon: str, pg: PostgresHandle,
        admin_conn: psycopg.Connection[Any]) -> None:
    # semantic archives on canonical_change by default; procedural only on invalidation
    from primitives.lifecycle import maintain
    world = f"w-{uuid.uuid4().hex[:8]}"
    with engine.tenant({"world_id": world}) as mem:
        on_12 = mem.observe("world", "Retreats after melee follow rule 12 in this world",
                            typology="semantic")
        on_7 = mem.observe("world", "Scouts in this world follow rule 7", typology="semantic")
        howto = mem.observe("world", REAL_NOTE, typology="procedural")
        mem.reference(on_12.id, "rule_content", "12")
        mem.reference(on_7.id, "rule_content", "7")
        mem.reference(howto.id, "rule_content", "12")
    assert maintain([spec], pg.admin_dsn).agents[spec.agent]["archive_canonical_change"] == 0
    admin_conn.execute(sql.SQL("UPDATE {} SET version = 2 WHERE id = 12").format(
        sql.Identifier(*canon.split("."))))
    first = maintain([spec], pg.admin_dsn)
    again = maintain([spec], pg.admin_dsn)
    assert first.agents[spec.agent]["archive_canonical_change"] == 1
    assert again.agents[spec.agent]["archive_canonical_change"] == 0
    with engine.tenant({"world_id": world}) as mem:
        states = {m: mem.get(m) for m in (on_12.id, on_7.id, howto.id)}
    assert states[on_12.id] is not None and states[on_12.id].archived_at is not None
    assert states[on_7.id] is not None and states[on_7.id].active
    assert states[howto.id] is not None and states[howto.id].active
    tables = agent_tables(spec)
    [(payload,)] = admin_conn.execute(sql.SQL(
        "SELECT payload FROM {} WHERE memory_id = %s AND kind = 'archived'").format(
        tables.events.ident), (on_12.id,)).fetchall()
    assert payload["cause"] == "canonical_change"
    assert payload["references"] == [{"category": "rule_content", "key": "12", "pinned": "1",
                                       "current": "2"}]
