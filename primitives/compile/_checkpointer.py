"""The LangGraph checkpointer's tables, tenant-isolated, in the spec's checkpointer schema.

LangGraph's Postgres saver keeps thread state in three tables (checkpoints, channel blobs,
pending writes) created by ``setup()`` as whoever connects. Here the compiled plan creates
them, once per agent, as the owner role, like every other table of the agent: the tenant
column leads each primary key, row-level security is enabled and forced, and the
application role gets exactly the privileges the saver needs: SELECT, INSERT, UPDATE of the
columns an upsert replaces, and its deletes (threads, runs, pruning) through SECURITY
DEFINER functions (:mod:`primitives.compile._definer`), never a table-level DELETE.

Names: ``<checkpointer schema>.<prefix>_checkpoints``, ``<prefix>_checkpoint_blobs``,
``<prefix>_checkpoint_writes``; agents sharing a checkpointer schema keep their own tables
(their tenant columns differ).

>>> from primitives.compile import agent_tables
>>> from primitives.spec import load_spec
>>> tables = agent_tables(load_spec("agents/spectral_agent.yaml"))  # doctest: +SKIP
>>> checkpointer_tables(tables).checkpoints.qualified  # doctest: +SKIP
'langgraph.spectral_checkpoints'
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg import sql

from primitives.compile._ddl import (
    INTEGER,
    JSONB,
    TEXT,
    Column,
    Privilege,
    TableDef,
    primary_key,
)
from primitives.compile._definer import checkpoint_functions
from primitives.compile._names import Table, Tables
from primitives.spec import AgentSpec

__all__ = ["CheckpointerTables", "checkpointer_definitions", "checkpointer_tables"]

BYTEA = sql.SQL("bytea")
_EMPTY_TEXT = sql.SQL("''")


@dataclass(frozen=True)
class CheckpointerTables:
    """The three checkpointer tables of one agent and its tenant column."""

    tenant_column: str
    checkpoints: Table
    blobs: Table
    writes: Table

    @property
    def tenant(self) -> sql.Identifier:
        return sql.Identifier(self.tenant_column)


def checkpointer_tables(tables: Tables) -> CheckpointerTables | None:
    """The checkpointer's tables of ``agent_tables(spec)``, or ``None`` when
    ``persistence.checkpointer.enabled`` is false."""
    if tables.checkpoints is None or tables.checkpoint_blobs is None \
            or tables.checkpoint_writes is None:
        return None
    return CheckpointerTables(tables.tenant_column, tables.checkpoints, tables.checkpoint_blobs,
                              tables.checkpoint_writes)


def checkpointer_definitions(spec: AgentSpec, tables: Tables) -> tuple[TableDef, ...]:
    """The checkpointer's table definitions (empty when the checkpointer is disabled)."""
    names = checkpointer_tables(tables)
    if names is None:
        return ()
    t, name = tables.tenant_column, tables.object_name
    tenant = Column(t, TEXT, not_null=True)
    thread = (Column("thread_id", TEXT, not_null=True),
              Column("checkpoint_ns", TEXT, not_null=True, default=_EMPTY_TEXT))
    privileges: tuple[Privilege, ...] = ("SELECT", "INSERT")
    where = f"of agent '{spec.agent}', isolated by {t} (row-level security)"
    checkpoints = TableDef(
        table=names.checkpoints,
        columns=(tenant, *thread, Column("checkpoint_id", TEXT, not_null=True),
                 Column("parent_checkpoint_id", TEXT), Column("type", TEXT),
                 Column("checkpoint", JSONB, not_null=True),
                 Column("metadata", JSONB, not_null=True, default=sql.SQL("'{}'::jsonb"))),
        constraints=(primary_key(name("checkpoints_pkey"),
                                 (t, "thread_id", "checkpoint_ns", "checkpoint_id")),),
        app_privileges=privileges,
        app_update_columns=("checkpoint", "metadata"),
        comment=f"LangGraph checkpoints (thread state) {where}.",
    )
    blobs = TableDef(
        table=names.blobs,
        columns=(tenant, *thread, Column("channel", TEXT, not_null=True),
                 Column("version", TEXT, not_null=True), Column("type", TEXT, not_null=True),
                 Column("blob", BYTEA)),
        constraints=(primary_key(name("checkpoint_blobs_pkey"),
                                 (t, "thread_id", "checkpoint_ns", "channel", "version")),),
        app_privileges=privileges,
        comment=f"LangGraph channel values by version, serialized by the saver, {where}.",
    )
    writes = TableDef(
        table=names.writes,
        columns=(tenant, *thread, Column("checkpoint_id", TEXT, not_null=True),
                 Column("task_id", TEXT, not_null=True),
                 Column("task_path", TEXT, not_null=True, default=_EMPTY_TEXT),
                 Column("idx", INTEGER, not_null=True), Column("channel", TEXT, not_null=True),
                 Column("type", TEXT), Column("blob", BYTEA, not_null=True)),
        constraints=(primary_key(name("checkpoint_writes_pkey"),
                                 (t, "thread_id", "checkpoint_ns", "checkpoint_id", "task_id",
                                  "idx")),),
        app_privileges=privileges,
        app_update_columns=("channel", "type", "blob"),
        comment=f"LangGraph pending writes of checkpoints {where}.",
        # the deletes of all three tables, created once the three exist
        functions=checkpoint_functions(names),
    )
    return checkpoints, blobs, writes
