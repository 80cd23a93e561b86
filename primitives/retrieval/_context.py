"""Context assembly: search hits into per-block token budgets with priority eviction.

Pure and deterministic: the same spec, hits and arguments give the same pack. Nothing here
touches the database or a model.

Rules (seed 003 §12; seed 002 §11.4-11.5):

- A block accepts a memory whose tier is in ``block.tiers`` (any tier when empty) and whose
  typology is in ``block.typology`` (any when empty). Each memory is routed to the first
  block, in spec order, that accepts it, and only that one, even when it does not fit there.
- ``always`` blocks take the caller's ``always`` memories (the transient tiers' current
  rows), then matching hits; ``on_demand`` blocks take hits only, and only when
  ``include_on_demand``.
- ``content: memories`` blocks take memories. ``entity_profiles`` blocks take the caller's
  ``entities`` (graph specs: the entities the query names, then those the memories mention),
  each as one line, ``Name (type): summary``. ``evidence`` blocks take the caller's
  ``evidence`` memories (graph specs: the sources, by ``derived_from`` edges, of the memories
  offered to the pack) that their tiers and typology accept and no other block holds.
  Neither takes a search hit or an ``always`` row (so they never take rows meant for a later
  block).
- A block's budget is ``tokens``, or ``floor(share * total)``; the total is
  ``complexity[<complexity>]`` when both are given, else ``total_tokens``.
- Within a block items go in the order given (hits: fused score, descending); an item that
  does not fit is skipped, and a smaller later one may still fit.
- When the pack exceeds the total, whole items are evicted from the block with the highest
  ``priority`` number first (a later block first on ties), its lowest-ranked item first.
- Budgets count item content only (:func:`estimate_tokens`), not the rendered headings.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal
from uuid import UUID

from primitives.engine._records import Entity, Hit, Memory
from primitives.spec import AgentSpec
from primitives.spec._behavior import ContextBlock

__all__ = [
    "ContextBlockResult",
    "ContextPack",
    "assemble_context",
    "estimate_tokens",
    "render_context",
]

Complexity = Literal["simple", "complex"]


def estimate_tokens(text: str) -> int:
    """Tokens in ``text``, estimated as ``ceil(characters / 4)``.

    The common rule of thumb for English with BPE tokenizers; chosen over a word count
    because it needs no tokenisation, is exact to reproduce, and grows with long
    identifiers and numbers that a word count would undercount.

    >>> estimate_tokens("")
    0
    >>> estimate_tokens("Caroline researched adoption agencies")
    10
    """
    return (len(text) + 3) // 4


@dataclass(frozen=True)
class ContextBlockResult:
    """One block of a :class:`ContextPack`: what it holds and what it cost.

    ``evicted`` counts the items priority eviction removed to fit the total.
    """

    name: str
    priority: int
    budget: int
    used: int
    items: tuple[Memory | Entity, ...]
    evicted: int = 0


@dataclass(frozen=True)
class ContextPack:
    """The assembled context: blocks in spec order, the rendered text, the tokens used."""

    blocks: tuple[ContextBlockResult, ...]
    text: str
    total_tokens_used: int
    abstained: bool = False
    """The search for the query abstained (``retrieval.abstain``): no memory scored enough."""
    message: str | None = None
    """The spec's abstain message when it abstained."""

    def block(self, name: str) -> ContextBlockResult:
        """The block called ``name``; ``KeyError`` if the spec has none."""
        for result in self.blocks:
            if result.name == name:
                return result
        raise KeyError(name)


