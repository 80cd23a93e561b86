"""The writes that follow a lifecycle statement's cluster form on a Citus coordinator.

A statement that inserts from its own results (an ``INSERT`` in a common table expression)
cannot run on a coordinator as it is: Citus plans such an insert on its own, as an
``INSERT ... SELECT`` through ``COPY``, which row-level security refuses. Its cluster form
(``citus=True`` in :mod:`primitives.lifecycle._boundary` and :mod:`primitives.lifecycle._decay`)
selects what it would insert and returns it; the builders here turn that into
``INSERT ... VALUES`` statements, each routed to the tenant's shard, run next in the same
transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any
from uuid import UUID, uuid4

from psycopg import sql
from psycopg.types.json import Jsonb

from primitives.compile._definer import transient_delete_function
from primitives.compile._names import Tables
from primitives.spec import AgentSpec

__all__ = ["corroboration_writes_citus", "end_scope_writes_citus", "insert_values",
           "journal_writes_citus", "memory_copy_columns", "remove_statement_citus"]

CITUS_PARTS = 6
"""The columns that end the cluster form of ``end_scopes_statement``'s rows: the removed
rows' ids, then the promoted rows, the ledger's rows, the ``derived_from`` edges, the closed
scopes and the journal's events, each a JSON array."""

_NOTHING = sql.SQL("")


def memory_copy_columns(tables: Tables, embedding: bool) -> list[str]:
    """The columns a promoted row takes from its evidence, besides the anchor columns."""
    columns = ["namespace", "value", "envelope", "tags", "event_time"]
    if embedding:
        columns += ["embedding", "embedding_model"]
    return columns


def end_scope_writes_citus(spec: AgentSpec, tables: Tables, row: Sequence[Any], *,
                           embedding: bool, params: dict[str, Any],
                           event_ids: Callable[[], UUID]
                           ) -> list[tuple[sql.Composed, dict[str, Any]]]:
    """What the cluster form of :func:`end_scopes_statement` (``row``, its result for one
    tenant's scope, ``params`` its parameters) leaves to write, as statements that Citus
    routes to the tenant's shards, in the single-node statement's order: the promoted rows
    (their columns as the single-node statement sets them), the ledger, the
    ``derived_from`` edges, the closed scope and the journal's events, each event with an
    id of ``event_ids``; each an ``INSERT ... VALUES`` of the values the first statement
    returned as text. The removed rows leave last (:func:`remove_statement_citus`)."""
    t, mem = tables.tenant, tables.memories.ident
    tenant, actor = params["tenant"], params["actor"]
    promoted, ledger, edges, closed, journal = (part or [] for part in row[-5:])
    writes: list[tuple[sql.Composed, dict[str, Any]]] = []

    def values(table: sql.Composable, columns: Sequence[str], rows: list[list[Any]],
               tail: sql.Composable = _NOTHING) -> None:
        if rows:
            writes.append(insert_values(table, t, columns, rows, tail))

    anchors = [c for c in tables.anchor_columns if c != tables.tenant_column]
    values(mem, (*anchors, "id", "tier", "typology", "scope_id", "key", "content",
                 "provenance", "corroborated_at", *memory_copy_columns(tables, embedding),
                 "actor"), [[tenant, *r, actor] for r in promoted])
    values(tables.promotions.ident, ("rule", "source_id", "target_id"),
           [[tenant, *r] for r in ledger], sql.SQL(" ON CONFLICT DO NOTHING"))
    if tables.edges is not None:
        values(tables.edges.ident, ("source_id", "target_id", "relation_type"),
               [[tenant, *e, "derived_from"] for e in edges])
    values(tables.scopes.ident, ("tier", "scope_id", "closed_at"),
           [[tenant, *c] for c in closed], sql.SQL(
               " ON CONFLICT ({}, tier, scope_id) DO UPDATE SET closed_at = EXCLUDED.closed_at"
           ).format(t))
    values(tables.events.ident, ("event_id", "kind", "memory_id", "actor", "payload"),
           [[tenant, event_ids(), kind, memory_id, actor, Jsonb(payload)]
            for kind, memory_id, payload in journal])
    return writes


