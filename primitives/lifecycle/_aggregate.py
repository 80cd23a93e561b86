"""Aggregation across tenants: the maintain pass that publishes what enough tenants hold.

An ``aggregate_only`` gate with ``min_tenants`` (on an event-driven agent) holds every row
when it is written: the publish trigger runs as the writer, under the tenant's row-level
security, and cannot count other tenants, so it journals ``sanitized`` with the outcome
``below_min_tenants`` and writes no outbox entry. The pass ``aggregate_<gate>`` runs as the
maintainer (who sees every tenant): for each active row of the batch's tenants in the gate's
``from`` that has no outbox entry of the gate yet, it counts the distinct tenants whose active
rows there hold the same normalised content (:func:`normalised_sql`: lower case, runs of
white space folded, trimmed); at ``min_tenants`` or more the row crosses the gate (the same
column expressions as the trigger, :func:`primitives.compile._gates.gate_sql`), one outbox
entry per declared event in the row's own tenant, a ``pg_notify`` per entry, and a
``sanitized`` event in that tenant's journal (``via: aggregate_tenants`` and the count of
``tenants``), which ``audit_sanitization`` shows. A row once published has its entry, so a
second run changes nothing; a row the gate keeps behind for its specifics stays behind.
"""

from __future__ import annotations

from psycopg import sql

from primitives.compile import Tables
from primitives.compile._expr import active_predicate
from primitives.compile._gates import Gate, crossing_payload, gate_sql, stage_columns
from primitives.compile._outbox import publishing_gates
from primitives.compile._views import SANITIZED_EVENT_KIND
from primitives.lifecycle._passes import MaintenancePass
from primitives.spec import AgentSpec

__all__ = ["aggregate_passes", "aggregate_statement", "normalised_sql"]


def normalised_sql(content: sql.Composable) -> sql.Composed:
    """The content as tenants are compared on it: lower case, white space folded, trimmed."""
    return sql.SQL("lower(btrim(regexp_replace({}, '\\s+', ' ', 'g')))").format(content)


def aggregate_statement(spec: AgentSpec, tables: Tables, gate: Gate) -> sql.Composed:
    """Publish the held rows of ``%(tenants)s`` in ``gate``'s ``from`` whose normalised
    content at least ``gate.min_tenants`` distinct tenants hold (see the module docstring).
    Returns one row: how many rows crossed."""
    if gate.min_tenants is None or tables.outbox is None:  # pragma: no cover - guarded below
        raise AssertionError("aggregate_statement needs a publishing min_tenants gate")
    t = tables.tenant
    h = sql.Identifier("h")
    g = gate_sql(gate, h)
    x = sql.SQL
    outcome = g.outcome(x("s.stripped_content"), x("s.sources"), x("s.tenants"))
    content = g.crossing(x("s.stripped_content"), x("s.provenance_tier"))
    payload = crossing_payload(gate, outcome=x("c.outcome"), stripped=x("c.stripped"),
                               tier=x("c.provenance_tier"), sources=x("c.sources"),
                               via=sql.Literal("aggregate_tenants"))
    events = sql.Literal(list(spec.discipline.visibility.events))
    return sql.SQL("""\
WITH waiting AS (
  SELECT m.*, {norm_m} AS normalised
  FROM {mem} AS m
  WHERE m.{t} = ANY(%(tenants)s::text[]) AND m.tier = {tier} AND m.typology = {typology}
    AND {active_m}
    AND NOT EXISTS (SELECT 1 FROM {outbox} AS o
                    WHERE o.{t} = m.{t} AND o.memory_id = m.id AND o.gate = {gate})),
held AS (
  SELECT w.normalised, count(DISTINCT a.{t}) AS tenants
  FROM (SELECT DISTINCT normalised FROM waiting) AS w
  JOIN {mem} AS a ON a.tier = {tier} AND a.typology = {typology} AND {active_a}
   AND {norm_a} = w.normalised
  GROUP BY w.normalised
  HAVING count(DISTINCT a.{t}) >= {min_tenants}),
h AS (
  SELECT w.*, held.tenants FROM waiting AS w JOIN held USING (normalised)),
stage AS (
  SELECT h.{t} AS tenant, h.id, h.tier, h.typology, h.key, h.event_time, h.actor,
         h.tenants, {columns}
  FROM h),
crossing AS (
  SELECT s.*, {outcome} AS outcome,
         jsonb_build_object('content', {content}, 'envelope', s.envelope, 'value', s.value,
                            'tier', s.tier, 'typology', s.typology, 'key', s.key,
                            'event_time', s.event_time,
                            'provenance_tier', s.provenance_tier) AS body
  FROM stage AS s),
boxed AS (
  INSERT INTO {outbox} ({t}, event, gate, to_ref, memory_id, payload)
  SELECT c.tenant, e.event, {gate}, {to}, c.id, c.body
  FROM crossing AS c CROSS JOIN unnest({events}::text[]) AS e(event)
  WHERE c.outcome = 'crossed'
  ORDER BY c.tenant, c.id, e.event
  RETURNING {t} AS tenant, id, event, memory_id),
journal AS (
  INSERT INTO {journal} ({t}, event_id, kind, memory_id, actor, payload)
  SELECT c.tenant, gen_random_uuid(), {kind}, c.id, %(actor)s,
         {payload} || jsonb_build_object(
           'tenants', c.tenants,
           'outbox', (SELECT coalesce(jsonb_agg(b.id::text ORDER BY b.event), '[]'::jsonb)
                      FROM boxed AS b WHERE b.tenant = c.tenant AND b.memory_id = c.id))
  FROM crossing AS c WHERE c.outcome = 'crossed'
  ORDER BY c.tenant, c.id
  RETURNING 1),
notified AS (
  SELECT count(pg_notify({prefix} || '.' || b.event,
                         json_build_object('id', b.id, 'event', b.event)::text)) AS n
  FROM boxed AS b)
SELECT (SELECT count(*) FROM journal) + 0 * (SELECT n FROM notified)""").format(
        norm_m=normalised_sql(sql.SQL("m.content")),
        norm_a=normalised_sql(sql.SQL("a.content")),
        mem=tables.memories.ident, t=t, tier=sql.Literal(gate.from_tier),
        typology=sql.Literal(gate.from_typology), active_m=active_predicate("m"),
        active_a=active_predicate("a"), outbox=tables.outbox.ident,
        gate=sql.Literal(gate.name), to=sql.Literal(gate.to),
        min_tenants=sql.Literal(gate.min_tenants), columns=stage_columns(g),
        outcome=outcome, content=content, payload=payload, events=events,
        journal=tables.events.ident, kind=sql.Literal(SANITIZED_EVENT_KIND),
        prefix=sql.Literal(tables.prefix))


def aggregate_passes(spec: AgentSpec, tables: Tables) -> list[MaintenancePass]:
    """One ``aggregate_<gate>`` pass per publishing gate with ``min_tenants``."""
    if tables.outbox is None:
        return []
    return [MaintenancePass(f"aggregate_{gate.name}", aggregate_statement(spec, tables, gate))
            for gate in publishing_gates(spec) if gate.min_tenants is not None]
