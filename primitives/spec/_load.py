"""Loading specs and policies: YAML -> validated, defaults-filled, frozen models.

Every problem is reported as a :class:`~primitives.errors.SpecError` naming the
file, line and field, and saying what is allowed. All problems of one file are
collected (``err.problems``) so a user fixes them in one pass.
"""

from __future__ import annotations

import itertools
import os
import types
import typing
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from primitives.errors import PolicyNotFound, SpecError
from primitives.spec._behavior import (
    PROMOTION_DEFAULTS,
    TYPOLOGY_DEFAULTS,
    Behavior,
    ConflictPolicy,
    ConsolidationPolicy,
    ContextBudget,
    DecayPolicy,
    LifecyclePolicy,
    PromotionRule,
    WritePolicy,
)
from primitives.spec._check import check_consolidation, check_foundation
from primitives.spec._common import format_duration, split_ref
from primitives.spec._common import suggest as _suggest
from primitives.spec._enforcement import _Declared
from primitives.spec._models import AgentSpec, Deviation
from primitives.spec._policies import Policy, SanitizationPolicy
from primitives.spec._yaml import LineMap, dotted, read_yaml

__all__ = ["load_policies", "load_spec", "load_spec_text", "load_specs"]

Loc = tuple[str | int, ...]

_FOUNDATIONAL = ("anchor", "typology", "tiers", "persistence", "retrieval")
_POLICY_MODELS: dict[str, type[BaseModel]] = {
    "lifecycle": LifecyclePolicy,
    "decay": DecayPolicy,
    "write_policy": WritePolicy,
    "conflict": ConflictPolicy,
    "consolidation": ConsolidationPolicy,
}
# Changing this field switches the policy's kind: the default's kind-specific parameters
# are then not inherited.
_KIND_FIELD = {
    "decay": "model",
    "write_policy": "mode",
    "conflict": "strategy",
    "consolidation": "method",
    "lifecycle": None,
}
# Fields whose explicit value never counts as a deviation.
_NOT_DEVIATIONS = {"justification", "sanitization", "description"}

_POLICY_ADAPTER: TypeAdapter[Policy] = TypeAdapter(Policy)


class _Problems:
    """Collects located problems for one file."""

    def __init__(self, file: str, lines: LineMap) -> None:
        self.file = file
        self.lines = lines
        self.items: list[SpecError] = []

    def add(self, loc: Loc, message: str, *, cls: type[SpecError] = SpecError) -> None:
        self.items.append(
            cls(message, file=self.file, line=self.lines.line_of(loc), field=dotted(loc) or None)
        )

    def add_validation(self, err: ValidationError, prefix: Loc, model: Any) -> None:
        for item in err.errors():
            loc: Loc = (*prefix, *item["loc"])
            self.add(loc, _explain(item, loc[len(prefix):], model))

    def raise_if_any(self) -> None:
        if self.items:
            # Raised as the first problem's class, so a missing policy is a PolicyNotFound.
            first = self.items[0]
            raise type(first)(first.message, file=first.file, line=first.line, field=first.field,
                              problems=list(self.items))


