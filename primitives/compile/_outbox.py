"""The outbox of an event-driven agent (``discipline.visibility.cross_context: event_driven``).

Every row written into a gate's ``from`` tier and typology, by whatever path (a write, the
one-statement write, a promotion, a maintain pass), is carried across the gate by a row
trigger on the memories table, in the same statement as the write: one
``<prefix>_outbox`` entry per event the spec declares, holding the **sanitized** payload
(:mod:`primitives.compile._gates`), a ``sanitized`` journal event, and a ``pg_notify`` on
the channel ``<prefix>.<event>`` whose payload is the entry's id and event, never content
or a tenant. A row the gate keeps behind (``keep_if_specific``, ``aggregate_only`` below
``min_sources``) gets the journal event and no entry. The trigger's ``WHEN`` names the
gates' ``from`` pairs, so any other write pays nothing.

A consumer claims entries through the tenant's own transaction
(:func:`claim_statement`): undelivered entries, oldest first, ``FOR UPDATE SKIP LOCKED``,
marked delivered in the same statement; a delivered entry is never handed out again.
"""

from __future__ import annotations

from typing import Final

from psycopg import sql

from primitives.compile._ddl import (
    JSONB,
    NOW,
    RANDOM_UUID,
    TEXT,
    TIMESTAMPTZ,
    UUID,
    Column,
    Index,
    TableDef,
    primary_key,
)
from primitives.compile._definer import erase_functions
from primitives.compile._gates import Gate, crossing_payload, gate_sql, gates, stage_columns
from primitives.compile._names import Table, Tables
from primitives.compile._tables import tenant_column
from primitives.compile._views import SANITIZED_EVENT_KIND
from primitives.spec import AgentSpec

__all__ = [
    "DELIVERED_EVENT_KIND",
    "OUTBOX_COLUMNS",
    "PUBLISH_TRIGGER",
    "RETRIED_EVENT_KIND",
    "claim_statement",
    "drop_publish_trigger_sql",
    "outbox_channel",
    "outbox_table",
    "publishing_gates",
    "retry_statement",
]

PUBLISH_TRIGGER: Final = "primitives_publish"
"""The row trigger on ``<prefix>_memories`` that publishes (absent without an outbox)."""

DELIVERED_EVENT_KIND: Final = "outbox_delivered"
"""Journal ``kind`` of a consumer's claim: which entries it took (ids only)."""

RETRIED_EVENT_KIND: Final = "outbox_retried"
"""Journal ``kind`` of a retry: which delivered entries were handed back, and to whom they
had gone (ids and consumer names only)."""

OUTBOX_COLUMNS: Final = ("id", "event", "gate", "to_ref", "memory_id", "payload",
                         "created_at", "delivered_at", "delivered_to")
"""Columns of ``<prefix>_outbox`` after the tenant column."""


def publishing_gates(spec: AgentSpec) -> tuple[Gate, ...]:
    """The gates whose crossings an event-driven spec publishes (every gate, when the spec
    is ``cross_context: event_driven`` and declares events; otherwise none)."""
    visibility = spec.discipline.visibility
    if visibility.cross_context != "event_driven" or not visibility.events:
        return ()
    return gates(spec)


def outbox_channel(tables: Tables, event: str) -> str:
    """The NOTIFY channel of ``event``: ``<prefix>.<event>`` (LISTEN it quoted)."""
    return f"{tables.prefix}.{event}"


def _required(table: Table | None) -> Table:
    if table is None:  # pragma: no cover - compile_plan only calls this for event-driven specs
        raise AssertionError("the agent has no outbox")
    return table


