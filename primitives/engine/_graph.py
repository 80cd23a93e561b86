"""Graph writes and reads for specs with ``graph:`` (seed 002): entities, mentions, edges.

Core operations (run by the sync and async engines like those of ``_core``). Every change
is a journal event in the same transaction; nothing is deleted: an edge ends (its
``valid_until`` is set), entities and mentions stay. Edges and mentions go when their
memory rows go (a transient tier's scope end), with the rows' own removal events.

Journal payloads name ids, types and relation labels; entity names (which may be personal
data) are recorded as sha256 hashes, like memory content.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any
from uuid import UUID

from psycopg import sql
from psycopg.types.json import Jsonb

from primitives.compile import Tables
from primitives.compile._optional_tables import ENTITY_NAME_CHARS
from primitives.engine._core import (
    Context,
    Op,
    Step,
    _event,
    _require,
    content_hash,
    get_step,
    reason_payload,
)
from primitives.engine._queries import ACTIVE, _returning_m
from primitives.engine._records import Edge, Entity, Memory
from primitives.errors import GovernanceError, PolicyViolation
from primitives.retrieval._statement import entity_named
from primitives.spec import Graph

__all__ = [
    "EDGE_COLUMNS",
    "ENTITY_COLUMNS",
    "PREDICATE_CHARS",
    "end_edge",
    "entity",
    "entity_memories",
    "find_entities",
    "mention",
    "relate",
]

PREDICATE_CHARS = 200
"""Upper bound on an edge's predicate (a relation label such as ``works_at``)."""

ENTITY_COLUMNS = ("id", "canonical_name", "type", "aliases", "summary", "mention_count",
                  "first_seen", "last_updated")
EDGE_COLUMNS = ("id", "source_id", "target_id", "relation_type", "predicate", "weight",
                "confidence", "valid_from", "valid_until", "evidence", "created_at")


def _cols(columns: Sequence[str], alias: str | None = None) -> sql.Composable:
    return sql.SQL(", ").join(
        sql.Identifier(alias, c) if alias else sql.Identifier(c) for c in columns)


def _graph(ctx: Context) -> tuple[Graph, Tables]:
    graph = ctx.spec.graph
    if graph is None or ctx.tables.edges is None:
        raise PolicyViolation(f"agent '{ctx.spec.agent}' has no graph: section, so it records "
                              "no entities or edges; add graph: {edges: [...]} to its spec")
    return graph, ctx.tables


def _name(value: str, what: str) -> str:
    value = value.strip()
    if not value:
        raise PolicyViolation(f"{what} must not be blank")
    if len(value) > ENTITY_NAME_CHARS:
        raise PolicyViolation(f"{what} is {len(value)} characters; at most {ENTITY_NAME_CHARS}")
    return value


def _entity_type(graph: Graph, kind: str) -> str:
    if graph.entity_types and kind not in graph.entity_types:
        raise PolicyViolation(f"unknown entity type '{kind}'; graph.entity_types: "
                              f"{', '.join(graph.entity_types)}")
    if not kind.strip():
        raise PolicyViolation("an entity needs a type")
    return kind


# statements -------------------------------------------------------------------------------------
@lru_cache(maxsize=64)
def _upsert_entity(tables: Tables) -> sql.Composed:
    """Insert an entity, or merge new aliases and a new summary into the one of that name and
    type (names compare case-insensitively). Returns the row and whether it changed
    (``xmax = 0``: inserted); an unchanged entity returns no row."""
    assert tables.entities is not None
    return sql.SQL(
        "INSERT INTO {e} AS e ({t}, canonical_name, type, aliases, summary) "
        "VALUES (%(tenant)s, %(name)s, %(type)s, %(aliases)s::text[], %(summary)s) "
        "ON CONFLICT ({t}, lower(canonical_name), type) DO UPDATE SET "
        "aliases = ARRAY(SELECT DISTINCT a FROM unnest(e.aliases || EXCLUDED.aliases) AS a "
        "ORDER BY a), summary = coalesce(EXCLUDED.summary, e.summary), "
        "last_updated = EXCLUDED.last_updated "
        "WHERE NOT (e.aliases @> EXCLUDED.aliases) OR (EXCLUDED.summary IS NOT NULL AND EXCLUDED.summary IS DISTINCT FROM e.summary) "
        "RETURNING {cols}, (xmax = 0) AS inserted"
    ).format(e=tables.entities.ident, t=tables.tenant, cols=_cols(ENTITY_COLUMNS))


