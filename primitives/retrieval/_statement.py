"""The one search statement: a capped, ranked CTE per signal, fused by weighted RRF in SQL.

Pure builders (no I/O); every value is a bind parameter. The statement ranks within the
tenant's rows only (explicit tenant filter; row-level security is the backstop).

Params of :func:`search_statement`: ``tenant``, ``tiers`` (text[]), ``tier_weights``
(float8[] aligned with ``tiers``), ``query``, ``config`` (regconfig name), ``envelope``
(jsonb), ``cap`` (rows per signal), ``k``, ``w_<signal>`` per signal, ``limit``; with the
semantic signal ``qvec`` (a halfvec literal), ``model`` and ``small`` (boolean: below the
exact-scan switch point, from :func:`hnsw_settings`); with the
graph signal ``edge_types`` (text[]), ``max_depth``, ``graph_seeds``, ``direction``
(``both``, ``forward`` or ``backward``) and ``graph_since`` / ``graph_until`` (timestamptz
or NULL: the time window of a "when" question); with
``point_in_time`` ``as_of`` (timestamptz); with ``bm25`` ``bm25_k1`` and ``bm25_b``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from psycopg import sql

from primitives.compile import Tables
from primitives.compile._expr import pending_embedding_predicate
from primitives.db import TEXT_MATCH_OPERATOR
from primitives.lifecycle._decay import NOW, DecayModels

__all__ = [
    "SIGNAL_ORDER",
    "Restriction",
    "active_at",
    "entity_named",
    "hnsw_settings",
    "search_statement",
    "stored_model",
    "vector_literal",
]

SIGNAL_ORDER = ("semantic", "lexical", "envelope", "graph", "recency")
"""Signals the statement evaluates, in the order their CTEs are written."""

ACTIVE_ROWS = sql.SQL(
    "m.superseded_at IS NULL AND m.invalidated_at IS NULL AND m.archived_at IS NULL "
    "AND m.tombstoned_at IS NULL"
)
"""The predicate of the active-row partial indexes (``active_predicate``), verbatim."""

TENANT = sql.SQL("= %(tenant)s")
"""The searched tenant, as the decay models' protections read it."""


def active_at() -> sql.SQL:
    """Rows valid at ``%(as_of)s``: created by then, and no state change had removed them."""
    return sql.SQL(
        "m.created_at <= %(as_of)s "
        "AND (m.superseded_at IS NULL OR m.superseded_at > %(as_of)s) "
        "AND (m.invalidated_at IS NULL OR m.invalidated_at > %(as_of)s) "
        "AND (m.archived_at IS NULL OR m.archived_at > %(as_of)s) "
        "AND (m.tombstoned_at IS NULL OR m.tombstoned_at > %(as_of)s) "
        "AND (m.expires_at IS NULL OR m.expires_at > %(as_of)s)"
    )


def vector_literal(vector: Sequence[float]) -> str:
    """``[x1,x2,...]``, the text form pgvector parses (bound as a parameter, cast in SQL),
    each component to seven significant digits. One ``%`` with a format made once per
    length: half the time of formatting the components one by one (about 90 against 180 us
    for 384 of them), the same text."""
    return _vector_format(len(vector)) % tuple(map(float, vector))


@lru_cache(maxsize=16)
def _vector_format(dims: int) -> str:
    return "[" + ",".join(["%.7g"] * dims) + "]"


AUTO_SWITCH_FACTOR = 30
"""``semantic_exact_below: auto`` puts the switch point at sqrt(30 x cap x rows of the table).

An exact scan costs in proportion to the tenant's rows N; an HNSW walk filtered to the tenant
visits about cap / share candidates, share = N / table rows. The two meet where N squared is
proportional to cap x table rows; 30 sits between the crossovers measured at 100,000 rows
(about 10,000) and a million (about 44,000) with cap 50 (``bench/results/retrieval_speed.json``,
``switch_point``)."""
AUTO_SWITCH_FLOOR = 1000
"""Below this many rows a tenant is always scanned exactly under ``auto``."""


