"""Sanitization gates as SQL: what a row looks like once it has crossed a gate.

A gate (``discipline.sanitization[]``, with its ``policies/`` file) resolves into a
:class:`Gate`; :func:`gate_sql` turns it into column expressions over one row (a table alias
in a statement, ``NEW`` in a trigger), so the set-based crossing statement
(:func:`cross_statement`) and the outbox's publish trigger
(:mod:`primitives.compile._outbox`) transform content the same way:

- **strip**: the gate's ``strip`` keys and the policy's ``strip_keys`` leave the envelope,
  value and provenance; where such a key's value (an anchor column, an envelope, value or
  provenance entry) appears in the content it is replaced by the policy's ``replacement``;
  then each of the policy's ``strip_patterns`` is replaced. PII kinds (``strip_pii``) are
  found in Python before the statement runs (:mod:`primitives.discipline._gates`).
- **keep_if_specific**: a row with fewer than :data:`SPECIFIC_BELOW` word characters left
  once the stripped spans and replacements are gone meant nothing without them: it stays.
- **hedge_map**: the content is prefixed by the policy's phrasing for the row's provenance
  tier (:func:`provenance_tier_sql`).
- **aggregate_only**: the row crosses only when :func:`sources_sql` counts at least the
  gate's ``min_sources`` distinct sources; with ``min_tenants`` it is held wherever a
  tenant's own transaction carries it (``below_min_tenants``: one tenant cannot see the
  others) and the maintain pass :func:`primitives.lifecycle._aggregate.aggregate_statement`
  publishes it once that many tenants hold the same normalised content.
- **none**: the content crosses as it is (still journalled).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from psycopg import sql

from primitives.compile._expr import active_predicate
from primitives.compile._names import Tables
from primitives.compile._views import SANITIZED_EVENT_KIND
from primitives.errors import SpecError
from primitives.spec import AgentSpec, SanitizationPolicy
from primitives.spec._common import split_ref
from primitives.spec._policies import HEDGE_TIERS

__all__ = [
    "CROSSING_OUTCOMES",
    "SPECIFIC_BELOW",
    "Gate",
    "GateSql",
    "candidates_statement",
    "cross_statement",
    "crossing_payload",
    "gate_sql",
    "gates",
    "posix_pattern",
    "provenance_tier_sql",
    "resolve_gate",
    "sources_sql",
    "stage_columns",
]

SPECIFIC_BELOW: Final = 3
"""A crossing text with fewer word characters than this, once what was stripped and its
replacements are gone, meant nothing without them: with ``keep_if_specific`` it stays."""

CROSSING_OUTCOMES: Final = ("crossed", "kept_specific", "below_min_sources",
                             "below_min_tenants")
"""What became of a row at a gate, as the ``sanitized`` journal event records it."""

Transform = Literal["strip_identifiers", "hedge_map", "aggregate_only", "none"]


@dataclass(frozen=True)
class Gate:
    """A sanitization gate with its policy folded in."""

    name: str
    from_tier: str
    from_typology: str
    to: str
    transform: Transform
    strip_keys: tuple[str, ...]
    """The gate's ``strip`` and the policy's ``strip_keys``, in that order, once each."""
    anchor_keys: tuple[str, ...]
    """Those of :attr:`strip_keys` that are columns of the memories table (anchor keys)."""
    patterns: tuple[str, ...]
    """The policy's ``strip_patterns`` as PostgreSQL reads them (:func:`posix_pattern`)."""
    replacement: str
    hedges: Mapping[str, str]
    keep_if_specific: bool
    min_sources: int
    pii_kinds: tuple[str, ...]
    min_tenants: int | None = None
    """aggregate_only across tenants: how many distinct tenants must hold the content."""

    @property
    def from_ref(self) -> str:
        return f"{self.from_tier}.{self.from_typology}"

    @property
    def strips(self) -> bool:
        """Something can be removed on the way (keys, patterns or PII)."""
        return bool(self.strip_keys or self.patterns or self.pii_kinds)


