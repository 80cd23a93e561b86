"""The engine: tenant-scoped transactions, audited writes, retrieval (DESIGN §2, §5).

>>> from primitives.engine import Engine
>>> engine = Engine.connect(spec)  # doctest: +SKIP
"""

from primitives.engine._anchor import Anchor, resolve_anchor
from primitives.engine._engine import Engine, TenantMemory, content_hash
from primitives.engine._records import Hit, Memory

__all__ = ["Anchor", "Engine", "Hit", "Memory", "TenantMemory", "content_hash", "resolve_anchor"]
