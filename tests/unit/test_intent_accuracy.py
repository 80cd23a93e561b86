"""Intent classification measured on a labelled question set (seed 002 §11.2, issue 24).

``tests/data/intent_questions.tsv``: 209 questions (why / when / who / what / general; English,
French, German, Spanish, Italian, Portuguese) on which the keyword rules and the spec's
threshold were chosen; ``intent_questions_heldout.tsv``: 40 more, written after the rules were
tuned and never used to tune them. The accuracies asserted here are the ones
docs/retrieval.md reports.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from primitives.embeddings._flag import minilm_path
from primitives.retrieval import EmbeddingIntentClassifier, KeywordIntentClassifier
from primitives.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
ASSISTANT = load_spec(ROOT / "agents" / "assistant_memory.yaml")


def _load(name: str) -> list[tuple[str, str, str]]:
    rows = []
    for line in (DATA / name).read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            intent, lang, question = line.split("\t")
            rows.append((intent, lang, question))
    return rows


TUNING, HELDOUT = _load("intent_questions.tsv"), _load("intent_questions_heldout.tsv")


def _accuracy(rows: Sequence[tuple[str, str, str]], predicted: Sequence[str]) -> float:
    return sum(p == intent for (intent, _, _), p in zip(rows, predicted, strict=True)) / len(rows)


def test_the_labelled_set_is_large_balanced_and_multilingual() -> None:
    assert len(TUNING) >= 200 and len(set(q for _, _, q in TUNING)) == len(TUNING)
    by_intent = Counter(i for i, _, _ in TUNING)
    assert set(by_intent) == {"why", "when", "who", "what", "general"}
    assert min(by_intent.values()) >= 40
    assert len({lang for _, lang, _ in TUNING}) >= 5
    assert not {q for _, _, q in HELDOUT} & {q for _, _, q in TUNING}


def test_keyword_rules_accuracy_on_the_tuning_and_held_out_questions() -> None:
    rules = KeywordIntentClassifier()
    assert _accuracy(TUNING, [rules.classify(q) for _, _, q in TUNING]) == 1.0
    assert _accuracy(HELDOUT, [rules.classify(q) for _, _, q in HELDOUT]) == pytest.approx(
        39 / 40)


@pytest.mark.skipif(minilm_path() is None, reason="the embeddings extra is not installed")
def test_routing_with_the_offline_model_against_the_keyword_rules() -> None:
    from primitives.embeddings import default_embedder

    embedder = default_embedder(ASSISTANT)
    assert embedder.model_id == "sentence-transformers/all-MiniLM-L6-v2"
    intents = ASSISTANT.retrieval.intents
    assert intents is not None and intents.threshold == 0.5
    routing = EmbeddingIntentClassifier(embedder, threshold=intents.threshold)
    rules = KeywordIntentClassifier()
    examples = routing._example_vectors()

    def nearest_example(vector: Sequence[float], threshold: float) -> str:
        """The example cosine alone, without the keyword rules."""
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        unit = [x / norm for x in vector]
        score, intent = max((max(sum(a * b for a, b in zip(unit, v, strict=True))
                                 for v in vectors), intent)
                            for intent, vectors in examples.items())
        return intent if score > threshold else "general"

    measured = {}
    for name, rows in (("tuning", TUNING), ("heldout", HELDOUT)):
        vectors = [embedder.embed_query(q) for _, _, q in rows]
        keyword = _accuracy(rows, [rules.classify(q) for _, _, q in rows])
        routed = _accuracy(rows, [routing.classify(q, v)
                                  for (_, _, q), v in zip(rows, vectors, strict=True)])
        alone = _accuracy(rows, [nearest_example(v, 0.45) for v in vectors])
        measured[name] = (keyword, routed)
        # the example cosine alone (the classifier before issue 24) routes far worse
        assert alone < 0.5 < keyword
    # on the set the threshold was chosen on, routing matches the rules; on the held-out
    # questions the examples send one "general" question to an intent (38/40 vs 39/40)
    assert measured["tuning"] == (1.0, 1.0)
    assert measured["heldout"] == (pytest.approx(39 / 40), pytest.approx(38 / 40))
