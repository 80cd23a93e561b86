"""Agent memory primitives: declare an agent's memory in YAML, get a tenant-isolated, auditable store."""

from primitives.errors import (
    GovernanceError,
    MemoryWriteFail,
    MigrationError,
    ModelMismatch,
    PolicyNotFound,
    PolicyViolation,
    PrimitivesError,
    ServerError,
    SpecError,
    StorageError,
    StorageFull,
    TenancyError,
)

__version__ = "0.1.0"

__all__ = [
    "GovernanceError",
    "MemoryWriteFail",
    "MigrationError",
    "ModelMismatch",
    "PolicyNotFound",
    "PolicyViolation",
    "PrimitivesError",
    "ServerError",
    "SpecError",
    "StorageError",
    "StorageFull",
    "TenancyError",
    "__version__",
]
