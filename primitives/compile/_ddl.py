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
    "add_columns_sql",
    "bounds_constraint_name",
    "bounds_function_name",
    "bounds_function_sql",
    "bounds_grant_sql",
    "bounds_revoke_sql",
    "bounds_signature",
    "check",
    "column_sql",
    "columns_sql",
    "comment_sql",
    "create_index_sql",
    "create_table_sql",
    "create_trigger_sql",
    "drop_index_sql",
    "drop_superseded_indexes_sql",
    "foreign_key",
    "in_list",
    "primary_key",
    "replace_checks_one_by_one",
    "replace_checks_sql",
    "validate_checks_sql",
]

Privilege = Literal["SELECT", "INSERT"]
"""Table-level privileges the app role may hold. Never UPDATE, DELETE or TRUNCATE: any of
them lets a session LOCK the whole table in every mode, and every tenant waits. Updates are
granted column by column (:attr:`TableDef.app_update_columns`), which LOCK TABLE ignores;
deletes run in SECURITY DEFINER functions (:mod:`primitives.compile._definer`)."""

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
    added: bool = False
    """Added after the table first shipped: plans also add it to an existing table."""


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
    """A named table constraint. ``columns`` are the key columns (empty for a CHECK);
    ``expression`` is a CHECK's condition (its body is ``CHECK (expression)``)."""

    name: str
    kind: Literal["primary_key", "unique", "foreign_key", "check"]
    body: sql.Composable
    columns: tuple[str, ...] = ()
    expression: sql.Composable | None = None


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
    return Constraint(name, "check", sql.SQL("CHECK ({})").format(expression),
                      expression=expression)


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
    supersedes_prefix: str | None = None
    """Every other index of the same table whose name starts with this is an earlier
    definition of this one (an index that follows the spec, its name carrying a digest of its
    definition): dropped before it is built."""


@dataclass(frozen=True)
class Trigger:
    """A row or statement trigger that runs one of the framework's functions."""

    name: str
    timing: Literal["BEFORE"]
    events: str
    """``INSERT``, ``DELETE``, ``UPDATE OR DELETE``, ``TRUNCATE``, ``INSERT OR UPDATE OF a, b``"""
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
    app_privileges: tuple[Privilege, ...] = ("SELECT", "INSERT")
    app_update_columns: tuple[str, ...] = ()
    """The columns the engine's UPDATE statements (and ``ON CONFLICT DO UPDATE``) set: the
    app role's only UPDATE grant, never the tenant column or the key."""
    comment: str = ""
    functions: tuple[tuple[str, sql.Composed], ...] = ()
    """``(label, CREATE OR REPLACE FUNCTION ...)`` created before the triggers that call them."""
    retired_indexes: tuple[tuple[str, str], ...] = ()
    """``(name, why)`` of indexes an earlier plan built and this one no longer wants: dropped
    if there, so an upgraded database stops paying for them on every write."""
    retired_triggers: tuple[tuple[str, str], ...] = ()
    """``(name, why)`` of triggers an earlier plan may have made and this spec does not
    declare: dropped if there, so a removed declaration stops acting."""
    bounds: tuple[str, ...] = ()
    """When set, the columns the table's CHECK constraints read: the checks are then
    evaluated by one compiled function (:func:`bounds_function_sql`) under one constraint
    (:func:`replace_checks_sql`), for a table written on every observation."""

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


def add_columns_sql(table: TableDef) -> sql.Composed | None:
    """``ALTER TABLE ... ADD COLUMN IF NOT EXISTS`` for the columns marked ``added``: a table
    created by an earlier plan gains them when the current plan is applied (``CREATE TABLE IF
    NOT EXISTS`` leaves an existing table as it is). None when no column is marked."""
    added = [c for c in table.columns if c.added]
    if not added:
        return None
    return sql.SQL("ALTER TABLE {} {}").format(table.table.ident, sql.SQL(", ").join(
        sql.SQL("ADD COLUMN IF NOT EXISTS {}").format(column_sql(c)) for c in added))


