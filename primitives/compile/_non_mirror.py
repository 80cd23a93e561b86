"""Non-mirror discipline in the database: the trigram guard and canonical references.

The guard is a BEFORE INSERT trigger on ``<prefix>_memories``, compiled from the spec's
``discipline.non_mirror`` entries with a canonical source whose defense or backstop is
``trigram_trigger`` or ``reference_only`` (the text may only be referenced, never copied). For each
one it reads the canonical table and refuses the row (SQLSTATE ``PM005``) when
``word_similarity(canonical text, content)`` reaches the entry's ``similarity_threshold``,
naming the category, the canonical source and the matching row's key. Every insert passes
through it: the engine's writes, the one-round-trip observe, boundary compounding, promotion
and a raw ``INSERT`` of the application role alike.

Which rows it compares (``word_similarity`` costs tens of microseconds per row): the guard
keeps its own index of the canonical texts. ``<prefix>_canonical_postings`` holds each
canonical row's hashed word 3-shingles (:func:`shingle_function`: three consecutive
lower-cased alphanumeric words; a text of fewer than three words is one shingle) under a
btree, and ``<prefix>_canonical_indexed`` the row version they were taken from (the row's
``xmin``); ``<prefix>_canonical_signatures`` holds each row's word signature (its
:data:`SIGNATURE_WORDS` rarest words, :func:`signatures_table`). A write compares the rows
sharing a shingle with the note, the rows whose signature the note's words nearly cover (a
copy with its words reordered keeps no shingle but every word), and every row not indexed at
its current version (new, or changed since the last refresh), so the guard is never staler
than the canonical table; the refresh (:func:`refresh_function`, run by migrate and by
``primitives maintain``) only saves work. A copy is found when it keeps three consecutive
words of a canonical text, however much the note pads it, or nearly all of its signature
words in any order; a note that reuses a rule's words without three of them in a row and
misses a quarter of its signature is compared only while that row is unindexed (the guard is
for copies, not for notes on the same subject). What is left per write grows
with the canonical table far more slowly: the freshness check (a hash join over its keys and
row versions, no trigram work).

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
from primitives.compile._names import APP_ROLE, MAINTAINER_ROLE, OWNER_ROLE, Tables
from primitives.spec import AgentSpec, NonMirror

__all__ = [
    "NON_MIRROR_SQLSTATE",
    "canonical_fk_column",
    "canonical_refs_table",
    "canonical_version_function",
    "guard_function",
    "guard_functions",
    "guard_trigger",
    "guarded",
    "indexed_table",
    "postings_table",
    "refresh_function",
    "shingle_function",
    "signatures_table",
    "words_function",
]

NON_MIRROR_SQLSTATE = "PM005"
"""The guard's refusal: a write copies canonical text."""

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
        FROM (SELECT d.k, {trgm}.word_similarity(d.body, NEW.content) AS s
              FROM (SELECT c.{key}::text AS k, c.{column} AS body
                    FROM {table} AS c
                    LEFT JOIN {rows} AS x
                      ON x.category = {category_literal} AND x.canonical_key = c.{key}::text
                     AND x.row_version = {version}
                    WHERE x.canonical_key IS NULL
                       OR x.canonical_key IN (
                          SELECT p.canonical_key FROM {postings} AS p
                          WHERE p.category = {category_literal}
                            AND p.shingle = ANY(note_shingles))
                       OR x.canonical_key IN (
                          SELECT g.canonical_key FROM {signatures} AS g
                          WHERE g.category = {category_literal}
                            AND g.word = ANY(note_words)
                          GROUP BY g.canonical_key, g.size
                          HAVING count(*) >= g.size - g.size / 4)
                    OFFSET 0) AS d) AS m
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


