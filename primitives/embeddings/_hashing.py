"""A deterministic hashing embedder for fast unit tests (never for real retrieval)."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

__all__ = ["HashingEmbedder"]

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    """Bag of words and character trigrams hashed into ``dims`` signed buckets, L2-normalised.

    Same text, same vector, on every machine; texts sharing words are close. No model,
    no dependencies: it lets tests exercise the semantic path in milliseconds.

    >>> e = HashingEmbedder(dims=16)
    >>> e.embed_query("blue car") == e.embed_documents(["blue car"])[0]
    True
    """

    def __init__(self, dims: int = 384, *, model_id: str | None = None) -> None:
        if dims < 2:
            raise ValueError("dims must be at least 2")
        self._dims = dims
        self._model_id = model_id or f"primitives/hashing-v1-{dims}"

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dims(self) -> int:
        return self._dims

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._embed(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)

    def _embed(self, text: str) -> list[float]:
        vector = [0.0] * self._dims
        words = [w.lower() for w in _WORD.findall(text)]
        features = [("w", w) for w in words]
        features += [("t", w[i:i + 3]) for w in words for i in range(max(1, len(w) - 2))]
        for kind, feature in features:
            digest = hashlib.blake2b(f"{kind}:{feature}".encode(), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self._dims
            sign = 1.0 if digest[4] & 1 else -1.0
            vector[bucket] += sign * (2.0 if kind == "w" else 1.0)
        norm = math.sqrt(sum(v * v for v in vector))
        if norm == 0.0:
            # Text without a word still gets a unit vector, so cosine distance is defined.
            vector[0] = 1.0
            return vector
        return [v / norm for v in vector]
