"""What the server holds of a spec's non-mirror canonical sources: the catalog probe that
``migrate`` and ``doctor`` share.

The canonical tables belong to the platform. A missing one is not an error: the guard
compares nothing until it exists and references to it carry no foreign key, and ``migrate``
says so (run it again once the platform creates the table: the plan then gains the foreign
key). What would make writes fail (a missing text column, an owner role that may not read
the table) is said too, since the guard then refuses every write.
"""

from __future__ import annotations

from typing import Any, Final

import psycopg

from primitives.compile import Capabilities
from primitives.compile._names import OWNER_ROLE
from primitives.spec import AgentSpec

__all__ = ["canonical_problems"]

_PROBE: Final = """
SELECT c.oid IS NOT NULL,
       t.attnum IS NOT NULL,
       pg_catalog.format_type(k.atttypid, k.atttypmod),
       c.oid IS NOT NULL AND pg_catalog.has_table_privilege(%(owner)s, c.oid, 'SELECT'),
       k.attnum IS NOT NULL AND pg_catalog.has_column_privilege(%(owner)s, c.oid, k.attnum,
                                                                'REFERENCES'),
       EXISTS (SELECT 1 FROM pg_catalog.pg_index AS i
               WHERE i.indrelid = c.oid AND i.indisunique AND i.indpred IS NULL
                 AND i.indnkeyatts = 1 AND i.indkey[0] = k.attnum),
       v.attnum IS NOT NULL,
       EXISTS (SELECT 1 FROM pg_catalog.pg_index AS i
               JOIN pg_catalog.pg_opclass AS o ON o.oid = i.indclass[0]
               WHERE i.indrelid = c.oid AND i.indkey[0] = t.attnum AND i.indpred IS NULL
                 AND o.opcname IN ('gin_trgm_ops', 'gist_trgm_ops'))
FROM (SELECT 1) AS one
LEFT JOIN pg_catalog.pg_namespace AS n ON n.nspname = %(schema)s
LEFT JOIN pg_catalog.pg_class AS c ON c.relnamespace = n.oid AND c.relname = %(table)s
                                   AND c.relkind IN ('r', 'p')
LEFT JOIN pg_catalog.pg_attribute AS t ON t.attrelid = c.oid AND t.attname = %(column)s
                                       AND NOT t.attisdropped
LEFT JOIN pg_catalog.pg_attribute AS k ON k.attrelid = c.oid AND k.attname = %(key)s
                                       AND NOT k.attisdropped
LEFT JOIN pg_catalog.pg_attribute AS v ON v.attrelid = c.oid AND v.attname = %(version)s
                                       AND NOT v.attisdropped
"""


def canonical_problems(conn: psycopg.Connection[Any], spec: AgentSpec, caps: Capabilities
                       ) -> tuple[tuple[tuple[str, str], ...], list[str]]:
    """``(canonical_keys, warnings)``: the spec's canonical tables a reference may point to
    with a foreign key (``schema.table``, key type), and one warning per problem found."""
    keys: dict[str, str] = {}
    notes: list[str] = []
    for item in spec.discipline.non_mirror:
        if item.canonical_source is None:
            continue
        where = (f"agent {spec.agent}: non-mirror category {item.category} "
                 f"(canonical source {item.canonical_source})")
        if item.trigram_guarded and not caps.trigram:
            notes.append(f"{where}: pg_trgm is not installed on this server, so its trigram "
                         "guard is off: writes are not compared with the canonical text")
        schema, table = item.canonical_table or ("", "")
        row = conn.execute(_PROBE, {
            "owner": OWNER_ROLE, "schema": schema, "table": table,
            "column": item.canonical_column, "key": item.canonical_key,
            "version": item.canonical_version or ""}).fetchone()
        assert row is not None
        exists, has_column, key_type, readable, referable, unique, has_version, _ = row
        if not exists:
            notes.append(f"{where}: table {schema}.{table} does not exist yet; the guard "
                         "compares nothing and references carry no foreign key to it until "
                         "it does (migrate again once the platform creates it)")
            continue
        if not has_column:
            notes.append(f"{where}: {schema}.{table} has no column {item.canonical_column}; "
                         "the guard refuses every write until it does")
        if not readable:
            notes.append(f"{where}: the owner role {OWNER_ROLE} may not read {schema}.{table}; "
                         f"GRANT SELECT ON {schema}.{table} TO {OWNER_ROLE}, or the guard "
                         "refuses every write")
        if item.canonical_version is not None and not has_version:
            notes.append(f"{where}: {schema}.{table} has no version column "
                         f"{item.canonical_version}; references cannot pin a version")
        if key_type is None or not unique:
            notes.append(f"{where}: {schema}.{table} has no unique key on "
                         f"{item.canonical_key} alone; references carry no foreign key to it")
        elif not referable:
            notes.append(f"{where}: the owner role {OWNER_ROLE} may not reference "
                         f"{schema}.{table} ({item.canonical_key}); GRANT REFERENCES to it "
                         "for references to carry a foreign key")
        else:
            keys[f"{schema}.{table}"] = key_type
    return tuple(sorted(keys.items())), notes
