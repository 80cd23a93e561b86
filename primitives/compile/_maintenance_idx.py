"""The partial indexes that let ``primitives maintain`` find its work without reading every row.

A maintain pass runs every few minutes over every tenant; most of a pass would otherwise be
reading each tenant's rows only to find that nothing is due. Two of its passes get an index
that holds only the rows they may change:

- ``corroboration`` (lifecycle ``persistent: corroborated``): the active persistent rows of
  those typologies, keyed by when their next failed corroboration falls due
  (:func:`corroboration_due_sql`, an epoch in seconds), so a pass reads only the rows whose
  validity window lapsed since it last counted them;
- ``dispositions`` (lifecycle ``persistent: forcing_function``): the active persistent rows
  of those typologies not marked exempt, keyed by their event time, so its count of the rows
  past their horizon reads this index alone;
- corroboration promotion (``behavior.promotion[].criteria: corroboration``): the active rows
  carrying at least the fewest independent evidence keys any rule asks for
  (:func:`evidence_count_sql`).

Each index's definition follows the spec (windows, typologies, evidence count), so its name
carries a digest of that definition: a spec that changes them gets a new index under a new
name, and the plan drops the one an earlier definition built. The maintain statements
(:mod:`primitives.lifecycle._decay`, :mod:`primitives.lifecycle._boundary`) use these very
expressions, as the planner matches an index by its expression.

>>> evidence_count_sql("c").as_string(None)[:60]
'CASE WHEN jsonb_typeof("c"."provenance" -> \\'corroborated_by\\') '
"""

from __future__ import annotations

import hashlib
from typing import Final

from psycopg import sql

from primitives.compile._ddl import Index
from primitives.compile._expr import active_predicate, column
from primitives.compile._names import Tables
from primitives.spec import AgentSpec

__all__ = [
    "DEFAULT_FAILED_CORROBORATIONS",
    "corroboration_due_sql",
    "corroboration_scope_sql",
    "corroboration_windows",
    "disposition_scope_sql",
    "evidence_count_sql",
    "forcing_horizons",
    "maintenance_indexes",
    "min_corroborations",
    "since_epoch_sql",
]

DEFAULT_FAILED_CORROBORATIONS: Final = 3
"""Seed 003's default for a lifecycle that archives on ``failed_corroborations`` without
saying how many."""


def corroboration_windows(spec: AgentSpec) -> dict[str, tuple[float, int | None]]:
    """The typologies whose persistent rows stay only while corroborated: lifecycle
    ``persistent: corroborated`` with a decay ``validity`` (the window a corroboration keeps a
    row current). Each maps to (window in seconds, the failed corroborations that archive a
    row: the lifecycle's ``failed_corroborations`` where its ``archive_on`` lists
    ``failed_corroborations``, else None: failures are counted and journalled, nothing is
    archived)."""
    windows: dict[str, tuple[float, int | None]] = {}
    for typology, policy in sorted(spec.behavior.decay.items()):
        life = spec.behavior.lifecycle.get(typology)
        if life is None or life.persistent != "corroborated" or policy.validity is None:
            continue
        archive = life.failed_corroborations or DEFAULT_FAILED_CORROBORATIONS \
            if "failed_corroborations" in life.archive_on else None
        windows[typology] = (policy.validity.total_seconds(), archive)
    return windows


def since_epoch_sql(alias: str | None = None) -> sql.Composed:
    """The clock a row's corroboration counts from, coalesce(corroborated_at, valid_from), as
    seconds since the epoch (numeric, exact to the microsecond; immutable, so indexable)."""
    return sql.SQL("extract(epoch FROM timezone('UTC', coalesce({}, {})))").format(
        column("corroborated_at", alias), column("valid_from", alias))


def _window_sql(windows: dict[str, tuple[float, int | None]],
                alias: str | None) -> sql.Composable:
    literal = {t: sql.SQL("{}::numeric").format(sql.Literal(repr(float(w))))
               for t, (w, _) in sorted(windows.items())}
    if len(literal) == 1:
        return next(iter(literal.values()))
    return sql.SQL("(CASE {} {} END)").format(column("typology", alias), sql.SQL(" ").join(
        sql.SQL("WHEN {} THEN {}").format(sql.Literal(t), w) for t, w in literal.items()))


def corroboration_due_sql(windows: dict[str, tuple[float, int | None]],
                          alias: str | None = None) -> sql.Composed:
    """When a row's next failed corroboration falls due, in seconds since the epoch: its clock
    + window x (1 + the failures already counted from that clock). The count is the one the
    corroboration pass keeps in ``provenance.corroboration`` ({epoch, failed}), read only
    while its ``epoch`` is the row's clock (a new corroboration moves the clock, so the count
    starts again); anything else there counts as none, never as an error."""
    provenance = column("provenance", alias)
    since = since_epoch_sql(alias)
    counted = sql.SQL(
        "CASE WHEN jsonb_typeof({p} #> '{{corroboration,epoch}}') = 'number' "
        "AND jsonb_typeof({p} #> '{{corroboration,failed}}') = 'number' "
        "THEN CASE WHEN ({p} #> '{{corroboration,epoch}}')::numeric = {since} "
        "THEN ({p} #> '{{corroboration,failed}}')::numeric ELSE 0 END ELSE 0 END"
    ).format(p=provenance, since=since)
    return sql.SQL("({since} + {window} * (1 + {counted}))").format(
        since=since, window=_window_sql(windows, alias), counted=counted)