def assemble_context(
    spec: AgentSpec,
    hits: Sequence[Hit],
    *,
    always: Sequence[Memory] = (),
    entities: Sequence[Entity] = (),
    evidence: Sequence[Memory] = (),
    complexity: Complexity | None = None,
    include_on_demand: bool = True,
) -> ContextPack:
    """Fill the spec's context blocks from ``hits`` (and ``always``) within their budgets.

    >>> spec = load_spec("agents/spectral_agent.yaml")              # doctest: +SKIP
    >>> pack = assemble_context(spec, hits, always=current_rows)    # doctest: +SKIP
    >>> print(pack.text)                                            # doctest: +SKIP
    ## cycle
    - fetched the spectra for run 12
    """
    budget = spec.behavior.context
    if budget is None or not budget.blocks:
        return ContextPack(blocks=(), text="", total_tokens_used=0)
    total = _total(budget.total_tokens, budget.complexity, complexity)
    blocks = budget.blocks
    present = [block.presence == "always" or include_on_demand for block in blocks]
    active = [block.content == "memories" and on for block, on in zip(blocks, present,
                                                                        strict=True)]

    # Route every candidate to its one block, keeping first-seen order and no duplicates.
    routed: list[list[Memory | Entity]] = [[] for _ in blocks]
    seen: set[UUID] = set()
    candidates = [(memory, True) for memory in always] + [(hit.memory, False) for hit in hits]
    for memory, from_always in candidates:
        if memory.id in seen:
            continue
        for index, block in enumerate(blocks):
            if from_always and block.presence != "always":
                continue  # the caller's always rows only feed always blocks
            if active[index] and _accepts(block, memory):
                routed[index].append(memory)
                seen.add(memory.id)
                break
    profiles = _unique(entities)
    for index, block in enumerate(blocks):
        if block.content == "entity_profiles" and present[index]:
            routed[index] = list(profiles)
    for memory in evidence:
        if memory.id in seen:
            continue
        for index, block in enumerate(blocks):
            if block.content == "evidence" and present[index] and _accepts(block, memory):
                routed[index].append(memory)
                seen.add(memory.id)
                break

    budgets = [_block_budget(block, total) for block in blocks]
    filled: list[list[Memory | Entity]] = []
    for candidates_of_block, block_budget in zip(routed, budgets, strict=True):
        taken: list[Memory | Entity] = []
        used = 0
        for item in candidates_of_block:
            cost = estimate_tokens(item_text(item))
            if used + cost <= block_budget:
                taken.append(item)
                used += cost
        filled.append(taken)

    evicted = [0] * len(blocks)
    if total is not None:
        overflow = sum(_cost(items) for items in filled) - total
        # Highest priority number first; on ties the later block goes first.
        order = sorted(range(len(blocks)), key=lambda i: (-blocks[i].priority, -i))
        for index in order:
            while overflow > 0 and filled[index]:
                overflow -= estimate_tokens(item_text(filled[index].pop()))
                evicted[index] += 1
            if overflow <= 0:
                break

    results = tuple(
        ContextBlockResult(name=block.name, priority=block.priority, budget=block_budget,
                           used=_cost(items), items=tuple(items), evicted=count)
        for block, block_budget, items, count in zip(blocks, budgets, filled, evicted,
                                                     strict=True)
    )
    return ContextPack(blocks=results, text=render_context(results),
                       total_tokens_used=sum(result.used for result in results))


def render_context(blocks: Sequence[ContextBlockResult]) -> str:
    """One ``## <name>`` section per non-empty block, one ``- <content>`` line per item.

    Continuation lines of multi-line content are indented so each item stays one list entry.
    """
    sections = []
    for block in blocks:
        if not block.items:
            continue
        lines = [f"## {block.name}"]
        lines += ["- " + item_text(item).replace("\n", "\n  ") for item in block.items]
        sections.append("\n".join(lines))
    return "\n\n".join(sections)


def _total(total_tokens: int | None, by_complexity: dict[Complexity, int] | None,
           complexity: Complexity | None) -> int | None:
    if complexity is not None and by_complexity and complexity in by_complexity:
        return by_complexity[complexity]
    return total_tokens


def _block_budget(block: ContextBlock, total: int | None) -> int:
    if block.tokens is not None:
        return block.tokens
    assert block.share is not None  # the model validator guarantees one of the two
    if total is None:
        # The loader refuses a share without a total; a hand-built spec gets an empty block.
        return 0
    return math.floor(block.share * total)


def _accepts(block: ContextBlock, memory: Memory) -> bool:
    return ((not block.tiers or memory.tier in block.tiers)
            and (not block.typology or memory.typology in block.typology))


def _cost(items: Sequence[Memory | Entity]) -> int:
    return sum(estimate_tokens(item_text(item)) for item in items)


def item_text(item: Memory | Entity) -> str:
    """What an item puts in the context: a memory's content, or an entity's profile line
    ``Name (type): summary`` (``; also: alias, ...`` when it has aliases)."""
    if isinstance(item, Memory):
        return item.content
    line = f"{item.canonical_name} ({item.type})"
    if item.summary:
        line += f": {item.summary}"
    if item.aliases:
        line += f"; also: {', '.join(item.aliases)}"
    return line


def _unique(entities: Sequence[Entity]) -> list[Entity]:
    seen: set[UUID] = set()
    out = []
    for entity in entities:
        if entity.id not in seen:
            seen.add(entity.id)
            out.append(entity)
    return out
