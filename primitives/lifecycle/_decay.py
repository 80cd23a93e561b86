"""Decay models (seed 003 §7; Ebbinghaus from seed 002 §12): effective confidence and the
ranking weight of a memory row, computed at read time from its stored columns.

``confidence`` is the row's base confidence and ``decay_rate`` its own lambda (NULL: the
spec's ``rate``); the clocks are ``last_accessed_at``, ``corroborated_at``, ``valid_from`` and
``event_time``. Per typology (``behavior.decay``):

- ``ebbinghaus``: confidence x exp(-lambda x days^exponent), days since
  coalesce(last_accessed_at, corroborated_at, valid_from); lambda = coalesce(decay_rate,
  rate). Protected rows (``protect``) keep lambda 0: ``confirmed`` (decay_rate 0, as
  ``confirm`` and ``mark_exempt`` set it; without ``confirmed`` a decay_rate of 0 counts as
  unset), ``action_linked`` (an action relied on the row), ``entity_mentions`` (the row
  mentions an entity mentioned more than ``graph.protect_entity_mentions_over`` times).
  With ``graph.reinforcement`` r, + r x ln(1 + access_count / 20), at most 1. Typologies
  that archive on ``decay_threshold`` (``behavior.lifecycle``) are archived by ``maintain``
  once below ``threshold`` (:func:`decay_passes`).
- ``validity_window``: full confidence until coalesce(corroborated_at, valid_from) +
  validity; afterwards it halves every further ``validity``.
- ``forcing_function``: confidence unchanged; the ranking weight falls linearly from 1 at
  event_time to 0 at event_time + horizon, where the row awaits disposition.
- ``exempt``: no decay.

A row with decay_rate 0 is exempt under ``validity_window`` and ``forcing_function`` too
(the disposition ``mark_exempt``). The ranking weight of ``ebbinghaus`` and
``validity_window`` is their decay factor (the effective confidence over the base).

:func:`confidence_sql` and :func:`weight_sql` are the SQL (a CASE over ``m.typology`` of a
memories row ``m``); :func:`effective_confidence` and :func:`decay_weight` are the same
formulas in Python, which the tests hold the SQL to.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import NamedTuple

from psycopg import sql

from primitives.compile._expr import active_predicate
from primitives.compile._maintenance_idx import (
    DEFAULT_FAILED_CORROBORATIONS,
    corroboration_due_sql,
    corroboration_scope_sql,
    corroboration_windows,
    disposition_scope_sql,
    forcing_horizons,
    since_epoch_sql,
)
from primitives.compile._names import Tables
from primitives.lifecycle._boundary import MaintenancePass
from primitives.lifecycle._cluster_writes import journal_writes_citus
from primitives.lifecycle._passes import ClusterForm
from primitives.spec import AgentSpec
from primitives.spec._behavior import DecayPolicy

__all__ = [
    "DEFAULT_FAILED_CORROBORATIONS",
    "NOW",
    "DecayModels",
    "DecayRow",
    "corroboration_statement",
    "corroboration_windows",
    "decay_models",
    "decay_passes",
    "decay_weight",
    "effective_confidence",
    "forcing_horizons",
]

NOW = sql.SQL("now()")
"""The clock of a read: the statement's start."""

DAY = 86400.0
REINFORCEMENT_SCALE = 20.0
"""Seed 002 §12.1: reinforcement x ln(1 + access_count / 20)."""


class DecayRow(NamedTuple):
    """The columns of a row the formulas read (and two facts about its relations)."""

    confidence: float
    decay_rate: float | None
    event_time: datetime
    valid_from: datetime
    last_accessed_at: datetime | None = None
    corroborated_at: datetime | None = None
    access_count: int = 0
    action_linked: bool = False
    mentions_frequent_entity: bool = False


def _days(now: datetime, then: datetime) -> float:
    return max((now - then).total_seconds() / DAY, 0.0)


