"""Deferred embedding: the rows a write left without a vector, embedded later in batches.

With ``retrieval.embedding.embed: deferred`` a write stores its row without a vector, so the
model never runs on the hot path; the row is found at once by the lexical, envelope and
recency signals. A worker then embeds the waiting rows in batches: one model call and one
statement per batch, which stores every vector of the batch and journals one ``embedded``
event per row (``{"model": ...}``) in the same statement.

The same two statements serve every worker: the application role for one tenant under its
row-level security (``mem.embed_pending()``, ``engine.embed_pending()``, the engine's
background worker) and the maintainer across a batch of tenants (``primitives maintain
--embed``, the ``embed_pending`` job). Workers may run side by side: a batch locks its rows
with ``FOR UPDATE SKIP LOCKED``, so a second worker takes the next rows instead of waiting,
and a vector is stored only where none is (a row is never embedded twice).

The model rule holds as for writes: a tenant whose stored vectors are another model's is
skipped (its rows stay waiting, for ``mem.reembed()``), never mixed.

>>> from primitives.compile import agent_tables                      # doctest: +SKIP
>>> pending_rows_statement(agent_tables(spec)).as_string(None)       # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any
from uuid import uuid4

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from primitives.compile import Tables
from primitives.compile._expr import pending_embedding_predicate
from primitives.db._names import MAINTAINER_ROLE
from primitives.errors import ModelMismatch
from primitives.lifecycle._passes import JobContext, MaintenanceJob
from primitives.spec import AgentSpec

__all__ = ["EMBEDDED_EVENT_KIND", "EmbedBatch", "embed_jobs", "embed_pending_job",
           "embedded_events_citus", "embedding_batch", "embedding_batch_citus",
           "pending_count_statement", "pending_rows_statement", "pending_rows_statement_citus",
           "store_vectors_statement", "store_vectors_statement_citus"]

EMBEDDED_EVENT_KIND = "embedded"
"""The journal event of a row that received its deferred vector."""

DEFAULT_BATCH = 64
"""Rows per model call when the caller names no batch size."""


@lru_cache(maxsize=64)
def pending_rows_statement(tables: Tables) -> sql.Composed:
    """Up to ``%(limit)s`` rows of ``%(tenants)s`` (text[]) waiting for a vector, oldest
    first, locked (rows another worker holds are skipped): ``(tenant, id, content, envelope,
    event_time)``. A tenant whose stored vectors are not ``%(model)s`` gives none (vectors of
    two models are never mixed; the tenant is checked once, on one of its embedded rows)."""
    return sql.SQL(
        "SELECT m.{t}, m.id, m.content, m.envelope, m.event_time FROM {mem} AS m "
        "WHERE m.{t} = ANY(ARRAY(SELECT c.tenant FROM unnest(%(tenants)s::text[]) AS c(tenant) "
        "WHERE coalesce((SELECT x.embedding_model FROM {mem} AS x WHERE x.{t} = c.tenant "
        "AND x.embedding_model IS NOT NULL LIMIT 1), %(model)s) = %(model)s)) "
        "AND {pending} ORDER BY m.created_at, m.id LIMIT %(limit)s FOR UPDATE OF m SKIP LOCKED"
    ).format(t=tables.tenant, mem=tables.memories.ident,
             pending=pending_embedding_predicate("m"))


@lru_cache(maxsize=64)
def store_vectors_statement(tables: Tables) -> sql.Composed:
    """Store a batch's vectors and journal them, in one statement: ``%(tenant_of)s`` (text[]),
    ``%(ids)s`` (uuid[]) and ``%(vectors)s`` (halfvec literals) aligned, ``%(model)s``,
    ``%(actor)s``. A row that has a vector by now, or was erased, is left as it is. One
    ``embedded`` event per row stored, ``{"model": ...}``. Returns ``(stored bigint)``."""
    return sql.SQL(
        "WITH batch AS (SELECT * FROM unnest(%(tenant_of)s::text[], %(ids)s::uuid[], "
        "%(vectors)s::text[]) AS v(tenant, id, vector)), "
        "stored AS (UPDATE {mem} AS m SET embedding = b.vector::halfvec, "
        "embedding_model = %(model)s FROM batch AS b "
        "WHERE m.{t} = b.tenant AND m.id = b.id AND {pending} "
        "RETURNING m.{t} AS tenant, m.id), "
        "journal AS (INSERT INTO {events} ({t}, event_id, kind, memory_id, actor, payload) "
        "SELECT s.tenant, gen_random_uuid(), {kind}, s.id, %(actor)s, "
        "jsonb_build_object('model', %(model)s::text) FROM stored AS s "
        "ORDER BY s.tenant, s.id RETURNING 1) "
        "SELECT count(*)::bigint FROM journal"
    ).format(t=tables.tenant, mem=tables.memories.ident, events=tables.events.ident,
             kind=sql.Literal(EMBEDDED_EVENT_KIND),
             pending=pending_embedding_predicate("m"))


@lru_cache(maxsize=64)
def pending_rows_statement_citus(tables: Tables) -> sql.Composed:
    """:func:`pending_rows_statement` for one tenant, ``%(tenant)s``, on a Citus coordinator:
    every table filtered by the tenant, so Citus routes it whole to the tenant's shard (it
    refuses the single-node form's subquery correlated with ``unnest``)."""
    return sql.SQL(
        "SELECT m.{t}, m.id, m.content, m.envelope, m.event_time FROM {mem} AS m "
        "WHERE m.{t} = %(tenant)s AND coalesce((SELECT x.embedding_model FROM {mem} AS x "
        "WHERE x.{t} = %(tenant)s AND x.embedding_model IS NOT NULL LIMIT 1), %(model)s) "
        "= %(model)s AND {pending} ORDER BY m.created_at, m.id LIMIT %(limit)s "
        "FOR UPDATE OF m SKIP LOCKED"
    ).format(t=tables.tenant, mem=tables.memories.ident,
             pending=pending_embedding_predicate("m"))