@lru_cache(maxsize=64)
def hnsw_settings(tables: Tables, *, pending: bool = False, citus: bool = False) -> sql.Composed:
    """Transaction-local settings for the search statement, and the embedding model of the
    tenant's stored rows (third column).

    ``relaxed_order`` iterative scans keep walking the graph until ``cap`` rows of the
    tenant are found, so a tenant filter does not silently return fewer rows than asked.
    The plan: a tenant below the switch point (rows in ``tiers``, counted on the active-row
    index, no further than the switch point) runs a plan made once for any tenant (no
    planning per query: every signal reads the tenant's rows through its btree); a larger
    one gets a plan made for it, which walks the HNSW index (a plan made for an average
    tenant would scan and sort instead). The switch point is ``exact_below``, or, when that
    is negative (``auto``), sqrt(:data:`AUTO_SWITCH_FACTOR` x ``cap`` x the table's rows as
    the planner last counted them), at least :data:`AUTO_SWITCH_FLOOR`. JIT compilation is
    off: it costs more than these plans run. The fifth column is the plan mode set
    (``force_generic_plan``: the tenant is below the switch point, the search statement's
    ``small`` parameter); the sixth the tenant's row count when below it (else NULL), which
    BM25 takes as its N instead of counting again. With ``pending`` (the spec defers
    embedding), a seventh column counts the tenant's active rows in ``tiers`` still waiting
    for a vector, on the pending-embedding index: rows the semantic signal cannot rank yet.
    Params: ``ef_search`` (text), ``tenant``, ``tiers``, ``exact_below``, ``cap``.

    ``citus`` (the database is a Citus coordinator): the plan mode is always
    ``force_custom_plan``. Citus routes the search statement to the tenant's shard only when
    it plans it with the parameters' values (the tenant's shard is chosen from them); a
    generic plan of it fails ("could not create distributed plan"). The sixth column still
    says which path the tenant takes. The other settings are made on the coordinator only
    (``set_config`` is not forwarded to the workers): the engine then sends the HNSW ones to
    the shards with :func:`hnsw_settings_on_workers` when the tenant takes the index path.
    """
    waiting: sql.Composable = sql.SQL("")
    if pending:
        waiting = sql.SQL(
            ", (SELECT count(*) FROM {mem} AS m WHERE m.{t} = %(tenant)s "
            "AND {pending} AND m.tier = ANY(%(tiers)s) AND {active})").format(
            mem=tables.memories.ident, t=tables.tenant, active=ACTIVE_ROWS,
            pending=pending_embedding_predicate("m"))
    return sql.SQL(
        "WITH sw AS (SELECT CASE WHEN %(exact_below)s::bigint >= 0 THEN %(exact_below)s::bigint "
        "ELSE greatest({floor}, sqrt({factor} * %(cap)s::float8 * greatest(c.reltuples, 0)))"
        "::bigint END AS below FROM pg_catalog.pg_class AS c WHERE c.oid = {table}::regclass), "
        "n AS (SELECT count(*) AS rows FROM (SELECT 1 FROM {mem} AS m WHERE m.{t} = %(tenant)s "
        "AND m.tier = ANY(%(tiers)s) AND {active} LIMIT (SELECT below FROM sw)) AS s) "
        "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
        "set_config('hnsw.ef_search', %(ef_search)s, true), "
        "(SELECT m.embedding_model FROM {mem} AS m WHERE m.{t} = %(tenant)s "
        "AND m.embedding_model IS NOT NULL LIMIT 1), "
        "set_config('jit', 'off', true), "
        "set_config('plan_cache_mode', {mode}, true), "
        "CASE WHEN n.rows < sw.below THEN n.rows END{waiting} FROM sw, n"
    ).format(mem=tables.memories.ident, t=tables.tenant, active=ACTIVE_ROWS, waiting=waiting,
             mode=sql.SQL("'force_custom_plan'" if citus else
                          "CASE WHEN n.rows < sw.below THEN 'force_generic_plan' "
                          "ELSE 'force_custom_plan' END"),
             table=sql.Literal(tables.memories.qualified), floor=sql.Literal(AUTO_SWITCH_FLOOR),
             factor=sql.Literal(AUTO_SWITCH_FACTOR))


