"""Tables a spec adds on demand: the graph (seed 002) and governed writes (seed 001).

``graph:`` adds typed edges between memory rows, canonical entities, the memory-entity
junction and the per-session consolidation ledger. A write policy in mode ``governed``
adds action requests and their (append-only) approvals.
"""

from __future__ import annotations

from psycopg import sql

from primitives.compile._capabilities import Capabilities
from primitives.compile._ddl import (
    EMPTY_JSONB,
    EMPTY_TEXT_ARRAY,
    INTEGER,
    JSONB,
    NOW,
    RANDOM_UUID,
    REAL,
    TEXT,
    TEXT_ARRAY,
    TIMESTAMPTZ,
    UUID,
    Column,
    Constraint,
    Index,
    TableDef,
    check,
    foreign_key,
    in_list,
    primary_key,
)
from primitives.compile._definer import pii_raw_functions
from primitives.compile._names import Table, Tables
from primitives.compile._tables import append_only_triggers, gin_index, tenant_column
from primitives.spec import AgentSpec, Graph

__all__ = [
    "ENTITY_NAME_CHARS",
    "REQUEST_STATUSES",
    "action_requests_table",
    "approvals_table",
    "edges_table",
    "entities_table",
    "node_entities_table",
    "pii_raw_table",
    "sessions_table",
]

ENTITY_NAME_CHARS = 512
"""Upper bound on an entity's canonical name."""

REQUEST_STATUSES = ("pending", "approved", "rejected", "executed")
"""Lifecycle of a governed action request."""

_EMPTY_JSON_ARRAY = sql.SQL("'[]'::jsonb")


def _ts(name: str, *, now: bool = False) -> Column:
    return Column(name, TIMESTAMPTZ, not_null=now, default=NOW if now else None)


def _required(table: Table | None) -> Table:
    if table is None:  # pragma: no cover - compile_plan only calls these when the spec needs them
        raise AssertionError("table not part of this agent")
    return table


def _cascade_to(name: str, tenant: str, column: str, target: Table) -> Constraint:
    return foreign_key(name, (tenant, column), target, (tenant, "id"), on_delete_cascade=True)


def edges_table(spec: AgentSpec, graph: Graph, tables: Tables) -> TableDef:
    """``<prefix>_edges``: typed, weighted, time-bounded relations between memory rows."""
    t, name = tables.tenant_column, tables.object_name
    limits = spec.persistence.store.limits
    columns = (
        tenant_column(tables),
        Column("id", UUID, not_null=True, default=RANDOM_UUID),
        Column("source_id", UUID, not_null=True),
        Column("target_id", UUID, not_null=True),
        Column("relation_type", TEXT, not_null=True),
        Column("predicate", TEXT),
        Column("weight", REAL, not_null=True, default=sql.SQL("1")),
        Column("confidence", REAL, not_null=True, default=sql.SQL("1")),
        _ts("valid_from", now=True),
        _ts("valid_until"),
        Column("evidence", JSONB, not_null=True, default=_EMPTY_JSON_ARRAY),
        _ts("created_at", now=True),
    )
    constraints = (
        primary_key(name("edges_pkey"), (t, "id")),
        _cascade_to(name("edges_source_fkey"), t, "source_id", tables.memories),
        _cascade_to(name("edges_target_fkey"), t, "target_id", tables.memories),
        check(name("edges_relation_type_check"),
              sql.SQL("relation_type IN ({})").format(in_list(graph.edges))),
        check(name("edges_confidence_check"), sql.SQL("confidence BETWEEN 0 AND 1")),
        check(name("edges_evidence_check"), sql.SQL("octet_length(evidence::text) <= {}").format(
            sql.Literal(limits.value_bytes))),
    )
    tenant = sql.Identifier(t)
    indexes = tuple(
        Index(name(f"edges_{end}_idx"), "btree",
              (tenant, sql.Identifier(f"{end}_id"), sql.Identifier("relation_type")), t)
        for end in ("source", "target")
    )
    return TableDef(
        table=_required(tables.edges),
        columns=columns,
        constraints=constraints,
        indexes=indexes,
        app_update_columns=("valid_until", "evidence"),  # evidence: cleared by erasure
        comment=(
            f"Typed edges ({', '.join(graph.edges)}) between memory rows of agent "
            f"'{tables.agent}'; removed with their endpoints."
        ),
    )


