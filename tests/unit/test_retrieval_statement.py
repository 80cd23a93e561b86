"""The search statement and RRF, without a database: what the builder emits."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from psycopg import sql

from primitives.compile import agent_tables
from primitives.engine._records import MEMORY_COLUMNS
from primitives.retrieval import (
    Restriction,
    hnsw_settings,
    rrf,
    search_statement,
    vector_literal,
)
from primitives.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
TABLES = agent_tables(load_spec(ROOT / "agents" / "spectral_agent.yaml"))


def _render(signals: tuple[str, ...], **kw: bool) -> str:
    return search_statement(TABLES, signals, MEMORY_COLUMNS, **kw).as_string(None)


def test_semantic_cte_scans_small_tenants_exactly_and_large_ones_by_index() -> None:
    text = _render(("semantic", "lexical", "recency"))
    # the path comes from the settings statement's count (``small``), not a count of its own
    assert "WHERE m.embedding IS NOT NULL AND m.embedding_model = %(model)s AND NOT " \
           "%(small)s::boolean ORDER BY" in text
    assert "AND (%(small)s::boolean OR (SELECT count(*) FROM semantic_ann) < %(cap)s)" in text
    assert "semantic_size" not in text and "exact_below" not in text
    assert "ORDER BY m.embedding <=> %(qvec)s::halfvec LIMIT %(cap)s" in text  # the index
    assert "ORDER BY (m.embedding <=> %(qvec)s::halfvec) + 0" in text  # exact, off the index
    assert "m.embedding_model = %(model)s" in text
    # One tenant filter feeds every signal (``scope``, then ``live``), plus the join back.
    assert text.startswith("WITH scope AS NOT MATERIALIZED (SELECT * FROM "
                           "\"platform\".\"spectral_memories\" AS m WHERE "
                           "m.\"workspace_id\" = %(tenant)s AND m.tier = ANY(%(tiers)s)")
    # ann, exact, lexical, and recency's two branches (every row / the matched rows)
    assert text.count("FROM live AS m") == 5


def test_recency_reads_the_matched_rows_by_id_or_every_row_never_both() -> None:
    """Recency's rows: two branches under parameter-only conditions, exactly one of which
    holds (the planner runs the other as a one-time filter that is false), instead of an OR
    that filtered a scan of every one of the tenant's rows."""
    text = _render(("semantic", "lexical", "recency"))
    assert ("(SELECT * FROM live AS m WHERE %(query)s = '' AND %(envelope)s::jsonb = "
            "'{}'::jsonb UNION ALL SELECT * FROM live AS m WHERE NOT (%(query)s = '' AND "
            "%(envelope)s::jsonb = '{}'::jsonb) AND m.id IN (SELECT id FROM \"semantic\" "
            "UNION SELECT id FROM \"lexical\")) AS m") in text
    assert " OR m.id IN (" not in text
    assert "recency AS (SELECT m.id" in _render(("recency",))
    assert "UNION ALL SELECT * FROM live" not in _render(("recency",))  # alone: every row


def test_scope_is_the_active_row_index_predicate_and_live_adds_expiry() -> None:
    text = _render(("semantic", "lexical"), bm25=True)
    assert ("m.superseded_at IS NULL AND m.invalidated_at IS NULL AND m.archived_at IS NULL "
            "AND m.tombstoned_at IS NULL)") in text  # verbatim: counts read the index alone
    assert ("live AS NOT MATERIALIZED (SELECT * FROM scope AS m WHERE m.expires_at IS NULL "
            "OR m.expires_at > now())") in text
    # BM25's N: the tenant's rows less those expired, not a scan of the table's rows
    assert ("(coalesce(%(scope_rows)s::bigint, (SELECT count(*) FROM scope)) - (SELECT "
            "count(*) FROM scope AS m WHERE m.expires_at <= now()))::float8 AS n") in text


