"""Any embedding model the engine is handed becomes an :class:`Embedder` (DESIGN §7).

A LangChain ``Embeddings`` object (``embed_documents`` / ``embed_query`` and nothing else) is
accepted as it is: its model id is the one it names (``model_id``, ``model`` or
``model_name``), else the one given, else derived from its class; its width is the one given,
else its ``dims``, else measured with one query embedding. Every vector it returns is checked
against that width, so a model that does not make the vectors the spec stores is refused with
:class:`~primitives.errors.ModelMismatch`, never stored.

>>> class Fake:
...     def embed_documents(self, texts): return [[1.0, 0.0] for _ in texts]
...     def embed_query(self, text): return [1.0, 0.0]
>>> embedder = as_embedder(Fake())
>>> embedder.dims, embedder.model_id
(2, 'langchain/primitives.embeddings._adapt.Fake')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from primitives.embeddings._protocol import Embedder
from primitives.errors import ModelMismatch

__all__ = ["LangChainEmbedder", "as_embedder"]

_ID_ATTRIBUTES = ("model_id", "model", "model_name")


class LangChainEmbedder:
    """An object with ``embed_documents`` / ``embed_query`` seen as an :class:`Embedder`."""

    def __init__(self, inner: Any, *, model_id: str | None = None,
                 dims: int | None = None) -> None:
        for method in ("embed_documents", "embed_query"):
            if not callable(getattr(inner, method, None)):
                raise TypeError(
                    f"{type(inner).__name__} is not an embedding model: it has no "
                    f"{method}() (an Embedder or a LangChain Embeddings object is expected)")
        self.inner = inner
        self._model_id = model_id or _named_id(inner) or (
            f"langchain/{type(inner).__module__}.{type(inner).__qualname__}")
        own = getattr(inner, "dims", None)
        if dims is None and isinstance(own, int) and not isinstance(own, bool):
            dims = own
        self._dims = dims if dims is not None else len(inner.embed_query("dims"))

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dims(self) -> int:
        return self._dims

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = [list(v) for v in self.inner.embed_documents(list(texts))]
        if len(vectors) != len(texts):
            raise ModelMismatch(
                f"embedder {self._model_id} returned {len(vectors)} vectors for "
                f"{len(texts)} texts", model=self._model_id)
        for vector in vectors:
            self._check(vector)
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self._check(list(self.inner.embed_query(text)))

    def _check(self, vector: list[float]) -> list[float]:
        if len(vector) != self._dims:
            raise ModelMismatch(
                f"embedder {self._model_id} returned a {len(vector)}-dim vector; it was "
                f"declared to make {self._dims}-dim vectors", model=self._model_id)
        return vector


def _named_id(inner: Any) -> str | None:
    for name in _ID_ATTRIBUTES:
        value = getattr(inner, name, None)
        if isinstance(value, str) and value.strip():
            return value
    return None


def as_embedder(model: Any, *, model_id: str | None = None,
                dims: int | None = None) -> Embedder:
    """``model`` as an :class:`Embedder`: unchanged when it already is one and nothing is
    overridden, else wrapped in :class:`LangChainEmbedder`."""
    own_id = getattr(model, "model_id", None)
    own_dims = getattr(model, "dims", None)
    if (model_id is None and dims is None and isinstance(own_id, str)
            and isinstance(own_dims, int) and callable(getattr(model, "embed_query", None))
            and callable(getattr(model, "embed_documents", None))):
        return model  # type: ignore[no-any-return]
    return LangChainEmbedder(model, model_id=model_id, dims=dims)
