"""Cross-field rules of the foundational and discipline primitives.

Each rule returns ``(location, message)`` pairs; the loader turns them into
located :class:`~primitives.errors.SpecError` s.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from primitives.spec._common import split_ref
from primitives.spec._common import suggest as _hint
from primitives.spec._models import AgentSpec

_SOURCE = re.compile(r"^[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*$")
"""``schema.table.column`` of a non-mirror canonical source: plain lower-case names."""

__all__ = ["check_consolidation", "check_foundation"]

Loc = tuple[str | int, ...]
Problem = tuple[Loc, str]


def _anchor(spec: AgentSpec) -> Iterator[Problem]:
    anchor = spec.anchor
    keys = anchor.keys
    if len(set(keys)) != len(keys):
        yield ("anchor", "keys"), "anchor keys must be distinct"
    for field in ("required_at_write", "nullable_for_cross_scope", "provenance"):
        for index, key in enumerate(getattr(anchor, field)):
            if field != "provenance" and key not in keys:
                yield (("anchor", field, index),
                       f"'{key}' is not an anchor key{_hint(key, keys)}. Anchor keys: "
                       f"{', '.join(keys)}.")
            if field == "provenance" and key in keys:
                yield (("anchor", field, index),
                       f"'{key}' is an anchor key; provenance keys are recorded, not scoping")
    if anchor.tenant_key not in anchor.required_at_write:
        yield (("anchor", "required_at_write"),
               f"anchor key '{anchor.tenant_key}' is missing from required_at_write: the first "
               "anchor key is the tenant key and every write must carry it")
    for key in keys:
        required = key in anchor.required_at_write
        nullable = key in anchor.nullable_for_cross_scope
        if required and nullable:
            yield (("anchor", "nullable_for_cross_scope"),
                   f"anchor key '{key}' cannot be both required at write and nullable")
        elif not required and not nullable and key != anchor.tenant_key:
            yield (("anchor", "required_at_write"),
                   f"anchor key '{key}' is missing from required_at_write (or list it under "
                   "nullable_for_cross_scope if cross-scope queries may leave it empty)")


def _tiers(spec: AgentSpec) -> Iterator[Problem]:
    names = spec.tier_names
    seen: dict[str, int] = {}
    for index, tier in enumerate(spec.tiers):
        if tier.name in seen:
            yield (("tiers", index, "name"),
                   f"duplicate tier name '{tier.name}' (also tiers[{seen[tier.name]}])")
        seen.setdefault(tier.name, index)
    persistent = [i for i, t in enumerate(spec.tiers) if t.persistent]
    if not persistent:
        yield (("tiers",),
               "no persistent tier: mark the top tier `persistent: true` (it is what survives "
               "across sessions and what the anchor keys)")
    for index in persistent[1:]:
        yield (("tiers", index, "persistent"),
               f"only one tier is persistent; '{spec.tiers[persistent[0]].name}' already is")
    if persistent and persistent[0] != len(spec.tiers) - 1:
        yield (("tiers", persistent[0], "persistent"),
               "the persistent tier is the top tier: list it last")
    for index, tier in enumerate(spec.tiers):
        loc: Loc = ("tiers", index)
        boundary = tier.boundary
        if boundary.scope_change and boundary.scope_change not in spec.anchor.keys:
            yield ((*loc, "boundary", "scope_change"),
                   f"scope_change names '{boundary.scope_change}', which is not an anchor key"
                   f"{_hint(boundary.scope_change, spec.anchor.keys)}")
        if boundary.anchor_escalation:
            for end in ("from_", "to"):
                key = getattr(boundary.anchor_escalation, end)
                if key not in spec.anchor.keys and key not in spec.anchor.provenance:
                    yield ((*loc, "boundary", "anchor_escalation", end.rstrip("_")),
                           f"'{key}' is not an anchor key")
        if tier.name not in spec.typology:
            yield ((*loc, "name"), f"tier '{tier.name}' has no typology entry; add "
                   f"`typology: {{{tier.name}: [episodic]}}` or similar")
        if tier.ttl_ticks is not None and spec.determinism.clock != "ticks":
            yield ((*loc, "ttl_ticks"),
                   "ttl_ticks needs `determinism: {clock: ticks}`; use boundary.idle_after for "
                   "wall-clock expiry")
        if tier.retention is not None and not tier.persistent:
            yield ((*loc, "retention"), "retention applies to the persistent tier only; "
                   "transient tiers inherit their lifecycle from their scope")
        if tier.capacity is not None and tier.capacity.per == "scope" and tier.persistent:
            yield ((*loc, "capacity", "per"),
                   "the persistent tier has no scopes: count its capacity per tenant")
        if tier.placement == "checkpointer" and tier.persistent:
            yield ((*loc, "placement"),
                   "the persistent tier lives in the store; only transient tiers may be "
                   "checkpointer-managed")
        if tier.placement == "checkpointer" and not spec.persistence.checkpointer.enabled:
            yield ((*loc, "placement"), "placement is 'checkpointer' but the checkpointer is "
                   "disabled in persistence.checkpointer")
    for tier_name, kinds in spec.typology.items():
        if tier_name not in names:
            yield (("typology", tier_name),
                   f"typology names tier '{tier_name}', which is not declared in tiers"
                   f"{_hint(tier_name, names)}. Declared tiers: {', '.join(names)}.")
        if not kinds:
            yield (("typology", tier_name), "a tier holds at least one typology")
        if len(set(kinds)) != len(kinds):
            yield (("typology", tier_name), "typology entries of a tier must be distinct")


def _retrieval(spec: AgentSpec) -> Iterator[Problem]:
    retrieval = spec.retrieval
    names = spec.tier_names
    if len(set(retrieval.signals)) != len(retrieval.signals):
        yield ("retrieval", "signals"), "signals must be distinct"
    for tier in retrieval.scope:
        if tier not in names:
            yield (("retrieval", "scope", tier),
                   f"unknown tier '{tier}'{_hint(tier, names)}. Tiers: {', '.join(names)}.")
        elif spec.tier(tier).placement == "checkpointer":
            yield (("retrieval", "scope", tier),
                   f"tier '{tier}' is checkpointer-placed: its thread state reaches the prompt "
                   "through LangGraph, not through memory retrieval; remove it from the scope")
    for signal in retrieval.fusion.weights:
        if signal not in retrieval.signals:
            yield (("retrieval", "fusion", "weights", signal),
                   f"weight for signal '{signal}', which is not in retrieval.signals")
    if "graph" in retrieval.signals and spec.graph is None:
        yield (("retrieval", "signals"),
               "the graph signal needs a `graph:` section declaring edge types")
    if retrieval.intents:
        for intent, weights in retrieval.intents.routes.items():
            for signal in weights:
                if signal not in retrieval.signals:
                    yield (("retrieval", "intents", "routes", intent, signal),
                           f"route weights signal '{signal}', which is not in retrieval.signals")
        if "graph" in retrieval.signals and spec.graph is not None:
            declared = list(spec.graph.edges)
            for intent, edges in retrieval.intents.traverse.items():
                for edge in edges:
                    if edge not in declared:
                        yield (("retrieval", "intents", "traverse", intent),
                               f"intent '{intent}' traverses '{edge}' edges, which graph.edges "
                               f"does not declare ({', '.join(declared)}); set "
                               f"retrieval.intents.traverse.{intent} to declared edge types")


def _discipline(spec: AgentSpec) -> Iterator[Problem]:
    seen: set[str] = set()
    for index, gate in enumerate(spec.discipline.sanitization):
        loc: Loc = ("discipline", "sanitization", index)
        if gate.name in seen:
            yield (*loc, "name"), f"duplicate sanitization gate '{gate.name}'"
        seen.add(gate.name)
        tier, typ = split_ref(gate.from_)
        if typ not in spec.typology.get(tier, []):
            yield ((*loc, "from"), f"'{gate.from_}' is not a tier and typology of this spec")
        for key_index, key in enumerate(gate.strip):
            known = [*spec.anchor.keys, *spec.anchor.provenance]
            if key not in known:
                yield ((*loc, "strip", key_index),
                       f"'{key}' is not an anchor or provenance key{_hint(key, known)}")
        if gate.min_tenants is not None and gate.transform != "aggregate_only":
            yield ((*loc, "min_tenants"),
                   f"min_tenants counts tenants for an aggregate_only gate; gate "
                   f"'{gate.name}' is {gate.transform}")
        if gate.min_tenants is not None and (
                spec.discipline.visibility.cross_context != "event_driven"):
            yield ((*loc, "min_tenants"),
                   "min_tenants publishes through the outbox once enough tenants hold the "
                   "content (a maintain pass, the only reader of every tenant); it needs "
                   "discipline.visibility.cross_context: event_driven")
    visibility = spec.discipline.visibility
    if visibility.cross_context == "event_driven" and not (
            visibility.events and spec.discipline.sanitization):
        yield (("discipline", "visibility", "events"),
               "cross_context: event_driven publishes each gate's crossings under the events "
               "it lists: declare at least one event and one sanitization gate")
    if visibility.cross_context == "tool_mediated" and not (
            visibility.tools and spec.discipline.sanitization):
        yield (("discipline", "visibility", "tools"),
               "cross_context: tool_mediated answers through the tools it lists and its "
               "sanitization gates: declare at least one tool and one gate")
    categories = [item.category for item in spec.discipline.non_mirror]
    if len(set(categories)) != len(categories):
        yield ("discipline", "non_mirror"), "non-mirror categories must be distinct"
    keys: dict[tuple[str, str], str] = {}
    for index, item in enumerate(spec.discipline.non_mirror):
        if "trigram_trigger" in item.defenses and not item.canonical_source:
            yield (("discipline", "non_mirror", index, "canonical_source"),
                   "a trigram_trigger defense needs canonical_source: schema.table.column")
        if item.canonical_source is not None and not _SOURCE.match(item.canonical_source):
            yield (("discipline", "non_mirror", index, "canonical_source"),
                   f"'{item.canonical_source}' is not schema.table.column (lower-case names)")
        table = item.canonical_table if item.canonical_source is not None and _SOURCE.match(
            item.canonical_source) else None
        if table is not None and keys.setdefault(table, item.canonical_key) != item.canonical_key:
            yield (("discipline", "non_mirror", index, "canonical_key"),
                   f"categories with canonical table {'.'.join(table)} must name its rows by "
                   f"one column ('{keys[table]}')")
        if len(set(item.defenses)) != len(item.defenses):
            yield (("discipline", "non_mirror", index, "backstop"),
                   "a backstop repeats the primary defense or another backstop")


def _determinism(spec: AgentSpec) -> Iterator[Problem]:
    determinism = spec.determinism
    known = [*spec.anchor.keys, *spec.anchor.provenance]
    if determinism.seed_key is not None and determinism.seed_key not in known:
        yield (("determinism", "seed_key"),
               f"seed_key '{determinism.seed_key}' is not an anchor or provenance key"
               f"{_hint(determinism.seed_key, known)}; list it under anchor.provenance")
    if determinism.ids == "seeded" and determinism.seed_key is None:
        yield (("determinism", "ids"),
               "seeded ids are derived from a seed: set determinism.seed_key (e.g. job_seed)")
    if determinism.replay == "exact" and (determinism.clock != "ticks"
                                          or determinism.ids != "seeded"):
        yield (("determinism", "replay"),
               "an exact replay needs the tick clock and seeded ids: set determinism.clock: "
               "ticks and determinism.ids: seeded (wall-clock times and random ids differ on "
               "every run)")


def check_consolidation(spec: AgentSpec) -> Iterator[Problem]:
    """An extraction from a transient tier runs at that tier's scope end (its rows leave
    then): a target typology consolidated at another lifecycle's end would never be. Run on
    the loaded spec (behaviour resolved), after :func:`check_foundation`. A capacity that
    evicts does so at tick, after the references promotions: its tier must be one they fill."""
    for at, declared in enumerate(spec.tiers):
        if declared.capacity is not None and declared.capacity.on_full == "evict" and not any(
                rule.criteria == "references" and split_ref(rule.to)[0] == declared.name
                for rule in spec.behavior.promotion):
            yield (("tiers", at, "capacity", "on_full"),
                   f"tier '{declared.name}' evicts at tick, after the references promotions that "
                   "fill it, and none does: use on_full: refuse, or declare a promotion with "
                   f"criteria: references into '{declared.name}'")
    for index, rule in enumerate(spec.behavior.promotion):
        if rule.criteria != "extraction":
            continue
        tier, _ = split_ref(rule.from_)
        source = next((t for t in spec.tiers if t.name == tier), None)
        if source is None or source.persistent:
            continue
        _, typology = split_ref(rule.to)
        policy = spec.behavior.consolidation.get(typology)  # type: ignore[call-overload]
        trigger = policy.trigger if policy is not None else None
        if trigger in ("session_end", "job_end") and source.boundary.lifecycle != trigger:
            yield (("behavior", "promotion", index, "from"),
                   f"{typology} is consolidated at {trigger} (behavior.consolidation."
                   f"{typology}.trigger), but its source tier '{tier}' ends at "
                   f"{source.boundary.lifecycle or 'no lifecycle event'}, when its rows "
                   f"leave: set the trigger to tier_boundary or {source.boundary.lifecycle}")


def check_foundation(spec: AgentSpec) -> list[Problem]:
    """Every cross-field problem of ``spec`` (empty when the spec is coherent)."""
    return [*_anchor(spec), *_tiers(spec), *_retrieval(spec), *_discipline(spec),
            *_determinism(spec)]
