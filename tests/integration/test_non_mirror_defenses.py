"""Non-mirror defenses other than the trigram trigger, as the app role: ``reference_only``
refuses a copy of a canonical source and takes a short note with a reference;
``reference_only`` and ``workshop_discipline`` bound the notes that reference their rows;
references written with the note (``observe(references=...)``) share its transaction."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives._project import migrate
from primitives.compile import agent_tables
from primitives.engine import Engine
from primitives.errors import NonMirrorViolation, PolicyViolation
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle
from tests.integration._canonical import NEAR_COPY, REAL_NOTE, RULE_12, canonical_table, make_spec

LONG_NOTE = ("Operators of this world asked about retreats after melee again. " * 9).strip()
"""A note about the work, not a copy of any rule, longer than the default ``note_chars``."""


@pytest.fixture
def canon(admin_conn: psycopg.Connection[Any]) -> Iterator[str]:
    yield from canonical_table(admin_conn)


def _spec(tmp_path: Path, pg: PostgresHandle, canon: str, defense: str,
          backstop: str = "") -> AgentSpec:
    spec = make_spec(tmp_path, canon, defense=defense, backstop=backstop)
    migrate([spec], dsn=pg.admin_dsn)
    return spec


def _journal(admin: psycopg.Connection[Any], spec: AgentSpec, tenant: str
             ) -> tuple[int, list[str], list[tuple[str, str, str]]]:
    tables = agent_tables(spec)
    assert tables.canonical_refs is not None
    rows = admin.execute(sql.SQL("SELECT count(*) FROM {} WHERE world_id = %s").format(
        tables.memories.ident), (tenant,)).fetchone()
    kinds = admin.execute(sql.SQL("SELECT kind FROM {} WHERE world_id = %s ORDER BY seq").format(
        tables.events.ident), (tenant,)).fetchall()
    refs = admin.execute(sql.SQL(
        "SELECT category, canonical_key, canonical_version FROM {} WHERE world_id = %s "
        "ORDER BY 1, 2").format(tables.canonical_refs.ident), (tenant,)).fetchall()
    assert rows is not None
    return rows[0], [k for (k,) in kinds], refs


def test_reference_only_refuses_a_copy_naming_the_source_and_takes_a_note_with_a_reference(
        tmp_path: Path, pg: PostgresHandle, canon: str,
        admin_conn: psycopg.Connection[Any]) -> None:
    spec = _spec(tmp_path, pg, canon, "reference_only")
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine:
        for text in (RULE_12, NEAR_COPY):
            with pytest.raises(NonMirrorViolation) as refused:
                engine.observe({"world_id": "w-1"}, "world", text, typology="procedural")
            assert refused.value.context["canonical_source"] == f"{canon}.body_text"
            assert refused.value.context["canonical_key"] == "12"
            assert f"{canon}.body_text" in refused.value.message
        # a reference does not make a copy a note: still refused, nothing written
        with pytest.raises(NonMirrorViolation), engine.tenant({"world_id": "w-1"}) as mem:
            mem.observe("world", RULE_12, typology="procedural",
                        references=[("rule_content", "12")])
        assert _journal(admin_conn, spec, "w-1") == (0, [], [])
        with engine.tenant({"world_id": "w-1"}) as mem:
            note = mem.observe("world", REAL_NOTE, typology="procedural",
                               references=[("rule_content", "12")])
            [ref] = mem.references(note.id)
    assert (ref.key, ref.version, ref.stale) == ("12", "1", False)
    assert _journal(admin_conn, spec, "w-1") == (
        1, ["observed", "canonical_referenced"], [("rule_content", "12", "1")])


@pytest.mark.parametrize(("defense", "backstop"), [
    ("reference_only", ""), ("workshop_discipline", ""),
    ("trigram_trigger", "workshop_discipline"), ("trigram_trigger", "reference_only")])
def test_a_note_referencing_a_bounded_category_is_refused_past_note_chars(
        tmp_path: Path, pg: PostgresHandle, canon: str, admin_conn: psycopg.Connection[Any],
        defense: str, backstop: str) -> None:
    spec = _spec(tmp_path, pg, canon, defense, backstop)
    assert len(LONG_NOTE) > spec.discipline.non_mirror[0].note_chars
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine:
        with pytest.raises(PolicyViolation) as refused, \
                engine.tenant({"world_id": "w-1"}) as mem:
            mem.observe("world", LONG_NOTE, typology="procedural",
                        references=[("rule_content", "12")])
        assert refused.value.context["field"] == "content"
        assert refused.value.context["note_chars"] == 500
        assert "note_chars" in refused.value.message
        assert _journal(admin_conn, spec, "w-1") == (0, [], [])  # the write went with it
        # referencing an existing long row later is refused too; the row stays unreferenced
        with engine.tenant({"world_id": "w-1"}) as mem:
            row = mem.observe("world", LONG_NOTE, typology="procedural")
        with pytest.raises(PolicyViolation, match="note_chars"), \
                engine.tenant({"world_id": "w-1"}) as mem:
            mem.reference(row.id, "rule_content", "12")
        # a reference_only category without a canonical source bounds its notes alike
        with pytest.raises(PolicyViolation, match="note_chars"), \
                engine.tenant({"world_id": "w-1"}) as mem:
            mem.reference(row.id, "scan_traces", "t-9", version="2026-11-01")
        with engine.tenant({"world_id": "w-1"}) as mem:
            mem.observe("world", REAL_NOTE, typology="procedural",
                        references=[("rule_content", "12"),
                                    ("scan_traces", "t-9", "2026-11-01")])
    assert _journal(admin_conn, spec, "w-1") == (
        2, ["observed", "observed", "canonical_referenced", "canonical_referenced"],
        [("rule_content", "12", "1"), ("scan_traces", "t-9", "2026-11-01")])


def test_reference_only_as_a_backstop_compares_copies_too(
        tmp_path: Path, pg: PostgresHandle, canon: str,
        admin_conn: psycopg.Connection[Any]) -> None:
    spec = _spec(tmp_path, pg, canon, "workshop_discipline", "reference_only")
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine:
        with pytest.raises(NonMirrorViolation) as refused:
            engine.observe({"world_id": "w-1"}, "world", NEAR_COPY, typology="procedural")
        assert refused.value.context["canonical_key"] == "12"
        engine.observe({"world_id": "w-1"}, "world", REAL_NOTE, typology="procedural")
    assert _journal(admin_conn, spec, "w-1")[:2] == (1, ["observed"])


def test_a_trigram_only_category_compares_copies_but_does_not_bound_notes(
        tmp_path: Path, pg: PostgresHandle, canon: str,
        admin_conn: psycopg.Connection[Any]) -> None:
    spec = _spec(tmp_path, pg, canon, "trigram_trigger")
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine, \
            engine.tenant({"world_id": "w-1"}) as mem:
        mem.observe("world", LONG_NOTE, typology="procedural",
                    references=[("rule_content", "12")])
    assert _journal(admin_conn, spec, "w-1")[0] == 1


def test_workshop_discipline_alone_compares_no_copy_where_reference_only_does(
        tmp_path: Path, pg: PostgresHandle, canon: str,
        admin_conn: psycopg.Connection[Any]) -> None:
    # the agent works with rules through its tools: no guard unless a trigram backstop is
    # declared (test_non_mirror.py::test_a_backstop_trigram_trigger_guards_too)
    spec = _spec(tmp_path, pg, canon, "workshop_discipline")
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine:
        engine.observe({"world_id": "w-1"}, "world", RULE_12, typology="procedural")
    assert _journal(admin_conn, spec, "w-1")[0] == 1


def test_references_given_with_a_write_are_checked_before_anything_is_written(
        tmp_path: Path, pg: PostgresHandle, canon: str,
        admin_conn: psycopg.Connection[Any]) -> None:
    spec = _spec(tmp_path, pg, canon, "reference_only")
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine:
        for refs, message in (("rule_content", "list of"),
                              ([("rule_content",)], r"references\[0\]"),
                              ([("billing", "1")], "not a non-mirror category"),
                              ([("rule_content", "99")], "no canonical row '99'"),
                              ([("scan_traces", "t-1")], "pass version=")):
            with pytest.raises(PolicyViolation, match=message), \
                    engine.tenant({"world_id": "w-1"}) as mem:
                mem.observe("world", REAL_NOTE, typology="procedural", references=refs)
    assert _journal(admin_conn, spec, "w-1") == (0, [], [])