def _protected(policy: DecayPolicy, row: DecayRow, graph_protects: bool) -> bool:
    return (("confirmed" in policy.protect and row.decay_rate == 0)
            or ("action_linked" in policy.protect and row.action_linked)
            or ("entity_mentions" in policy.protect and graph_protects
                and row.mentions_frequent_entity))


def _factor(spec: AgentSpec, policy: DecayPolicy, row: DecayRow, now: datetime) -> float:
    """The confidence factor of ``policy`` (1 for models that leave confidence alone)."""
    if policy.model == "ebbinghaus":
        assert policy.rate is not None and policy.exponent is not None
        if _protected(policy, row, _graph_protects(spec)):
            return 1.0
        lam = row.decay_rate if row.decay_rate else policy.rate
        since = row.last_accessed_at or row.corroborated_at or row.valid_from
        return math.exp(-lam * _days(now, since) ** policy.exponent)
    if policy.model == "validity_window" and row.decay_rate != 0:
        assert policy.validity is not None
        window = policy.validity.total_seconds()
        start = row.corroborated_at or row.valid_from
        elapsed = (now - start).total_seconds()
        return 1.0 if elapsed < window else 0.5 ** ((elapsed - window) / window)
    return 1.0


def _policy(spec: AgentSpec, typology: str) -> DecayPolicy | None:
    return next((p for t, p in spec.behavior.decay.items() if t == typology), None)


def effective_confidence(spec: AgentSpec, typology: str, row: DecayRow, now: datetime) -> float:
    """The row's confidence at ``now`` under its typology's decay model: e.g. a fact last
    corroborated 300 days ago, under a 90-day validity window, keeps 0.5 ** (210 / 90),
    about 0.2, of its base confidence."""
    policy = _policy(spec, typology)
    if policy is None:
        return row.confidence
    value = float(row.confidence) * _factor(spec, policy, row, now)
    reinforcement = spec.graph.reinforcement if spec.graph is not None else None
    if policy.model == "ebbinghaus" and reinforcement:
        value = min(1.0, value + reinforcement * math.log(
            1 + row.access_count / REINFORCEMENT_SCALE))
    return value


def decay_weight(spec: AgentSpec, typology: str, row: DecayRow, now: datetime) -> float:
    """The row's ranking weight at ``now`` (recency ranks by it, newer first among equals)."""
    policy = _policy(spec, typology)
    if policy is None:
        return 1.0
    if policy.model == "forcing_function":
        assert policy.horizon is not None
        if row.decay_rate == 0:
            return 1.0
        age = (now - row.event_time).total_seconds()
        return max(0.0, 1.0 - age / policy.horizon.total_seconds())
    return _factor(spec, policy, row, now)


# SQL ------------------------------------------------------------------------------------------
def _graph_protects(spec: AgentSpec) -> bool:
    return spec.graph is not None and spec.graph.protect_entity_mentions_over is not None


def _seconds_since(clock: sql.Composable, now: sql.Composable) -> sql.Composed:
    return sql.SQL("extract(epoch FROM ({}::timestamptz - {}))::float8").format(now, clock)