@lru_cache(maxsize=64)
def store_vectors_statement_citus(tables: Tables) -> sql.Composed:
    """The vectors of :func:`store_vectors_statement` for one tenant, ``%(tenant)s``, on a
    Citus coordinator, without the journal (Citus plans an ``INSERT`` in a CTE through
    ``COPY``, which row-level security refuses): returns the ids stored, whose ``embedded``
    events the engine then inserts with ``VALUES`` in the same transaction."""
    return sql.SQL(
        "UPDATE {mem} AS m SET embedding = b.vector::halfvec, embedding_model = %(model)s "
        "FROM unnest(%(ids)s::uuid[], %(vectors)s::text[]) AS b(id, vector) "
        "WHERE m.{t} = %(tenant)s AND m.id = b.id AND {pending} RETURNING m.id"
    ).format(t=tables.tenant, mem=tables.memories.ident,
             pending=pending_embedding_predicate("m"))


@lru_cache(maxsize=64)
def pending_count_statement(tables: Tables) -> sql.Composed:
    """How many rows of ``%(tenant)s`` wait for a vector (on the pending-embedding index)."""
    return sql.SQL("SELECT count(*) FROM {mem} AS m WHERE m.{t} = %(tenant)s AND {pending}"
                   ).format(mem=tables.memories.ident, t=tables.tenant,
                            pending=pending_embedding_predicate("m"))


class EmbedBatch:
    """One batch as the worker handles it: the rows found, then their texts and the
    parameters of :func:`store_vectors_statement` once the vectors are known."""

    def __init__(self, spec: AgentSpec, rows: Sequence[Sequence[Any]]) -> None:
        from primitives.engine._core import embedding_text

        self.rows = rows
        self.texts = tuple(embedding_text(spec, content, envelope or {}, event_time)
                           for _, _, content, envelope, event_time in rows)

    def params(self, vectors: Sequence[Sequence[float]], model: str,
               actor: str) -> dict[str, Any]:
        from primitives.retrieval import vector_literal

        return {"tenant_of": [row[0] for row in self.rows], "ids": [row[1] for row in self.rows],
                "vectors": [vector_literal(v) for v in vectors], "model": model,
                "actor": actor}


def embedding_batch(conn: psycopg.Connection[Any], spec: AgentSpec, tables: Tables,
                    tenants: Sequence[str], embedder: Any, *, batch: int,
                    actor: str) -> int:
    """Embed one batch of the waiting rows of ``tenants`` on ``conn`` (already in the
    transaction, as a role that sees those tenants); the rows stored."""
    rows = conn.execute(pending_rows_statement(tables), {
        "tenants": list(tenants), "model": embedder.model_id, "limit": batch}).fetchall()
    if not rows:
        return 0
    work = EmbedBatch(spec, rows)
    vectors = embedder.embed_documents(work.texts)
    row = conn.execute(store_vectors_statement(tables),
                       work.params(vectors, embedder.model_id, actor)).fetchone()
    return int(row[0]) if row else 0


