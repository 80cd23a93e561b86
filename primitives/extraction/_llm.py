"""An extractor on any LangChain chat model (seed 002 §10: LLM on the write path).

The model is asked for a :class:`ConsolidationResult`: through the model's own structured
output (``with_structured_output``) where it has one, otherwise by asking for that JSON
and reading the reply's tool call or text. Either way the answer is validated against the
schema; a reply that does not fit is a :class:`~primitives.errors.PolicyViolation` that
says why, and nothing is written.

langchain-core comes with LangGraph; no provider package is a dependency: pass any chat
model you have (``ChatOpenAI(...)``, ``ChatOllama(...)``, a fake model in tests).
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field, ValidationError

from primitives.errors import PolicyViolation
from primitives.extraction._model import (
    Decision,
    EntityMention,
    Extraction,
    ExtractionRequest,
)

__all__ = ["PROMPT", "ConsolidationResult", "LLMExtractor"]

PROMPT = """\
You consolidate an assistant's memory. You are given the episodes of one finished session,
the memories that already exist (with ids), the entities already known, the memory types
you may write and the entity types allowed. Answer with decisions:
- ADD: a durable fact (semantic), a successful way of doing something (procedural) or a
  preference or opinion (opinion) stated in the episodes and not already held.
- UPDATE: an existing memory (target_id) the episodes correct; content is its new text.
- DELETE: an existing memory (target_id) the episodes show is no longer true.
- NOOP: an existing memory the episodes merely repeat.
Give each decision the ids of the episodes it rests on (evidence), a confidence between
0 and 1, a short key for facts that can change (e.g. "user:employer"), and the entities it
mentions. Also list, per episode, the entities it mentions. Use only the given types.
List as causes only the pairs of episodes where one explicitly says it caused the other
("so", "because", "therefore"): the cause's id, then the effect's. Never speculate.
"""


class _Entity(BaseModel):
    name: str = Field(min_length=1)
    type: str


class _Decision(BaseModel):
    action: Literal["ADD", "UPDATE", "DELETE", "NOOP"]
    typology: str | None = None
    content: str = ""
    key: str | None = None
    target_id: UUID | None = None
    confidence: float = Field(default=0.8, ge=0, le=1)
    entities: list[_Entity] = Field(default_factory=list)
    evidence: list[UUID] = Field(default_factory=list)


class _Mention(BaseModel):
    episode_id: UUID
    name: str = Field(min_length=1)
    type: str


class _Cause(BaseModel):
    cause_id: UUID
    effect_id: UUID


class ConsolidationResult(BaseModel):
    """The structured answer asked of the model."""

    decisions: list[_Decision] = Field(default_factory=list)
    mentions: list[_Mention] = Field(default_factory=list)
    causes: list[_Cause] = Field(default_factory=list)


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


class LLMExtractor:
    """An :class:`~primitives.extraction.Extractor` backed by a LangChain chat model.

    >>> from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    >>> from langchain_core.messages import AIMessage
    >>> model = GenericFakeChatModel(messages=iter([AIMessage('{"decisions": []}')]))
    >>> LLMExtractor(model).name
    'llm'
    """

    name = "llm"

    def __init__(self, model: Any, *, prompt: str = PROMPT) -> None:
        self.model = model
        self.prompt = prompt
        self._structured: Any = None
        self._checked = False

    def _structured_model(self) -> Any:
        """The model's structured-output runnable, or None when it has none."""
        if not self._checked:
            self._checked = True
            try:
                self._structured = self.model.with_structured_output(ConsolidationResult)
            except (NotImplementedError, AttributeError):
                self._structured = None
        return self._structured

    def messages(self, request: ExtractionRequest) -> list[Any]:
        """The conversation sent to the model: the instructions, then the request as JSON."""
        from langchain_core.messages import HumanMessage, SystemMessage

        payload = {
            "memory_types": list(request.typologies),
            "entity_types": list(request.entity_types),
            "episodes": [{"id": str(e.id), "content": e.content,
                          "time": e.event_time.isoformat() if e.event_time else None}
                         for e in request.episodes],
            "existing_memories": [{"id": str(m.id), "type": m.typology, "key": m.key,
                                   "content": m.content, "confidence": m.confidence}
                                  for m in request.existing],
            "known_entities": [{"name": e.name, "type": e.type, "aliases": list(e.aliases)}
                               for e in request.entities],
        }
        structured = self._structured_model() is not None
        instructions = self.prompt if structured else (
            self.prompt + "\nReply with one JSON object of this JSON Schema and nothing "
            "else:\n" + json.dumps(ConsolidationResult.model_json_schema()))
        return [SystemMessage(instructions), HumanMessage(json.dumps(payload))]

    def extract(self, request: ExtractionRequest) -> Extraction:
        """Ask the model, validate its answer, and turn it into an :class:`Extraction`."""
        messages = self.messages(request)
        structured = self._structured_model()
        raw = structured.invoke(messages) if structured is not None else _answer(
            self.model.invoke(messages))
        return to_extraction(raw)


def _answer(reply: Any) -> Any:
    """The structured answer in a chat reply: its first tool call's arguments, else the JSON
    its text holds (a fenced block included)."""
    calls = getattr(reply, "tool_calls", None) or []
    if calls:
        return calls[0].get("args", {})
    content = getattr(reply, "content", reply)
    if isinstance(content, list):  # content blocks
        content = "".join(b if isinstance(b, str) else str(b.get("text", "")) for b in content)
    text = str(content)
    fenced = _FENCE.match(text)
    try:
        return json.loads(fenced.group(1) if fenced else text)
    except json.JSONDecodeError as err:
        raise PolicyViolation(f"the extraction model's reply is not JSON ({err.msg} at "
                              f"character {err.pos}): {text[:120]!r}",
                              field="extraction") from None


def to_extraction(raw: Any) -> Extraction:
    """``raw`` (a :class:`ConsolidationResult`, or its JSON as a dict) as an Extraction; a
    PolicyViolation naming the first problem when it does not fit the schema."""
    try:
        result = raw if isinstance(raw, ConsolidationResult) else (
            ConsolidationResult.model_validate(raw))
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise PolicyViolation(f"the extraction model's answer does not fit the schema: "
                              f"{where}: {first['msg']}", field="extraction") from None
    return Extraction(
        tuple(Decision(d.action, d.typology, d.content, d.key, d.target_id, d.confidence,
                       tuple(EntityMention(e.name, e.type) for e in d.entities),
                       tuple(d.evidence))
              for d in result.decisions),
        tuple((m.episode_id, EntityMention(m.name, m.type)) for m in result.mentions),
        tuple((c.cause_id, c.effect_id) for c in result.causes))
