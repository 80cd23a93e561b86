"""``primitives reembed``: every stored vector of an agent made again with a new model or dims.

A change of ``retrieval.embedding.dims`` (or of the model behind it) needs every row's
vector made again: cosine across two models means nothing, and a ``halfvec(384)`` column
cannot hold a 768-dim vector. ``migrate`` refuses such a change; this is the way through,
without taking retrieval down while it runs:

1. **stage**: a second column ``embedding_next halfvec(<new dims>)`` (with the model and the
   time each vector was made) beside the live one; the agent keeps searching and writing on
   the live column with its old embedder;
2. **backfill**: every unerased row embedded with the new embedder in batches, one short
   transaction each, in key order; a stopped run keeps what it stored and a rerun goes on
   where it stopped;
3. **index**: the vector index built on the staged column (``CONCURRENTLY``: writers go on);
4. **switch**, one transaction: writers wait (``SHARE ROW EXCLUSIVE``) while the rows
   written or changed since their batch are embedded again, rows erased meanwhile lose their
   staged vector, one ``reembedded`` event per tenant is journalled (``{"model", "dims",
   "dims_before", "rows"}``), the staged column and its index replace the live ones, and the
   spec's plan is applied (its views are made again over the new column; the agent's recorded
   shape takes the new dims, with a ``primitives.plan_history`` row for the auditor).

Any other change the spec makes that ``migrate`` would refuse is refused here first, before
anything is written.

After the switch the agent must embed with the new model: an engine still connected with
the old embedder is refused (``ModelMismatch``) rather than mixing vectors.

>>> report = reembed(load_spec("agents/world_agent.yaml"), embedder)  # doctest: +SKIP
>>> report.rows, report.dims                                          # doctest: +SKIP
(1200, 768)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import psycopg
from psycopg import sql

from primitives._evolve import plan_spec, refuse
from primitives.compile import Plan, Tables, compile_plan, require_server_version
from primitives.compile._evolution import Evolution, spec_shape
from primitives.db import resolve_dsn
from primitives.db._connect import connect_failure, with_timeout
from primitives.db._migrate import (
    DDL_XACT_LOCK,
    PlanRecord,
    apply_plan_statements,
    validate_plan,
)
from primitives.embeddings import Embedder
from primitives.errors import MigrationError, ModelMismatch, StorageError
from primitives.spec import AgentSpec

__all__ = ["REEMBEDDED_EVENT_KIND", "ReembedReport", "reembed"]

REEMBEDDED_EVENT_KIND = "reembedded"
"""The journal event of a tenant whose vectors were made again (one per tenant and run)."""

DEFAULT_BATCH = 256
"""Rows per model call."""

_STAGED = "embedding_next"
_STAGED_MODEL = "embedding_next_model"
_STAGED_AT = "embedding_next_at"
_STAGED_INDEX = "memories_embedding_next_idx"


@dataclass(frozen=True)
class ReembedReport:
    agent: str
    model: str
    dims_before: int
    dims: int
    rows: int
    """Vectors made (the backfill's and the switch's together)."""
    tenants: int
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "model": self.model, "dims_before": self.dims_before,
                "dims": self.dims, "rows": self.rows, "tenants": self.tenants,
                "seconds": round(self.seconds, 3)}


Progress = Callable[[int, int], object]
"""``progress(done, total)``: rows embedded so far of those the run found."""


def reembed(spec: AgentSpec, embedder: Embedder, *, dsn: str | None = None,
            batch: int = DEFAULT_BATCH, progress: Progress | None = None) -> ReembedReport:
    """Make every vector of ``spec``'s agent again with ``embedder`` (which must make
    ``spec.retrieval.embedding.dims``-dim vectors), then switch to them: see the module.

    Runs as the administrator (``dsn``, default ``resolve_dsn()``), across every tenant."""
    from primitives._project import canonical_capabilities, detect_capabilities

    if type(batch) is not int or batch < 1:
        raise MigrationError(f"reembed: batch must be a positive integer, got {batch!r}")
    dims = spec.retrieval.embedding.dims
    if embedder.dims != dims:
        raise ModelMismatch(
            f"reembed: {embedder.model_id} makes {embedder.dims}-dim vectors and agent "
            f"'{spec.agent}' declares retrieval.embedding.dims: {dims}", model=embedder.model_id)
    admin = dsn or resolve_dsn()
    try:
        conn = psycopg.connect(with_timeout(admin), autocommit=True)
    except psycopg.Error as err:
        raise StorageError(connect_failure(err, admin, "the admin (to re-embed)")) from err
    started = time.perf_counter()
    with conn:
        caps = detect_capabilities(conn)
        require_server_version(caps)
        plan = compile_plan(spec, capabilities=canonical_capabilities(conn, spec, caps)[0])
        tables = plan.tables
        before = _live_dims(conn, spec, tables)
        evolution = plan_spec(conn, spec, plan)
        # what migrate would refuse, the dims change aside (this is its way through)
        refuse(replace(evolution, changes=tuple(
            c for c in evolution.changes if c.field != "retrieval.embedding.dims")), frozenset())
        try:
            _stage(conn, tables, dims)
            total = _count(conn, tables)
            done = _backfill(conn, spec, tables, embedder, batch, total, progress)
            _index(conn, tables)
            record = _record(spec, plan, evolution, embedder)
            done, tenants = _switch(conn, spec, plan, record, embedder, batch, before, done)
        except psycopg.Error as err:
            raise StorageError(f"reembed of agent '{spec.agent}' failed: {err}; the live "
                               "vectors are unchanged, and a rerun goes on where this one "
                               "stopped") from err
        validate_plan(conn, spec.agent, record)
    if progress is not None:
        progress(total, total)
    return ReembedReport(spec.agent, embedder.model_id, before, dims, done, tenants,
                         time.perf_counter() - started)


def _record(spec: AgentSpec, plan: Plan, evolution: Evolution,
            embedder: Embedder) -> PlanRecord:
    views = [step.title.removesuffix(": view") for step in plan.steps
             if step.title.endswith(": view")]
    # a view's column cannot change type under CREATE OR REPLACE: dropped, the plan remakes it
    drops = tuple(sql.SQL("DROP VIEW IF EXISTS {}").format(sql.Identifier(*name.split(".", 1)))
                  for name in reversed(views))
    return PlanRecord(shape=spec_shape(spec, plan),
                      changes=[c.as_json() for c in evolution.changes],
                      before=drops + tuple(step.statement for step in evolution.before),
                      reason=f"primitives reembed with {embedder.model_id}",
                      validations=tuple(step.statement for step in plan.validations))


def _live_dims(conn: psycopg.Connection[Any], spec: AgentSpec, tables: Tables) -> int:
    if conn.execute("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension "
                    "WHERE extname = 'citus')").fetchone() == (True,):
        raise MigrationError("reembed: this database is a Citus cluster, where the engine "
                             "does not run yet (docs/scaling.md)", agent=spec.agent)
    live = _column_dims(conn, tables, "embedding")
    if live is None:
        raise MigrationError(
            f"reembed: agent '{spec.agent}' has no stored vectors to make again "
            f"({tables.memories.qualified} has no embedding column: not migrated yet, or "
            "the server has no pgvector)", agent=spec.agent)
    return live


def _column_dims(conn: psycopg.Connection[Any], tables: Tables, column: str) -> int | None:
    """The dims of the memories table's vector column ``column``; None when there is none."""
    row = conn.execute(
        "SELECT a.atttypmod FROM pg_catalog.pg_attribute AS a WHERE a.attrelid = "
        "to_regclass(%s) AND a.attname = %s AND NOT a.attisdropped",
        (tables.memories.qualified, column)).fetchone()
    return None if row is None else int(row[0])


