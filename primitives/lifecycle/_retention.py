"""Retention in the maintain job: long orphans become tombstones.

The retention view (``<prefix>_audit_retention_state``) calls a persistent row ORPHANED
once nothing has read it and no action links it for the retention's ``orphan_after``.
A retention that also declares ``tombstone_orphans_after`` gives the maintain job a pass,
``tombstone_orphans``: a row that stays ORPHANED that much longer (unread since
``orphan_after + tombstone_orphans_after``, still unlinked) is tombstoned, the same state
change as ``tombstone()`` (``tombstoned_at`` set, the row kept), journalled ``tombstoned``
with the reason ``orphaned`` and the clock it went by. Without the field there is no pass:
orphans stay as they are. Rows of a typology whose lifecycle is ``persistent: indefinite``
are never tombstoned as orphans: only the triggers their ``archive_on`` lists end them. A typology whose lifecycle archives on ``idle`` is archived once
ORPHANED (pass ``archive_idle``), journalled ``archived`` with the cause ``idle``. A typology
whose lifecycle archives on ``canonical_change`` is archived once a canonical row one of its
references pins has moved on (pass ``archive_canonical_change``), journalled ``archived`` with
the cause ``canonical_change``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from psycopg import sql

from primitives.compile import Tables
from primitives.compile._expr import active_predicate
from primitives.compile._views import orphan_after
from primitives.lifecycle._passes import MaintenancePass
from primitives.spec import AgentSpec
from primitives.spec._policies import RetentionPolicy

__all__ = ["archive_canonical_change_statement", "archive_idle_statement",
           "indefinite_typologies", "retention_passes",
           "tombstone_after", "tombstone_orphans_statement"]


def tombstone_after(spec: AgentSpec) -> timedelta | None:
    """How long an ORPHANED persistent row stays so before the maintain job tombstones it
    (the tier's ``retention.tombstone_orphans_after``, else its policy's)."""
    retention = spec.persistent_tier.retention
    if retention is None:
        return None
    if retention.tombstone_orphans_after is not None:
        return retention.tombstone_orphans_after
    policy = spec.policies.get(retention.policy) if retention.policy else None
    return policy.tombstone_orphans_after if isinstance(policy, RetentionPolicy) else None


def tombstone_orphans_statement(tables: Tables, idle: timedelta,
                                kept: Sequence[str] = ()) -> sql.Composed:
    """Tombstone the persistent rows of ``%(tenants)s`` unread (and, never read, unwritten)
    for ``idle`` before ``%(now)s`` that no action links, each journalled ``tombstoned``,
    except rows of the typologies ``kept`` (their lifecycle is ``persistent: indefinite``).
    Returns one row: how many."""
    t = tables.tenant
    keep = sql.SQL(" AND m.typology <> ALL({}::text[])").format(sql.Literal(list(kept))) \
        if kept else sql.SQL("")
    return sql.SQL("""\
WITH orphans AS (
  SELECT m.{t} AS tenant, m.id, coalesce(m.last_accessed_at, m.created_at) AS idle_since
  FROM {mem} AS m
  WHERE m.{t} = ANY(%(tenants)s::text[]) AND m.persistent AND m.tombstoned_at IS NULL{keep}
    AND coalesce(m.last_accessed_at, m.created_at) < %(now)s::timestamptz - {idle}::interval
    AND NOT EXISTS (SELECT 1 FROM {links} AS l WHERE l.{t} = m.{t} AND l.memory_id = m.id)
  FOR UPDATE OF m SKIP LOCKED),
marked AS (
  UPDATE {mem} AS m SET tombstoned_at = %(now)s, updated_at = now()
  FROM orphans AS o WHERE m.{t} = o.tenant AND m.id = o.id AND m.tombstoned_at IS NULL
  RETURNING o.tenant, o.id, o.idle_since),
