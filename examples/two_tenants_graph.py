"""Two tenants, two threads, one LangGraph graph: long-term memory in the store, thread
state in the checkpointer, both compiled from ``agents/spectral_agent.yaml``.

The graph's nodes are deterministic (no model, no network):

- ``recall``: for ``recall: <words>``, searches the workspace's long-term memory;
- ``note``: for ``note: <text>``, writes an episodic observation to the workspace tier
  and the request to the run tier, scoped to the thread (removed when the run ends);
- ``respond``: answers from what was recalled and appends the turn to thread state.

The tenant is ``workspace_id`` in ``config["configurable"]``, next to ``thread_id``: the
store's namespaces start with it and the checkpointer keys thread state by it. Acme and
Globex both use thread ``t-1``; neither sees the other's notes or thread state.

Run it (starts the embedded PostgreSQL on first use)::

    python examples/two_tenants_graph.py
"""

from __future__ import annotations

import hashlib
import operator
import sys
import warnings
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from primitives._project import migrate
from primitives.db import app_dsn, resolve_dsn
from primitives.errors import GovernanceError
from primitives.langgraph import compile_agent
from primitives.spec import load_spec

SPEC = Path(__file__).resolve().parents[1] / "agents" / "spectral_agent.yaml"

TURNS = [  # (workspace, thread, request)
    ("ws-acme", "t-1", "note: lowering temperature removed fabrication"),
    ("ws-acme", "t-1", "recall: temperature"),
    ("ws-globex", "t-1", "note: scanned contracts swap fields below OCR 0.6"),
    ("ws-globex", "t-1", "recall: temperature"),
    ("ws-acme", "t-2", "recall: fabrication"),
]


class State(TypedDict):
    request: str
    recalled: list[str]
    turns: Annotated[list[str], operator.add]


def _where(config: RunnableConfig) -> tuple[str, str]:
    configurable = config["configurable"]
    return configurable["workspace_id"], configurable["thread_id"]


def recall(state: State, config: RunnableConfig, *, store: BaseStore) -> dict[str, Any]:
    if not state["request"].startswith("recall:"):
        return {"recalled": []}
    workspace, _ = _where(config)
    words = state["request"].removeprefix("recall:").strip()
    hits = store.search((workspace, "workspace"), query=words, limit=3)
    return {"recalled": [hit.value["text"] for hit in hits]}


def note(state: State, config: RunnableConfig, *, store: BaseStore) -> dict[str, Any]:
    if state["request"].startswith("note:"):
        workspace, thread = _where(config)
        text = state["request"].removeprefix("note:").strip()
        key = hashlib.sha256(text.encode()).hexdigest()[:16]  # the same note, the same item
        store.put((workspace, "workspace", "episodic", "observations"), key,
                  {"text": text, "thread": thread})
        store.put((workspace, "run", thread), "last-note", {"text": text})
    return {}


def respond(state: State, config: RunnableConfig) -> dict[str, Any]:
    workspace, thread = _where(config)
    if state["request"].startswith("recall:"):
        found = "; ".join(state["recalled"]) or "nothing yet"
        reply = f"[{workspace}/{thread}] I remember: {found}"
    else:
        reply = f"[{workspace}/{thread}] noted"
    return {"turns": [reply]}


def build_graph(store: BaseStore, checkpointer: Any) -> Any:
    builder = StateGraph(State)
    builder.add_node("recall", recall)
    builder.add_node("note", note)
    builder.add_node("respond", respond)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "note")
    builder.add_edge("note", "respond")
    builder.add_edge("respond", END)
    return builder.compile(store=store, checkpointer=checkpointer)


def run(admin_dsn: str | None = None, runtime_dsn: str | None = None) -> dict[str, Any]:
    """Migrate the spec, run every turn, and return the replies, each thread's state and
    the refusal of a direct semantic write."""
    spec = load_spec(SPEC)
    admin = admin_dsn or resolve_dsn()
    migrate([spec], dsn=admin)
    agent = compile_agent(spec)
    with warnings.catch_warnings():
        # embedder=None: no model, so semantic search stands down with a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        store = agent.store(runtime_dsn or app_dsn(admin), embedder=None)
    with store, agent.checkpointer(runtime_dsn or app_dsn(admin)) as saver:
        graph = build_graph(store, saver)
        replies = []
        for workspace, thread, request in TURNS:
            config: RunnableConfig = {"configurable": {"thread_id": thread,
                                                       "workspace_id": workspace}}
            result = graph.invoke({"request": request, "recalled": []}, config)
            replies.append(result["turns"][-1])
        states = {
            (workspace, thread): graph.get_state({"configurable": {
                "thread_id": thread, "workspace_id": workspace}}).values.get("turns", [])
            for workspace, thread in sorted({(w, t) for w, t, _ in TURNS})
        }
        try:
            store.put(("ws-acme", "workspace", "semantic"), "fact", {"text": "a shortcut"})
            refused = ""
        except GovernanceError as err:
            refused = str(err)
    return {"replies": replies, "states": states, "refused": refused}


def main() -> int:
    outcome = run()
    for reply in outcome["replies"]:
        print(reply)
    for (workspace, thread), turns in outcome["states"].items():
        print(f"thread state {workspace}/{thread}: {len(turns)} turn(s)")
    print(f"direct semantic write refused: {outcome['refused']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
