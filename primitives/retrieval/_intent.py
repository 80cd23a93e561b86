"""Query intent (seed 002 §11): which signal weights and which graph edges a query uses.

No model call on the read path. Two classifiers behind one protocol:

- :class:`KeywordIntentClassifier`: English word rules, no embedder needed;
- :class:`EmbeddingIntentClassifier`: cosine of the query vector (already computed for the
  semantic signal) against example questions per intent, embedded once by the engine's
  embedder; below ``threshold`` the intent is ``general``. Without a query vector it falls
  back to the keyword rules.

:func:`route` turns an intent into the fusion weights and edge types of one search.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from primitives.embeddings import Embedder
from primitives.spec import AgentSpec

__all__ = [
    "COMPLEXITY",
    "INTENTS",
    "EmbeddingIntentClassifier",
    "IntentClassifier",
    "KeywordIntentClassifier",
    "Route",
    "classifier_for",
    "classify_query_complexity",
    "route",
    "temporal_direction",
]

INTENTS = ("why", "when", "who", "what", "general")

# First matching rule wins; the order puts causes before people before times before things
# ("who picked the restaurant last time" asks for a person). English words, and the question
# words of French, German, Spanish, Italian and Portuguese; tuned on
# tests/data/intent_questions.tsv (docs/retrieval.md has the accuracy).
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (intent, re.compile(r"\b(?:" + "|".join(words) + r")\b"))
    for intent, words in (
        ("why", ("why", "how come", "cause[sd]?", "caus(?:ing|ation)", "reasons?",
                 "because", "led to", "lead to", "result(?:ed)? in", "due to", "what made",
                 "triggered", "motivation", "what's behind", "end(?:ed)? up",
                 "pourquoi", "raison", "warum", "wieso", "weshalb", "grund", "por qu[ée]",
                 "causa", "perch[ée]")),
        ("who", ("who", "whom", "whose", "qui", "wer", "wem", "wen", "qui[ée]n", "chi",
                 "quem")),
        ("when", ("when", "what time", "what date", "which day", "before", "after",
                  "during", "since", "until", "timeline", "sequence", "previous(?:ly)?",
                  "last time", "first time", "next", "quand", "date", "wann",
                  "welchem tag", "cu[áa]ndo", "fecha", "quando")),
        ("what", ("what", "which", "tell me about", "everything about", "anything about",
                  "que sais", "qu'est-ce", "quel(?:le)?s?", "was (?:weißt|ist|sind|war)",
                  "welche[srnm]?", "qu[ée]", "cu[áa]l", "che cosa", "qual")),
    )
)

# Example questions per intent for the embedding classifier (this project's own wording).
EXAMPLES: Mapping[str, tuple[str, ...]] = {
    "why": ("why did this happen", "what was the reason for it", "what led to the failure",
            "explain what caused the change", "how come the plan was dropped"),
    "when": ("when did we talk about this", "what happened before the meeting",
             "what came next", "show the order of events", "on which day did it happen"),
    "who": ("who is in charge of this", "who said that", "whose idea was it",
            "who worked on the project"),
    "what": ("what do you know about it", "tell me everything about the project",
             "what is the current status", "which tool do they use"),
}


@runtime_checkable
class IntentClassifier(Protocol):
    """``classify(query, vector)`` returns one of :data:`INTENTS`; ``vector`` is the query's
    embedding when the search computed one."""

    def classify(self, query: str, vector: Sequence[float] | None = None) -> str: ...


class KeywordIntentClassifier:
    """English keyword rules: the first intent with a matching word or phrase, else
    ``general``.

    >>> KeywordIntentClassifier().classify("Why did the deploy fail?")
    'why'
    >>> KeywordIntentClassifier().classify("Who owns the billing service?")
    'who'
    >>> KeywordIntentClassifier().classify("billing service owner")
    'general'
    """

    def classify(self, query: str, vector: Sequence[float] | None = None) -> str:
        text = query.strip().lower()
        for intent, rule in _RULES:
            if rule.search(text):
                return intent
        return "general"


class EmbeddingIntentClassifier:
    """The intent whose closest example question is nearest the query vector (cosine), if
    that similarity exceeds ``threshold``; ``general`` otherwise. The examples are embedded
    on first use, once per classifier, with ``embed_query`` (they are questions too)."""

    def __init__(self, embedder: Embedder, *, threshold: float = 0.45,
                 examples: Mapping[str, Sequence[str]] = EXAMPLES) -> None:
        self.embedder = embedder
        self.threshold = threshold
        self.examples = {intent: tuple(texts) for intent, texts in examples.items()}
        self._vectors: dict[str, list[list[float]]] | None = None
        self._lock = threading.Lock()
        self._fallback = KeywordIntentClassifier()

    def _example_vectors(self) -> dict[str, list[list[float]]]:
        with self._lock:
            if self._vectors is None:
                self._vectors = {intent: [_unit(self.embedder.embed_query(t)) for t in texts]
                                 for intent, texts in self.examples.items()}
            return self._vectors

    def classify(self, query: str, vector: Sequence[float] | None = None) -> str:
        # The keyword rules decide where they name an intent: measured on
        # tests/data/intent_questions.tsv they are the more accurate of the two, so the
        # examples only route what the rules leave as ``general`` (routing is never less
        # accurate than the rules alone on that set; docs/retrieval.md has the figures).
        keyword = self._fallback.classify(query)
        if vector is None or keyword != "general":
            return keyword
        unit = _unit(vector)
        best, best_score = "general", -1.0
        for intent, vectors in self._example_vectors().items():
            score = max(sum(a * b for a, b in zip(unit, v, strict=True)) for v in vectors)
            if score > best_score:
                best, best_score = intent, score
        return best if best_score > self.threshold else "general"


def _unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def classifier_for(spec: AgentSpec, embedder: Embedder | None) -> IntentClassifier | None:
    """The classifier ``retrieval.intents`` asks for (None without intents). An embedding
    classifier needs an embedder; without one the keyword rules stand in."""
    intents = spec.retrieval.intents
    if intents is None:
        return None
    if intents.classifier == "embedding" and embedder is not None:
        return EmbeddingIntentClassifier(embedder, threshold=intents.threshold)
    return KeywordIntentClassifier()


@dataclass(frozen=True)
class Route:
    """One search's intent, fusion weight per signal and the edge types the graph follows."""

    intent: str | None
    weights: dict[str, float]
    edge_types: tuple[str, ...]