def test_a_restriction_filters_live_and_so_every_signal() -> None:
    restrict = Restriction(("t", 1), sql.SQL("m.namespace[1:1] = %(r_prefix)s::text[]"),
                           {"r_prefix": ["notes"]})
    text = search_statement(TABLES, ("semantic", "lexical"), MEMORY_COLUMNS, bm25=True,
                            restrict=restrict).as_string(None)
    assert ("live AS NOT MATERIALIZED (SELECT * FROM scope AS m WHERE (m.expires_at IS NULL "
            "OR m.expires_at > now()) AND (m.namespace[1:1] = %(r_prefix)s::text[]))") in text
    assert text.count("FROM live AS m") == 3  # ann, exact, lexical: all restricted
    # the same key gives the same statement object; another key another statement
    again = Restriction(("t", 1), sql.SQL("m.namespace[1:1] = %(r_prefix)s::text[]"))
    assert search_statement(TABLES, ("semantic", "lexical"), MEMORY_COLUMNS, bm25=True,
                            restrict=again) is search_statement(
        TABLES, ("semantic", "lexical"), MEMORY_COLUMNS, bm25=True, restrict=restrict)
    point = search_statement(TABLES, ("lexical",), MEMORY_COLUMNS, point_in_time=True,
                             restrict=Restriction(("t", 2), sql.SQL("m.key <> 'x'")))
    assert "live AS NOT MATERIALIZED (SELECT * FROM scope AS m WHERE m.key <> 'x')" in \
        point.as_string(None)


def test_statement_is_built_once_and_fits_the_driver_cache() -> None:
    first = search_statement(TABLES, ("semantic", "lexical"), MEMORY_COLUMNS, bm25=True)
    again = search_statement(TABLES, ["lexical", "semantic"], list(MEMORY_COLUMNS), bm25=True)
    assert first is again  # the engine renders its text once
    # psycopg caches the conversion of queries up to 4,096 characters
    assert len(first.as_string(None)) <= 4096


def test_fusion_is_weighted_rrf_over_every_signal_once() -> None:
    text = _render(("semantic", "lexical", "envelope", "recency"))
    assert "sum(CASE r.signal WHEN 'semantic' THEN %(w_semantic)s" in text
    assert "/ (%(k)s + r.rank)" in text
    assert text.count(" AS signal, rank, score FROM ") == 4
    assert "%(envelope)s::jsonb <> '{}'::jsonb" in text and "{{" not in text


def test_point_in_time_replaces_the_active_predicate() -> None:
    now, then = _render(("lexical",)), _render(("lexical",), point_in_time=True)
    assert "superseded_at IS NULL AND" in now and "%(as_of)s" not in now
    assert "(m.superseded_at IS NULL OR m.superseded_at > %(as_of)s)" in then
    assert "m.created_at <= %(as_of)s" in then
    assert "now()" not in then  # expiry is judged at as_of, not now


def test_without_semantic_no_vector_is_referenced() -> None:
    assert "embedding" not in _render(("lexical", "envelope", "recency"))


@pytest.mark.parametrize("signals", [(), ("lexical", "vibes")])
def test_unknown_or_no_signals_are_refused(signals: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="signals must be some of"):
        search_statement(TABLES, signals, MEMORY_COLUMNS)


GRAPH_TABLES = agent_tables(load_spec(ROOT / "agents" / "assistant_memory.yaml"))


def test_the_graph_signal_needs_the_graph_tables() -> None:
    with pytest.raises(ValueError, match="has no graph tables"):
        search_statement(TABLES, ("lexical", "graph"), MEMORY_COLUMNS)


def test_the_graph_walk_is_recursive_bounded_and_seeded_by_the_text_signals() -> None:
    text = search_statement(GRAPH_TABLES, ("semantic", "lexical", "graph", "recency"),
                            MEMORY_COLUMNS).as_string(None)
    assert text.startswith("WITH RECURSIVE scope AS")
    assert "w.hops < %(max_depth)s" in text                    # depth-bounded
    assert text.count("relation_type = ANY(%(edge_types)s::text[])") == 2  # both directions
    # the walk starts from the top rows of semantic and lexical, and from entity mentions
    assert "(SELECT id FROM \"semantic\" ORDER BY rank LIMIT %(graph_seeds)s)" in text
    assert "(SELECT id FROM \"lexical\" ORDER BY rank LIMIT %(graph_seeds)s)" in text
    assert "phraseto_tsquery('simple', e.canonical_name)" in text
    assert "JOIN live AS m ON m.id = g.id" in text              # only active rows are ranked
    # the live rows are looked up by the reached ids, not hashed from a scan of the tenant
    assert "m.id = ANY(ARRAY(SELECT id FROM graph_reached))" in text
    assert "(e.valid_until IS NULL OR e.valid_until > now())" in text
    then = search_statement(GRAPH_TABLES, ("lexical", "graph"), MEMORY_COLUMNS,
                            point_in_time=True).as_string(None)
    assert "e.valid_from <= %(as_of)s AND (e.valid_until IS NULL OR e.valid_until > %(as_of)s)" \
        in then
    # without a text signal the walk starts from entity mentions alone
    alone = search_statement(GRAPH_TABLES, ("graph",), MEMORY_COLUMNS).as_string(None)
    assert "graph_seeds" not in alone and "graph_seed AS (SELECT id FROM (SELECT NULL" in alone


