"""Pure SQL builders for the tenant-isolated checkpointer (no I/O; values are bind parameters).

Every statement names the tenant column and filters by ``%(tenant)s``; row-level security
is the backstop. Rows come back in the shape LangGraph's Postgres saver reads, so its
serializer helpers (``_load_blobs``, ``_load_writes``) decode them unchanged.
"""

from __future__ import annotations

from psycopg import sql

from primitives.compile._checkpointer import CheckpointerTables
from primitives.compile._definer import (
    checkpoint_delete_blobs_function,
    checkpoint_delete_runs_function,
    checkpoint_delete_threads_function,
    checkpoint_prune_function,
)

__all__ = [
    "CHECKPOINT_COLUMNS",
    "copy_thread",
    "delete_garbage_blobs",
    "delete_runs",
    "delete_threads",
    "insert_writes",
    "prune_heads",
    "prune_namespace",
    "select_checkpoints",
    "select_pending_sends",
    "upsert_blobs",
    "upsert_checkpoint",
]

CHECKPOINT_COLUMNS = ("thread_id", "checkpoint", "checkpoint_ns", "checkpoint_id",
                      "parent_checkpoint_id", "metadata", "channel_values", "pending_writes")


_BLOBS = sql.SQL(
    "jsonb_each_text(c.checkpoint -> 'channel_versions') AS v "
    "JOIN {blobs} AS b ON b.{t} = c.{t} AND b.thread_id = c.thread_id "
    "AND b.checkpoint_ns = c.checkpoint_ns AND b.channel = v.key AND b.version = v.value")
_BLOBS_CITUS = sql.SQL(
    "{blobs} AS b WHERE b.{t} = c.{t} AND b.thread_id = c.thread_id "
    "AND b.checkpoint_ns = c.checkpoint_ns "
    "AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version")


def select_checkpoints(t: CheckpointerTables, *, thread: bool, namespace: bool,
                       checkpoint_id: bool, metadata: bool, before: bool,
                       limit: bool, citus: bool = False) -> sql.Composed:
    """Checkpoints of the tenant, newest first, each with its channel blobs and pending writes.

    Params: tenant, then ``thread_id``, ``checkpoint_ns``, ``checkpoint_id``, ``metadata``
    (jsonb containment), ``before`` (a checkpoint id) and ``limit`` as the flags ask.
    ``citus``: the blobs matched to the checkpoint's channel versions without the set
    function (a function in a correlated subquery is not deparsed right for the tenant's
    shard); the same rows.
    """
    where: list[sql.Composable] = [sql.SQL("c.{} = %(tenant)s").format(t.tenant)]
    for flag, clause in ((thread, "c.thread_id = %(thread_id)s"),
                         (namespace, "c.checkpoint_ns = %(checkpoint_ns)s"),
                         (checkpoint_id, "c.checkpoint_id = %(checkpoint_id)s"),
                         (metadata, "c.metadata @> %(metadata)s::jsonb"),
                         (before, "c.checkpoint_id < %(before)s")):
        if flag:
            where.append(sql.SQL(clause))
    statement = sql.SQL(
        "SELECT c.thread_id, c.checkpoint, c.checkpoint_ns, c.checkpoint_id, "
        "c.parent_checkpoint_id, c.metadata, "
        "(SELECT array_agg(ARRAY[convert_to(b.channel, 'UTF8'), convert_to(b.type, 'UTF8'), "
        "b.blob]) FROM {versions}), "
        "(SELECT array_agg(ARRAY[convert_to(w.task_id, 'UTF8'), convert_to(w.channel, 'UTF8'), "
        "convert_to(w.type, 'UTF8'), w.blob, convert_to(w.task_path, 'UTF8'), "
        "convert_to(w.idx::text, 'UTF8')]) FROM {writes} AS w WHERE w.{t} = c.{t} "
        "AND w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns "
        "AND w.checkpoint_id = c.checkpoint_id) "
        "FROM {checkpoints} AS c WHERE {where} ORDER BY c.checkpoint_id DESC"
    ).format(versions=(_BLOBS_CITUS if citus else _BLOBS).format(blobs=t.blobs.ident,
                                                                  t=t.tenant),
             writes=t.writes.ident, checkpoints=t.checkpoints.ident,
             t=t.tenant, where=sql.SQL(" AND ").join(where))
    if limit:
        statement = sql.Composed([statement, sql.SQL(" LIMIT %(limit)s")])
    return statement


def select_pending_sends(t: CheckpointerTables, tasks_channel: str) -> sql.Composed:
    """Sends written to the parents of pre-v4 checkpoints, by parent checkpoint id.
    Params: tenant, thread_id, checkpoint_ns, ids."""
    return sql.SQL(
        "SELECT checkpoint_id, array_agg(ARRAY[convert_to(type, 'UTF8'), blob] "
        "ORDER BY task_path, task_id, idx) FROM {} WHERE {} = %(tenant)s "
        "AND thread_id = %(thread_id)s AND checkpoint_ns = %(checkpoint_ns)s "
        "AND checkpoint_id = ANY(%(ids)s) AND channel = {} GROUP BY checkpoint_id"
    ).format(t.writes.ident, t.tenant, sql.Literal(tasks_channel))


def upsert_blobs(t: CheckpointerTables) -> sql.Composed:
    """One channel value at one version; an existing one is kept (versions are immutable).
    Positional params: tenant, thread_id, checkpoint_ns, channel, version, type, blob."""
    return sql.SQL(
        "INSERT INTO {} ({}, thread_id, checkpoint_ns, channel, version, type, blob) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT ({}, thread_id, checkpoint_ns, channel, version) DO NOTHING"
    ).format(t.blobs.ident, t.tenant, t.tenant)