@lru_cache(maxsize=64)
def _insert_entity_citus(tables: Tables) -> sql.Composed:
    """:func:`_upsert_entity`'s first statement on a Citus coordinator, which refuses a
    subquery in an ``INSERT`` (the aliases' merge): insert the entity if it is new; one
    of that name and type already there returns no row (:func:`_merge_entity_citus`)."""
    assert tables.entities is not None
    return sql.SQL(
        "INSERT INTO {e} AS e ({t}, canonical_name, type, aliases, summary) "
        "VALUES (%(tenant)s, %(name)s, %(type)s, %(aliases)s::text[], %(summary)s) "
        "ON CONFLICT ({t}, lower(canonical_name), type) DO NOTHING "
        "RETURNING {cols}, true AS inserted"
    ).format(e=tables.entities.ident, t=tables.tenant, cols=_cols(ENTITY_COLUMNS))


@lru_cache(maxsize=64)
def _merge_entity_citus(tables: Tables) -> sql.Composed:
    """:func:`_upsert_entity`'s merge as an ``UPDATE`` of the entity of that name and type
    (its row locked), when the insert found it: the same aliases, summary and condition;
    an unchanged entity returns no row."""
    assert tables.entities is not None
    return sql.SQL(
        "UPDATE {e} AS e SET aliases = ARRAY(SELECT DISTINCT a FROM "
        "unnest(e.aliases || %(aliases)s::text[]) AS a ORDER BY a), "
        "summary = coalesce(%(summary)s::text, e.summary), last_updated = now() "
        "WHERE e.{t} = %(tenant)s AND lower(e.canonical_name) = lower(%(name)s::text) "
        "AND e.type = %(type)s::text AND (NOT (e.aliases @> %(aliases)s::text[]) "
        "OR (%(summary)s::text IS NOT NULL AND %(summary)s::text IS DISTINCT FROM e.summary)) "
        "RETURNING {cols}, false AS inserted"
    ).format(e=tables.entities.ident, t=tables.tenant, cols=_cols(ENTITY_COLUMNS, "e"))


@lru_cache(maxsize=64)
def _entity_by_name(tables: Tables) -> sql.Composed:
    """Entities whose canonical name or an alias equals ``name`` (case-insensitively), of
    ``type`` when it is not NULL; canonical-name matches first."""
    assert tables.entities is not None
    return sql.SQL(
        "SELECT {cols} FROM {e} AS e WHERE e.{t} = %(tenant)s "
        "AND (%(type)s::text IS NULL OR e.type = %(type)s::text) "
        "AND (lower(e.canonical_name) = lower(%(name)s) OR EXISTS (SELECT 1 FROM "
        "unnest(e.aliases) AS a WHERE lower(a) = lower(%(name)s))) "
        "ORDER BY lower(e.canonical_name) = lower(%(name)s) DESC, e.mention_count DESC, e.id"
    ).format(cols=_cols(ENTITY_COLUMNS, "e"), e=tables.entities.ident, t=tables.tenant)


@lru_cache(maxsize=64)
def _entity_by_id(tables: Tables) -> sql.Composed:
    assert tables.entities is not None
    return sql.SQL("SELECT {} FROM {} AS e WHERE e.{} = %(tenant)s AND e.id = %(id)s").format(
        _cols(ENTITY_COLUMNS, "e"), tables.entities.ident, tables.tenant)


@lru_cache(maxsize=64)
def _insert_mention(tables: Tables) -> sql.Composed:
    """Link a memory to an entity and count the mention; an existing link returns no row."""
    assert tables.entities is not None and tables.node_entities is not None
    return sql.SQL(
        "WITH n AS (INSERT INTO {ne} ({t}, memory_id, entity_id) "
        "VALUES (%(tenant)s, %(memory_id)s, %(entity_id)s) ON CONFLICT DO NOTHING "
        "RETURNING entity_id) "
        "UPDATE {e} AS e SET mention_count = e.mention_count + 1, last_updated = now() "
        "FROM n WHERE e.{t} = %(tenant)s AND e.id = n.entity_id RETURNING {cols}"
    ).format(ne=tables.node_entities.ident, e=tables.entities.ident, t=tables.tenant,
             cols=_cols(ENTITY_COLUMNS, "e"))