def hnsw_settings_on_workers(ef_search: int) -> sql.Composed:
    """On a Citus coordinator, the HNSW walk's settings for the shards: ``SET LOCAL``, which
    Citus forwards to the workers' connections of the transaction (``set_config`` in
    :func:`hnsw_settings` is not forwarded), in one statement. ``ef_search`` is the engine's
    own integer, written as a literal (``SET`` takes no parameter)."""
    return sql.SQL(
        "DO $$BEGIN SET LOCAL hnsw.iterative_scan = relaxed_order; "
        "SET LOCAL hnsw.ef_search = {}; END$$").format(sql.Literal(int(ef_search)))


def stored_model(tables: Tables) -> sql.Composed:
    """The embedding model of one of the tenant's stored vectors (all agree). Params: tenant."""
    return sql.SQL(
        "SELECT m.embedding_model FROM {} AS m WHERE m.{} = %(tenant)s "
        "AND m.embedding_model IS NOT NULL LIMIT 1"
    ).format(tables.memories.ident, tables.tenant)


def _returning(columns: Sequence[str]) -> sql.Composable:
    return sql.SQL(", ").join(sql.Identifier("m", c) for c in columns)


def _semantic() -> list[sql.Composable]:
    distance = sql.SQL("m.embedding <=> %(qvec)s::halfvec")
    eligible = sql.SQL("m.embedding IS NOT NULL AND m.embedding_model = %(model)s")
    return [
        # Which path to take comes in ``small``: the tenant has fewer rows in the searched
        # tiers than the switch point, as the settings statement counted them (on the
        # active-row index alone, no further than the switch point; ``hnsw_settings``). A
        # routing hint: completeness never depends on it.
        # Large tenants: the HNSW index, walked iteratively (hnsw_settings) under the filter.
        sql.SQL("semantic_ann AS MATERIALIZED (SELECT m.id, {d} AS distance FROM live AS m "
                "WHERE {e} AND NOT %(small)s::boolean "
                "ORDER BY {d} LIMIT %(cap)s)").format(d=distance, e=eligible),
        # Small tenants, or an index walk that came back short: an exact scan. "+ 0" keeps
        # the planner off the HNSW index, which would re-introduce the shortfall.
        sql.SQL("semantic_exact AS MATERIALIZED (SELECT m.id, {d} AS distance FROM live AS m "
                "WHERE {e} AND (%(small)s::boolean "
                "OR (SELECT count(*) FROM semantic_ann) < %(cap)s) "
                "ORDER BY ({d}) + 0, m.id LIMIT %(cap)s)").format(d=distance, e=eligible),
        sql.SQL("semantic AS (SELECT s.id, 1 - s.distance AS score, "
                "row_number() OVER (ORDER BY s.distance, s.id) AS rank FROM ("
                "SELECT id, distance FROM semantic_exact UNION ALL "
                "SELECT id, distance FROM semantic_ann "
                "WHERE NOT EXISTS (SELECT 1 FROM semantic_exact)) AS s "
                "ORDER BY rank LIMIT %(cap)s)"),
    ]


