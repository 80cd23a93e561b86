"""The seeded clock and ids of a deterministic spec (``determinism: {clock: ticks, ids:
seeded}``), compiled into the agent's journal and memories triggers.

A transaction of a job sets ``primitives.job_seed`` (``set_config(..., true)``: until it
ends; the engine does it, :mod:`primitives.engine._determinism`). While it is set:

* **clock** (``clock: ticks``): every journal event's ``occurred_at`` is the seeded clock,
  not ``now()``: the tenant's first event is at the seed's epoch (a whole second between
  2000 and 2010 derived from the seed's sha256); an event after a ``ticked`` event starts the
  next second (one tick, one second); any other event is one microsecond after the one before
  it. Memory rows take the time the next event gets for ``created_at``, ``updated_at``,
  ``event_time`` (when the write gives none) and every state timestamp an update sets.
* **ids** (``ids: seeded``): an event whose ``event_id`` is not a seeded (version-8) id, such
  as one a set-based statement drew with ``gen_random_uuid()``, gets the seeded id of
  ``<seed>:event:<seq>``.

The chain hash covers ``occurred_at``, so the same job on the same history gives the same
chain, byte for byte. Without the setting both triggers do what the random spec's do.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from psycopg import sql

from primitives.compile._ddl import TableDef, Trigger
from primitives.compile._names import (
    APP_ROLE,
    MAINTAINER_ROLE,
    PRIVACY_ADMIN_ROLE,
    Tables,
)
from primitives.spec import AgentSpec

__all__ = ["SEED_SETTING", "clock_columns", "clock_function_sql", "epoch_function_sql",
           "seeded", "seeded_functions", "uuid_function_sql", "with_clock"]

SEED_SETTING: Final = "primitives.job_seed"
"""The transaction-local setting that carries the job seed."""

STATE_COLUMNS: Final = ("updated_at", "superseded_at", "invalidated_at", "archived_at",
                        "tombstoned_at", "corroborated_at", "erased_at")
"""Memory timestamps an update may set: the seeded clock's when a job sets them."""


def seeded(spec: AgentSpec) -> bool:
    """The spec's journal and memories run on the seeded clock or ids."""
    d = spec.determinism
    return d.clock == "ticks" or d.ids == "seeded"


def _fn(tables: Tables, suffix: str) -> sql.Identifier:
    return sql.Identifier(tables.schema, tables.object_name(suffix))


def uuid_fn(tables: Tables) -> sql.Identifier:
    """``<schema>.<prefix>_seeded_uuid(text)``."""
    return _fn(tables, "seeded_uuid")


def epoch_fn(tables: Tables) -> sql.Identifier:
    """``<schema>.<prefix>_seeded_epoch(text)``."""
    return _fn(tables, "seeded_epoch")


def clock_fn(tables: Tables) -> sql.Identifier:
    """``<schema>.<prefix>_seeded_clock()``: the memories trigger function."""
    return _fn(tables, "seeded_clock")


def uuid_function_sql(tables: Tables) -> sql.Composed:
    """The version-8 UUID of a name: sha256's first 16 bytes, version and variant bits set
    (``primitives.engine._ids.seeded_uuid`` computes the same in Python)."""
    return sql.SQL("""\
CREATE OR REPLACE FUNCTION {fn}(name text) RETURNS uuid
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN encode(set_byte(set_byte(substring(sha256(convert_to(name, 'UTF8')) FROM 1 FOR 16),
                                6, (get_byte(sha256(convert_to(name, 'UTF8')), 6) & 15) | 128),
                       8, (get_byte(sha256(convert_to(name, 'UTF8')), 8) & 63) | 128),
              'hex')::uuid""").format(fn=uuid_fn(tables))


def epoch_function_sql(tables: Tables) -> sql.Composed:
    """A seed's epoch: 2000-01-01 UTC plus the first 4 bytes of its sha256, modulo ten years
    of seconds (``primitives.engine._determinism.seeded_epoch`` in Python)."""
    return sql.SQL("""\
CREATE OR REPLACE FUNCTION {fn}(seed text) RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN timestamptz '2000-01-01 00:00:00+00' + make_interval(secs => (
  ((get_byte(sha256(convert_to(seed, 'UTF8')), 0)::bigint << 24)
   | (get_byte(sha256(convert_to(seed, 'UTF8')), 1)::bigint << 16)
   | (get_byte(sha256(convert_to(seed, 'UTF8')), 2)::bigint << 8)
   | get_byte(sha256(convert_to(seed, 'UTF8')), 3)::bigint) % 315360000)::float8)""").format(
        fn=epoch_fn(tables))


def next_time_sql(tables: Tables) -> sql.Composed:
    """PL/pgSQL expression: the seeded time of the next event, from ``last_seq``,
    ``last_at``, ``last_kind`` and ``seed``."""
    return sql.SQL(
        "CASE WHEN last_seq IS NULL THEN {epoch}(seed) "
        "WHEN last_kind = 'ticked' THEN "
        "date_trunc('second', last_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' "
        "+ interval '1 second' "
        "ELSE last_at + interval '1 microsecond' END").format(epoch=epoch_fn(tables))


