"""The engine: the one choke point for memory access (DESIGN §2, §5).

``engine.tenant(anchor)`` opens a transaction as the application role with the tenant
set for the transaction only (a bound ``set_config``); every write inside it appends its journal event in the same
transaction. The sync and async engines run the same core operations.

>>> with Engine.connect(spec) as engine:                       # doctest: +SKIP
...     with engine.tenant({"workspace_id": "ws-acme"}) as mem:
...         mem.observe("cycle", "lowering temperature removed fabrication")
"""

from primitives.engine._anchor import Anchor, resolve_anchor
from primitives.engine._async import AsyncEngine, AsyncTenantMemory
from primitives.engine._core import canonical_json, content_hash
from primitives.engine._records import Edge, Entity, Explanation, Hit, Memory, SearchResult
from primitives.engine._retry import backoff_seconds
from primitives.engine._sync import Engine, TenantMemory

__all__ = [
    "Anchor",
    "AsyncEngine",
    "AsyncTenantMemory",
    "Edge",
    "Engine",
    "Entity",
    "Explanation",
    "Hit",
    "Memory",
    "SearchResult",
    "TenantMemory",
    "backoff_seconds",
    "canonical_json",
    "content_hash",
    "resolve_anchor",
]
