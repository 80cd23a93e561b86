"""``compile_agent(spec)``: one object holding what a spec compiles into (DESIGN §2).

Pure until asked: the plan is compiled on first use, and nothing connects until a
factory (``store``, ``checkpointer``, ``engine``, their async twins) is called.

Example::

    agent = compile_agent(load_spec("agents/spectral_agent.yaml"))
    print(agent.plan.render())                     # the SQL (``primitives migrate`` applies it)
    with agent.store() as store, agent.checkpointer() as saver:
        graph = builder.compile(store=store, checkpointer=saver)
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from functools import cached_property
from typing import Final

from langchain_core.tools import BaseTool

from primitives.compile import Plan, compile_plan
from primitives.embeddings import Embedder
from primitives.engine import AsyncEngine, Engine
from primitives.langgraph._checkpointer import AsyncCheckpointer, Checkpointer
from primitives.langgraph._store import AsyncMemoryStore, MemoryStore
from primitives.langgraph._tools import memory_tools
from primitives.spec import AgentSpec

__all__ = ["DEFAULT_EMBEDDER", "CompiledAgent", "compile_agent", "store_embedder"]


class _Default(Enum):
    EMBEDDER = "default"


DEFAULT_EMBEDDER: Final = _Default.EMBEDDER
"""``store(embedder=DEFAULT_EMBEDDER)``: the default model when the spec retrieves semantically."""


def store_embedder(spec: AgentSpec, embedder: Embedder | _Default | None) -> Embedder | None:
    """The embedder a store gets: the one given; ``None`` when given ``None`` (semantic
    search stands down, with the engine's warning); by default, when the spec's signals
    include ``semantic`` and the embeddings extra (FlagEmbedding, torch) is installed,
    :func:`primitives.embeddings.default_embedder` (the spec's model when its weights are
    on disk, else the packaged all-MiniLM-L6-v2), else ``None``."""
    if embedder is not DEFAULT_EMBEDDER:
        return embedder
    if "semantic" not in spec.retrieval.signals or \
            importlib.util.find_spec("FlagEmbedding") is None:
        return None
    from primitives.embeddings import default_embedder
    from primitives.errors import EmbedderUnavailable
    try:
        return default_embedder(spec)
    except EmbedderUnavailable:
        return None


@dataclass(frozen=True)
class CompiledAgent:
    """A spec and the factories of its runtime objects (all as the application role)."""

    spec: AgentSpec

    @cached_property
    def plan(self) -> Plan:
        """The DDL plan with default capabilities (``primitives migrate`` detects the server's)."""
        return compile_plan(self.spec)

    def engine(self, dsn: str | None = None, *, embedder: Embedder | None = None) -> Engine:
        return Engine.connect(self.spec, dsn, embedder=embedder)

    async def aengine(self, dsn: str | None = None, *,
                      embedder: Embedder | None = None) -> AsyncEngine:
        return await AsyncEngine.connect(self.spec, dsn, embedder=embedder)

    def store(self, dsn: str | None = None, *,
              embedder: Embedder | _Default | None = DEFAULT_EMBEDDER) -> MemoryStore:
        """The store; without ``embedder``, the default model when the spec retrieves
        semantically and the embeddings extra is installed (:func:`store_embedder`);
        ``embedder=None`` opts out."""
        return MemoryStore.from_spec(self.spec, dsn, embedder=store_embedder(self.spec, embedder))

    async def astore(self, dsn: str | None = None, *,
                     embedder: Embedder | _Default | None = DEFAULT_EMBEDDER
                     ) -> AsyncMemoryStore:
        """:meth:`store`, async."""
        return await AsyncMemoryStore.from_spec(self.spec, dsn,
                                                embedder=store_embedder(self.spec, embedder))

    def checkpointer(self, dsn: str | None = None) -> Checkpointer:
        return Checkpointer.from_spec(self.spec, dsn)

    async def acheckpointer(self, dsn: str | None = None) -> AsyncCheckpointer:
        return await AsyncCheckpointer.from_spec(self.spec, dsn)

    def tools(self, engine: Engine | AsyncEngine, anchor: Mapping[str, object]) -> list[BaseTool]:
        """The six memory tools for one tenant (``engine`` must be of this spec)."""
        if engine.spec is not self.spec and engine.spec != self.spec:
            raise ValueError(f"engine is bound to agent '{engine.spec.agent}', "
                             f"not '{self.spec.agent}'")
        return memory_tools(engine, anchor)


def compile_agent(spec: AgentSpec) -> CompiledAgent:
    """Bundle ``spec`` with its plan and runtime factories (see :class:`CompiledAgent`)."""
    return CompiledAgent(spec)
