"""Behavioural primitives (seed 003 §6-12) and their typology-implied defaults.

Each behavioural primitive is keyed by typology. The loader starts from the
default of :data:`TYPOLOGY_DEFAULTS` for every typology the spec uses, lays the
spec's explicit values over it, and refuses any value that differs from the
default unless the entry carries a ``justification``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from primitives.spec._common import Duration, Name, SpecModel, TierTypologyRef, Typology
from primitives.spec._cron import parse as parse_cron

__all__ = [
    "PROMOTION_DEFAULTS",
    "TYPOLOGY_DEFAULTS",
    "Behavior",
    "ConflictPolicy",
    "ConsolidationPolicy",
    "ContextBlock",
    "ContextBudget",
    "DecayPolicy",
    "Governance",
    "LifecyclePolicy",
    "PromotionRule",
    "WritePolicy",
]

_Justification = Field(
    default=None,
    description="Why this entry deviates from its typology default. Required for any deviation.",
)


class LifecyclePolicy(SpecModel):
    """What dies, what archives, what stays (seed 003 §6)."""

    transient: Literal[
        "drop_at_scope_end", "drop_unless_promoted", "archive_at_scope_end"
    ] = "drop_unless_promoted"
    persistent: Literal["forcing_function", "corroborated", "indefinite", "append_only"]
    archive_on: list[
        Literal[
            "disposition",
            "canonical_change",
            "failed_corroborations",
            "explicit_invalidation",
            "decay_threshold",
            "idle",
        ]
    ] = Field(default_factory=list)
    failed_corroborations: int | None = Field(default=None, ge=1)
    justification: str | None = _Justification


class DecayPolicy(SpecModel):
    """Pressure decay creates on stored memory (seed 003 §7; Ebbinghaus from seed 002 §12.2)."""

    model: Literal["forcing_function", "validity_window", "exempt", "ebbinghaus"]
    horizon: Duration | None = Field(
        default=None, description="forcing_function: time by which an entry must be disposed"
    )
    validity: Duration | None = Field(
        default=None, description="validity_window: how long a corroboration keeps a fact current"
    )
    rate: float | None = Field(default=None, ge=0, description="ebbinghaus: lambda per day")
    exponent: float | None = Field(default=None, gt=0, le=1)
    threshold: float | None = Field(
        default=None, ge=0, le=1, description="soft-delete below this confidence"
    )
    protect: list[Literal["confirmed", "entity_mentions", "action_linked"]] = Field(
        default_factory=list
    )
    schedule: str | None = Field(
        default=None,
        description="five-field cron expression in UTC (e.g. \"0 3 * * *\"): `primitives maintain` "
                    "runs this typology's decay passes only when the schedule fired since "
                    "their last run (`--force` runs them anyway); unset: every run")
    justification: str | None = _Justification

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is not None:
            parse_cron(value)
        return value

    @model_validator(mode="after")
    def _model_parameters(self) -> DecayPolicy:
        needed = {
            "forcing_function": ("horizon",),
            "validity_window": ("validity",),
            "ebbinghaus": ("rate", "exponent", "threshold"),
            "exempt": (),
        }[self.model]
        missing = [name for name in needed if getattr(self, name) is None]
        if missing:
            raise ValueError(f"decay model '{self.model}' needs {', '.join(missing)}")
        return self


class Governance(SpecModel):
    """Governed writes (seed 001 §2, §10): an ActionRequest approved before the write runs."""

    request_kind: Name = "memory_promote_request"
    approvals_required: int = Field(default=1, ge=1)
    approvers: list[Name] = Field(default_factory=lambda: ["council", "admin"])
    user_intent_allowed: bool = Field(
        default=True, description="an explicit user request ('remember X') may write directly"
    )


class WritePolicy(SpecModel):
    """When and how memory rows are written (seed 003 §8)."""

    mode: Literal["auto", "promotion_only", "explicit", "mixed", "governed"]
    sampling: float = Field(
        default=1.0, gt=0, le=1,
        description="auto: share of unkeyed observations written, decided by the row id (a "
        "retry decides alike); the rest are journalled sampled_out, not written")
    extract_threshold: float | None = Field(
        default=None, ge=0, le=1, description="mixed: confidence needed to auto-extract"
    )
    governance: Governance | None = None
    justification: str | None = _Justification

    @model_validator(mode="after")
    def _mode_parameters(self) -> WritePolicy:
        if self.mode == "governed" and self.governance is None:
            raise ValueError("write mode 'governed' needs a governance block")
        if self.mode != "governed" and self.governance is not None:
            raise ValueError(f"governance only applies to mode 'governed', not '{self.mode}'")
        return self


class ConflictPolicy(SpecModel):
    """What happens when a new memory contradicts an existing one (seed 003 §10)."""

    strategy: Literal["noop", "update_with_validity", "update_with_supersession"]
    contradicted_confidence: float | None = Field(
        default=None, ge=0, le=1,
        description="the older memory's confidence once contradicted (update_with_validity "
        "default: 0.3, seed 002 §12.3)")
    contradicted_decay_rate: float | None = Field(
        default=None, ge=0,
        description="the older memory's decay rate once contradicted (update_with_validity "
        "default: 0.5)")
    detect: Literal["key", "similarity"] = Field(
        default="key",
        description="key: a write of the same tier, namespace and key contradicts the current "
        "version; similarity: also a new row whose text is at least `similarity` close to an "
        "active one of its tier and typology, and differs from it")
    similarity: float = Field(default=0.8, gt=0, le=1)
    min_confidence: float | None = Field(
        default=None, ge=0, le=1,
        description="an extraction replaces an active memory of this typology (an UPDATE, or "
        "an ADD that supersedes the row it nearly repeats) only at this confidence or more; "
        "a weaker one is skipped and the memory stays (seed 002 conflict_min_confidence)")
    justification: str | None = _Justification


class ConsolidationPolicy(SpecModel):
    """How observations merge into fewer, richer entries (seed 003 §11)."""

    method: Literal["compounding", "merge", "append_with_supersession", "none"]
    trigger: Literal["tier_boundary", "session_end", "job_end", "nightly"] = "tier_boundary"
    dedup_similarity: float | None = Field(default=None, gt=0, le=1)
    extractor: Literal["rule_based", "llm"] = "rule_based"
    idempotent: bool = Field(
        default=True,
        description="consolidation claims each source row once, in the transaction that "
        "writes what it yields, so a repeated or interrupted run changes nothing twice; "
        "false is refused (the engine has no non-idempotent consolidation)")
    episodes_per_chunk: int | None = Field(
        default=None, ge=1, le=1000,
        description="on a source typology: consolidation hands the extractor a scope's rows "
        "in chunks of at most this many, one call per chunk, each seeing what the earlier "
        "chunks wrote (seed 002 consolidation_episodes_per_chunk); default: one call")
    justification: str | None = _Justification

    @model_validator(mode="after")
    def _always_idempotent(self) -> ConsolidationPolicy:
        if not self.idempotent:
            raise ValueError(
                "idempotent: false cannot be honoured: consolidation claims each source row "
                "once in a ledger, in the transaction that writes what it yields, so running "
                "it again never repeats a row's work; leave idempotent out or set it to true")
        return self


class PromotionRule(SpecModel):
    """What moves an entry up a tier or typology (seed 003 §9; seed 001 §2)."""

    from_: TierTypologyRef = Field(alias="from")
    to: TierTypologyRef
    criteria: Literal[
        "compounding",
        "corroboration",
        "recurrence",
        "references",
        "summary",
        "governed",
        "extraction",
    ] = Field(
        description="extraction: the consolidation extractor derives target rows from the "
        "source's episodes, linked by derived_from (seed 002 §10.1)"
    )
    at: Literal["tier_boundary", "continuous", "tick", "job_end", "session_end", "on_approval"]
    dedup_similarity: float | None = Field(default=None, gt=0, le=1)
    min_corroborations: int | None = Field(default=None, ge=1)
    min_references: int | None = Field(default=None, ge=1)
    window_ticks: int | None = Field(default=None, ge=1)
    min_versions: int | None = Field(default=None, ge=1)
    sanitization: Name | None = Field(
        default=None, description="name of a discipline.sanitization gate the promotion must pass"
    )
    idempotency_key: Literal["source_id", "source_and_target"] = Field(
        default="source_id",
        description="source_id: a row is promoted once between the rules of its source "
        "and criteria keyed so (compounding, corroboration, references; extraction claims "
        "an episode once for every target of its source); source_and_target: once into "
        "this rule's target (refused on extraction rules)")
    justification: str | None = _Justification

    @model_validator(mode="after")
    def _criteria_parameters(self) -> PromotionRule:
        needed = {
            "compounding": ("dedup_similarity",),
            "corroboration": ("min_corroborations",),
            "recurrence": ("min_versions",),
            "references": ("min_references", "window_ticks"),
            "summary": (),
            "governed": (),
            "extraction": (),
        }[self.criteria]
        missing = [name for name in needed if getattr(self, name) is None]
        if missing:
            raise ValueError(f"promotion criteria '{self.criteria}' needs {', '.join(missing)}")
        if self.criteria == "extraction" and self.idempotency_key == "source_and_target":
            raise ValueError(
                "idempotency_key: source_and_target cannot be honoured by an extraction rule: "
                "consolidation claims a source episode once for every typology extracted "
                "from its source (one extractor call derives them all), so an episode is "
                "never consolidated again for one target; leave idempotency_key out or set "
                "it to source_id")
        return self


class ContextBlock(SpecModel):
    """One block of the assembled prompt context with its token budget."""

    name: Name
    content: Literal["memories", "entity_profiles", "evidence"] = Field(
        default="memories",
        description="memories: retrieved rows; entity_profiles: summaries of the entities the "
        "query mentions (needs graph); evidence: source quotes of the facts in other blocks",
    )
    tiers: list[Name] = Field(default_factory=list)
    typology: list[Typology] = Field(default_factory=list)
    tokens: int | None = Field(default=None, ge=1)
    share: float | None = Field(default=None, gt=0, le=1)
    priority: int = Field(ge=1, description="1 is evicted last")
    presence: Literal["always", "on_demand"]

    @model_validator(mode="after")
    def _one_budget(self) -> ContextBlock:
        if (self.tokens is None) == (self.share is None):
            raise ValueError("a context block gives exactly one of tokens or share")
        return self


class ContextBudget(SpecModel):
    """Per-block token budgets with priority eviction (seed 003 §12; seed 002 §11.4-11.5)."""

    total_tokens: int | None = Field(default=None, ge=1)
    blocks: list[ContextBlock]
    complexity: dict[Literal["simple", "complex"], int] | None = Field(
        default=None, description="total token budget by query complexity (seed 002 §11.5)"
    )
    justification: str | None = _Justification


class Behavior(SpecModel):
    """Resolved behavioural primitives: every typology in use has a full entry."""

    lifecycle: dict[Typology, LifecyclePolicy] = Field(default_factory=dict)
    decay: dict[Typology, DecayPolicy] = Field(default_factory=dict)
    write_policy: dict[Typology, WritePolicy] = Field(default_factory=dict)
    conflict: dict[Typology, ConflictPolicy] = Field(default_factory=dict)
    consolidation: dict[Typology, ConsolidationPolicy] = Field(default_factory=dict)
    promotion: list[PromotionRule] = Field(default_factory=list)
    context: ContextBudget | None = None


TYPOLOGY_DEFAULTS: dict[str, dict[str, dict[str, Any]]] = {
    "lifecycle": {
        "episodic": {"transient": "drop_unless_promoted", "persistent": "forcing_function",
                     "archive_on": ["disposition"]},
        "semantic": {"persistent": "corroborated",
                     "archive_on": ["canonical_change", "failed_corroborations"],
                     "failed_corroborations": 3},
        "procedural": {"persistent": "indefinite", "archive_on": ["explicit_invalidation"]},
        "opinion": {"persistent": "indefinite", "archive_on": ["decay_threshold"]},
    },
    "decay": {
        "episodic": {"model": "forcing_function", "horizon": "30d"},
        "semantic": {"model": "validity_window", "validity": "90d"},
        "procedural": {"model": "exempt"},
        "opinion": {"model": "ebbinghaus", "rate": 0.1, "exponent": 0.8, "threshold": 0.05,
                    "protect": ["confirmed"]},
    },
    "write_policy": {
        "episodic": {"mode": "auto"},
        "semantic": {"mode": "promotion_only"},
        "procedural": {"mode": "mixed", "extract_threshold": 0.8},
        "opinion": {"mode": "mixed", "extract_threshold": 0.8},
    },
    "conflict": {
        "episodic": {"strategy": "noop"},
        "semantic": {"strategy": "update_with_validity"},
        "procedural": {"strategy": "update_with_supersession"},
        "opinion": {"strategy": "update_with_supersession"},
    },
    "consolidation": {
        "episodic": {"method": "compounding", "trigger": "tier_boundary", "dedup_similarity": 0.92},
        "semantic": {"method": "merge", "trigger": "tier_boundary"},
        "procedural": {"method": "append_with_supersession", "trigger": "tier_boundary"},
        "opinion": {"method": "append_with_supersession", "trigger": "tier_boundary"},
    },
}
"""Seed 003's default tables, one entry per typology. ``opinion`` follows seed 002."""

PROMOTION_DEFAULTS: dict[tuple[str, str], dict[str, Any]] = {
    ("episodic", "episodic"): {"criteria": "compounding", "at": "tier_boundary",
                               "dedup_similarity": 0.92},
    ("episodic", "semantic"): {"criteria": "corroboration", "at": "continuous",
                               "min_corroborations": 3},
    ("semantic", "semantic"): {"criteria": "recurrence", "at": "continuous", "min_versions": 2},
    ("episodic", "procedural"): {"criteria": "corroboration", "at": "continuous",
                                 "min_corroborations": 3},
    ("episodic", "opinion"): {"criteria": "corroboration", "at": "continuous",
                              "min_corroborations": 2},
}
"""Default promotion criteria by (source typology, target typology). Procedural is never a source."""
