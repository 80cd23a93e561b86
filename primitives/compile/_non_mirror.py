"""Non-mirror discipline in the database: the trigram guard and canonical references.

The guard is a BEFORE INSERT trigger on ``<prefix>_memories``, compiled from the spec's
``discipline.non_mirror`` entries whose defense or backstop is ``trigram_trigger``. For each
one it reads the canonical table and refuses the row (SQLSTATE ``PM005``) when
``word_similarity(canonical text, content)`` reaches the entry's ``similarity_threshold``,
naming the category, the canonical source and the matching row's key. Every insert passes
through it: the engine's writes, the one-round-trip observe, boundary compounding, promotion
and a raw ``INSERT`` of the application role alike.

Which rows it reads: those the ``%`` operator selects at ``threshold / (PADDING + 1)``
(the function sets ``pg_trgm.similarity_threshold`` while it runs, and turns sequential
scans off for itself: the planner prices ``%`` like a cheap operator and would read a small
canonical table whole, where each row's trigrams cost tens of microseconds), so a GIN ``gin_trgm_ops``
index on the canonical column serves the guard; ``word_similarity`` is computed for those
rows only. A copy padded to more than ``PADDING`` times the canonical text's length is not
found (see :data:`PADDING`).

Why ``word_similarity`` with the canonical text first: it measures how much of the canonical
text appears, in one stretch, in the note. A verbatim or near copy scores close to 1 whether
or not the note wraps it in words of its own, where ``similarity`` of the whole note falls
as the note grows (``tests/integration/test_non_mirror.py`` shows both). A note that only
names or quotes a few words of a rule scores low.

The canonical table belongs to the platform, not to this memory, and may not exist when the
plan is applied: the trigger looks it up (``to_regclass``) on each insert and compares
nothing until it exists. The functions run as the owner role (SECURITY DEFINER, fixed
``search_path``), so the application role needs no grant on the canonical table and cannot
read it through them beyond a refusal's key.

``<prefix>_canonical_refs`` holds a memory's references to canonical rows: the category, the
row's key and the version it was written against (the version column's value, or the sha256
of the canonical text when the entry names no version column). Its foreign key to the
memories table always exists; one to the canonical table exists when the table does, with a
unique key on its key column the owner may reference (``Capabilities.canonical_keys``): a
stored generated column of the key's type per canonical table carries it.
"""

from __future__ import annotations

from psycopg import sql

from primitives.compile._capabilities import Capabilities
from primitives.compile._ddl import (
    TEXT,
    UUID,
    Column,
    Constraint,
    Index,
    TableDef,
    Trigger,
    check,
    foreign_key,
    in_list,
    primary_key,
)
from primitives.compile._names import APP_ROLE, MAINTAINER_ROLE, Tables
from primitives.spec import AgentSpec, NonMirror

__all__ = [
    "NON_MIRROR_SQLSTATE",
    "PADDING",
    "canonical_fk_column",
    "canonical_refs_table",
    "canonical_version_function",
    "guard_function",
    "guard_functions",
    "guard_trigger",
    "guarded",
]

NON_MIRROR_SQLSTATE = "PM005"
"""The guard's refusal: a write copies canonical text."""

PADDING = 2
"""How much longer than the canonical text a copying note may be and still be found: the
guard reads only the canonical rows whose ``similarity`` with the note reaches
``threshold / (PADDING + 1)`` (the ``%`` operator, which a GIN ``gin_trgm_ops`` index on the
canonical column serves), and ``word_similarity(canonical, note) >= threshold`` implies that
bound whenever the note has at most ``PADDING`` times the canonical text's trigrams (a
verbatim copy is found in a note of up to ``(PADDING + 1) / threshold`` times them). A lower
bound would let more padding through the search, but trigram similarity at that level no
longer tells unrelated texts apart, and the index then selects nearly every row
(``python -m bench.non_mirror``)."""


