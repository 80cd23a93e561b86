"""Reusable policies (``policies/*.yaml``) that specs reference by name."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator

from primitives.spec._common import Duration, Name, SpecModel

__all__ = [
    "HEDGE_TIERS",
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
    strip_pii: list[Name] = Field(
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
