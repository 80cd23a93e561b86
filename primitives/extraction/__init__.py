"""Extraction for consolidation: turning a session's episodes into facts, procedures and
preferences, and naming the entities they mention (seed 002 §10.1, DESIGN §10).

Two extractors implement the :class:`Extractor` protocol: :class:`RuleBasedExtractor`, the
deterministic default, and :class:`LLMExtractor`, any LangChain chat model asked for
structured ADD / UPDATE / DELETE / NOOP decisions. The engine applies what they decide
(``end_scope`` at a session's end, ``primitives maintain`` for sessions it missed).
"""

from primitives.extraction._llm import LLMExtractor
from primitives.extraction._model import (
    ACTIONS,
    Action,
    Decision,
    EntityMention,
    Episode,
    ExistingMemory,
    Extraction,
    ExtractionRequest,
    Extractor,
    KnownEntity,
)
from primitives.extraction._rules import RuleBasedExtractor

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
    "LLMExtractor",
    "RuleBasedExtractor",
]
