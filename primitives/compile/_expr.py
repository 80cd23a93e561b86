"""SQL expressions shared by tables, policies, views and the engine's queries.

>>> active_predicate("m").as_string(None)
'"m"."superseded_at" IS NULL AND "m"."invalidated_at" IS NULL AND "m"."archived_at" IS NULL AND "m"."tombstoned_at" IS NULL'
"""

from __future__ import annotations

from typing import Final

from psycopg import sql

from primitives.compile._names import TENANT_SETTING

__all__ = [
    "ACTIVE_STATE_COLUMNS",
    "ERASED_CONTENT_PATTERN",
    "active_predicate",
    "column",
    "current_tenant_expr",
    "current_tenant_value",
    "pending_embedding_predicate",
]

ACTIVE_STATE_COLUMNS: Final = ("superseded_at", "invalidated_at", "archived_at", "tombstoned_at")
"""A memory row is *active* (in retrieval) while all of these are NULL."""

ERASED_CONTENT_PATTERN: Final = "^sha256:[0-9a-f]{64}$"
"""What ``content`` holds after erasure: ``sha256:<hex of the original content>``.

The erasures view reports residue for an erased row whose content does not match this,
whose ``value`` is not ``{}``, or whose embedding is not NULL.
"""


def column(name: str, alias: str | None = None) -> sql.Identifier:
    """``"name"`` or ``"alias"."name"``."""
    return sql.Identifier(alias, name) if alias else sql.Identifier(name)


def active_predicate(alias: str | None = None) -> sql.Composed:
    """``superseded_at IS NULL AND ... AND tombstoned_at IS NULL`` (the active-row indexes' predicate).

    Queries that want the partial indexes must include this predicate verbatim (or a
    stronger one).
    """
    return sql.SQL(" AND ").join(
        sql.SQL("{} IS NULL").format(column(name, alias)) for name in ACTIVE_STATE_COLUMNS
    )


def pending_embedding_predicate(alias: str | None = None) -> sql.Composed:
    """``embedding IS NULL AND erased_at IS NULL``: rows waiting for a vector (the
    pending-embedding index's predicate; queries that want the index repeat it)."""
    return sql.SQL("{} IS NULL AND {} IS NULL").format(column("embedding", alias),
                                                       column("erased_at", alias))


def current_tenant_value() -> sql.Composed:
    """``nullif(current_setting('primitives.tenant', true), '')``: the transaction's tenant,
    NULL when none is set."""
    return sql.SQL("nullif(current_setting({}, true), '')").format(sql.Literal(TENANT_SETTING))


def current_tenant_expr() -> sql.Composed:
    """``(SELECT nullif(current_setting('primitives.tenant', true), ''))``.

    The scalar subquery is evaluated once per statement (an InitPlan), not once per row.
    """
    return sql.SQL("(SELECT {})").format(current_tenant_value())
