"""Reciprocal rank fusion in pure Python: the formula the search statement runs in SQL.

Used to check the SQL (unit tests) and to sweep fusion parameters over recorded rankings
(``bench.locomo``) without re-running queries.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

__all__ = ["rrf"]

K = TypeVar("K", bound=Hashable)


def rrf(rankings: Mapping[str, Sequence[K]], *, k: float = 60,
        weights: Mapping[str, float] | None = None) -> list[tuple[K, float]]:
    """Fuse ranked lists: ``score(d) = Σ_s w_s / (k + rank_s(d))`` (ranks 1-based).

    Ties keep the order in which items were first seen (signal order, then rank).

    >>> rrf({"lexical": ["a", "b"], "semantic": ["b", "c"]}, k=1)
    [('b', 0.8333333333333333), ('a', 0.5), ('c', 0.3333333333333333)]
    """
    weights = weights or {}
    scores: dict[K, float] = {}
    for signal, ranked in rankings.items():
        w = weights.get(signal, 1.0)
        for rank, item in enumerate(ranked, start=1):
            scores[item] = scores.get(item, 0.0) + w / (k + rank)
    return sorted(scores.items(), key=lambda kv: -kv[1])