def _protection_sql(spec: AgentSpec, tables: Tables, policy: DecayPolicy,
                    tenants: sql.Composable | None,
                    probe: sql.Composable | None = None) -> sql.Composable | None:
    """Row ``m`` is protected by ``policy.protect``. With ``tenants`` (a condition on a
    tenant column, e.g. ``= %(tenant)s``), the linked and mentioning rows of those tenants
    are read once (a hashed subplan) instead of probed row by row. ``probe`` (without
    ``tenants``): a condition the probed rows' tenant column meets as well, so that every
    table of a search names the tenant (a Citus coordinator routes a statement by it)."""
    parts: list[sql.Composable] = []
    t = tables.tenant

    def also(alias: str) -> sql.Composable:
        return sql.SQL("") if probe is None else sql.SQL(" AND {}.{} {}").format(
            sql.Identifier(alias), t, probe)

    if "confirmed" in policy.protect:
        parts.append(sql.SQL("m.decay_rate = 0"))
    related: list[sql.Composable] = []
    if "action_linked" in policy.protect:
        related.append(sql.SQL("SELECT a.{t} AS tenant, a.memory_id FROM {} AS a{}").format(
            tables.action_links.ident,
            sql.SQL(" WHERE a.{t} {}").format(tenants, t=t) if tenants is not None
            else sql.SQL(" WHERE a.{t} = m.{t} AND a.memory_id = m.id{}").format(
                also("a"), t=t), t=t))
    if ("entity_mentions" in policy.protect and _graph_protects(spec)
            and tables.node_entities is not None and tables.entities is not None):
        assert spec.graph is not None
        related.append(sql.SQL(
            "SELECT n.{t} AS tenant, n.memory_id FROM {ne} AS n JOIN {ent} AS e "
            "ON e.{t} = n.{t} AND e.id = n.entity_id WHERE e.mention_count > {over} AND {where}"
        ).format(ne=tables.node_entities.ident, ent=tables.entities.ident, t=t,
                 over=sql.Literal(spec.graph.protect_entity_mentions_over),
                 where=sql.SQL("n.{t} {}").format(tenants, t=t) if tenants is not None
                 else sql.SQL("n.{t} = m.{t} AND n.memory_id = m.id{}").format(
                     also("n"), t=t)))
    for query in related:
        if tenants is not None:
            parts.append(sql.SQL("(m.{t}, m.id) IN (SELECT tenant, memory_id FROM ({q}) AS r)")
                         .format(t=t, q=query))
        else:
            parts.append(sql.SQL("EXISTS ({})").format(query))
    if not parts:
        return None
    return sql.SQL("({})").format(sql.SQL(" OR ").join(parts))


def _factor_sql(spec: AgentSpec, tables: Tables, policy: DecayPolicy,
                now: sql.Composable, tenants: sql.Composable | None,
                probe: sql.Composable | None = None) -> sql.Composable | None:
    """The confidence factor of ``policy`` as SQL; None where it is always 1."""
    if policy.model == "ebbinghaus":
        since = _seconds_since(
            sql.SQL("coalesce(m.last_accessed_at, m.corroborated_at, m.valid_from)"), now)
        decayed = sql.SQL(
            "exp(-coalesce(nullif(m.decay_rate, 0), {rate})::float8 "
            "* power(greatest({since} / {day}::float8, 0), {exponent}::float8))"
        ).format(rate=sql.Literal(float(policy.rate or 0)), since=since,
                 day=sql.Literal(DAY), exponent=sql.Literal(float(policy.exponent or 1)))
        protected = _protection_sql(spec, tables, policy, tenants, probe)
        if protected is None:
            return decayed
        return sql.SQL("CASE WHEN {} THEN 1.0::float8 ELSE {} END").format(protected, decayed)
    if policy.model == "validity_window":
        assert policy.validity is not None
        window = sql.SQL("{}::float8").format(sql.Literal(policy.validity.total_seconds()))
        elapsed = _seconds_since(sql.SQL("coalesce(m.corroborated_at, m.valid_from)"), now)
        return sql.SQL(
            "CASE WHEN m.decay_rate = 0 OR {e} < {w} THEN 1.0::float8 "
            "ELSE power(0.5::float8, ({e} - {w}) / {w}) END").format(e=elapsed, w=window)
    return None


def _by_typology(per: dict[str, sql.Composable | None],
                 default: sql.Composable) -> sql.Composable:
    """A CASE over ``m.typology``: one branch per distinct expression (typologies that share
    one share the branch), ``default`` for the typologies whose expression is None."""
    groups: dict[str, tuple[list[str], sql.Composable]] = {}
    for typology, expression in sorted(per.items()):
        if expression is not None:
            groups.setdefault(expression.as_string(None), ([], expression))[0].append(typology)
    if not groups:
        return default
    branches = [
        sql.SQL("WHEN m.typology = {} THEN {}").format(sql.Literal(names[0]), expression)
        if len(names) == 1 else
        sql.SQL("WHEN m.typology = ANY({}::text[]) THEN {}").format(sql.Literal(names),
                                                                   expression)
        for names, expression in groups.values()]
    return sql.SQL("(CASE {} ELSE {} END)").format(sql.SQL(" ").join(branches), default)


