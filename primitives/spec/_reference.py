"""The spec reference in Markdown, generated from the spec models.

``primitives schema --markdown`` prints it; ``docs/reference/spec.md`` is its
committed copy (``make docs`` regenerates it, a unit test keeps it current).
Types, defaults and descriptions come from the pydantic models; the typology
tables come from :data:`TYPOLOGY_DEFAULTS` and :data:`PROMOTION_DEFAULTS`.

>>> text = spec_reference_markdown()
>>> text.startswith("# Spec reference")
True
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Collection, Sequence
from datetime import timedelta
from typing import Any, Literal, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from primitives.spec._behavior import PROMOTION_DEFAULTS, TYPOLOGY_DEFAULTS, Behavior
from primitives.spec._common import (
    Duration,
    Name,
    TierTypologyRef,
    Typology,
    format_duration,
)
from primitives.spec._models import AgentSpec
from primitives.spec._policies import Policy

__all__ = ["spec_reference_markdown"]

Row = tuple[str, str, str, str]

_NAME_INFO: FieldInfo = get_args(Name)[1]
_NAME_PATTERN: str | None = next(
    (getattr(m, "pattern", None) for m in _NAME_INFO.metadata if getattr(m, "pattern", None)),
    None,
)
_LOADER_FIELDS = ("policies", "deviations", "source")
_TOP_LEVEL = ("version", "agent", "description")
_TYPOLOGY_KEYED = ("lifecycle", "decay", "write_policy", "conflict", "consolidation")
_SEED_REFERENCE = re.compile(r"\s*\([^()]*\bseed \d{3}\b[^()]*\)|^seed \d{3}:\s*", re.IGNORECASE)

_SECTIONS: tuple[tuple[str, str, str], ...] = (
    ("anchor", "1. Anchor",
     "The scope tuple that keys the memory. The first key is the tenant key: it leads every "
     "table key, index and row-level security policy, and every write must carry it."),
    ("typology", "2. Typology",
     "Which kinds of memory each tier holds, written as `{tier: [typology, ...]}`. Every tier "
     "appears here, and the behavioural defaults follow from what is listed."),
    ("tiers", "3. Tiers",
     "Lowest tier first. Exactly one tier, the last, is `persistent: true`. Each boundary is "
     "exactly one of `lifecycle`, `scope_change` or `anchor_escalation`."),
    ("persistence", "4. Persistence",
     "Where memory lives: thread state in the LangGraph checkpointer's schema, long-term memory "
     "in tables named `<store.schema>.<store.prefix>_...`."),
    ("retrieval", "5. Retrieval",
     "Which signals rank memories and how their ranked lists are fused into one."),
    ("behavior", "6-12. Behavioural primitives",
     "Leave a key out and its typology default applies (see Typology defaults below). A value "
     "that differs from its default needs `justification:` in the same entry, or the loader "
     "refuses the spec. Writing the default itself needs no justification."),
    ("discipline", "13-15. Discipline primitives",
     "Explicit per agent; nothing here defaults from the typology. A `non_mirror` entry may be "
     "a bare category name: `non_mirror: [billing_records]`."),
    ("audit", "16. Audit posture",
     "`audit: default` is shorthand for `{posture: default}`: append-only journal, no hard "
     "delete of persistent or action-linked memory. An exemption needs a justification."),
    ("graph", "Graph memory (optional)",
     "Typed edges and entities between memories. The `graph` retrieval signal needs this section."),
    ("determinism", "Determinism (optional)",
     "Clock, ids and snapshot hashes for specs that must replay exactly."),
)

# Per behavioural primitive: heading, one-line summary (the table's first row), optional note.
_BEHAVIOR_SECTIONS: dict[str, tuple[str, str, str]] = {
    "lifecycle": ("6. Lifecycle", "which rows are dropped, archived or kept, per typology", ""),
    "decay": ("7. Decay", "how a row's weight or confidence changes with age, per typology", ""),
    "write_policy": ("8. Write policy", "who may create rows of each typology, and when", ""),
    "promotion": (
        "9. Promotion",
        "rules that move entries to a higher tier or another typology",
        "Without a list, the loader adds a compounding rule between adjacent tiers that both hold "
        "episodic memory and, when the persistent tier holds episodic and semantic memory, an "
        "episodic to semantic rule. List a rule to attach a sanitization gate or change its "
        "criteria.",
    ),
    "conflict": ("10. Conflict", "what a contradicting write does to the older row, per typology",
                 ""),
    "consolidation": ("11. Consolidation",
                      "how similar or overlapping rows are combined, per typology", ""),
    "context": (
        "12. Context budget",
        "token budget of the prompt, split into prioritised blocks",
        "Without this section each tier gets one block of 1024 tokens, in tier order; transient "
        "tiers are always present and the persistent tier is retrieved on demand.",
    ),
}

# Fields whose model has no description. A unit test checks every path still exists.
_NOTES: dict[str, str] = {
    "version": "spec language version",
    "agent": "the agent's name; unique across specs",
    "description": "free text for readers",
    "anchor.keys": "the scope keys, tenant key first",
    "anchor.required_at_write": "keys every write must carry; includes the tenant key",
    "anchor.nullable_for_cross_scope": "keys a cross-scope query may leave empty",
    "tiers[].name": "the tier's name, used in namespaces and `<tier>.<typology>` references",
    "tiers[].boundary": "what ends the tier's scope",
    "tiers[].boundary.lifecycle": "a lifecycle event ends the scope",
    "tiers[].boundary.scope_change": "a change of this anchor key ends the scope",
    "tiers[].boundary.anchor_escalation": "the scope widens from one key to another",
    "tiers[].persistent": "the top tier that survives across sessions",
    "tiers[].placement": "transient tiers may live in the checkpointer instead of the store",
    "tiers[].retention.tombstone_orphans_after": "an ORPHANED row becomes TOMBSTONED after this",
    "tiers[].retention.deletion_requires": "roles that must approve a deletion",
    "persistence.checkpointer.enabled": "keep short-term thread state in the checkpointer",
    "persistence.checkpointer.schema": "schema of the checkpointer tables",
    "persistence.store.schema": "schema of the memory tables",
    "persistence.store.prefix": "prefix of the memory table names",
    "persistence.store.limits.content_chars": "longest memory content accepted",
    "persistence.store.limits.value_bytes": "largest stored value (JSON) accepted",
    "persistence.store.limits.envelope_bytes": "largest structured envelope accepted",
    "persistence.store.limits.key_chars": "longest memory key accepted",
    "persistence.store.limits.namespace_labels": "most labels in a memory's namespace",
    "persistence.store.limits.label_chars": "longest namespace label accepted",
    "persistence.store.limits.tags": "most tags on one memory",
    "persistence.store.limits.tag_chars": "longest tag accepted",
    "persistence.store.limits.source_chars": "longest `source` accepted",
    "persistence.store.limits.scope_id_chars": "longest `scope_id` accepted",
    "persistence.store.limits.json_depth": "deepest nesting of a value or envelope accepted",
    "retrieval.signals": "ranked lists to fuse",
    "retrieval.fusion.method": "reciprocal rank fusion, or a weighted score",
    "retrieval.fusion.k": "the RRF constant in `w / (k + rank)`",
    "retrieval.fusion.weights": "per-signal weight (1.0 when not listed)",
    "retrieval.embedding.model": "embedding model id recorded with every vector",
    "retrieval.embedding.dims": "vector dimensions",
    "retrieval.embedding.query_instruction": "prefix added to queries before embedding",
    "retrieval.reranker": "an optional reranking pass over the fused list",
    "retrieval.intents.routes": "signal weights for each query intent",
    "retrieval.text_search_config": "PostgreSQL text search configuration for the lexical signal",
    "retrieval.default_limit": "results returned when the caller gives no limit",
    "graph.edges": "edge types this memory records",
    "graph.entity_types": "entity kinds extracted and linked",
    "graph.protect_entity_mentions_over": "decay protect `entity_mentions`: a memory mentioning "
                                          "an entity mentioned more often than this keeps full "
                                          "confidence",
    "graph.max_depth": "deepest traversal of the graph signal",
    "graph.walk_from": "top rows of each other query signal the graph walk also starts from",
    "graph.temporal_edges_on_write": "link each write to the previous one in its session",
    "graph.reinforcement": "r: an Ebbinghaus memory's confidence gains r x ln(1 + accesses / "
                           "20), up to 1",
    "discipline.non_mirror[].category": "a kind of canonical state the memory must not copy",
    "discipline.non_mirror[].defense": "how copying is prevented",
    "discipline.non_mirror[].similarity_threshold": "trigram similarity that counts as a copy",
    "discipline.non_mirror[].note_chars": "longest content of a memory referencing the "
                                          "category's rows",
    "discipline.sanitization[].name": "the gate's name, referenced by promotion rules",
    "discipline.sanitization[].from": "the `<tier>.<typology>` whose content crosses",
    "discipline.sanitization[].to": "the destination outside this memory",
    "discipline.sanitization[].strip": "anchor or provenance keys removed on the way",
    "discipline.sanitization[].transform": "how the content changes as it crosses",
    "discipline.sanitization[].policy": "a policies/ file of kind 'sanitization'",
    "discipline.visibility.rls": "tenant isolation by a transaction-local setting",
    "discipline.visibility.cross_context": "how other contexts may consume this memory",
    "discipline.visibility.events": "event names published for event-driven consumers",
    "discipline.visibility.tools": "tools through which other contexts may ask",
    "discipline.pii.before": "where the PII check runs",
    "audit.posture": "the universal audit posture",
    "audit.exemptions": "justified exceptions to the posture",
    "determinism.clock": "wall-clock time, or workflow ticks",
    "determinism.ids": "random ids, or ids derived from a seed",
    "determinism.snapshot_hash": "hash of each snapshot, for replay checks",
    "determinism.replay": "whether a run must replay exactly",
    "typology": "typologies held by each tier, keyed by tier name",
    "tiers[].boundary.anchor_escalation.from": "the narrower anchor key",
    "tiers[].boundary.anchor_escalation.to": "the broader anchor key promoted rows land in "
                                             "(narrower keys cleared)",
    "tiers[].description": "free text for readers",
    "persistence.checkpointer": "LangGraph checkpointer for short-term thread state",
    "persistence.store": "tables for long-term memory",
    "retrieval.fusion": "how the signals' ranked lists become one",
    "retrieval.embedding": "the embedding model pinned for this memory",
    "retrieval.reranker.model": "cross-encoder model id",
    "retrieval.reranker.top_n": "how many fused results are reranked",
    "retrieval.intents.classifier": "keyword rules, or similarity to embedded example queries",
    "retrieval.intents.threshold": "embedding classifier: below this similarity the intent is "
                                   "`general`",
    "retrieval.abstain.min_fused_score": "hits scoring below this are dropped; a query left "
                                         "with none abstains",
    "retrieval.abstain.message": "what the caller gets instead",
    "behavior.lifecycle.<typology>.transient": "what happens to rows on a transient tier when "
                                               "its scope ends",
    "behavior.lifecycle.<typology>.persistent": "how rows on the persistent tier live: disposed "
                                                "under pressure, tracked by corroboration, kept, "
                                                "or append-only",
    "behavior.lifecycle.<typology>.archive_on": "what archives a persistent row (the row stays, "
                                                "out of retrieval)",
    "behavior.lifecycle.<typology>.failed_corroborations": "consecutive failed corroborations "
                                                           "that archive a fact",
    "behavior.decay.<typology>.model": "the pressure time puts on a row",
    "behavior.decay.<typology>.exponent": "ebbinghaus: power applied to the time since last "
                                          "access",
    "behavior.decay.<typology>.protect": "rows that never decay",
    "behavior.write_policy.<typology>.mode": "who may write rows of this typology",
    "behavior.write_policy.<typology>.governance.request_kind": "kind of the request that "
                                                                "asks for the write",
    "behavior.write_policy.<typology>.governance.approvals_required": "approvals before the "
                                                                      "write runs",
    "behavior.write_policy.<typology>.governance.approvers": "roles whose approval counts",
    "behavior.promotion[].from": "source `<tier>.<typology>`",
    "behavior.promotion[].to": "target `<tier>.<typology>`",
    "behavior.promotion[].criteria": "what an entry must show to move",
    "behavior.promotion[].at": "when the rule is evaluated",
    "behavior.promotion[].dedup_similarity": "compounding: similarity at which an entry merges "
                                             "into an existing one",
    "behavior.promotion[].min_corroborations": "corroboration: independent observations needed",
    "behavior.promotion[].min_references": "references: uses needed within the window",
    "behavior.promotion[].window_ticks": "references: the window, in ticks",
    "behavior.promotion[].min_versions": "recurrence: versions the fact must survive",
    "behavior.promotion[].idempotency_key": "what makes a repeated promotion a no-op",
    "behavior.conflict.<typology>.strategy": "keep both, close the old one's validity, or "
                                             "supersede it",
    "behavior.conflict.<typology>.contradicted_confidence": "confidence left to a contradicted "
                                                            "memory",
    "behavior.conflict.<typology>.contradicted_decay_rate": "decay rate given to a contradicted "
                                                            "memory",
    "behavior.consolidation.<typology>.method": "how entries merge",
    "behavior.consolidation.<typology>.trigger": "when consolidation runs",
    "behavior.consolidation.<typology>.dedup_similarity": "similarity at which two entries "
                                                          "merge",
    "behavior.consolidation.<typology>.extractor": "deterministic rules, or a chat model "
                                                   "(opt-in)",
    "behavior.consolidation.<typology>.idempotent": "running it twice for one scope changes "
                                                    "nothing",
    "behavior.context.total_tokens": "the whole budget; `share` blocks divide it",
    "behavior.context.blocks[].name": "the block's name in the assembled context",
    "behavior.context.blocks[].tiers": "tiers the block draws from",
    "behavior.context.blocks[].typology": "typologies the block draws from (all when empty)",
    "behavior.context.blocks[].tokens": "fixed budget of the block",
    "behavior.context.blocks[].share": "budget as a share of `total_tokens`",
    "behavior.context.blocks[].presence": "always in the prompt, or retrieved when asked",
    "discipline.non_mirror": "canonical state the memory may reference but never copy",
    "discipline.sanitization": "gates that transform content leaving this memory",
    "discipline.visibility": "who may read the memory",
    "discipline.pii": "PII detection before writes",
    "audit.exemptions[].what": "what the exemption covers",
    "audit.exemptions[].justification": "why it is needed",
}

# Policy fields whose model has no description, by field name.
_POLICY_NOTES: dict[str, str] = {
    "version": "policy file format version",
    "name": "how specs refer to this policy",
    "description": "free text for readers",
    "kind": "which kind of policy this file is",
    "strip_keys": "envelope keys removed",
    "replacement": "text put where a stripped value, pattern or PII was",
    "transform": "how the content changes as it crosses",
    "detectors": "kinds of personal data looked for",
    "on_detect": "redact the match, or refuse the write",
    "store_hash": "keep a hash of each redacted value",
    "admin_raw_reads": "admins may read unredacted content",
    "refusal_message": "returned when a write is refused",
    "orphan_after": "an unreferenced, unretrieved row becomes ORPHANED after this",
    "tombstone_orphans_after": "an ORPHANED row becomes TOMBSTONED after this",
    "audit_retention": "how long journal events are kept immutable at minimum",
    "deletion_requires": "roles that must approve a deletion",
    "auditor_views": "compliance views the auditor role reads",
}


# Types ------------------------------------------------------------------------------------------
def _peel_optional(annotation: Any) -> Any:
    if get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


def _is_alias(annotation: Any, metadata: list[Any], alias: Any) -> bool:
    """``annotation`` is the Annotated ``alias``, or pydantic's field-level unpacking of it."""
    if annotation == alias:
        return True
    base, *marks = get_args(alias)
    return annotation is base and any(m in metadata for m in marks)