def guarded(spec: AgentSpec, capabilities: Capabilities) -> tuple[NonMirror, ...]:
    """The entries the trigram guard enforces (none without pg_trgm)."""
    if not capabilities.trigram:
        return ()
    return tuple(item for item in spec.discipline.non_mirror if item.trigram_guarded)


def guard_function(tables: Tables) -> sql.Identifier:
    """``<schema>.<prefix>_non_mirror_guard()``: the memories table's guard trigger function."""
    return sql.Identifier(tables.schema, tables.object_name("non_mirror_guard"))


def canonical_version_function(tables: Tables) -> sql.Identifier:
    """``<schema>.<prefix>_canonical_version(text, text[])``: the current version of
    canonical rows of one category, by key."""
    return sql.Identifier(tables.schema, tables.object_name("canonical_version"))


def _source(item: NonMirror) -> tuple[sql.Identifier, sql.Literal]:
    table = item.canonical_table
    assert table is not None
    return sql.Identifier(*table), sql.Literal(".".join(table))


_CHECK = sql.SQL("""\
    IF pg_catalog.to_regclass({table_name}) IS NOT NULL THEN
        SELECT m.k, m.s INTO hit_key, hit_similarity
        FROM (SELECT c.{key}::text AS k, {trgm}.word_similarity(c.{column}, NEW.content) AS s
              FROM {table} AS c
              WHERE c.{column} OPERATOR({trgm}.%) NEW.content) AS m
        WHERE m.s >= {threshold}
        ORDER BY m.s DESC, m.k
        LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION USING
                ERRCODE = {sqlstate},
                MESSAGE = format('non-mirror: this write copies canonical text of category '
                                 '%s: row %s of %s is %s similar (threshold %s); write a note '
                                 'that references the row instead of copying it',
                                 {category_literal}, hit_key, {source_literal},
                                 round(hit_similarity::numeric, 2), {threshold}),
                DETAIL = pg_catalog.json_build_object(
                    'category', {category_literal}, 'canonical_source', {source_literal},
                    'canonical_key', hit_key,
                    'similarity', round(hit_similarity::numeric, 3),
                    'threshold', {threshold})::text,
                SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME;
        END IF;
    END IF;
""")


def _guard_body(items: tuple[NonMirror, ...], capabilities: Capabilities) -> sql.Composed:
    checks = []
    for item in items:
        table, name = _source(item)
        assert item.canonical_column is not None and item.canonical_source is not None
        checks.append(_CHECK.format(
            table_name=name, table=table, key=sql.Identifier(item.canonical_key),
            column=sql.Identifier(item.canonical_column),
            trgm=sql.Identifier(capabilities.trigram_schema),
            threshold=sql.Literal(item.similarity_threshold),
            sqlstate=sql.Literal(NON_MIRROR_SQLSTATE),
            category_literal=sql.Literal(item.category),
            source_literal=sql.Literal(item.canonical_source)))
    return sql.Composed(checks)


_GUARD = sql.SQL("""\
CREATE OR REPLACE FUNCTION {function}() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $fn$
DECLARE
    hit_key        text;
    hit_similarity real;
    threshold_was  text;
BEGIN
    -- the % operator below selects the candidate rows at this threshold (a refusal aborts
    -- the statement, which undoes the setting; otherwise it is put back before returning)
    PERFORM {trgm}.similarity('', '');  -- loads pg_trgm, whose setting this is
    threshold_was := pg_catalog.current_setting('pg_trgm.similarity_threshold');
    PERFORM pg_catalog.set_config('pg_trgm.similarity_threshold', {candidates}, true);
{checks}    PERFORM pg_catalog.set_config('pg_trgm.similarity_threshold', threshold_was, true);
    RETURN NEW;
END
$fn$""")


