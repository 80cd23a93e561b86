"""What the sync and async engines share: spec, tables, effective signals, contexts."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, NamedTuple

import psycopg

from primitives.compile import Tables, agent_tables
from primitives.embeddings import Embedder, as_embedder, cached
from primitives.engine._anchor import Anchor
from primitives.engine._core import Context
from primitives.engine._determinism import job_seed
from primitives.engine._pending import PendingTenants
from primitives.errors import ModelMismatch
from primitives.lifecycle._access import AccessLog
from primitives.lifecycle._decay import decay_models
from primitives.retrieval._intent import classifier_for
from primitives.retrieval._rerank import Reranker
from primitives.spec import AgentSpec

__all__ = [
    "SCHEMA_FEATURES",
    "EngineBase",
    "SchemaFeatures",
    "aschema_features",
    "effective_signals",
    "schema_features",
]

QUERY_SIGNALS = ("semantic", "lexical", "envelope", "graph", "recency")
"""Signals the engine evaluates in SQL; ``semantic`` needs an embedder and pgvector (DESIGN §7),
``graph`` the spec's ``graph:`` tables."""

def render(statement: object, conn: Any) -> Any:
    """``statement`` as query text, rendered once per statement object.

    Builders on the hot path are cached (the same object comes back for the same tables),
    so their text is composed once instead of on every execute. The cache holds the object
    itself, so an entry's id cannot be reused by another object while it is cached.
    """
    if isinstance(statement, str):
        return statement
    entry = _RENDERED.get(id(statement))
    if entry is not None and entry[0] is statement:
        return entry[1]
    text = statement.as_string(conn)  # type: ignore[attr-defined]
    if len(_RENDERED) >= _RENDERED_MAX:
        _RENDERED.clear()  # uncached builders pass through here too; keep the cache bounded
    _RENDERED[id(statement)] = (statement, text)
    return text


# dict get/set are atomic, so executor threads can share it without a lock.
_RENDERED: dict[int, tuple[object, str]] = {}
_RENDERED_MAX = 512

SCHEMA_FEATURES = (
    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute "
    "WHERE attrelid = %(table)s::regclass AND attname = 'embedding' AND NOT attisdropped), "
    "EXISTS (SELECT 1 FROM pg_catalog.pg_index i "
    "JOIN pg_catalog.pg_opclass c ON c.oid = ANY(i.indclass::oid[]) "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.opcnamespace "
    "WHERE i.indrelid = %(table)s::regclass AND n.nspname = 'primitives' "
    "AND c.opcname = 'tsvector_match_ops'), "
    "EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'pg_trgm'), "
    "EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')"
)
"""What the migrated memories table offers the engine: an embedding column (pgvector was
there), a full-text index on the leakproof match (``primitives.db.ensure_text_match``),
pg_trgm (tier boundaries measure near-duplicates with it when rows have no vectors), and
whether the database is part of a Citus cluster."""

class SchemaFeatures(NamedTuple):
    embedding: bool
    text_match: bool
    trigram: bool = False
    citus: bool = False


def _features(row: Any) -> SchemaFeatures:
    return SchemaFeatures(*(bool(row and row[i]) for i in range(4)))


def schema_features(conn: psycopg.Connection[Any], tables: Tables) -> SchemaFeatures:
    """What the engine may use; ``citus``: the statements that Citus cannot route whole
    take their cluster form (``Context.citus``)."""
    return _features(conn.execute(SCHEMA_FEATURES, {"table": tables.memories.qualified}).fetchone())


async def aschema_features(conn: psycopg.AsyncConnection[Any], tables: Tables) -> SchemaFeatures:
    cursor = await conn.execute(SCHEMA_FEATURES, {"table": tables.memories.qualified})
    return _features(await cursor.fetchone())