def _bm25(counted: sql.Composable, match: sql.Composable) -> list[sql.Composable]:
    """Any query word may match; BM25 ranks the matches. Document frequencies come from the
    matches themselves (every row holding a query word is one), N from the tenant's rows
    (``counted``: a scalar expression); the document length is the row's count of distinct
    lexemes. Arithmetic is float8 throughout: numeric logarithms would cost more than the
    rest of the signal."""
    return [
        sql.SQL("lexical_query AS (SELECT replace(plainto_tsquery(%(config)s::regconfig, "
                "%(query)s)::text, ' & ', ' | ')::tsquery AS q, tsvector_to_array("
                "to_tsvector(%(config)s::regconfig, %(query)s)) AS terms)"),
        # The tsquery is read once (an init plan), not rebuilt for each row a generic plan
        # filters. Row-level security keeps ``@@`` (not leakproof) off the GIN index; the
        # leakproof ``primitives.@@`` (``match``, where installed) is served by it.
        sql.SQL("lexical_match AS MATERIALIZED (SELECT m.id, m.tsv, length(m.tsv)::float8 AS dl "
                "FROM live AS m WHERE m.tsv {} (SELECT q FROM lexical_query))").format(match),
        sql.SQL("lexical_tf AS (SELECT c.id, c.dl, u.lexeme, "
                "coalesce(array_length(u.positions, 1), 1)::float8 AS tf FROM lexical_match AS c, "
                "lexical_query AS lq, unnest(c.tsv) AS u WHERE u.lexeme = ANY(lq.terms))"),
        sql.SQL("lexical_stats AS (SELECT {}::float8 AS n, "
                "(SELECT greatest(avg(dl), 1) FROM lexical_match) AS avgdl)").format(counted),
        sql.SQL("lexical_terms AS (SELECT t.id, t.tf, t.dl, count(*) OVER (PARTITION BY "
                "t.lexeme)::float8 AS df FROM lexical_tf AS t)"),
        sql.SQL("lexical_scored AS (SELECT t.id, sum(ln(1 + (st.n - t.df + 0.5) / (t.df + 0.5)) "
                "* t.tf * (%(bm25_k1)s + 1) / (t.tf + %(bm25_k1)s * (1 - %(bm25_b)s + "
                "%(bm25_b)s * t.dl / st.avgdl))) AS score FROM lexical_terms AS t, "
                "lexical_stats AS st GROUP BY t.id)"),
        sql.SQL("lexical AS (SELECT id, score, row_number() OVER (ORDER BY score DESC, id) AS "
                "rank FROM lexical_scored ORDER BY rank LIMIT %(cap)s)"),
    ]


def entity_named(terms: str) -> sql.Composable:
    """True when the text whose ``to_tsvector('simple', ...)`` is ``terms`` names entity ``e``:
    its canonical name or an alias as a phrase of whole words, case-insensitively."""
    return sql.SQL(
        "({v} <> ''::tsvector AND ({v} @@ phraseto_tsquery('simple', e.canonical_name) "
        "OR EXISTS (SELECT 1 FROM unnest(e.aliases) AS a(name) "
        "WHERE {v} @@ phraseto_tsquery('simple', a.name))))").format(v=sql.SQL(terms))