@dataclass(frozen=True)
class DecayModels:
    """The decay models of a spec, as SQL over a memories row ``m``. Equal (and hashed) by
    the decay settings alone, so statements built from it can be cached."""

    key: str
    spec: AgentSpec = field(compare=False, hash=False, repr=False)

    @property
    def decays(self) -> bool:
        """Some typology's confidence or ranking weight changes with time."""
        return any(p.model != "exempt" for p in self.spec.behavior.decay.values())

    def confidence_sql(self, tables: Tables, now: sql.Composable = NOW,
                       tenants: sql.Composable | None = None,
                       probe: sql.Composable | None = None) -> sql.Composable:
        """The effective confidence of row ``m`` at ``now`` (float8). ``tenants``: a
        condition every row's tenant meets (``= %(tenant)s``), so that protections are
        read once for those tenants rather than probed for each row. ``probe``: that
        condition on the probed rows' tenant instead, when they are probed row by row (a
        search: every table it reads names the tenant)."""
        spec = self.spec
        per: dict[str, sql.Composable | None] = {}
        reinforcement = spec.graph.reinforcement if spec.graph is not None else None
        for typology, policy in sorted(spec.behavior.decay.items()):
            factor = _factor_sql(spec, tables, policy, now, tenants, probe)
            value: sql.Composable | None = None
            if factor is not None:
                value = sql.SQL("m.confidence::float8 * {}").format(factor)
            if policy.model == "ebbinghaus" and reinforcement:
                value = sql.SQL("least(1.0::float8, {} + {}::float8 * ln(1 + m.access_count "
                                "/ {}::float8))").format(value or sql.SQL("m.confidence::float8"),
                                                 sql.Literal(reinforcement),
                                                 sql.Literal(REINFORCEMENT_SCALE))
            per[typology] = value
        return _by_typology(per, sql.SQL("m.confidence::float8"))

    def weight_sql(self, tables: Tables, now: sql.Composable = NOW,
                   tenants: sql.Composable | None = None,
                   probe: sql.Composable | None = None) -> sql.Composable | None:
        """The ranking weight of row ``m`` at ``now``; None when every typology's is 1 (plain
        recency then). ``tenants`` and ``probe`` as for :meth:`confidence_sql`."""
        spec = self.spec
        per: dict[str, sql.Composable | None] = {}
        for typology, policy in sorted(spec.behavior.decay.items()):
            if policy.model == "forcing_function":
                assert policy.horizon is not None
                per[typology] = sql.SQL(
                    "CASE WHEN m.decay_rate = 0 THEN 1.0::float8 "
                    "ELSE greatest(0.0::float8, 1 - {} / {}::float8) END").format(
                    _seconds_since(sql.SQL("m.event_time"), now),
                    sql.Literal(policy.horizon.total_seconds()))
            else:
                per[typology] = _factor_sql(spec, tables, policy, now, tenants, probe)
        if all(e is None for e in per.values()):
            return None
        return _by_typology(per, sql.SQL("1.0::float8"))


_MODELS: dict[str, DecayModels] = {}


def decay_models(spec: AgentSpec) -> DecayModels:
    """The spec's :class:`DecayModels` (one object per distinct decay settings)."""
    graph = spec.graph
    key = repr((sorted((t, p.model_dump_json()) for t, p in spec.behavior.decay.items()),
                graph.reinforcement if graph else None,
                graph.protect_entity_mentions_over if graph else None, spec.agent))
    models = _MODELS.get(key)
    if models is None:
        if len(_MODELS) >= 64:
            _MODELS.clear()
        models = _MODELS[key] = DecayModels(key, spec)
    return models


