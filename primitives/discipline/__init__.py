"""Discipline primitives: what a spec's ``discipline`` section makes the engine refuse,
redact or transform (sanitization gates and the outbox of cross-context events, ...)."""

from primitives.discipline._gates import (
    Crossing,
    OutboxEntry,
    PiiFinder,
    claim_outbox,
    cross,
    pii_finder,
)

__all__ = ["Crossing", "OutboxEntry", "PiiFinder", "claim_outbox", "cross", "pii_finder"]
