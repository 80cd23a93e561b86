"""What the sync and async engines share: spec, tables, effective signals, contexts."""

from __future__ import annotations

from typing import Any

import psycopg

from primitives.compile import Tables, agent_tables
from primitives.engine._anchor import Anchor
from primitives.engine._core import Context
from primitives.spec import AgentSpec

__all__ = ["HAS_EMBEDDING", "EngineBase", "effective_signals", "has_embedding_column"]

QUERY_SIGNALS = ("lexical", "envelope", "recency")
"""Signals the engine evaluates in SQL today; ``semantic`` needs an embedder (DESIGN §7)."""

RESET_SESSION = "RESET ALL"
"""Run when a connection returns to the pool: session settings back to their defaults."""

HAS_EMBEDDING = (
    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute "
    "WHERE attrelid = %s::regclass AND attname = 'embedding' AND NOT attisdropped)"
)


def has_embedding_column(conn: psycopg.Connection[Any], tables: Tables) -> bool:
    row = conn.execute(HAS_EMBEDDING, (tables.memories.qualified,)).fetchone()
    return bool(row and row[0])


async def ahas_embedding_column(conn: psycopg.AsyncConnection[Any], tables: Tables) -> bool:
    cursor = await conn.execute(HAS_EMBEDDING, (tables.memories.qualified,))
    row = await cursor.fetchone()
    return bool(row and row[0])


def effective_signals(spec: AgentSpec) -> tuple[tuple[str, ...], list[str]]:
    """The signals retrieval will run, and a warning for each declared one it cannot."""
    wanted = list(spec.retrieval.signals)
    notes: list[str] = []
    if "semantic" in wanted:
        wanted.remove("semantic")
        notes.append(
            f"agent '{spec.agent}': the semantic signal needs an embedder, which this engine "
            "does not have; retrieval uses lexical full-text search in its place"
        )
        if "lexical" not in wanted:
            wanted.insert(0, "lexical")
    if "graph" in wanted:
        wanted.remove("graph")
        notes.append(f"agent '{spec.agent}': the graph signal is not evaluated by this engine")
    return tuple(s for s in wanted if s in QUERY_SIGNALS), notes


class EngineBase:
    def __init__(self, spec: AgentSpec, *, has_embedding: bool) -> None:
        self.spec = spec
        self.tables: Tables = agent_tables(spec)
        self.signals, self.warnings = effective_signals(spec)
        self.has_embedding = has_embedding

    @staticmethod
    def tables_for(spec: AgentSpec) -> Tables:
        return agent_tables(spec)

    def context(self, anchor: Anchor, actor: str) -> Context:
        return Context(self.spec, self.tables, self.signals, anchor, actor, self.has_embedding)