def replace_checks_sql(table: TableDef, *, not_valid: bool = False) -> sql.Composed | None:
    """One ``ALTER TABLE`` that drops and re-adds every CHECK constraint of the table.

    One statement, so the existing rows are validated in a single scan, and a row that
    violates the new definition makes the whole plan fail rather than leave the table
    without its checks. ``None`` when the table has no CHECK constraint. A table with
    ``bounds`` gets one constraint that calls its bounds function instead; the separate
    constraints an earlier plan made are dropped.

    ``not_valid``: the constraints are added ``NOT VALID`` (enforced for new rows at once,
    no scan under the statement's ACCESS EXCLUSIVE lock); :func:`validate_checks_sql`
    then checks the existing rows after the plan commits, under a lock that lets readers
    and writers through.
    """
    subcommands = _check_subcommands(table, not_valid=not_valid)
    if not subcommands:
        return None
    return sql.SQL("ALTER TABLE {}\n    {}").format(table.table.ident, _INDENT.join(subcommands))


def replace_checks_one_by_one(table: TableDef, *, not_valid: bool = False) -> list[sql.Composed]:
    """The subcommands of :func:`replace_checks_sql`, each an ``ALTER TABLE`` of its own, in
    the same order (the drops, then the adds): Citus refuses ``ADD CONSTRAINT`` beside other
    subcommands on a distributed table, as every table is when a changed plan is applied
    again to a cluster."""
    return [sql.SQL("ALTER TABLE {} {}").format(table.table.ident, subcommand)
            for subcommand in _check_subcommands(table, not_valid=not_valid)]


def _check_subcommands(table: TableDef, *, not_valid: bool) -> list[sql.Composed]:
    checks = [c for c in table.constraints if c.kind == "check"]
    if not checks:
        return []
    names = [c.name for c in checks]
    if table.bounds:
        names.append(bounds_constraint_name(table.table))
        call = sql.SQL("CHECK ({}({}))").format(
            _bounds_function(table.table), columns_sql(table.bounds))
        added: list[tuple[str, sql.Composable]] = [(bounds_constraint_name(table.table), call)]
    else:
        added = [(c.name, c.body) for c in checks]
    drops = [sql.SQL("DROP CONSTRAINT IF EXISTS {}").format(sql.Identifier(n)) for n in names]
    suffix = sql.SQL(" NOT VALID" if not_valid else "")
    adds = [sql.SQL("ADD CONSTRAINT {} {}{}").format(sql.Identifier(name), body, suffix)
            for name, body in added]
    return drops + adds


def validate_checks_sql(table: TableDef) -> sql.Composed | None:
    """``ALTER TABLE ... VALIDATE CONSTRAINT``: the existing rows against the CHECKs that
    :func:`replace_checks_sql` added ``NOT VALID`` (SHARE UPDATE EXCLUSIVE: reads and writes
    go on during the scan)."""
    names = [c.name for c in table.constraints if c.kind == "check"]
    if not names:
        return None
    if table.bounds:
        names = [bounds_constraint_name(table.table)]
    return sql.SQL("ALTER TABLE {}\n    {}").format(table.table.ident, _INDENT.join(
        sql.SQL("VALIDATE CONSTRAINT {}").format(sql.Identifier(n)) for n in names))


def bounds_function_name(table: Table) -> str:
    """``<table>_bounds``: the function that evaluates a table's CHECK constraints."""
    return f"{table.name}_bounds"


def bounds_constraint_name(table: Table) -> str:
    """``<table>_bounds_check``: the one CHECK constraint that calls it."""
    return f"{table.name}_bounds_check"


def _bounds_function(table: Table) -> sql.Identifier:
    return sql.Identifier(table.schema, bounds_function_name(table))


def _bounds_types(table: TableDef) -> list[sql.Composable]:
    types = {c.name: c.type for c in table.columns}
    return [types[name] for name in table.bounds]


def bounds_signature(table: TableDef) -> sql.Composed:
    """``"schema"."<table>_bounds"(text, ...)``, for grants."""
    return sql.SQL("{}({})").format(_bounds_function(table.table),
                                     sql.SQL(", ").join(_bounds_types(table)))