def _stage(conn: psycopg.Connection[Any], tables: Tables, dims: int) -> None:
    """The staging columns, for ``dims``; a stage left by a run for other dims is dropped."""
    mem = tables.memories.ident
    with conn.transaction():
        conn.execute(DDL_XACT_LOCK)
        staged = _column_dims(conn, tables, _STAGED)
        if staged is not None and staged != dims:
            conn.execute(sql.SQL("ALTER TABLE {} DROP COLUMN {}, DROP COLUMN {}, DROP COLUMN {}")
                         .format(mem, *map(sql.Identifier, (_STAGED, _STAGED_MODEL, _STAGED_AT))))
        conn.execute(sql.SQL(
            "ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} halfvec({}), "
            "ADD COLUMN IF NOT EXISTS {} text, ADD COLUMN IF NOT EXISTS {} timestamptz"
        ).format(mem, sql.Identifier(_STAGED), sql.Literal(dims), sql.Identifier(_STAGED_MODEL),
                 sql.Identifier(_STAGED_AT)))


def _count(conn: psycopg.Connection[Any], tables: Tables) -> int:
    row = conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE erased_at IS NULL").format(
        tables.memories.ident)).fetchone()
    return int(row[0]) if row else 0


def _select(tables: Tables, *, keyset: bool) -> sql.Composed:
    """Unerased rows whose staged vector is missing, another model's, or older than the row's
    last change: in key order after ``%(tenant)s, %(id)s`` (``keyset``), else any."""
    after = sql.SQL("AND (m.{t}, m.id) > (%(tenant)s, %(id)s) ") if keyset else sql.SQL("")
    return sql.SQL(
        "SELECT m.{t}, m.id, m.content, m.envelope, m.event_time FROM {mem} AS m "
        "WHERE m.erased_at IS NULL {after}"
        "AND (m.{v} IS NULL OR m.{vm} IS DISTINCT FROM %(model)s OR m.updated_at > m.{va}) "
        "ORDER BY m.{t}, m.id LIMIT %(limit)s"
    ).format(mem=tables.memories.ident, after=after.format(t=tables.tenant), t=tables.tenant,
             v=sql.Identifier(_STAGED), vm=sql.Identifier(_STAGED_MODEL),
             va=sql.Identifier(_STAGED_AT))