def _row_version(item: NonMirror, *, citus: bool) -> sql.Composable:
    """What the guard's index records as a canonical row's version: its ``xmin`` on one
    node; on a Citus cluster, where every node holds its own copy of the canonical table
    (each row with an ``xmin`` of that node), the md5 of its text."""
    if not citus:
        return sql.SQL("c.xmin::text")
    assert item.canonical_column is not None
    return sql.SQL("pg_catalog.md5(c.{})").format(sql.Identifier(item.canonical_column))


def _guard_body(items: tuple[NonMirror, ...], capabilities: Capabilities,
                tables: Tables, *, citus: bool = False) -> sql.Composed:
    rows, postings = indexed_table(tables), postings_table(tables)
    signatures = signatures_table(tables)
    checks = []
    for item in items:
        table, name = _source(item)
        assert item.canonical_column is not None and item.canonical_source is not None
        checks.append(_CHECK.format(
            table_name=name, table=table, key=sql.Identifier(item.canonical_key),
            column=sql.Identifier(item.canonical_column),
            version=_row_version(item, citus=citus),
            trgm=sql.Identifier(capabilities.trigram_schema),
            threshold=sql.Literal(item.similarity_threshold),
            sqlstate=sql.Literal(NON_MIRROR_SQLSTATE), rows=rows, postings=postings,
            signatures=signatures, category_literal=sql.Literal(item.category),
            source_literal=sql.Literal(item.canonical_source)))
    return sql.Composed(checks)


_GUARD = sql.SQL("""\
CREATE OR REPLACE FUNCTION {function}() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    hit_key        text;
    hit_similarity real;
    note_shingles  integer[];
    note_words     integer[];
BEGIN
    -- the canonical rows compared: those sharing a word shingle with the note (the postings
    -- index), those whose word signature the words of the note nearly cover (a copy with its
    -- words reordered), and every row not indexed as it is now (new, or changed since the
    -- last refresh: its xmin differs), so a refresh only ever saves work
    note_shingles := {shingle_fn}(NEW.content);
    note_words := {words_fn}(NEW.content);
{checks}    RETURN NEW;
END
$fn$""")

_SHINGLES = sql.SQL("""\
CREATE OR REPLACE FUNCTION {function}(text) RETURNS integer[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce(
        array_agg(DISTINCT hashtext(w.a[i] || ' ' || w.a[i + 1] || ' ' || w.a[i + 2]))
            FILTER (WHERE i IS NOT NULL),
        ARRAY[hashtext(array_to_string(w.a, ' '))])
    FROM (SELECT array_remove(regexp_split_to_array(lower($1), '[^[:alnum:]]+'), '') AS a) AS w
    LEFT JOIN generate_series(1, cardinality(w.a) - 2) AS i ON true
    GROUP BY w.a
$fn$""")


SIGNATURE_WORDS = 8
"""How many words a canonical row's signature keeps: its ``SIGNATURE_WORDS`` distinct words of
four or more characters that the fewest rows of the canonical table hold when it is indexed
(ties by hash), so the words a note shares with many rules find few signatures."""

_WORDS = sql.SQL("""\
CREATE OR REPLACE FUNCTION {function}(text) RETURNS integer[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce(array_agg(DISTINCT hashtext(w) ORDER BY hashtext(w)), '{{}}')
    FROM unnest(regexp_split_to_array(lower($1), '[^[:alnum:]]+')) AS w
    WHERE char_length(w) >= 4
$fn$""")


def words_function(tables: Tables) -> sql.Identifier:
    """``<schema>.<prefix>_words(text)``: the sorted hashes of a text's distinct lower-cased
    alphanumeric words of four or more characters (shorter ones are mostly function words,
    found in every text)."""
    return sql.Identifier(tables.schema, tables.object_name("words"))


def signatures_table(tables: Tables) -> sql.Identifier:
    """``<schema>.<prefix>_canonical_signatures``: (category, word hash, key, size) of each
    canonical row's word signature (its :data:`SIGNATURE_WORDS` rarest words, ``size`` of
    them), btree indexed by word. A write compares a row whose signature words it holds at
    least ``size - size / 4`` of: a copy with its words reordered keeps no word 3-shingle but
    every word."""
    return sql.Identifier(tables.schema, tables.object_name("canonical_signatures"))