_CLOCK_FUNCTION = sql.SQL("""\
CREATE OR REPLACE FUNCTION {function}() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
DECLARE
    seed      text := nullif(pg_catalog.current_setting({setting}, true), '');
    last_seq  bigint;
    last_at   timestamptz;
    last_kind text;
    at        timestamptz;
    new_row   jsonb;
    old_row   jsonb;
    stamps    jsonb := '{{}}';
    col       text;
BEGIN
    IF seed IS NULL THEN
        RETURN NEW;
    END IF;
    SELECT e.seq, e.occurred_at, e.kind INTO last_seq, last_at, last_kind
    FROM {journal} AS e WHERE e.{tenant} = NEW.{tenant} ORDER BY e.seq DESC LIMIT 1;
    at := {next_time};
    new_row := to_jsonb(NEW);
    IF TG_OP = 'UPDATE' THEN
        old_row := to_jsonb(OLD);
    END IF;
    -- each argument names a timestamp column: set now (not NULL) by this insert or changed
    -- by this update, it takes the clock's time; '?column': only when the write left it NULL
    FOR i IN 0 .. TG_NARGS - 1 LOOP
        col := TG_ARGV[i];
        IF left(col, 1) = '?' THEN
            col := substr(col, 2);
            IF new_row ->> col IS NULL THEN
                stamps := stamps || jsonb_build_object(col, at);
            END IF;
        ELSIF new_row ->> col IS NOT NULL
              AND (TG_OP = 'INSERT' OR new_row -> col IS DISTINCT FROM old_row -> col) THEN
            stamps := stamps || jsonb_build_object(col, at);
        END IF;
    END LOOP;
    IF stamps <> '{{}}' THEN
        NEW := jsonb_populate_record(NEW, stamps);
    END IF;
    RETURN NEW;
END
$fn$""")


def clock_function_sql(tables: Tables) -> sql.Composed:
    """The trigger function of the seeded clock on the agent's tables (module docstring)."""
    return _CLOCK_FUNCTION.format(
        function=clock_fn(tables), setting=sql.Literal(SEED_SETTING),
        journal=tables.events.ident, tenant=tables.tenant, next_time=next_time_sql(tables))


def clock_columns(tables: Tables) -> dict[str, tuple[str, ...]]:
    """The timestamp columns the seeded clock sets, by table (``?``: only when left NULL)."""
    columns = {
        tables.memories.name: ("created_at", "updated_at", "valid_from", *STATE_COLUMNS[1:],
                               "?event_time"),
        tables.action_links.name: ("created_at",),
        tables.scopes.name: ("opened_at", "last_activity_at", "closed_at"),
        tables.promotions.name: ("promoted_at",),
    }
    for table, names in ((tables.action_requests, ("created_at", "decided_at")),
                         (tables.approvals, ("at",)), (tables.pii_raw, ("created_at",)),
                         (tables.canonical_refs, ("created_at",))):
        if table is not None:
            columns[table.name] = names
    return columns


def with_clock(spec: AgentSpec, tables: Tables,
               definitions: tuple[TableDef, ...]) -> tuple[TableDef, ...]:
    """``definitions`` with the seeded clock's trigger on each table of
    :func:`clock_columns` (a spec on ``clock: ticks``; the others unchanged)."""
    if spec.determinism.clock != "ticks":
        return definitions
    columns = clock_columns(tables)
    out = []
    for definition in definitions:
        names = columns.get(definition.table.name)
        if names is None or definition.table.schema != tables.schema:
            out.append(definition)
            continue
        updated = [n for n in names if not n.startswith("?")]
        trigger = Trigger("primitives_seeded_clock", "BEFORE",
                          "INSERT OR UPDATE OF " + ", ".join(f'"{n}"' for n in updated), "ROW", clock_fn(tables),
                          names)
        out.append(replace(definition, triggers=(*definition.triggers, trigger)))
    return tuple(out)


def seeded_functions(spec: AgentSpec, tables: Tables) -> tuple[tuple[str, sql.Composed], ...]:
    """The functions a seeded spec's triggers call, created with the memories table (none
    for a random spec)."""
    if not seeded(spec):
        return ()
    functions: list[tuple[str, sql.Composed]] = []
    for suffix, make, fn in (("seeded_uuid", uuid_function_sql, uuid_fn),
                             ("seeded_epoch", epoch_function_sql, epoch_fn)):
        label = f"seeded {suffix[7:]} function {tables.schema}.{tables.object_name(suffix)}"
        # pure functions of their argument, read by every role that writes the journal
        roles = sql.SQL(", ").join(map(sql.Identifier, (APP_ROLE, MAINTAINER_ROLE,
                                                        PRIVACY_ADMIN_ROLE)))
        functions += [
            (label, make(tables)),
            (f"{label}: callable by the roles that write the journal",
             sql.SQL("GRANT EXECUTE ON FUNCTION {}(text) TO {}").format(fn(tables), roles))]
    if spec.determinism.clock == "ticks":
        functions.append((f"seeded clock function {tables.schema}."
                          f"{tables.object_name('seeded_clock')}", clock_function_sql(tables)))
    return tuple(functions)