def posix_pattern(pattern: str) -> str:
    """``pattern`` (as Python's ``re`` reads it) as PostgreSQL's regular expressions read it:
    the word boundaries ``\\b`` and ``\\B`` become ``\\y`` and ``\\Y`` (in PostgreSQL ``\\b``
    is a backspace). The policy loader refuses named groups and backreferences."""
    out: list[str] = []
    at, in_class = 0, False
    while at < len(pattern):
        char = pattern[at]
        if char == "\\" and at + 1 < len(pattern):
            nxt = pattern[at + 1]
            if not in_class and nxt in "bB":
                out.append("\\y" if nxt == "b" else "\\Y")
            else:
                out.append(char + nxt)
            at += 2
            continue
        if char == "[" and not in_class:
            in_class = True
        elif char == "]" and in_class:
            in_class = False
        out.append(char)
        at += 1
    return "".join(out)


def resolve_gate(spec: AgentSpec, name: str) -> Gate:
    """The gate ``name`` of ``spec`` with its policy folded in; SpecError for an unknown
    gate, or a hedge_map gate whose policy does not phrase every provenance tier."""
    found = {g.name: g for g in spec.discipline.sanitization}
    declared = found.get(name)
    if declared is None:
        raise SpecError(f"agent '{spec.agent}' has no sanitization gate '{name}'; gates: "
                        f"{', '.join(found) or 'none'}", file=spec.source,
                        field="discipline.sanitization")
    policy = spec.policies.get(declared.policy) if declared.policy else None
    if policy is not None and not isinstance(policy, SanitizationPolicy):  # pragma: no cover
        raise SpecError(f"policy '{declared.policy}' is not a sanitization policy",
                        file=spec.source, field="discipline.sanitization")
    strip = tuple(dict.fromkeys([*declared.strip, *(policy.strip_keys if policy else [])]))
    hedges = dict(policy.hedges) if policy else {}
    if declared.transform == "hedge_map":
        missing = [t for t in HEDGE_TIERS if t not in hedges]
        if missing:
            raise SpecError(
                f"gate '{name}' hedges by provenance tier, but its policy "
                f"'{declared.policy or '(none)'}' has no phrasing for {', '.join(missing)}; "
                f"a hedge_map policy phrases each of {', '.join(HEDGE_TIERS)}",
                file=spec.source, field="discipline.sanitization")
    tier, typology = split_ref(declared.from_)
    return Gate(
        name=declared.name, from_tier=tier, from_typology=typology, to=declared.to,
        transform=declared.transform, strip_keys=strip,
        anchor_keys=tuple(k for k in strip if k in spec.anchor.keys),
        patterns=tuple(posix_pattern(p) for p in (policy.strip_patterns if policy else [])),
        replacement=policy.replacement if policy else "[redacted]",
        hedges=hedges, keep_if_specific=declared.keep_if_specific,
        min_sources=declared.min_sources,
        pii_kinds=tuple(policy.strip_pii) if policy else (),
        min_tenants=declared.min_tenants if declared.transform == "aggregate_only" else None,
    )


def gates(spec: AgentSpec) -> tuple[Gate, ...]:
    """Every gate of ``spec``, resolved."""
    return tuple(resolve_gate(spec, g.name) for g in spec.discipline.sanitization)