def _is_name(annotation: Any, metadata: list[Any]) -> bool:
    if annotation == Name:
        return True
    return annotation is str and any(
        getattr(m, "pattern", None) == _NAME_PATTERN for m in metadata
    )


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _type_name(annotation: Any, metadata: list[Any] | None = None) -> str:
    metadata = metadata or []
    annotation = _peel_optional(annotation)
    if _is_alias(annotation, metadata, Duration):
        return "duration (e.g. 30d)"
    if _is_alias(annotation, metadata, TierTypologyRef):
        return "`<tier>.<typology>` (e.g. `run.episodic`)"
    if _is_name(annotation, metadata):
        return "name"
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        inner, *extra = get_args(annotation)
        return _type_name(inner, [m for e in extra for m in getattr(e, "metadata", [e])])
    if origin is Literal:
        return " | ".join(f"`{_value(v)}`" for v in get_args(annotation))
    if origin is list:
        return f"list of {_plural(_type_name(get_args(annotation)[0]))}"
    if origin is dict:
        key, value = get_args(annotation)
        return f"map of {_type_name(key)} to {_type_name(value)}"
    if origin in (typing.Union, types.UnionType):
        if all(_is_model(a) for a in get_args(annotation)):
            return "policy (see Policy kinds)"
        return " or ".join(_type_name(a) for a in get_args(annotation) if a is not type(None))
    if _is_model(annotation):
        return "mapping"
    return {str: "string", int: "integer", float: "number", bool: "boolean",
            timedelta: "duration (e.g. 30d)"}.get(annotation, "any")