journal AS (
  INSERT INTO {events} ({t}, event_id, kind, memory_id, actor, payload)
  SELECT k.tenant, gen_random_uuid(), 'tombstoned', k.id, %(actor)s,
         jsonb_build_object('reason', 'orphaned', 'idle_since', k.idle_since,
                            'idle_for', {idle}::text)
  FROM marked AS k ORDER BY k.tenant, k.id
  RETURNING 1)
SELECT (SELECT count(*) FROM marked) + 0 * (SELECT count(*) FROM journal)""").format(
        t=t, mem=tables.memories.ident, links=tables.action_links.ident,
        events=tables.events.ident, idle=sql.Literal(_interval(idle)), keep=keep)


def indefinite_typologies(spec: AgentSpec) -> list[str]:
    """The persistent tier's typologies whose lifecycle is ``persistent: indefinite``: only
    the triggers their ``archive_on`` lists end them, so no orphan timer tombstones them."""
    return [t for t in spec.typology.get(spec.persistent_tier.name, [])
            if t in spec.behavior.lifecycle
            and spec.behavior.lifecycle[t].persistent == "indefinite"]


def archive_idle_statement(tables: Tables, idle: timedelta,
                           typologies: list[str]) -> sql.Composed:
    """Archive the active persistent rows of ``typologies`` (their lifecycle archives on
    ``idle``) that are ORPHANED at ``%(now)s``: unread (never read: unwritten) for ``idle``,
    no action linking them. Each journalled ``archived`` with the cause ``idle``. Returns
    one row: how many."""
    t = tables.tenant
    return sql.SQL("""\
WITH idle AS (
  SELECT m.{t} AS tenant, m.id, coalesce(m.last_accessed_at, m.created_at) AS idle_since
  FROM {mem} AS m
  WHERE m.{t} = ANY(%(tenants)s::text[]) AND m.persistent AND m.typology = ANY({typologies})
    AND {active}
    AND coalesce(m.last_accessed_at, m.created_at) < %(now)s::timestamptz - {idle}::interval
    AND NOT EXISTS (SELECT 1 FROM {links} AS l WHERE l.{t} = m.{t} AND l.memory_id = m.id)
  FOR UPDATE OF m SKIP LOCKED),
marked AS (
  UPDATE {mem} AS m SET archived_at = %(now)s, updated_at = now()
  FROM idle AS o WHERE m.{t} = o.tenant AND m.id = o.id AND m.archived_at IS NULL
  RETURNING o.tenant, o.id, o.idle_since),
journal AS (
  INSERT INTO {events} ({t}, event_id, kind, memory_id, actor, payload)
  SELECT k.tenant, gen_random_uuid(), 'archived', k.id, %(actor)s,
         jsonb_build_object('column', 'archived_at', 'cause', 'idle',
                            'idle_since', k.idle_since, 'idle_for', {idle}::text)
  FROM marked AS k ORDER BY k.tenant, k.id
  RETURNING 1)
SELECT (SELECT count(*) FROM marked) + 0 * (SELECT count(*) FROM journal)""").format(
        t=t, mem=tables.memories.ident, links=tables.action_links.ident,
        events=tables.events.ident, idle=sql.Literal(_interval(idle)),
        typologies=sql.Literal(typologies), active=active_predicate("m"))


def archive_canonical_change_statement(tables: Tables, typologies: list[str],
                                       categories: list[str]) -> sql.Composed:
    """Archive the active persistent rows of ``typologies`` (their lifecycle archives on
    ``canonical_change``) holding a reference, of one of ``categories`` (those with a
    canonical source), whose pinned version is no longer the canonical row's current one
    (the row changed, or is gone), as ``<prefix>_canonical_version`` reads it. Each
    journalled ``archived`` with the cause ``canonical_change`` and the references that
    moved (category, key, pinned and current version). Returns one row: how many."""
    assert tables.canonical_refs is not None
    t = tables.tenant
    from primitives.compile._non_mirror import canonical_version_function
    return sql.SQL("""\
