"""Query intent: the keyword rules, the embedding classifier and the route they choose."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from primitives.retrieval import (
    EmbeddingIntentClassifier,
    IntentClassifier,
    KeywordIntentClassifier,
    classifier_for,
    route,
)
from primitives.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
ASSISTANT = load_spec(ROOT / "agents" / "assistant_memory.yaml")
SPECTRAL = load_spec(ROOT / "agents" / "spectral_agent.yaml")


@pytest.mark.parametrize(("query", "intent"), [
    ("Why did the deploy fail?", "why"),
    ("what caused the outage", "why"),          # a cause word outranks "what"
    ("When did we last talk about budget", "when"),
    ("what happened after the review", "when"),
    ("Who owns billing?", "who"),
    ("whose idea was the rewrite", "who"),
    ("Tell me about the Falcon project", "what"),
    ("which database do we use", "what"),
    ("billing owner", "general"),
    ("", "general"),
    ("somewhere in the whynot file", "general"),  # words, not substrings
])
def test_keyword_rules(query: str, intent: str) -> None:
    assert KeywordIntentClassifier().classify(query) == intent


class Axes:
    """A toy embedder: each intent's key word lights one axis; anything else the last."""

    model_id, dims = "test/axes", 5
    WORDS = ("reason", "timeline", "person", "status")

    def __init__(self) -> None:
        self.calls = 0

    def embed_query(self, text: str) -> list[float]:
        self.calls += 1
        hits = [1.0 if w in text else 0.0 for w in self.WORDS]
        return [*hits, 0.0 if any(hits) else 1.0]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]


def test_embedding_classifier_picks_the_nearest_examples_above_the_threshold() -> None:
    axes = Axes()
    examples = {"why": ["the reason"], "when": ["the timeline"], "who": ["a person"],
                "what": ["the status"]}
    classifier = EmbeddingIntentClassifier(axes, threshold=0.45,  # type: ignore[arg-type]
                                           examples=examples)
    assert isinstance(classifier, IntentClassifier)
    assert classifier.classify("q", axes.embed_query("timeline please")) == "when"
    assert classifier.classify("q", [0.3, 0.0, 0.0, 0.0, 1.0]) == "general"  # cos 0.29 < 0.45
    assert classifier.classify("q", [1.0, 0.0, 0.0, 0.0, 1.0]) == "why"      # cos 0.71
    calls = axes.calls
    classifier.classify("q", [0.0, 0.0, 1.0, 0.0, 0.0])
    assert axes.calls == calls                       # examples were embedded once
    # without a query vector the keyword rules answer
    assert classifier.classify("who signed it?", None) == "who"


def test_the_spec_chooses_the_classifier() -> None:
    assert classifier_for(SPECTRAL, None) is None                     # no intents: no routing
    assert isinstance(classifier_for(ASSISTANT, None), KeywordIntentClassifier)
    assert isinstance(classifier_for(ASSISTANT, Axes()),  # type: ignore[arg-type]
                      EmbeddingIntentClassifier)


def test_a_route_replaces_the_weights_it_names_and_picks_the_edges() -> None:
    signals = ("semantic", "lexical", "graph", "recency")
    why = route(ASSISTANT, signals, "why")
    assert why.weights == {"graph": 1.0, "semantic": 0.5, "lexical": 0.5, "recency": 0.25}
    assert why.edge_types == ("causal",)
    plain = route(ASSISTANT, signals, None)           # no intent: fusion weights, every edge
    assert plain.weights == {"semantic": 1.0, "lexical": 1.0, "graph": 1.0, "recency": 0.5}
    assert plain.edge_types == ("temporal", "causal", "entity", "derived_from", "supersedes")
    # a spec without intents or graph: the fusion weights, no edges
    assert route(SPECTRAL, ("lexical",), "why").edge_types == ()
