"""Retrieval: the one hybrid search statement and reciprocal rank fusion (DESIGN §6).

- :func:`search_statement`: semantic, lexical, envelope and recency CTEs fused by RRF in SQL.
- :func:`rrf`: the same fusion in pure Python.
- :func:`vector_literal`: a query vector as a bind parameter for ``halfvec``.
- :func:`explain_query`: one search with ``explain=True``, rendered (``primitives explain``).
- :func:`assemble_context`: hits into the spec's context blocks, budgets and eviction.
- :func:`rerank_hits`: an optional reranker (:class:`Reranker`) over the top hits.
- :func:`route`: a query's intent into fusion weights and graph edge types
  (:class:`KeywordIntentClassifier`, :class:`EmbeddingIntentClassifier`).
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
from primitives.retrieval._intent import (
    COMPLEXITY,
    INTENTS,
    EmbeddingIntentClassifier,
    IntentClassifier,
    KeywordIntentClassifier,
    Route,
    classifier_for,
    classify_query_complexity,
    route,
    temporal_direction,
)
from primitives.retrieval._rerank import FlagReranker, Reranker, default_reranker, rerank_hits
from primitives.retrieval._statement import (
    SIGNAL_ORDER,
    Restriction,
    active_at,
    hnsw_settings,
    hnsw_settings_on_workers,
    search_statement,
    stored_model,
    vector_literal,
)
from primitives.retrieval._window import Window, time_window

__all__ = [
    "COMPLEXITY",
    "INTENTS",
    "SIGNAL_ORDER",
    "ContextBlockResult",
    "ContextPack",
    "EmbeddingIntentClassifier",
    "FlagReranker",
    "IntentClassifier",
    "KeywordIntentClassifier",
    "Reranker",
    "Restriction",
    "Route",
    "Window",
    "active_at",
    "assemble_context",
    "classifier_for",
    "classify_query_complexity",
    "default_reranker",
    "estimate_tokens",
    "explain_query",
    "hnsw_settings",
    "hnsw_settings_on_workers",
    "render_context",
    "render_explanation",
    "rerank_hits",
    "route",
    "rrf",
    "search_statement",
    "stored_model",
    "temporal_direction",
    "time_window",
    "vector_literal",
]