# pydantic error -> message a user can act on ---------------------------------------------------
def _unwrap(annotation: Any) -> list[Any]:
    """Member types of an annotation: Annotated and Optional peeled, unions flattened."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        out: list[Any] = []
        for arg in typing.get_args(annotation):
            if arg is not type(None):
                out.extend(_unwrap(arg))
        return out
    return [annotation]


def _fields_of(cls: type[BaseModel]) -> dict[str, Any]:
    return {(info.alias or name): info.annotation for name, info in cls.model_fields.items()}


def _allowed_keys(model: Any, loc: Loc) -> list[str]:
    """Keys allowed in the mapping at ``loc`` under ``model`` (empty if unknown)."""
    current = [model]
    for step in loc:
        nxt: list[Any] = []
        for ann in current:
            for member in _unwrap(ann):
                origin = typing.get_origin(member)
                if isinstance(member, type) and issubclass(member, BaseModel):
                    fields = _fields_of(member)
                    if isinstance(step, str) and step in fields:
                        nxt.append(fields[step])
                elif origin is list and isinstance(step, int):
                    nxt.append(typing.get_args(member)[0])
                elif origin is dict and isinstance(step, str):
                    nxt.append(typing.get_args(member)[1])
        current = nxt
    keys: list[str] = []
    for ann in current:
        for member in _unwrap(ann):
            if isinstance(member, type) and issubclass(member, BaseModel):
                keys.extend(k for k in _fields_of(member) if k not in keys)
    return keys


def _explain(item: Any, loc: Loc, model: Any) -> str:
    kind = item["type"]
    if kind == "extra_forbidden":
        key = str(loc[-1])
        allowed = _allowed_keys(model, loc[:-1])
        return (f"unknown key '{key}'{_suggest(key, allowed)}"
                + (f". Allowed keys: {', '.join(allowed)}." if allowed else ""))
    if kind == "literal_error":
        expected = item.get("ctx", {}).get("expected", "")
        options = [part.strip(" '") for part in expected.replace(" or ", ", ").split(",")]
        value = item.get("input")
        return (f"unknown value {value!r}{_suggest(str(value), options)}."
                f" Expected one of: {', '.join(options)}.")
    if kind == "missing":
        name = str(loc[-1])
        if len(loc) == 1 and name in _FOUNDATIONAL:
            return (f"missing foundational primitive '{name}': every spec states its {name} "
                    "explicitly (run `primitives init` for a scaffold)")
        return f"missing required key '{name}'"
    message = str(item["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    return message


# Behavioural defaults -------------------------------------------------------------------------
def _differs(merged: BaseModel, default: BaseModel, user: dict[str, Any]) -> list[str]:
    return [
        key for key in user
        if key not in _NOT_DEVIATIONS and key in type(merged).model_fields
        and getattr(merged, key) != getattr(default, key)
    ]


def _resolve_policy(
    primitive: str, subject: str, default_raw: dict[str, Any], user: Any, loc: Loc,
    problems: _Problems, deviations: list[Deviation], cls: type[BaseModel],
) -> BaseModel | None:
    if user is None:
        user = {}
    if not isinstance(user, dict):
        problems.add(loc, f"expected a mapping of {cls.__name__} fields")
        return None
    kind_field = _KIND_FIELD.get(primitive, "criteria" if primitive == "promotion" else None)
    if kind_field and kind_field in user and user[kind_field] != default_raw.get(kind_field):
        merged_raw = {**{k: v for k, v in default_raw.items() if k == kind_field}, **user}
    else:
        merged_raw = {**default_raw, **user}
    try:
        merged = cls.model_validate(merged_raw)
        default = cls.model_validate(default_raw | {k: user[k] for k in ("from", "to") if k in user})
    except ValidationError as err:
        problems.add_validation(err, loc, cls)
        return None
    changed = _differs(merged, default, user)
    justification = user.get("justification")
    if changed and not justification:
        detail = ", ".join(
            f"{key}: {_show(getattr(default, key))} -> {_show(getattr(merged, key))}"
            for key in changed
        )
        problems.add(
            loc,
            f"deviates from the typology default ({detail}) without a justification; "
            "add `justification: <why>` or remove the override",
        )
        return None
    for key in changed:
        deviations.append(Deviation(
            primitive=primitive, subject=subject, field=key, default=_show(getattr(default, key)),
            value=_show(getattr(merged, key)), justification=str(justification),
        ))
    return merged


def _show(value: Any) -> Any:
    if isinstance(value, timedelta):
        return format_duration(value)  # as the spec spells it ("60d"), not ISO 8601
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, list):
        return [_show(v) for v in value]
    return TypeAdapter(Any).dump_python(value, mode="json")


def _default_promotions(spec: AgentSpec) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = []
    # A checkpointer-placed tier is LangGraph thread state, not memory rows: nothing compounds
    # out of it, so compounding pairs consecutive store-placed tiers.
    tiers = [tier for tier in spec.tiers if tier.placement == "store"]
    for lower, upper in itertools.pairwise(tiers):
        if "episodic" in spec.typology.get(lower.name, []) and "episodic" in spec.typology.get(
            upper.name, []
        ):
            rules.append({"from": f"{lower.name}.episodic", "to": f"{upper.name}.episodic"})
    top = spec.persistent_tier.name
    kinds = spec.typology.get(top, [])
    if "episodic" in kinds and "semantic" in kinds:
        rules.append({"from": f"{top}.episodic", "to": f"{top}.semantic"})
    return rules


def _default_context(spec: AgentSpec) -> dict[str, Any]:
    return {
        "blocks": [
            {
                "name": tier.name,
                "tiers": [tier.name],
                "tokens": 1024,
                "priority": index + 1,
                "presence": "on_demand" if tier.persistent else "always",
            }
            for index, tier in enumerate(spec.tiers)
        ]
    }


def _resolve_behavior(
    spec: AgentSpec, raw: Any, problems: _Problems
) -> tuple[Behavior, list[Deviation]]:
    deviations: list[Deviation] = []
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        problems.add(("behavior",), "expected a mapping of behavioural primitives")
        return Behavior(), deviations
    allowed = [*_POLICY_MODELS, "promotion", "context"]
    for key in raw:
        if key not in allowed:
            problems.add(("behavior", key), f"unknown behavioural primitive '{key}'"
                         f"{_suggest(str(key), allowed)}. Allowed: {', '.join(allowed)}.")
    used = spec.typologies
    resolved: dict[str, Any] = {}
    for primitive, cls in _POLICY_MODELS.items():
        entries = raw.get(primitive) or {}
        loc: Loc = ("behavior", primitive)
        if not isinstance(entries, dict):
            problems.add(loc, "expected a mapping from typology to policy")
            continue
        for typ in entries:
            if typ not in used:
                problems.add((*loc, typ), f"typology '{typ}' is not used by any tier of this "
                             f"spec{_suggest(str(typ), used)}. Used: {', '.join(used)}.")
        resolved[primitive] = {}
        for typ in used:
            policy = _resolve_policy(primitive, typ, TYPOLOGY_DEFAULTS[primitive][typ],
                                     entries.get(typ), (*loc, typ), problems, deviations, cls)
            if policy is not None:
                resolved[primitive][typ] = policy
    resolved["promotion"] = _resolve_promotions(spec, raw.get("promotion"), problems, deviations)
    resolved["context"] = _resolve_context(spec, raw.get("context"), problems, deviations)
    return Behavior.model_validate(resolved), deviations


def _resolve_promotions(
    spec: AgentSpec, raw: Any, problems: _Problems, deviations: list[Deviation]
) -> list[PromotionRule]:
    loc: Loc = ("behavior", "promotion")
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        problems.add(loc, "expected a list of promotion rules")
        return []
    explicit: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}
    for index, rule in enumerate(raw):
        if not isinstance(rule, dict) or "from" not in rule or "to" not in rule:
            problems.add((*loc, index), "a promotion rule needs 'from' and 'to' ('<tier>.<typology>')")
            continue
        explicit[(str(rule["from"]), str(rule["to"]))] = (index, rule)
    order = [(r["from"], r["to"]) for r in _default_promotions(spec)]
    order += [key for key in explicit if key not in order]
    rules: list[PromotionRule] = []
    gates = {gate.name for gate in spec.discipline.sanitization}
    for source, target in order:
        position, user = explicit.get((source, target), (-1, {"from": source, "to": target}))
        rule_loc: Loc = (*loc, position) if position >= 0 else loc
        pair = _promotion_pair(spec, source, target, rule_loc, problems)
        if pair is None:
            continue
        default = {"from": source, "to": target, **PROMOTION_DEFAULTS[pair]}
        policy = _resolve_policy("promotion", f"{source} -> {target}", default, user, rule_loc,
                                 problems, deviations, PromotionRule)
        if isinstance(policy, PromotionRule):
            if policy.sanitization and policy.sanitization not in gates:
                problems.add((*rule_loc, "sanitization"),
                             f"no sanitization gate named '{policy.sanitization}'"
                             f"{_suggest(policy.sanitization, sorted(gates))}."
                             f" Declared gates: {', '.join(sorted(gates)) or 'none'}.")
            rules.append(policy)
    return rules


def _promotion_pair(
    spec: AgentSpec, source: str, target: str, loc: Loc, problems: _Problems
) -> tuple[str, str] | None:
    refs = []
    for key, ref in (("from", source), ("to", target)):
        try:
            tier, typ = split_ref(ref)
        except ValueError:
            problems.add((*loc, key), f"expected '<tier>.<typology>', got {ref!r}")
            return None
        if typ not in spec.typology.get(tier, []):
            problems.add((*loc, key), f"'{ref}' is not a tier and typology of this spec; "
                         f"declared: {', '.join(_refs(spec))}")
            return None
        if spec.tier(tier).placement == "checkpointer":
            problems.add((*loc, key), f"tier '{tier}' is checkpointer-placed: LangGraph thread "
                         "state holds no memory rows to promote; write the observations to a "
                         "store tier instead")
            return None
        refs.append((tier, typ))
    (src_tier, src_typ), (dst_tier, dst_typ) = refs
    if spec.tier_names.index(dst_tier) < spec.tier_names.index(src_tier):
        problems.add(loc, f"promotion goes up the tiers; '{target}' is below '{source}'")
        return None
    if src_typ == "procedural":
        problems.add(loc, "procedural memory is never promoted: it is already the durable form")
        return None
    if (src_typ, dst_typ) not in PROMOTION_DEFAULTS:
        problems.add(loc, f"no promotion path from {src_typ} to {dst_typ}; allowed: "
                     + ", ".join(f"{a}->{b}" for a, b in PROMOTION_DEFAULTS))
        return None
    if (src_tier, src_typ) == (dst_tier, dst_typ):
        problems.add(loc, "a promotion must change the tier or the typology")
        return None
    return (src_typ, dst_typ)


def _refs(spec: AgentSpec) -> list[str]:
    return [f"{tier}.{typ}" for tier, kinds in spec.typology.items() for typ in kinds]


def _resolve_context(
    spec: AgentSpec, raw: Any, problems: _Problems, deviations: list[Deviation]
) -> ContextBudget | None:
    loc: Loc = ("behavior", "context")
    default_raw = _default_context(spec)
    default = ContextBudget.model_validate(default_raw)
    if raw is None:
        return default
    if not isinstance(raw, dict):
        problems.add(loc, "expected a mapping with 'blocks'")
        return None
    try:
        merged = ContextBudget.model_validate({**default_raw, **raw})
    except ValidationError as err:
        problems.add_validation(err, loc, ContextBudget)
        return None
    for index, block in enumerate(merged.blocks):
        for tier in block.tiers:
            if tier not in spec.tier_names:
                problems.add((*loc, "blocks", index, "tiers"),
                             f"unknown tier '{tier}'{_suggest(tier, spec.tier_names)}")
        if block.content == "entity_profiles" and spec.graph is None:
            problems.add((*loc, "blocks", index, "content"),
                         "entity_profiles blocks need a `graph:` section declaring entity types")
        if block.share is not None and merged.total_tokens is None and not merged.complexity:
            problems.add((*loc, "blocks", index, "share"),
                         "a share of what? give behavior.context.total_tokens or "
                         "behavior.context.complexity, or give this block `tokens`")
        if block.tiers:
            held = {typ for tier in block.tiers for typ in spec.typology.get(tier, [])}
            for typ in block.typology:
                if typ not in held:
                    problems.add((*loc, "blocks", index, "typology"),
                                 f"no tier of this block ({', '.join(block.tiers)}) holds "
                                 f"'{typ}' memory")
    shares = sum(block.share or 0 for block in merged.blocks)
    if shares > 1 + 1e-9:
        problems.add((*loc, "blocks"), f"block shares add up to {shares:g}; at most 1")
    changed = [name for name in ("total_tokens", "blocks", "complexity")
               if getattr(merged, name) != getattr(default, name)]
    if changed:
        if not raw.get("justification"):
            problems.add(loc, "the context budget deviates from the default (one block per tier, "
                         "1024 tokens, transient tiers always present) without a justification")
            return None
        for name in changed:
            deviations.append(Deviation(
                primitive="context", subject="budget", field=name,
                default=_show(getattr(default, name)), value=_show(getattr(merged, name)),
                justification=str(raw["justification"]),
            ))
    return merged


# Policies ---------------------------------------------------------------------------------------
def load_policies(directory: str | os.PathLike[str]) -> dict[str, Policy]:
    """Load every ``*.yaml`` policy in ``directory`` keyed by its name."""
    found: dict[str, Policy] = {}
    folder = Path(directory)
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("*.y*ml")):
        data, lines = read_yaml(path.read_text(encoding="utf-8"), str(path))
        problems = _Problems(str(path), lines)
        try:
            policy = _POLICY_ADAPTER.validate_python(data)
        except ValidationError as err:
            problems.add_validation(err, (), Policy)
            problems.raise_if_any()
            raise AssertionError("unreachable") from err
        if policy.name in found:
            problems.add(("name",), f"policy name '{policy.name}' is defined twice")
            problems.raise_if_any()
        found[policy.name] = policy
    return found


def _default_policies_dir(spec_path: Path | None) -> Path:
    env = os.environ.get("PRIMITIVES_POLICIES")
    if env:
        return Path(env)
    if spec_path is not None:
        for base in (spec_path.parent, spec_path.parent.parent):
            if (base / "policies").is_dir():
                return base / "policies"
    return Path("policies")


def _attach_policies(
    spec: AgentSpec, policies: dict[str, Policy], problems: _Problems, folder: Path
) -> dict[str, Policy]:
    wanted: list[tuple[Loc, str, str]] = []
    for index, gate in enumerate(spec.discipline.sanitization):
        if gate.policy:
            wanted.append((("discipline", "sanitization", index, "policy"), gate.policy,
                           "sanitization"))
    if spec.discipline.pii:
        wanted.append((("discipline", "pii", "policy"), spec.discipline.pii.policy, "pii"))
    for index, tier in enumerate(spec.tiers):
        if tier.retention and tier.retention.policy:
            wanted.append((("tiers", index, "retention", "policy"), tier.retention.policy,
                           "retention"))
    if spec.discipline.visibility.policy:
        wanted.append((("discipline", "visibility", "policy"), spec.discipline.visibility.policy,
                       "access"))
    attached: dict[str, Policy] = {}
    for loc, name, kind in wanted:
        policy = policies.get(name)
        if policy is None:
            problems.add(loc, f"no policy named '{name}' in {folder}"
                         f"{_suggest(name, sorted(policies))}. Available: "
                         f"{', '.join(sorted(policies)) or 'none'}.", cls=PolicyNotFound)
        elif policy.kind != kind:
            problems.add(loc, f"policy '{name}' is of kind '{policy.kind}', expected '{kind}'")
        else:
            attached[name] = policy
    return attached


def _check_published_gates(spec: AgentSpec, attached: dict[str, Policy],
                           problems: _Problems) -> None:
    """An event-driven spec publishes every gate's crossings from a trigger in the write's
    own statement, where the PII detector (Python) cannot run: a gate that strips PII is
    refused there rather than published unstripped."""
    if spec.discipline.visibility.cross_context != "event_driven":
        return
    for index, gate in enumerate(spec.discipline.sanitization):
        policy = attached.get(gate.policy) if gate.policy else None
        if isinstance(policy, SanitizationPolicy) and policy.strip_pii:
            problems.add(
                ("discipline", "sanitization", index, "policy"),
                f"gate '{gate.name}' strips PII ({', '.join(policy.strip_pii)}), which an "
                "event-driven spec cannot do when it publishes (the outbox is written in the "
                "write's own statement); redact PII at the write (discipline.pii) instead")


# Entry points -----------------------------------------------------------------------------------
def load_spec_text(
    text: str,
    *,
    file: str = "<spec>",
    policies: dict[str, Policy] | None = None,
    policies_dir: str | os.PathLike[str] | None = None,
) -> AgentSpec:
    """Validate spec text; fill typology defaults; check references. Raises SpecError."""
    data, lines = read_yaml(text, file)
    problems = _Problems(file, lines)
    if not isinstance(data, dict):
        problems.add((), "a spec is a YAML mapping starting with `version: 1` and `agent: <name>`")
        problems.raise_if_any()
    raw_behavior = data.get("behavior")
    for reserved in ("deviations", "source", "policies"):
        if reserved in data:
            problems.add((reserved,), f"'{reserved}' is filled in by the loader; remove it")
    problems.raise_if_any()
    foundation = {k: v for k, v in data.items() if k != "behavior"}
    try:
        spec = AgentSpec.model_validate(foundation)
    except ValidationError as err:
        problems.add_validation(err, (), AgentSpec)
        problems.raise_if_any()
        raise AssertionError("unreachable") from err
    for loc, message in check_foundation(spec):
        problems.add(loc, message)
    problems.raise_if_any()
    behavior, deviations = _resolve_behavior(spec, raw_behavior, problems)
    folder = Path(policies_dir) if policies_dir else _default_policies_dir(
        Path(file) if file != "<spec>" else None
    )
    available = policies if policies is not None else load_policies(folder)
    attached = _attach_policies(spec, available, problems, folder)
    _check_published_gates(spec, attached, problems)
    problems.raise_if_any()
    loaded = spec.model_copy(update={
        "behavior": behavior, "deviations": deviations, "policies": attached,
        "source": file if file != "<spec>" else None,
    })
    for loc, message in check_consolidation(loaded):
        problems.add(loc, message)
    problems.raise_if_any()
    loaded._declared = _Declared(raw=data, lines=lines)
    return loaded


def load_spec(
    path: str | os.PathLike[str],
    *,
    policies: dict[str, Policy] | None = None,
    policies_dir: str | os.PathLike[str] | None = None,
) -> AgentSpec:
    """Load ``agents/<name>.yaml``.

    >>> spec = load_spec("agents/spectral_agent.yaml")  # doctest: +SKIP
    >>> spec.anchor.tenant_key
    'workspace_id'
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as err:
        raise SpecError(f"cannot read spec: {err.strerror}", file=str(file)) from err
    return load_spec_text(text, file=str(file), policies=policies, policies_dir=policies_dir)


def load_specs(paths: list[str | os.PathLike[str]]) -> list[AgentSpec]:
    """Load several specs; agent names must be unique, and so must schema+prefix pairs."""
    specs = [load_spec(p) for p in paths]
    seen: dict[tuple[str, str], str] = {}
    names: dict[str, str] = {}
    for spec in specs:
        where = spec.source or spec.agent
        if spec.agent in names:
            raise SpecError(f"agent name '{spec.agent}' is also used by {names[spec.agent]}",
                            file=where, field="agent")
        names[spec.agent] = where
        key = (spec.persistence.store.schema_, spec.persistence.store.prefix)
        if key in seen:
            raise SpecError(f"store schema and prefix {key[0]}.{key[1]} are also used by "
                            f"{seen[key]}", file=where, field="persistence.store.prefix")
        seen[key] = where
    return specs