def effective_signals(spec: AgentSpec, *, embedder: bool = False,
                      vector: bool = False) -> tuple[tuple[str, ...], list[str]]:
    """The signals retrieval will run, and a warning for each declared one it cannot.

    ``semantic`` runs when the engine has an embedder (``embedder``) and the memories table
    has an embedding column (``vector``: pgvector was there at migration).
    """
    wanted = list(spec.retrieval.signals)
    notes: list[str] = []
    if "semantic" in wanted and not (embedder and vector):
        wanted.remove("semantic")
        if not embedder:
            notes.append(
                f"agent '{spec.agent}': the semantic signal needs an embedder, which this "
                "engine does not have (Engine.connect(..., embedder=default_embedder(spec))); "
                "retrieval uses lexical full-text search in its place"
            )
        else:
            notes.append(
                f"agent '{spec.agent}': the semantic signal needs pgvector, which the server "
                "did not have when the spec was migrated (no embedding column); retrieval "
                "uses lexical full-text search in its place"
            )
        if "lexical" not in wanted:
            wanted.insert(0, "lexical")
    if "graph" in wanted and spec.graph is None:  # pragma: no cover - the spec check refuses it
        wanted.remove("graph")
        notes.append(f"agent '{spec.agent}': the graph signal needs a graph: section")
    return tuple(s for s in wanted if s in QUERY_SIGNALS), notes


class EngineBase:
    def __init__(self, spec: AgentSpec, *, has_embedding: bool,
                 embedder: Embedder | None = None, reranker: Reranker | None = None,
                 text_match: bool = False, trigram: bool = True, citus: bool = False) -> None:
        self.spec = spec
        self.trigram = trigram
        self.citus = citus
        """The database is a Citus coordinator: statements take their Citus variants."""
        self.access = AccessLog()
        """Read marks waiting for their batched write (``primitives.lifecycle._access``)."""
        self.pending = PendingTenants()
        """Tenants this engine's deferred writes left rows without a vector for
        (``retrieval.embedding.embed: deferred``), until ``embed_pending()`` takes them."""
        self.tables: Tables = agent_tables(spec)
        self.decay = decay_models(spec)
        if embedder is not None:
            embedder = as_embedder(embedder)  # a LangChain Embeddings object is accepted too
        if embedder is not None and embedder.dims != spec.retrieval.embedding.dims:
            raise ModelMismatch(
                f"embedder {embedder.model_id} makes {embedder.dims}-dim vectors; agent "
                f"'{spec.agent}' stores {spec.retrieval.embedding.dims} "
                "(retrieval.embedding.dims)", model=embedder.model_id)
        self.embedder: Embedder | None = cached(embedder) if embedder is not None else None
        self.signals, self.warnings = effective_signals(
            spec, embedder=embedder is not None, vector=has_embedding)
        self.has_embedding = has_embedding
        self.text_match = text_match
        self.classifier = classifier_for(spec, self.embedder)
        self.reranker = reranker
        if reranker is None and spec.retrieval.reranker is not None:
            self.warnings.append(
                f"agent '{spec.agent}': retrieval.reranker is declared but this engine has no "
                "reranker, so fused results are not reranked (Engine.connect(..., "
                "reranker=default_reranker(spec)) turns it on)")

    @property
    def defers_embedding(self) -> bool:
        """Writes leave their vector to a worker that this engine can run: the spec defers
        embedding, the table has an embedding column and the engine an embedder."""
        return (self.embedder is not None and self.has_embedding
                and self.spec.retrieval.embedding.embed == "deferred")

    def note_pending(self, ctx: Context) -> None:
        """After a commit: remember the tenant when the transaction left rows waiting for a
        vector that this engine can embed."""
        if ctx.left_pending and self.embedder is not None:
            self.pending.note(ctx.anchor)

    @staticmethod
    def tables_for(spec: AgentSpec) -> Tables:
        return agent_tables(spec)

    def context(self, anchor: Anchor, actor: str) -> Context:
        return Context(self.spec, self.tables, self.signals, anchor, actor, self.has_embedding,
                       self.embedder, classifier=self.classifier, reranker=self.reranker,
                       text_match=self.text_match, trigram=self.trigram, decay=self.decay,
                       citus=self.citus)

    def job_context(self, ctx: Context) -> tuple[Context, str | None, str | None]:
        """For a transaction about to open as a job (:meth:`Engine.tenant`): the context
        that says so, the job seed (None: not a job) and the seed of its ids (None: random
        ids, ``determinism.ids: random``)."""
        seed = job_seed(self.spec, ctx.anchor)
        if seed is None:
            return ctx, None, None
        ids = seed if self.spec.determinism.ids == "seeded" else None
        return replace(ctx, job_seed=seed), seed, ids