def _plural(word: str) -> str:
    return word + "s" if word in ("name", "mapping", "string", "integer", "number") else word


def _constraints(metadata: list[Any], *, for_text: bool = False) -> str:
    parts: list[str] = []
    low = next((m.min_length for m in metadata if isinstance(m, annotated_types.MinLen)), None)
    high = next((m.max_length for m in metadata if isinstance(m, annotated_types.MaxLen)), None)
    if low == 1 and high is None and for_text:
        return "non-empty"
    if low is not None and high is not None:
        parts.append(f"{low} to {high} items")
    elif low is not None:
        parts.append(f"at least {low} item" + ("s" if low != 1 else ""))
    elif high is not None:
        parts.append(f"at most {high} items")
    for cls, sign, attr in ((annotated_types.Gt, ">", "gt"), (annotated_types.Ge, ">=", "ge"),
                            (annotated_types.Lt, "<", "lt"), (annotated_types.Le, "<=", "le")):
        parts.extend(f"{sign} {_value(getattr(m, attr))}" for m in metadata if isinstance(m, cls))
    return ", ".join(parts)


def _field_type(info: FieldInfo) -> str:
    text = _type_name(info.annotation, list(info.metadata))
    bounds = _constraints(list(info.metadata), for_text=info.annotation is str)
    return f"{text} ({bounds})" if bounds else text


