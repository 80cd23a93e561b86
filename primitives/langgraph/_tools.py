"""The six memory tools of seed 002 §13 as LangChain tools, bound to a spec and a tenant.

``memory_tools(engine, anchor)`` returns ``search_memory``, ``remember_fact``,
``correct_fact``, ``confirm_fact``, ``get_entity_info`` and ``memory_stats``, and for a
spec with ``graph:`` also ``explain_fact``, ``weak_facts`` and ``forget_fact``. Each call
runs in its own tenant transaction of ``engine`` (sync ``Engine``: the tools' sync
``invoke``; ``AsyncEngine``: ``ainvoke``), so writes are journalled like any other. A
refusal (write policy, unknown id, bad argument) comes back to the model as the tool's
error text (``handle_tool_error``) rather than stopping the graph.

Every memory in a result carries the timestamp contract of
:mod:`primitives.langgraph._timestamps` for its ``event_time``.

Example::

    tools = memory_tools(engine, {"user_id": "u-1"})
    search = next(t for t in tools if t.name == "search_memory")
    search.invoke({"query": "where does Dana work?"})
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar
from uuid import UUID

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from primitives.engine import (
    AsyncEngine,
    Edge,
    Engine,
    Entity,
    Hit,
    Memory,
    SearchResult,
    resolve_anchor,
)
from primitives.engine._consolidate import Consolidation
from primitives.engine._insight import FactProvenance, SessionEpisodes, WeakFact
from primitives.errors import GovernanceError, PolicyViolation, PrimitivesError, TenancyError
from primitives.extraction import Decision, EntityMention
from primitives.langgraph._timestamps import event_time_fields

__all__ = ["GRAPH_TOOL_NAMES", "REFUSALS", "TOOL_NAMES", "WRITE_PATH_TOOL_NAMES",
           "memory_tools", "write_path_tools"]

REFUSALS: tuple[type[PrimitivesError], ...] = (GovernanceError, PolicyViolation, TenancyError)
"""The errors that refuse a request (write policy, PII block, namespace or anchor that does
not fit): ``ToolNode(tools, handle_tool_errors=REFUSALS)`` (or
``create_react_agent(model, ToolNode(...))``) turns one raised inside any tool, such as a
store write of a third-party memory tool, into an error message the model sees instead of
an aborted run. The tools of :func:`memory_tools` already answer every ``PrimitivesError``
that way."""

TOOL_NAMES = ("search_memory", "remember_fact", "correct_fact", "confirm_fact",
              "get_entity_info", "memory_stats")
GRAPH_TOOL_NAMES = ("explain_fact", "weak_facts", "forget_fact")
"""Added for specs with ``graph:`` (seed 002 phase 6 and the user's "forget that"): a fact's
provenance chain, the weak facts report, and invalidating a fact (kept in history)."""
WRITE_PATH_TOOL_NAMES = ("get_session_episodes", "save_nodes_batch", "detect_conflicts",
                         "save_causal_edges", "mark_session_consolidated")
"""The write-path agent's own tools (seed 002 §10.3), not the orchestrator's: a session's
episodes page by page (with whether it is consolidated), the memories it extracts saved with
``derived_from`` edges, the active facts a new one may contradict, causal edges between
episodes it infers, and the session marked consolidated once all is saved."""
DEFAULT_INFERENCE = 0.6
"""An inferred edge's confidence where ``graph.confidence`` declares none (seed 002 §12.1)."""
R = TypeVar("R")
Type = Literal["episodic", "semantic", "procedural", "opinion"]
Extracted = Literal["semantic", "procedural", "opinion"]


@dataclass(frozen=True)
class _Call:
    """One TenantMemory method call, made by whichever engine runs the tool."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


Body = Generator[_Call, Any, R]


# argument schemas (what the model sees) ------------------------------------------------------
class SearchMemoryArgs(BaseModel):
    query: str = Field(description="what to look for, in plain words")
    type: Type | None = Field(None, description="only this kind of memory; by default "
                                                "everything except raw episodes")
    entity_name: str | None = Field(None, description="only memories about this entity")
    after: str | None = Field(None, description="only memories from after this ISO 8601 time")
    before: str | None = Field(None, description="only memories from before this ISO 8601 time")
    limit: int = Field(10, ge=1, le=100, description="at most this many results")


class RememberFactArgs(BaseModel):
    fact: str = Field(description="the fact, as one self-contained sentence")
    entities: list[str] = Field(default_factory=list,
                                description="people, projects or things the fact is about")
    key: str | None = Field(None, description="a stable name; remembering it again updates it")


class CorrectFactArgs(BaseModel):
    fact_id: str = Field(description="the id of the memory to correct")
    corrected_fact: str = Field(description="the corrected fact")
    reason: str | None = Field(None, description="why it changed")


class ConfirmFactArgs(BaseModel):
    fact_id: str = Field(description="the id of the memory the user confirmed")


class EntityInfoArgs(BaseModel):
    name: str = Field(description="the entity's name")
    limit: int = Field(20, ge=1, le=100, description="at most this many facts and events")


class NoArgs(BaseModel):
    pass


class ExplainFactArgs(BaseModel):
    fact_id: str = Field(description="the id of the memory to explain")


class WeakFactsArgs(BaseModel):
    below: float = Field(0.5, gt=0, le=1, description="a confidence under this is low")
    limit: int = Field(20, ge=1, le=100, description="at most this many facts")


class SessionEpisodesArgs(BaseModel):
    session_id: str = Field(description="the session whose episodes to read")
    limit: int = Field(30, ge=1, le=200, description="at most this many episodes")
    offset: int = Field(0, ge=0, description="skip this many (the next page)")


class CausalPair(BaseModel):
    cause_id: str = Field(description="the episode that caused the other")
    effect_id: str = Field(description="the episode it caused")


class SaveCausalEdgesArgs(BaseModel):
    pairs: list[CausalPair] = Field(min_length=1, max_length=100,
                                    description="cause and effect episodes, each pair only "
                                    "where an episode says so explicitly")


class NodeEntity(BaseModel):
    name: str = Field(min_length=1, description="the entity's name as said")
    type: str = Field(description="one of the memory's entity types (person, place, ...)")


class ExtractedNode(BaseModel):
    type: Extracted = Field(description="semantic: a durable fact; procedural: how something "
                            "is done; opinion: a preference or judgement")
    content: str = Field(min_length=1, description="the memory, as one self-contained sentence")
    evidence: list[str] = Field(min_length=1, description="ids of the session's episodes it "
                                "rests on (derived_from)")
    entities: list[NodeEntity] = Field(default_factory=list,
                                       description="people, places or things it is about")
    confidence: float = Field(0.8, ge=0, le=1, description="how sure the episodes make it")
    key: str | None = Field(None, description="a stable name; a later memory under it "
                            "supersedes this one")
    replaces: str | None = Field(None, description="the id of an active memory this one "
                                 "corrects (from detect_conflicts)")


class SaveNodesBatchArgs(BaseModel):
    session_id: str = Field(description="the session the memories were extracted from")
    nodes: list[ExtractedNode] = Field(min_length=1, max_length=50,
                                       description="the memories to save; all or none are kept")


class DetectConflictsArgs(BaseModel):
    content: str = Field(min_length=1, description="the new memory, as it would be saved")
    type: Extracted | None = Field(None, description="only memories of this kind")
    limit: int = Field(5, ge=1, le=50, description="at most this many candidates")


class SessionArgs(BaseModel):
    session_id: str = Field(description="the session whose extraction is complete")


class ForgetFactArgs(BaseModel):
    fact_id: str = Field(description="the id of the memory the user wants forgotten")
    reason: str | None = Field(None, description="why it no longer holds")


# helpers -----------------------------------------------------------------------------------------
def memory_dict(memory: Memory, score: float | None = None, *,
                confidence: float | None = None) -> dict[str, Any]:
    """A memory as a tool result: JSON-safe, with the timestamp contract. ``confidence``:
    the effective confidence a search found (default: the stored one)."""
    out: dict[str, Any] = {
        "id": str(memory.id), "key": memory.key, "tier": memory.tier, "type": memory.typology,
        "content": memory.content,
        "confidence": memory.confidence if confidence is None else confidence,
        "state": memory.state,
        "entities": list(memory.envelope.get("entities") or []),
    }
    if score is not None:
        out["score"] = score
    out.update(event_time_fields(memory.event_time))
    return out


def _time(text: str | None, name: str) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as err:
        raise ToolException(f"{name}: {text!r} is not an ISO 8601 date or time "
                            "(e.g. 2026-02-23 or 2026-02-23T15:00:00+00:00)") from err
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _memory_id(text: str, name: str = "fact_id") -> UUID:
    try:
        return UUID(text)
    except ValueError as err:
        raise ToolException(f"{name} {text!r} is not a memory id (a UUID from "
                            "search_memory or remember_fact)") from err


def _mentions(memory: Memory, name: str) -> bool:
    wanted = name.casefold()
    entities = [str(e).casefold() for e in memory.envelope.get("entities") or []]
    subject = str(memory.envelope.get("subject", "")).casefold()
    return wanted in entities or wanted == subject or wanted in memory.content.casefold()


def _candidates(limit: int) -> int:
    return min(1000, max(50, limit * 5))


# tool bodies: engine-neutral, run by _sync_runner / _async_runner -------------------------------
class _Bodies:
    def __init__(self, tier: str, *, graph: bool = False, inference: bool = False) -> None:
        self.tier = tier
        self.graph = graph
        """The spec has ``graph:``: entities resolve through the entity tables as well."""
        self.inference = inference
        """``graph.confidence`` declares ``inference`` (the confidence of inferred edges)."""

    def search_memory(self, query: str, type: Type | None = None,
                      entity_name: str | None = None, after: str | None = None,
                      before: str | None = None, limit: int = 10,
                      ) -> Body[list[dict[str, Any]] | dict[str, Any]]:
        since, until = _time(after, "after"), _time(before, "before")
        window = {"window": (since, until)} if since or until else {}
        # the window bounds the graph walk too (a "when" question's timeline)
        hits: SearchResult[Hit] = yield _Call("search", (query,),
                                              {"limit": _candidates(limit), **window})
        if hits.abstained:  # retrieval.abstain: the spec's "I don't know" is the answer
            return {"status": "abstained", "message": hits.message, "results": []}
        found: list[dict[str, Any]] = []
        for hit in hits:
            memory = hit.memory
            if (memory.typology != type) if type else memory.typology == "episodic":
                continue  # seed 002 §14: raw episodes only when asked for
            if entity_name and not _mentions(memory, entity_name):
                continue
            if (since and memory.event_time < since) or (until and memory.event_time > until):
                continue
            found.append(memory_dict(memory, hit.score, confidence=hit.confidence))
            if len(found) == limit:
                break
        return found

    def remember_fact(self, fact: str, entities: list[str] | None = None,
                      key: str | None = None) -> Body[dict[str, Any]]:
        memory: Memory = yield _Call("observe", (self.tier, fact), {
            "typology": "semantic", "key": key, "source": "tool:remember_fact",
            "envelope": {"entities": list(entities)} if entities else {}})
        linked: list[str] = []
        if self.graph and entities:
            # Names of recorded entities (or their aliases) become graph mentions; others
            # stay in the envelope until an entity of that name is recorded.
            known: list[Entity] = []
            for name in entities:
                found: list[Entity] = yield _Call("find_entities", (name,))
                known += found[:1]
            if known:
                mentioned: list[Entity] = yield _Call(
                    "mention", (memory.id, [e.id for e in known]))
                linked = [e.canonical_name for e in mentioned]
        result = {"status": "remembered", **memory_dict(memory)}
        if self.graph:
            result["linked_entities"] = linked
        return result

    def correct_fact(self, fact_id: str, corrected_fact: str,
                     reason: str | None = None) -> Body[dict[str, Any]]:
        memory: Memory = yield _Call("supersede", (_memory_id(fact_id), corrected_fact),
                                     {"reason": reason or "corrected by the user"})
        return {"status": "corrected", "supersedes": fact_id, **memory_dict(memory)}

    def confirm_fact(self, fact_id: str) -> Body[dict[str, Any]]:
        memory: Memory = yield _Call("confirm", (_memory_id(fact_id),),
                                     {"reason": "confirmed by the user"})
        return {"status": "confirmed", **memory_dict(memory)}

    def get_entity_info(self, name: str, limit: int = 20) -> Body[dict[str, Any]]:
        hits: list[Hit] = yield _Call("search", (name,), {"limit": _candidates(limit)})
        about = [h for h in hits if _mentions(h.memory, name)]
        profile: Entity | None = None
        if self.graph:
            found: list[Entity] = yield _Call("find_entities", (name,))
            if found:
                profile, linked = yield _Call("entity_memories", (found[0].id,),
                                              {"limit": _candidates(limit)})
                seen = {h.memory.id for h in about}
                score = {h.memory.id: h.score for h in hits}
                about += [Hit(m, score.get(m.id, 0.0)) for m in linked if m.id not in seen]
        facts = sorted((h for h in about if h.memory.typology != "episodic"),
                       key=lambda h: (-h.memory.confidence, -h.score))[:limit]
        events = sorted((h.memory for h in about if h.memory.typology == "episodic"),
                        key=lambda m: m.event_time)[:limit]
        info: dict[str, Any] = {
            "entity": name,
            "summary": facts[0].memory.content if facts else "",
            "facts": [memory_dict(h.memory, h.score) for h in facts],
            "timeline": [memory_dict(m) for m in events],
        }
        if profile is not None:
            info.update(entity=profile.canonical_name, type=profile.type,
                        aliases=list(profile.aliases), mentions=profile.mention_count,
                        summary=profile.summary or info["summary"])
        return info

    def explain_fact(self, fact_id: str) -> Body[dict[str, Any]]:
        chain: FactProvenance = yield _Call("explain_fact", (_memory_id(fact_id),))
        return {
            **memory_dict(chain.memory),
            "derived_from": [{"depth": d, "relation": r, **memory_dict(m)}
                             for d, r, m in chain.chain],
            "superseded_by": [memory_dict(m) for m in chain.superseded_by],
            "episodes": [memory_dict(m) for m in chain.episodes],
            "journal": list(chain.journal),
        }

    def weak_facts(self, below: float = 0.5, limit: int = 20) -> Body[dict[str, Any]]:
        weak: list[WeakFact] = yield _Call("weak_facts", (), {"below": below, "limit": limit})
        return {"weak_facts": [w.as_dict() for w in weak]}

    def forget_fact(self, fact_id: str, reason: str | None = None) -> Body[dict[str, Any]]:
        found: Memory | None = yield _Call("get", (_memory_id(fact_id),))
        if found is not None and found.typology == "episodic":
            # seed 002 §12.2: episodes are the immutable record the facts are derived from
            raise ToolException(f"memory {fact_id} is an episodic record of what was said, "
                                "not a fact: episodes are never forgotten; forget or correct "
                                "the fact derived from it instead")
        memory: Memory = yield _Call("invalidate", (_memory_id(fact_id),),
                                     {"reason": reason or "forgotten at the user's request"})
        return {"status": "forgotten", **memory_dict(memory)}

    def get_session_episodes(self, session_id: str, limit: int = 30,
                             offset: int = 0) -> Body[dict[str, Any]]:
        page: SessionEpisodes = yield _Call("session_episodes", (session_id,),
                                            {"limit": limit, "offset": offset})
        return {"session_id": session_id, "consolidated": page.consolidated,
                "episodes": [memory_dict(m) for m in page.episodes]}

    def save_causal_edges(self, pairs: list[CausalPair]) -> Body[dict[str, Any]]:
        saved = []
        for n, given in enumerate(pairs):
            pair = CausalPair.model_validate(given)
            ids = (_memory_id(pair.cause_id), _memory_id(pair.effect_id))
            for memory_id in ids:
                found: Memory | None = yield _Call("get", (memory_id,))
                if found is None or found.typology != "episodic":
                    # nothing of the call is kept: the tool's transaction rolls back
                    raise ToolException(f"pairs[{n}]: {memory_id} is not an episode of this "
                                        "memory; causal edges join two episodes; no edge of "
                                        "this call was saved")
            # the inference confidence where graph.confidence declares it (seed 002 §12.1)
            strength = ({"source": "inference"} if self.inference
                        else {"confidence": DEFAULT_INFERENCE})
            edge: Edge = yield _Call("relate", (*ids, "causal"), {
                **strength, "evidence": [{"tool": "save_causal_edges"}]})
            saved.append({"edge_id": str(edge.id), "cause_id": str(ids[0]),
                          "effect_id": str(ids[1]), "confidence": edge.confidence})
        return {"status": "saved", "edges": saved}

    def save_nodes_batch(self, session_id: str,
                         nodes: list[ExtractedNode]) -> Body[dict[str, Any]]:
        decisions = []
        for n, given in enumerate(nodes):
            node = ExtractedNode.model_validate(given)
            decisions.append(Decision(
                "UPDATE" if node.replaces else "ADD", typology=node.type, content=node.content,
                key=node.key, confidence=node.confidence,
                target_id=_memory_id(node.replaces, f"nodes[{n}].replaces")
                if node.replaces else None,
                entities=tuple(EntityMention(e.name, e.type) for e in node.entities),
                evidence=tuple(_memory_id(e, f"nodes[{n}].evidence") for e in node.evidence)))
        # one transaction: a refused node refuses the batch (seed 002 §10.1: partial work
        # is never left behind by this tool)
        done: list[Consolidation] = yield _Call("save_extracted", (session_id, decisions))
        counts = {k: sum(getattr(d, k) for d in done)
                  for k in ("added", "updated", "merged", "unchanged", "skipped", "edges",
                            "mentions")}
        return {"status": "saved", "session_id": session_id, **counts,
                "memory_ids": [str(i) for d in done for i in d.memory_ids]}

    def detect_conflicts(self, content: str, type: Extracted | None = None,
                         limit: int = 5) -> Body[dict[str, Any]]:
        hits: SearchResult[Hit] = yield _Call("search", (content,),
                                              {"limit": _candidates(limit)})
        found = [memory_dict(h.memory, h.score, confidence=h.confidence) for h in hits
                 if h.memory.typology != "episodic" and (type is None
                                                         or h.memory.typology == type)]
        return {"content": content, "candidates": found[:limit]}

    def mark_session_consolidated(self, session_id: str) -> Body[dict[str, Any]]:
        done: list[Consolidation] = yield _Call("mark_consolidated", (session_id,))
        claimed = sum(d.episodes for d in done)
        return {"status": "consolidated" if claimed else "already_consolidated",
                "session_id": session_id, "episodes": claimed}

    def memory_stats(self) -> Body[dict[str, Any]]:
        stats: dict[str, Any] = yield _Call("stats")
        last = stats.pop("last_write")
        return {**stats, "last_write": event_time_fields(last)["event_time_iso"]}


# runners ------------------------------------------------------------------------------------------
def _drive(body: Body[R], call: Callable[[_Call], Any]) -> R:
    try:
        step = next(body)
        while True:
            step = body.send(call(step))
    except StopIteration as done:
        result: R = done.value
        return result


async def _adrive(body: Body[R], call: Callable[[_Call], Awaitable[Any]]) -> R:
    try:
        step = next(body)
        while True:
            step = body.send(await call(step))
    except StopIteration as done:
        result: R = done.value
        return result


def _sync_runner(engine: Engine, anchor: Mapping[str, object], actor: str,
                 make: Callable[..., Body[Any]]) -> Callable[..., Any]:
    def run(**kwargs: Any) -> Any:
        try:
            with engine.tenant(anchor, actor=actor) as mem:
                return _drive(make(**kwargs),
                              lambda c: getattr(mem, c.method)(*c.args, **c.kwargs))
        except PrimitivesError as err:
            raise ToolException(str(err)) from err
    return run


def _async_runner(engine: AsyncEngine, anchor: Mapping[str, object], actor: str,
                  make: Callable[..., Body[Any]]) -> Callable[..., Awaitable[Any]]:
    async def run(**kwargs: Any) -> Any:
        try:
            async with engine.tenant(anchor, actor=actor) as mem:
                return await _adrive(make(**kwargs),
                                     lambda c: getattr(mem, c.method)(*c.args, **c.kwargs))
        except PrimitivesError as err:
            raise ToolException(str(err)) from err
    return run


_DESCRIPTIONS: dict[str, tuple[type[BaseModel], str]] = {
    "search_memory": (SearchMemoryArgs, "Search long-term memory (hybrid retrieval). The "
                      "primary tool for any question about what you know or were told."),
    "remember_fact": (RememberFactArgs, "Save an important fact worth remembering, with the "
                      "entities it is about."),
    "correct_fact": (CorrectFactArgs, "Replace a remembered fact with its corrected version "
                     "when the user corrects it; the old version is kept in history."),
    "confirm_fact": (ConfirmFactArgs, "Mark a fact as confirmed by the user: full confidence, "
                     "never forgotten."),
    "get_entity_info": (EntityInfoArgs, "Everything remembered about a person, project or "
                        "thing: summary, facts and timeline."),
    "memory_stats": (NoArgs, "How much is remembered: counts by kind, tier and state (with "
                     "a graph: edges by type, entities, orphans, unconsolidated sessions)."),
    "explain_fact": (ExplainFactArgs, "How a memory is known: the episodes and facts it was "
                     "derived from, what it replaced and what replaced it."),
    "weak_facts": (WeakFactsArgs, "Facts that may be wrong or are fading: low confidence, "
                   "from a single episode, or about to be forgotten by decay."),
    "get_session_episodes": (SessionEpisodesArgs, "Read a finished session's episodes in "
                             "order, a page at a time, and whether it is consolidated."),
    "save_nodes_batch": (SaveNodesBatchArgs, "Save the facts, procedures and opinions "
                         "extracted from a session, each with the episodes it rests on; "
                         "all are saved or, on a refusal, none."),
    "detect_conflicts": (DetectConflictsArgs, "Find active memories a new one may "
                         "contradict (hybrid search), to pass as its replaces."),
    "mark_session_consolidated": (SessionArgs, "Mark a session consolidated, only after "
                                  "everything extracted from it is saved."),
    "save_causal_edges": (SaveCausalEdgesArgs, "Record that one episode caused another, "
                          "only where an episode says so; inferred edges carry the inference "
                          "confidence."),
    "forget_fact": (ForgetFactArgs, "Forget a fact the user says no longer holds; it is kept "
                    "in history but no longer recalled."),
}


def memory_tools(engine: Engine | AsyncEngine, anchor: Mapping[str, object], *,
                 tier: str | None = None, actor: str = "agent") -> list[BaseTool]:
    """The six memory tools for one tenant of ``engine``'s spec, and with ``graph:`` also
    :data:`GRAPH_TOOL_NAMES`.

    ``tier`` is where ``remember_fact`` writes (default: the persistent tier). Raises
    :class:`TenancyError` when ``anchor`` or ``tier`` does not fit the spec.
    """
    spec = engine.spec
    resolve_anchor(spec, anchor)
    tier = tier or spec.persistent_tier.name
    if tier not in spec.tier_names:
        raise TenancyError(f"unknown tier '{tier}' for agent '{spec.agent}'; tiers: "
                           f"{', '.join(spec.tier_names)}", tier=tier)
    names = TOOL_NAMES + (GRAPH_TOOL_NAMES if spec.graph is not None else ())
    return _bind(engine, anchor, _Bodies(tier, graph=spec.graph is not None), actor, names)


def write_path_tools(engine: Engine | AsyncEngine, anchor: Mapping[str, object], *,
                     actor: str = "memory_agent") -> list[BaseTool]:
    """The write-path agent's tools (:data:`WRITE_PATH_TOOL_NAMES`) for one tenant of a
    spec with ``graph:`` (a :class:`PolicyViolation` otherwise); like the memory tools, each
    call is one tenant transaction and a refusal is the tool's error text."""
    spec = engine.spec
    resolve_anchor(spec, anchor)
    if spec.graph is None or "causal" not in spec.graph.edges:
        raise PolicyViolation(f"agent '{spec.agent}' declares no causal edges (graph.edges): "
                              "the write-path tools read sessions, save what is extracted "
                              "from them and record causal edges")
    bodies = _Bodies(spec.persistent_tier.name, graph=True,
                     inference="inference" in spec.graph.confidence)
    return _bind(engine, anchor, bodies, actor, WRITE_PATH_TOOL_NAMES)


def _bind(engine: Engine | AsyncEngine, anchor: Mapping[str, object], bodies: _Bodies,
          actor: str, names: tuple[str, ...]) -> list[BaseTool]:
    tools: list[BaseTool] = []
    for name in names:
        schema, description = _DESCRIPTIONS[name]
        make = getattr(bodies, name)
        if isinstance(engine, Engine):
            tool = StructuredTool.from_function(
                func=_sync_runner(engine, anchor, actor, make), name=name,
                description=description, args_schema=schema, handle_tool_error=True)
        else:
            tool = StructuredTool.from_function(
                coroutine=_async_runner(engine, anchor, actor, make), name=name,
                description=description, args_schema=schema, handle_tool_error=True)
        tools.append(tool)
    return tools
