"""The operator's step after a governed erasure: rewrite the tables erasure changes.

``erase`` updates rows in place, so the former versions stay in the table files (dead
tuples), in their indexes (the text index's lexemes, the trigram index) and in TOAST until
the table is rewritten. ``pg_dump`` never shows them, but a copy of the data directory
does. ``VACUUM (FULL)`` rewrites each table and its indexes into new files; it takes an
``ACCESS EXCLUSIVE`` lock, so every tenant of the agent waits while it runs.

>>> from primitives.compile import agent_tables
>>> from primitives.spec import load_spec
>>> tables = agent_tables(load_spec("agents/assistant_memory.yaml"))  # doctest: +SKIP
>>> [s.as_string(None) for s in erasure_vacuum(tables)][0]  # doctest: +SKIP
'VACUUM (FULL, ANALYZE) "memory"."assistant_memories"'
"""

from __future__ import annotations

from psycopg import sql

from primitives.compile._names import Tables

__all__ = ["erasure_vacuum"]


def erasure_vacuum(tables: Tables) -> tuple[sql.Composed, ...]:
    """One ``VACUUM (FULL, ANALYZE)`` per table an erasure writes or deletes from: the
    memories, the graph's entities and edges, and the checkpointer's three tables (those
    the spec has). Run by the owner or an administrator, outside a transaction."""
    touched = (tables.memories, tables.entities, tables.edges, tables.checkpoints,
               tables.checkpoint_blobs, tables.checkpoint_writes)
    return tuple(sql.SQL("VACUUM (FULL, ANALYZE) {}").format(table.ident)
                 for table in touched if table is not None)