WITH moved AS (
  SELECT r.{t} AS tenant, r.memory_id, r.category, r.canonical_key, r.canonical_version,
         (SELECT v.canonical_version FROM {version}(r.category, ARRAY[r.canonical_key]) AS v
          LIMIT 1) AS current_version
  FROM {refs} AS r
  WHERE r.{t} = ANY(%(tenants)s::text[]) AND r.category = ANY({categories})),
stale AS (
  SELECT m.{t} AS tenant, m.id,
         jsonb_agg(jsonb_build_object('category', d.category, 'key', d.canonical_key,
                                      'pinned', d.canonical_version,
                                      'current', d.current_version)
                   ORDER BY d.category, d.canonical_key) AS moved
  FROM {mem} AS m JOIN moved AS d ON d.tenant = m.{t} AND d.memory_id = m.id
  WHERE m.{t} = ANY(%(tenants)s::text[]) AND m.persistent AND m.typology = ANY({typologies})
    AND {active} AND d.current_version IS DISTINCT FROM d.canonical_version
  GROUP BY m.{t}, m.id),
marked AS (
  UPDATE {mem} AS m SET archived_at = %(now)s, updated_at = now()
  FROM stale AS o WHERE m.{t} = o.tenant AND m.id = o.id AND m.archived_at IS NULL
  RETURNING o.tenant, o.id, o.moved),
journal AS (
  INSERT INTO {events} ({t}, event_id, kind, memory_id, actor, payload)
  SELECT k.tenant, gen_random_uuid(), 'archived', k.id, %(actor)s,
         jsonb_build_object('column', 'archived_at', 'cause', 'canonical_change',
                            'references', k.moved)
  FROM marked AS k ORDER BY k.tenant, k.id
  RETURNING 1)
SELECT (SELECT count(*) FROM marked) + 0 * (SELECT count(*) FROM journal)""").format(
        t=t, mem=tables.memories.ident, refs=tables.canonical_refs.ident,
        events=tables.events.ident, version=canonical_version_function(tables),
        typologies=sql.Literal(typologies), categories=sql.Literal(categories),
        active=active_predicate("m"))


def _interval(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    return f"{seconds // 86400} days" if seconds % 86400 == 0 else f"{seconds} seconds"


def retention_passes(spec: AgentSpec, tables: Tables) -> list[MaintenancePass]:
    """``archive_idle`` for typologies archiving on ``idle`` (with an ``orphan_after``),
    ``tombstone_orphans`` when the persistent tier's retention declares both ``orphan_after``
    and ``tombstone_orphans_after``, ``archive_canonical_change`` for typologies archiving on
    ``canonical_change`` in a spec whose non-mirror list names a canonical source."""
    orphan, tombstone = orphan_after(spec), tombstone_after(spec)
    passes: list[MaintenancePass] = []
    idle_typologies: list[str] = [
        t for t in spec.typology.get(spec.persistent_tier.name, [])
        if t in spec.behavior.lifecycle and "idle" in spec.behavior.lifecycle[t].archive_on]
    if orphan is not None and idle_typologies:
        passes.append(MaintenancePass(
            "archive_idle", archive_idle_statement(tables, orphan, idle_typologies)))
    if orphan is not None and tombstone is not None:
        passes.append(MaintenancePass(
            "tombstone_orphans", tombstone_orphans_statement(
                tables, orphan + tombstone, indefinite_typologies(spec))))
    changing: list[str] = [
        t for t in spec.typology.get(spec.persistent_tier.name, [])
        if t in spec.behavior.lifecycle
        and "canonical_change" in spec.behavior.lifecycle[t].archive_on]
    sourced = [item.category for item in spec.discipline.non_mirror if item.canonical_source]
    if changing and sourced and tables.canonical_refs is not None:
        passes.append(MaintenancePass(
            "archive_canonical_change",
            archive_canonical_change_statement(tables, changing, sourced)))
    return passes
