"""The search statement and RRF, without a database: what the builder emits."""

from __future__ import annotations

from pathlib import Path

import pytest

from primitives.compile import agent_tables
from primitives.engine._records import MEMORY_COLUMNS
from primitives.retrieval import rrf, search_statement, vector_literal
from primitives.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
TABLES = agent_tables(load_spec(ROOT / "agents" / "spectral_agent.yaml"))


def _render(signals: tuple[str, ...], **kw: bool) -> str:
    return search_statement(TABLES, signals, MEMORY_COLUMNS, **kw).as_string(None)


def test_semantic_cte_scans_small_tenants_exactly_and_large_ones_by_index() -> None:
    text = _render(("semantic", "lexical", "recency"))
    assert "semantic_size AS (SELECT count(*)" in text
    assert "LIMIT %(exact_below)s" in text
    assert "ORDER BY m.embedding <=> %(qvec)s::halfvec LIMIT %(cap)s" in text  # the index
    assert "ORDER BY (m.embedding <=> %(qvec)s::halfvec) + 0" in text  # exact, off the index
    assert "m.embedding_model = %(model)s" in text
    assert text.count("m.\"workspace_id\" = %(tenant)s") >= 4  # each CTE filters the tenant


def test_fusion_is_weighted_rrf_over_every_signal_once() -> None:
    text = _render(("semantic", "lexical", "envelope", "recency"))
    assert "sum(CASE r.signal WHEN 'semantic' THEN %(w_semantic)s" in text
    assert "/ (%(k)s + r.rank)" in text
    assert text.count(" AS signal, rank, score FROM ") == 4


def test_point_in_time_replaces_the_active_predicate() -> None:
    now, then = _render(("lexical",)), _render(("lexical",), point_in_time=True)
    assert "superseded_at IS NULL AND" in now and "%(as_of)s" not in now
    assert "(m.superseded_at IS NULL OR m.superseded_at > %(as_of)s)" in then
    assert "m.created_at <= %(as_of)s" in then


def test_without_semantic_no_vector_is_referenced() -> None:
    assert "embedding" not in _render(("lexical", "envelope", "recency"))


@pytest.mark.parametrize("signals", [(), ("graph",), ("lexical", "vibes")])
def test_unknown_or_no_signals_are_refused(signals: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="signals must be some of"):
        search_statement(TABLES, signals, MEMORY_COLUMNS)


def test_vector_literal_is_pgvector_text_form() -> None:
    assert vector_literal([0.5, -1, 1e-9]) == "[0.5,-1,1e-09]"


def test_rrf_sums_weighted_reciprocal_ranks() -> None:
    fused = dict(rrf({"a": ["x", "y"], "b": ["y"]}, k=10, weights={"b": 2.0}))
    assert fused["x"] == pytest.approx(1 / 11)
    assert fused["y"] == pytest.approx(1 / 12 + 2 / 11)
    assert [item for item, _ in rrf({"a": ["x", "y"], "b": ["y"]}, k=10)] == ["y", "x"]


def test_bm25_matches_any_word_and_weighs_rare_words_by_idf() -> None:
    text = _render(("lexical",), bm25=True)
    assert "replace(plainto_tsquery(%(config)s::regconfig, %(query)s)::text, ' & ', ' | ')" in text
    assert "ln(1 + (st.n - t.df + 0.5) / (t.df + 0.5))" in text
    assert "websearch_to_tsquery" not in text
    assert "websearch_to_tsquery" in _render(("lexical",))