@lru_cache(maxsize=64)
def _insert_edge(tables: Tables) -> sql.Composed:
    assert tables.edges is not None
    return sql.SQL(
        "INSERT INTO {} ({}, source_id, target_id, relation_type, predicate, weight, "
        "confidence, valid_from, evidence) VALUES (%(tenant)s, %(source_id)s, %(target_id)s, "
        "%(relation_type)s, %(predicate)s, %(weight)s, %(confidence)s, "
        "coalesce(%(valid_from)s::timestamptz, now()), %(evidence)s) RETURNING {}"
    ).format(tables.edges.ident, tables.tenant, _cols(EDGE_COLUMNS))


@lru_cache(maxsize=64)
def _end_edge(tables: Tables) -> sql.Composed:
    assert tables.edges is not None
    return sql.SQL(
        "UPDATE {} SET valid_until = coalesce(%(at)s::timestamptz, now()) "
        "WHERE {} = %(tenant)s AND id = %(id)s AND valid_until IS NULL RETURNING {}"
    ).format(tables.edges.ident, tables.tenant, _cols(EDGE_COLUMNS))


@lru_cache(maxsize=64)
def _end_edge_citus(tables: Tables) -> sql.Composed:
    """:func:`_end_edge` on a Citus coordinator, which refuses ``now()`` inside ``coalesce``
    in a distributed update: the time comes from a subquery over the edge (kept one by
    ``OFFSET 0``), as the cluster form of ``resolve_conflict`` does."""
    assert tables.edges is not None
    return sql.SQL(
        "UPDATE {edges} AS x SET valid_until = o.at FROM (SELECT coalesce("
        "%(at)s::timestamptz, now()) AS at FROM {edges} WHERE {t} = %(tenant)s "
        "AND id = %(id)s OFFSET 0) AS o "
        "WHERE x.{t} = %(tenant)s AND x.id = %(id)s AND x.valid_until IS NULL RETURNING {cols}"
    ).format(edges=tables.edges.ident, t=tables.tenant, cols=_cols(EDGE_COLUMNS, "x"))


@lru_cache(maxsize=64)
def _edge_by_id(tables: Tables) -> sql.Composed:
    assert tables.edges is not None
    return sql.SQL("SELECT {} FROM {} WHERE {} = %(tenant)s AND id = %(id)s").format(
        _cols(EDGE_COLUMNS), tables.edges.ident, tables.tenant)


@lru_cache(maxsize=64)
def _entity_memories(tables: Tables) -> sql.Composed:
    """Active memories mentioning an entity, latest event first."""
    assert tables.node_entities is not None
    return sql.SQL(
        "SELECT {cols} FROM {ne} AS n JOIN {mem} AS m ON m.{t} = n.{t} AND m.id = n.memory_id "
        "WHERE n.{t} = %(tenant)s AND n.entity_id = %(entity_id)s AND {active} "
        "ORDER BY m.event_time DESC, m.id LIMIT %(limit)s"
    ).format(cols=_returning_m(), ne=tables.node_entities.ident, mem=tables.memories.ident,
             t=tables.tenant, active=ACTIVE)


@lru_cache(maxsize=64)
def context_entities(tables: Tables) -> sql.Composed:
    """Entities for a context pack: those ``query`` names (canonical name or alias, a phrase
    of whole words) first, then those the memories ``ids`` mention; most mentioned first.
    Params: ``tenant``, ``query``, ``ids`` (uuid[]), ``limit``."""
    assert tables.entities is not None and tables.node_entities is not None
    return sql.SQL(
        "SELECT {cols} FROM (SELECT e.*, {named} AS named "
        "FROM {e} AS e, (SELECT to_tsvector('simple', %(query)s) AS v) AS q "
        "WHERE e.{t} = %(tenant)s) AS e WHERE e.named OR e.id IN (SELECT n.entity_id "
        "FROM {ne} AS n WHERE n.{t} = %(tenant)s AND n.memory_id = ANY(%(ids)s::uuid[])) "
        "ORDER BY e.named DESC, e.mention_count DESC, e.id LIMIT %(limit)s"
    ).format(cols=_cols(ENTITY_COLUMNS, "e"), e=tables.entities.ident,
             ne=tables.node_entities.ident, t=tables.tenant, named=entity_named("q.v"))


