"""Seed 001 §3's deterministic episodic query: ``retrieval.lexical.ranking: token_overlap``.

One statement tokenises the query and each entry the same way (lower case, split on every run
of characters that are not letters or digits), counts the entry's tokens that are query terms,
divides by the entry's token count (at least 1), and ranks by that score, descending, then
``event_time`` descending (the seeded creation time), then id ascending. Entries with no
matching token are not returned. No vectors, no model, no Python sort: the order is the
statement's ``ORDER BY``, so the same rows always give the same list.

Example::

    hits = mem.episodic_query("budget meeting", max_results=4)
    [h.memory.content for h in hits]
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

from psycopg import sql

from primitives.compile import Tables
from primitives.engine import _core as core
from primitives.engine import _queries as q
from primitives.engine._records import MEMORY_COLUMNS, Hit, Memory, SearchResult
from primitives.errors import PolicyViolation, TenancyError

__all__ = ["TOKEN_SPLIT", "episodic_query", "overlap_statement"]

TOKEN_SPLIT = "[^[:alnum:]]+"
"""The tokeniser's separator (a PostgreSQL regular expression): any run of characters that
are neither letters nor digits."""


@lru_cache(maxsize=64)
def overlap_statement(tables: Tables) -> sql.Composed:
    """The ranked entries of ``%(tiers)s`` (and ``%(typology)s`` when not null) whose
    ``event_time`` lies in [``%(since)s``, ``%(until)s``) (either end may be null), top
    ``%(limit)s`` by (score desc, event_time desc, id asc); the score is the last column."""
    return sql.SQL(
        "WITH terms AS (SELECT coalesce(array_agg(DISTINCT t), '{{}}') AS q "
        "FROM regexp_split_to_table(lower(%(query)s), %(split)s) AS t WHERE t <> ''), "
        "scored AS (SELECT m.*, "
        "(SELECT count(*) FROM unnest(e.tokens) AS tok WHERE tok = ANY(terms.q)) AS overlap, "
        "cardinality(e.tokens) AS n FROM {mem} AS m CROSS JOIN terms "
        "CROSS JOIN LATERAL (SELECT ARRAY(SELECT t FROM regexp_split_to_table("
        "lower(m.content), %(split)s) AS t WHERE t <> '') AS tokens) AS e "
        "WHERE m.{t} = %(tenant)s AND m.tier = ANY(%(tiers)s) "
        "AND (%(typology)s::text IS NULL OR m.typology = %(typology)s::text) "
        "AND (%(since)s::timestamptz IS NULL OR m.event_time >= %(since)s::timestamptz) "
        "AND (%(until)s::timestamptz IS NULL OR m.event_time < %(until)s::timestamptz) "
        "AND {active}) "
        "SELECT {cols}, m.overlap::float8 / greatest(1, m.n) AS score FROM scored AS m "
        "WHERE m.overlap > 0 ORDER BY score DESC, m.event_time DESC, m.id ASC "
        "LIMIT %(limit)s"
    ).format(mem=tables.memories.ident, t=tables.tenant, active=q.ACTIVE,
             cols=q._returning_m())


def episodic_query(ctx: core.Context, query: str, *, max_results: int | None = None,
                   since: datetime | None = None, until: datetime | None = None,
                   tiers: Sequence[str] | None = None,
                   typology: str | None = "episodic",
                   final: bool = False) -> core.Op[SearchResult[Hit]]:
    """Seed 001 §3's ``episodic_query``: the entries of ``tiers`` (default: the spec's search
    scope) of ``typology`` (None: any) ranked by token overlap, within the ``since`` /
    ``until`` window of event time, at most ``max_results`` (default: the spec's
    ``default_limit``). ``Hit.scores['lexical']`` is the overlap score. ``final``: this
    operation is the whole transaction."""
    if not isinstance(query, str):
        raise PolicyViolation(f"query must be a string, not {type(query).__name__}",
                              field="query")
    limit = max_results or ctx.spec.retrieval.default_limit
    if type(limit) is not int or not 1 <= limit <= 1000:
        raise PolicyViolation(f"max_results must be between 1 and 1000, got {limit!r}",
                              field="max_results")
    chosen = list(tiers) if tiers is not None else list(core.search_scope(ctx.spec))
    for tier in chosen:
        if tier not in ctx.spec.tier_names:
            raise TenancyError(f"unknown tier '{tier}' for agent '{ctx.spec.agent}'; "
                               f"tiers: {', '.join(ctx.spec.tier_names)}", tier=tier)
    rows = yield core.Step(overlap_statement(ctx.tables), {
        "tenant": ctx.tenant, "tiers": chosen, "typology": typology, "query": query,
        "split": TOKEN_SPLIT, "since": since, "until": until, "limit": limit}, "all",
        last=final)
    width = len(MEMORY_COLUMNS)
    hits = [_hit(Memory.from_row(row[:width]), float(row[width]), rank)
            for rank, row in enumerate(rows, start=1)]
    return SearchResult(hits)


def _hit(memory: Memory, score: float, rank: int) -> Hit:
    scores: dict[str, Any] = {"lexical": score}
    return Hit(memory, score, {"lexical": rank}, scores)
