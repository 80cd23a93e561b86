"""What changes between the spec a store was built from and the spec given now.

``migrate`` used to re-run the whole idempotent plan whenever its checksum changed, so a
rename, a move of the store or a shorter audit retention went through unseen (or failed
half-way with a raw SQL error). Each applied plan now records the spec's *shape* (see
:func:`spec_shape`); :func:`evolve` compares the recorded shape with the new spec and
classifies every difference:

- ``additive``: applied as it is (a new tier, a longer retention, new statements);
- ``rebuild``: applied with extra steps run before the plan, each shown (a declared
  rename of a tier or an anchor key; the persistent tier's generated column);
- ``destructive`` / ``weakening``: refused with the reason and the way forward, unless the
  operator allows the kind (``--allow KIND --reason TEXT``, journalled in
  ``primitives.plan_history``). Some changes cannot be allowed at all: they would migrate
  into a broken store (a tier removed while rows still hold it, new embedding dims).

Renames are declared (``renamed_from``), never guessed. Pure: facts from the live database
(rows per tier, columns per table) come in as :class:`Facts`.

>>> evolution = evolve(None, spec, plan, Facts())  # doctest: +SKIP
>>> [c.kind for c in evolution.changes]  # doctest: +SKIP
['additive']
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from psycopg import sql

from primitives.compile._ddl import TableDef, bounds_constraint_name
from primitives.compile._plan import Plan, Step
from primitives.spec import AgentSpec

__all__ = [
    "ALLOWABLE_KINDS",
    "Change",
    "ChangeKind",
    "Evolution",
    "Facts",
    "evolve",
    "spec_shape",
]

ChangeKind = Literal["additive", "rebuild", "destructive", "weakening"]
ALLOWABLE_KINDS: tuple[str, ...] = ("destructive", "weakening")
PERSISTENT_EXPRESSION_VERSION = 170000
"""``ALTER COLUMN ... SET EXPRESSION`` (the persistent tier's generated column) needs 17."""

Shape = dict[str, Any]


@dataclass(frozen=True)
class Facts:
    """What the live database holds that a change depends on."""

    rows_by_tier: Mapping[str, int] = field(default_factory=dict)
    """Rows of ``<prefix>_memories`` per tier (for the tiers removed or renamed)."""
    columns: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Columns of each existing table of the store, by table name (no schema)."""
    server_version: int = 180000


@dataclass(frozen=True)
class Change:
    """One classified difference, where the spec states it, and what applying it does."""

    kind: ChangeKind
    summary: str
    field: str
    line: int | None = None
    steps: tuple[str, ...] = ()
    way_forward: str | None = None
    allowable: bool = True
    """False: refused even with ``--allow`` (applying it would leave a broken store)."""

    def refused(self, allowed: frozenset[str]) -> bool:
        if not self.allowable:
            return True
        return self.kind in ALLOWABLE_KINDS and self.kind not in allowed

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "summary": self.summary, "field": self.field,
                "line": self.line, "steps": list(self.steps),
                "way_forward": self.way_forward, "allowable": self.allowable}


@dataclass(frozen=True)
class Evolution:
    """The changes of one spec against its store, and the statements run before its plan."""

    agent: str
    source: str | None
    changes: tuple[Change, ...]
    before: tuple[Step, ...] = ()
    new_store: bool = False

    def refused(self, allowed: frozenset[str] = frozenset()) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.refused(allowed))

    def where(self, change: Change) -> str:
        place = self.source or f"agent {self.agent}"
        return f"{place}:{change.line}" if change.line else place


def spec_shape(spec: AgentSpec, plan: Plan) -> Shape:
    """The facts of a spec that a later spec is compared with (stored with each plan)."""
    store = spec.persistence.store
    return {
        "schema": store.schema_,
        "prefix": store.prefix,
        "tiers": spec.tier_names,
        "persistent_tier": spec.persistent_tier.name,
        "anchor_keys": list(spec.anchor.keys),
        "embedding_dims": spec.retrieval.embedding.dims if plan.capabilities.vector else None,
        "audit_retention_s": {t.name: _audit_retention(spec, t.name) for t in spec.tiers},
    }


def _audit_retention(spec: AgentSpec, tier_name: str) -> int | None:
    retention = spec.tier(tier_name).retention
    if retention is None:
        return None
    value = retention.audit_retention
    if value is None and retention.policy is not None:
        policy = spec.policies.get(retention.policy)
        value = getattr(policy, "audit_retention", None)
    return int(value.total_seconds()) if value is not None else None


def _line(spec: AgentSpec, *path: str | int) -> int | None:
    declared = getattr(spec, "_declared", None)
    return declared.lines.line_of(path) if declared is not None else None


def _tier_index(spec: AgentSpec, name: str) -> int:
    return spec.tier_names.index(name)


def _seconds(value: int | None) -> str:
    if value is None:
        return "not set"
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if value % size == 0:
            return f"{value // size}{unit}"
    return f"{value}s"


def evolve(old: Shape | None, spec: AgentSpec, plan: Plan, facts: Facts) -> Evolution:
    """Classify every difference between the recorded ``old`` shape and ``spec``."""
    if old is None:
        change = Change("additive", f"new store {plan.tables.schema}.{plan.tables.prefix}_* "
                        f"({len(plan.steps)} statements)", "persistence.store",
                        _line(spec, "persistence", "store"))
        return Evolution(spec.agent, spec.source, (change,), new_store=True)
    new = spec_shape(spec, plan)
    changes: list[Change] = []
    before: list[Step] = []
    moved = _store_move(old, new, spec)
    if moved is not None:
        return Evolution(spec.agent, spec.source, (moved,))
    changes += _tier_changes(old, spec, plan, facts, before)
    changes += _anchor_changes(old, spec, plan, facts, before)
    changes += _embedding_changes(old, new, spec)
    changes += _retention_changes(old, new, spec)
    if not changes and old != new:
        changes.append(Change("additive", "recorded shape updated", "agent"))
    return Evolution(spec.agent, spec.source, tuple(changes), tuple(before))


def _store_move(old: Shape, new: Shape, spec: AgentSpec) -> Change | None:
    if (old["schema"], old["prefix"]) == (new["schema"], new["prefix"]):
        return None
    field_ = "persistence.store.prefix" if old["prefix"] != new["prefix"] else \
        "persistence.store.schema"
    return Change(
        "destructive",
        f"store moves from {old['schema']}.{old['prefix']}_* to {new['schema']}.{new['prefix']}_*:"
        " a new, empty store is created and the old tables and their journal stay behind, "
        "unreachable from this agent",
        field_, _line(spec, *field_.split(".")),
        way_forward=f"keep schema '{old['schema']}' and prefix '{old['prefix']}'; to start an "
        "empty store on purpose (the old one kept as it is), run migrate with --allow "
        "destructive --reason TEXT",
    )


def _check_tables(plan: Plan) -> tuple[TableDef, ...]:
    """The tables whose CHECKs list the tiers: memories and scopes."""
    wanted = {plan.tables.memories, plan.tables.scopes}
    return tuple(d for d in plan.definitions if d.table in wanted)


def _drop_checks(definition: TableDef) -> sql.Composed:
    names = [c.name for c in definition.constraints if c.kind == "check"]
    if definition.bounds:
        names.append(bounds_constraint_name(definition.table))
    drops = [sql.SQL("DROP CONSTRAINT IF EXISTS {}").format(sql.Identifier(n)) for n in names]
    return sql.SQL("ALTER TABLE {} ").format(definition.table.ident) + sql.SQL(", ").join(drops)


def _tier_changes(old: Shape, spec: AgentSpec, plan: Plan, facts: Facts,
                  before: list[Step]) -> Iterator[Change]:
    old_tiers: list[str] = list(old["tiers"])
    renames = {t.name: t.renamed_from for t in spec.tiers
               if t.renamed_from is not None and t.renamed_from in old_tiers
               and t.renamed_from not in spec.tier_names}
    renamed_old = set(renames.values())
    for name in spec.tier_names:
        if name in renames:
            old_name = renames[name]
            rows = facts.rows_by_tier.get(old_name, 0)
            steps = [f"drop the tier CHECKs of {d.table.qualified}" for d in _check_tables(plan)]
            steps.append(f"move {rows} row(s) from tier '{old_name}' to '{name}' "
                         "(memories and scopes)")
            steps.append("the plan re-adds the CHECKs with the new tier list")
            if not any(s.title.startswith("tier rename") for s in before):
                before.extend(Step(f"tier rename: drop the CHECKs of {d.table.qualified}",
                                   _drop_checks(d)) for d in _check_tables(plan))
            for table in (plan.tables.memories, plan.tables.scopes):
                before.append(Step(
                    f"tier rename: {table.qualified} rows of '{old_name}' become '{name}'",
                    sql.SQL("UPDATE {} SET tier = {} WHERE tier = {}").format(
                        table.ident, sql.Literal(name), sql.Literal(old_name))))
            index = _tier_index(spec, name)
            yield Change("rebuild", f"tier '{old_name}' renamed to '{name}'",
                         f"tiers[{index}].renamed_from", _line(spec, "tiers", index,
                                                              "renamed_from"), tuple(steps))
        elif name not in old_tiers:
            index = _tier_index(spec, name)
            yield Change("additive", f"tier '{name}' added", f"tiers[{index}]",
                         _line(spec, "tiers", index))
    for name in old_tiers:
        if name in spec.tier_names or name in renamed_old:
            continue
        rows = facts.rows_by_tier.get(name, 0)
        if rows:
            yield Change(
                "destructive", f"tier '{name}' removed while {rows} row(s) still hold it",
                "tiers", _line(spec, "tiers"), allowable=False,
                way_forward=f"if the tier was renamed, declare it: `renamed_from: {name}` on "
                "the new tier; otherwise erase or move its rows first, then remove it")
        else:
            yield Change("additive", f"tier '{name}' removed (no rows hold it)", "tiers",
                         _line(spec, "tiers"))
    yield from _persistent_change(old, spec, plan, facts, renames, before)


def _persistent_change(old: Shape, spec: AgentSpec, plan: Plan, facts: Facts,
                       renames: Mapping[str, str], before: list[Step]) -> Iterator[Change]:
    new_name = spec.persistent_tier.name
    old_name = old["persistent_tier"]
    if new_name == old_name:
        return
    index = _tier_index(spec, new_name)
    line = _line(spec, "tiers", index)
    if facts.server_version < PERSISTENT_EXPRESSION_VERSION:
        yield Change(
            "rebuild", f"the persistent tier changes from '{old_name}' to '{new_name}'",
            f"tiers[{index}].persistent", line, allowable=False,
            way_forward="changing the generated `persistent` column needs PostgreSQL 17 or "
            "later (ALTER COLUMN ... SET EXPRESSION); upgrade the server, or keep "
            f"'{old_name}' as the persistent tier")
        return
    memories = plan.tables.memories
    before.append(Step(
        f"{memories.qualified}: the generated column persistent follows tier '{new_name}'",
        sql.SQL("ALTER TABLE {} ALTER COLUMN persistent SET EXPRESSION AS ({} = {})").format(
            memories.ident, sql.Identifier("tier"), sql.Literal(new_name))))
    step = (f"recompute the generated column persistent = (tier = '{new_name}') "
            f"(rewrites {memories.qualified})")
    if renames.get(new_name) == old_name:
        yield Change("rebuild", f"the persistent tier follows its rename to '{new_name}'",
                     f"tiers[{index}].renamed_from", line, (step,))
    else:
        yield Change(
            "weakening", f"the persistent tier changes from '{old_name}' to '{new_name}': "
            f"rows of '{old_name}' lose the persistent tier's protections", f"tiers[{index}]",
            line, (step,),
            way_forward=f"if '{new_name}' is '{old_name}' renamed, declare `renamed_from: "
            f"{old_name}`; otherwise run migrate with --allow weakening --reason TEXT")


def _anchor_changes(old: Shape, spec: AgentSpec, plan: Plan, facts: Facts,
                    before: list[Step]) -> Iterator[Change]:
    old_keys: list[str] = list(old["anchor_keys"])
    new_keys = list(spec.anchor.keys)
    renames = {new: was for new, was in spec.anchor.renamed_from.items()
               if was in old_keys and new not in old_keys}
    renamed_old = set(renames.values())
    if renames:
        views = [(view, step) for step in plan.steps
                 for view in [step.title.removesuffix(": view")]
                 if step.title.endswith(": view")]
        # a view's columns cannot be renamed by CREATE OR REPLACE: drop, the plan recreates
        before.extend(Step(f"anchor rename: drop view {name} (the plan recreates it)",
                           sql.SQL("DROP VIEW IF EXISTS {}").format(
                               sql.Identifier(*name.split(".", 1))))
                      for name, _ in reversed(views))
    for new, was in renames.items():
        tables = [d.table for d in plan.definitions if was in facts.columns.get(d.table.name, ())]
        for table in tables:
            before.append(Step(
                f"anchor rename: {table.qualified} column {was} becomes {new}",
                sql.SQL("ALTER TABLE {} RENAME COLUMN {} TO {}").format(
                    table.ident, sql.Identifier(was), sql.Identifier(new))))
        yield Change("rebuild", f"anchor key '{was}' renamed to '{new}'",
                     "anchor.renamed_from", _line(spec, "anchor", "renamed_from", new),
                     (f"rename column {was} to {new} in {len(tables)} table(s); drop and "
                      "recreate the views",))
    for key in old_keys:
        if key not in new_keys and key not in renamed_old:
            yield Change(
                "destructive", f"anchor key '{key}' removed", "anchor.keys",
                _line(spec, "anchor", "keys"), allowable=False,
                way_forward=f"if a key was renamed, declare it under anchor: `renamed_from: "
                f"{{<new key>: {key}}}`; an anchor key cannot be dropped from a store")
    for key in new_keys:
        if key not in old_keys and key not in renames:
            yield Change(
                "destructive", f"anchor key '{key}' added to an existing store: its rows have "
                "no value for it", "anchor.keys", _line(spec, "anchor", "keys"),
                allowable=False,
                way_forward="if it replaces a key, declare the rename (`renamed_from`); "
                "otherwise give the agent a new store (a new prefix) for the new scope")


def _embedding_changes(old: Shape, new: Shape, spec: AgentSpec) -> Iterator[Change]:
    was, now = old.get("embedding_dims"), new["embedding_dims"]
    if was is None or now is None or was == now:
        return
    yield Change(
        "rebuild", f"embedding dims {was} -> {now}: every stored vector must be re-embedded "
        "into a new column before retrieval can switch to it", "retrieval.embedding.dims",
        _line(spec, "retrieval", "embedding", "dims"), allowable=False,
        steps=(f"new embedding column halfvec({now})", "primitives reembed (every row)",
               "switch retrieval to the new column"),
        way_forward=f"migrate has no embedder, so it does not make vectors: run `primitives "
        f"reembed SPEC`, which stages a halfvec({now}) column, embeds every row with the "
        "spec's model while retrieval goes on, switches to it and applies the plan; or keep "
        f"dims: {was}")


def _retention_changes(old: Shape, new: Shape, spec: AgentSpec) -> Iterator[Change]:
    old_retention: Mapping[str, int | None] = old.get("audit_retention_s", {})
    for tier, now in new["audit_retention_s"].items():
        before = tier if tier in old_retention else spec.tier(tier).renamed_from
        if before is None or before not in old_retention:
            continue
        was = old_retention[before]
        if was == now:
            continue
        index = _tier_index(spec, tier)
        line = _line(spec, "tiers", index, "retention")
        summary = f"tier '{tier}': audit retention {_seconds(was)} -> {_seconds(now)}"
        if was is not None and (now is None or now < was):
            yield Change("weakening", summary + " (journal events kept for less time)",
                         f"tiers[{index}].retention.audit_retention", line,
                         way_forward=f"keep audit_retention at {_seconds(was)}, or run "
                         "migrate with --allow weakening --reason TEXT (journalled for the "
                         "auditor in primitives.plan_history)")
        else:
            yield Change("additive", summary, f"tiers[{index}].retention.audit_retention", line)
