"""Pure SQL builders for the engine's statements (no I/O; values are bind parameters).

Every statement filters by the tenant column explicitly; row-level security is the backstop.
"""

from __future__ import annotations

from psycopg import sql

from primitives.compile import Tables
from primitives.engine._records import MEMORY_COLUMNS

__all__ = [
    "ACTIVE",
    "current_by_key",
    "insert_event",
    "insert_memory",
    "search_statement",
    "select_memory",
    "supersede",
]

ACTIVE = sql.SQL(
    "m.superseded_at IS NULL AND m.invalidated_at IS NULL AND m.archived_at IS NULL "
    "AND m.tombstoned_at IS NULL AND (m.expires_at IS NULL OR m.expires_at > now())"
)
"""Rows that retrieval may return (alias ``m``)."""

_WRITE_COLUMNS = (
    "id", "tier", "typology", "scope_id", "namespace", "key", "content", "value", "envelope", "tags",
    "provenance", "event_time", "source", "actor",
)


def _returning() -> sql.Composable:
    return sql.SQL(", ").join(sql.Identifier(c) for c in MEMORY_COLUMNS)


def _returning_m() -> sql.Composable:
    return sql.SQL(", ").join(sql.Identifier("m", c) for c in MEMORY_COLUMNS)


def insert_memory(tables: Tables, anchor_columns: tuple[str, ...]) -> sql.Composed:
    """INSERT one memory row; params: anchor values then ``_WRITE_COLUMNS`` by name."""
    columns = (*anchor_columns, *_WRITE_COLUMNS)
    return sql.SQL("INSERT INTO {} ({}) VALUES ({}) RETURNING {}").format(
        tables.memories.ident,
        sql.SQL(", ").join(sql.Identifier(c) for c in columns),
        sql.SQL(", ").join(sql.Placeholder(c) for c in columns),
        _returning(),
    )


def insert_event(tables: Tables) -> sql.Composed:
    """Append one journal event; the database fills seq, prev_hash and hash."""
    return sql.SQL(
        "INSERT INTO {} ({}, kind, memory_id, actor, payload) "
        "VALUES (%(tenant)s, %(kind)s, %(memory_id)s, %(actor)s, %(payload)s) RETURNING seq, hash"
    ).format(tables.events.ident, tables.tenant)


def current_by_key(tables: Tables) -> sql.Composed:
    """The current (unsuperseded, untombstoned) row of (tier, namespace, key), locked."""
    return sql.SQL(
        "SELECT {} FROM {} AS m WHERE m.{} = %(tenant)s AND m.tier = %(tier)s "
        "AND m.namespace = %(namespace)s AND m.key = %(key)s "
        "AND m.superseded_at IS NULL AND m.tombstoned_at IS NULL FOR UPDATE"
    ).format(_returning_m(), tables.memories.ident, tables.tenant)


def select_memory(tables: Tables) -> sql.Composed:
    return sql.SQL("SELECT {} FROM {} AS m WHERE m.{} = %(tenant)s AND m.id = %(id)s").format(
        _returning_m(), tables.memories.ident, tables.tenant
    )


def supersede(tables: Tables) -> sql.Composed:
    """Mark a row superseded by another; the row stays (soft-supersession)."""
    return sql.SQL(
        "UPDATE {} SET superseded_at = now(), superseded_by = %(by)s, updated_at = now() "
        "WHERE {} = %(tenant)s AND id = %(id)s AND superseded_at IS NULL"
    ).format(tables.memories.ident, tables.tenant)


def search_statement(tables: Tables, signals: tuple[str, ...]) -> sql.Composed:
    """One statement: a capped CTE per signal, fused by weighted reciprocal rank.

    Params: tenant, tiers (text[]), tier_weights (float[] aligned with tiers), query,
    config (regconfig name), envelope (jsonb), cap, k, weights per signal (``w_<signal>``),
    limit. Recency ranks the rows another signal matched; alone, it ranks every row.
    """
    base = sql.SQL("m.{} = %(tenant)s AND m.tier = ANY(%(tiers)s) AND {}").format(
        tables.tenant, ACTIVE
    )
    ctes: list[sql.Composable] = []
    matched: list[str] = []
    if "lexical" in signals:
        ctes.append(sql.SQL(
            "lexical AS (SELECT m.id, row_number() OVER (ORDER BY ts_rank_cd(m.tsv, q) DESC, "
            "m.id) AS rank FROM {} AS m, websearch_to_tsquery(%(config)s::regconfig, %(query)s) "
            "AS q WHERE {} AND m.tsv @@ q ORDER BY rank LIMIT %(cap)s)"
        ).format(tables.memories.ident, base))
        matched.append("lexical")
    if "envelope" in signals:
        ctes.append(sql.SQL(
            "envelope AS (SELECT m.id, row_number() OVER (ORDER BY m.event_time DESC, m.id) "
            "AS rank FROM {} AS m WHERE {} AND %(envelope)s::jsonb <> '{{}}'::jsonb "
            "AND m.envelope @> %(envelope)s::jsonb ORDER BY rank LIMIT %(cap)s)"
        ).format(tables.memories.ident, base))
        matched.append("envelope")
    if "recency" in signals:
        scope: sql.Composable = sql.SQL("TRUE")
        if matched:
            scope = sql.SQL("(%(query)s = '' AND %(envelope)s::jsonb = '{{}}'::jsonb "
                            "OR m.id IN ({}))").format(
                sql.SQL(" UNION ").join(
                    sql.SQL("SELECT id FROM {}").format(sql.Identifier(s)) for s in matched
                )
            )
        ctes.append(sql.SQL(
            "recency AS (SELECT m.id, row_number() OVER (ORDER BY m.event_time DESC, m.id) "
            "AS rank FROM {} AS m WHERE {} AND {} ORDER BY rank LIMIT %(cap)s)"
        ).format(tables.memories.ident, base, scope))
    used = [s for s in ("lexical", "envelope", "recency") if s in signals]
    ranked = sql.SQL(" UNION ALL ").join(
        sql.SQL("SELECT id, {} AS signal, rank FROM {}").format(sql.Literal(s), sql.Identifier(s))
        for s in used
    )
    weight = sql.SQL("CASE r.signal {} END").format(sql.SQL(" ").join(
        sql.SQL("WHEN {} THEN {}").format(sql.Literal(s), sql.Placeholder(f"w_{s}"))
        for s in used
    ))
    return sql.SQL(
        "WITH {ctes}, ranked AS ({ranked}), fused AS ("
        "SELECT r.id, sum({weight} / (%(k)s + r.rank)) AS score, "
        "jsonb_object_agg(r.signal, r.rank) AS ranks FROM ranked AS r GROUP BY r.id) "
        "SELECT {cols}, f.score * tw.weight AS score, f.ranks FROM fused AS f "
        "JOIN {mem} AS m ON m.{tenant} = %(tenant)s AND m.id = f.id "
        "JOIN unnest(%(tiers)s::text[], %(tier_weights)s::float8[]) AS tw(tier, weight) "
        "ON tw.tier = m.tier "
        "ORDER BY score DESC, m.event_time DESC, m.id LIMIT %(limit)s"
    ).format(
        ctes=sql.SQL(", ").join(ctes), ranked=ranked, weight=weight, cols=_returning_m(),
        mem=tables.memories.ident, tenant=tables.tenant,
    )