def shingle_function(tables: Tables) -> sql.Identifier:
    """``<schema>.<prefix>_shingles(text)``: the hashed word 3-shingles of a text (three
    consecutive lower-cased alphanumeric words; a text of fewer than three words is one)."""
    return sql.Identifier(tables.schema, tables.object_name("shingles"))


_REFRESH_BRANCH = sql.SQL("""\
    IF pg_catalog.to_regclass({table_name}) IS NOT NULL THEN
        DELETE FROM {rows} AS x WHERE x.category = {category}
           AND NOT EXISTS (SELECT 1 FROM {table} AS c WHERE c.{key}::text = x.canonical_key
                           AND c.xmin::text = x.row_version);
        GET DIAGNOSTICS n = ROW_COUNT;
        changed := changed + n;
        DELETE FROM {postings} AS p WHERE p.category = {category}
           AND NOT EXISTS (SELECT 1 FROM {rows} AS x WHERE x.category = {category}
                           AND x.canonical_key = p.canonical_key);
        DELETE FROM {signatures} AS g WHERE g.category = {category}
           AND NOT EXISTS (SELECT 1 FROM {rows} AS x WHERE x.category = {category}
                           AND x.canonical_key = g.canonical_key);
        WITH fresh AS (
            SELECT c.{key}::text AS k, c.xmin::text AS v, c.{column} AS body FROM {table} AS c
            WHERE NOT EXISTS (SELECT 1 FROM {rows} AS x WHERE x.category = {category}
                              AND x.canonical_key = c.{key}::text)),
        indexed AS (
            INSERT INTO {rows} (category, canonical_key, row_version)
            SELECT {category}, f.k, f.v FROM fresh AS f
            RETURNING 1),
        posted AS (
            INSERT INTO {postings} (category, shingle, canonical_key)
            SELECT DISTINCT {category}, g.h, f.k
            FROM fresh AS f CROSS JOIN LATERAL unnest({shingle_fn}(f.body)) AS g(h)
            RETURNING 1)
        SELECT count(*) + 0 * (SELECT count(*) FROM posted) INTO n FROM indexed;
        changed := changed + n;
        -- word signatures of the rows without one (those just indexed, and any indexed
        -- before signatures were kept): the rarest words of each among the canonical rows
        IF EXISTS (SELECT 1 FROM {table} AS c
                   WHERE NOT EXISTS (SELECT 1 FROM {signatures} AS o
                                     WHERE o.category = {category}
                                       AND o.canonical_key = c.{key}::text)) THEN
            INSERT INTO {signatures} (category, word, canonical_key, size)
            WITH words AS (
                SELECT c.{key}::text AS k, w.h,
                       NOT EXISTS (SELECT 1 FROM {signatures} AS o
                                   WHERE o.category = {category}
                                     AND o.canonical_key = c.{key}::text) AS todo
                FROM {table} AS c CROSS JOIN LATERAL unnest({words_fn}(c.{column})) AS w(h)),
            df AS (SELECT h, count(*) AS n FROM words GROUP BY h),
            ranked AS (
                SELECT w.k, w.h, row_number() OVER (PARTITION BY w.k ORDER BY d.n, w.h) AS r
                FROM words AS w JOIN df AS d ON d.h = w.h WHERE w.todo)
            SELECT {category}, r.h, r.k, count(*) OVER (PARTITION BY r.k)
            FROM ranked AS r WHERE r.r <= {signature_words};
        END IF;
    ELSE
        DELETE FROM {rows} AS x WHERE x.category = {category};
        GET DIAGNOSTICS n = ROW_COUNT;
        changed := changed + n;
        DELETE FROM {postings} AS p WHERE p.category = {category};
        DELETE FROM {signatures} AS g WHERE g.category = {category};
    END IF;
""")

