"""DDL building blocks: table, column, constraint, index and trigger definitions and their SQL.

Definitions are plain frozen data so tests can inspect them (which column leads an index,
which columns are generated); each ``*_sql`` function renders one idempotent statement.

>>> from primitives.compile._names import Table
>>> col = Column("content", sql.SQL("text"), not_null=True)
>>> column_sql(col).as_string(None)
'"content" text NOT NULL'
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from psycopg import sql

from primitives.compile._names import Table

__all__ = [
    "BIGINT",
    "BOOLEAN",
    "EMPTY_JSONB",
    "EMPTY_TEXT_ARRAY",
    "INTEGER",
    "JSONB",
    "NOW",
    "RANDOM_UUID",
    "REAL",
    "TEXT",
    "TEXT_ARRAY",
    "TIMESTAMPTZ",
    "UUID",
    "Column",
    "Constraint",
    "Index",
    "Privilege",
    "TableDef",
    "Trigger",
    "check",
    "column_sql",
    "columns_sql",
    "comment_sql",
    "create_index_sql",
    "create_table_sql",
    "create_trigger_sql",
    "drop_index_sql",
    "foreign_key",
    "in_list",
    "primary_key",
    "replace_checks_sql",
]

Privilege = Literal["SELECT", "INSERT", "UPDATE", "DELETE"]

TEXT = sql.SQL("text")
TEXT_ARRAY = sql.SQL("text[]")
UUID = sql.SQL("uuid")
TIMESTAMPTZ = sql.SQL("timestamptz")
JSONB = sql.SQL("jsonb")
BOOLEAN = sql.SQL("boolean")
REAL = sql.SQL("real")
INTEGER = sql.SQL("integer")
BIGINT = sql.SQL("bigint")
NOW = sql.SQL("now()")
RANDOM_UUID = sql.SQL("gen_random_uuid()")
EMPTY_JSONB = sql.SQL("'{}'::jsonb")
EMPTY_TEXT_ARRAY = sql.SQL("'{}'::text[]")


def columns_sql(names: Iterable[str]) -> sql.Composed:
    """``"a", "b", "c"``."""
    return sql.SQL(", ").join(sql.Identifier(n) for n in names)


def in_list(values: Iterable[str]) -> sql.Composed:
    """``'a', 'b'``: string literals for an ``IN (...)`` check."""
    return sql.SQL(", ").join(sql.Literal(v) for v in values)


@dataclass(frozen=True)
class Column:
    """One column. ``generated`` is the expression of a ``GENERATED ALWAYS AS (...) STORED``."""

    name: str
    type: sql.Composable
    not_null: bool = False
    default: sql.Composable | None = None
    generated: sql.Composable | None = None


def column_sql(column: Column) -> sql.Composed:
    parts: list[sql.Composable] = [sql.Identifier(column.name), column.type]
    if column.generated is not None:
        parts.append(sql.SQL("GENERATED ALWAYS AS ({}) STORED").format(column.generated))
    if column.not_null:
        parts.append(sql.SQL("NOT NULL"))
    if column.default is not None:
        parts.append(sql.SQL("DEFAULT {}").format(column.default))
    return sql.SQL(" ").join(parts)


@dataclass(frozen=True)
class Constraint:
    """A named table constraint. ``columns`` are the key columns (empty for a CHECK)."""

    name: str
    kind: Literal["primary_key", "unique", "foreign_key", "check"]
    body: sql.Composable
    columns: tuple[str, ...] = ()


def primary_key(name: str, columns: Sequence[str]) -> Constraint:
    body = sql.SQL("PRIMARY KEY ({})").format(columns_sql(columns))
    return Constraint(name, "primary_key", body, tuple(columns))


def foreign_key(
    name: str,
    columns: Sequence[str],
    references: Table,
    ref_columns: Sequence[str],
    *,
    on_delete_cascade: bool = False,
) -> Constraint:
    body = sql.SQL("FOREIGN KEY ({}) REFERENCES {} ({})").format(
        columns_sql(columns), references.ident, columns_sql(ref_columns)
    )
    if on_delete_cascade:
        body = sql.Composed([body, sql.SQL(" ON DELETE CASCADE")])
    return Constraint(name, "foreign_key", body, tuple(columns))


def check(name: str, expression: sql.Composable) -> Constraint:
    return Constraint(name, "check", sql.SQL("CHECK ({})").format(expression))


@dataclass(frozen=True)
class Index:
    """An index. ``elements`` are column identifiers or expressions, each with its opclass.

    ``leading`` names the first key column (``None`` when the index does not start with a
    plain column, e.g. an HNSW index on the embedding).
    """

    name: str
    method: Literal["btree", "gin", "hnsw"]
    elements: tuple[sql.Composable, ...]
    leading: str | None
    unique: bool = False
    where: sql.Composable | None = None
    replaces: str | None = None
    """An index of the same table this one supersedes: dropped (if there) before it is built."""


@dataclass(frozen=True)
class Trigger:
    """A row or statement trigger that runs one of the framework's functions."""

    name: str
    timing: Literal["BEFORE"]
    events: Literal["INSERT", "DELETE", "UPDATE OR DELETE", "TRUNCATE"]
    level: Literal["ROW", "STATEMENT"]
    function: sql.Identifier
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableDef:
    """Everything the plan creates for one table, and the privileges of the app role on it."""

    table: Table
    columns: tuple[Column, ...]
    constraints: tuple[Constraint, ...]
    indexes: tuple[Index, ...] = ()
    triggers: tuple[Trigger, ...] = ()
    app_privileges: tuple[Privilege, ...] = ("SELECT", "INSERT", "UPDATE")
    comment: str = ""
    functions: tuple[tuple[str, sql.Composed], ...] = ()
    """``(label, CREATE OR REPLACE FUNCTION ...)`` created before the triggers that call them."""
    retired_indexes: tuple[tuple[str, str], ...] = ()
    """``(name, why)`` of indexes an earlier plan built and this one no longer wants: dropped
    if there, so an upgraded database stops paying for them on every write."""

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def generated_columns(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.generated is not None)

    @property
    def primary_key(self) -> tuple[str, ...]:
        return next(c.columns for c in self.constraints if c.kind == "primary_key")


