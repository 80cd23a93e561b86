"""Tool-mediated cross-context reads (``discipline.visibility.cross_context: tool_mediated``).

``ask_agent_tools(engine, anchor)`` gives another context (the Operations Agent's chat,
seed 003) one LangChain tool per name in the answering spec's ``visibility.tools``
(``ask_world_agent`` for the World Agent). A question runs entirely inside the answering
agent: its engine, its tenant transaction for ``anchor`` (so its row-level security decides
what can be read) and its sanitization gates. Only rows of a gate's ``from`` cross, through
that gate (hedged by provenance tier under ``hedge_map``), each crossing journalled in the
answering agent's ``audit_sanitization``; when nothing crosses the answer is the policy's
``unknown`` phrasing ("I don't know" as a first-class answer). Memory ids, keys and
envelopes of the answering agent never leave it.

Example::

    [ask] = ask_agent_tools(world_engine, {"world_id": "w-1"})
    ask.invoke({"question": "how are rule revisions approved?"})
    # {"status": "answered", "answers": [{"claim": "Per the world's rules, ...",
    #                                      "provenance_tier": "canonical"}]}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from primitives.compile._gates import Gate, gates
from primitives.engine import AsyncEngine, Engine, SearchResult, resolve_anchor
from primitives.errors import SpecError
from primitives.langgraph._tools import Body, _async_runner, _Call, _sync_runner

__all__ = ["ask_agent_tools"]

UNKNOWN_FALLBACK = "I don't know."
"""The answer when nothing crosses and no hedge_map policy phrases ``unknown``."""


class AskArgs(BaseModel):
    question: str = Field(description="the question, in plain words")
    limit: int = Field(5, ge=1, le=20, description="at most this many claims")


def _unknown(spec_gates: tuple[Gate, ...], abstain: str | None) -> str:
    for gate in spec_gates:
        if gate.transform == "hedge_map" and "unknown" in gate.hedges:
            return gate.hedges["unknown"]
    return abstain or UNKNOWN_FALLBACK


class _Ask:
    def __init__(self, name: str, spec_gates: tuple[Gate, ...], unknown: str) -> None:
        self.name = name
        self.gates = spec_gates
        self.unknown = unknown

    def ask(self, question: str, limit: int = 5) -> Body[dict[str, Any]]:
        hits: SearchResult[Any] = yield _Call("search", (question,), {"limit": limit * 4})
        ranked = [] if hits.abstained else [h.memory for h in hits]
        answers: list[tuple[int, dict[str, Any]]] = []
        for gate in self.gates:
            ids = [m.id for m in ranked
                   if (m.tier, m.typology) == (gate.from_tier, gate.from_typology)]
            if not ids:
                continue
            crossings = yield _Call("cross", (gate.name, ids), {"via": f"tool:{self.name}"})
            rank = {memory_id: n for n, memory_id in enumerate(ids)}
            answers += [(rank[c.memory_id], {"claim": c.content,
                                             "provenance_tier": c.provenance_tier})
                        for c in crossings if c.crossed]
        if not answers:
            return {"status": "unknown", "answer": self.unknown, "answers": []}
        answers.sort(key=lambda a: a[0])
        return {"status": "answered", "answers": [a for _, a in answers[:limit]]}


def ask_agent_tools(engine: Engine | AsyncEngine, anchor: Mapping[str, object], *,
                    actor: str = "cross_context") -> list[BaseTool]:
    """The tools through which another context asks ``engine``'s agent, bound to the
    tenant ``anchor`` of that agent. Raises SpecError when the spec is not
    ``cross_context: tool_mediated`` with tools, or declares no gate (nothing may cross).
    """
    spec = engine.spec
    visibility = spec.discipline.visibility
    if visibility.cross_context != "tool_mediated" or not visibility.tools:
        raise SpecError(f"agent '{spec.agent}' is not read through tools (discipline."
                        "visibility.cross_context: tool_mediated with tools)",
                        file=spec.source, field="discipline.visibility.cross_context")
    spec_gates = gates(spec)
    if not spec_gates:
        raise SpecError(f"agent '{spec.agent}' declares no sanitization gate: nothing of its "
                        "memory may cross to another context", file=spec.source,
                        field="discipline.sanitization")
    resolve_anchor(spec, anchor)
    abstain = spec.retrieval.abstain.message if spec.retrieval.abstain else None
    unknown = _unknown(spec_gates, abstain)
    tools: list[BaseTool] = []
    for name in visibility.tools:
        body = _Ask(name, spec_gates, unknown).ask
        description = (f"Ask the {spec.agent} agent a question. Its answers come from its "
                       "own memory, hedged by how well each claim is established; "
                       "\"I don't know\" means it has no coverage.")
        if isinstance(engine, Engine):
            tool = StructuredTool.from_function(
                func=_sync_runner(engine, anchor, actor, body), name=name,
                description=description, args_schema=AskArgs, handle_tool_error=True)
        else:
            tool = StructuredTool.from_function(
                coroutine=_async_runner(engine, anchor, actor, body), name=name,
                description=description, args_schema=AskArgs, handle_tool_error=True)
        tools.append(tool)
    return tools