_REFRESH_BRANCH_CITUS = sql.SQL("""\
    IF pg_catalog.to_regclass({table_name}) IS NOT NULL THEN
        keys := '{{}}'; versions := '{{}}'; bodies := '{{}}';
        SELECT array_agg(c.{key}::text), array_agg({version}), array_agg(c.{column})
        INTO keys, versions, bodies FROM {table} AS c;
        keys := coalesce(keys, '{{}}'); versions := coalesce(versions, '{{}}');
        bodies := coalesce(bodies, '{{}}');
        DELETE FROM {rows} AS x WHERE x.category = {category}
           AND NOT EXISTS (SELECT 1 FROM unnest(keys, versions) AS c(k, v)
                           WHERE c.k = x.canonical_key AND c.v = x.row_version);
        GET DIAGNOSTICS n = ROW_COUNT;
        changed := changed + n;
        DELETE FROM {postings} AS p WHERE p.category = {category}
           AND NOT EXISTS (SELECT 1 FROM {rows} AS x WHERE x.category = {category}
                           AND x.canonical_key = p.canonical_key);
        DELETE FROM {signatures} AS g WHERE g.category = {category}
           AND NOT EXISTS (SELECT 1 FROM {rows} AS x WHERE x.category = {category}
                           AND x.canonical_key = g.canonical_key);
        SELECT array_agg(f.k), array_agg(f.v), array_agg(f.body) INTO fresh_keys, fresh_versions, fresh_bodies
        FROM unnest(keys, versions, bodies) AS f(k, v, body)
        WHERE NOT EXISTS (SELECT 1 FROM {rows} AS x WHERE x.category = {category}
                          AND x.canonical_key = f.k);
        n := coalesce(cardinality(fresh_keys), 0);
        IF n > 0 THEN
            INSERT INTO {rows} (category, canonical_key, row_version)
            SELECT {category}, f.k, f.v FROM unnest(fresh_keys, fresh_versions) AS f(k, v);
            INSERT INTO {postings} (category, shingle, canonical_key)
            SELECT DISTINCT {category}, g.h, f.k
            FROM unnest(fresh_keys, fresh_bodies) AS f(k, body)
            CROSS JOIN LATERAL unnest({shingle_fn}(f.body)) AS g(h);
        END IF;
        changed := changed + n;
        -- word signatures of the rows without one, as on one node
        SELECT array_agg(f.k) INTO fresh_keys FROM unnest(keys) AS f(k)
        WHERE NOT EXISTS (SELECT 1 FROM {signatures} AS o
                          WHERE o.category = {category} AND o.canonical_key = f.k);
        IF fresh_keys IS NOT NULL THEN
            INSERT INTO {signatures} (category, word, canonical_key, size)
            WITH words AS (
                SELECT c.k, w.h, c.k = ANY(fresh_keys) AS todo
                FROM unnest(keys, bodies) AS c(k, body)
                CROSS JOIN LATERAL unnest({words_fn}(c.body)) AS w(h)),
            df AS (SELECT h, count(*) AS n FROM words GROUP BY h),
            ranked AS (
                SELECT w.k, w.h, row_number() OVER (PARTITION BY w.k ORDER BY d.n, w.h) AS r
                FROM words AS w JOIN df AS d ON d.h = w.h WHERE w.todo)
            SELECT {category}, r.h, r.k, count(*) OVER (PARTITION BY r.k)
            FROM ranked AS r WHERE r.r <= {signature_words};
        END IF;
    ELSE
        DELETE FROM {rows} AS x WHERE x.category = {category};
        GET DIAGNOSTICS n = ROW_COUNT;
        changed := changed + n;
        DELETE FROM {postings} AS p WHERE p.category = {category};
        DELETE FROM {signatures} AS g WHERE g.category = {category};
    END IF;
""")
"""The refresh of one category on a Citus cluster: the canonical rows are read once, into
arrays, and the statements that write the guard's index read those: Citus locks every
reference table that a statement writing a reference table reads, for writing, which the
owner role may not do on the platform's canonical table. Row versions are the md5 of the
text (:func:`_row_version`)."""