@lru_cache(maxsize=64)
def context_evidence(tables: Tables) -> sql.Composed:
    """Active source memories of ``ids`` by ``derived_from`` edges valid now (an edge from
    a derived memory to its source), in the order of ``ids``, latest source first.
    Params: ``tenant``, ``ids`` (uuid[]), ``limit``."""
    assert tables.edges is not None
    return sql.SQL(
        "SELECT {cols} FROM {edges} AS e JOIN {mem} AS m ON m.{t} = e.{t} "
        "AND m.id = e.target_id WHERE e.{t} = %(tenant)s "
        "AND e.source_id = ANY(%(ids)s::uuid[]) AND e.relation_type = 'derived_from' "
        "AND (e.valid_until IS NULL OR e.valid_until > now()) AND {active} "
        "ORDER BY array_position(%(ids)s::uuid[], e.source_id), m.event_time DESC, m.id "
        "LIMIT %(limit)s"
    ).format(cols=_returning_m(), edges=tables.edges.ident, mem=tables.memories.ident,
             t=tables.tenant, active=ACTIVE)


# operations -------------------------------------------------------------------------------------
def entity(ctx: Context, name: str, kind: str, *, aliases: Sequence[str] = (),
           summary: str | None = None) -> Op[Entity]:
    """The entity named ``name`` of type ``kind``, created if new; new aliases and a new
    summary are merged in. A creation or a change is an ``entity_recorded`` event."""
    graph, tables = _graph(ctx)
    name = _name(name, "an entity's name")
    kind = _entity_type(graph, kind)
    clean = sorted({_name(a, "an alias") for a in aliases} - {name})
    limit = ctx.spec.persistence.store.limits.content_chars
    if summary is not None and len(summary) > limit:
        raise PolicyViolation(f"an entity summary is {len(summary)} characters; at most {limit} "
                              "(persistence.store.limits.content_chars)")
    params = {"tenant": ctx.tenant, "name": name, "type": kind, "aliases": clean,
              "summary": summary}
    if ctx.citus:  # two statements: Citus refuses the merge's subquery in an INSERT
        row = yield Step(_insert_entity_citus(tables), params, "one")
        if row is None:
            row = yield Step(_merge_entity_citus(tables), params, "one")
    else:
        row = yield Step(_upsert_entity(tables), params, "one")
    if row is None:  # known and unchanged
        rows = yield Step(_entity_by_name(tables), {"tenant": ctx.tenant, "name": name,
                                                    "type": kind}, "all")
        return Entity.from_row(rows[0])
    found = Entity.from_row(row[:-1])
    yield _event(ctx, "entity_recorded", None, {
        "entity_id": str(found.id), "type": kind, "created": bool(row[-1]),
        "name_sha256": content_hash(found.canonical_name), "aliases": len(found.aliases),
        "summary_sha256": content_hash(summary) if summary is not None else None})
    return found


def find_entities(ctx: Context, name: str, kind: str | None = None) -> Op[list[Entity]]:
    """Entities whose canonical name or an alias is ``name`` (case-insensitively)."""
    _, tables = _graph(ctx)
    rows = yield Step(_entity_by_name(tables), {"tenant": ctx.tenant, "name": name.strip(),
                                                "type": kind}, "all")
    return [Entity.from_row(row) for row in rows]


EntityRef = UUID | str | tuple[str, str]
"""An entity id, a known entity's name or alias, or ``(name, type)`` (created if new)."""


def _resolve(ctx: Context, ref: EntityRef) -> Op[Entity]:
    _, tables = _graph(ctx)
    if isinstance(ref, UUID):
        row = yield Step(_entity_by_id(tables), {"tenant": ctx.tenant, "id": ref}, "one")
        if row is None:
            raise GovernanceError(f"entity {ref} does not exist for this tenant",
                                  entity_id=str(ref))
        return Entity.from_row(row)
    if isinstance(ref, tuple):
        return (yield from entity(ctx, ref[0], ref[1]))
    found = yield from find_entities(ctx, ref)
    if not found:
        raise GovernanceError(f"no entity is named '{ref}' for this tenant; record it first "
                              "(entity(name, type)) or pass (name, type)", entity=ref)
    if len(found) > 1 and found[1].canonical_name.lower() == found[0].canonical_name.lower():
        raise GovernanceError(f"'{ref}' names entities of several types "
                              f"({', '.join(e.type for e in found)}); pass (name, type)",
                              entity=ref)
    return found[0]


