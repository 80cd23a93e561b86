"""An LRU cache in front of an embedder's query embeddings (the read path's only model call)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from threading import Lock

from primitives.embeddings._protocol import Embedder

__all__ = ["CachedEmbedder"]


class CachedEmbedder:
    """Wraps an embedder; repeated queries are answered from a bounded LRU cache.

    Documents pass through uncached (each write is embedded once anyway).

    >>> from primitives.embeddings import HashingEmbedder
    >>> cached = CachedEmbedder(HashingEmbedder(dims=8), maxsize=2)
    >>> _ = cached.embed_query("a"); _ = cached.embed_query("a")
    >>> cached.hits, cached.misses
    (1, 1)
    """

    def __init__(self, inner: Embedder, *, maxsize: int = 1024) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self.inner = inner
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[str, tuple[float, ...]] = OrderedDict()
        self._lock = Lock()

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dims(self) -> int:
        return self.inner.dims

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        with self._lock:
            found = self._entries.get(text)
            if found is not None:
                self._entries.move_to_end(text)
                self.hits += 1
                return list(found)
        vector = self.inner.embed_query(text)
        with self._lock:
            self.misses += 1
            self._entries[text] = tuple(vector)
            self._entries.move_to_end(text)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
        return list(vector)


def cached(embedder: Embedder, *, maxsize: int = 1024) -> Embedder:
    """``embedder`` behind a query cache (unchanged if it already has one)."""
    if isinstance(embedder, CachedEmbedder):
        return embedder
    return CachedEmbedder(embedder, maxsize=maxsize)
