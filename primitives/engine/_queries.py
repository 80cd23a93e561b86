"""Pure SQL builders for the engine's statements (no I/O; values are bind parameters).

Every statement filters by the tenant column explicitly; row-level security is the backstop.
"""

from __future__ import annotations

from functools import lru_cache
from uuid import UUID

from psycopg import sql

from primitives.compile import OBSERVED_EVENT_KIND, Tables
from primitives.compile._definer import (
    erase_row_function,
    read_pii_raw_function,
    transient_delete_function,
)
from primitives.compile._expr import active_predicate
from primitives.engine._ids import new_uuid
from primitives.engine._records import MEMORY_COLUMNS, READ_BACK_COLUMNS

__all__ = [
    "ACTIVE",
    "current_by_key",
    "insert_event",
    "insert_memory",
    "new_event_id",
    "select_memory",
    "supersede",
]

ACTIVE = sql.SQL(
    "m.superseded_at IS NULL AND m.invalidated_at IS NULL AND m.archived_at IS NULL "
    "AND m.tombstoned_at IS NULL AND (m.expires_at IS NULL OR m.expires_at > now())"
)
"""Rows that retrieval may return (alias ``m``)."""

KEPT = sql.SQL(
    "m.superseded_at IS NULL AND m.invalidated_at IS NULL AND m.archived_at IS NULL "
    "AND m.tombstoned_at IS NULL"
)
""":data:`ACTIVE` expired rows included: what a store read with ``omit_expired=False``
returns (alias ``m``)."""

_WRITE_COLUMNS = (
    "id", "tier", "typology", "scope_id", "namespace", "key", "content", "value", "envelope", "tags",
    "provenance", "event_time", "source", "actor",
)


def _returning() -> sql.Composable:
    return sql.SQL(", ").join(sql.Identifier(c) for c in MEMORY_COLUMNS)


def _returning_m() -> sql.Composable:
    return sql.SQL(", ").join(sql.Identifier("m", c) for c in MEMORY_COLUMNS)


@lru_cache(maxsize=64)
def insert_memory(tables: Tables, anchor_columns: tuple[str, ...], *,
                  embedding: bool = False) -> sql.Composed:
    """INSERT one memory row; params: anchor values then ``_WRITE_COLUMNS`` by name, and
    with ``embedding`` also ``embedding`` (a halfvec literal) and ``embedding_model``."""
    columns = (*anchor_columns, *_WRITE_COLUMNS)
    values: list[sql.Composable] = [sql.Placeholder(c) for c in columns]
    if embedding:
        columns += ("embedding", "embedding_model")
        values += [sql.SQL("%(embedding)s::halfvec"), sql.Placeholder("embedding_model")]
    return sql.SQL("INSERT INTO {} ({}) VALUES ({}) RETURNING {}").format(
        tables.memories.ident,
        sql.SQL(", ").join(sql.Identifier(c) for c in columns),
        sql.SQL(", ").join(values),
        _returning(),
    )


@lru_cache(maxsize=64)
def insert_memory_observed(tables: Tables, anchor_columns: tuple[str, ...], *,
                           embedding: bool = False, scoped: bool = True,
                           confidence: bool = False, citus: bool = False) -> sql.Composed:
    """One statement for the write path: the memory row, its ``observed`` journal event and,
    when ``scoped``, the scope's activity mark. Params: those of :func:`insert_memory` plus
    ``tenant``, ``event_id`` and ``payload`` (the event's) and ``scope_id`` (NULL: no scope
    row is touched). Returns the row's :data:`READ_BACK_COLUMNS` only (the caller has the
    rest: :meth:`~primitives.engine.Memory.from_written`).
    A write without a scope uses ``scoped=False``: the statement then has no scope part to
    set up at all. ``confidence``: the row's initial confidence is the ``confidence`` param
    (else the column's default, 1).

    When the id or the current-key slot is taken (``ON CONFLICT DO NOTHING``) it writes no
    row and no event, and returns the row of ``id`` if that row holds this write's tier,
    key and content (the retry of a write whose COMMIT did happen), else nothing."""
    columns = (*anchor_columns, *_WRITE_COLUMNS)
    values: list[sql.Composable] = [sql.Placeholder(c) for c in columns]
    if embedding:
        columns += ("embedding", "embedding_model")
        values += [sql.SQL("%(embedding)s::halfvec"), sql.Placeholder("embedding_model")]
    if confidence:
        columns += ("confidence",)
        values.append(sql.SQL("%(confidence)s::real"))
    if citus:
        return _insert_memory_observed_citus(tables, columns, values, scoped=scoped)
    scope = sql.SQL(
        ", s AS (INSERT INTO {scopes} ({t}, tier, scope_id) "
        "SELECT %(tenant)s, %(tier)s, %(scope_id)s::text WHERE %(scope_id)s::text IS NOT NULL "
        "ON CONFLICT ({t}, tier, scope_id) DO UPDATE SET last_activity_at = EXCLUDED.last_activity_at)"
    ) if scoped else sql.SQL("")
    return sql.SQL(
        "WITH m AS (INSERT INTO {mem} ({cols}) VALUES ({vals}) ON CONFLICT DO NOTHING "
        "RETURNING id, {ret}), "
        "e AS (INSERT INTO {events} ({t}, event_id, kind, memory_id, actor, payload) "
        "SELECT %(tenant)s, %(event_id)s, {observed}, m.id, %(actor)s, %(payload)s FROM m)"
        "{scope} SELECT {ret} FROM m UNION ALL SELECT {x_ret} FROM {mem} AS x "
        "WHERE NOT EXISTS (SELECT FROM m) AND x.{t} = %(tenant)s AND x.id = %(id)s "
        "AND x.tier = %(tier)s AND x.key = %(key)s AND x.content = %(content)s"
    ).format(scope=scope.format(scopes=tables.scopes.ident, t=tables.tenant),
        x_ret=sql.SQL(", ").join(sql.Identifier("x", c) for c in READ_BACK_COLUMNS),
        mem=tables.memories.ident, events=tables.events.ident, scopes=tables.scopes.ident,
        t=tables.tenant, cols=sql.SQL(", ").join(sql.Identifier(c) for c in columns),
        vals=sql.SQL(", ").join(values),
        ret=sql.SQL(", ").join(sql.Identifier(c) for c in READ_BACK_COLUMNS),
        observed=sql.Literal(OBSERVED_EVENT_KIND),
    )