@dataclass(frozen=True)
class GateSql:
    """Expressions over one row for what crosses the gate. The crossing runs in two
    stages: :attr:`content` strips the row's content; :meth:`outcome` and :meth:`crossing`
    read that stripped text back by name (a column of the first stage), so it is computed
    once."""

    gate: Gate
    content: sql.Composable
    """The stripped content (before any hedge)."""
    envelope: sql.Composable
    value: sql.Composable
    provenance: sql.Composable
    stripped: sql.Composable
    """jsonb: ``{"keys": [names removed], "patterns": matches replaced}``, never values."""
    provenance_tier: sql.Composable
    sources: sql.Composable

    def outcome(self, stripped: sql.Composable, sources: sql.Composable,
                tenants: sql.Composable | None = None) -> sql.Composable:
        """One of :data:`CROSSING_OUTCOMES`, given the stripped text and the source count;
        for a gate with ``min_tenants``, ``tenants`` is the count of distinct tenants holding
        the content (None: unknown to the caller, so the row is held)."""
        gate = self.gate
        replacement = sql.Literal(gate.replacement)
        outcomes: list[sql.Composable] = []
        if gate.keep_if_specific and gate.strips and gate.transform != "none":
            outcomes.append(sql.SQL(
                "WHEN length(regexp_replace(replace({}, {}, ''), '\\W', '', 'g')) < {} "
                "THEN 'kept_specific'").format(stripped, replacement,
                                               sql.Literal(SPECIFIC_BELOW)))
        if gate.min_tenants is not None:
            outcomes.append(sql.SQL("WHEN {} THEN 'below_min_tenants'").format(
                sql.SQL("true") if tenants is None else sql.SQL("{} < {}").format(
                    tenants, sql.Literal(gate.min_tenants))))
        elif gate.transform == "aggregate_only":
            outcomes.append(sql.SQL("WHEN {} < {} THEN 'below_min_sources'").format(
                sources, sql.Literal(gate.min_sources)))
        if not outcomes:
            return sql.SQL("'crossed'")
        return sql.SQL("CASE {} ELSE 'crossed' END").format(sql.SQL(" ").join(outcomes))

    def crossing(self, stripped: sql.Composable, tier: sql.Composable) -> sql.Composable:
        """The text that crosses: the stripped text, hedged by ``tier`` under hedge_map."""
        if self.gate.transform != "hedge_map":
            return stripped
        return sql.SQL("({}::jsonb ->> {}) || ' ' || {}").format(
            sql.Literal(json.dumps(dict(self.gate.hedges), sort_keys=True)), tier, stripped)


def _col(row: sql.Composable, name: str) -> sql.Composed:
    return sql.SQL("{}.{}").format(row, sql.Identifier(name))


def _array(row: sql.Composable, field: str) -> sql.Composed:
    """``provenance -> field`` when it is a JSON array, else an empty one."""
    return sql.SQL(
        "CASE WHEN jsonb_typeof({p} -> {f}) = 'array' THEN {p} -> {f} ELSE '[]'::jsonb END"
    ).format(p=_col(row, "provenance"), f=sql.Literal(field))


def provenance_tier_sql(row: sql.Composable) -> sql.Composed:
    """The provenance tier a row rests on, the first that applies:

    1. ``provenance.provenance_tier`` when the writer set one of :data:`HEDGE_TIERS`;
    2. ``contradicted``: ``provenance.contradicted_by`` lists something;
    3. ``canonical``: ``provenance.canonical_ref`` names a canonical source;
    4. ``corroborated``: two or more evidence keys in ``provenance.corroborated_by``;
    5. ``inferred``: derived (``provenance.derived_from``) from fewer than two;
    6. ``single_observation``: anything else (one direct observation).

    ``unknown`` is never a row's tier: it is the answer when nothing crosses."""
    p = _col(row, "provenance")
    return sql.SQL(
        "CASE WHEN {p} ->> 'provenance_tier' = ANY({tiers}::text[]) "
        "AND {p} ->> 'provenance_tier' <> 'unknown' THEN {p} ->> 'provenance_tier' "
        "WHEN jsonb_array_length({contradicted}) > 0 THEN 'contradicted' "
        "WHEN {p} ? 'canonical_ref' THEN 'canonical' "
        "WHEN jsonb_array_length({corroborated}) >= 2 THEN 'corroborated' "
        "WHEN {p} ? 'derived_from' THEN 'inferred' "
        "ELSE 'single_observation' END"
    ).format(p=p, tiers=sql.Literal(list(HEDGE_TIERS)),
             contradicted=_array(row, "contradicted_by"),
             corroborated=_array(row, "corroborated_by"))


def sources_sql(row: sql.Composable) -> sql.Composed:
    """Distinct independent sources of a row: the evidence keys in
    ``provenance.corroborated_by`` and ``source:<source>`` for its own source."""
    return sql.SQL(
        "(SELECT count(DISTINCT s.k) FROM (SELECT jsonb_array_elements_text({ev}) "
        "UNION ALL SELECT 'source:' || {src}) AS s(k) WHERE s.k IS NOT NULL)"
    ).format(ev=_array(row, "corroborated_by"), src=_col(row, "source"))


