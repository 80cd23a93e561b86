"""A ``create_react_agent`` agent with the project's six memory tools, one user's memory.

The tools come from ``compile_agent(spec).tools(engine, anchor)`` for one tenant of
``agents/assistant_memory.yaml``; every refusal or bad argument inside them comes back to
the model as a tool message (``handle_tool_error``), so a run goes on. The model is
langchain_core's fake chat model with a fixed script (no network): it remembers a fact,
confirms a fact by an id that is not one (the tool answers with the error), searches, and
answers.

Run it (starts the embedded PostgreSQL on first use)::

    python examples/react_agent.py
"""

from __future__ import annotations

import sys
import uuid
import warnings
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.prebuilt import create_react_agent

from primitives._project import migrate
from primitives.db import app_dsn, resolve_dsn
from primitives.langgraph import compile_agent
from primitives.spec import load_spec

SPEC = Path(__file__).resolve().parents[1] / "agents" / "assistant_memory.yaml"


class ScriptedModel(GenericFakeChatModel):
    """langchain_core's fake chat model, answering with a fixed script; tools are ignored."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self


def script() -> list[AIMessage]:
    def call(name: str, **args: Any) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": name, "args": args, "id": uuid.uuid4().hex}])

    return [
        call("remember_fact", fact="Ana's sister Marta lives in Porto", entities=["Ana"]),
        call("confirm_fact", fact_id="the-one-about-porto"),
        call("search_memory", query="Marta Porto sister"),
        AIMessage("Marta, Ana's sister, lives in Porto."),
    ]


def run(admin_dsn: str | None = None, runtime_dsn: str | None = None) -> dict[str, Any]:
    """Migrate the spec, run one turn, return the tool messages and the reply."""
    spec = load_spec(SPEC)
    admin = admin_dsn or resolve_dsn()
    migrate([spec], dsn=admin)
    agent = compile_agent(spec)
    user = f"user-{uuid.uuid4().hex[:8]}"
    with warnings.catch_warnings():
        # no embedder: semantic search stands down (with a warning), lexical finds the fact;
        # create_react_agent moved to langchain.agents in LangGraph 1.0, still shipped
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        engine = agent.engine(runtime_dsn or app_dsn(admin))
        graph = create_react_agent(ScriptedModel(messages=iter(script())),
                                   agent.tools(engine, {"user_id": user}))
    with engine:
        result = graph.invoke({"messages": [("user", "Where does Ana's sister live?")]})
    messages = result["messages"]
    return {"tool_messages": [(m.name, m.status, m.content) for m in messages
                              if isinstance(m, ToolMessage)],
            "reply": messages[-1].content}


if __name__ == "__main__":
    outcome = run(sys.argv[1] if len(sys.argv) > 1 else None)
    for name, status, content in outcome["tool_messages"]:
        print(f"{name} ({status}): {content}")
    print("reply:", outcome["reply"])