def _insert_memory_observed_citus(tables: Tables, columns: tuple[str, ...],
                                  values: list[sql.Composable], *,
                                  scoped: bool) -> sql.Composed:
    """:func:`insert_memory_observed` in the form a Citus coordinator routes whole to the
    tenant's shards: every part is ``INSERT ... VALUES`` with the tenant bound (an ``INSERT
    ... SELECT`` would reach the shards through ``COPY``, which row-level security refuses).
    The event names the row by the id the engine made (``%(id)s``); a taken id or
    current-key slot raises ``unique_violation`` instead of writing nothing (the engine
    reads the id first on a cluster: :func:`written_id`). The same parameters."""
    scope = sql.SQL(
        ", s AS (INSERT INTO {scopes} ({t}, tier, scope_id) "
        "VALUES (%(tenant)s, %(tier)s, %(scope_id)s::text) "
        "ON CONFLICT ({t}, tier, scope_id) DO UPDATE SET last_activity_at = EXCLUDED.last_activity_at)"
    ) if scoped else sql.SQL("")
    return sql.SQL(
        "WITH m AS (INSERT INTO {mem} ({cols}) VALUES ({vals}) RETURNING {ret}), "
        "e AS (INSERT INTO {events} ({t}, event_id, kind, memory_id, actor, payload) "
        "VALUES (%(tenant)s, %(event_id)s, {observed}, %(id)s, %(actor)s, %(payload)s))"
        "{scope} SELECT {ret} FROM m"
    ).format(scope=scope.format(scopes=tables.scopes.ident, t=tables.tenant),
        mem=tables.memories.ident, events=tables.events.ident,
        t=tables.tenant, cols=sql.SQL(", ").join(sql.Identifier(c) for c in columns),
        vals=sql.SQL(", ").join(values),
        ret=sql.SQL(", ").join(sql.Identifier(c) for c in READ_BACK_COLUMNS),
        observed=sql.Literal(OBSERVED_EVENT_KIND),
    )


@lru_cache(maxsize=64)
def written_id(tables: Tables) -> sql.Composed:
    """On a cluster, before a write: the row that already holds ``%(id)s``, with the columns
    a retry compares (tier, key, content) and :data:`READ_BACK_COLUMNS`; nothing when the id
    is free."""
    return sql.SQL(
        "SELECT tier, key, content, {ret} FROM {mem} AS x WHERE x.{t} = %(tenant)s "
        "AND x.id = %(id)s"
    ).format(ret=sql.SQL(", ").join(sql.Identifier("x", c) for c in READ_BACK_COLUMNS),
             mem=tables.memories.ident, t=tables.tenant)


def new_event_id() -> UUID:
    """A journal event's id, made by the client: the column's default (``gen_random_uuid``)
    would read the server's random source with three system calls per event where
    PostgreSQL is built without OpenSSL, as the embedded server is."""
    return new_uuid()


@lru_cache(maxsize=64)
def insert_event_once(tables: Tables) -> sql.Composed:
    """Append one journal event unless the tenant's journal already holds an event of this
    kind for this memory id (a retry of a write that journals instead of writing a row,
    such as ``sampled_out``); returns no row then. Found through the journal's index on
    (tenant, memory_id)."""
    return sql.SQL(
        "INSERT INTO {ev} ({t}, event_id, kind, memory_id, actor, payload) "
        "SELECT %(tenant)s, %(event_id)s, %(kind)s, %(memory_id)s, %(actor)s, %(payload)s "
        "WHERE NOT EXISTS (SELECT 1 FROM {ev} AS e WHERE e.{t} = %(tenant)s "
        "AND e.memory_id = %(memory_id)s AND e.kind = %(kind)s) "
        "RETURNING seq, hash"
    ).format(ev=tables.events.ident, t=tables.tenant)


@lru_cache(maxsize=64)
def insert_event(tables: Tables) -> sql.Composed:
    """Append one journal event; the database fills seq, prev_hash and hash. ``event_id`` comes
    from the caller (:func:`new_event_id`)."""
    return sql.SQL(
        "INSERT INTO {} ({}, event_id, kind, memory_id, actor, payload) "
        "VALUES (%(tenant)s, %(event_id)s, %(kind)s, %(memory_id)s, %(actor)s, %(payload)s) "
        "RETURNING seq, hash"
    ).format(tables.events.ident, tables.tenant)


@lru_cache(maxsize=64)
def current_by_key(tables: Tables) -> sql.Composed:
    """The current (unsuperseded, untombstoned) row of (tier, namespace, key), locked."""
    return sql.SQL(
        "SELECT {} FROM {} AS m WHERE m.{} = %(tenant)s AND m.tier = %(tier)s "
        "AND m.namespace = %(namespace)s AND m.key = %(key)s "
        "AND m.superseded_at IS NULL AND m.tombstoned_at IS NULL FOR UPDATE"
    ).format(_returning_m(), tables.memories.ident, tables.tenant)


@lru_cache(maxsize=64)
def select_memory_for_update(tables: Tables) -> sql.Composed:
    """One row by id, locked until the transaction ends (a supersession's old version)."""
    return sql.SQL(
        "SELECT {} FROM {} AS m WHERE m.{} = %(tenant)s AND m.id = %(id)s FOR UPDATE"
    ).format(_returning_m(), tables.memories.ident, tables.tenant)


@lru_cache(maxsize=64)
def select_memory(tables: Tables) -> sql.Composed:
    return sql.SQL("SELECT {} FROM {} AS m WHERE m.{} = %(tenant)s AND m.id = %(id)s").format(
        _returning_m(), tables.memories.ident, tables.tenant
    )


@lru_cache(maxsize=64)
def supersede(tables: Tables) -> sql.Composed:
    """Mark a row superseded by the row ``by`` is to be; the row stays (soft-supersession).
    Returns its id, or nothing when ``by`` names a row already: the retry of a keyed write
    that committed (a later version replaced it since), which must not supersede again."""
    return sql.SQL(
        "UPDATE {mem} SET superseded_at = now(), superseded_by = %(by)s, updated_at = now() "
        "WHERE {t} = %(tenant)s AND id = %(id)s AND superseded_at IS NULL "
        "AND NOT EXISTS (SELECT FROM {mem} AS w WHERE w.{t} = %(tenant)s AND w.id = %(by)s) "
        "RETURNING id"
    ).format(mem=tables.memories.ident, t=tables.tenant)


def resolve_conflict(tables: Tables, *, citus: bool = False) -> sql.Composed:
    """Apply a conflict strategy to the older memory ``%(id)s``: end its validity
    (``%(invalidate)s``), archive it (``%(archive)s``), set ``%(confidence)s`` and
    ``%(decay_rate)s`` where given. Returns its id and previous confidence.

    ``citus``: Citus refuses a function that is not immutable (``now()``) inside ``CASE``
    or ``coalesce`` of a distributed update, so the time comes from the subquery (kept a
    subquery by ``OFFSET 0``, so the planner does not pull ``now()`` up into the ``CASE``),
    which runs on the shard with the rest of the statement."""
    if citus:
        return sql.SQL(
            "UPDATE {mem} AS m SET "
            "invalidated_at = CASE WHEN %(invalidate)s THEN coalesce(m.invalidated_at, o.at) "
            "ELSE m.invalidated_at END, "
            "archived_at = CASE WHEN %(archive)s THEN coalesce(m.archived_at, o.at) "
            "ELSE m.archived_at END, "
            "confidence = coalesce(%(confidence)s::real, m.confidence), "
            "decay_rate = coalesce(%(decay_rate)s::real, m.decay_rate), updated_at = o.at "
            "FROM (SELECT confidence, now() AS at FROM {mem} "
            "WHERE {t} = %(tenant)s AND id = %(id)s OFFSET 0) AS o "
            "WHERE m.{t} = %(tenant)s AND m.id = %(id)s RETURNING m.id, o.confidence"
        ).format(mem=tables.memories.ident, t=tables.tenant)
    return sql.SQL(
        "UPDATE {mem} AS m SET "
        "invalidated_at = CASE WHEN %(invalidate)s THEN coalesce(m.invalidated_at, now()) "
        "ELSE m.invalidated_at END, "
        "archived_at = CASE WHEN %(archive)s THEN coalesce(m.archived_at, now()) "
        "ELSE m.archived_at END, "
        "confidence = coalesce(%(confidence)s::real, m.confidence), "
        "decay_rate = coalesce(%(decay_rate)s::real, m.decay_rate), updated_at = now() "
        "FROM (SELECT confidence FROM {mem} WHERE {t} = %(tenant)s AND id = %(id)s) AS o "
        "WHERE m.{t} = %(tenant)s AND m.id = %(id)s RETURNING m.id, o.confidence"
    ).format(mem=tables.memories.ident, t=tables.tenant)


