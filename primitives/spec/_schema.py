"""JSON Schema of the spec language, for editors (``primitives schema``)."""

from __future__ import annotations

from typing import Any, get_args

from primitives.spec._behavior import (
    ConflictPolicy,
    ConsolidationPolicy,
    ContextBudget,
    DecayPolicy,
    LifecyclePolicy,
    PromotionRule,
    WritePolicy,
)
from primitives.spec._common import SpecModel, Typology
from primitives.spec._models import AgentSpec

__all__ = ["SCHEMA_FILE", "SCHEMA_ID", "spec_json_schema"]

SCHEMA_ID = "urn:agent-memory-primitives:spec:v1"
"""The schema's ``$id``: names the spec language (``version: 1``), not a place."""

SCHEMA_FILE = "spec.schema.json"
"""The file ``primitives init`` writes beside a new spec, named by its editor line."""

_LOADER_FIELDS = ("deviations", "source", "policies")


def _partial(model: type[SpecModel], defs: dict[str, Any]) -> dict[str, Any]:
    """Schema of a behavioural override: every field optional (defaults come from typology).

    Nested definitions move to the root ``$defs`` so ``#/$defs/...`` references resolve.
    """
    schema = model.model_json_schema(by_alias=True, mode="validation")
    schema.pop("required", None)
    defs.update(schema.pop("$defs", {}))
    return schema


def spec_json_schema() -> dict[str, Any]:
    """The JSON Schema a user writes specs against (loader-filled fields removed)."""
    schema = AgentSpec.model_json_schema(by_alias=True, mode="validation")
    for name in _LOADER_FIELDS:
        schema["properties"].pop(name, None)
    defs: dict[str, Any] = schema.setdefault("$defs", {})
    typologies = list(get_args(Typology))
    behavior: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": {}}
    for name, model in (
        ("lifecycle", LifecyclePolicy),
        ("decay", DecayPolicy),
        ("write_policy", WritePolicy),
        ("conflict", ConflictPolicy),
        ("consolidation", ConsolidationPolicy),
    ):
        behavior["properties"][name] = {
            "type": "object",
            "additionalProperties": False,
            "properties": {t: _partial(model, defs) for t in typologies},
            "description": f"{name} overrides by typology; each deviation needs a justification",
        }
    behavior["properties"]["promotion"] = {"type": "array", "items": _partial(PromotionRule, defs)}
    behavior["properties"]["context"] = _partial(ContextBudget, defs)
    schema["properties"]["behavior"] = behavior
    # Shorthands the loader accepts: `audit: default` and `non_mirror: [category, ...]`.
    audit = schema["properties"]["audit"]
    schema["properties"]["audit"] = {"anyOf": [{"const": "default"}, audit],
                                     "description": "'default' or the full audit posture"}
    non_mirror = defs["Discipline"]["properties"]["non_mirror"]
    non_mirror["items"] = {"anyOf": [{"$ref": "#/$defs/NonMirror/properties/category"},
                                     non_mirror["items"]]}
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    schema["title"] = "Agent memory spec"
    return schema