def entities_table(
    spec: AgentSpec, graph: Graph, tables: Tables, capabilities: Capabilities
) -> TableDef:
    """``<prefix>_entities``: canonical identities (people, projects, ...) with aliases."""
    t, name = tables.tenant_column, tables.object_name
    columns = (
        tenant_column(tables),
        Column("id", UUID, not_null=True, default=RANDOM_UUID),
        Column("canonical_name", TEXT, not_null=True),
        Column("type", TEXT, not_null=True),
        Column("aliases", TEXT_ARRAY, not_null=True, default=EMPTY_TEXT_ARRAY),
        Column("summary", TEXT),
        Column("mention_count", INTEGER, not_null=True, default=sql.SQL("0")),
        _ts("first_seen", now=True),
        _ts("last_updated", now=True),
    )
    constraints = [
        primary_key(name("entities_pkey"), (t, "id")),
        check(name("entities_name_check"), sql.SQL("char_length(canonical_name) <= {}").format(
            sql.Literal(ENTITY_NAME_CHARS))),
        check(name("entities_summary_check"), sql.SQL("char_length(summary) <= {}").format(
            sql.Literal(spec.persistence.store.limits.content_chars))),
    ]
    if graph.entity_types:
        constraints.append(check(name("entities_type_check"),
                                 sql.SQL("type IN ({})").format(in_list(graph.entity_types))))
    tenant = sql.Identifier(t)
    indexes = (
        Index(name("entities_name_key"), "btree",
              (tenant, sql.SQL("lower(canonical_name)"), sql.Identifier("type")), t,
              unique=True),
        gin_index(name("entities_aliases_idx"), t, sql.Identifier("aliases"), capabilities),
    )
    return TableDef(
        table=_required(tables.entities),
        columns=columns,
        constraints=tuple(constraints),
        indexes=indexes,
        # canonical_name: erasure replaces a subject's name with its hash
        app_update_columns=("canonical_name", "aliases", "summary", "mention_count",
                            "last_updated"),
        comment=f"Canonical entities mentioned in the memory of agent '{tables.agent}'.",
    )


def node_entities_table(tables: Tables) -> TableDef:
    """``<prefix>_node_entities``: which memory rows mention which entity."""
    t, name = tables.tenant_column, tables.object_name
    columns = (
        tenant_column(tables),
        Column("memory_id", UUID, not_null=True),
        Column("entity_id", UUID, not_null=True),
    )
    constraints = (
        primary_key(name("node_entities_pkey"), (t, "memory_id", "entity_id")),
        _cascade_to(name("node_entities_memory_fkey"), t, "memory_id", tables.memories),
        _cascade_to(name("node_entities_entity_fkey"), t, "entity_id", _required(tables.entities)),
    )
    return TableDef(
        table=_required(tables.node_entities),
        columns=columns,
        constraints=constraints,
        indexes=(Index(name("node_entities_entity_idx"), "btree",
                       (sql.Identifier(t), sql.Identifier("entity_id")), t),),
        comment=f"Memory row -> entity mentions of agent '{tables.agent}'.",
    )


def sessions_table(tables: Tables) -> TableDef:
    """``<prefix>_sessions``: sessions already consolidated (consolidation is idempotent)."""
    t, name = tables.tenant_column, tables.object_name
    return TableDef(
        table=_required(tables.sessions),
        columns=(
            tenant_column(tables),
            Column("session_id", TEXT, not_null=True),
            _ts("consolidated_at", now=True),
        ),
        constraints=(primary_key(name("sessions_pkey"), (t, "session_id")),),
        comment=f"Consolidated sessions of agent '{tables.agent}' (one row per session).",
    )