def insert_values(table: sql.Composable, tenant: sql.Composable, columns: Sequence[str],
                   rows: list[list[Any]], tail: sql.Composable = _NOTHING
                   ) -> tuple[sql.Composed, dict[str, Any]]:
    """``INSERT INTO table (tenant, columns) VALUES ...`` of ``rows`` (each the tenant, then
    a value per column), every value a parameter of its own."""
    named: dict[str, Any] = {}
    tuples = []
    for r in rows:
        names = [f"v{len(named) + i}" for i in range(len(r))]
        named.update(zip(names, r, strict=True))
        tuples.append(sql.SQL("({})").format(sql.SQL(", ").join(map(sql.Placeholder, names))))
    return sql.SQL("INSERT INTO {} ({}, {}) VALUES {}{}").format(
        table, tenant, sql.SQL(", ").join(map(sql.Identifier, columns)),
        sql.SQL(", ").join(tuples), tail), named


def corroboration_writes_citus(tables: Tables, row: Sequence[Any], *, embedding: bool,
                               params: dict[str, Any], event_ids: Callable[[], UUID]
                               ) -> list[tuple[sql.Composed, dict[str, Any]]]:
    """What the cluster form of :func:`corroboration_statement` (``row``, its result for
    ``params``) leaves to write, as :func:`end_scope_writes_citus` does: the promoted rows,
    the ledger, the ``derived_from`` edges and the journal's events."""
    t = tables.tenant
    tenant, actor = params["tenant"], params["actor"]
    promoted, ledger, edges, journal = row[1] or [], row[2] or [], row[3] or [], row[4] or []
    anchors = [c for c in tables.anchor_columns if c != tables.tenant_column]
    vector = ("embedding", "embedding_model") if embedding else ()
    writes = []
    if promoted:
        writes.append(insert_values(tables.memories.ident, t, (
            *anchors, "id", "tier", "typology", "scope_id", "key", "namespace", "content",
            "value", "envelope", "tags", "provenance", "event_time", "corroborated_at",
            *vector, "actor"), [[tenant, *r, actor] for r in promoted]))
    if ledger:
        writes.append(insert_values(tables.promotions.ident, t, (
            "rule", "source_id", "target_id"), [[tenant, *r] for r in ledger],
            sql.SQL(" ON CONFLICT DO NOTHING")))
    if edges and tables.edges is not None:
        writes.append(insert_values(tables.edges.ident, t, (
            "source_id", "target_id", "relation_type"),
            [[tenant, *e, "derived_from"] for e in edges]))
    if journal:
        writes.append(insert_values(tables.events.ident, t, (
            "event_id", "kind", "memory_id", "actor", "payload"),
            [[tenant, event_ids(), kind, memory_id, actor, Jsonb(payload)]
             for kind, memory_id, payload in journal]))
    return writes


def remove_statement_citus(tables: Tables) -> sql.Composed:
    """Delete the rows ``%(ids)s`` of ``%(tenant)s`` that the cluster form of
    :func:`end_scopes_statement` journalled as removed, through the cluster's delete
    function, which the coordinator sends to the tenant's worker."""
    return sql.SQL("SELECT {}(%(tenant)s::text, %(ids)s::uuid[])").format(
        transient_delete_function(tables))


def journal_writes_citus(tables: Tables, row: Sequence[Any], params: Mapping[str, Any]
                         ) -> list[tuple[sql.Composed, dict[str, Any]]]:
    """The events a pass's cluster form returned last in ``row`` (kind, memory id,
    payload), inserted with ``VALUES`` for ``params``' tenant and actor."""
    events = row[-1] or []
    if not events:
        return []
    return [insert_values(tables.events.ident, tables.tenant, (
        "event_id", "kind", "memory_id", "actor", "payload"),
        [[params["tenant"], uuid4(), kind, memory_id, params["actor"], Jsonb(payload)]
         for kind, memory_id, payload in events])]
