"""The ``Embedder`` protocol: what the engine needs from an embedding model (DESIGN §7)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

__all__ = ["Embedder"]


@runtime_checkable
class Embedder(Protocol):
    """Turns text into unit-length vectors of ``dims`` floats.

    ``model_id`` is recorded with every stored vector; rows of another model are never
    compared with this one's (``ModelMismatch``).

    >>> from primitives.embeddings import HashingEmbedder
    >>> embedder = HashingEmbedder(dims=8)
    >>> len(embedder.embed_query("hello")), embedder.model_id
    (8, 'primitives/hashing-v1-8')
    """

    @property
    def model_id(self) -> str: ...

    @property
    def dims(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; implementations batch internally."""
        ...

    def embed_query(self, text: str) -> list[float]:
        """The vector of a search query (with the model's query instruction, if any)."""
        ...