def bounds_function_sql(table: TableDef) -> sql.Composed:
    """``CREATE OR REPLACE FUNCTION <table>_bounds(<the columns the checks read>)``.

    PostgreSQL reads each CHECK constraint of a table back from its stored text and plans it
    at every statement that writes the table; a PL/pgSQL function plans its expression
    once per session. The function is true when every check holds (a check that is NULL
    holds, as for a constraint); otherwise it raises ``check_violation`` as PostgreSQL would
    for the first broken constraint, under that constraint's own name and message, so
    errors read as they did with separate constraints. IMMUTABLE: it reads its arguments
    only.
    """
    checks = [c for c in table.constraints if c.kind == "check"]
    missing = [c.name for c in checks if c.expression is None]
    if missing or not table.bounds:
        raise ValueError(f"{table.table.qualified}: bounds need every CHECK's expression "
                         f"and the columns they read (missing: {missing})")
    conditions = [sql.SQL("({})").format(c.expression) for c in checks]
    raises = [
        sql.SQL(
            "    IF {condition} IS FALSE THEN\n"
            "        RAISE EXCEPTION USING ERRCODE = 'check_violation', SCHEMA = {schema},\n"
            "            TABLE = {table}, CONSTRAINT = {name},\n"
            "            MESSAGE = {message};\n"
            "    END IF;\n"
        ).format(
            condition=condition, schema=sql.Literal(table.table.schema),
            table=sql.Literal(table.table.name), name=sql.Literal(c.name),
            message=sql.Literal(f'new row for relation "{table.table.name}" violates check '
                                f'constraint "{c.name}"'),
        )
        for c, condition in zip(checks, conditions, strict=True)
    ]
    arguments = sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(name), kind)
        for name, kind in zip(table.bounds, _bounds_types(table), strict=True))
    body = sql.SQL(
        "BEGIN\n"
        "    -- every bound at once: one expression, the common case\n"
        "    IF ({all}) IS NOT FALSE THEN\n"
        "        RETURN true;\n"
        "    END IF;\n"
        "    -- a bound is broken: fail as its own constraint would\n"
        "{raises}"
        "    RETURN true;\n"
        "END\n"
    ).format(all=sql.SQL("\n        AND ").join(conditions), raises=sql.Composed(raises))
    if "$bounds$" in body.as_string(None):  # a spec literal cannot end the quoted body
        raise ValueError(f"{table.table.qualified}: a CHECK holds the text $bounds$")
    return sql.SQL(
        "CREATE OR REPLACE FUNCTION {function}({arguments}) RETURNS boolean\n"
        "LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE\n"
        "AS $bounds$\n{body}$bounds$"
    ).format(function=_bounds_function(table.table), arguments=arguments, body=body)


def bounds_revoke_sql(table: TableDef) -> sql.Composed:
    return sql.SQL("REVOKE ALL ON FUNCTION {} FROM PUBLIC").format(bounds_signature(table))


def bounds_grant_sql(table: TableDef, role: str) -> sql.Composed:
    """``GRANT EXECUTE``: whoever writes the table evaluates its constraint."""
    return sql.SQL("GRANT EXECUTE ON FUNCTION {} TO {}").format(
        bounds_signature(table), sql.Identifier(role))


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


def drop_superseded_indexes_sql(table: Table, prefix: str, keep: str) -> sql.Composed:
    """Drop every index of ``table`` whose name starts with ``prefix``, except ``keep``."""
    return sql.SQL(
        "DO $fn$ DECLARE r record; BEGIN "
        "FOR r IN SELECT c.relname FROM pg_catalog.pg_index AS i "
        "JOIN pg_catalog.pg_class AS c ON c.oid = i.indexrelid "
        "WHERE i.indrelid = to_regclass({table}) AND starts_with(c.relname, {prefix}) "
        "AND c.relname <> {keep} "
        "LOOP EXECUTE format('DROP INDEX IF EXISTS %I.%I', {schema}, r.relname); END LOOP; "
        "END $fn$").format(
        table=sql.Literal(table.ident.as_string(None)), prefix=sql.Literal(prefix),
        keep=sql.Literal(keep), schema=sql.Literal(table.schema))


def drop_index_sql(table: Table, name: str) -> sql.Composed:
    """``DROP INDEX IF EXISTS`` of an index in the table's schema."""
    return sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(table.schema, name))


def drop_trigger_sql(table: Table, name: str) -> sql.Composed:
    """``DROP TRIGGER IF EXISTS`` on the table."""
    return sql.SQL("DROP TRIGGER IF EXISTS {} ON {}").format(sql.Identifier(name), table.ident)


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
