"""A full-text match operator row-level security lets an index serve.

Under row-level security PostgreSQL evaluates a query's own conditions after the policy's,
unless their functions are marked ``LEAKPROOF`` (they reveal nothing about the rows they
see). The built-in ``tsvector @@ tsquery`` is not so marked, so for the application role a
GIN index on the stored tsvector cannot serve the lexical signal: every row of the tenant
is read and tested. :func:`ensure_text_match` installs, once per database and only as a
superuser (PostgreSQL lets no one else declare a function leakproof):

- ``primitives.ts_match(tsvector, tsquery)``: the built-in match function (``ts_match_vq``)
  declared ``LEAKPROOF``. It answers true or false and raises no error that depends on the
  row, so it leaks nothing the policy hides;
- the operator ``primitives.@@`` over it, with the built-in selectivity estimators;
- the GIN operator class ``primitives.tsvector_match_ops``: the built-in ``tsvector_ops``
  support functions under that operator.

Agent plans compiled for a database that has them build the full-text index with that
operator class, and the engine's lexical signal matches with ``OPERATOR(primitives.@@)``
(it checks the index at connect). Without them (no superuser ever migrated) everything
works as before, scanning the tenant's rows.

Example::

    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        state = ensure_text_match(conn)   # "installed", "present" or "not superuser"
"""

from __future__ import annotations

from typing import Any, Literal

import psycopg

from primitives.db._migrate import DDL_XACT_LOCK

__all__ = ["TEXT_MATCH_OPCLASS", "TEXT_MATCH_OPERATOR", "ensure_text_match", "has_text_match"]

TEXT_MATCH_OPCLASS = "primitives.tsvector_match_ops"
"""The GIN operator class for ``tsvector`` columns built on the leakproof match."""
TEXT_MATCH_OPERATOR = "OPERATOR(primitives.@@)"
"""How statements write the leakproof match (``tsv OPERATOR(primitives.@@) query``)."""

_PRESENT = """
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_opclass c
               JOIN pg_catalog.pg_namespace n ON n.oid = c.opcnamespace
               JOIN pg_catalog.pg_am a ON a.oid = c.opcmethod
               WHERE n.nspname = 'primitives' AND c.opcname = 'tsvector_match_ops'
                 AND a.amname = 'gin')
"""

# Fixed text: nothing in it comes from a spec or a user.
_INSTALL = """
CREATE OR REPLACE FUNCTION primitives.ts_match(tsvector, tsquery) RETURNS boolean
    LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF AS 'ts_match_vq';
COMMENT ON FUNCTION primitives.ts_match(tsvector, tsquery) IS
    'tsvector @@ tsquery, declared leakproof so that row-level security lets a GIN index serve it';
DO $op$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_operator o
                   JOIN pg_catalog.pg_namespace n ON n.oid = o.oprnamespace
                   WHERE n.nspname = 'primitives' AND o.oprname = '@@'
                     AND o.oprleft = 'tsvector'::regtype AND o.oprright = 'tsquery'::regtype) THEN
        CREATE OPERATOR primitives.@@ (
            LEFTARG = tsvector, RIGHTARG = tsquery, FUNCTION = primitives.ts_match,
            RESTRICT = tsmatchsel, JOIN = tsmatchjoinsel);
    END IF;
END
$op$;
CREATE OPERATOR CLASS primitives.tsvector_match_ops FOR TYPE tsvector USING gin AS
    OPERATOR 1 primitives.@@ (tsvector, tsquery),
    FUNCTION 1 gin_cmp_tslexeme(text, text),
    FUNCTION 2 gin_extract_tsvector(tsvector, internal, internal),
    FUNCTION 3 gin_extract_tsquery(tsvector, internal, smallint, internal, internal, internal,
                                   internal),
    FUNCTION 4 gin_tsquery_consistent(internal, smallint, tsvector, integer, internal, internal,
                                      internal, internal),
    FUNCTION 5 gin_cmp_prefix(text, text, smallint, internal),
    FUNCTION 6 gin_tsquery_triconsistent(internal, smallint, tsvector, integer, internal,
                                         internal, internal),
    STORAGE text;
GRANT EXECUTE ON FUNCTION primitives.ts_match(tsvector, tsquery)
    TO primitives_owner, primitives_app, primitives_auditor;
-- Owned like the rest of the schema. The owner cannot turn it into a leaky function: only a
-- superuser may declare LEAKPROOF or write LANGUAGE internal, so a replacement loses both.
ALTER FUNCTION primitives.ts_match(tsvector, tsquery) OWNER TO primitives_owner;
ALTER OPERATOR primitives.@@ (tsvector, tsquery) OWNER TO primitives_owner;
ALTER OPERATOR FAMILY primitives.tsvector_match_ops USING gin OWNER TO primitives_owner;
ALTER OPERATOR CLASS primitives.tsvector_match_ops USING gin OWNER TO primitives_owner;
"""


def has_text_match(conn: psycopg.Connection[Any]) -> bool:
    """True when the database has the leakproof match operator class."""
    row = conn.execute(_PRESENT).fetchone()
    return bool(row and row[0])


def ensure_text_match(
    conn: psycopg.Connection[Any],
) -> Literal["installed", "present", "not superuser"]:
    """Install the leakproof match (one transaction) when missing and ``conn`` is a superuser.

    ``conn`` is an autocommit admin connection after the framework migrations (the
    ``primitives`` schema and roles exist).
    """
    if has_text_match(conn):
        return "present"
    row = conn.execute("SELECT rolsuper FROM pg_catalog.pg_roles "
                       "WHERE rolname = current_user").fetchone()
    if not (row and row[0]):
        return "not superuser"
    with conn.transaction():
        conn.execute(DDL_XACT_LOCK)  # two migrators: the second waits, then finds it present
        if has_text_match(conn):
            return "present"
        conn.execute(_INSTALL)
    return "installed"