def corroboration_scope_sql(windows: dict[str, tuple[float, int | None]],
                            alias: str | None = None) -> sql.Composed:
    """The rows the corroboration pass counts (its index's predicate): active persistent rows
    of the ``windows`` typologies not confirmed or exempt (decay_rate 0)."""
    return sql.SQL("{typology} = ANY({names}::text[]) AND {persistent} "
                   "AND {rate} IS DISTINCT FROM 0 AND {active}").format(
        typology=column("typology", alias), names=sql.Literal(sorted(windows)),
        persistent=column("persistent", alias), rate=column("decay_rate", alias),
        active=active_predicate(alias))


def forcing_horizons(spec: AgentSpec) -> dict[str, float]:
    """The typologies whose persistent rows await disposition, with their horizon in seconds:
    those whose lifecycle is ``persistent: forcing_function`` and whose decay names a
    ``horizon`` (the ``forcing_function`` model requires one). A typology whose rows live
    ``indefinite``, ``corroborated`` or ``append_only`` never awaits disposition, whatever
    its decay model."""
    return {t: p.horizon.total_seconds() for t, p in sorted(spec.behavior.decay.items())
            if p.horizon is not None and t in spec.behavior.lifecycle
            and spec.behavior.lifecycle[t].persistent == "forcing_function"}


def disposition_scope_sql(horizons: dict[str, float], alias: str | None = None) -> sql.Composed:
    """The rows the dispositions pass looks at (its index's predicate): active persistent rows
    of the ``horizons`` typologies not marked exempt (decay_rate 0)."""
    return sql.SQL("{typology} = ANY({names}::text[]) AND {persistent} "
                   "AND {rate} IS DISTINCT FROM 0 AND {active}").format(
        typology=column("typology", alias), names=sql.Literal(sorted(horizons)),
        persistent=column("persistent", alias), rate=column("decay_rate", alias),
        active=active_predicate(alias))


def evidence_count_sql(alias: str | None = None) -> sql.Composed:
    """How many evidence keys ``provenance.corroborated_by`` holds (0 when it is not a list)."""
    evidence = sql.SQL("{} -> 'corroborated_by'").format(column("provenance", alias))
    return sql.SQL("CASE WHEN jsonb_typeof({e}) = 'array' THEN jsonb_array_length({e}) "
                   "ELSE 0 END").format(e=evidence)


def min_corroborations(spec: AgentSpec) -> int | None:
    """The fewest evidence keys any corroboration promotion rule asks for; None without one."""
    counts = [rule.min_corroborations for rule in spec.behavior.promotion
              if rule.criteria == "corroboration" and rule.min_corroborations is not None]
    return min(counts) if counts else None


def _digest(*parts: sql.Composable) -> str:
    text = "\n".join(part.as_string(None) for part in parts)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _following_spec(tables: Tables, stem: str, digest: str,
                    elements: tuple[sql.Composable, ...], where: sql.Composable) -> Index:
    """A btree index led by the tenant, named ``<prefix>_<stem><digest>``, that drops the
    indexes an earlier definition named ``<prefix>_<stem>...``."""
    return Index(tables.object_name(stem + digest), "btree", elements, tables.tenant_column,
                 where=where, supersedes_prefix=tables.object_name(stem))


def maintenance_indexes(spec: AgentSpec, tables: Tables) -> list[Index]:
    """The memories table's maintain indexes for ``spec`` (none where it declares no
    ``corroborated`` or ``forcing_function`` typology and no corroboration promotion)."""
    t = tables.tenant_column
    tenant = sql.Identifier(t)
    indexes: list[Index] = []
    windows = corroboration_windows(spec)
    if windows:
        due, scope = corroboration_due_sql(windows), corroboration_scope_sql(windows)
        indexes.append(_following_spec(
            tables, "memories_corroboration_due_", _digest(due, scope),
            (tenant, sql.SQL("({})").format(due)), where=scope))
    horizons = forcing_horizons(spec)
    if horizons:
        scope = disposition_scope_sql(horizons)
        indexes.append(_following_spec(
            tables, "memories_dispositions_", _digest(scope),
            (tenant, sql.Identifier("typology"), sql.Identifier("event_time")), where=scope))
    fewest = min_corroborations(spec)
    if fewest is not None:
        where = sql.SQL("{} >= {} AND {}").format(evidence_count_sql(), sql.Literal(fewest),
                                                  active_predicate())
        indexes.append(_following_spec(
            tables, "memories_evidence_", _digest(where),
            (tenant, sql.Identifier("tier"), sql.Identifier("typology")), where=where))
    return indexes