def guard_functions(spec: AgentSpec, tables: Tables, capabilities: Capabilities
                    ) -> tuple[tuple[str, sql.Composed], ...]:
    """The guard trigger function (SECURITY DEFINER: it reads the canonical tables as the
    owner role) and its revoke from PUBLIC; empty when nothing is guarded."""
    items = guarded(spec, capabilities)
    if not items:
        return ()
    function = guard_function(tables)
    label = f"non-mirror guard {tables.schema}.{tables.object_name('non_mirror_guard')}"
    candidates = min(item.similarity_threshold for item in items) / (PADDING + 1)
    return (
        (f"{label} (SECURITY DEFINER)",
         _GUARD.format(function=function, checks=_guard_body(items, capabilities),
                       trgm=sql.Identifier(capabilities.trigram_schema),
                       candidates=sql.Literal(str(round(candidates, 4))))),
        (f"{label}: not callable by PUBLIC",
         sql.SQL("REVOKE ALL ON FUNCTION {}() FROM PUBLIC").format(function)),
    )


def guard_trigger(spec: AgentSpec, tables: Tables, capabilities: Capabilities
                  ) -> tuple[Trigger, ...]:
    """``primitives_non_mirror_guard`` BEFORE INSERT on the memories table, when guarded."""
    if not guarded(spec, capabilities):
        return ()
    return (Trigger("primitives_non_mirror_guard", "BEFORE", "INSERT", "ROW",
                    guard_function(tables)),)


def _version_expression(item: NonMirror) -> sql.Composed:
    if item.canonical_version is not None:
        return sql.SQL("c.{}::text").format(sql.Identifier(item.canonical_version))
    assert item.canonical_column is not None
    return sql.SQL("'sha256:' || pg_catalog.encode(pg_catalog.sha256("
                   "pg_catalog.convert_to(c.{}, 'UTF8')), 'hex')").format(
        sql.Identifier(item.canonical_column))


_VERSION_BRANCH = sql.SQL("""\
    IF $1 = {category} AND pg_catalog.to_regclass({table_name}) IS NOT NULL THEN
        RETURN QUERY SELECT c.{key}::text, {version} FROM {table} AS c
                     WHERE c.{key}::text = ANY ($2);
    END IF;
""")

_VERSION = sql.SQL("""\
CREATE OR REPLACE FUNCTION {function}(text, text[])
RETURNS TABLE (canonical_key text, canonical_version text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
{branches}    RETURN;
END
$fn$""")


def _sourced(spec: AgentSpec) -> tuple[NonMirror, ...]:
    return tuple(item for item in spec.discipline.non_mirror if item.canonical_source)


def version_functions(spec: AgentSpec, tables: Tables) -> tuple[tuple[str, sql.Composed], ...]:
    """``<prefix>_canonical_version(category, keys)``: (key, current version) of the
    category's canonical rows with those keys; nothing for a category without a canonical
    source or whose table does not exist. Executable by the app and maintainer roles."""
    function = canonical_version_function(tables)
    branches = []
    for item in _sourced(spec):
        table, name = _source(item)
        branches.append(_VERSION_BRANCH.format(
            category=sql.Literal(item.category), table_name=name, table=table,
            key=sql.Identifier(item.canonical_key), version=_version_expression(item)))
    signature = sql.SQL("{}(text, text[])").format(function)
    label = f"function {tables.schema}.{tables.object_name('canonical_version')}"
    return (
        (f"{label} (SECURITY DEFINER)",
         _VERSION.format(function=function, branches=sql.Composed(branches))),
        (f"{label}: not callable by PUBLIC",
         sql.SQL("REVOKE ALL ON FUNCTION {} FROM PUBLIC").format(signature)),
        *((f"{label}: callable by {role}",
           sql.SQL("GRANT EXECUTE ON FUNCTION {} TO {}").format(signature, sql.Identifier(role)))
          for role in (APP_ROLE, MAINTAINER_ROLE)),
    )


def canonical_fk_column(item: NonMirror) -> str:
    """The generated column of the references table holding a key of ``item``'s canonical
    table in the key's own type: ``<table>_<key>``."""
    table = item.canonical_table
    assert table is not None
    return f"{table[1]}_{item.canonical_key}"