_INDENT = sql.SQL(",\n    ")


def create_table_sql(table: TableDef) -> sql.Composed:
    """``CREATE TABLE IF NOT EXISTS`` with its columns and key constraints.

    CHECK constraints come separately from :func:`replace_checks_sql`, so that they follow
    the spec (a new tier, a new limit) when a changed plan is re-applied to an existing table.
    """
    items = [column_sql(c) for c in table.columns]
    items += [
        sql.SQL("CONSTRAINT {} {}").format(sql.Identifier(c.name), c.body)
        for c in table.constraints
        if c.kind != "check"
    ]
    return sql.SQL("CREATE TABLE IF NOT EXISTS {} (\n    {}\n)").format(
        table.table.ident, _INDENT.join(items)
    )


def replace_checks_sql(table: TableDef) -> sql.Composed | None:
    """One ``ALTER TABLE`` that drops and re-adds every CHECK constraint of the table.

    One statement, so the existing rows are validated in a single scan, and a row that
    violates the new definition makes the whole plan fail rather than leave the table
    without its checks. ``None`` when the table has no CHECK constraint.
    """
    checks = [c for c in table.constraints if c.kind == "check"]
    if not checks:
        return None
    drops = [sql.SQL("DROP CONSTRAINT IF EXISTS {}").format(sql.Identifier(c.name))
             for c in checks]
    adds = [sql.SQL("ADD CONSTRAINT {} {}").format(sql.Identifier(c.name), c.body)
            for c in checks]
    return sql.SQL("ALTER TABLE {}\n    {}").format(table.table.ident, _INDENT.join(drops + adds))


def create_index_sql(table: Table, index: Index) -> sql.Composed:
    """``CREATE [UNIQUE] INDEX IF NOT EXISTS`` (index names live in the table's schema)."""
    head = sql.SQL("CREATE UNIQUE INDEX" if index.unique else "CREATE INDEX")
    statement = sql.SQL("{} IF NOT EXISTS {} ON {} USING {} ({})").format(
        head,
        sql.Identifier(index.name),
        table.ident,
        sql.SQL(index.method),
        sql.SQL(", ").join(index.elements),
    )
    if index.where is not None:
        statement = sql.Composed([statement, sql.SQL(" WHERE "), index.where])
    return statement


def drop_index_sql(table: Table, name: str) -> sql.Composed:
    """``DROP INDEX IF EXISTS`` of an index in the table's schema."""
    return sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(table.schema, name))


def create_trigger_sql(table: Table, trigger: Trigger) -> sql.Composed:
    """``CREATE OR REPLACE TRIGGER`` (PostgreSQL 14+)."""
    return sql.SQL(
        "CREATE OR REPLACE TRIGGER {} {} {} ON {} FOR EACH {} EXECUTE FUNCTION {}({})"
    ).format(
        sql.Identifier(trigger.name),
        sql.SQL(trigger.timing),
        sql.SQL(trigger.events),
        table.ident,
        sql.SQL(trigger.level),
        trigger.function,
        in_list(trigger.args),
    )


def comment_sql(relation: Table, text: str) -> sql.Composed:
    """``COMMENT ON TABLE|VIEW ... IS '...'``."""
    kind = sql.SQL("VIEW" if relation.kind == "view" else "TABLE")
    return sql.SQL("COMMENT ON {} {} IS {}").format(kind, relation.ident, sql.Literal(text))
