"""``explain_query``: what ``primitives explain SPEC TENANT "query"`` prints."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from primitives.spec import AgentSpec

if TYPE_CHECKING:
    from primitives.engine import Explanation

__all__ = ["explain_query", "render_explanation"]


def explain_query(spec: AgentSpec, tenant: str | Mapping[str, object], query: str, *,
                  dsn: str | None = None, limit: int | None = None,
                  use_embedder: bool = True,
                  progress: Callable[[str], None] | None = None) -> str:
    """Run one search with ``explain=True`` as the application role and render it as text.

    ``tenant`` is the tenant key's value, or the whole anchor. The semantic signal runs when
    an embedding model is installed (``default_embedder``); otherwise the text says it was
    dropped and why. ``progress`` (e.g. a line on standard error) hears what is under way:
    the model loading (it takes seconds) and the search.
    """

    from primitives.embeddings import default_embedder
    from primitives.engine import Engine
    from primitives.errors import EmbedderUnavailable

    anchor = {spec.anchor.tenant_key: tenant} if isinstance(tenant, str) else dict(tenant)
    notes: list[str] = []
    embedder = None
    if use_embedder and "semantic" in spec.retrieval.signals:
        if progress:
            progress("loading the embedding model...")
        started = time.perf_counter()
        try:
            embedder = default_embedder(spec)
            embedder.embed_query(query)  # loads the weights now, not inside the search
        except EmbedderUnavailable as err:
            notes.append(str(err))
        else:
            if progress:
                progress(f"model {embedder.model_id} loaded in "
                         f"{time.perf_counter() - started:.1f}s")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        engine = Engine.connect(spec, dsn, embedder=embedder)
    notes += [str(w.message) for w in caught]
    if progress:
        progress("searching...")
    with engine, engine.tenant(anchor, actor="primitives.explain") as mem:
        explanation = mem.search(query, limit=limit, explain=True)
    model = embedder.model_id if embedder is not None else None
    return render_explanation(explanation, query=query, model=model, notes=notes)


def render_explanation(explanation: Explanation, *, query: str, model: str | None = None,
                       notes: list[str] | None = None) -> str:
    """Plain text: signals and their row counts, then each hit's score, its ranks and the
    effective confidence its fused score was multiplied by; or the abstention."""
    lines = [f"query: {query!r}"]
    lines += [f"note: {note}" for note in notes or []]
    rows = ", ".join(f"{s} {n}" for s, n in explanation.signal_rows.items())
    lines.append(f"signals: {rows} (rows each returned); RRF k={explanation.k}, weights "
                 + ", ".join(f"{s}={w:g}" for s, w in explanation.weights.items()))
    if explanation.semantic_mode:
        lines.append(f"semantic: {explanation.semantic_mode}" + (f", model {model}" if model
                                                                 else ""))
    if explanation.intent is not None:
        lines.append(f"intent: {explanation.intent}")
    if explanation.edge_types:
        lines.append(f"graph follows: {', '.join(explanation.edge_types)}")
    if explanation.reranked:
        lines.append(f"reranked: the first {explanation.reranked} fused hits")
    if explanation.dropped:
        lines.append(f"dropped for this query: {', '.join(explanation.dropped)}")
    for n, hit in enumerate(explanation.hits, start=1):
        parts = ", ".join(f"{s} #{hit.ranks[s]} ({hit.scores.get(s, 0.0):.4g})"
                          for s in explanation.signals if s in hit.ranks)
        text = hit.memory.content if len(hit.memory.content) <= 80 else \
            hit.memory.content[:77] + "..."
        lines.append(f"{n:>3}. {hit.score:.5f}  [{hit.memory.tier}] {text}")
        lines.append(f"     {parts}; confidence x{hit.confidence:.3g}")
    if explanation.abstained:
        lines.append(f"abstained: {explanation.message}")
    elif not explanation.hits:
        lines.append("no results")
    return "\n".join(lines)