def mention(ctx: Context, memory_id: UUID, entities: Sequence[EntityRef]) -> Op[list[Entity]]:
    """Record that a memory mentions these entities (each an id, a known name or alias, or
    ``(name, type)``). Each new mention counts once and is an ``entity_mentioned`` event.
    Returns the entities, mention counts updated."""
    _, tables = _graph(ctx)
    if not entities:
        raise PolicyViolation("mention needs at least one entity")
    _require(Memory.from_row_or_none((yield get_step(ctx, memory_id))), memory_id)
    out: list[Entity] = []
    for ref in entities:
        found = yield from _resolve(ctx, ref)
        row = yield Step(_insert_mention(tables), {"tenant": ctx.tenant, "memory_id": memory_id,
                                                   "entity_id": found.id}, "one")
        if row is not None:
            found = Entity.from_row(row)
            yield _event(ctx, "entity_mentioned", memory_id, {"entity_id": str(found.id)})
        out.append(found)
    return out


def relate(ctx: Context, source_id: UUID, target_id: UUID, relation_type: str, *,
           predicate: str | None = None, weight: float = 1.0, confidence: float | None = None,
           source: str | None = None, evidence: Sequence[Mapping[str, Any]] = (),
           valid_from: datetime | None = None) -> Op[Edge]:
    """A typed edge between two memories of this tenant (``relation_type`` one of
    ``graph.edges``). ``confidence`` defaults to ``graph.confidence[source]`` when that is
    declared, else 1. An ``edge_recorded`` event, on the source memory."""
    graph, tables = _graph(ctx)
    if relation_type not in graph.edges:
        raise PolicyViolation(f"unknown relation type '{relation_type}'; graph.edges: "
                              f"{', '.join(graph.edges)}")
    if source_id == target_id:
        raise PolicyViolation("an edge joins two different memories")
    if predicate is not None and not 0 < len(predicate) <= PREDICATE_CHARS:
        raise PolicyViolation(f"an edge predicate has 1 to {PREDICATE_CHARS} characters")
    if not (math.isfinite(weight) and weight > 0):
        raise PolicyViolation(f"an edge weight is a positive number, got {weight}")
    if confidence is None:
        declared = dict(graph.confidence)
        if source is not None and source not in declared:
            raise PolicyViolation(f"unknown confidence source '{source}'; graph.confidence: "
                                  f"{', '.join(declared) or 'none declared'}")
        confidence = float(declared[source]) if source is not None else 1.0
    if not 0 <= confidence <= 1:
        raise PolicyViolation(f"an edge confidence is between 0 and 1, got {confidence}")
    for memory_id in (source_id, target_id):
        _require(Memory.from_row_or_none((yield get_step(ctx, memory_id))), memory_id)
    row = yield Step(_insert_edge(tables), {
        "tenant": ctx.tenant, "source_id": source_id, "target_id": target_id,
        "relation_type": relation_type, "predicate": predicate, "weight": weight,
        "confidence": confidence, "valid_from": valid_from,
        "evidence": Jsonb([dict(e) for e in evidence])}, "one")
    edge = Edge.from_row(row)
    yield _event(ctx, "edge_recorded", source_id, {
        "edge_id": str(edge.id), "target_id": str(target_id), "relation_type": relation_type,
        "predicate": predicate, "weight": weight, "confidence": confidence})
    return edge


def end_edge(ctx: Context, edge_id: UUID, *, reason: str | None = None,
             at: datetime | None = None) -> Op[Edge]:
    """End an edge: ``valid_until`` is set (the row stays; searches at an earlier ``as_of``
    still follow it). An ``edge_ended`` event; an edge already ended comes back as it is."""
    _, tables = _graph(ctx)
    row = yield Step(_end_edge_citus(tables) if ctx.citus else _end_edge(tables),
                     {"tenant": ctx.tenant, "id": edge_id, "at": at}, "one")
    if row is None:
        existing = yield Step(_edge_by_id(tables), {"tenant": ctx.tenant, "id": edge_id}, "one")
        if existing is None:
            raise GovernanceError(f"edge {edge_id} does not exist for this tenant",
                                  edge_id=str(edge_id))
        return Edge.from_row(existing)
    edge = Edge.from_row(row)
    yield _event(ctx, "edge_ended", edge.source_id, {"edge_id": str(edge_id),
                                                  **reason_payload(reason)})
    return edge


def entity_memories(ctx: Context, ref: UUID | str, *, limit: int = 20,
                    ) -> Op[tuple[Entity, list[Memory]]]:
    """An entity (id, name or alias) and the active memories that mention it, latest first."""
    _, tables = _graph(ctx)
    found = yield from _resolve(ctx, ref)
    rows = yield Step(_entity_memories(tables), {"tenant": ctx.tenant, "entity_id": found.id,
                                                 "limit": limit}, "all")
    return found, [Memory.from_row(row) for row in rows]
