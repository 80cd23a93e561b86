"""Agent memory primitives: declare an agent's memory in YAML, get a tenant-isolated,
auditable memory on PostgreSQL.

>>> import primitives
>>> spec = primitives.load_spec("agents/spectral_agent.yaml")    # doctest: +SKIP
>>> primitives.migrate([spec])                                     # doctest: +SKIP
>>> with primitives.Engine.connect(spec) as engine:                # doctest: +SKIP
...     with engine.tenant({"workspace_id": "ws-acme"}) as mem:
...         mem.observe("cycle", "lowering temperature removed fabrication")
"""

from primitives._project import MigrateReport, migrate
from primitives.compile import Capabilities, Plan, compile_plan
from primitives.engine import AsyncEngine, Engine, Hit, Memory
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
from primitives.spec import AgentSpec, load_spec, load_specs

__version__ = "0.1.0"

__all__ = [
    "AgentSpec",
    "AsyncEngine",
    "Capabilities",
    "Engine",
    "GovernanceError",
    "Hit",
    "Memory",
    "MemoryWriteFail",
    "MigrateReport",
    "MigrationError",
    "ModelMismatch",
    "Plan",
    "PolicyNotFound",
    "PolicyViolation",
    "PrimitivesError",
    "ServerError",
    "SpecError",
    "StorageError",
    "StorageFull",
    "TenancyError",
    "__version__",
    "compile_plan",
    "load_spec",
    "load_specs",
    "migrate",
]
