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


def set_state(tables: Tables, column: str) -> sql.Composed:
    """Set one state column (invalidated_at, archived_at, tombstoned_at) if not yet set."""
    if column not in ("invalidated_at", "archived_at", "tombstoned_at"):
        raise ValueError(f"not a state column: {column}")
    return sql.SQL(
        "UPDATE {} AS m SET {} = coalesce(m.{}, %(at)s), updated_at = now() "
        "WHERE m.{} = %(tenant)s AND m.id = %(id)s RETURNING {}"
    ).format(tables.memories.ident, sql.Identifier(column), sql.Identifier(column),
             tables.tenant, _returning_m())


def insert_link(tables: Tables) -> sql.Composed:
    """Link an action to a memory; an existing link is kept (returns no row)."""
    return sql.SQL(
        "INSERT INTO {} ({}, action_id, memory_id, kind) "
        "VALUES (%(tenant)s, %(action_id)s, %(memory_id)s, %(kind)s) "
        "ON CONFLICT DO NOTHING RETURNING action_id"
    ).format(tables.action_links.ident, tables.tenant)


def touch_scope(tables: Tables) -> sql.Composed:
    """Open a tier scope on first use, or record activity in it."""
    return sql.SQL(
        "INSERT INTO {} ({}, tier, scope_id) VALUES (%(tenant)s, %(tier)s, %(scope_id)s) "
        "ON CONFLICT ({}, tier, scope_id) DO UPDATE SET last_activity_at = now()"
    ).format(tables.scopes.ident, tables.tenant, tables.tenant)


def close_scope(tables: Tables) -> sql.Composed:
    return sql.SQL(
        "INSERT INTO {} ({}, tier, scope_id, closed_at) "
        "VALUES (%(tenant)s, %(tier)s, %(scope_id)s, now()) "
        "ON CONFLICT ({}, tier, scope_id) DO UPDATE SET closed_at = now()"
    ).format(tables.scopes.ident, tables.tenant, tables.tenant)


def scope_rows(tables: Tables) -> sql.Composed:
    """Rows of one scope with whether an action links them, locked for the scope end."""
    return sql.SQL(
        "SELECT m.id, m.content, EXISTS (SELECT 1 FROM {} AS l WHERE l.{} = m.{} "
        "AND l.memory_id = m.id) FROM {} AS m WHERE m.{} = %(tenant)s AND m.tier = %(tier)s "
        "AND m.scope_id = %(scope_id)s ORDER BY m.created_at, m.id FOR UPDATE OF m"
    ).format(tables.action_links.ident, tables.tenant, tables.tenant, tables.memories.ident,
             tables.tenant)


def delete_memory(tables: Tables) -> sql.Composed:
    """Hard delete of one transient, unlinked row (the database trigger refuses others)."""
    return sql.SQL("DELETE FROM {} WHERE {} = %(tenant)s AND id = %(id)s").format(
        tables.memories.ident, tables.tenant)


def subject_rows(tables: Tables) -> sql.Composed:
    """Not-yet-erased rows about a subject (``envelope @> {"subject": ...}``) or listed ids."""
    return sql.SQL(
        "SELECT m.id, m.content FROM {} AS m WHERE m.{} = %(tenant)s AND m.erased_at IS NULL "
        "AND (m.envelope @> %(subject)s OR m.id = ANY(%(ids)s::uuid[])) "
        "ORDER BY m.created_at, m.id FOR UPDATE"
    ).format(tables.memories.ident, tables.tenant)


def erase_row(tables: Tables, *, has_embedding: bool) -> sql.Composed:
    """Replace content with its hash and clear everything else that could carry it."""
    embedding = sql.SQL(", embedding = NULL") if has_embedding else sql.SQL("")
    return sql.SQL(
        "UPDATE {} SET content = %(content)s, value = '{{}}'::jsonb, envelope = '{{}}'::jsonb, "
        "tags = '{{}}'::text[]{}, erased_at = now(), erasure_reason = %(reason)s, "
        "updated_at = now() WHERE {} = %(tenant)s AND id = %(id)s"
    ).format(tables.memories.ident, embedding, tables.tenant)


def history(tables: Tables) -> sql.Composed:
    """Journal events of a memory and of every version in its supersession chain."""
    return sql.SQL(
        "WITH RECURSIVE chain(id) AS ("
        "SELECT %(id)s::uuid "
        "UNION SELECT m.id FROM {mem} AS m JOIN chain AS c ON m.{t} = %(tenant)s "
        "AND (m.superseded_by = c.id OR m.id = (SELECT superseded_by FROM {mem} AS x "
        "WHERE x.{t} = %(tenant)s AND x.id = c.id))) "
        "SELECT e.seq, e.kind, e.memory_id, e.actor, e.payload, e.occurred_at, e.hash "
        "FROM {events} AS e WHERE e.{t} = %(tenant)s AND e.memory_id IN (SELECT id FROM chain) "
        "ORDER BY e.seq"
    ).format(mem=tables.memories.ident, t=tables.tenant, events=tables.events.ident)
