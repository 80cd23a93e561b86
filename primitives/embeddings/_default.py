"""``default_embedder(spec)``: the best model this machine has for the spec, never a download."""

from __future__ import annotations

import importlib.util

from primitives.embeddings._flag import (
    BGE_SMALL,
    INSTALL_HINT,
    MINILM,
    FlagEmbedder,
    bge_small_path,
    minilm_path,
)
from primitives.errors import EmbedderUnavailable
from primitives.spec import AgentSpec

__all__ = ["default_embedder"]


def default_embedder(spec: AgentSpec) -> FlagEmbedder:
    """BGE-small (the spec's pinned model) when its weights are on disk, else the packaged
    all-MiniLM-L6-v2 (offline, mean pooling, 384 dims), else ``EmbedderUnavailable``.

    The model actually chosen is ``.model_id``; it is what the rows record.

    >>> embedder = default_embedder(load_spec("agents/spectral_agent.yaml"))  # doctest: +SKIP
    >>> embedder.model_id                                                     # doctest: +SKIP
    'sentence-transformers/all-MiniLM-L6-v2'
    """
    config = spec.retrieval.embedding
    if importlib.util.find_spec("FlagEmbedding") is None or \
            importlib.util.find_spec("torch") is None:
        raise EmbedderUnavailable(
            f"agent '{spec.agent}' retrieves semantically but FlagEmbedding/torch are not "
            f"installed: {INSTALL_HINT}", model=config.model)
    bge = bge_small_path(config.model) if config.model in (BGE_SMALL,) or \
        config.model.endswith("bge-small-en-v1.5") else None
    if bge is not None:
        return FlagEmbedder(bge, model_id=BGE_SMALL, dims=config.dims, pooling="cls",
                            query_instruction=config.query_instruction)
    minilm = minilm_path()
    if minilm is not None:
        if config.dims != 384:
            raise EmbedderUnavailable(
                f"agent '{spec.agent}' stores {config.dims}-dim vectors; the offline model "
                f"{MINILM} makes 384. Put {config.model}'s weights on disk "
                "(PRIMITIVES_BGE_PATH) or set retrieval.embedding.dims: 384",
                model=config.model)
        # MiniLM was trained without query instructions: queries are embedded as they are.
        return FlagEmbedder(minilm, model_id=MINILM, dims=384, pooling="mean")
    raise EmbedderUnavailable(
        f"no local weights for {config.model} and the offline model is not installed: "
        f"{INSTALL_HINT}", model=config.model)
