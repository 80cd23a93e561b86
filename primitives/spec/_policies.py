"""Reusable policies (``policies/*.yaml``) that specs reference by name."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, field_validator, model_validator

from primitives.spec._common import Duration, Name, SpecModel

__all__ = [
    "HEDGE_TIERS",
    "PII_KIND_NAMES",
    "AccessPolicy",
    "PiiPolicy",
    "Policy",
    "RetentionPolicy",
    "SanitizationPolicy",
]


class _PolicyBase(SpecModel):
    version: Literal[1] = 1
    name: Name
    description: str | None = None


PiiKind = Literal["email", "phone", "credit_card", "iban", "ssn", "ip_address", "us_itin",
                  "passport", "national_id", "driver_license", "crypto_wallet", "secret"]
"""The kinds of personal data and secrets the detector finds (docs/privacy.md)."""
PII_KIND_NAMES: tuple[str, ...] = get_args(PiiKind)
PiiAction = Literal["redact", "block"]


class SanitizationPolicy(_PolicyBase):
    """What a sanitization gate strips before content crosses a boundary."""

    kind: Literal["sanitization"]
    strip_keys: list[Name] = Field(default_factory=list)
    strip_patterns: list[str] = Field(
        default_factory=list, description="regular expressions whose matches are replaced"
    )
    replacement: str = "[redacted]"
    transform: Literal["strip_identifiers", "hedge_map", "aggregate_only", "none"] = (
        "strip_identifiers"
    )
    hedges: dict[str, str] = Field(
        default_factory=dict, description="hedge_map: provenance tier -> phrasing"
    )
    strip_pii: list[PiiKind] = Field(
        default_factory=list,
        description="PII kinds whose values the detector finds and replaces on the way",
    )

    @field_validator("strip_patterns")
    @classmethod
    def _portable_patterns(cls, patterns: list[str]) -> list[str]:
        # Patterns run in PostgreSQL (regexp_replace) and are written as Python reads them:
        # refuse what either side cannot read the same way.
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as err:
                raise ValueError(f"strip pattern {pattern!r} is not a regular expression: "
                                 f"{err}") from None
            if _UNPORTABLE.search(pattern):
                raise ValueError(f"strip pattern {pattern!r} uses a named group or a "
                                 "backreference, which PostgreSQL's regular expressions "
                                 "read differently; use plain groups")
        return patterns

    @field_validator("hedges")
    @classmethod
    def _known_tiers(cls, hedges: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(hedges) - set(HEDGE_TIERS))
        if unknown:
            raise ValueError(f"unknown provenance tier {', '.join(unknown)}; hedges are keyed "
                             f"by {', '.join(HEDGE_TIERS)}")
        return hedges


HEDGE_TIERS = ("canonical", "corroborated", "single_observation", "inferred", "contradicted",
               "unknown")
"""The provenance tiers a hedge_map policy phrases (see docs/cross-context.md)."""

_UNPORTABLE = re.compile(r"\\[1-9]|\\[gk]<|\(\?P|\(\?<(?![=!])")




class PiiPolicy(_PolicyBase):
    """PII detection and what to do when it fires (seed 001 §5)."""

    kind: Literal["pii"]
    detectors: list[PiiKind] = Field(min_length=1, description="the kinds to detect")
    on_detect: PiiAction = Field(
        default="redact",
        description="redact: the value is replaced by a placeholder (its sha256 kept in the "
        "row's provenance when store_hash) and a pii_redacted event journalled; block: the "
        "write is refused with PRIVACY_BLOCKED and nothing is written ('refuse' is read as "
        "block)")
    actions: dict[PiiKind, PiiAction] = Field(
        default_factory=dict, description="per-kind actions overriding on_detect")
    raw_with_consent: bool = Field(
        default=True,
        description="a write that names a logged consent event (mem.record_consent) keeps "
        "the raw text of redacted values in the raw-PII table, readable only through the "
        "privacy admin's logged read; the memory row still holds the redacted text")
    store_hash: bool = Field(
        default=True, description="keep each redacted value's sha256 in provenance.pii")
    admin_raw_reads: bool = Field(
        default=True, description="the privacy admin role may read raw values kept with "
        "consent (each read journalled)")
    refusal_message: str = "I can't store that because it contains personal data."
    phone_regions: list[Annotated[str, Field(pattern=r"^[A-Z]{2}$")]] = Field(
        default_factory=list,
        description="ISO 3166 regions whose phone-number formats the phone detector knows "
        "(default: US, GB, DE, FR, IL, IN, CA, BR); each region is one more pass over a "
        "number-shaped text, so naming only yours makes writes with numbers faster")

    @model_validator(mode="before")
    @classmethod
    def _refuse_is_block(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("on_detect") == "refuse":
            data = {**data, "on_detect": "block"}
        return data

    @model_validator(mode="after")
    def _raw_is_readable(self) -> PiiPolicy:
        if self.raw_with_consent and not self.admin_raw_reads:
            raise ValueError("raw_with_consent keeps raw values that only the privacy "
                             "admin's read returns: it needs admin_raw_reads: true")
        return self

    def action(self, kind: str) -> PiiAction:
        """What this policy does with a value of ``kind``."""
        return self.actions.get(kind, self.on_detect)  # type: ignore[call-overload,no-any-return]


class RetentionPolicy(_PolicyBase):
    """Four-state retention (ACTIVE / REFERENCED / ORPHANED / TOMBSTONED) for a persistent tier."""

    kind: Literal["retention"]
    orphan_after: Duration | None = None
    tombstone_orphans_after: Duration | None = None
    audit_retention: Duration | None = None
    deletion_requires: list[Name] = Field(default_factory=list)


AuditorView = Literal["lineage", "supersession_chains", "action_basis", "retention_state",
                      "sanitization_crossings", "redactions", "policy_coverage"]
"""The compliance views an access policy can give the auditor (``erasures`` reads payloads)."""


class AccessPolicy(_PolicyBase):
    """Who may read what beyond the tenant's own runtime role."""

    kind: Literal["access"]
    auditor_views: list[AuditorView] = Field(
        default_factory=list,
        description="the compliance views the auditor role reads; attached by "
        "discipline.visibility.policy, the auditor reads no other view and no payload "
        "column (memory value, envelope, embedding; an action request's payload; a "
        "checkpoint's state and blobs)")
    admin_raw_reads: bool = False


Policy = Annotated[
    SanitizationPolicy | PiiPolicy | RetentionPolicy | AccessPolicy,
    Field(discriminator="kind"),
]