def embedding_batch_citus(conn: psycopg.Connection[Any], spec: AgentSpec, tables: Tables,
                          tenant: str, embedder: Any, *, batch: int, actor: str) -> int:
    """:func:`embedding_batch` for one tenant on a Citus coordinator: the statements name the
    tenant in every table, so each is routed to its shard (:func:`pending_rows_statement_citus`,
    :func:`store_vectors_statement_citus`), and the ``embedded`` events follow with
    ``VALUES``; the rows stored."""
    rows = conn.execute(pending_rows_statement_citus(tables), {
        "tenant": tenant, "model": embedder.model_id, "limit": batch}).fetchall()
    if not rows:
        return 0
    work = EmbedBatch(spec, rows)
    params = work.params(embedder.embed_documents(work.texts), embedder.model_id, actor)
    stored = conn.execute(store_vectors_statement_citus(tables), {
        "tenant": tenant, "model": params["model"], "ids": params["ids"],
        "vectors": params["vectors"]}).fetchall()
    if stored:
        conn.execute(*embedded_events_citus(tables, tenant, [i for (i,) in stored],
                                            params["model"], actor))
    return len(stored)


def embedded_events_citus(tables: Tables, tenant: str, ids: Sequence[Any], model: str,
                          actor: str) -> tuple[sql.Composed, dict[str, Any]]:
    """The ``embedded`` events of the rows :func:`store_vectors_statement_citus` stored
    (``ids``), one ``INSERT ... VALUES`` routed to the tenant's shard, in id order as the
    single-node statement journals them."""
    from primitives.lifecycle._cluster_writes import insert_values

    return insert_values(
        tables.events.ident, tables.tenant,
        ("event_id", "kind", "memory_id", "actor", "payload"),
        [[tenant, uuid4(), EMBEDDED_EVENT_KIND, memory_id, actor, Jsonb({"model": model})]
         for memory_id in sorted(ids)])


def embed_pending_job(ctx: JobContext, *, batch: int = DEFAULT_BATCH) -> int:
    """The maintain job: embed every waiting row of ``ctx.tenants`` with ``ctx.embedder``,
    as the maintainer, one short transaction per batch of rows (each journalled and
    committed on its own, so a stopped run keeps what it stored and a rerun finishes it).
    Without an embedder (``maintain`` was not given one) it does nothing and returns 0; an
    embedder of other dimensions than the spec's is refused (``ModelMismatch``)."""
    if ctx.embedder is None or not ctx.embedding:
        return 0
    dims = ctx.spec.retrieval.embedding.dims
    if ctx.embedder.dims != dims:
        raise ModelMismatch(
            f"maintain was given {ctx.embedder.model_id}, which makes {ctx.embedder.dims}-dim "
            f"vectors; agent '{ctx.spec.agent}' stores {dims} (retrieval.embedding.dims)",
            model=ctx.embedder.model_id)
    total = 0
    with psycopg.connect(ctx.dsn, autocommit=True) as conn:
        conn.execute("SET default_transaction_isolation = 'read committed'")
        # on a coordinator one tenant at a time, each statement routed to its shard
        groups = [[t] for t in ctx.tenants] if ctx.citus else [list(ctx.tenants)]
        for tenants in groups:
            while True:
                with conn.transaction():
                    conn.execute(sql.SQL("SET LOCAL ROLE {}").format(
                        sql.Identifier(MAINTAINER_ROLE)))
                    if ctx.citus:
                        stored = embedding_batch_citus(conn, ctx.spec, ctx.tables, tenants[0],
                                                       ctx.embedder, batch=batch,
                                                       actor=ctx.actor)
                    else:
                        stored = embedding_batch(conn, ctx.spec, ctx.tables, tenants,
                                                 ctx.embedder, batch=batch, actor=ctx.actor)
                if not stored:
                    break
                total += stored
    return total


def embed_jobs(spec: AgentSpec, tables: Tables) -> list[MaintenanceJob]:
    """Every spec gets the job: rows written without a vector (deferred, or by an engine
    without an embedder) are embedded whenever ``maintain`` is handed an embedder."""
    return [MaintenanceJob("embed_pending", embed_pending_job)]
