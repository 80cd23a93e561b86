"""What an extractor is given and what it answers (seed 002 §10.1, DESIGN §10).

An :class:`Extractor` reads the episodes of one closed scope (a session) beside the memories
they may confirm, correct or retract, and answers an :class:`Extraction`: one
:class:`Decision` per fact, procedure or preference (``ADD`` a new memory, ``UPDATE`` one
of ``existing`` with new content, ``DELETE`` one, which invalidates it, or ``NOOP``), and
the entities each episode mentions. The engine checks every decision against the spec and
applies it through its own write path (:mod:`primitives.engine._consolidate`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable
from uuid import UUID

__all__ = [
    "ACTIONS",
    "Action",
    "Decision",
    "EntityMention",
    "Episode",
    "ExistingMemory",
    "Extraction",
    "ExtractionRequest",
    "Extractor",
    "KnownEntity",
]

Action = Literal["ADD", "UPDATE", "DELETE", "NOOP"]
ACTIONS: tuple[Action, ...] = ("ADD", "UPDATE", "DELETE", "NOOP")


@dataclass(frozen=True)
class Episode:
    """One observation of the scope being consolidated."""

    id: UUID
    content: str
    event_time: datetime | None = None


@dataclass(frozen=True)
class ExistingMemory:
    """An active memory of a target typology that a decision may update or delete."""

    id: UUID
    typology: str
    key: str
    content: str
    confidence: float = 1.0


@dataclass(frozen=True)
class KnownEntity:
    """An entity the tenant's graph already holds (its name and aliases are the alias
    dictionary of mention detection)."""

    name: str
    type: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class EntityMention:
    """An entity by name and type (one of ``graph.entity_types``); created when new."""

    name: str
    type: str


@dataclass(frozen=True)
class ExtractionRequest:
    """What an extractor reads: the scope's ``episodes`` in event order, the ``existing``
    memories of the ``typologies`` it may write, the tenant's ``entities``, and the entity
    types the spec allows (empty: the spec has no graph, so no entities are recorded)."""

    episodes: tuple[Episode, ...]
    typologies: tuple[str, ...]
    existing: tuple[ExistingMemory, ...] = ()
    entities: tuple[KnownEntity, ...] = ()
    entity_types: tuple[str, ...] = ()


@dataclass(frozen=True)
class Decision:
    """One consolidation decision.

    ``ADD``: a new memory of ``typology`` holding ``content`` (under ``key`` when given: a
    later write of the same key supersedes it). ``UPDATE``: ``target_id`` (one of the
    request's ``existing``) gets a new version with ``content``; the typology's conflict
    policy decides what happens to the old one. ``DELETE``: ``target_id`` is invalidated
    (never removed). ``NOOP``: nothing changes. ``evidence`` names the episodes the
    decision rests on (empty: all of them); ``entities`` the entities the memory mentions.
    """

    action: Action
    typology: str | None = None
    content: str = ""
    key: str | None = None
    target_id: UUID | None = None
    confidence: float = 0.8
    entities: tuple[EntityMention, ...] = ()
    evidence: tuple[UUID, ...] = ()


@dataclass(frozen=True)
class Extraction:
    """An extractor's answer: its decisions, the entities each episode mentions as
    ``(episode id, mention)`` pairs, and the causal links it infers between episodes as
    ``(cause episode id, effect episode id)`` pairs (in graph specs with ``causal`` edges,
    each becomes a ``causal`` edge at the ``inference`` confidence)."""

    decisions: tuple[Decision, ...] = ()
    mentions: tuple[tuple[UUID, EntityMention], ...] = field(default=())
    causes: tuple[tuple[UUID, UUID], ...] = field(default=())


@runtime_checkable
class Extractor(Protocol):
    """Turns a scope's episodes into consolidation decisions.

    ``name`` is recorded in the journal and in each written memory's provenance.

    >>> from primitives.extraction import RuleBasedExtractor
    >>> isinstance(RuleBasedExtractor(), Extractor)
    True
    """

    @property
    def name(self) -> str: ...

    def extract(self, request: ExtractionRequest) -> Extraction: ...
