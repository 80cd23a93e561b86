"""Context assembly: block budgets, priority eviction, presence, and the rendered pack."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import count
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from primitives.engine._records import Entity, Hit, Memory
from primitives.retrieval import ContextPack, assemble_context, estimate_tokens
from primitives.retrieval._context import item_text
from primitives.spec import AgentSpec, load_spec
from primitives.spec._behavior import ContextBudget

ROOT = Path(__file__).resolve().parents[2]
ASSISTANT = load_spec(ROOT / "agents" / "assistant_memory.yaml")
SPECTRAL = load_spec(ROOT / "agents" / "spectral_agent.yaml")
NOW = datetime(2025, 1, 1, tzinfo=UTC)
_ids = count(1)


def _memory(tier: str, typology: str = "episodic", content: str | None = None,
            tokens: int = 10) -> Memory:
    number = next(_ids)
    text = content if content is not None else f"m{number}".ljust(tokens * 4, ".")
    return Memory(
        id=UUID(int=number), tier=tier, typology=typology, scope_id=None, namespace=("t",),
        key=f"k{number}", content=text, value={}, envelope={}, tags=(), confidence=1.0,
        event_time=NOW, created_at=NOW, updated_at=NOW, superseded_at=None,
        invalidated_at=None, archived_at=None, tombstoned_at=None,
        persistent=tier in ("long_term", "workspace"),
    )


def _hits(*memories: Memory) -> list[Hit]:
    return [Hit(memory=m, score=1.0 / (i + 1)) for i, m in enumerate(memories)]


def _with_context(spec: AgentSpec, **context: Any) -> AgentSpec:
    budget = ContextBudget.model_validate(context)
    return spec.model_copy(
        update={"behavior": spec.behavior.model_copy(update={"context": budget})})


def _names(pack: ContextPack, block: str) -> list[str]:
    return [m.key for m in pack.block(block).items]


def test_estimate_tokens_is_characters_over_four_rounded_up() -> None:
    assert [estimate_tokens("x" * n) for n in (0, 1, 4, 5, 8)] == [0, 1, 1, 2, 2]


def test_block_budget_is_never_exceeded_and_a_too_big_item_lets_smaller_ones_in() -> None:
    spec = _with_context(SPECTRAL, blocks=[
        {"name": "ws", "tiers": ["workspace"], "tokens": 25, "priority": 1,
         "presence": "on_demand"}])
    small, big, small2, small3 = (_memory("workspace", tokens=t) for t in (10, 20, 10, 10))
    pack = assemble_context(spec, _hits(small, big, small2, small3))
    block = pack.block("ws")
    assert block.items == (small, small2)  # big skipped; small3 no longer fits
    assert block.used == 20 <= block.budget == 25
    assert pack.total_tokens_used == 20


def test_share_budget_follows_query_complexity() -> None:
    budgets = {
        c: {b.name: b.budget for b in assemble_context(ASSISTANT, [], complexity=c).blocks}
        for c in ("simple", "complex", None)
    }
    assert budgets["simple"] == {"facts": 400, "entity_profiles": 250,
                                 "temporal_context": 250, "evidence": 100}
    assert budgets["complex"]["facts"] == 1200
    assert budgets[None]["facts"] == 800  # total_tokens when complexity is unknown


def test_complexity_caps_what_a_block_takes() -> None:
    facts = [_memory("long_term", "semantic", tokens=100) for _ in range(10)]
    simple = assemble_context(ASSISTANT, _hits(*facts), complexity="simple")
    complex_ = assemble_context(ASSISTANT, _hits(*facts), complexity="complex")
    assert len(simple.block("facts").items) == 4
    assert len(complex_.block("facts").items) == 10


def test_eviction_takes_whole_items_from_the_highest_priority_number_first() -> None:
    spec = _with_context(SPECTRAL, total_tokens=100, blocks=[
        {"name": "cycle", "tiers": ["cycle"], "tokens": 80, "priority": 1, "presence": "always"},
        {"name": "run", "tiers": ["run"], "tokens": 80, "priority": 3, "presence": "always"},
        {"name": "ws", "tiers": ["workspace"], "tokens": 80, "priority": 2,
         "presence": "on_demand"},
    ])
    cycle = [_memory("cycle") for _ in range(8)]
    run = [_memory("run") for _ in range(8)]
    ws = [_memory("workspace") for _ in range(8)]
    pack = assemble_context(spec, _hits(*ws), always=cycle + run)
    assert [(b.name, len(b.items), b.evicted) for b in pack.blocks] == [
        ("cycle", 8, 0), ("run", 0, 8), ("ws", 2, 6)]
    assert pack.block("ws").items == tuple(ws[:2])  # the lowest-ranked went first
    assert pack.total_tokens_used == 100


def test_default_context_has_no_total_so_nothing_is_evicted() -> None:
    cycle = [_memory("cycle") for _ in range(50)]
    pack = assemble_context(SPECTRAL, [], always=cycle)
    assert [b.budget for b in pack.blocks] == [1024, 1024, 1024]
    assert len(pack.block("cycle").items) == 50
    assert all(b.evicted == 0 for b in pack.blocks)


def test_always_rows_feed_always_blocks_and_on_demand_blocks_take_hits_only() -> None:
    current = _memory("cycle")
    stray = _memory("workspace")  # passed as always, but only an on_demand block takes it
    searched_run, searched_ws = _memory("run"), _memory("workspace")
    pack = assemble_context(SPECTRAL, _hits(searched_run, searched_ws),
                            always=[current, stray])
    assert pack.block("cycle").items == (current,)
    assert pack.block("run").items == (searched_run,)
    assert pack.block("workspace").items == (searched_ws,)


def test_on_demand_blocks_stay_empty_when_not_requested() -> None:
    current, searched_ws = _memory("cycle"), _memory("workspace")
    pack = assemble_context(SPECTRAL, _hits(searched_ws), always=[current],
                            include_on_demand=False)
    assert pack.block("cycle").items == (current,)
    assert pack.block("workspace").items == ()
    assert "workspace" not in pack.text


def test_a_memory_goes_into_the_first_block_that_accepts_it_only() -> None:
    spec = _with_context(SPECTRAL, blocks=[
        {"name": "facts", "tiers": ["workspace"], "typology": ["semantic"], "tokens": 100,
         "priority": 1, "presence": "on_demand"},
        {"name": "anything", "tokens": 100, "priority": 2, "presence": "on_demand"},
    ])
    fact, episode = _memory("workspace", "semantic"), _memory("workspace", "episodic")
    pack = assemble_context(spec, _hits(fact, episode, fact))  # a duplicate hit, too
    assert pack.block("facts").items == (fact,)
    assert pack.block("anything").items == (episode,)


def test_typology_filters_route_facts_and_episodes_apart() -> None:
    fact = _memory("long_term", "semantic")
    episode = _memory("long_term", "episodic")
    chat = _memory("session", "episodic")  # no block of the assistant holds the session tier
    pack = assemble_context(ASSISTANT, _hits(episode, chat, fact))
    assert pack.block("facts").items == (fact,)
    assert pack.block("temporal_context").items == (episode,)
    # entity_profiles and evidence need the graph and quotes: filled elsewhere, never here.
    assert pack.block("entity_profiles").items == ()
    assert pack.block("evidence").items == ()


def test_items_keep_hit_order() -> None:
    facts = [_memory("long_term", "semantic") for _ in range(5)]
    order = [facts[3], facts[0], facts[4], facts[1], facts[2]]
    pack = assemble_context(ASSISTANT, _hits(*order))
    assert list(pack.block("facts").items) == order


def test_rendered_text_has_one_section_per_non_empty_block() -> None:
    fact = _memory("long_term", "semantic", content="Caroline researched adoption agencies")
    episode = _memory("long_term", "episodic", content="Met Melanie on 8 May\nat the park")
    pack = assemble_context(ASSISTANT, _hits(fact, episode))
    assert pack.text == (
        "## facts\n- Caroline researched adoption agencies\n\n"
        "## temporal_context\n- Met Melanie on 8 May\n  at the park"
    )


def test_assembly_is_deterministic() -> None:
    memories = [_memory("long_term", typ, tokens=t)
                for typ, t in [("semantic", 300), ("episodic", 200), ("opinion", 150),
                               ("episodic", 90), ("procedural", 400)]]
    first = assemble_context(ASSISTANT, _hits(*memories), complexity="simple")
    second = assemble_context(ASSISTANT, _hits(*memories), complexity="simple")
    assert first == second


def test_spec_without_context_gives_an_empty_pack() -> None:
    spec = SPECTRAL.model_copy(
        update={"behavior": SPECTRAL.behavior.model_copy(update={"context": None})})
    assert assemble_context(spec, _hits(_memory("cycle"))) == ContextPack((), "", 0)


@pytest.mark.parametrize("complexity", ["simple", "complex"])
def test_pack_never_exceeds_the_complexity_total(complexity: str) -> None:
    memories = [_memory("long_term", typ, tokens=37)
                for typ in ("semantic", "episodic") * 60]
    pack = assemble_context(ASSISTANT, _hits(*memories), complexity=complexity)  # type: ignore[arg-type]
    assert ASSISTANT.behavior.context is not None
    assert ASSISTANT.behavior.context.complexity is not None
    assert pack.total_tokens_used <= ASSISTANT.behavior.context.complexity[complexity]  # type: ignore[index]
    assert all(b.used <= b.budget for b in pack.blocks)


def _entity(name: str, summary: str | None = None, aliases: tuple[str, ...] = ()) -> Entity:
    return Entity(id=UUID(int=next(_ids)), canonical_name=name, type="person",
                  aliases=aliases, summary=summary, mention_count=1, first_seen=NOW,
                  last_updated=NOW)


def test_entity_profile_blocks_take_entities_one_line_each_within_budget() -> None:
    alice = _entity("Alice Moreau", "platform lead", ("Ali",))
    bob = _entity("Bob Stone")
    long = _entity("Carol Fry", "x" * 1200)                   # over the block's budget
    pack = assemble_context(ASSISTANT, [], entities=[alice, long, bob, alice],
                            complexity="simple")
    block = pack.block("entity_profiles")
    assert block.budget == 250 and block.items == (alice, bob)  # too long skipped, dup once
    assert item_text(alice) == "Alice Moreau (person): platform lead; also: Ali"
    assert item_text(bob) == "Bob Stone (person)"
    assert "## entity_profiles\n- Alice Moreau (person): platform lead; also: Ali\n" \
           "- Bob Stone (person)" in pack.text
    assert block.used == estimate_tokens(item_text(alice)) + estimate_tokens(item_text(bob))
    # entities never land in memory blocks, memories never in the profile block
    assert all(isinstance(m, Memory) for b in pack.blocks if b.name != "entity_profiles"
               for m in b.items)
    assert assemble_context(ASSISTANT, [], entities=[alice],
                            include_on_demand=False).block("entity_profiles").items == ()


def test_evidence_blocks_take_only_source_memories_they_accept_and_no_other_block_holds() -> None:
    source = _memory("long_term", "episodic", "Alice: I'd rather write it down")
    fact = _memory("long_term", "semantic", "the platform lead prefers written standups")
    wrong_kind = _memory("long_term", "semantic", "a fact is not a quote")
    also_hit = _memory("long_term", "episodic", "already in temporal context")
    pack = assemble_context(ASSISTANT, _hits(fact, also_hit),
                            evidence=[source, wrong_kind, also_hit])
    assert pack.block("evidence").items == (source,)
    assert pack.block("temporal_context").items == (also_hit,)
    assert pack.block("facts").items == (fact,)
    # hits never go to the evidence block, even when it would accept them
    assert assemble_context(ASSISTANT, _hits(source)).block("evidence").items == ()