_REFRESH_CITUS_DECLARE = sql.SQL("""    keys           text[];
    versions       text[];
    bodies         text[];
    fresh_keys     text[];
    fresh_versions text[];
    fresh_bodies   text[];
""")

_REFRESH = sql.SQL("""\
CREATE OR REPLACE FUNCTION {function}() RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    changed bigint := 0;
    n       bigint;
{declare}BEGIN
    -- one refresh at a time (migrate and maintain may meet); the tables have no unique key
    -- (they are not tenant tables, and every key of this schema leads with the tenant)
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext({lock}));
{branches}    RETURN changed;
END
$fn$""")


def indexed_table(tables: Tables) -> sql.Identifier:
    """``<schema>.<prefix>_canonical_indexed``: per canonical row (category, key) the row
    version (its ``xmin``) the guard's postings were taken from."""
    return sql.Identifier(tables.schema, tables.object_name("canonical_indexed"))


def postings_table(tables: Tables) -> sql.Identifier:
    """``<schema>.<prefix>_canonical_postings``: (category, hashed word 3-shingle, key) of
    each indexed canonical row, btree indexed by shingle."""
    return sql.Identifier(tables.schema, tables.object_name("canonical_postings"))


def refresh_function(tables: Tables) -> sql.Identifier:
    """``<schema>.<prefix>_refresh_canonical_index()``: bring the guard's index up to date
    with the canonical tables (rows gone or changed dropped, new ones indexed); returns how
    many rows' entries changed. Run by migrate and ``primitives maintain``."""
    return sql.Identifier(tables.schema, tables.object_name("refresh_canonical_index"))