def _canonical_fks(spec: AgentSpec, tables: Tables, capabilities: Capabilities
                   ) -> tuple[list[Column], list[tuple[str, sql.Composed]]]:
    """Per canonical table the server has (and may be referenced): the generated key column
    and the statement that (re)creates its foreign key."""
    referable = dict(capabilities.canonical_keys)
    refs = tables.canonical_refs
    assert refs is not None
    columns: list[Column] = []
    steps: list[tuple[str, sql.Composed]] = []
    seen: set[tuple[str, str]] = set()
    for item in _sourced(spec):
        table = item.canonical_table
        assert table is not None
        key_type = referable.get(".".join(table))
        if key_type is None or table in seen:
            continue
        seen.add(table)
        categories = [i.category for i in _sourced(spec) if i.canonical_table == table]
        name = canonical_fk_column(item)
        columns.append(Column(name, sql.SQL(key_type), added=True, generated=sql.SQL(
            "CASE WHEN category IN ({}) THEN canonical_key::{} END").format(
                in_list(categories), sql.SQL(key_type))))
        constraint = tables.object_name(f"canonical_refs_{name}_fkey")
        steps.append((f"foreign key {constraint} to {'.'.join(table)}", sql.SQL(
            "ALTER TABLE {refs} DROP CONSTRAINT IF EXISTS {name}, ADD CONSTRAINT {name} "
            "FOREIGN KEY ({column}) REFERENCES {table} ({key})").format(
                refs=refs.ident, name=sql.Identifier(constraint), column=sql.Identifier(name),
                table=sql.Identifier(*table), key=sql.Identifier(item.canonical_key))))
    return columns, steps


def canonical_refs_table(spec: AgentSpec, tables: Tables, capabilities: Capabilities
                         ) -> TableDef:
    """``<prefix>_canonical_refs``: a memory row's references to canonical rows, each pinned
    to the version it was written against. The app role inserts and reads; nothing updates
    or deletes a reference (a transient row removed at its scope's end takes its references
    with it: ON DELETE CASCADE)."""
    refs = tables.canonical_refs
    assert refs is not None
    t, name = tables.tenant_column, tables.object_name
    fk_columns, fk_steps = _canonical_fks(spec, tables, capabilities)
    columns = (
        Column(t, TEXT, not_null=True),
        Column("memory_id", UUID, not_null=True),
        Column("category", TEXT, not_null=True),
        Column("canonical_key", TEXT, not_null=True),
        Column("canonical_version", TEXT, not_null=True),
        Column("created_at", sql.SQL("timestamptz"), not_null=True, default=sql.SQL("now()")),
        Column("actor", TEXT),
        *fk_columns,
    )
    categories = [item.category for item in spec.discipline.non_mirror]
    constraints: tuple[Constraint, ...] = (
        primary_key(name("canonical_refs_pkey"), (t, "memory_id", "category", "canonical_key")),
        foreign_key(name("canonical_refs_memory_fkey"), (t, "memory_id"), tables.memories,
                    (t, "id"), on_delete_cascade=True),
        check(name("canonical_refs_category_check"),
              sql.SQL("category IN ({})").format(in_list(categories))),
        check(name("canonical_refs_bounds_check"),
              sql.SQL("char_length(canonical_key) <= {limit} AND "
                      "char_length(canonical_version) <= {limit}").format(
                  limit=sql.Literal(spec.persistence.store.limits.key_chars))),
    )
    return TableDef(
        table=refs,
        columns=columns,
        constraints=constraints,
        indexes=(Index(name("canonical_refs_key_idx"), "btree",
                       (sql.Identifier(t), sql.Identifier("category"),
                        sql.Identifier("canonical_key")), t),),
        app_privileges=("SELECT", "INSERT"),
        comment=(
            f"References of agent '{tables.agent}' memory rows to canonical rows (non-mirror: "
            "notes reference canonical text instead of copying it), each pinned to the "
            "version it was written against; journalled as canonical_referenced events."
        ),
        functions=(*version_functions(spec, tables), *fk_steps),
    )