def action_requests_table(spec: AgentSpec, tables: Tables) -> TableDef:
    """``<prefix>_action_requests``: governed writes waiting for, or past, their approval."""
    t, name = tables.tenant_column, tables.object_name
    columns = (
        tenant_column(tables),
        Column("id", UUID, not_null=True, default=RANDOM_UUID),
        Column("kind", TEXT, not_null=True),
        Column("memory_id", UUID),
        Column("target_key", TEXT),
        Column("payload", JSONB, not_null=True, default=EMPTY_JSONB),
        Column("justification", TEXT),
        Column("status", TEXT, not_null=True, default=sql.Literal("pending")),
        _ts("created_at", now=True),
        _ts("decided_at"),
    )
    constraints = (
        primary_key(name("action_requests_pkey"), (t, "id")),
        check(name("action_requests_status_check"),
              sql.SQL("status IN ({})").format(in_list(REQUEST_STATUSES))),
        check(name("action_requests_payload_check"),
              sql.SQL("octet_length(payload::text) <= {}").format(
                  sql.Literal(spec.persistence.store.limits.value_bytes))),
    )
    return TableDef(
        table=_required(tables.action_requests),
        columns=columns,
        constraints=constraints,
        indexes=(Index(name("action_requests_status_idx"), "btree",
                       (sql.Identifier(t), sql.Identifier("status"),
                        sql.Identifier("created_at")), t),),
        app_update_columns=("status", "decided_at"),  # a decision closes or executes it
        comment=(
            f"Governed write requests of agent '{tables.agent}': a write in mode 'governed' "
            "runs only once its request is approved."
        ),
    )


def approvals_table(tables: Tables) -> TableDef:
    """``<prefix>_approvals``: one decision per approver and request (append-only)."""
    t, name = tables.tenant_column, tables.object_name
    columns = (
        tenant_column(tables),
        Column("request_id", UUID, not_null=True),
        Column("approver", TEXT, not_null=True),
        Column("decision", TEXT, not_null=True),
        _ts("at", now=True),
    )
    constraints = (
        primary_key(name("approvals_pkey"), (t, "request_id", "approver")),
        foreign_key(name("approvals_request_fkey"), (t, "request_id"),
                    _required(tables.action_requests), (t, "id")),
        check(name("approvals_decision_check"),
              sql.SQL("decision IN ({})").format(in_list(("approve", "reject")))),
    )
    return TableDef(
        table=_required(tables.approvals),
        columns=columns,
        constraints=constraints,
        triggers=append_only_triggers(),
        app_privileges=("SELECT", "INSERT"),
        comment=f"Approval decisions on governed requests of agent '{tables.agent}'. Append-only.",
    )


def pii_raw_table(tables: Tables, *, embedding: bool = False) -> TableDef:
    """``<prefix>_pii_raw``: the raw fields of a write whose personal data was redacted, kept
    because the write named a consent event. The app role may only INSERT; the privacy
    admin's read function returns a row and journals the read; erasure deletes it; a row
    removed at its scope's end takes its raw copy with it."""
    t, name = tables.tenant_column, tables.object_name
    columns = (
        tenant_column(tables),
        Column("memory_id", UUID, not_null=True),
        Column("content", TEXT, not_null=True),
        Column("value", JSONB, not_null=True, default=EMPTY_JSONB),
        Column("envelope", JSONB, not_null=True, default=EMPTY_JSONB),
        Column("consent_event", UUID, not_null=True),
        _ts("created_at", now=True),
    )
    constraints = (
        primary_key(name("pii_raw_pkey"), (t, "memory_id")),
        foreign_key(name("pii_raw_memory_fkey"), (t, "memory_id"), tables.memories,
                    (t, "id"), on_delete_cascade=True),
    )
    return TableDef(
        table=_required(tables.pii_raw),
        columns=columns,
        constraints=constraints,
        app_privileges=("INSERT",),
        functions=pii_raw_functions(tables, embedding=embedding),
        comment=f"Raw personal data of agent '{tables.agent}' kept with logged consent; read "
                "only through the privacy admin's journalled function.",
    )
