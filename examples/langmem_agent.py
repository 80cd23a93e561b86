"""A LangMem-style agent on the memory store: LangMem's namespaces and tool shapes, unchanged.

LangMem's memory tools address the store by a namespace template filled from
``config["configurable"]`` at run time, by default ``("memories", "{langgraph_user_id}")``.
``examples/langmem_agent.yaml`` maps that template (and a second one, ``("facts", ...)``)
onto its anchor and tier (``persistence.store.namespaces``) and accepts
``langgraph_user_id`` for its anchor key ``user_id`` (``anchor.aliases``), so the tools and
the configurable keys stay as LangMem writes them; the checkpointer finds the tenant under
the alias too.

The two tools below reproduce the shapes of LangMem's ``manage_memory`` and
``search_memory`` (same arguments, same namespace template, the store reached through
``get_store()``), written here because LangMem itself is not a dependency. The model is a
scripted fake (no network). It stores a preference, then tries to store a fact in the
``facts`` namespace: semantic memory is written only by promotion in this spec, so the
store refuses, and ``ToolNode(handle_tool_errors=REFUSALS)`` hands the refusal to the model
as a tool message instead of aborting the run. The model then searches and answers.

Run it (starts the embedded PostgreSQL on first use)::

    python examples/langmem_agent.py
"""

from __future__ import annotations

import sys
import uuid
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.config import get_config, get_store
from langgraph.prebuilt import ToolNode, create_react_agent

from primitives._project import migrate
from primitives.db import app_dsn, resolve_dsn
from primitives.langgraph import REFUSALS, compile_agent
from primitives.spec import load_spec

SPEC = Path(__file__).resolve().with_name("langmem_agent.yaml")
MEMORIES = ("memories", "{langgraph_user_id}")
FACTS = ("facts", "{langgraph_user_id}")


def fill(template: Sequence[str], config: RunnableConfig) -> tuple[str, ...]:
    """A namespace template with each ``{name}`` taken from ``config["configurable"]``."""
    configurable = config.get("configurable") or {}
    return tuple(segment.format(**configurable) for segment in template)


def manage_memory_tool(template: Sequence[str] = MEMORIES,
                       name: str = "manage_memory") -> BaseTool:
    """A tool shaped like LangMem's ``manage_memory``: create, update or delete one memory."""

    def manage(content: str | None = None,
               action: Literal["create", "update", "delete"] = "create",
               id: str | None = None) -> str:
        store, namespace = get_store(), fill(template, get_config())
        if action == "delete":
            if id is None:
                raise ValueError("deleting a memory needs its id")
            store.delete(namespace, id)
            return f"deleted memory {id}"
        key = id or str(uuid.uuid4())
        store.put(namespace, key, {"content": content})
        return f"{action}d memory {key}"

    return tool(name, description="Create, update or delete a memory that lasts across "
                                  "conversations.")(manage)


def search_memory_tool(template: Sequence[str] = MEMORIES) -> BaseTool:
    """A tool shaped like LangMem's ``search_memory``: a query search of the namespace."""

    def search(query: str, limit: int = 10, offset: int = 0,
               filter: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        hits = get_store().search(fill(template, get_config()), query=query, filter=filter,
                                  limit=limit, offset=offset)
        return [hit.dict() for hit in hits]

    return tool("search_memory", description="Search long-term memories relevant to the "
                                             "conversation.")(search)


class ScriptedModel(GenericFakeChatModel):
    """langchain_core's fake chat model, answering with a fixed script; tools are ignored."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self


def script() -> list[AIMessage]:
    def call(name: str, **args: Any) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": name, "args": args, "id": uuid.uuid4().hex}])

    return [
        call("manage_memory", content="The user prefers dark roast coffee"),
        call("manage_fact", content="The user lives in Lisbon"),
        call("search_memory", query="which coffee does the user like"),
        AIMessage("You prefer dark roast coffee."),
    ]


def run(admin_dsn: str | None = None, runtime_dsn: str | None = None) -> dict[str, Any]:
    """Migrate the spec, run one conversation, and return its messages, what the store
    holds and the thread state read back under the alias."""
    spec = load_spec(SPEC)
    admin = admin_dsn or resolve_dsn()
    migrate([spec], dsn=admin)
    agent = compile_agent(spec)
    runtime = runtime_dsn or app_dsn(admin)
    user = f"user-{uuid.uuid4().hex[:8]}"
    config: RunnableConfig = {"configurable": {"langgraph_user_id": user, "thread_id": "t-1"}}
    tools = [manage_memory_tool(), manage_memory_tool(FACTS, "manage_fact"),
             search_memory_tool()]
    with agent.store(runtime) as store, agent.checkpointer(runtime) as saver:
        with warnings.catch_warnings():
            # moved to langchain.agents in LangGraph 1.0, still shipped by langgraph
            warnings.simplefilter("ignore", DeprecationWarning)
            graph = create_react_agent(ScriptedModel(messages=iter(script())),
                                       ToolNode(tools, handle_tool_errors=REFUSALS),
                                       store=store, checkpointer=saver)
        result = graph.invoke({"messages": [("user", "Remember that I like dark roast.")]},
                              config)
        messages: list[BaseMessage] = result["messages"]
        stored = store.search(("memories", user), query="coffee")
        state = graph.get_state(config).values["messages"]
    return {
        "user": user,
        "tool_messages": [m.content for m in messages if isinstance(m, ToolMessage)],
        "reply": messages[-1].content,
        "stored": [(item.namespace, item.value, item.score) for item in stored],
        "thread_messages": len(state),
    }


if __name__ == "__main__":
    outcome = run(sys.argv[1] if len(sys.argv) > 1 else None)
    for message in outcome["tool_messages"]:
        print("tool:", message)
    print("reply:", outcome["reply"])