def _store(tables: Tables) -> sql.Composed:
    return sql.SQL(
        "UPDATE {mem} AS m SET {v} = b.vector::halfvec, {vm} = %(model)s, {va} = now() "
        "FROM unnest(%(tenant_of)s::text[], %(ids)s::uuid[], %(vectors)s::text[]) "
        "AS b(tenant, id, vector) WHERE m.{t} = b.tenant AND m.id = b.id "
        "AND m.erased_at IS NULL"
    ).format(mem=tables.memories.ident, t=tables.tenant, v=sql.Identifier(_STAGED),
             vm=sql.Identifier(_STAGED_MODEL), va=sql.Identifier(_STAGED_AT))


def _embed_rows(conn: psycopg.Connection[Any], spec: AgentSpec, tables: Tables,
                embedder: Embedder, rows: Sequence[Sequence[Any]]) -> None:
    from primitives.engine._core import embedding_text
    from primitives.retrieval import vector_literal

    texts = [embedding_text(spec, content, envelope or {}, event_time)
             for _, _, content, envelope, event_time in rows]
    vectors = embedder.embed_documents(texts)
    conn.execute(_store(tables), {
        "tenant_of": [row[0] for row in rows], "ids": [row[1] for row in rows],
        "vectors": [vector_literal(v) for v in vectors], "model": embedder.model_id})


def _backfill(conn: psycopg.Connection[Any], spec: AgentSpec, tables: Tables,
              embedder: Embedder, batch: int, total: int, progress: Progress | None) -> int:
    done, after = 0, ("", "00000000-0000-0000-0000-000000000000")
    statement = _select(tables, keyset=True)
    while True:
        with conn.transaction():
            rows = conn.execute(statement, {"tenant": after[0], "id": after[1],
                                            "model": embedder.model_id,
                                            "limit": batch}).fetchall()
            if rows:
                _embed_rows(conn, spec, tables, embedder, rows)
        if not rows:
            return done
        done += len(rows)
        after = (rows[-1][0], str(rows[-1][1]))
        if progress is not None:
            progress(min(done, total), total)


