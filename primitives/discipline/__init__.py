"""Discipline primitives: what a spec's ``discipline`` section makes the engine refuse,
redact or transform (PII before persistent writes, sanitization gates and the outbox of
cross-context events, ...)."""

from typing import Any

from primitives.discipline._guard import PiiGuard, PiiScan, pii_guard
from primitives.discipline._pii import (
    PII_KINDS,
    PiiDetector,
    PiiFinding,
    Redaction,
    pii_detector,
    placeholder,
)

__all__ = ["PII_KINDS", "Crossing", "OutboxEntry", "PiiDetector", "PiiFinder", "PiiFinding",
           "PiiGuard", "PiiScan", "Redaction", "claim_outbox", "cross", "pii_detector",
           "pii_finder", "pii_guard", "placeholder"]

_GATES = ("Crossing", "OutboxEntry", "PiiFinder", "claim_outbox", "cross", "pii_finder")


def __getattr__(name: str) -> Any:
    # The gates run as engine operations (they import the engine's core, which imports the
    # PII guard from here): loaded on first use, not with this package.
    if name in _GATES:
        from primitives.discipline import _gates
        return getattr(_gates, name)
    raise AttributeError(f"module 'primitives.discipline' has no attribute {name!r}")
