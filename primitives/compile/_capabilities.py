"""What the target server can do; the plan adapts to it (no pgvector: no embedding column)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from primitives.errors import StorageError

__all__ = [
    "DEFAULT_CAPABILITIES",
    "MIN_SERVER_VERSION",
    "Capabilities",
    "require_server_version",
]

MIN_SERVER_VERSION: Final = 150000
"""PostgreSQL 15: ``security_invoker`` views and ``CREATE OR REPLACE TRIGGER``."""


@dataclass(frozen=True)
class Capabilities:
    """Extensions and server version the plan may rely on.

    >>> Capabilities(vector=False).vector
    False
    """

    vector: bool = True
    """pgvector: the ``embedding halfvec(dims)`` column and its HNSW index."""
    trigram: bool = True
    """pg_trgm: the non-mirror ``trigram_trigger`` guard compares writes with canonical text."""
    trigram_schema: str = "public"
    """The schema pg_trgm's functions live in (the guard names them: its search_path is
    fixed)."""
    canonical_keys: tuple[tuple[str, str], ...] = ()
    """``(schema.table, key column type)`` of each canonical table that exists with a unique
    key on its declared key column and that the owner role may reference: references to its
    rows get a real foreign key. Read by ``migrate`` from the catalog."""
    btree_gin: bool = True
    """btree_gin: GIN indexes that lead with the tenant column."""
    text_match: bool = True
    """``primitives.tsvector_match_ops`` (installed by a superuser's migrate): the full-text
    GIN index uses it, so the lexical signal's match is served by the index under
    row-level security."""
    server_version: int = 180000
    """``server_version_num`` of the target server."""


DEFAULT_CAPABILITIES: Final = Capabilities()
"""A current PostgreSQL with pgvector, pg_trgm, btree_gin and the leakproof full-text match
(the embedded server, migrated by its superuser)."""


def require_server_version(capabilities: Capabilities) -> None:
    """Raise StorageError when the target server is older than the plan needs."""
    if capabilities.server_version < MIN_SERVER_VERSION:
        major = capabilities.server_version // 10000
        raise StorageError(
            f"PostgreSQL {MIN_SERVER_VERSION // 10000} or newer is required (security_invoker "
            f"views, CREATE OR REPLACE TRIGGER); the server is version {major}",
            server_version=capabilities.server_version,
        )
