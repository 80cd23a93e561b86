"""The framework's one error tree.

Every error the framework raises on purpose derives from ``PrimitivesError``
and carries structured context (``context``) besides a message a user can act
on. Lower-level exceptions are always chained with ``raise ... from``.

::

    PrimitivesError
     ├── SpecError              a spec or policy file is malformed (file, line, field)
     │    └── PolicyNotFound    a spec names a policy that policies/ does not hold
     ├── TenancyError           a namespace or anchor does not fit the spec, or no tenant is set
     ├── PolicyViolation        the database refused a statement on policy grounds (RLS, SQLSTATE 42501)
     │    ├── PrivacyBlocked    a write carries personal data its PII policy blocks (PRIVACY_BLOCKED)
 │    └── NonMirrorViolation a write copies canonical text the spec says memory never mirrors
     ├── GovernanceError        a write needs an approval or goes through a path it may not take
     │    └── PromotionLoop     the same source is promoted again (PROMOTION_LOOP)
     ├── ModelMismatch          vectors of another embedding model in the same index
     ├── EmbedderUnavailable    no embedding model can be loaded (weights or packages missing)
     └── StorageError           the database failed or is unreachable
          ├── ServerError       the embedded server could not start or stop
          ├── MigrationError    a migration failed, or an applied one was edited (checksum)
          │    └── SpecChangeRefused  a spec change is destructive or weakening (PLAN_REFUSED)
          ├── MemoryWriteFail   a write failed after its one deterministic retry (MEMORY_WRITE_FAIL)
          └── StorageFull       disk or quota exhausted (STORAGE_FULL); nothing is dropped silently

Example::

    try:
        load_spec("agents/spectral_agent.yaml")
    except SpecError as err:
        print(err.file, err.line, err.field)
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "EmbedderUnavailable",
    "GovernanceError",
    "MemoryWriteFail",
    "MigrationError",
    "ModelMismatch",
    "NonMirrorViolation",
    "PolicyNotFound",
    "PolicyViolation",
    "PrimitivesError",
    "PrivacyBlocked",
    "PromotionLoop",
    "ServerError",
    "SpecChangeRefused",
    "SpecError",
    "StorageError",
    "StorageFull",
    "TenancyError",
]


class PrimitivesError(Exception):
    """Base of every error the framework raises on purpose."""

    code: str = "PRIMITIVES_ERROR"

    def __init__(self, message: str, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.context: dict[str, Any] = context

    def envelope(self) -> dict[str, Any]:
        """A JSON-serialisable error envelope: ``{"error": CODE, "message": ..., **context}``."""
        out: dict[str, Any] = {"error": self.code, "message": self.message}
        if self.user_message is not None:
            out["user_message"] = self.user_message
        out.update({k: v for k, v in self.context.items() if v is not None})
        return out

    user_message: str | None = None
    """The fixed sentence an agent says to its user for this error (seed 001 §9), where the
    error has one; the envelope carries it as ``user_message`` unless the context names
    another."""


class SpecError(PrimitivesError):
    """A spec or policy file does not load: names the file, line and field, and what is allowed."""

    code = "SPEC_INVALID"

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
        problems: list[SpecError] | None = None,
    ) -> None:
        self.file = file
        self.line = line
        self.field = field
        self.problems: list[SpecError] = problems or []
        super().__init__(message, file=file, line=line, field=field)

    def __str__(self) -> str:
        if self.problems:
            return "\n".join(p.location_message() for p in self.problems)
        return self.location_message()

    def location_message(self) -> str:
        where = self.file or "<spec>"
        if self.line is not None:
            where = f"{where}:{self.line}"
        head = f"{where}: "
        if self.field:
            head += f"{self.field}: "
        return head + self.message


class PolicyNotFound(SpecError):
    """A spec references a policy name that no file in policies/ defines."""

    code = "POLICY_NOT_FOUND"


class TenancyError(PrimitivesError):
    """The anchor or namespace does not fit the spec, or no tenant is set for the operation."""

    code = "TENANCY_ERROR"


class PolicyViolation(PrimitivesError):
    """The database refused the statement on policy grounds (row-level security, grants)."""

    code = "POLICY_VIOLATION"


class PrivacyBlocked(PolicyViolation):
    """A write carries personal data its PII policy blocks; nothing was written. The message
    is the policy's ``refusal_message``; ``kinds`` and ``field`` say what was found where
    (never the value)."""

    code = "PRIVACY_BLOCKED"


class NonMirrorViolation(PolicyViolation):
    """A write copies canonical text that the spec's ``discipline.non_mirror`` keeps out of
    memory (the trigram guard, SQLSTATE PM005); nothing was written. ``category``,
    ``canonical_source`` and ``canonical_key`` name what it copies, ``similarity`` and
    ``threshold`` say how closely. Write a note that references the canonical row instead."""

    code = "NON_MIRROR"


class GovernanceError(PrimitivesError):
    """A write is not allowed through this path (e.g. semantic memory outside promotion)."""

    code = "GOVERNANCE_ERROR"


class PromotionLoop(GovernanceError):
    """A promotion of a source that is promoted already, or waits for its approval: promotions
    are idempotent per source, so the repeat is refused and nothing is written. ``source``
    names it and ``request_id`` the request that holds it."""

    code = "PROMOTION_LOOP"
    user_message = "I already asked to remember that; the first request still stands."


class ModelMismatch(PrimitivesError):
    """Vectors from a different embedding model would be mixed into one index."""

    code = "MODEL_MISMATCH"


class EmbedderUnavailable(PrimitivesError):
    """No embedding model can be loaded here; the message names what to install."""

    code = "EMBEDDER_UNAVAILABLE"


class StorageError(PrimitivesError):
    """The database failed or could not be reached."""

    code = "STORAGE_ERROR"


class ServerError(StorageError):
    """The embedded PostgreSQL server could not be started, reached or stopped."""

    code = "SERVER_ERROR"


class MigrationError(StorageError):
    """A migration failed to apply, or an applied migration's file was changed."""

    code = "MIGRATION_ERROR"


class MemoryWriteFail(StorageError):
    """A memory write failed after exactly one deterministic retry."""

    code = "MEMORY_WRITE_FAIL"
    user_message = "I tried to save that but my memory failed. I might not remember this next time."


class StorageFull(StorageError):
    """The disk or a quota is full. The write was refused, never silently dropped."""

    code = "STORAGE_FULL"
    user_message = "My memory is full, so I couldn't save that. Nothing was lost; an admin has to make room."


class SpecChangeRefused(MigrationError):
    """A spec change would destroy or weaken what the store holds; nothing was applied.

    The message names the spec file and line of each refused change, the reason and the way
    forward (a declared ``renamed_from``, or ``--allow KIND --reason TEXT``).
    """

    code = "PLAN_REFUSED"