def similar_current(tables: Tables, similarity: str) -> sql.Composed:
    """The active row of ``%(tier)s`` / ``%(typology)s`` whose text is closest to
    ``%(content)s`` at ``%(threshold)s`` or more and differs from it, locked; nothing when
    none. ``similarity``: ``trigram`` (pg_trgm) or ``exact`` (lower-cased equality only, so
    never a different text: no candidate)."""
    if similarity != "trigram":
        return sql.SQL("SELECT NULL::uuid WHERE false").format()
    return sql.SQL(
        "SELECT m.id, similarity(m.content, %(content)s) AS s FROM {mem} AS m "
        "WHERE m.{t} = %(tenant)s AND m.tier = %(tier)s AND m.typology = %(typology)s "
        "AND {active} AND m.content <> %(content)s "
        "AND similarity(m.content, %(content)s) >= %(threshold)s "
        "ORDER BY s DESC, m.created_at DESC, m.id LIMIT 1 FOR UPDATE OF m"
    ).format(mem=tables.memories.ident, t=tables.tenant, active=active_predicate("m"))


def rows_to_embed(tables: Tables) -> sql.Composed:
    """Unerased rows without a vector of ``%(model)s``, oldest first, ``%(limit)s`` at most."""
    return sql.SQL(
        "SELECT m.id, m.content, m.envelope, m.event_time FROM {} AS m "
        "WHERE m.{} = %(tenant)s AND m.erased_at IS NULL "
        "AND (m.embedding IS NULL OR m.embedding_model IS DISTINCT FROM %(model)s) "
        "ORDER BY m.created_at, m.id LIMIT %(limit)s FOR UPDATE"
    ).format(tables.memories.ident, tables.tenant)


def set_embeddings(tables: Tables) -> sql.Composed:
    """Store vectors (halfvec literals) for rows by id. Params: tenant, ids, vectors, model."""
    return sql.SQL(
        "UPDATE {} AS m SET embedding = v.vector::halfvec, embedding_model = %(model)s "
        "FROM unnest(%(ids)s::uuid[], %(vectors)s::text[]) AS v(id, vector) "
        "WHERE m.{} = %(tenant)s AND m.id = v.id"
    ).format(tables.memories.ident, tables.tenant)


@lru_cache(maxsize=64)
def set_state(tables: Tables, column: str) -> sql.Composed:
    """Set one state column (invalidated_at, archived_at, tombstoned_at) if not yet set."""
    if column not in ("invalidated_at", "archived_at", "tombstoned_at"):
        raise ValueError(f"not a state column: {column}")
    return sql.SQL(
        "UPDATE {} AS m SET {} = coalesce(m.{}, %(at)s), updated_at = now() "
        "WHERE m.{} = %(tenant)s AND m.id = %(id)s RETURNING {}"
    ).format(tables.memories.ident, sql.Identifier(column), sql.Identifier(column),
             tables.tenant, _returning_m())


@lru_cache(maxsize=64)
def insert_link(tables: Tables) -> sql.Composed:
    """Link an action to a memory; an existing link is kept (returns no row)."""
    return sql.SQL(
        "INSERT INTO {} ({}, action_id, memory_id, kind) "
        "VALUES (%(tenant)s, %(action_id)s, %(memory_id)s, %(kind)s) "
        "ON CONFLICT DO NOTHING RETURNING action_id"
    ).format(tables.action_links.ident, tables.tenant)


@lru_cache(maxsize=64)
def touch_scope(tables: Tables) -> sql.Composed:
    """Open a tier scope on first use, or record activity in it."""
    return sql.SQL(
        "INSERT INTO {} ({}, tier, scope_id) VALUES (%(tenant)s, %(tier)s, %(scope_id)s) "
        "ON CONFLICT ({}, tier, scope_id) DO UPDATE SET last_activity_at = EXCLUDED.last_activity_at"
    ).format(tables.scopes.ident, tables.tenant, tables.tenant)


