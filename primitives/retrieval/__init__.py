"""Retrieval: the one hybrid search statement and reciprocal rank fusion (DESIGN §6).

- :func:`search_statement`: semantic, lexical, envelope and recency CTEs fused by RRF in SQL.
- :func:`rrf`: the same fusion in pure Python.
- :func:`vector_literal`: a query vector as a bind parameter for ``halfvec``.
- :func:`explain_query`: one search with ``explain=True``, rendered (``primitives explain``).
- :func:`assemble_context`: hits into the spec's context blocks, budgets and eviction.
- :func:`rerank_hits`: an optional reranker (:class:`Reranker`) over the top hits.
"""

from primitives.retrieval._context import (
    ContextBlockResult,
    ContextPack,
    assemble_context,
    estimate_tokens,
    render_context,
)
from primitives.retrieval._explain import explain_query, render_explanation
from primitives.retrieval._fusion import rrf
from primitives.retrieval._rerank import FlagReranker, Reranker, rerank_hits
from primitives.retrieval._statement import (
    SIGNAL_ORDER,
    Restriction,
    active_at,
    hnsw_settings,
    search_statement,
    stored_model,
    vector_literal,
)

__all__ = [
    "SIGNAL_ORDER",
    "ContextBlockResult",
    "ContextPack",
    "FlagReranker",
    "Reranker",
    "Restriction",
    "active_at",
    "assemble_context",
    "estimate_tokens",
    "explain_query",
    "hnsw_settings",
    "render_context",
    "render_explanation",
    "rerank_hits",
    "rrf",
    "search_statement",
    "stored_model",
    "vector_literal",
]
