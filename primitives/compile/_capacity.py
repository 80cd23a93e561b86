"""Declared capacities (``tiers[].capacity``, seed 001 §9 STORAGE_FULL), held by the database.

A tier whose capacity says ``on_full: refuse`` gets a branch in one BEFORE INSERT row trigger
on the memories table, ``<prefix>_capacity_guard``: it takes the tenant's transaction lock
(``primitives.tenant_xact_lock``) on (table, tier, and the scope when counted
``per: scope``), then counts the
live rows of that tenant (and scope) in the tier in a statement of its own, so a writer that
waited for the lock counts the rows its predecessor committed. A row that would take the
tier past ``rows`` or ``tokens`` is refused with SQLSTATE ``PM006`` (``STORAGE_FULL``); its
DETAIL names the tier, the bound, what is used and the refused content's sha256 (never the
content). Every write path (the one-statement write, the general path, a promotion, a maintain
pass, plain SQL as the application role) meets the same trigger, and nothing stored is
touched: the refused row is simply not inserted.

Tokens are estimated as ``ceil(characters / 4)`` of the content, the context budget's
estimate (:func:`primitives.retrieval._context.estimate_tokens`).

``on_full: evict`` tiers are not guarded here: the tick evicts them
(:mod:`primitives.engine._capacity`).
"""

from __future__ import annotations

from typing import Final

from psycopg import sql

from primitives.compile._ddl import Trigger
from primitives.compile._expr import active_predicate
from primitives.compile._names import Tables
from primitives.spec import AgentSpec

__all__ = ["CAPACITY_TRIGGER", "capacity_functions", "capacity_trigger", "guarded_tiers",
           "token_estimate"]

CAPACITY_TRIGGER: Final = "primitives_capacity_guard"
"""The BEFORE INSERT row trigger on ``<prefix>_memories`` (absent without a refuse capacity)."""


def guarded_tiers(spec: AgentSpec) -> list[tuple[str, int | None, int | None, bool]]:
    """(tier, rows, tokens, per scope) of each tier whose capacity refuses, in spec order."""
    return [(t.name, t.capacity.rows, t.capacity.tokens, t.capacity.per == "scope")
            for t in spec.tiers if t.capacity is not None and t.capacity.on_full == "refuse"]


def token_estimate(content: sql.Composable) -> sql.Composed:
    """``ceil(characters / 4)`` of ``content``, in SQL."""
    return sql.SQL("((pg_catalog.char_length({}) + 3) / 4)").format(content)


def _function(tables: Tables) -> sql.Identifier:
    return sql.Identifier(tables.schema, tables.object_name("capacity_guard"))


_BRANCH = sql.SQL("""\
    IF NEW.tier = {tier} THEN
        -- (through primitives.tenant_xact_lock: runtime roles may not take advisory locks)
        PERFORM primitives.tenant_xact_lock(NEW.{t}::text, pg_catalog.jsonb_build_array(
            'capacity', TG_RELID::text, NEW.tier{lock_scope})::text);
        SELECT pg_catalog.count(*), coalesce(pg_catalog.sum({tokens}), 0)
          INTO used_rows, used_tokens
          FROM {mem} AS m
         WHERE m.{t} = NEW.{t} AND m.tier = NEW.tier{scope} AND {active};
        new_tokens := {new_tokens};
        IF {rows_full} OR {tokens_full} THEN
            RAISE EXCEPTION USING ERRCODE = 'PM006',
                MESSAGE = 'tier ' || NEW.tier || ' is full: ' || used_rows || ' of '
                    || {rows_text} || ' rows, ' || used_tokens || ' of ' || {tokens_text}
                    || ' tokens used ' || {per_text} || '; this write of ' || new_tokens
                    || ' tokens is refused and nothing stored was changed',
                DETAIL = pg_catalog.jsonb_build_object(
                    'tier', NEW.tier, 'per', {per}, 'scope_id', {detail_scope},
                    'rows', {rows}, 'tokens', {tokens_limit},
                    'used_rows', used_rows, 'used_tokens', used_tokens,
                    'write_tokens', new_tokens,
                    'content_sha256', pg_catalog.encode(pg_catalog.sha256(
                        pg_catalog.convert_to(NEW.content, 'UTF8')), 'hex'))::text;
        END IF;
    END IF;
""")

_GUARD = sql.SQL("""\
CREATE OR REPLACE FUNCTION {function}() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    used_rows   bigint;
    used_tokens bigint;
    new_tokens  bigint;
BEGIN
    -- a row born inactive (history written as such) takes no room
    IF NEW.superseded_at IS NOT NULL OR NEW.invalidated_at IS NOT NULL
       OR NEW.archived_at IS NOT NULL OR NEW.tombstoned_at IS NOT NULL THEN
        RETURN NEW;
    END IF;
{branches}    RETURN NEW;
END
$fn$""")


def _branch(tables: Tables, tier: str, rows: int | None, tokens: int | None,
            per_scope: bool) -> sql.Composed:
    null = sql.SQL("NULL")
    return _BRANCH.format(
        tier=sql.Literal(tier), t=tables.tenant, mem=tables.memories.ident,
        lock_scope=sql.SQL(", NEW.scope_id") if per_scope else sql.SQL(""),
        scope=(sql.SQL(" AND m.scope_id IS NOT DISTINCT FROM NEW.scope_id") if per_scope
               else sql.SQL("")),
        active=active_predicate("m"),
        tokens=token_estimate(sql.SQL("m.content")),
        new_tokens=token_estimate(sql.SQL("NEW.content")),
        rows_full=(sql.SQL("used_rows + 1 > {}").format(sql.Literal(rows)) if rows is not None
                   else sql.SQL("false")),
        tokens_full=(sql.SQL("used_tokens + new_tokens > {}").format(sql.Literal(tokens))
                     if tokens is not None else sql.SQL("false")),
        rows_text=sql.Literal(str(rows) if rows is not None else "unbounded"),
        tokens_text=sql.Literal(str(tokens) if tokens is not None else "unbounded"),
        per_text=(sql.SQL("('in scope ' || coalesce(NEW.scope_id, '(none)'))")
                  if per_scope else sql.Literal("by this tenant")),
        per=sql.Literal("scope" if per_scope else "tenant"),
        detail_scope=sql.SQL("NEW.scope_id") if per_scope else null,
        rows=sql.Literal(rows) if rows is not None else null,
        tokens_limit=sql.Literal(tokens) if tokens is not None else null,
    )


def capacity_functions(spec: AgentSpec, tables: Tables) -> tuple[tuple[str, sql.Composed], ...]:
    """The capacity guard's trigger function and its revoke from PUBLIC; empty when no tier's
    capacity refuses."""
    tiers = guarded_tiers(spec)
    if not tiers:
        return ()
    function = _function(tables)
    label = f"capacity guard {tables.schema}.{tables.object_name('capacity_guard')}"
    branches = sql.SQL("").join(_branch(tables, *t) for t in tiers)
    return (
        (label, _GUARD.format(function=function, branches=branches)),
        (f"{label}: not callable by PUBLIC",
         sql.SQL("REVOKE ALL ON FUNCTION {}() FROM PUBLIC").format(function)),
    )


def capacity_trigger(spec: AgentSpec, tables: Tables) -> tuple[Trigger, ...]:
    """``primitives_capacity_guard`` BEFORE INSERT on the memories table, when a tier's
    capacity refuses."""
    if not guarded_tiers(spec):
        return ()
    return (Trigger(CAPACITY_TRIGGER, "BEFORE", "INSERT", "ROW", _function(tables)),)
