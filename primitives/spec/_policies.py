"""Reusable policies (``policies/*.yaml``) that specs reference by name."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from primitives.spec._common import Duration, Name, SpecModel

__all__ = [
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


class PiiPolicy(_PolicyBase):
    """PII detection and what to do when it fires (seed 001 §5)."""

    kind: Literal["pii"]
    detectors: list[Literal["email", "phone", "credit_card", "iban", "ssn", "ip_address"]] = Field(
        min_length=1
    )
    on_detect: Literal["redact", "refuse"] = "redact"
    raw_with_consent: bool = Field(
        default=True, description="raw storage allowed when a logged consent event exists"
    )
    store_hash: bool = True
    admin_raw_reads: bool = True
    refusal_message: str = "I can't store that because it contains personal data."


class RetentionPolicy(_PolicyBase):
    """Four-state retention (ACTIVE / REFERENCED / ORPHANED / TOMBSTONED) for a persistent tier."""

    kind: Literal["retention"]
    orphan_after: Duration | None = None
    tombstone_orphans_after: Duration | None = None
    audit_retention: Duration | None = None
    deletion_requires: list[Name] = Field(default_factory=list)


class AccessPolicy(_PolicyBase):
    """Who may read what beyond the tenant's own runtime role."""

    kind: Literal["access"]
    auditor_views: list[Name] = Field(default_factory=list)
    admin_raw_reads: bool = False


Policy = Annotated[
    SanitizationPolicy | PiiPolicy | RetentionPolicy | AccessPolicy,
    Field(discriminator="kind"),
]