def _graph(tables: Tables, matched: Sequence[str], point_in_time: bool,
           words: sql.Composable | None = None) -> list[sql.Composable]:
    """Memories connected to the query through the graph, ranked by closeness.

    Walks start from the memories that mention an entity the query names (its canonical
    name or an alias, matched as a phrase of whole words, case-insensitively) and from the
    top ``graph_seeds`` rows of each matched query signal, then follow edges of
    ``edge_types`` in both directions (causes and effects, earlier and later turns), or
    only from source to target (``direction`` ``forward``) or back (``backward``), for up
    to ``max_depth`` hops, through edges valid now (or at ``as_of``). A row's graph score is
    the best ``strength / (1 + hops)`` over its walks, where strength is the product of
    ``weight * confidence`` of the edges walked; an entity mention counts as zero hops.
    The start rows of other signals are not ranked again unless the query names an entity
    they mention. ``words`` (the text-match operator), when given, adds the top
    ``graph_seeds`` rows that hold any word of the query (ranked by ``ts_rank_cd``) to the
    starts, so a question whose words are not all in one row still has a start.
    ``graph_since`` / ``graph_until``, when not NULL, keep only rows whose event time is in
    ``[since, until)``: a "when" question's window bounds the timeline it ranks.
    """
    if tables.edges is None or tables.entities is None or tables.node_entities is None:
        raise ValueError(f"agent '{tables.agent}' has no graph tables (spec has no graph:)")
    t = tables.tenant
    if point_in_time:
        valid = sql.SQL("e.valid_from <= %(as_of)s AND (e.valid_until IS NULL "
                        "OR e.valid_until > %(as_of)s)")
    else:
        valid = sql.SQL("(e.valid_until IS NULL OR e.valid_until > now())")
    seeds: sql.Composable = sql.SQL("SELECT NULL::uuid AS id WHERE false")
    starts: list[sql.Composable] = [
        sql.SQL("(SELECT id FROM {} ORDER BY rank LIMIT %(graph_seeds)s)").format(
            sql.Identifier(s)) for s in matched]
    if words is not None:
        starts.append(sql.SQL(
            "(SELECT m.id FROM live AS m, (SELECT replace(plainto_tsquery("
            "%(config)s::regconfig, %(query)s)::text, ' & ', ' | ')::tsquery AS q) AS w "
            "WHERE m.tsv {} w.q ORDER BY ts_rank_cd(m.tsv, w.q) DESC, m.id "
            "LIMIT %(graph_seeds)s)").format(words))
    if starts:
        seeds = sql.SQL(" UNION ").join(starts)
    step = sql.SQL(
        "SELECT e.{end} AS id, (e.weight * e.confidence)::float8 AS s FROM {edges} AS e "
        "WHERE e.{t} = %(tenant)s AND e.{start} = w.id "
        "AND e.relation_type = ANY(%(edge_types)s::text[]) AND {valid} "
        "AND %(direction)s::text IN ('both', {way})")
    steps = sql.SQL(" UNION ALL ").join(
        step.format(end=sql.Identifier(end), start=sql.Identifier(start), edges=tables.edges.ident,
                    t=t, valid=valid, way=sql.Literal(way))
        for end, start, way in (("target_id", "source_id", "forward"),
                                ("source_id", "target_id", "backward")))
    return [
        sql.SQL("graph_terms AS (SELECT to_tsvector('simple', %(query)s) AS v)"),
        sql.SQL("graph_entity AS (SELECT e.id FROM {entities} AS e, graph_terms AS g "
                "WHERE e.{t} = %(tenant)s AND {named})").format(
            entities=tables.entities.ident, t=t, named=entity_named("g.v")),
        sql.SQL("graph_seed AS (SELECT id FROM ({}) AS s)").format(seeds),
        sql.SQL(
            "graph_walk(id, hops, strength, named) AS ("
            "SELECT n.memory_id, 0, 1.0::float8, true FROM {node_entities} AS n "
            "WHERE n.{t} = %(tenant)s AND n.entity_id IN (SELECT id FROM graph_entity) "
            "UNION SELECT id, 0, 1.0::float8, false FROM graph_seed "
            "UNION SELECT n.id, w.hops + 1, w.strength * n.s, false FROM graph_walk AS w "
            "CROSS JOIN LATERAL ({steps}) AS n WHERE w.hops < %(max_depth)s)").format(
            node_entities=tables.node_entities.ident, t=t, steps=steps),
        # Each reached row once, with its best score; then only those of them that are live
        # (active, in the searched tiers) are ranked. The planner cannot tell how many rows a
        # walk reaches (it guesses hundreds of thousands), so the live rows are looked up by
        # the reached ids as an array (the primary key, one probe each) rather than joined:
        # a join would scan every row of the tenant to hash them.
        sql.SQL(
            "graph_reached AS MATERIALIZED (SELECT w.id, max(w.strength / (1 + w.hops)) AS score "
            "FROM graph_walk AS w "
            "WHERE w.named OR (w.hops > 0 AND w.id NOT IN (SELECT id FROM graph_seed)) "
            "GROUP BY w.id)"),
        sql.SQL(
            "graph AS (SELECT g.id, g.score, row_number() OVER (ORDER BY g.score DESC, "
            "m.event_time DESC, g.id) AS rank FROM graph_reached AS g "
            "JOIN live AS m ON m.id = g.id "
            "WHERE m.id = ANY(ARRAY(SELECT id FROM graph_reached)) "
            "AND m.event_time >= coalesce(%(graph_since)s::timestamptz, '-infinity') "
            "AND m.event_time < coalesce(%(graph_until)s::timestamptz, 'infinity') "
            "ORDER BY rank LIMIT %(cap)s)"),
    ]


@dataclass(frozen=True, eq=False)
class Restriction:
    """Rows a search may return, beyond tenant, tiers and state: ``clause`` is a predicate on
    the memory row ``m`` (with its own ``params``), applied to every signal's candidates
    before ranking, so a selective restriction still fills ``limit``. ``key`` identifies
    the clause's shape (equal keys, equal clause text) and caches the statement."""

    key: Hashable
    clause: sql.Composable
    params: Mapping[str, Any] = field(default_factory=dict)


