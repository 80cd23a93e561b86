"""The extractors without a database: the rule-based patterns and mentions, and how the LLM
extractor reads a fake chat model's replies (JSON text, a fenced block, a tool call)."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID, uuid4

import pytest
from langchain_core.language_models.fake_chat_models import (
    FakeMessagesListChatModel,
    GenericFakeChatModel,
)
from langchain_core.messages import AIMessage

from primitives.errors import PolicyViolation
from primitives.extraction import (
    Decision,
    EntityMention,
    Episode,
    ExistingMemory,
    ExtractionRequest,
    Extractor,
    KnownEntity,
    LLMExtractor,
    RuleBasedExtractor,
)

TYPES = ("person", "project", "organization", "place", "concept", "tool")
ALL = ("semantic", "procedural", "opinion")


def _request(*texts: str, typologies: tuple[str, ...] = ALL,
             existing: tuple[ExistingMemory, ...] = (),
             entities: tuple[KnownEntity, ...] = (),
             types: tuple[str, ...] = TYPES) -> ExtractionRequest:
    return ExtractionRequest(tuple(Episode(uuid4(), t) for t in texts), typologies,
                             existing, entities, types)


def _decisions(request: ExtractionRequest) -> list[tuple[str, str | None, str | None, str]]:
    out = RuleBasedExtractor().extract(request)
    return [(d.action, d.typology, d.key, d.content) for d in out.decisions]


def test_both_extractors_satisfy_the_protocol() -> None:
    assert isinstance(RuleBasedExtractor(), Extractor)
    assert isinstance(LLMExtractor(GenericFakeChatModel(messages=iter([]))), Extractor)


# rule-based: patterns ---------------------------------------------------------------------------
def test_fact_preference_and_procedure_patterns_become_keyed_additions() -> None:
    assert _decisions(_request(
        "I work at Acme Corp. My favorite editor is Helix.",
        "Bob Stone works for Globex.",
        "I prefer short standups. I hate long meetings.",
        "Always run the tests before deploying.")) == [
        ("ADD", "semantic", "user:works_at", "User works at Acme Corp."),
        ("ADD", "semantic", "user:favorite editor", "User's favorite editor is Helix."),
        ("ADD", "semantic", "bob stone:works_at", "Bob Stone works at Globex."),
        ("ADD", "opinion", "preference:short standups", "User prefers short standups."),
        ("ADD", "opinion", "preference:long meetings", "User dislikes long meetings."),
        ("ADD", "procedural", "procedure:always run the tests before deploying",
         "Always run the tests before deploying."),
    ]


def test_a_sentence_opener_is_not_part_of_the_subject() -> None:
    assert _decisions(_request("Then Bob works at Globex.")) == [
        ("ADD", "semantic", "bob:works_at", "Bob works at Globex.")]


def test_text_without_a_pattern_decides_nothing() -> None:
    assert _decisions(_request("the weather was fine", "we talked for a while")) == []


def test_typologies_the_request_does_not_allow_are_skipped_or_fall_back() -> None:
    request = _request("I like green tea. Always lock the door.", typologies=("semantic",))
    assert _decisions(request) == [
        ("ADD", "semantic", "preference:green tea", "User likes green tea.")]
    assert _decisions(_request("I like green tea.", typologies=("procedural",))) == []


def test_a_held_key_becomes_an_update_or_a_noop() -> None:
    held = ExistingMemory(uuid4(), "semantic", "user:works_at", "User works at Initech.")
    [update] = RuleBasedExtractor().extract(
        _request("I work at Globex now.", existing=(held,))).decisions
    assert (update.action, update.target_id, update.content) == (
        "UPDATE", held.id, "User works at Globex.")
    [same] = RuleBasedExtractor().extract(
        _request("I work at Initech.", existing=(held,))).decisions
    assert (same.action, same.target_id) == ("NOOP", held.id)


def test_leaving_an_employer_deletes_only_the_fact_that_names_it() -> None:
    held = ExistingMemory(uuid4(), "semantic", "user:works_at", "User works at Initech.")
    [gone] = RuleBasedExtractor().extract(
        _request("I no longer work at Initech.", existing=(held,))).decisions
    assert (gone.action, gone.target_id) == ("DELETE", held.id)
    assert RuleBasedExtractor().extract(
        _request("I don't work at Hooli anymore.", existing=(held,))).decisions == ()


def test_a_later_statement_of_a_key_wins_within_a_session() -> None:
    assert _decisions(_request("I work at Acme.", "Actually I work at Globex.")) == [
        ("ADD", "semantic", "user:works_at", "User works at Globex.")]


def test_each_decision_names_its_evidence_episode() -> None:
    request = _request("nothing here", "I love jazz.")
    [decision] = RuleBasedExtractor().extract(request).decisions
    assert decision.evidence == (request.episodes[1].id,)
    assert decision.confidence == pytest.approx(0.8)
    assert RuleBasedExtractor(confidence=0.6).extract(request).decisions[0].confidence == 0.6
    with pytest.raises(ValueError, match="between 0 and 1"):
        RuleBasedExtractor(confidence=2)


# rule-based: mentions ---------------------------------------------------------------------------
def _mentions(request: ExtractionRequest) -> list[tuple[int, str, str]]:
    index = {e.id: n for n, e in enumerate(request.episodes)}
    return [(index[episode], m.name, m.type)
            for episode, m in RuleBasedExtractor().extract(request).mentions]


def test_proper_noun_spans_are_typed_by_their_surroundings() -> None:
    assert _mentions(_request(
        "Yesterday I met Sarah Chen in Lisbon.",
        "We signed with Initech Labs. Monday was slow.")) == [
        (0, "Sarah Chen", "person"), (0, "Lisbon", "place"),
        (1, "Initech Labs", "organization")]


def test_known_names_and_aliases_resolve_to_their_entity_in_any_case() -> None:
    sasha = KnownEntity("Alexandra Ivanova", "person", ("Sasha", "my boss"))
    assert _mentions(_request("talked to sasha and My Boss about Orion",
                              entities=(sasha,))) == [
        (0, "Alexandra Ivanova", "person"), (0, "Orion", "concept")]


def test_one_name_gets_one_type_across_the_session() -> None:
    assert _mentions(_request("Bob Stone works for Globex.", "Globex called again.")) == [
        (0, "Bob Stone", "person"), (0, "Globex", "organization"),
        (1, "Globex", "organization")]


def test_without_entity_types_nothing_is_mentioned() -> None:
    assert _mentions(_request("I met Sarah Chen at Globex.", types=())) == []


def test_a_type_the_spec_lacks_falls_back_to_concept_or_nothing() -> None:
    assert _mentions(_request("I met Sarah Chen.", types=("concept",))) == [
        (0, "Sarah Chen", "concept")]
    assert _mentions(_request("I met Sarah Chen.", types=("tool",))) == []


# LLM extractor ----------------------------------------------------------------------------------
def _answer(episode: UUID) -> dict[str, Any]:
    return {"decisions": [{"action": "ADD", "typology": "semantic", "key": "user:city",
                           "content": "User lives in Porto.", "confidence": 0.9,
                           "evidence": [str(episode)],
                           "entities": [{"name": "Porto", "type": "place"}]}],
            "mentions": [{"episode_id": str(episode), "name": "Porto", "type": "place"}]}


def _expected(episode: UUID) -> tuple[tuple[Decision, ...], tuple[Any, ...]]:
    porto = EntityMention("Porto", "place")
    return ((Decision("ADD", "semantic", "User lives in Porto.", "user:city", None, 0.9,
                      (porto,), (episode,)),), ((episode, porto),))


@pytest.mark.parametrize("wrap", ["plain", "fenced"])
def test_a_json_reply_becomes_decisions(wrap: str) -> None:
    request = _request("We moved to Porto.")
    episode = request.episodes[0].id
    text = json.dumps(_answer(episode))
    if wrap == "fenced":
        text = f"```json\n{text}\n```"
    model = GenericFakeChatModel(messages=iter([AIMessage(text)]))
    out = LLMExtractor(model).extract(request)
    assert (out.decisions, out.mentions) == _expected(episode)


def test_a_tool_call_reply_becomes_decisions() -> None:
    request = _request("We moved to Porto.")
    episode = request.episodes[0].id
    model = FakeMessagesListChatModel(responses=[AIMessage("", tool_calls=[
        {"name": "ConsolidationResult", "args": _answer(episode), "id": "call-1"}])])
    out = LLMExtractor(model).extract(request)
    assert (out.decisions, out.mentions) == _expected(episode)


def test_the_prompt_carries_the_episodes_existing_memories_and_the_schema() -> None:
    held = ExistingMemory(uuid4(), "semantic", "user:city", "User lives in Lyon.")
    request = _request("We moved to Porto.", existing=(held,))
    system, human = LLMExtractor(GenericFakeChatModel(messages=iter([]))).messages(request)
    payload = json.loads(str(human.content))
    assert payload["episodes"][0] == {"id": str(request.episodes[0].id),
                                      "content": "We moved to Porto.", "time": None}
    assert payload["existing_memories"][0]["id"] == str(held.id)
    assert payload["memory_types"] == list(ALL) and payload["entity_types"] == list(TYPES)
    assert "JSON Schema" in str(system.content) and "target_id" in str(system.content)


@pytest.mark.parametrize(("reply", "message"), [
    ("not json at all", "reply is not JSON"),
    (json.dumps({"decisions": [{"action": "MERGE"}]}), r"decisions\.0\.action"),
    (json.dumps({"decisions": [{"action": "ADD", "confidence": 3}]}),
     r"decisions\.0\.confidence"),
    (json.dumps({"decisions": [{"action": "DELETE", "target_id": "row 7"}]}),
     r"decisions\.0\.target_id"),
])
def test_a_reply_that_does_not_fit_is_refused_saying_why(reply: str, message: str) -> None:
    model = GenericFakeChatModel(messages=iter([AIMessage(reply)]))
    with pytest.raises(PolicyViolation, match=message):
        LLMExtractor(model).extract(_request("anything"))