# maintain passes ------------------------------------------------------------------------------
def decay_archive_statement(spec: AgentSpec, tables: Tables,
                            typologies: Collection[str] | None = None, *,
                            citus: bool = False) -> sql.Composed | None:
    """Archive the active rows of ``%(tenants)s`` whose typology decays by ``ebbinghaus``,
    archives on ``decay_threshold`` (``behavior.lifecycle.<typology>.archive_on``), and whose
    effective confidence at ``%(now)s`` is below the model's ``threshold`` (protected rows keep
    full confidence, so they never fall below it), each with a ``decay_archived`` event
    carrying that confidence. Returns ``(changed)``. None without such a typology.
    ``typologies``: only these (default: all). ``citus``: the cluster form, as
    :func:`corroboration_statement`'s (every table, the protections' too, filtered by
    ``%(tenant)s``; the events returned after the count)."""
    models = decay_models(spec)
    now = sql.SQL("%(now)s")
    archiving = {t for t, life in spec.behavior.lifecycle.items()
                 if "decay_threshold" in life.archive_on}
    thresholds = sorted((t, float(p.threshold or 0)) for t, p in spec.behavior.decay.items()
                        if p.model == "ebbinghaus" and t in archiving
                        and (typologies is None or t in typologies))
    if not thresholds:
        return None
    threshold = sql.SQL("CASE m.typology {} END").format(sql.SQL(" ").join(
        sql.SQL("WHEN {} THEN {}::float8").format(sql.Literal(t), sql.Literal(v))
        for t, v in thresholds))
    return sql.SQL(
        "WITH due AS (SELECT c.* FROM (SELECT m.{t} AS tenant, m.id, {conf} AS confidence, "
        "{threshold} AS threshold FROM {mem} AS m WHERE m.{t} = ANY(%(tenants)s::text[]){only} "
        "AND m.typology = ANY({typologies}::text[]) AND {active}) AS c "
        "WHERE c.confidence < c.threshold), "
        "archived AS (UPDATE {mem} AS m SET archived_at = %(now)s, updated_at = %(now)s "
        "FROM due WHERE m.{t} = due.tenant{only} AND m.id = due.id AND {active} "
        "RETURNING m.{t} AS tenant, m.id), "
        "journal AS ({journal}"
        "jsonb_build_object('confidence', due.confidence, 'threshold', due.threshold, "
        "'column', 'archived_at'){payload} FROM archived AS a JOIN due ON due.tenant = a.tenant "
        "AND due.id = a.id{order}) "
        "SELECT count(*)::bigint{event_rows} FROM journal"
    ).format(t=tables.tenant, mem=tables.memories.ident,
             conf=models.confidence_sql(tables, now, sql.SQL(
                 "= %(tenant)s" if citus else "= ANY(%(tenants)s::text[])")),
             only=sql.SQL(" AND m.{} = %(tenant)s").format(tables.tenant) if citus
             else sql.SQL(""),
             journal=sql.SQL(
                 "SELECT a.tenant, 'decay_archived' AS kind, a.id AS memory_id, " if citus
                 else "INSERT INTO {events} ({t}, event_id, kind, memory_id, actor, payload) "
                 "SELECT a.tenant, gen_random_uuid(), 'decay_archived', a.id, %(actor)s, "
             ).format(events=tables.events.ident, t=tables.tenant),
             payload=sql.SQL(" AS payload" if citus else ""),
             order=sql.SQL("" if citus else " ORDER BY a.tenant, a.id RETURNING 1"),
             event_rows=sql.SQL(
                 ", (SELECT jsonb_agg(jsonb_build_array(e.kind, e.memory_id, e.payload) "
                 "ORDER BY e.tenant, e.memory_id) FROM journal AS e)" if citus else ""),
             threshold=threshold,
             typologies=sql.Literal([t for t, _ in thresholds]),
             active=active_predicate("m"))


