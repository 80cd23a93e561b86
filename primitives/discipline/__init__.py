"""Discipline primitives: what a spec's ``discipline`` section makes the engine refuse,
redact or transform (PII before persistent writes, ...)."""

from primitives.discipline._guard import PiiGuard, PiiScan, pii_guard
from primitives.discipline._pii import (
    PII_KINDS,
    PiiDetector,
    PiiFinding,
    Redaction,
    pii_detector,
    placeholder,
)

__all__ = ["PII_KINDS", "PiiDetector", "PiiFinding", "PiiGuard", "PiiScan", "Redaction",
           "pii_detector", "pii_guard", "placeholder"]