def search_statement(tables: Tables, signals: Sequence[str], columns: Sequence[str], *,
                     point_in_time: bool = False, bm25: bool = False,
                     restrict: Restriction | None = None,
                     indexed_match: bool = False,
                     decay: DecayModels | None = None,
                     fusion: str = "rrf") -> sql.Composed:
    """One statement: a capped CTE per signal, fused by weighted reciprocal rank
    (``fusion="rrf"``) or by weighted normalized scores (``fusion="weighted"``: each signal's
    scores min-max normalized over the rows it returned, 1 where they are all equal, then
    summed with the signal weights).

    Each row returned is ``columns`` of the memory, then the fused score (times the tier
    weight), ``ranks`` and ``scores`` (jsonb, per signal) and ``rows`` (jsonb: how many rows
    each signal returned, plus ``semantic_mode``). Recency ranks the rows another signal
    matched; alone, or with an empty query and envelope, it ranks every row. With
    ``restrict``, every signal ranks only the rows its clause admits. ``indexed_match``: the
    full-text index is on ``primitives.tsvector_match_ops``, so the lexical signal matches
    with its leakproof operator and row-level security lets the index serve it.

    With ``decay`` (the spec's decay models, :mod:`primitives.lifecycle._decay`), recency
    ranks by each row's decay weight (newer first among equal weights) and the fused score
    is multiplied by the row's effective confidence, which follows as a last column
    (``confidence``); both are taken at ``now()``, or at ``as_of`` at a point in time.

    Built once per distinct set of arguments (the same object comes back, so the engine
    renders its text once).
    """
    unknown = [s for s in signals if s not in SIGNAL_ORDER]
    if unknown or not signals:
        raise ValueError(f"signals must be some of {SIGNAL_ORDER}, got {list(signals)}")
    used = tuple(s for s in SIGNAL_ORDER if s in signals)
    if fusion not in ("rrf", "weighted"):
        raise ValueError(f"fusion must be rrf or weighted, not {fusion!r}")
    if restrict is None:
        return _search_statement(tables, used, tuple(columns), point_in_time, bm25,
                                 indexed_match, decay, fusion)
    key = (tables, used, tuple(columns), point_in_time, bm25, indexed_match, restrict.key,
           decay, fusion)
    statement = _RESTRICTED.get(key)
    if statement is None:
        if len(_RESTRICTED) >= 256:
            _RESTRICTED.clear()
        statement = _build(tables, used, tuple(columns), point_in_time, bm25, restrict.clause,
                           indexed_match, decay, fusion)
        _RESTRICTED[key] = statement
    return statement


_RESTRICTED: dict[Hashable, sql.Composed] = {}


@lru_cache(maxsize=256)
def _search_statement(tables: Tables, used: tuple[str, ...], columns: tuple[str, ...],
                      point_in_time: bool, bm25: bool, indexed_match: bool,
                      decay: DecayModels | None, fusion: str = "rrf") -> sql.Composed:
    return _build(tables, used, columns, point_in_time, bm25, None, indexed_match, decay,
                  fusion)


def _live_filter(point_in_time: bool, restrict: sql.Composable | None) -> sql.Composable:
    """``live``'s WHERE: unexpired now (at a point in time ``scope`` has decided that), and
    the restriction's clause."""
    parts: list[sql.Composable] = []
    if not point_in_time:
        parts.append(sql.SQL("m.expires_at IS NULL OR m.expires_at > now()"))
    if restrict is not None:
        parts.append(restrict)
    if not parts:
        return sql.SQL("")
    if len(parts) == 1:
        return sql.SQL(" WHERE {}").format(parts[0])
    return sql.SQL(" WHERE {}").format(
        sql.SQL(" AND ").join(sql.SQL("({})").format(p) for p in parts))


