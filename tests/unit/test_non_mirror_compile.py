"""The non-mirror discipline as compiled (no database): which entries the guard compares,
the references table and its foreign keys, and the spec checks on canonical sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from primitives.compile import Capabilities, compile_plan
from primitives.compile._non_mirror import NON_MIRROR_SQLSTATE, guarded
from primitives.db import SQLSTATE_NON_MIRROR
from primitives.errors import SpecError
from primitives.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]


def test_the_guard_raises_the_sqlstate_the_engine_maps() -> None:
    assert NON_MIRROR_SQLSTATE == SQLSTATE_NON_MIRROR
    text = compile_plan(load_spec(ROOT / "agents" / "world_agent.yaml")).render()
    assert f"ERRCODE = '{SQLSTATE_NON_MIRROR}'" in text
    assert "BEFORE INSERT ON \"worlds\".\"world_agent_memories\"" in text
    assert "LANGUAGE plpgsql SECURITY DEFINER\nSET search_path = pg_catalog, pg_temp" in text


def test_guarded_entries_need_a_trigram_defense_and_pg_trgm() -> None:
    world = load_spec(ROOT / "agents" / "world_agent.yaml")
    operations = load_spec(ROOT / "agents" / "operations_agent.yaml")
    spectral = load_spec(ROOT / "agents" / "spectral_agent.yaml")
    assert [i.category for i in guarded(world, Capabilities())] == ["world_model_rule_content"]
    # a backstop guards as well as a primary defense
    assert [i.category for i in guarded(operations, Capabilities())] == [
        "world_model_rule_content"]
    assert guarded(spectral, Capabilities()) == ()
    assert guarded(world, Capabilities(trigram=False)) == ()
    assert "non_mirror_guard" not in compile_plan(
        world, capabilities=Capabilities(trigram=False)).render()


def test_references_get_a_canonical_foreign_key_only_where_the_table_is_referable() -> None:
    world = load_spec(ROOT / "agents" / "world_agent.yaml")
    plain = compile_plan(world).render()
    assert "world_agent_canonical_refs_memory_fkey" in plain
    assert "REFERENCES \"worlds\".\"rules\"" not in plain
    text = compile_plan(world, capabilities=Capabilities(
        canonical_keys=(("worlds.rules", "bigint"),))).render()
    assert ('"rules_id" bigint GENERATED ALWAYS AS (CASE WHEN category IN '
            "('world_model_rule_content') THEN canonical_key::bigint END) STORED") in text
    assert ('ADD CONSTRAINT "world_agent_canonical_refs_rules_id_fkey" FOREIGN KEY ("rules_id") '
            'REFERENCES "worlds"."rules" ("id")') in text


@pytest.mark.parametrize(("entries", "message"), [
    ("- {category: a, defense: trigram_trigger, canonical_source: rules.body}",
     "is not schema.table.column"),
    ("- {category: a, defense: trigram_trigger, canonical_source: w.rules.body}\n"
     "    - {category: b, canonical_source: w.rules.other, canonical_key: code}",
     "must name its rows by one column"),
    ("- {category: a, defense: trigram_trigger}", "needs canonical_source"),
])
def test_canonical_sources_are_checked(tmp_path: Path, entries: str, message: str) -> None:
    text = (ROOT / "agents" / "spectral_agent.yaml").read_text(encoding="utf-8")
    start = text.index("\n  non_mirror:") + 1
    end = text.index("\n  sanitization:") + 1
    path = tmp_path / "spec.yaml"
    path.write_text(text[:start] + "  non_mirror:\n    " + entries + "\n" + text[end:],
                    encoding="utf-8")
    with pytest.raises(SpecError, match=message):
        load_spec(path)