def gate_sql(gate: Gate, row: sql.Composable, *,
             base: sql.Composable | None = None) -> GateSql:
    """The crossing of one row (``row``: a table alias or ``NEW``) through ``gate``.
    ``base``: the content to start from (the row's content after the PII step), default
    the row's content."""
    base = base if base is not None else _col(row, "content")
    keys = sql.Literal(list(gate.strip_keys))
    replacement = sql.Literal(gate.replacement)
    none = gate.transform == "none"
    content: sql.Composable = base
    present: list[sql.Composable] = []
    if not none:
        for key in gate.strip_keys:
            k = sql.Literal(key)
            holders: list[sql.Composable] = [
                sql.SQL("{}.{} ->> {}").format(row, sql.Identifier(c), k)
                for c in ("envelope", "value", "provenance")]
            if key in gate.anchor_keys:
                holders.insert(0, _col(row, key))
            checks = [sql.SQL("{} ? {}").format(_col(row, c), k)
                      for c in ("envelope", "value", "provenance")]
            for holder in holders:
                # a key's value, where the content names it, becomes the replacement
                content = sql.SQL("replace({}, coalesce(nullif({}, ''), E'\\x01'), {})").format(
                    content, holder, replacement)
            if key in gate.anchor_keys:
                checks.append(sql.SQL("strpos({}, coalesce(nullif({}, ''), E'\\x01')) > 0")
                              .format(base, _col(row, key)))
            present.append(sql.SQL("CASE WHEN {} THEN {} END").format(
                sql.SQL(" OR ").join(checks), k))
        for pattern in gate.patterns:
            content = sql.SQL("regexp_replace({}, {}, {}, 'g')").format(
                content, sql.Literal(pattern), replacement)
    strip_keys = not none and bool(gate.strip_keys)

    def minus(column: str) -> sql.Composable:
        if not strip_keys:
            return _col(row, column)
        return sql.SQL("({} - {}::text[])").format(_col(row, column), keys)

    pattern_count: sql.Composable = sql.SQL("0")
    if not none and gate.patterns:
        pattern_count = sql.SQL(" + ").join(
            sql.SQL("regexp_count({}, {})").format(base, sql.Literal(p)) for p in gate.patterns)
    key_names: sql.Composable = sql.SQL("'[]'::jsonb")
    if present:
        key_names = sql.SQL("to_jsonb(array_remove(ARRAY[{}]::text[], NULL))").format(
            sql.SQL(", ").join(present))
    stripped = sql.SQL("jsonb_build_object('keys', {}, 'patterns', {})").format(
        key_names, pattern_count)
    return GateSql(gate=gate, content=content, envelope=minus("envelope"),
                   value=minus("value"), provenance=minus("provenance"), stripped=stripped,
                   provenance_tier=provenance_tier_sql(row), sources=sources_sql(row))


def crossing_payload(gate: Gate, *, outcome: sql.Composable, stripped: sql.Composable,
                     tier: sql.Composable, sources: sql.Composable,
                     via: sql.Composable) -> sql.Composed:
    """The ``sanitized`` journal event's payload for one row: the gate, where from and to,
    the outcome, what was stripped (key names and counts, never values)."""
    return sql.SQL(
        "jsonb_build_object('gate', {name}, 'from', {frm}, 'to', {to}, 'transform', {tr}, "
        "'outcome', {outcome}, 'stripped', {stripped}, 'provenance_tier', {tier}, "
        "'sources', {sources}, 'via', {via})"
    ).format(name=sql.Literal(gate.name), frm=sql.Literal(gate.from_ref),
             to=sql.Literal(gate.to), tr=sql.Literal(gate.transform), outcome=outcome,
             stripped=stripped, tier=tier, sources=sources, via=via)


def stage_columns(g: GateSql) -> sql.Composed:
    """The first stage's columns over one row: ``stripped_content``, ``envelope``,
    ``value``, ``stripped``, ``provenance_tier``, ``sources``."""
    return sql.SQL(
        "{} AS stripped_content, {} AS envelope, {} AS value, {} AS stripped, "
        "{} AS provenance_tier, {} AS sources"
    ).format(g.content, g.envelope, g.value, g.stripped, g.provenance_tier, g.sources)