def _index(conn: psycopg.Connection[Any], tables: Tables) -> None:
    """The vector index on the staged column, built while writers go on (an index left
    invalid by a stopped build is made again)."""
    staged_index = tables.object_name(_STAGED_INDEX)
    row = conn.execute(
        "SELECT i.indisvalid FROM pg_catalog.pg_index AS i WHERE i.indexrelid = to_regclass(%s)",
        (f'"{tables.schema}"."{staged_index}"',)).fetchone()
    if row is not None and not row[0]:
        conn.execute(sql.SQL("DROP INDEX CONCURRENTLY {}").format(
            sql.Identifier(tables.schema, staged_index)))
    conn.execute(sql.SQL(
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON {} USING hnsw ({} halfvec_cosine_ops)"
    ).format(sql.Identifier(staged_index), tables.memories.ident, sql.Identifier(_STAGED)))


def _switch(conn: psycopg.Connection[Any], spec: AgentSpec, plan: Plan, record: PlanRecord,
            embedder: Embedder, batch: int, before: int, done: int) -> tuple[int, int]:
    tables = plan.tables
    mem, t = tables.memories.ident, tables.tenant
    staged = sql.Identifier(_STAGED)
    statement = _select(tables, keyset=False)
    with conn.transaction():
        conn.execute(DDL_XACT_LOCK)
        conn.execute(sql.SQL("LOCK TABLE {} IN SHARE ROW EXCLUSIVE MODE").format(mem))
        while True:
            rows = conn.execute(statement, {"model": embedder.model_id,
                                            "limit": batch}).fetchall()
            if not rows:
                break
            _embed_rows(conn, spec, tables, embedder, rows)
            done += len(rows)
        conn.execute(sql.SQL("UPDATE {} SET {} = NULL, {} = NULL WHERE erased_at IS NOT NULL "
                             "AND {} IS NOT NULL").format(
            mem, staged, sql.Identifier(_STAGED_MODEL), staged))
        journal = conn.execute(sql.SQL(
            "WITH counted AS (SELECT m.{t} AS tenant, count(*) AS n FROM {mem} AS m "
            "WHERE m.{v} IS NOT NULL GROUP BY m.{t}), "
            "journal AS (INSERT INTO {events} ({t}, event_id, kind, memory_id, actor, payload) "
            "SELECT c.tenant, gen_random_uuid(), {kind}, NULL, current_user, "
            "jsonb_build_object('model', %(model)s::text, 'dims', %(dims)s::int, "
            "'dims_before', %(before)s::int, 'rows', c.n) FROM counted AS c "
            "ORDER BY c.tenant RETURNING 1) SELECT count(*) FROM journal"
        ).format(t=t, mem=mem, v=staged, events=tables.events.ident,
                 kind=sql.Literal(REEMBEDDED_EVENT_KIND)), {
            "model": embedder.model_id, "dims": embedder.dims, "before": before}).fetchone()
        for step in record.before:  # the views dropped, and the spec's own rebuild steps
            conn.execute(step)
        conn.execute(sql.SQL("ALTER TABLE {} DROP COLUMN embedding, DROP COLUMN "
                             "embedding_model, DROP COLUMN {}").format(
            mem, sql.Identifier(_STAGED_AT)))
        conn.execute(sql.SQL("ALTER TABLE {} RENAME COLUMN {} TO embedding").format(mem, staged))
        conn.execute(sql.SQL("ALTER TABLE {} RENAME COLUMN {} TO embedding_model").format(
            mem, sql.Identifier(_STAGED_MODEL)))
        conn.execute(sql.SQL("ALTER INDEX {} RENAME TO {}").format(
            sql.Identifier(tables.schema, tables.object_name(_STAGED_INDEX)),
            sql.Identifier(tables.object_name("memories_embedding_idx"))))
        apply_plan_statements(conn, spec.agent, plan.checksum, plan.statements,
                              replace(record, before=()))
    return done, int(journal[0]) if journal else 0