def _publish_function(spec: AgentSpec, tables: Tables) -> sql.Composed:
    """``<prefix>_publish()``: the row trigger that carries a new row across each gate whose
    ``from`` it belongs to (see the module docstring)."""
    t = tables.tenant
    new = sql.SQL("NEW")
    events = sql.Literal(list(spec.discipline.visibility.events))
    blocks: list[sql.Composable] = []
    for gate in publishing_gates(spec):
        g = gate_sql(gate, new)
        x = sql.SQL
        outcome = g.outcome(x("s.stripped_content"), x("s.sources"))
        content = g.crossing(x("s.stripped_content"), x("s.provenance_tier"))
        payload = crossing_payload(gate, outcome=x("c.outcome"), stripped=x("c.stripped"),
                                   tier=x("c.provenance_tier"), sources=x("c.sources"),
                                   via=sql.Literal("outbox"))
        blocks.append(sql.SQL("""\
    IF NEW.tier = {tier} AND NEW.typology = {typology} THEN
        WITH crossing AS (
            SELECT s.*, {outcome} AS outcome,
                   jsonb_build_object('content', {content}, 'envelope', s.envelope,
                                      'value', s.value, 'tier', NEW.tier,
                                      'typology', NEW.typology, 'key', NEW.key,
                                      'event_time', NEW.event_time,
                                      'provenance_tier', s.provenance_tier) AS body
            FROM (SELECT {columns}) AS s),
        boxed AS (
            INSERT INTO {outbox} ({t}, event, gate, to_ref, memory_id, payload)
            SELECT NEW.{t}, e.event, {gate}, {to}, NEW.id, c.body
            FROM crossing AS c CROSS JOIN unnest({events}::text[]) AS e(event)
            WHERE c.outcome = 'crossed'
            RETURNING id, event),
        journal AS (
            INSERT INTO {journal} ({t}, event_id, kind, memory_id, actor, payload)
            SELECT NEW.{t}, gen_random_uuid(), {kind}, NEW.id, NEW.actor,
                   {payload} || jsonb_build_object('outbox', (SELECT coalesce(
                       jsonb_agg(b.id::text ORDER BY b.event), '[]'::jsonb) FROM boxed AS b))
            FROM crossing AS c
            RETURNING 1)
        SELECT count(pg_notify({prefix} || '.' || b.event,
                               json_build_object('id', b.id, 'event', b.event)::text))
               + (SELECT count(*) FROM journal)
        INTO published FROM boxed AS b;
    END IF;
""").format(tier=sql.Literal(gate.from_tier), typology=sql.Literal(gate.from_typology),
            outcome=outcome, content=content, columns=stage_columns(g), payload=payload,
            outbox=_required(tables.outbox).ident, t=t, gate=sql.Literal(gate.name),
            to=sql.Literal(gate.to), events=events, journal=tables.events.ident,
            kind=sql.Literal(SANITIZED_EVENT_KIND), prefix=sql.Literal(tables.prefix)))
    return sql.SQL("""\
CREATE OR REPLACE FUNCTION {function}() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
DECLARE
    published bigint;
BEGIN
{blocks}    RETURN NULL;
END
$fn$""").format(function=publish_function(tables), blocks=sql.SQL("").join(blocks))


def publish_function(tables: Tables) -> sql.Identifier:
    return sql.Identifier(tables.schema, tables.object_name("publish"))


def _publish_trigger(spec: AgentSpec, tables: Tables) -> sql.Composed:
    pairs = sql.SQL(", ").join(
        sql.SQL("({}, {})").format(sql.Literal(g.from_tier), sql.Literal(g.from_typology))
        for g in publishing_gates(spec))
    return sql.SQL(
        "CREATE OR REPLACE TRIGGER {trigger} AFTER INSERT ON {memories} "
        "FOR EACH ROW WHEN ((NEW.tier, NEW.typology) IN ({pairs})) "
        "EXECUTE FUNCTION {function}()"
    ).format(trigger=sql.Identifier(PUBLISH_TRIGGER), memories=tables.memories.ident,
             pairs=pairs, function=publish_function(tables))


def drop_publish_trigger_sql(tables: Tables) -> sql.Composed:
    """``DROP TRIGGER IF EXISTS``: a spec that no longer publishes stops publishing."""
    return sql.SQL("DROP TRIGGER IF EXISTS {} ON {}").format(
        sql.Identifier(PUBLISH_TRIGGER), tables.memories.ident)


def outbox_table(spec: AgentSpec, tables: Tables, *, embedding: bool = False) -> TableDef:
    """``<prefix>_outbox``: sanitized crossings waiting for (or handed to) a consumer, with
    the publish trigger on the memories table that writes them."""
    table = _required(tables.outbox)
    t, name = tables.tenant_column, tables.object_name
    columns = (
        tenant_column(tables),
        Column("id", UUID, not_null=True, default=RANDOM_UUID),
        Column("event", TEXT, not_null=True),
        Column("gate", TEXT, not_null=True),
        Column("to_ref", TEXT, not_null=True),
        Column("memory_id", UUID, not_null=True),
        Column("payload", JSONB, not_null=True),
        Column("created_at", TIMESTAMPTZ, not_null=True, default=NOW),
        Column("delivered_at", TIMESTAMPTZ),
        Column("delivered_to", TEXT),
    )
    return TableDef(
        table=table,
        columns=columns,
        constraints=(primary_key(name("outbox_pkey"), (t, "id")),),
        indexes=(Index(name("outbox_pending_idx"), "btree",
                       (sql.Identifier(t), sql.Identifier("created_at"), sql.Identifier("id")),
                       t, where=sql.SQL("delivered_at IS NULL")),),
        app_update_columns=("delivered_at", "delivered_to"),
        comment=(
            f"Outbox of agent '{tables.agent}': memory that crossed a sanitization gate, "
            f"sanitized, one entry per event ({', '.join(spec.discipline.visibility.events)}); "
            f"written by {tables.schema}.{name('publish')}() in the transaction of the write, "
            "announced by NOTIFY on <prefix>.<event>, claimed by consumers of the tenant."
        ),
        functions=(
            (f"publish function {tables.schema}.{name('publish')}",
             _publish_function(spec, tables)),
            (f"publish function {name('publish')}: not callable by PUBLIC",
             sql.SQL("REVOKE ALL ON FUNCTION {}() FROM PUBLIC").format(
                 publish_function(tables))),
            (f"{tables.memories.qualified}: trigger primitives_publish",
             _publish_trigger(spec, tables)),
            *((f"{what} (again: erasure also scrubs the row's published payloads)", statement)
              for what, statement in erase_functions(
                  tables, embedding=embedding, raw=tables.pii_raw is not None,
                  outbox=True)[1:]),
        ),
    )


