"""The spec language: pydantic models of every primitive, typology defaults, YAML loading.

>>> from primitives.spec import load_spec
>>> spec = load_spec("agents/spectral_agent.yaml")  # doctest: +SKIP
"""

from primitives.spec._behavior import (
    PROMOTION_DEFAULTS,
    TYPOLOGY_DEFAULTS,
    Behavior,
    ConflictPolicy,
    ConsolidationPolicy,
    ContextBlock,
    ContextBudget,
    DecayPolicy,
    Governance,
    LifecyclePolicy,
    PromotionRule,
    WritePolicy,
)
from primitives.spec._common import Duration, Typology, format_duration, parse_duration
from primitives.spec._enforcement import Unenforced, unenforced
from primitives.spec._load import load_policies, load_spec, load_spec_text, load_specs
from primitives.spec._models import (
    LIFECYCLE_EVENTS,
    SIGNALS,
    AgentSpec,
    Anchor,
    Audit,
    Boundary,
    Determinism,
    Deviation,
    Discipline,
    Graph,
    IntentRouting,
    NonMirror,
    Persistence,
    Retention,
    Retrieval,
    SanitizationGate,
    Tier,
    Visibility,
)
from primitives.spec._policies import (
    PII_KIND_NAMES,
    AccessPolicy,
    PiiPolicy,
    Policy,
    RetentionPolicy,
    SanitizationPolicy,
)
from primitives.spec._reference import spec_reference_markdown
from primitives.spec._schema import spec_json_schema

__all__ = [
    "LIFECYCLE_EVENTS",
    "PII_KIND_NAMES",
    "PROMOTION_DEFAULTS",
    "SIGNALS",
    "TYPOLOGY_DEFAULTS",
    "AccessPolicy",
    "AgentSpec",
    "Anchor",
    "Audit",
    "Behavior",
    "Boundary",
    "ConflictPolicy",
    "ConsolidationPolicy",
    "ContextBlock",
    "ContextBudget",
    "DecayPolicy",
    "Determinism",
    "Deviation",
    "Discipline",
    "Duration",
    "Governance",
    "Graph",
    "IntentRouting",
    "LifecyclePolicy",
    "NonMirror",
    "Persistence",
    "PiiPolicy",
    "Policy",
    "PromotionRule",
    "Retention",
    "RetentionPolicy",
    "Retrieval",
    "SanitizationGate",
    "SanitizationPolicy",
    "Tier",
    "Typology",
    "Unenforced",
    "Visibility",
    "WritePolicy",
    "format_duration",
    "load_policies",
    "load_spec",
    "load_spec_text",
    "load_specs",
    "parse_duration",
    "spec_json_schema",
    "spec_reference_markdown",
    "unenforced",
]
