"""Retrieval: the one hybrid search statement and reciprocal rank fusion (DESIGN §6).

- :func:`search_statement`: semantic, lexical, envelope and recency CTEs fused by RRF in SQL.
- :func:`rrf`: the same fusion in pure Python.
- :func:`vector_literal`: a query vector as a bind parameter for ``halfvec``.
- :func:`explain_query`: one search with ``explain=True``, rendered (``primitives explain``).
"""

from primitives.retrieval._explain import explain_query, render_explanation
from primitives.retrieval._fusion import rrf
from primitives.retrieval._statement import (
    SIGNAL_ORDER,
    active_at,
    hnsw_settings,
    search_statement,
    stored_model,
    vector_literal,
)

__all__ = [
    "SIGNAL_ORDER",
    "active_at",
    "explain_query",
    "hnsw_settings",
    "render_explanation",
    "rrf",
    "search_statement",
    "stored_model",
    "vector_literal",
]