def _build(tables: Tables, used: tuple[str, ...], columns: tuple[str, ...],
           point_in_time: bool, bm25: bool, restrict: sql.Composable | None,
           indexed_match: bool = False, decay: DecayModels | None = None,
           fusion: str = "rrf") -> sql.Composed:
    mem = tables.memories.ident
    now = sql.SQL("%(as_of)s") if point_in_time else NOW
    match = sql.SQL(TEXT_MATCH_OPERATOR if indexed_match else "@@")
    # The tenant's rows in the searched tiers: ``scope`` as the active-row index sees them
    # (its predicate written out, so counting them reads the index alone), ``live`` those
    # of them every signal ranks (also unexpired). At a point in time, both are the rows
    # valid then. Neither is materialised: each use is planned as a scan of its own.
    state = active_at() if point_in_time else ACTIVE_ROWS
    ctes: list[sql.Composable] = [
        sql.SQL("scope AS NOT MATERIALIZED (SELECT * FROM {} AS m WHERE m.{} = %(tenant)s "
                "AND m.tier = ANY(%(tiers)s) AND {})").format(mem, tables.tenant, state),
        sql.SQL("live AS NOT MATERIALIZED (SELECT * FROM scope AS m{})").format(
            _live_filter(point_in_time, restrict)),
    ]
    matched: list[str] = []
    if "semantic" in used:
        ctes += _semantic()
        matched.append("semantic")
    if "lexical" in used and bm25:
        # N: the tenant's rows as the settings statement counted them (below the switch
        # point), else counted here; coalesce leaves the count unrun when the first is set.
        counted: sql.Composable = sql.SQL(
            "coalesce(%(scope_rows)s::bigint, (SELECT count(*) FROM scope))")
        if not point_in_time:  # less those of the index that have expired
            counted = sql.SQL("({} - (SELECT count(*) FROM scope AS m WHERE "
                              "m.expires_at <= now()))").format(counted)
        ctes += _bm25(counted, match)
        matched.append("lexical")
    elif "lexical" in used:
        ctes.append(sql.SQL(
            "lexical AS (SELECT m.id, ts_rank_cd(m.tsv, q) AS score, "
            "row_number() OVER (ORDER BY ts_rank_cd(m.tsv, q) DESC, m.id) AS rank "
            "FROM live AS m, websearch_to_tsquery(%(config)s::regconfig, %(query)s) AS q "
            "WHERE m.tsv {} q ORDER BY rank LIMIT %(cap)s)").format(match))
        matched.append("lexical")
    if "envelope" in used:
        ctes.append(sql.SQL(
            "envelope AS (SELECT m.id, 1.0::float8 AS score, "
            "row_number() OVER (ORDER BY m.event_time DESC, m.id) AS rank FROM live AS m "
            "WHERE %(envelope)s::jsonb <> '{}'::jsonb "
            "AND m.envelope @> %(envelope)s::jsonb ORDER BY rank LIMIT %(cap)s)"))
        matched.append("envelope")
    if "graph" in used:
        # BM25's lexical signal already matches any word of the query; the all-words match
        # gets the any-word starts added to the walk's.
        ctes += _graph(tables, [s for s in matched if s != "envelope"], point_in_time,
                       None if bm25 or "lexical" not in used else match)
        matched.append("graph")
    if "recency" in used:
        # The rows recency ranks: with no query and no envelope, every live row; else the
        # rows the other signals matched. Two branches, exactly one of them open (a test of
        # parameters only, a one-time filter): an OR of the two would be a filter on each
        # row of a scan of the tenant, whichever held.
        rows: sql.Composable = sql.SQL("live")
        if matched:
            everything = sql.SQL("%(query)s = '' AND %(envelope)s::jsonb = '{}'::jsonb")
            rows = sql.SQL(
                "(SELECT * FROM live AS m WHERE {everything} UNION ALL "
                "SELECT * FROM live AS m WHERE NOT ({everything}) AND m.id IN ({ids}))"
            ).format(everything=everything, ids=sql.SQL(" UNION ").join(
                sql.SQL("SELECT id FROM {}").format(sql.Identifier(s)) for s in matched))
        by_decay = decay.weight_sql(tables, now, probe=TENANT) if decay is not None else None
        if by_decay is None:
            ctes.append(sql.SQL(
                "recency AS (SELECT m.id, extract(epoch FROM m.event_time)::float8 AS score, "
                "row_number() OVER (ORDER BY m.event_time DESC, m.id) AS rank FROM {} AS m "
                "ORDER BY rank LIMIT %(cap)s)").format(rows))
        else:  # the spec's decay models: the decay weight ranks, event time breaks ties
            ctes.append(sql.SQL(
                "recency AS (SELECT m.id, w.weight AS score, row_number() OVER (ORDER BY "
                "w.weight DESC, m.event_time DESC, m.id) AS rank FROM {} AS m "
                "CROSS JOIN LATERAL (SELECT {} AS weight) AS w "
                "ORDER BY rank LIMIT %(cap)s)").format(rows, by_decay))
    ranked = sql.SQL(" UNION ALL ").join(
        sql.SQL("SELECT id, {} AS signal, rank, score FROM {}").format(
            sql.Literal(s), sql.Identifier(s))
        for s in used)
    weight = sql.SQL("CASE r.signal {} END").format(sql.SQL(" ").join(
        sql.SQL("WHEN {} THEN {}").format(sql.Literal(s), sql.Placeholder(f"w_{s}"))
        for s in used))
    counts: list[sql.Composable] = [
        sql.SQL("{}, (SELECT count(*) FROM {})").format(sql.Literal(s), sql.Identifier(s))
        for s in used]
    if "semantic" in used:
        counts.append(sql.SQL(
            "'semantic_mode', CASE WHEN %(small)s::boolean "
            "THEN 'exact' WHEN EXISTS (SELECT 1 FROM semantic_exact) THEN 'hnsw+exact' "
            "ELSE 'hnsw' END"))
    score: sql.Composable = sql.SQL("f.score * tw.weight")
    confidence: sql.Composable = sql.SQL("")
    if decay is not None:  # the fused score times the row's effective confidence
        score = sql.SQL("f.score * tw.weight * c.confidence")
        confidence = sql.SQL(" CROSS JOIN LATERAL (SELECT {} AS confidence) AS c").format(
            decay.confidence_sql(tables, now, probe=TENANT))
    return sql.SQL(
        "WITH {recursive}{ctes}, ranked AS ({ranked}), fused AS ("
        "SELECT r.id, sum({contribution}) AS score, "
        "jsonb_object_agg(r.signal, r.rank) AS ranks, "
        "jsonb_object_agg(r.signal, r.score) AS scores FROM {fused_from} GROUP BY r.id) "
        "SELECT {cols}, {score} AS score, f.ranks, f.scores, "
        "jsonb_build_object({counts}) AS signal_rows{conf_col} FROM fused AS f "
        "JOIN {mem} AS m ON m.{tenant} = %(tenant)s AND m.id = f.id "
        "JOIN unnest(%(tiers)s::text[], %(tier_weights)s::float8[]) AS tw(tier, weight) "
        "ON tw.tier = m.tier{confidence} "
        "ORDER BY score DESC, m.event_time DESC, m.id LIMIT %(limit)s"
    ).format(
        recursive=sql.SQL("RECURSIVE " if "graph" in used else ""),
        ctes=sql.SQL(", ").join(ctes), ranked=ranked, cols=_returning(columns),
        contribution=sql.SQL("{}::float8 / (%(k)s + r.rank)").format(weight)
        if fusion == "rrf" else sql.SQL("{}::float8 * r.norm").format(weight),
        fused_from=sql.SQL("ranked AS r") if fusion == "rrf" else sql.SQL(
            "(SELECT x.*, coalesce((x.score - min(x.score) OVER s) "
            "/ nullif(max(x.score) OVER s - min(x.score) OVER s, 0), 1.0) AS norm "
            "FROM ranked AS x WINDOW s AS (PARTITION BY x.signal)) AS r"),
        counts=sql.SQL(", ").join(counts), mem=mem, tenant=tables.tenant, score=score,
        conf_col=sql.SQL(", c.confidence") if decay is not None else sql.SQL(""),
        confidence=confidence,
    )
