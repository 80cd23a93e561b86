"""An optional reranking step after fusion: off by default, a cross-encoder when asked.

- :class:`Reranker`: the extension point, ``rerank(query, hits) -> list[Hit]``.
- :class:`FlagReranker`: a cross-encoder loaded by FlagEmbedding from local weights only.
- :func:`rerank_hits`: reranks the first ``top_n`` hits and keeps the rest after them.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from primitives.engine._records import Hit
from primitives.errors import EmbedderUnavailable
from primitives.spec import AgentSpec

__all__ = ["FlagReranker", "Reranker", "default_reranker", "rerank_hits"]

_INSTALL_HINT = "pip install 'agent-memory-primitives[embeddings]'"


@runtime_checkable
class Reranker(Protocol):
    """Reorders hits for a query, best first. It returns the same hits, no more, no fewer."""

    def rerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]: ...


def rerank_hits(reranker: Reranker | None, query: str, hits: Sequence[Hit],
                top_n: int) -> list[Hit]:
    """The hits with the first ``top_n`` reranked and the rest after them, in their order.

    The identity (a copy of ``hits``) when ``reranker`` is None or ``top_n`` < 1.

    >>> rerank_hits(None, "what did Caroline research?", hits, top_n=20) == list(hits)  # doctest: +SKIP
    True
    """
    if reranker is None or top_n < 1 or not hits:
        return list(hits)
    head, tail = list(hits[:top_n]), list(hits[top_n:])
    reranked = reranker.rerank(query, head)
    if sorted(hit.memory.id for hit in reranked) != sorted(hit.memory.id for hit in head):
        raise ValueError(f"{type(reranker).__name__}.rerank must return the hits it was given, "
                         "reordered")
    return reranked + tail


def default_reranker(spec: AgentSpec) -> FlagReranker | None:
    """The cross-encoder ``retrieval.reranker.model`` names (loaded on first use, from local
    weights only), or None when the spec declares no reranker."""
    declared = spec.retrieval.reranker
    return FlagReranker(declared.model) if declared is not None else None


class FlagReranker:
    """A cross-encoder (e.g. ``BAAI/bge-reranker-base``) through FlagEmbedding's
    ``FlagReranker``. Loading is lazy; only a local model directory or an already cached
    Hugging Face snapshot is used, never a download.

    Each returned hit keeps its fused ``score``; the cross-encoder's score and rank are added
    under ``scores["rerank"]`` and ``ranks["rerank"]``.

    >>> reranker = FlagReranker("BAAI/bge-reranker-base")          # doctest: +SKIP
    >>> rerank_hits(reranker, "what did Caroline research?", hits, top_n=20)  # doctest: +SKIP
    """

    def __init__(self, model: str | Path, *, use_fp16: bool = False, device: str = "cpu",
                 batch_size: int = 32, max_length: int = 512) -> None:
        self.model = str(model)
        self.use_fp16 = use_fp16
        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length
        self._loaded: Any = None
        self._lock = threading.Lock()

    def load(self) -> Any:
        """Load the weights now (the first :meth:`rerank` does it otherwise)."""
        with self._lock:
            if self._loaded is None:
                self._loaded = self._load()
        return self._loaded

    def rerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]:
        if not hits:
            return []
        model = self.load()
        raw = model.compute_score([(query, hit.memory.content) for hit in hits],
                                  batch_size=self.batch_size, max_length=self.max_length)
        scores = [float(raw)] if isinstance(raw, int | float) else [float(s) for s in raw]
        # Stable on ties: equal cross-encoder scores keep the fused order.
        order = sorted(range(len(hits)), key=lambda i: -scores[i])
        return [
            replace(hits[i], ranks={**hits[i].ranks, "rerank": rank},
                    scores={**hits[i].scores, "rerank": scores[i]})
            for rank, i in enumerate(order, start=1)
        ]

    def _load(self) -> Any:
        try:
            from FlagEmbedding import FlagReranker as _FlagReranker
        except ImportError as err:
            raise EmbedderUnavailable(
                f"the reranker {self.model} needs FlagEmbedding and torch: {_INSTALL_HINT}",
                model=self.model) from err
        path = local_model_path(self.model)
        if path is None:
            raise EmbedderUnavailable(
                f"no local weights for the reranker {self.model}: give a model directory "
                "(config.json and model.safetensors or pytorch_model.bin) or put the model in "
                "the Hugging Face cache first; it is never downloaded here",
                model=self.model)
        return _FlagReranker(str(path), use_fp16=self.use_fp16, devices=self.device,
                             batch_size=self.batch_size, max_length=self.max_length)


def local_model_path(model: str) -> Path | None:
    """``model`` as a model directory, or its cached Hugging Face snapshot; never downloads."""
    if _is_model_dir(Path(model)):
        return Path(model)
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    try:
        snapshot = Path(snapshot_download(model, local_files_only=True))
    except Exception:  # not cached (LocalEntryNotFoundError), a bad repo id, an unusable cache
        return None
    return snapshot if _is_model_dir(snapshot) else None


def _is_model_dir(path: Path) -> bool:
    return (path / "config.json").is_file() and any(
        (path / name).is_file() for name in ("model.safetensors", "pytorch_model.bin"))