def dispositions_statement(spec: AgentSpec, tables: Tables, *, listed: int = 0,
                           typologies: Collection[str] | None = None) -> sql.Composed | None:
    """Report only: the active persistent rows of ``%(tenants)s`` whose typology lives by
    ``forcing_function`` (:func:`forcing_horizons`) and that are past its horizon at
    ``%(now)s`` without being marked exempt (decay_rate 0): they await disposition (promote,
    mark exempt, or archive). ``typologies``: only these (default: all).
    Returns ``(changed, awaiting)``: nothing changed, and their count; with ``listed``, also
    the oldest ``listed`` of them as a jsonb array of {tenant, id, tier, typology,
    event_time} (the listing holds the batch's due rows to sort them: about a fifth more
    time for the pass over a large table). None without such a typology."""
    every = forcing_horizons(spec)
    horizons = [(t, seconds) for t, seconds in every.items()
                if typologies is None or t in typologies]
    if not horizons:
        return None
    due = sql.SQL(
        "FROM {mem} AS m "
        "JOIN (VALUES {horizons}) AS h(typology, seconds) ON h.typology = m.typology "
        "WHERE m.{t} = ANY(%(tenants)s::text[]) AND {scope} "
        "AND m.typology = ANY({names}::text[]) "
        "AND m.event_time <= %(now)s::timestamptz - make_interval(secs => h.seconds)"
    ).format(mem=tables.memories.ident, t=tables.tenant,
             scope=disposition_scope_sql(every, "m"),
             names=sql.Literal([t for t, _ in horizons]),
             horizons=sql.SQL(", ").join(
                 sql.SQL("({}, {}::float8)").format(sql.Literal(t), sql.Literal(s))
                 for t, s in horizons))
    if listed <= 0:
        return sql.SQL("SELECT 0::bigint AS changed, count(*)::bigint AS awaiting {}").format(due)
    return sql.SQL(
        "WITH due AS (SELECT m.{t} AS tenant, m.id, m.tier, m.typology, m.event_time {due}) "
        "SELECT 0::bigint AS changed, (SELECT count(*) FROM due)::bigint AS awaiting, "
        "coalesce((SELECT jsonb_agg(jsonb_build_object('tenant', d.tenant, 'id', d.id, "
        "'tier', d.tier, 'typology', d.typology, 'event_time', d.event_time) "
        "ORDER BY d.event_time, d.id) FROM (SELECT * FROM due ORDER BY event_time, id "
        "LIMIT {listed}) AS d), '[]'::jsonb) AS oldest"
    ).format(t=tables.tenant, due=due, listed=sql.Literal(listed))