def upsert_checkpoint(t: CheckpointerTables) -> sql.Composed:
    """Params: tenant, thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id,
    checkpoint (jsonb), metadata (jsonb)."""
    return sql.SQL(
        "INSERT INTO {} ({}, thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, "
        "checkpoint, metadata) VALUES (%(tenant)s, %(thread_id)s, %(checkpoint_ns)s, "
        "%(checkpoint_id)s, %(parent_checkpoint_id)s, %(checkpoint)s, %(metadata)s) "
        "ON CONFLICT ({}, thread_id, checkpoint_ns, checkpoint_id) "
        "DO UPDATE SET checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata"
    ).format(t.checkpoints.ident, t.tenant, t.tenant)


def insert_writes(t: CheckpointerTables, *, replace: bool) -> sql.Composed:
    """Pending writes of one task. ``replace``: a rewrite of a special channel (an error, an
    interrupt) replaces the earlier one; other writes are written once. Positional params:
    tenant, thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type,
    blob."""
    conflict = sql.SQL(
        "DO UPDATE SET channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob"
        if replace else "DO NOTHING")
    return sql.SQL(
        "INSERT INTO {} ({}, thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, "
        "channel, type, blob) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT ({}, thread_id, checkpoint_ns, checkpoint_id, task_id, idx) {}"
    ).format(t.writes.ident, t.tenant, t.tenant, conflict)


def delete_threads(t: CheckpointerTables, *, citus: bool = False) -> tuple[sql.Composed, ...]:
    """Everything of the listed threads of the transaction's tenant, through the SECURITY
    DEFINER function (the app role holds no DELETE). Params: thread_ids; ``citus``: also
    tenant, the cluster's function's first argument (the worker it runs on)."""
    if citus:
        return (sql.SQL("SELECT {}(%(tenant)s::text, %(thread_ids)s::text[])").format(
            checkpoint_delete_threads_function(t)),)
    return (sql.SQL("SELECT {}(%(thread_ids)s::text[])").format(
        checkpoint_delete_threads_function(t)),)


def delete_runs(t: CheckpointerTables) -> sql.Composed:
    """Checkpoints written by the listed runs (``metadata.run_id``) and their pending writes;
    returns the (thread, namespace) pairs touched. Params: run_ids."""
    return sql.SQL("SELECT thread, namespace FROM {}(%(run_ids)s::text[])").format(
        checkpoint_delete_runs_function(t))


def delete_garbage_blobs(t: CheckpointerTables) -> sql.Composed:
    """Blobs of the listed (thread, namespace) pairs that no checkpoint refers to any more.
    Params: thread_ids, namespaces (aligned arrays)."""
    return sql.SQL("SELECT {}(%(thread_ids)s::text[], %(namespaces)s::text[])").format(
        checkpoint_delete_blobs_function(t))


def copy_thread(t: CheckpointerTables) -> tuple[sql.Composed, ...]:
    """Copy every checkpoint, blob and write of a thread to another thread of the same
    tenant (existing rows of the target are kept). Params: tenant, source, target."""
    def copy(table: sql.Identifier, columns: str, key: str) -> sql.Composed:
        return sql.SQL(
            "INSERT INTO {table} ({t}, thread_id, {cols}) SELECT {t}, %(target)s, {cols} "
            "FROM {table} WHERE {t} = %(tenant)s AND thread_id = %(source)s "
            "ON CONFLICT ({t}, thread_id, {key}) DO NOTHING"
        ).format(table=table, t=t.tenant, cols=sql.SQL(columns), key=sql.SQL(key))

    return (
        copy(t.checkpoints.ident, "checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, "
             "checkpoint, metadata", "checkpoint_ns, checkpoint_id"),
        copy(t.blobs.ident, "checkpoint_ns, channel, version, type, blob",
             "checkpoint_ns, channel, version"),
        copy(t.writes.ident, "checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, "
             "type, blob", "checkpoint_ns, checkpoint_id, task_id, idx"),
    )


def prune_heads(t: CheckpointerTables, tasks_channel: str) -> sql.Composed:
    """Per namespace of a thread: the latest checkpoint; its parent when the head predates
    v4 and reads its sends from the parent's writes; and whether the thread uses a
    DeltaChannel (whose history ``keep_latest`` would cut). Params: tenant, thread_id."""
    return sql.SQL(
        "SELECT DISTINCT ON (c.checkpoint_ns) c.checkpoint_ns, c.checkpoint_id, "
        "CASE WHEN coalesce((c.checkpoint ->> 'v')::int, 1) < 4 AND EXISTS (SELECT 1 FROM {w} "
        "AS w WHERE w.{t} = c.{t} AND w.thread_id = c.thread_id "
        "AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.parent_checkpoint_id "
        "AND w.channel = {tasks}) THEN c.parent_checkpoint_id END, "
        "bool_or(c.metadata ? 'counters_since_delta_snapshot' OR c.metadata ? "
        "'delta_writes_versioned') OVER () "
        "FROM {cp} AS c WHERE c.{t} = %(tenant)s AND c.thread_id = %(thread_id)s "
        "ORDER BY c.checkpoint_ns, c.checkpoint_id DESC"
    ).format(w=t.writes.ident, cp=t.checkpoints.ident, t=t.tenant,
             tasks=sql.Literal(tasks_channel))



def prune_namespace(t: CheckpointerTables) -> tuple[sql.Composed, ...]:
    """Delete the checkpoints of one namespace older than its head except those kept, with
    their writes, then unlink kept checkpoints from deleted parents, through the SECURITY
    DEFINER function. Params: thread_id, checkpoint_ns, head, keep (text[])."""
    return (sql.SQL("SELECT {}(%(thread_id)s, %(checkpoint_ns)s, %(head)s, %(keep)s::text[])")
            .format(checkpoint_prune_function(t)),)
