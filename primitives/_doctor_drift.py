"""``doctor``'s ``drift`` check: the live catalog against the plan the spec compiles into.

A plan re-applied with a changed checksum recreates what it owns, but a catalog changed by
hand since (a generated column's expression altered, a CHECK dropped or left NOT VALID, a
trigger dropped or disabled) goes unseen until a write misbehaves. For each table of the
plan this compares: the memories table's generated columns' expressions (PostgreSQL's own rendering, with
casts, quotes and parentheses set aside), each CHECK constraint (present and validated) and
each trigger (present and enabled).

Example::

    for check, obj, problem in drift_findings(conn, spec, plan):
        print(check, obj, problem)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Final

import psycopg

from primitives.compile import Plan
from primitives.compile._ddl import TableDef, bounds_constraint_name
from primitives.compile._tables import GENERATED_MEMORY_COLUMNS

__all__ = ["drift_findings"]

_GENERATED: Final = """
SELECT a.attname::text, pg_catalog.pg_get_expr(d.adbin, d.adrelid)
FROM pg_catalog.pg_attribute AS a
JOIN pg_catalog.pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = to_regclass(%s) AND a.attgenerated <> '' AND NOT a.attisdropped
"""
_CHECKS: Final = """
SELECT conname::text, convalidated FROM pg_catalog.pg_constraint
WHERE conrelid = to_regclass(%s) AND contype = 'c'
"""
_TRIGGERS: Final = """
SELECT tgname::text, tgenabled::text FROM pg_catalog.pg_trigger
WHERE tgrelid = to_regclass(%s) AND NOT tgisinternal
"""
_EXISTS: Final = "SELECT to_regclass(%s) IS NOT NULL"

_NOISE = re.compile(r"::[a-z_ ]+|[()\"\s]")


def _normal(expression: str) -> str:
    """An expression without casts, quotes, parentheses or spaces: ours and PostgreSQL's
    rendering of the same expression then read the same."""
    return _NOISE.sub("", expression)


def drift_findings(conn: psycopg.Connection[Any], plan: Plan) -> Iterator[tuple[str, str, str]]:
    """``("drift", object, problem)`` for each place the catalog no longer matches ``plan``."""
    for definition in plan.definitions:
        name = definition.table.qualified
        exists = conn.execute(_EXISTS, (name,)).fetchone()
        if exists is None or not exists[0]:
            continue  # a missing table is the `present` check's finding
        yield from _generated(conn, definition)
        yield from _checks(conn, definition)
        yield from _triggers(conn, definition)


def _generated(conn: psycopg.Connection[Any], definition: TableDef) -> Iterator[tuple[str, str, str]]:
    live = {str(column): str(expr) for column, expr in
            conn.execute(_GENERATED, (definition.table.qualified,)).fetchall()}
    for column in definition.columns:
        # the memories table's (persistent, tsv): simple expressions PostgreSQL renders back
        # as written; others (a CASE over IN lists) it rewrites, so they are not compared
        if column.generated is None or column.name not in GENERATED_MEMORY_COLUMNS:
            continue
        wanted = column.generated.as_string(None)
        found = live.get(column.name)
        if found is None:
            yield ("drift", f"table {definition.table.qualified}",
                   f"column {column.name} is not generated (the spec computes it as {wanted})")
        elif _normal(found) != _normal(wanted):
            yield ("drift", f"table {definition.table.qualified}",
                   f"generated column {column.name} is {found}; the spec's plan says {wanted}"
                   " (re-apply the plan: `primitives migrate`)")


def _checks(conn: psycopg.Connection[Any], definition: TableDef) -> Iterator[tuple[str, str, str]]:
    names = [c.name for c in definition.constraints if c.kind == "check"]
    if not names:
        return
    wanted = [bounds_constraint_name(definition.table)] if definition.bounds else names
    live = {str(n): bool(v) for n, v in
            conn.execute(_CHECKS, (definition.table.qualified,)).fetchall()}
    for name in wanted:
        if name not in live:
            yield ("drift", f"table {definition.table.qualified}",
                   f"CHECK constraint {name} is missing")
        elif not live[name]:
            yield ("drift", f"table {definition.table.qualified}",
                   f"CHECK constraint {name} is NOT VALID (existing rows were never checked)")


def _triggers(conn: psycopg.Connection[Any], definition: TableDef) -> Iterator[tuple[str, str, str]]:
    live = {str(n): str(state) for n, state in
            conn.execute(_TRIGGERS, (definition.table.qualified,)).fetchall()}
    for trigger in definition.triggers:
        state = live.get(trigger.name)
        if state is None:
            yield ("drift", f"table {definition.table.qualified}",
                   f"trigger {trigger.name} is missing")
        elif state not in ("O", "A"):
            yield ("drift", f"table {definition.table.qualified}",
                   f"trigger {trigger.name} is disabled")
