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

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from langchain_core.tools import BaseTool

from primitives.compile import Plan, compile_plan
from primitives.embeddings import Embedder
from primitives.engine import AsyncEngine, Engine
from primitives.langgraph._checkpointer import AsyncCheckpointer, Checkpointer
from primitives.langgraph._store import AsyncMemoryStore, MemoryStore
from primitives.langgraph._tools import memory_tools
from primitives.spec import AgentSpec

__all__ = ["CompiledAgent", "compile_agent"]


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

    def store(self, dsn: str | None = None, *, embedder: Embedder | None = None) -> MemoryStore:
        return MemoryStore.from_spec(self.spec, dsn, embedder=embedder)

    async def astore(self, dsn: str | None = None, *,
                     embedder: Embedder | None = None) -> AsyncMemoryStore:
        return await AsyncMemoryStore.from_spec(self.spec, dsn, embedder=embedder)

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
