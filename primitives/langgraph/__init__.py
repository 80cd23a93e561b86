"""LangGraph integration (DESIGN §8): a store, a checkpointer and tools bound to a spec.

- :class:`MemoryStore` / :class:`AsyncMemoryStore`: LangGraph ``BaseStore`` over the engine;
  namespaces are ``(*anchor values, tier, [typology,] [scope id,] ...)``.
- :class:`Checkpointer` / :class:`AsyncCheckpointer`: LangGraph's Postgres saver semantics,
  tenant-isolated; the tenant is the anchor's tenant key in ``config["configurable"]``.
- :func:`memory_tools`: the six memory tools of seed 002 for one tenant (with ``graph:``,
  also ``explain_fact``, ``weak_facts`` and ``forget_fact``); :func:`write_path_tools`: the
  write-path agent's ``get_session_episodes`` and ``save_causal_edges``.
- :func:`ask_agent_tools`: the tools another context asks a ``tool_mediated`` agent with
  (``ask_world_agent``), answered through that agent's tenancy and sanitization gates.
- :func:`compile_agent`: a spec with its plan and all of the above as factories.

Example::

    from primitives.langgraph import compile_agent
    from primitives.spec import load_spec

    agent = compile_agent(load_spec("agents/spectral_agent.yaml"))
    store = agent.store()
    store.put(("ws-1", "workspace", "procedural"), "style", {"text": "short answers"})

See ``docs/langgraph.md`` for the namespace layout and where the store departs from
``BaseStore`` to keep the audit posture.
"""

from primitives.langgraph._agent import CompiledAgent, compile_agent
from primitives.langgraph._ask import ask_agent_tools
from primitives.langgraph._checkpointer import AsyncCheckpointer, Checkpointer
from primitives.langgraph._content import item_content
from primitives.langgraph._namespaces import Address, NamespaceLayout, Scope
from primitives.langgraph._store import AsyncMemoryStore, MemoryStore, RankedItem
from primitives.langgraph._timestamps import event_time_fields
from primitives.langgraph._tools import (
    GRAPH_TOOL_NAMES,
    REFUSALS,
    TOOL_NAMES,
    WRITE_PATH_TOOL_NAMES,
    memory_tools,
    write_path_tools,
)

__all__ = [
    "GRAPH_TOOL_NAMES",
    "REFUSALS",
    "TOOL_NAMES",
    "WRITE_PATH_TOOL_NAMES",
    "Address",
    "AsyncCheckpointer",
    "AsyncMemoryStore",
    "Checkpointer",
    "CompiledAgent",
    "MemoryStore",
    "NamespaceLayout",
    "RankedItem",
    "Scope",
    "ask_agent_tools",
    "compile_agent",
    "event_time_fields",
    "item_content",
    "memory_tools",
    "write_path_tools",
]