def _index_steps(items: tuple[NonMirror, ...], tables: Tables, capabilities: Capabilities,
                 *, citus: bool = False) -> tuple[tuple[str, sql.Composed], ...]:
    rows, postings = indexed_table(tables), postings_table(tables)
    signatures = signatures_table(tables)
    label = f"{tables.schema}.{tables.object_name('canonical_postings')}"
    signed = f"{tables.schema}.{tables.object_name('canonical_signatures')}"
    refresh = refresh_function(tables)
    refresh_label = f"refresh function {tables.object_name('refresh_canonical_index')}"
    branches = []
    for item in items:
        source, name = _source(item)
        assert item.canonical_column is not None
        branches.append((_REFRESH_BRANCH_CITUS if citus else _REFRESH_BRANCH).format(
            table_name=name, table=source, key=sql.Identifier(item.canonical_key),
            version=_row_version(item, citus=citus),
            column=sql.Identifier(item.canonical_column), rows=rows, postings=postings,
            signatures=signatures, category=sql.Literal(item.category),
            shingle_fn=shingle_function(tables), words_fn=words_function(tables),
            signature_words=sql.Literal(SIGNATURE_WORDS)))
    return (
        (f"shingle function {tables.schema}.{tables.object_name('shingles')}",
         _SHINGLES.format(function=shingle_function(tables))),
        (f"{tables.schema}.{tables.object_name('canonical_indexed')}: the guard's index of "
         "canonical rows (owner only)", sql.SQL(
             "CREATE TABLE IF NOT EXISTS {} (category text NOT NULL, "
             "canonical_key text NOT NULL, row_version text NOT NULL)").format(rows)),
        (f"{tables.schema}.{tables.object_name('canonical_indexed')}: by key", sql.SQL(
            "CREATE INDEX IF NOT EXISTS {} ON {} (category, canonical_key)").format(
                sql.Identifier(tables.object_name("canonical_indexed_key_idx")), rows)),
        (f"{label}: the canonical rows' prefix trigrams (owner only)", sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (category text NOT NULL, shingle integer NOT NULL, "
            "canonical_key text NOT NULL)").format(postings)),
        (f"{label}: by shingle", sql.SQL(
            "CREATE INDEX IF NOT EXISTS {} ON {} (category, shingle, canonical_key)").format(
                sql.Identifier(tables.object_name("canonical_postings_shingle_idx")), postings)),
        (f"words function {tables.schema}.{tables.object_name('words')}",
         _WORDS.format(function=words_function(tables))),
        (f"{signed}: the canonical rows' word signatures (owner only)", sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (category text NOT NULL, word integer NOT NULL, "
            "canonical_key text NOT NULL, size integer NOT NULL)").format(signatures)),
        (f"{signed}: by word", sql.SQL(
            "CREATE INDEX IF NOT EXISTS {} ON {} (category, word, canonical_key, size)").format(
                sql.Identifier(tables.object_name("canonical_signatures_word_idx")),
                signatures)),
        (f"{label}: no access but the owner's functions",
         sql.SQL("REVOKE ALL ON TABLE {}, {}, {} FROM PUBLIC").format(rows, postings,
                                                                      signatures)),
        *((f"{tables.schema}.{table_name}: row-level security "
           f"{'on, not forced (the owner copies into it on a cluster)' if citus else 'forced'}"
           f", the owner's policy only ({n})", statement.format(
               t=table, p=sql.Identifier(tables.object_name("guard_owner")),
               owner=sql.Identifier(OWNER_ROLE)))
          for table_name, table in (("canonical_indexed", rows),
                                    ("canonical_postings", postings),
                                    ("canonical_signatures", signatures))
          for n, statement in enumerate((
              sql.SQL("ALTER TABLE {t} ENABLE ROW LEVEL SECURITY, NO FORCE ROW LEVEL SECURITY")
              if citus else
              sql.SQL("ALTER TABLE {t} ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY"),
              sql.SQL("DROP POLICY IF EXISTS {p} ON {t}"),
              sql.SQL("CREATE POLICY {p} ON {t} FOR ALL TO {owner} USING (true) "
                      "WITH CHECK (true)")), start=1)),
        (f"{refresh_label} (SECURITY DEFINER)",
         _REFRESH.format(function=refresh, branches=sql.Composed(branches),
                         declare=_REFRESH_CITUS_DECLARE if citus else sql.SQL(""),
                         lock=sql.Literal(f"{tables.schema}.{tables.object_name('refresh_canonical_index')}"))),
        (f"{refresh_label}: not callable by PUBLIC",
         sql.SQL("REVOKE ALL ON FUNCTION {}() FROM PUBLIC").format(refresh)),
        (f"{refresh_label}: callable by the maintainer",
         sql.SQL("GRANT EXECUTE ON FUNCTION {}() TO {}").format(
             refresh, sql.Identifier(MAINTAINER_ROLE))),
        (f"{label}: index the canonical rows there are now",
         sql.SQL("SELECT {}()").format(refresh)),
    )


def guard_functions(spec: AgentSpec, tables: Tables, capabilities: Capabilities, *,
                    citus: bool = False) -> tuple[tuple[str, sql.Composed], ...]:
    """The guard trigger function (SECURITY DEFINER: it reads the canonical tables as the
    owner role) and its revoke from PUBLIC; empty when nothing is guarded. ``citus``: the
    forms a Citus cluster runs (row versions and the refresh: :data:`_REFRESH_BRANCH_CITUS`),
    with the same titles."""
    items = guarded(spec, capabilities)
    if not items:
        return ()
    function = guard_function(tables)
    label = f"non-mirror guard {tables.schema}.{tables.object_name('non_mirror_guard')}"
    return (
        *_index_steps(items, tables, capabilities, citus=citus),
        (f"{label} (SECURITY DEFINER)",
         _GUARD.format(function=function,
                       checks=_guard_body(items, capabilities, tables, citus=citus),
                       shingle_fn=shingle_function(tables), words_fn=words_function(tables))),
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