def claim_statement(tables: Tables) -> sql.Composed:
    """Claim up to ``%(limit)s`` undelivered entries of ``%(tenant)s`` (of ``%(event)s``, or
    any when NULL), oldest first, skipping entries another consumer holds; mark them
    delivered to ``%(consumer)s`` and journal the claim (``%(actor)s``). Returns id, event,
    gate, to_ref, memory_id, payload, created_at of each."""
    t = tables.tenant
    outbox = _required(tables.outbox).ident
    return sql.SQL("""\
WITH claimed AS (
  SELECT o.id FROM {outbox} AS o
  WHERE o.{t} = %(tenant)s AND o.delivered_at IS NULL
    AND (%(event)s::text IS NULL OR o.event = %(event)s::text)
  ORDER BY o.created_at, o.id
  LIMIT %(limit)s
  FOR UPDATE SKIP LOCKED),
delivered AS (
  UPDATE {outbox} AS o SET delivered_at = now(), delivered_to = %(consumer)s
  FROM claimed AS c WHERE o.{t} = %(tenant)s AND o.id = c.id
  RETURNING o.id, o.event, o.gate, o.to_ref, o.memory_id, o.payload, o.created_at),
journal AS (
  INSERT INTO {events} ({t}, event_id, kind, memory_id, actor, payload)
  SELECT %(tenant)s, gen_random_uuid(), {kind}, NULL, %(actor)s,
         jsonb_build_object('consumer', %(consumer)s::text,
                            'entries', jsonb_agg(d.id::text ORDER BY d.created_at, d.id))
  FROM delivered AS d HAVING count(*) > 0
  RETURNING 1)
SELECT d.id, d.event, d.gate, d.to_ref, d.memory_id, d.payload, d.created_at
FROM delivered AS d WHERE (SELECT count(*) FROM journal) >= 0
ORDER BY d.created_at, d.id""").format(outbox=outbox, t=t, events=tables.events.ident,
                                       kind=sql.Literal(DELIVERED_EVENT_KIND))


def retry_statement(tables: Tables) -> sql.Composed:
    """Hand the delivered entries ``%(ids)s`` (uuid[]) of ``%(tenant)s`` back to the queue:
    ``delivered_at`` and ``delivered_to`` cleared, so the next claim hands them out again;
    one journal event (``%(actor)s``) names them and the consumers they had gone to. Entries
    still waiting, or of another tenant, are left alone. Returns id, the previous consumer."""
    t = tables.tenant
    outbox = _required(tables.outbox).ident
    return sql.SQL("""\
WITH picked AS (
  SELECT o.id, o.delivered_to FROM {outbox} AS o
  WHERE o.{t} = %(tenant)s AND o.id = ANY(%(ids)s::uuid[]) AND o.delivered_at IS NOT NULL
  FOR UPDATE),
retried AS (
  UPDATE {outbox} AS o SET delivered_at = NULL, delivered_to = NULL
  FROM picked AS p WHERE o.{t} = %(tenant)s AND o.id = p.id
  RETURNING o.id, p.delivered_to, o.created_at),
journal AS (
  INSERT INTO {events} ({t}, event_id, kind, memory_id, actor, payload)
  SELECT %(tenant)s, gen_random_uuid(), {kind}, NULL, %(actor)s,
         jsonb_build_object('entries', jsonb_agg(r.id::text ORDER BY r.created_at, r.id),
                            'consumers', jsonb_agg(r.delivered_to ORDER BY r.created_at, r.id))
  FROM retried AS r HAVING count(*) > 0
  RETURNING 1)
SELECT r.id, r.delivered_to FROM retried AS r WHERE (SELECT count(*) FROM journal) >= 0
ORDER BY r.created_at, r.id""").format(outbox=outbox, t=t, events=tables.events.ident,
                                       kind=sql.Literal(RETRIED_EVENT_KIND))