def close_scope(tables: Tables) -> sql.Composed:
    return sql.SQL(
        "INSERT INTO {} ({}, tier, scope_id, closed_at) "
        "VALUES (%(tenant)s, %(tier)s, %(scope_id)s, now()) "
        "ON CONFLICT ({}, tier, scope_id) DO UPDATE SET closed_at = EXCLUDED.closed_at"
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
    """Hard delete of one transient, unlinked row (the database trigger refuses others),
    through the agent's SECURITY DEFINER function: the app role holds no DELETE. Params:
    id (the transaction's tenant is the function's)."""
    return sql.SQL("SELECT {}(%(id)s)").format(transient_delete_function(tables))


def subject_rows(tables: Tables) -> sql.Composed:
    """Not-yet-erased rows about a subject (``envelope @> {"subject": ...}``) or listed ids,
    and every row derived from one of them, at any depth (``provenance.derived_from``: facts
    extracted from an erased episode, rows promoted or compounded from it). A row derived
    from several rows goes when any of them does: what it says may come from the erased
    one."""
    return sql.SQL(
        "WITH RECURSIVE hit(id) AS ("
        "SELECT m.id FROM {mem} AS m WHERE m.{t} = %(tenant)s "
        "AND (m.envelope @> %(subject)s OR m.id = ANY(%(ids)s::uuid[])) "
        "UNION "
        "SELECT d.id FROM hit AS h JOIN {mem} AS d ON d.{t} = %(tenant)s "
        "AND d.provenance -> 'derived_from' ? h.id::text) "
        "SELECT m.id, m.content FROM {mem} AS m WHERE m.{t} = %(tenant)s "
        "AND m.erased_at IS NULL AND m.id IN (SELECT id FROM hit) "
        "ORDER BY m.created_at, m.id FOR UPDATE"
    ).format(mem=tables.memories.ident, t=tables.tenant)


def erase_row(tables: Tables, *, citus: bool = False) -> sql.Composed:
    """Replace content with its hash, clear everything else that could carry it and journal
    the ``erased`` event, through the SECURITY DEFINER function (the app role holds no UPDATE
    on those columns). Params: id, reason, event_id, actor, payload; ``citus``: also tenant,
    the cluster's function's first argument (the worker it runs on)."""
    if citus:
        return sql.SQL(
            "SELECT {}(%(tenant)s::text, %(id)s::uuid, %(reason)s::text, %(event_id)s::uuid, "
            "%(actor)s::text, %(payload)s::jsonb)").format(erase_row_function(tables))
    return sql.SQL(
        "SELECT {}(%(id)s::uuid, %(reason)s::text, %(event_id)s::uuid, %(actor)s::text, "
        "%(payload)s::jsonb)").format(erase_row_function(tables))


_NAME_HASH = sql.SQL("'sha256:' || encode(sha256(convert_to(lower({}), 'UTF8')), 'hex')")
"""An entity name as erasure leaves it: the hash of its lower-cased text."""


def erase_entities(tables: Tables, *, citus: bool = False) -> sql.Composed:
    """Entities named or aliased ``%(subject)s`` (any case): the name becomes its hash,
    aliases and summary go. Returns their ids.

    ``citus``: Citus refuses a function that is not immutable over a column in a distributed
    ``UPDATE`` (``convert_to``), so the hashes are made in a subquery (kept one by ``OFFSET
    0``) that runs on the shard with the rest of the statement."""
    assert tables.entities is not None
    if citus:
        return sql.SQL(
            "UPDATE {e} AS e SET canonical_name = x.hashed, aliases = '{{}}'::text[], "
            "summary = NULL, last_updated = now() FROM (SELECT s.id, {hashed} AS hashed "
            "FROM {e} AS s WHERE s.{t} = %(tenant)s "
            "AND (lower(s.canonical_name) = lower(btrim(%(subject)s)) OR EXISTS (SELECT 1 FROM "
            "unnest(s.aliases) AS a WHERE lower(a) = lower(btrim(%(subject)s)))) OFFSET 0) AS x "
            "WHERE e.{t} = %(tenant)s AND e.id = x.id RETURNING e.id"
        ).format(e=tables.entities.ident, t=tables.tenant,
                 hashed=_NAME_HASH.format(sql.SQL("s.canonical_name")))
    return sql.SQL(
        "UPDATE {e} AS e SET canonical_name = {hashed}, aliases = '{{}}'::text[], "
        "summary = NULL, last_updated = now() WHERE e.{t} = %(tenant)s "
        "AND (lower(e.canonical_name) = lower(btrim(%(subject)s)) OR EXISTS (SELECT 1 FROM "
        "unnest(e.aliases) AS a WHERE lower(a) = lower(btrim(%(subject)s)))) RETURNING e.id"
    ).format(e=tables.entities.ident, t=tables.tenant,
             hashed=_NAME_HASH.format(sql.SQL("e.canonical_name")))


def erase_edge_evidence(tables: Tables) -> sql.Composed:
    """Edges from or to the erased rows ``%(ids)s`` lose their evidence. Returns their ids."""
    assert tables.edges is not None
    return sql.SQL(
        "UPDATE {} SET evidence = '[]'::jsonb WHERE {} = %(tenant)s "
        "AND (source_id = ANY(%(ids)s::uuid[]) OR target_id = ANY(%(ids)s::uuid[])) "
        "AND evidence <> '[]'::jsonb RETURNING id"
    ).format(tables.edges.ident, tables.tenant)


def count_checkpoint_threads(tables: Tables) -> sql.Composed:
    """How many checkpoints, blobs and pending writes the threads ``%(thread_ids)s`` hold."""
    assert tables.checkpoints is not None and tables.checkpoint_blobs is not None \
        and tables.checkpoint_writes is not None
    counts = [sql.SQL("(SELECT count(*) FROM {} WHERE {} = %(tenant)s "
                      "AND thread_id = ANY(%(thread_ids)s::text[]))").format(table.ident,
                                                                            tables.tenant)
              for table in (tables.checkpoints, tables.checkpoint_blobs,
                            tables.checkpoint_writes)]
    return sql.SQL("SELECT {}").format(sql.SQL(", ").join(counts))


def delete_checkpoint_threads(tables: Tables, *, citus: bool = False) -> sql.Composed:
    """Every checkpoint, blob and pending write of the threads ``%(thread_ids)s``, through the
    checkpointer's SECURITY DEFINER function (the app role holds no DELETE); ``citus``: also
    ``%(tenant)s``, the cluster's function's first argument (the worker it runs on)."""
    assert tables.checkpoints is not None
    function = sql.Identifier(tables.checkpoints.schema,
                              f"{tables.checkpoints.name}_delete_threads")
    if citus:
        return sql.SQL("SELECT {}(%(tenant)s::text, %(thread_ids)s::text[])").format(function)
    return sql.SQL("SELECT {}(%(thread_ids)s::text[])").format(function)


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


# LangGraph store items (primitives.engine._store_ops) -------------------------------------------
ITEM_EXTRA_COLUMNS = ("item_created_at", "ttl_minutes", "expired", "indexed")
"""Read after ``MEMORY_COLUMNS`` by the item builders below."""

_STORE_META = sql.SQL("m.provenance -> 'store'")

INDEXED = sql.SQL("coalesce((m.provenance #>> '{store,index}')::boolean, true)")
"""Items written without ``index=False`` (those take part in query searches)."""

UNINDEXED = sql.SQL("NOT coalesce((m.provenance #>> '{store,index}')::boolean, true)")
"""Items written with ``index=False`` (a query search lists them after its ranked hits)."""


def _item_columns() -> sql.Composable:
    return sql.SQL(
        "{}, coalesce(({} ->> 'created_at')::timestamptz, m.created_at), "
        "({} ->> 'ttl_minutes')::float8, "
        "coalesce(m.expires_at <= now(), false), coalesce(({} ->> 'index')::boolean, true), "
        "{} -> 'vectors'"
    ).format(_returning_m(), _STORE_META, _STORE_META, _STORE_META, _STORE_META)


def _anchor_match(anchor_columns: tuple[str, ...]) -> sql.Composable:
    """The tenant column, then each further anchor column (NULL matches NULL)."""
    parts = [sql.SQL("m.{} = %(tenant)s").format(sql.Identifier(anchor_columns[0]))]
    parts += [sql.SQL("m.{} IS NOT DISTINCT FROM {}").format(sql.Identifier(c), sql.Placeholder(c))
              for c in anchor_columns[1:]]
    return sql.SQL(" AND ").join(parts)


@lru_cache(maxsize=64)
def item_by_key(tables: Tables) -> sql.Composed:
    """The row holding the current-key slot of (tier, namespace, key), whatever its state,
    locked. Params: tenant, tier, namespace, key."""
    return sql.SQL(
        "SELECT {} FROM {} AS m WHERE m.{} = %(tenant)s AND m.tier = %(tier)s "
        "AND m.namespace = %(namespace)s AND m.key = %(key)s "
        "AND m.superseded_at IS NULL AND m.tombstoned_at IS NULL FOR UPDATE"
    ).format(_item_columns(), tables.memories.ident, tables.tenant)


def item_rows(tables: Tables, *, tier: bool, prefix_len: int, where: sql.Composable,
              by_ids: bool = False, key: bool = False, page: bool = False,
              expired: bool = False) -> sql.Composed:
    """Active, unexpired items of the anchor (``expired``: expired ones too). Params:
    tenant, each further anchor column,
    ``tier`` (when ``tier``), ``prefix`` (a text[] of ``prefix_len`` segments), ``ids`` (when
    ``by_ids``), ``namespace`` and ``key`` (when ``key``), ``limit`` and ``offset`` (when
    ``page``, newest update first), plus the params of ``where`` (see :func:`value_filter`)."""
    clauses: list[sql.Composable] = [_anchor_match(tables.anchor_columns),
                                     KEPT if expired else ACTIVE]
    if tier:
        clauses.append(sql.SQL("m.tier = %(tier)s"))
    if prefix_len:
        clauses.append(sql.SQL("m.namespace[1:{}] = %(prefix)s::text[]").format(
            sql.Literal(prefix_len)))
    if by_ids:
        clauses.append(sql.SQL("m.id = ANY(%(ids)s::uuid[])"))
    if key:
        clauses.append(sql.SQL("m.namespace = %(namespace)s AND m.key = %(key)s"))
    clauses.append(where)
    statement = sql.SQL("SELECT {} FROM {} AS m WHERE {}").format(
        _item_columns(), tables.memories.ident, sql.SQL(" AND ").join(clauses))
    if page:
        statement = sql.Composed([statement, sql.SQL(
            " ORDER BY m.updated_at DESC, m.id LIMIT %(limit)s OFFSET %(offset)s")])
    return statement


@lru_cache(maxsize=64)
def item_get(tables: Tables, expired: bool = False) -> sql.Composed:
    """:func:`item_rows` for one key (the store's ``get``), built once per agent.
    Params: tenant, each further anchor column, tier, namespace, key."""
    return item_rows(tables, tier=True, prefix_len=0, where=sql.SQL("TRUE"), key=True,
                     expired=expired)


@lru_cache(maxsize=64)
def item_get_many(tables: Tables) -> sql.Composed:
    """:func:`item_get` for many keys in one statement: ``items`` is a JSON array of
    objects (``n``, ``tier``, ``namespace``, ``key``); each found item's ``n`` then its
    :func:`item_rows` columns. Params: tenant, each further anchor column, items."""
    return sql.SQL(
        "SELECT i.n, m.* FROM jsonb_to_recordset(%(items)s::jsonb) AS i(n int, tier text, "
        "namespace text[], key text) CROSS JOIN LATERAL ({}) AS m").format(
            item_rows(tables, tier=False, prefix_len=0, where=sql.SQL(
                "m.tier = i.tier AND m.namespace = i.namespace AND m.key = i.key")))


def item_namespaces(tables: Tables, *, tier: bool, expired: bool = False) -> sql.Composed:
    """Distinct (tier, namespace) of the anchor's active, unexpired items (``expired``:
    expired ones too)."""
    where: list[sql.Composable] = [_anchor_match(tables.anchor_columns),
                                   KEPT if expired else ACTIVE]
    if tier:
        where.append(sql.SQL("m.tier = %(tier)s"))
    return sql.SQL("SELECT DISTINCT m.tier, m.namespace FROM {} AS m WHERE {}").format(
        tables.memories.ident, sql.SQL(" AND ").join(where))


def set_item_meta(tables: Tables) -> sql.Composed:
    """Replace a row's store metadata (``provenance.store``) and set or clear its expiry.
    Params: tenant, id, meta (jsonb object), ttl_minutes (float or NULL)."""
    return sql.SQL(
        "UPDATE {} SET provenance = (provenance - 'store') || jsonb_build_object('store', "
        "%(meta)s::jsonb), expires_at = now() + make_interval(secs => %(ttl_minutes)s::float8 "
        "* 60) WHERE {} = %(tenant)s AND id = %(id)s"
    ).format(tables.memories.ident, tables.tenant)


def refresh_item_ttl(tables: Tables) -> sql.Composed:
    """Push back the expiry of listed rows that carry a TTL (``provenance.store``)."""
    return sql.SQL(
        "UPDATE {} SET expires_at = now() + make_interval(secs => "
        "(provenance #>> '{{store,ttl_minutes}}')::float8 * 60) WHERE {} = %(tenant)s "
        "AND id = ANY(%(ids)s::uuid[]) AND provenance #> '{{store,ttl_minutes}}' IS NOT NULL "
        "AND expires_at > now()"
    ).format(tables.memories.ident, tables.tenant)


_COMPARISONS = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def value_filter(conditions: list[tuple[str, str, object]], prefix: str = "") -> sql.Composable:
    """``(field, operator, operand)`` conditions on top-level fields of ``m.value``, AND-ed.

    ``$eq`` / ``$ne`` compare JSON values (``$ne`` matches a missing field); ``$gt`` and the
    other orderings compare numbers as numbers and strings as strings (code point order),
    and never match a field of another JSON type. Params: ``<prefix>f<i>`` (field) and
    ``<prefix>v<i>`` (operand: Jsonb for ``$eq``/``$ne``, a number or a string otherwise).
    """
    parts: list[sql.Composable] = [sql.SQL("TRUE")]
    for i, (_field, operator, operand) in enumerate(conditions):
        field, value = sql.Placeholder(f"{prefix}f{i}"), sql.Placeholder(f"{prefix}v{i}")
        if operator == "$eq":
            parts.append(sql.SQL("m.value -> {} = {}::jsonb").format(field, value))
        elif operator == "$ne":
            parts.append(sql.SQL("m.value -> {} IS DISTINCT FROM {}::jsonb").format(field, value))
        elif isinstance(operand, str):
            parts.append(sql.SQL(
                "(jsonb_typeof(m.value -> {f}) = 'string' AND (m.value ->> {f}) COLLATE \"C\" "
                "{op} {v}::text COLLATE \"C\")").format(
                f=field, v=value, op=sql.SQL(_COMPARISONS[operator])))
        else:
            parts.append(sql.SQL(
                "(jsonb_typeof(m.value -> {f}) = 'number' AND (m.value ->> {f})::numeric "
                "{op} {v}::numeric)").format(
                f=field, v=value, op=sql.SQL(_COMPARISONS[operator])))
    return sql.SQL(" AND ").join(parts)


def confirm_memory(tables: Tables) -> sql.Composed:
    """A user confirmed the memory: full confidence, no decay (seed 002 §12.1)."""
    return sql.SQL(
        "UPDATE {} AS m SET confidence = 1, decay_rate = 0, updated_at = now() "
        "WHERE m.{} = %(tenant)s AND m.id = %(id)s RETURNING {}"
    ).format(tables.memories.ident, tables.tenant, _returning_m())


def exempt_memory(tables: Tables) -> sql.Composed:
    """The memory is exempt from decay (decay rate 0): a disposition of a forcing-function
    row past its horizon, or of any row a person decides to keep as it is."""
    return sql.SQL(
        "UPDATE {} AS m SET decay_rate = 0, updated_at = now() "
        "WHERE m.{} = %(tenant)s AND m.id = %(id)s RETURNING {}"
    ).format(tables.memories.ident, tables.tenant, _returning_m())


def memory_counts(tables: Tables) -> sql.Composed:
    """Rows of the tenant by tier, typology and state (active, superseded, ..., expired)."""
    return sql.SQL(
        "SELECT m.tier, m.typology, CASE WHEN m.tombstoned_at IS NOT NULL THEN 'tombstoned' "
        "WHEN m.archived_at IS NOT NULL THEN 'archived' "
        "WHEN m.invalidated_at IS NOT NULL THEN 'invalidated' "
        "WHEN m.superseded_at IS NOT NULL THEN 'superseded' "
        "WHEN m.expires_at <= now() THEN 'expired' ELSE 'active' END, count(*) "
        "FROM {} AS m WHERE m.{} = %(tenant)s GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
    ).format(tables.memories.ident, tables.tenant)


def journal_summary(tables: Tables) -> sql.Composed:
    """The tenant's journal length, last event time, and open / all scopes."""
    return sql.SQL(
        "SELECT (SELECT count(*) FROM {e} WHERE {t} = %(tenant)s), "
        "(SELECT max(occurred_at) FROM {e} WHERE {t} = %(tenant)s), "
        "(SELECT count(*) FROM {s} WHERE {t} = %(tenant)s AND closed_at IS NULL), "
        "(SELECT count(*) FROM {s} WHERE {t} = %(tenant)s)"
    ).format(e=tables.events.ident, s=tables.scopes.ident, t=tables.tenant)


@lru_cache(maxsize=64)
def temporal_edge(tables: Tables) -> sql.Composed:
    """The write path's temporal link: an edge from the latest active row of the same tier
    and scope whose event time is not after the new row's, to the new row, with its
    ``edge_recorded`` event. Nothing when the scope has no earlier row, or when the new row
    has its temporal edge already (the retry of a write that committed). Params: ``tenant``,
    ``tier``, ``scope_id``, ``id``, ``event_time``, ``actor``."""
    assert tables.edges is not None
    return sql.SQL(
        "WITH prev AS (SELECT m.id FROM {mem} AS m WHERE m.{t} = %(tenant)s "
        "AND m.tier = %(tier)s AND m.scope_id = %(scope_id)s AND m.id <> %(id)s "
        "AND m.event_time <= %(event_time)s AND {active} "
        "AND NOT EXISTS (SELECT FROM {edges} AS x WHERE x.{t} = %(tenant)s "
        "AND x.target_id = %(id)s AND x.relation_type = 'temporal') "
        "ORDER BY m.event_time DESC, m.created_at DESC, m.id DESC LIMIT 1), "
        "edge AS (INSERT INTO {edges} ({t}, source_id, target_id, relation_type) "
        "SELECT %(tenant)s, prev.id, %(id)s, 'temporal' FROM prev RETURNING id, source_id) "
        "INSERT INTO {events} ({t}, kind, memory_id, actor, payload) "
        "SELECT %(tenant)s, 'edge_recorded', edge.source_id, %(actor)s, jsonb_build_object("
        "'edge_id', edge.id, 'target_id', %(id)s, 'relation_type', 'temporal', "
        "'weight', 1, 'confidence', 1, 'automatic', true) FROM edge"
    ).format(mem=tables.memories.ident, t=tables.tenant, active=ACTIVE,
             edges=tables.edges.ident, events=tables.events.ident)


@lru_cache(maxsize=64)
def temporal_edge_source_citus(tables: Tables) -> sql.Composed:
    """:func:`temporal_edge`'s previous row (one row, its id, or none), for the cluster form
    (``engine._core._temporal_edge_citus``)."""
    assert tables.edges is not None
    return sql.SQL(
        "SELECT m.id FROM {mem} AS m WHERE m.{t} = %(tenant)s "
        "AND m.tier = %(tier)s AND m.scope_id = %(scope_id)s AND m.id <> %(id)s "
        "AND m.event_time <= %(event_time)s AND {active} "
        "AND NOT EXISTS (SELECT FROM {edges} AS x WHERE x.{t} = %(tenant)s "
        "AND x.target_id = %(id)s AND x.relation_type = 'temporal') "
        "ORDER BY m.event_time DESC, m.created_at DESC, m.id DESC LIMIT 1"
    ).format(mem=tables.memories.ident, t=tables.tenant, active=ACTIVE,
             edges=tables.edges.ident)


@lru_cache(maxsize=64)
def insert_temporal_edge_citus(tables: Tables) -> sql.Composed:
    """The temporal edge from ``%(source_id)s`` to ``%(id)s``; returns its id."""
    assert tables.edges is not None
    return sql.SQL(
        "INSERT INTO {} ({}, source_id, target_id, relation_type) "
        "VALUES (%(tenant)s, %(source_id)s, %(id)s, 'temporal') RETURNING id"
    ).format(tables.edges.ident, tables.tenant)


@lru_cache(maxsize=64)
def consent_event(tables: Tables) -> sql.Composed:
    """The tenant's journal event ``%(id)s`` if it is of kind ``%(kind)s``."""
    return sql.SQL(
        "SELECT event_id FROM {} WHERE {} = %(tenant)s AND event_id = %(id)s "
        "AND kind = %(kind)s"
    ).format(tables.events.ident, tables.tenant)


@lru_cache(maxsize=64)
def insert_pii_raw(tables: Tables) -> sql.Composed:
    """Keep a redacted write's raw fields (a consent event named)."""
    assert tables.pii_raw is not None
    return sql.SQL(
        "INSERT INTO {} ({}, memory_id, content, value, envelope, consent_event) "
        "VALUES (%(tenant)s, %(memory_id)s, %(content)s, %(value)s, %(envelope)s, %(consent)s)"
    ).format(tables.pii_raw.ident, tables.tenant)


@lru_cache(maxsize=64)
def read_pii_raw(tables: Tables) -> sql.Composed:
    """The privacy admin's journalled read of one row's raw fields."""
    return sql.SQL(
        "SELECT * FROM {}(%(id)s, %(event_id)s, %(actor)s, %(payload)s)"
    ).format(read_pii_raw_function(tables))


@lru_cache(maxsize=64)
def item_put_one(tables: Tables, *, scoped: bool = True,
                 resolves: bool = True) -> sql.Composed:
    """:func:`item_put_many` of one item, its fields as parameters of their own (``put_``
    and the field's name, each cast to its column's type) instead of a JSON array: the same
    lock, comparison, supersession, insert, journal events, scope mark and outcome, in a plan
    without the array's decoding and the joins on ``n`` (the store's common put, one item).
    ``put_value``, ``put_envelope``, ``put_payload``, ``put_meta`` and ``put_conflict`` are
    JSON texts; ``put_ttl``, ``put_invalidate``, ``put_archive``, ``put_confidence``,
    ``put_decay_rate``, ``put_res_event`` and ``put_conflict`` may be NULL. One row: ``0``
    and the outcome."""
    t, mem = tables.tenant, tables.memories.ident
    anchors = tables.anchor_columns
    columns = (*anchors, "id", "tier", "typology", "scope_id", "namespace", "key", "content",
               "value", "envelope", "tags", "provenance", "source", "actor", "expires_at")
    same = sql.SQL(
        "(m.content, m.value, m.envelope, m.typology, m.tags) IS NOT DISTINCT FROM "
        "(%(put_content)s::text, %(put_value)s::jsonb, %(put_envelope)s::jsonb, "
        "%(put_typology)s::text, %(put_tags)s::text[])")
    return sql.SQL(
        "WITH cur AS (SELECT m.id AS cur_id, m.confidence, {same} AS same, "
        "coalesce((m.provenance #>> '{{store,created_at}}')::timestamptz, m.created_at) "
        "AS created, "
        "(m.invalidated_at IS NOT NULL OR m.archived_at IS NOT NULL "
        "OR coalesce(m.expires_at <= now(), false) "
        "OR (m.provenance #> '{{store,ttl_minutes}}' IS NOT NULL "
        "OR %(put_ttl)s::float8 IS NOT NULL) AND {same}) AS stale "
        "FROM {mem} AS m WHERE m.{t} = %(tenant)s AND m.tier = %(put_tier)s::text "
        "AND m.namespace = %(put_namespace)s::text[] AND m.key = %(put_key)s::text "
        "AND m.superseded_at IS NULL AND m.tombstoned_at IS NULL FOR UPDATE), "
        "g AS (SELECT NOT EXISTS (SELECT FROM cur WHERE cur.stale) AS go), "
        "sup AS (UPDATE {mem} AS m SET superseded_at = now(), "
        "superseded_by = %(put_id)s::uuid, updated_at = now(), "
        "invalidated_at = CASE WHEN %(put_invalidate)s::boolean "
        "THEN coalesce(m.invalidated_at, now()) ELSE m.invalidated_at END, "
        "archived_at = CASE WHEN %(put_archive)s::boolean "
        "THEN coalesce(m.archived_at, now()) ELSE m.archived_at END, "
        "confidence = coalesce(%(put_confidence)s::real, m.confidence), "
        "decay_rate = coalesce(%(put_decay_rate)s::real, m.decay_rate) "
        "WHERE m.{t} = %(tenant)s AND m.id = (SELECT cur_id FROM cur WHERE NOT cur.same) "
        "AND (SELECT go FROM g) RETURNING m.id AS old_id), "
        "ins AS (INSERT INTO {mem} ({cols}) SELECT {vals}, %(put_id)s::uuid, "
        "%(put_tier)s::text, %(put_typology)s::text, %(put_scope_id)s::text, "
        "%(put_namespace)s::text[], %(put_key)s::text, %(put_content)s::text, "
        "%(put_value)s::jsonb, %(put_envelope)s::jsonb, %(put_tags)s::text[], "
        "CASE WHEN c.created IS NOT NULL THEN jsonb_build_object('store', "
        "%(put_meta)s::jsonb || jsonb_build_object('created_at', c.created)) "
        "WHEN %(put_meta)s::jsonb <> '{{}}'::jsonb "
        "THEN jsonb_build_object('store', %(put_meta)s::jsonb) ELSE '{{}}'::jsonb END, "
        "NULL, %(actor)s, now() + make_interval(secs => %(put_ttl)s::float8 * 60) "
        "FROM g LEFT JOIN cur AS c ON true LEFT JOIN sup ON true "
        "WHERE g.go AND (c.cur_id IS NULL OR sup.old_id IS NOT NULL) "
        "ON CONFLICT DO NOTHING RETURNING id), "
        "ev AS (INSERT INTO {events} ({t}, event_id, kind, memory_id, actor, payload) "
        "SELECT %(tenant)s, e.event_id, e.kind, e.memory_id, %(actor)s, e.payload FROM ("
        "SELECT 0 AS o, %(put_sup_event)s::uuid AS event_id, 'superseded' AS kind, "
        "sup.old_id AS memory_id, jsonb_build_object('by', %(put_id)s::text) AS payload "
        "FROM sup UNION ALL "
        "SELECT 1, %(put_obs_event)s::uuid, {observed}, ins.id, %(put_payload)s::jsonb "
        "FROM ins{resolved}) AS e ORDER BY e.o){scope} "
        "SELECT 0, CASE WHEN NOT g.go THEN 'fallback' WHEN ins.id IS NOT NULL THEN 'written' "
        "WHEN c.same THEN 'unchanged' ELSE 'lost' END "
        "FROM g LEFT JOIN cur AS c ON true LEFT JOIN ins ON true"
    ).format(
        mem=mem, t=t, events=tables.events.ident, same=same,
        resolved=sql.SQL(
            " UNION ALL SELECT 2, %(put_res_event)s::uuid, 'conflict_resolved', sup.old_id, "
            "%(put_conflict)s::jsonb || jsonb_build_object('old', sup.old_id::text, "
            "'new', %(put_id)s::text, 'previous_confidence', c.confidence::float8) "
            "FROM sup CROSS JOIN cur AS c WHERE %(put_conflict)s::jsonb IS NOT NULL"
        ) if resolves else sql.SQL(""),
        scope=sql.SQL(
            ", s AS (INSERT INTO {scopes} ({t}, tier, scope_id) "
            "SELECT %(tenant)s, %(put_tier)s::text, %(put_scope_id)s::text FROM ins "
            "WHERE %(put_scope_id)s::text IS NOT NULL ON CONFLICT ({t}, tier, scope_id) "
            "DO UPDATE SET last_activity_at = EXCLUDED.last_activity_at)"
        ).format(scopes=tables.scopes.ident, t=t) if scoped else sql.SQL(""),
        cols=sql.SQL(", ").join(sql.Identifier(c) for c in columns),
        vals=sql.SQL(", ").join(sql.Placeholder(c) for c in anchors),
        observed=sql.Literal(OBSERVED_EVENT_KIND))


@lru_cache(maxsize=64)
def item_put_many(tables: Tables, *, scoped: bool = True,
                  resolves: bool = True) -> sql.Composed:
    """The store's put of items with distinct ``(tier, namespace, key)``, as one statement:
    each item's current row is locked and compared; a changed one is superseded (the row
    stays) and the new version inserted with its store metadata (``provenance.store``:
    ``created_at`` carried over from the current row, and ``meta``) and expiry; every change
    gets its journal event (``superseded``, ``observed``, then ``conflict_resolved`` where the
    typology's conflict strategy, ``conflict``, acts on the superseded row, item by item, in
    one insert whose trigger chains them) and a scoped item its scope's activity mark.

    All or nothing: when any item's current row is expired, invalidated or archived, or an
    unchanged item would set, push back or clear an expiry, nothing is written (the caller's
    general path takes the items). Params: ``tenant``, each anchor column, ``actor`` and
    ``items``, a JSON array of objects (``n``, ``id``, ``sup_event``, ``obs_event``, ``tier``,
    ``typology``, ``scope_id``, ``namespace``, ``key``, ``content``, ``value``,
    ``envelope``, ``tags``, ``payload``: the ``observed`` event's, ``meta``, ``ttl``: minutes
    or null; ``res_event``, ``conflict``: the ``conflict_resolved`` payload's strategy part
    or null, and what the strategy sets: ``invalidate``, ``archive``, ``confidence``,
    ``decay_rate``, as :func:`resolve_conflict`). One row per item, in ``n`` order: ``n`` and its outcome, ``written``,
    ``unchanged``, ``fallback`` (nothing was written) or ``lost`` (a concurrent writer took
    the new key first; this item wrote nothing). ``scoped=False`` (no item has a scope) leaves
    out the scope mark, ``resolves=False`` (no item has a conflict strategy) the
    ``conflict_resolved`` events: a smaller plan for the common put."""
    t, mem = tables.tenant, tables.memories.ident
    anchors = tables.anchor_columns
    columns = (*anchors, "id", "tier", "typology", "scope_id", "namespace", "key", "content",
               "value", "envelope", "tags", "provenance", "source", "actor", "expires_at")
    values = [sql.Placeholder(c) for c in anchors]
    return sql.SQL(
        "WITH i AS (SELECT * FROM jsonb_to_recordset(%(items)s::jsonb) AS i(n int, id uuid, "
        "sup_event uuid, obs_event uuid, tier text, typology text, scope_id text, "
        "namespace text[], key text, content text, value jsonb, envelope jsonb, tags text[], "
        "payload jsonb, meta jsonb, ttl float8, res_event uuid, conflict jsonb, "
        "invalidate boolean, archive boolean, confidence real, decay_rate real)), "
        "cur AS (SELECT i.n, m.id AS cur_id, m.confidence, "
        "(m.content, m.value, m.envelope, m.typology, m.tags) "
        "IS NOT DISTINCT FROM (i.content, i.value, i.envelope, i.typology, i.tags) AS same, "
        "coalesce((m.provenance #>> '{{store,created_at}}')::timestamptz, m.created_at) "
        "AS created, "
        "(m.invalidated_at IS NOT NULL OR m.archived_at IS NOT NULL "
        "OR coalesce(m.expires_at <= now(), false) "
        "OR (m.provenance #> '{{store,ttl_minutes}}' IS NOT NULL OR i.ttl IS NOT NULL) "
        "AND (m.content, m.value, m.envelope, m.typology, m.tags) "
        "IS NOT DISTINCT FROM (i.content, i.value, i.envelope, i.typology, i.tags)) AS stale "
        "FROM i CROSS JOIN LATERAL (SELECT * FROM {mem} AS c WHERE c.{t} = %(tenant)s "
        "AND c.tier = i.tier AND c.namespace = i.namespace AND c.key = i.key "
        "AND c.superseded_at IS NULL AND c.tombstoned_at IS NULL FOR UPDATE) AS m), "
        "g AS (SELECT NOT EXISTS (SELECT FROM cur WHERE cur.stale) AS go), "
        "sup AS (UPDATE {mem} AS m SET superseded_at = now(), superseded_by = i.id, "
        "updated_at = now(), "
        "invalidated_at = CASE WHEN i.invalidate THEN coalesce(m.invalidated_at, now()) "
        "ELSE m.invalidated_at END, "
        "archived_at = CASE WHEN i.archive THEN coalesce(m.archived_at, now()) "
        "ELSE m.archived_at END, "
        "confidence = coalesce(i.confidence, m.confidence), "
        "decay_rate = coalesce(i.decay_rate, m.decay_rate) FROM cur JOIN i USING (n), g "
        "WHERE g.go AND NOT cur.same AND m.{t} = %(tenant)s AND m.id = cur.cur_id "
        "AND m.id = ANY (ARRAY(SELECT cur_id FROM cur WHERE NOT same)) "
        "RETURNING i.n, m.id AS old_id), "
        "ins AS (INSERT INTO {mem} ({cols}) SELECT {vals}, i.id, i.tier, i.typology, "
        "i.scope_id, i.namespace, i.key, i.content, i.value, i.envelope, i.tags, "
        "CASE WHEN cur.created IS NOT NULL THEN jsonb_build_object('store', "
        "i.meta || jsonb_build_object('created_at', cur.created)) "
        "WHEN i.meta <> '{{}}'::jsonb THEN jsonb_build_object('store', i.meta) "
        "ELSE '{{}}'::jsonb END, "
        "NULL, %(actor)s, now() + make_interval(secs => i.ttl * 60) "
        "FROM i CROSS JOIN g LEFT JOIN cur USING (n) LEFT JOIN sup USING (n) "
        "WHERE g.go AND (cur.n IS NULL OR sup.n IS NOT NULL) "
        "ON CONFLICT DO NOTHING RETURNING id), "
        "ev AS (INSERT INTO {events} ({t}, event_id, kind, memory_id, actor, payload) "
        "SELECT %(tenant)s, e.event_id, e.kind, e.memory_id, %(actor)s, e.payload FROM ("
        "SELECT i.n, 0 AS o, i.sup_event AS event_id, 'superseded' AS kind, "
        "sup.old_id AS memory_id, jsonb_build_object('by', i.id::text) AS payload "
        "FROM sup JOIN i USING (n) UNION ALL "
        "SELECT i.n, 1, i.obs_event, {observed}, ins.id, i.payload FROM ins JOIN i USING (id) "
        "{resolved}) AS e ORDER BY e.n, e.o){scope} "
        "SELECT i.n, CASE WHEN NOT g.go THEN 'fallback' WHEN ins.id IS NOT NULL THEN 'written' "
        "WHEN cur.same THEN 'unchanged' ELSE 'lost' END "
        "FROM i CROSS JOIN g LEFT JOIN cur USING (n) LEFT JOIN ins USING (id) ORDER BY i.n"
    ).format(
        mem=mem, t=t, events=tables.events.ident,
        resolved=sql.SQL(
            "UNION ALL SELECT i.n, 2, i.res_event, 'conflict_resolved', sup.old_id, "
            "i.conflict || jsonb_build_object('old', sup.old_id::text, 'new', i.id::text, "
            "'previous_confidence', cur.confidence::float8) "
            "FROM sup JOIN i USING (n) JOIN cur USING (n) WHERE i.conflict IS NOT NULL"
        ) if resolves else sql.SQL(""),
        scope=sql.SQL(
            ", s AS (INSERT INTO {scopes} ({t}, tier, scope_id) "
            "SELECT DISTINCT %(tenant)s, i.tier, i.scope_id FROM ins JOIN i USING (id) "
            "WHERE i.scope_id IS NOT NULL ON CONFLICT ({t}, tier, scope_id) "
            "DO UPDATE SET last_activity_at = EXCLUDED.last_activity_at)"
        ).format(scopes=tables.scopes.ident, t=t) if scoped else sql.SQL(""),
        cols=sql.SQL(", ").join(sql.Identifier(c) for c in columns),
        vals=sql.SQL(", ").join(values), observed=sql.Literal(OBSERVED_EVENT_KIND))