# Values -----------------------------------------------------------------------------------------
def _value(value: Any) -> str:
    """A value as it would be written in YAML flow style."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
        return "" if isinstance(value, BaseModel) else f"`{_value(value)}`"
    if info.default is PydanticUndefined:
        return "required"
    return f"`{_value(info.default)}`"


def _clean(text: str | None) -> str:
    if not text:
        return ""
    first = " ".join(text.strip().split("\n\n")[0].split())
    return _SEED_REFERENCE.sub("", first).strip()


def _describe(info: FieldInfo, path: str, model: Any, notes: dict[str, str]) -> str:
    own = info.description
    if own and own == _NAME_INFO.description:
        own = None  # the generic "lower_snake_case identifier" text; the type says "name"
    return _clean(own) or notes.get(path, "") or (_clean(model.__doc__) if model else "")


# Walking the models -----------------------------------------------------------------------------
def _nested(annotation: Any, path: str) -> tuple[str, type[BaseModel]] | None:
    annotation = _peel_optional(annotation)
    origin = get_origin(annotation)
    if _is_model(annotation):
        return path, annotation
    if origin is list and _is_model(get_args(annotation)[0]):
        return f"{path}[]", get_args(annotation)[0]
    if origin is dict and _is_model(get_args(annotation)[1]):
        key = get_args(annotation)[0]
        placeholder = "<typology>" if key == Typology else "<name>"
        return f"{path}.{placeholder}", get_args(annotation)[1]
    return None


def _rows(
    model: type[BaseModel], prefix: str, from_typology: Collection[str] = (),
    notes: dict[str, str] = _NOTES,
) -> list[Row]:
    rows: list[Row] = []
    for name, info in model.model_fields.items():
        key = info.alias or name
        path = f"{prefix}.{key}" if prefix else key
        nested = _nested(info.annotation, path)
        default = "typology default" if key in from_typology else _default(info)
        rows.append((f"`{path}`", _field_type(info), default,
                     _describe(info, path, nested[1] if nested else None, notes)))
        if nested:
            rows.extend(_rows(nested[1], nested[0], from_typology, notes))
    return rows


def _section_rows(key: str) -> list[Row]:
    info = AgentSpec.model_fields[key]
    nested = _nested(info.annotation, key)
    if nested is None:
        return [(f"`{key}`", _field_type(info), _default(info), _describe(info, key, None, _NOTES))]
    return _rows(nested[1], nested[0])


def _behavior_rows(key: str) -> list[Row]:
    info = Behavior.model_fields[key]
    path = f"behavior.{key}"
    nested = _nested(info.annotation, path)
    assert nested is not None, key
    if key in _TYPOLOGY_KEYED:
        filled = {f for entry in TYPOLOGY_DEFAULTS[key].values() for f in entry}
    elif key == "promotion":
        filled = {f for entry in PROMOTION_DEFAULTS.values() for f in entry}
    else:
        filled = set()
    head: Row = (f"`{path}`", _field_type(info),
                 "typology default" if key in _TYPOLOGY_KEYED or key == "promotion" else "",
                 _BEHAVIOR_SECTIONS[key][1])
    return [head, *_rows(nested[1], nested[0], filled)]


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    def line(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    out = [line(header), "|" + "|".join("---" for _ in header) + "|"]
    out.extend(line(r) for r in rows)
    return "\n".join(out)


_FIELD_HEADER = ("key", "type", "default", "description")


# Default tables ---------------------------------------------------------------------------------
def _resolved_table(first: str, entries: list[tuple[str, dict[str, Any]]]) -> str:
    """Columns: every field that some entry sets to something other than none."""
    columns: list[str] = []
    for _, values in entries:
        columns.extend(k for k, v in values.items() if v is not None and k not in columns)
    order = list(entries[0][1])
    columns.sort(key=order.index)
    rows = [(label, *(f"`{_value(values[c])}`" if values[c] is not None else "-"
                      for c in columns)) for label, values in entries]
    return _table((first, *columns), rows)


def _typology_defaults() -> list[str]:
    out = ["## Typology defaults", "",
           "What the loader fills in for every typology a spec uses. A spec states only its "
           "deviations, each with a `justification:`. `lifecycle.transient` applies on transient "
           "tiers, `lifecycle.persistent` on the persistent tier."]
    for key in _TYPOLOGY_KEYED:
        nested = _nested(Behavior.model_fields[key].annotation, key)
        assert nested is not None
        model = nested[1]
        entries = [
            (f"`{typ}`", model.model_validate(TYPOLOGY_DEFAULTS[key][typ]).model_dump(
                mode="json", by_alias=True, exclude={"justification"}))
            for typ in get_args(Typology)
        ]
        out += ["", f"### `behavior.{key}`", "", _resolved_table("typology", entries)]
    entries = []
    for (source, target), values in PROMOTION_DEFAULTS.items():
        rule = Behavior.model_fields["promotion"].annotation
        model = get_args(rule)[0]
        dumped = model.model_validate({"from": f"a.{source}", "to": f"b.{target}", **values})
        entries.append((f"`{source}` to `{target}`", dumped.model_dump(
            mode="json", by_alias=True, exclude={"from_", "to", "justification"})))
    out += ["", "### `behavior.promotion`", "",
            "Default criteria by source and target typology. Procedural memory is never a source: "
            "there is nothing above it to promote it to.", "", _resolved_table("typologies", entries)]
    return out


def _policy_kinds() -> list[str]:
    out = ["## Policy kinds", "",
           "Reusable policies live in `policies/<name>.yaml`; a spec refers to them by `name`. "
           "The `kind` key says which of these a file is."]
    union = get_args(get_args(Policy)[0])
    for model in union:
        kind = get_args(model.model_fields["kind"].annotation)[0]
        out += ["", f"### `kind: {kind}`", "", _clean(model.__doc__), "",
                _table(_FIELD_HEADER, _rows(model, "", notes=_POLICY_NOTES))]
    return out


# Entry point ------------------------------------------------------------------------------------
def spec_reference_markdown() -> str:
    """The spec reference as Markdown: every key with its type, default and description."""
    out = [
        "# Spec reference", "",
        "<!-- Generated by `primitives schema --markdown`; run `make docs` after changing the "
        "spec models. -->", "",
        "An agent's memory is one YAML file, `agents/<name>.yaml`. Its sections follow the "
        "sixteen primitives in order. Keys are written as paths: `tiers[].name` is the `name` of "
        "each item of `tiers`, `behavior.decay.<typology>` is one entry per typology.", "",
        "A **name** is lower_snake_case (letters, digits, underscore; at most 48 characters), "
        "since names end up in SQL identifiers. A **duration** is a number with a unit: "
        "`1800s`, `90m`, `12h`, `30d`, `2w`.", "",
        "Not every key is enforced by the engine yet. `primitives validate` (and `primitives "
        "migrate`) warns `<file>:<line>: <field> = <value>: declared but not enforced yet` for "
        "each behavioural or discipline key a spec declares, written or implied by a typology "
        "default, that no test shows the engine enforcing; `primitives validate --strict` exits 1 "
        "when there is any, for CI. The [concepts guide](../concepts.md#what-the-engine-enforces-"
        "today) lists what is enforced; `primitives.spec.unenforced(spec)` returns the same "
        "list.", "",
        "## Top level", "",
        _table(_FIELD_HEADER, [r for k in _TOP_LEVEL for r in _section_rows(k)]),
    ]
    for key, title, intro in _SECTIONS:
        out += ["", f"## {title}: `{key}`", "", intro]
        if key == "behavior":
            for sub, (sub_title, _, note) in _BEHAVIOR_SECTIONS.items():
                out += ["", f"### {sub_title}: `behavior.{sub}`", ""]
                if note:
                    out += [note, ""]
                out.append(_table(_FIELD_HEADER, _behavior_rows(sub)))
        else:
            out += ["", _table(_FIELD_HEADER, _section_rows(key))]
    out += ["", *_typology_defaults(), "", *_policy_kinds(), "",
            "The loader also fills `policies`, `deviations` and `source` on the loaded spec; "
            "a spec file must not set them.", ""]
    return "\n".join(out)