def corroboration_statement(spec: AgentSpec, tables: Tables,
                            typologies: Collection[str] | None = None, *,
                            citus: bool = False) -> sql.Composed | None:
    """Count failed corroborations of the active persistent rows of ``%(tenants)s`` whose
    typology lives by ``corroborated`` (:func:`corroboration_windows`; ``typologies``: only
    these). A corroboration fails when a row's validity window lapses without the row being
    corroborated again: at ``%(now)s`` a row has failed floor(time since
    coalesce(corroborated_at, valid_from) / validity) consecutive corroborations (a new
    corroboration moves its clock, so the count starts again). The count is kept in
    ``provenance.corroboration`` ({since: the clock it counts from, epoch: the same clock in
    seconds since the epoch, failed}); each rise is
    journalled ``corroboration_failed`` (failed, previous, since, window), and a row reaching
    the typology's ``failed_corroborations`` (where its lifecycle archives on them) is
    archived, never deleted, journalled ``archived`` with the cause ``failed_corroborations``.
    Confirmed or exempt rows (decay_rate 0, as ``confirm`` and ``mark_exempt`` set it) are
    not counted: their validity does not lapse.
    The pass reads only the rows whose next failure is due (the memories table's
    ``corroboration_due`` index, :mod:`primitives.compile._maintenance_idx`): a pass finding
    nothing lapsed since the last costs an index probe per tenant, not a read of its rows.
    Returns ``(changed)``: the rows whose count rose. None without such a typology.

    ``citus``: the form a Citus coordinator routes whole to the shards of ``%(tenant)s``
    (:class:`~primitives.lifecycle._passes.ClusterForm`): every table also filtered by that
    tenant, the new provenance made where the row is locked (Citus refuses a stable function
    over a column in an ``UPDATE``'s ``SET``), and the events returned after the count
    (kind, memory id, payload, in order) for :func:`journal_writes_citus` to insert."""
    every = corroboration_windows(spec)
    windows = [(t, w, n) for t, (w, n) in every.items()
               if typologies is None or t in typologies]
    if not windows:
        return None
    t = tables.tenant
    values = sql.SQL(", ").join(
        sql.SQL("({}, {}::float8, {}::int)").format(sql.Literal(name), sql.Literal(window),
                                                   sql.Literal(archive))
        for name, window, archive in windows)
    return sql.SQL("""\
WITH lapsed AS (
  SELECT c.*, CASE WHEN (c.provenance #> '{{corroboration,epoch}}') = to_jsonb(c.since_epoch)
                     OR (c.provenance #>> '{{corroboration,since}}')::timestamptz = c.since
                   THEN coalesce((c.provenance #>> '{{corroboration,failed}}')::int, 0)
                   ELSE 0 END AS previous
  FROM (SELECT m.{t} AS tenant, m.id, m.provenance, w.window_seconds, w.archive_at,
               coalesce(m.corroborated_at, m.valid_from) AS since, {since_epoch} AS since_epoch,
               floor(extract(epoch FROM (%(now)s::timestamptz
                     - coalesce(m.corroborated_at, m.valid_from))) / w.window_seconds)::int
                 AS failed
        FROM {mem} AS m JOIN (VALUES {values}) AS w(typology, window_seconds, archive_at)
          ON w.typology = m.typology
        WHERE m.{t} = ANY(%(tenants)s::text[]){only_m} AND {scope}
          AND {due} <= extract(epoch FROM timezone('UTC', %(now)s::timestamptz))
          AND coalesce(m.corroborated_at, m.valid_from)
              <= %(now)s::timestamptz - make_interval(secs => w.window_seconds)) AS c),
rising AS (
  SELECT l.tenant, l.id, l.since, l.since_epoch, l.failed, l.previous, l.window_seconds,
         l.archive_at{new_provenance}
  FROM lapsed AS l JOIN {mem} AS m ON m.{t} = l.tenant AND m.id = l.id
  WHERE l.failed > l.previous{only_m}
  FOR UPDATE OF m SKIP LOCKED),
marked AS (
  UPDATE {mem} AS m
  SET provenance = {provenance},
      archived_at = CASE WHEN r.failed >= r.archive_at THEN %(now)s ELSE m.archived_at END,
      updated_at = now()
  FROM rising AS r WHERE m.{t} = r.tenant{only_m} AND m.id = r.id AND {active}
    AND coalesce(m.corroborated_at, m.valid_from) = r.since
  RETURNING r.tenant, r.id, r.failed, r.previous, r.since, r.window_seconds, r.archive_at,
            m.archived_at IS NOT NULL AS archived),
journal AS (
  {journal_head}
  FROM (SELECT k.tenant, k.id, 1 AS step, 'corroboration_failed' AS kind,
               jsonb_build_object('failed', k.failed, 'previous', k.previous, 'since', k.since,
                                  'window_seconds', k.window_seconds,
                                  'archive_at', k.archive_at) AS payload
        FROM marked AS k
        UNION ALL
        SELECT k.tenant, k.id, 2, 'archived',
               jsonb_build_object('column', 'archived_at', 'cause', 'failed_corroborations',
                                  'failed', k.failed, 'archive_at', k.archive_at)
        FROM marked AS k WHERE k.archived) AS e
  ORDER BY e.tenant, e.id, e.step{journal_tail})
SELECT (SELECT count(*) FROM marked) + 0 * (SELECT count(*) FROM journal){event_rows}""").format(
        t=t, mem=tables.memories.ident, events=tables.events.ident, values=values,
        active=active_predicate("m"), since_epoch=since_epoch_sql("m"),
        scope=sql.SQL("{} AND m.typology = ANY({}::text[])").format(
            corroboration_scope_sql(every, "m"), sql.Literal([n for n, _, _ in windows])),
        due=corroboration_due_sql(every, "m"),
        only_m=sql.SQL(" AND m.{} = %(tenant)s").format(t) if citus else sql.SQL(""),
        new_provenance=sql.SQL(
            ",\n         jsonb_set(m.provenance, '{corroboration}', jsonb_build_object("
            "'since', l.since, 'failed', l.failed, 'epoch', l.since_epoch)) AS provenance"
        ) if citus else sql.SQL(""),
        provenance=sql.SQL("r.provenance") if citus else sql.SQL(
            "jsonb_set(m.provenance, '{corroboration}',\n"
            "                             jsonb_build_object('since', r.since, 'failed', r.failed,\n"
            "                                                'epoch', r.since_epoch))"),
        **_journal_parts(tables, citus, "e.id", "e.tenant, e.id, e.step"))