def cross_statement(tables: Tables, gate: Gate) -> sql.Composed:
    """Carry the tenant's active rows of the gate's ``from`` (``%(ids)s``, a uuid array, or
    every one when NULL; at most ``%(limit)s``) across ``gate``: one ``sanitized`` event per
    row (``%(actor)s``, ``%(via)s``), and one result row per row: id, outcome, crossing
    content, envelope, value, provenance tier, sources, stripped, event id, key, event time.

    ``%(pii_ids)s`` / ``%(pii_contents)s`` / ``%(pii_found)s`` (arrays, may be empty): the
    rows whose content the PII step redacted, their redacted content and the kinds found
    (jsonb ``{kind: count}``), which the payload's ``stripped.pii`` records."""
    t = tables.tenant
    g = gate_sql(gate, sql.Identifier("m"), base=sql.SQL("coalesce(p.content, m.content)"))
    s = sql.SQL
    outcome = g.outcome(s("s.stripped_content"), s("s.sources"))
    content = g.crossing(s("s.stripped_content"), s("s.provenance_tier"))
    payload = crossing_payload(gate, outcome=s("c.outcome"), stripped=s("c.stripped"),
                               tier=s("c.provenance_tier"), sources=s("c.sources"),
                               via=s("%(via)s::text"))
    return sql.SQL("""\
WITH pii AS (
  SELECT * FROM unnest(%(pii_ids)s::uuid[], %(pii_contents)s::text[], %(pii_found)s::jsonb[])
    AS p(id, content, found)),
stage AS (
  SELECT m.id, m.key, m.event_time, {columns},
         coalesce(p.found, '{{}}'::jsonb) AS pii,
         array_position(%(ids)s::uuid[], m.id) AS rank, m.created_at
  FROM {mem} AS m LEFT JOIN pii AS p ON p.id = m.id
  WHERE m.{t} = %(tenant)s AND m.tier = {tier_name} AND m.typology = {typology}
    AND {active} AND (%(ids)s::uuid[] IS NULL OR m.id = ANY(%(ids)s::uuid[]))
  ORDER BY rank NULLS LAST, m.created_at, m.id
  LIMIT %(limit)s),
crossing AS (
  SELECT s.id, s.key, s.event_time, s.envelope, s.value, s.provenance_tier, s.sources,
         s.stripped || jsonb_build_object('pii', s.pii) AS stripped, s.rank, s.created_at,
         {outcome} AS outcome, {content} AS content
  FROM stage AS s),
journal AS (
  INSERT INTO {events} ({t}, event_id, kind, memory_id, actor, payload)
  SELECT %(tenant)s, gen_random_uuid(), {kind}, c.id, %(actor)s, {payload}
  FROM crossing AS c ORDER BY c.rank NULLS LAST, c.created_at, c.id
  RETURNING memory_id, event_id)
SELECT c.id, c.outcome, c.content, c.envelope, c.value, c.provenance_tier, c.sources,
       c.stripped, j.event_id, c.key, c.event_time
FROM crossing AS c JOIN journal AS j ON j.memory_id = c.id
ORDER BY c.rank NULLS LAST, c.created_at, c.id""").format(
        columns=stage_columns(g), outcome=outcome, content=content, payload=payload,
        mem=tables.memories.ident, t=t, tier_name=sql.Literal(gate.from_tier),
        typology=sql.Literal(gate.from_typology), active=active_predicate("m"),
        events=tables.events.ident, kind=sql.Literal(SANITIZED_EVENT_KIND))


def candidates_statement(tables: Tables, gate: Gate) -> sql.Composed:
    """The id and content of the rows :func:`cross_statement` would carry (same parameters
    but the PII arrays): what the PII step reads."""
    return sql.SQL(
        "SELECT m.id, m.content FROM {mem} AS m WHERE m.{t} = %(tenant)s "
        "AND m.tier = {tier} AND m.typology = {typology} AND {active} "
        "AND (%(ids)s::uuid[] IS NULL OR m.id = ANY(%(ids)s::uuid[])) "
        "ORDER BY array_position(%(ids)s::uuid[], m.id) NULLS LAST, m.created_at, m.id "
        "LIMIT %(limit)s"
    ).format(mem=tables.memories.ident, t=tables.tenant, tier=sql.Literal(gate.from_tier),
             typology=sql.Literal(gate.from_typology), active=active_predicate("m"))