def route(spec: AgentSpec, signals: Sequence[str], intent: str | None) -> Route:
    """Weights: the fusion weights (1.0 where not given), with the intent's route
    (``retrieval.intents.routes[intent]``) replacing those it names. Edge types: the
    intent's ``traverse`` list, or every edge type of ``graph.edges``.

    A weight of 0 keeps a signal running (its rows still seed the graph walk and show in
    ``explain``) but adds nothing to a row's fused score.
    """
    config = spec.retrieval
    declared = {str(s): float(w) for s, w in config.fusion.weights.items()}
    weights = {s: declared.get(s, 1.0) for s in signals}
    edges: tuple[str, ...] = tuple(spec.graph.edges) if spec.graph is not None else ()
    if intent is not None and config.intents is not None:
        for signal, weight in config.intents.routes.get(intent, {}).items():  # type: ignore[call-overload]
            if signal in weights:
                weights[signal] = float(weight)
        traverse = config.intents.traverse.get(intent)  # type: ignore[call-overload]
        if traverse is not None:
            edges = tuple(traverse)
    return Route(intent, weights, edges)


# complexity (seed 002 §11.5) --------------------------------------------------------------------
COMPLEXITY: Mapping[str, tuple[int, int]] = {"simple": (5, 2), "complex": (20, 4)}
"""Per query complexity: (hits a search returns when the caller names no limit, graph depth
before ``graph.max_depth`` caps it)."""

_AGGREGATE = re.compile(r"\b(?:compare|comparing|summari[sz]e|summary|everything|all|overview|"
                        r"list|history)\b")
_CONJUNCTION = re.compile(r"\b(?:and|or|but)\b")


def classify_query_complexity(query: str) -> str:
    """``complex`` for a question of 10 words or more, one with an aggregate word
    (``compare``, ``summarize``, ``everything``, ``all``, ``overview``...) or with two or more
    conjunctions (``and``/``or``/``but``); ``simple`` otherwise (seed 002 §11.5).

    >>> classify_query_complexity("where do I work?")
    'simple'
    >>> classify_query_complexity("summarize my week")
    'complex'
    >>> classify_query_complexity("Alice and Bob or Carol")
    'complex'
    """
    text = query.strip().lower()
    if len(text.split()) >= 10 or _AGGREGATE.search(text):
        return "complex"
    return "complex" if len(_CONJUNCTION.findall(text)) >= 2 else "simple"


_AFTER = re.compile(r"\b(?:after|afterwards?|since|next|later|following|then)\b")
_BEFORE = re.compile(r"\b(?:before|previous(?:ly)?|earlier|prior|led up to|leading up to)\b")


def temporal_direction(query: str) -> str:
    """Which way a "when" question walks temporal edges (earlier -> later): ``forward``
    for what came after (``after``, ``since``, ``next``...), ``backward`` for what came before
    (``before``, ``previously``, ``earlier``...), ``both`` when it says neither or both.

    >>> temporal_direction("what happened after the launch?")
    'forward'
    >>> temporal_direction("what did we decide before the meeting?")
    'backward'
    >>> temporal_direction("when did we talk about it?")
    'both'
    """
    text = query.strip().lower()
    after, before = bool(_AFTER.search(text)), bool(_BEFORE.search(text))
    return "forward" if after and not before else "backward" if before and not after else "both"
