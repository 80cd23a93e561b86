"""Declared capacities at run time (``tiers[].capacity``, seed 001 §1.B and §9).

Two halves, one per ``on_full``:

* ``evict`` (a tier that a ``references`` promotion fills: CWM and its token budget).
  :func:`evict` runs in :func:`primitives.engine._ticks.tick` right after the promotions,
  one statement: per tenant (or per scope, ``per: scope``) the tier's live rows are ranked
  to keep: action-linked rows first (they never leave), then most ticks left, youngest,
  newest, highest id; the rows whose running count or running token estimate passes the
  capacity leave the tier, each with an ``evicted`` event (tier, scope, tokens, the bound
  and the content's sha256, never the content). A re-referenced row regains its tier's
  ticks (:func:`primitives.engine._ticks.reference`), so it is kept over rows nobody used.
* ``refuse``: the database's capacity guard refuses the write
  (:mod:`primitives.compile._capacity`), and the error reaches the caller as
  :class:`~primitives.errors.StorageFull`. The write's transaction is rolled back, so
  :func:`journal_refusal` writes the ``storage_full`` event (the admin's queue: what was
  refused, its size and the content's sha256) in a transaction of its own.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any
from uuid import UUID

from psycopg import sql

from primitives.compile import Tables
from primitives.compile._capacity import token_estimate
from primitives.compile._definer import transient_delete_function
from primitives.compile._expr import active_predicate
from primitives.engine._core import Context, Op, Step, _event
from primitives.errors import StorageFull
from primitives.spec import AgentSpec
from primitives.spec._models import Capacity

__all__ = ["EVICTED_EVENT", "STORAGE_FULL_EVENT", "evict", "evicting_tiers", "journal_refusal"]

EVICTED_EVENT = "evicted"
STORAGE_FULL_EVENT = "storage_full"


def evicting_tiers(spec: AgentSpec) -> list[tuple[str, Capacity]]:
    """(tier, capacity) of each tier whose capacity evicts, in spec order."""
    return [(t.name, t.capacity) for t in spec.tiers
            if t.capacity is not None and t.capacity.on_full == "evict"]


@lru_cache(maxsize=64)
def evict_statement(tables: Tables, tier: str, rows: int | None, tokens: int | None,
                    per_scope: bool) -> sql.Composed:
    """Evict the rows of ``tier`` of ``%(tenant)s`` past the capacity (module docstring).
    Returns one row: the number evicted."""
    t, mem = tables.tenant, tables.memories.ident
    part = sql.SQL("PARTITION BY k.scope_id ") if per_scope else sql.SQL("")
    over = [sql.SQL("r.n > {}").format(sql.Literal(rows))] if rows is not None else []
    if tokens is not None:
        over.append(sql.SQL("r.used > {}").format(sql.Literal(tokens)))
    return sql.SQL("""\
WITH ranked AS (
  SELECT m.{t} AS tenant, m.id, m.scope_id, {tok} AS tokens, m.ttl_ticks,
         coalesce(m.age_ticks, 0) AS age, m.created_at,
         encode(sha256(convert_to(m.content, 'UTF8')), 'hex') AS content_sha256,
         EXISTS (SELECT 1 FROM {links} AS l WHERE l.{t} = m.{t} AND l.memory_id = m.id)
           AS linked
  FROM {mem} AS m
  WHERE m.{t} = %(tenant)s AND m.tier = {tier} AND {active}),
running AS (
  SELECT k.*, row_number() OVER w AS n, sum(k.tokens) OVER w AS used
  FROM ranked AS k
  WINDOW w AS ({part}ORDER BY k.linked DESC, k.ttl_ticks DESC NULLS LAST, k.age,
                          k.created_at DESC, k.id DESC
               ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)),
going AS (
  SELECT r.* FROM running AS r WHERE NOT r.linked AND ({over})
  ORDER BY r.id),
removed AS (SELECT g.* FROM going AS g WHERE {delete}(g.id)),
journal AS (
  INSERT INTO {events} ({t}, event_id, kind, memory_id, actor, payload)
  SELECT r.tenant, gen_random_uuid(), {kind}, r.id, %(actor)s,
         jsonb_build_object('tier', {tier}, 'scope_id', r.scope_id, 'tokens', r.tokens,
                            'rows_kept_before', r.n - 1, 'tokens_with', r.used,
                            'capacity', jsonb_build_object('rows', {rows}, 'tokens', {tokens},
                                                           'per', {per}),
                            'content_sha256', r.content_sha256)
  FROM removed AS r ORDER BY r.id
  RETURNING 1)
SELECT (SELECT count(*) FROM removed) + 0 * (SELECT count(*) FROM journal)""").format(
        t=t, mem=mem, tok=token_estimate(sql.SQL("m.content")), links=tables.action_links.ident,
        tier=sql.Literal(tier), active=active_predicate("m"), part=part,
        over=sql.SQL(" OR ").join(over), delete=transient_delete_function(tables),
        events=tables.events.ident, kind=sql.Literal(EVICTED_EVENT),
        rows=sql.Literal(rows), tokens=sql.Literal(tokens),
        per=sql.Literal("scope" if per_scope else "tenant"))


def evict(ctx: Context) -> Op[int]:
    """Evict, in every tier whose capacity evicts, the rows past it; returns how many left."""
    evicted = 0
    for tier, capacity in evicting_tiers(ctx.spec):
        row = yield Step(evict_statement(ctx.tables, tier, capacity.rows, capacity.tokens,
                                         capacity.per == "scope"),
                         {"tenant": ctx.tenant, "actor": ctx.actor}, "one")
        evicted += int(row[0]) if row else 0
    return evicted


def is_capacity_refusal(err: BaseException) -> bool:
    """``err`` is the capacity guard's STORAGE_FULL (not a full disk)."""
    return isinstance(err, StorageFull) and bool(err.context.get("capacity"))


def journal_refusal(ctx: Context, err: StorageFull) -> Op[UUID]:
    """The ``storage_full`` event of a write the capacity guard refused: the tier, the bound,
    what was used, the refused write's size and its content's sha256; ``last``, so it is one
    transaction of its own. Returns the event's id."""
    keys = ("tier", "per", "scope_id", "rows", "tokens", "used_rows", "used_tokens",
            "write_tokens", "content_sha256")
    payload: dict[str, Any] = {k: err.context.get(k) for k in keys}
    step = _event(ctx, STORAGE_FULL_EVENT, None, {"error": StorageFull.code, **payload})
    yield Step(step.statement, step.params, step.fetch, last=True)
    event_id: UUID = step.params["event_id"]
    return event_id


def refused(engine_ctx: Context, err: BaseException) -> Op[UUID] | None:
    """The journal op for ``err`` when it is the capacity guard's refusal, else None."""
    if not isinstance(err, StorageFull) or not is_capacity_refusal(err):
        return None
    return journal_refusal(engine_ctx, err)