def test_without_the_graph_signal_the_statement_is_not_recursive() -> None:
    text = search_statement(GRAPH_TABLES, ("lexical", "recency"), MEMORY_COLUMNS).as_string(None)
    assert text.startswith("WITH scope AS") and "graph" not in text


def test_vector_literal_is_pgvector_text_form() -> None:
    assert vector_literal([0.5, -1, 1e-9]) == "[0.5,-1,1e-09]"
    assert vector_literal([]) == "[]"
    rng = random.Random(7)
    for dims in (1, 16, 384):
        vector = [rng.gauss(0, 10 ** rng.randint(-8, 8)) for _ in range(dims)]
        assert vector_literal(vector) == "[" + ",".join(f"{x:.7g}" for x in vector) + "]"


def test_rrf_sums_weighted_reciprocal_ranks() -> None:
    fused = dict(rrf({"a": ["x", "y"], "b": ["y"]}, k=10, weights={"b": 2.0}))
    assert fused["x"] == pytest.approx(1 / 11)
    assert fused["y"] == pytest.approx(1 / 12 + 2 / 11)
    assert [item for item, _ in rrf({"a": ["x", "y"], "b": ["y"]}, k=10)] == ["y", "x"]


def test_bm25_matches_any_word_and_weighs_rare_words_by_idf() -> None:
    text = _render(("lexical",), bm25=True)
    assert "replace(plainto_tsquery(%(config)s::regconfig, %(query)s)::text, ' & ', ' | ')" in text
    assert "ln(1 + (st.n - t.df + 0.5) / (t.df + 0.5))" in text
    assert "m.tsv @@ (SELECT q FROM lexical_query)" in text  # the tsquery is built once
    assert "websearch_to_tsquery" not in text
    assert "websearch_to_tsquery" in _render(("lexical",))


@pytest.mark.parametrize("bm25", [True, False])
def test_with_the_leakproof_index_the_lexical_match_uses_its_operator(bm25: bool) -> None:
    plain = _render(("semantic", "lexical"), bm25=bm25)
    indexed = _render(("semantic", "lexical"), bm25=bm25, indexed_match=True)
    assert "OPERATOR(primitives.@@)" not in plain
    assert indexed.count("m.tsv OPERATOR(primitives.@@) ") == 1
    assert " @@ " not in indexed  # no match left that row-level security keeps off the index
    assert indexed.replace("OPERATOR(primitives.@@)", "@@") == plain


def test_settings_plan_small_tenants_once_and_large_ones_for_themselves() -> None:
    text = hnsw_settings(TABLES).as_string(None)
    assert "set_config('hnsw.iterative_scan', 'relaxed_order', true)" in text
    assert "set_config('jit', 'off', true)" in text
    # the count stops at the switch point, which is fixed or follows the table's size
    assert "LIMIT (SELECT below FROM sw)) AS s)" in text
    assert ("CASE WHEN %(exact_below)s::bigint >= 0 THEN %(exact_below)s::bigint ELSE "
            "greatest(1000, sqrt(30 * %(cap)s::float8 * greatest(c.reltuples, 0)))") in text
    assert ("CASE WHEN n.rows < sw.below THEN 'force_generic_plan' "
            "ELSE 'force_custom_plan' END, true)") in text
    assert text.endswith("CASE WHEN n.rows < sw.below THEN n.rows END FROM sw, n")
    assert hnsw_settings(TABLES) is hnsw_settings(TABLES)


def test_settings_on_citus_keep_every_plan_custom_and_still_count() -> None:
    """Citus plans the search statement only with the parameters' values (a generic plan of
    it fails); the count column still tells the small-tenant path."""
    single, citus = (hnsw_settings(TABLES, citus=c).as_string(None) for c in (False, True))
    assert "set_config('plan_cache_mode', 'force_custom_plan', true)" in citus
    assert "force_generic_plan" not in citus
    assert citus.endswith("CASE WHEN n.rows < sw.below THEN n.rows END FROM sw, n")
    assert citus.replace("'force_custom_plan'", "CASE WHEN n.rows < sw.below THEN "
                         "'force_generic_plan' ELSE 'force_custom_plan' END") == single


def test_bm25_takes_its_n_from_the_settings_count_when_it_has_one() -> None:
    text = _render(("semantic", "lexical"), bm25=True)
    assert "coalesce(%(scope_rows)s::bigint, (SELECT count(*) FROM scope))" in text
