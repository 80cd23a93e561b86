"""Shared by the non-mirror tests: canonical rule texts, copies of them and a real note, a
spec template guarding them, and a platform table holding them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from primitives.spec import AgentSpec, load_spec

RULE_12 = ("When a unit is attacked in melee, the defender rolls two six-sided dice and adds "
           "its armour value; if the total is lower than the attacker's strength, the defender "
           "loses one wound and must retreat one hex toward its own table edge.")
RULE_7 = ("Scouts may move through woods without penalty and can see over hedges, but they "
          "cannot hold an objective marker at the end of a turn.")
NEAR_COPY = ("When a unit is attacked in close combat, the defender rolls two d6 and adds its "
             "armour value; if the total is below the attacker's strength, the defender loses a "
             "wound and must retreat one hex toward its table edge.")
EMBEDDED = ("Reminder for the operators of this world, pasted here so we have it at hand: "
            + NEAR_COPY + " Three disputes about this came up in last week's sessions, and "
            "the operators asked for it to be pinned somewhere visible in the operator chat, "
            "next to the scoring sheet and the list of scenario packs they currently run.")
REAL_NOTE = ("Operators of this world keep asking how retreats after melee work: answer by "
             "opening rule 12 through the rules tool, not from memory, and point out that "
             "armour counts toward the defender's roll.")

_SPEC = """\
version: 1
agent: {agent}
anchor:
  keys: [world_id]
  required_at_write: [world_id]
typology:
  scratch: [episodic]
  session: [episodic]
  world: [semantic, procedural]
tiers:
  - name: scratch
    boundary: {{lifecycle: interaction_end}}
  - name: session
    boundary: {{lifecycle: session_end}}
  - name: world
    boundary: {{scope_change: world_id}}
    persistent: true
persistence:
  store: {{schema: nm_tests, prefix: {agent}}}
retrieval:
  signals: [lexical, recency]
behavior:
  write_policy:
    semantic:
      mode: explicit
      justification: the tests write facts directly
discipline:
  non_mirror:
    - category: rule_content
      canonical_source: {source}
      canonical_version: version
      defense: {defense}
      backstop: [{backstop}]
      similarity_threshold: {threshold}
    - {{category: scan_traces, defense: reference_only}}
"""


def canonical_table(admin_conn: psycopg.Connection[Any]) -> Iterator[str]:
    """For a fixture: a platform table of canonical rule texts (``schema.table``), readable and referable
    by the owner role, holding rules 7 and 12 at version 1."""
    schema = f"canon_{uuid.uuid4().hex[:8]}"
    admin_conn.execute(sql.SQL(
        "CREATE SCHEMA {s}; CREATE TABLE {s}.rules (id integer PRIMARY KEY, "
        "body_text text NOT NULL, version integer NOT NULL DEFAULT 1); "
        "CREATE INDEX ON {s}.rules USING gin (body_text gin_trgm_ops); "
        "GRANT USAGE ON SCHEMA {s} TO primitives_owner; "
        "GRANT SELECT, REFERENCES ON {s}.rules TO primitives_owner").format(
            s=sql.Identifier(schema)))
    admin_conn.execute(sql.SQL("INSERT INTO {} (id, body_text) VALUES (7, %s), (12, %s)").format(
        sql.Identifier(schema, "rules")), (RULE_7, RULE_12))
    yield f"{schema}.rules"
    admin_conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def make_spec(tmp_path: Path, source: str, *, threshold: float = 0.6,
              defense: str = "trigram_trigger", backstop: str = "") -> AgentSpec:
    agent = f"nm{uuid.uuid4().hex[:8]}"
    path = tmp_path / f"{agent}.yaml"
    path.write_text(_SPEC.format(agent=agent, source=f"{source}.body_text", threshold=threshold,
                                 defense=defense, backstop=backstop), encoding="utf-8")
    return load_spec(path)