def _journal_parts(tables: Tables, citus: bool, memory_id: str,
                   order: str) -> dict[str, sql.Composable]:
    """A pass's journal CTE head and tail and its result's last part: on one node the
    ``INSERT`` of the events; in the cluster form (``citus``) the events selected, returned
    after the count as one JSON array of (kind, memory id, payload) in ``order``."""
    if not citus:
        return {"journal_head": sql.SQL(
            "INSERT INTO {events} ({t}, event_id, kind, memory_id, actor, payload)\n"
            "  SELECT e.tenant, gen_random_uuid(), e.kind, {id}, %(actor)s, e.payload"
        ).format(events=tables.events.ident, t=tables.tenant, id=sql.SQL(memory_id)),
            "journal_tail": sql.SQL("\n  RETURNING 1"), "event_rows": sql.SQL("")}
    return {"journal_head": sql.SQL("SELECT e.*"), "journal_tail": sql.SQL(""),
            "event_rows": sql.SQL(
                ",\n  (SELECT jsonb_agg(jsonb_build_array(e.kind, {id}, e.payload) "
                "ORDER BY {order}) FROM journal AS e)").format(
                id=sql.SQL(memory_id), order=sql.SQL(order))}


def _cluster_form(tables: Tables, statement: sql.Composed | None) -> ClusterForm | None:
    """A decay pass's cluster form: its ``citus`` statement, then its events."""
    if statement is None:
        return None
    return ClusterForm(statement, partial(journal_writes_citus, tables))


def decay_passes(spec: AgentSpec, tables: Tables) -> list[MaintenancePass]:
    """The maintain job's decay work: ``decay_archive`` (Ebbinghaus typologies below their
    threshold are archived, never deleted), ``corroboration`` (failed corroborations of
    ``corroborated`` typologies counted, archived at their ``failed_corroborations``) and
    ``dispositions`` (report only: ``forcing_function`` rows past their horizon; its second
    column is their count). Typologies are grouped by their decay ``schedule``: one pass of
    each kind per schedule, carrying it (maintain runs a scheduled pass only when due)."""
    groups: dict[str | None, list[str]] = {}
    for typology, policy in sorted(spec.behavior.decay.items()):
        groups.setdefault(policy.schedule, []).append(typology)
    passes: list[MaintenancePass] = []
    for schedule, typologies in sorted(groups.items(), key=lambda g: g[0] or ""):
        scoped = covered = tuple(typologies)
        cluster = corroboration_statement(spec, tables, scoped, citus=True)
        for name, statement, form in (
                ("decay_archive", decay_archive_statement(spec, tables, scoped),
                 _cluster_form(tables, decay_archive_statement(spec, tables, scoped,
                                                               citus=True))),
                ("corroboration", corroboration_statement(spec, tables, scoped),
                 _cluster_form(tables, cluster)),
                ("dispositions", dispositions_statement(spec, tables, typologies=scoped),
                 None)):
            if statement is not None:
                passes.append(MaintenancePass(name, statement, schedule, covered, form))
    return passes
