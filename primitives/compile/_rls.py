"""Ownership, row-level security, grants and comments (DESIGN §5, tenancy rules 1-4).

Every table gets ``ENABLE`` and ``FORCE ROW LEVEL SECURITY``, a tenant policy for the app
role with identical ``USING`` and ``WITH CHECK``, and a read-only policy for the auditor.
Grants are reset (``REVOKE ALL``) before they are given, so a re-applied plan leaves
exactly the privileges it lists.

>>> from primitives.compile._names import Table
>>> enable_rls_sql(Table("platform", "x_memories")).as_string(None)
'ALTER TABLE "platform"."x_memories" ENABLE ROW LEVEL SECURITY'
"""

from __future__ import annotations

from collections.abc import Iterable

from psycopg import sql

from primitives.compile._ddl import Privilege
from primitives.compile._expr import current_tenant_expr
from primitives.compile._names import (
    APP_ROLE,
    AUDITOR_ROLE,
    MAINTAINER_ROLE,
    OWNER_ROLE,
    Table,
    Tables,
)

__all__ = [
    "auditor_policy_name",
    "auditor_policy_sql",
    "create_schema_sql",
    "drop_policy_sql",
    "enable_rls_sql",
    "force_rls_sql",
    "grant_app_sql",
    "grant_auditor_sql",
    "grant_maintainer_sql",
    "grant_schema_usage_sql",
    "maintainer_policy_name",
    "maintainer_policy_sql",
    "owner_policy_name",
    "owner_policy_sql",
    "revoke_all_sql",
    "set_owner_role_sql",
    "tenant_policy_expression",
    "tenant_policy_name",
    "tenant_policy_sql",
]

_RUNTIME_ROLES = sql.SQL(", ").join([sql.Identifier(APP_ROLE), sql.Identifier(AUDITOR_ROLE)])
_GRANTEES = sql.SQL(", ").join([sql.Identifier(APP_ROLE), sql.Identifier(AUDITOR_ROLE),
                                sql.Identifier(MAINTAINER_ROLE)])
"""Every role the plan grants to: the runtime roles and the maintainer."""


def set_owner_role_sql() -> sql.Composed:
    """``SET LOCAL ROLE primitives_owner``: everything after it is owned by the owner role."""
    return sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(OWNER_ROLE))


def create_schema_sql(schema: str) -> sql.Composed:
    return sql.SQL("CREATE SCHEMA IF NOT EXISTS {} AUTHORIZATION {}").format(
        sql.Identifier(schema), sql.Identifier(OWNER_ROLE)
    )


def grant_schema_usage_sql(schema: str) -> sql.Composed:
    return sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(schema), _GRANTEES)


def enable_rls_sql(table: Table) -> sql.Composed:
    return sql.SQL("ALTER TABLE {} ENABLE ROW LEVEL SECURITY").format(table.ident)


def force_rls_sql(table: Table) -> sql.Composed:
    """``FORCE``: the policies bind the table owner too."""
    return sql.SQL("ALTER TABLE {} FORCE ROW LEVEL SECURITY").format(table.ident)


def tenant_policy_name(tables: Tables) -> str:
    return tables.object_name("tenant_isolation")


def auditor_policy_name(tables: Tables) -> str:
    return tables.object_name("auditor_read")


def tenant_policy_expression(tenant_column: str) -> sql.Composed:
    """``("<tenant>" = (SELECT nullif(current_setting('primitives.tenant', true), '')))``.

    With no tenant set, the right side is NULL and the policy admits no row at all.
    """
    return sql.SQL("({} = {})").format(sql.Identifier(tenant_column), current_tenant_expr())


def drop_policy_sql(name: str, table: Table) -> sql.Composed:
    return sql.SQL("DROP POLICY IF EXISTS {} ON {}").format(sql.Identifier(name), table.ident)


def tenant_policy_sql(tables: Tables, table: Table) -> sql.Composed:
    """The app role sees and writes only rows of the transaction's tenant."""
    expression = tenant_policy_expression(tables.tenant_column)
    return sql.SQL(
        "CREATE POLICY {} ON {} AS PERMISSIVE FOR ALL TO {} USING {} WITH CHECK {}"
    ).format(
        sql.Identifier(tenant_policy_name(tables)),
        table.ident,
        sql.Identifier(APP_ROLE),
        expression,
        expression,
    )


def owner_policy_name(tables: Tables) -> str:
    return tables.object_name("owner_tenant")


def owner_policy_sql(tables: Tables, table: Table) -> sql.Composed:
    """The owner sees the transaction's tenant only: what the SECURITY DEFINER functions
    (which run as the owner, under forced row-level security) may touch."""
    expression = tenant_policy_expression(tables.tenant_column)
    return sql.SQL(
        "CREATE POLICY {} ON {} AS PERMISSIVE FOR ALL TO {} USING {} WITH CHECK {}"
    ).format(
        sql.Identifier(owner_policy_name(tables)),
        table.ident,
        sql.Identifier(OWNER_ROLE),
        expression,
        expression,
    )


def auditor_policy_sql(tables: Tables, table: Table) -> sql.Composed:
    """Auditors read across tenants; they hold no write grant, so the policy is read-only."""
    return sql.SQL("CREATE POLICY {} ON {} AS PERMISSIVE FOR SELECT TO {} USING (true)").format(
        sql.Identifier(auditor_policy_name(tables)), table.ident, sql.Identifier(AUDITOR_ROLE)
    )


def revoke_all_sql(relation: Table) -> sql.Composed:
    return sql.SQL("REVOKE ALL ON TABLE {} FROM {}").format(relation.ident, _GRANTEES)


def grant_app_sql(relation: Table, privileges: Iterable[Privilege],
                  update_columns: Iterable[str] = ()) -> sql.Composed:
    """``GRANT SELECT, INSERT[, UPDATE (<columns>)]``: column-level UPDATE only."""
    granted: list[sql.Composable] = [sql.SQL(p) for p in privileges]
    columns = list(update_columns)
    if columns:
        granted.append(sql.SQL("UPDATE ({})").format(
            sql.SQL(", ").join(map(sql.Identifier, columns))))
    return sql.SQL("GRANT {} ON TABLE {} TO {}").format(
        sql.SQL(", ").join(granted),
        relation.ident,
        sql.Identifier(APP_ROLE),
    )


def maintainer_policy_name(tables: Tables) -> str:
    return tables.object_name("maintainer")


def maintainer_policy_sql(tables: Tables, table: Table) -> sql.Composed:
    """The maintainer sees every tenant: ``primitives maintain`` works set-based over a batch
    of tenants in one transaction. It holds only maintenance privileges, logs in as no one,
    and no runtime role is a member of it."""
    return sql.SQL(
        "CREATE POLICY {} ON {} AS PERMISSIVE FOR ALL TO {} USING (true) WITH CHECK (true)"
    ).format(sql.Identifier(maintainer_policy_name(tables)), table.ident,
             sql.Identifier(MAINTAINER_ROLE))


MAINTAINER_WRITES: tuple[str, ...] = ("memories", "events", "scopes", "promotions", "edges",
                                     "outbox")
"""The tables maintenance passes write (``Tables`` attribute names): the app role's privileges
there (DELETE too on memories; the outbox, because a promotion into a gate's ``from``
publishes); on the rest of ``MAINTAINER_READS`` SELECT, elsewhere none."""

MAINTAINER_READS: tuple[str, ...] = ("action_links", "entities", "node_entities",
                                    "canonical_refs")
"""Tables maintenance passes only read: action links (never remove a linked row), entity
mentions (decay protection), canonical references (archive on canonical change)."""


def grant_maintainer_sql(tables: Tables, relation: Table, privileges: Iterable[Privilege],
                         update_columns: Iterable[str] = ()) -> sql.Composed | None:
    """What the maintainer may do on ``relation``: on the tables maintenance writes, the app
    role's privileges, plus DELETE on memories (transient rows at an idle scope's end; the
    delete guard still refuses persistent and action-linked rows); SELECT on the tables it
    only reads; nothing on the others (checkpoints, graph sessions, approvals)."""
    kind = next((k for k in (*MAINTAINER_WRITES, *MAINTAINER_READS)
                 if getattr(tables, k, None) == relation), None)
    if kind is None:
        return None
    granted: list[sql.Composable] = [sql.SQL("SELECT")]
    if kind in MAINTAINER_WRITES:
        granted = [sql.SQL(p) for p in privileges]
        columns = list(update_columns)
        if columns:
            granted.append(sql.SQL("UPDATE ({})").format(
                sql.SQL(", ").join(map(sql.Identifier, columns))))
        if kind == "memories":
            granted.append(sql.SQL("DELETE"))
    return sql.SQL("GRANT {} ON TABLE {} TO {}").format(
        sql.SQL(", ").join(granted), relation.ident, sql.Identifier(MAINTAINER_ROLE))


def grant_auditor_sql(relation: Table) -> sql.Composed:
    return sql.SQL("GRANT SELECT ON TABLE {} TO {}").format(
        relation.ident, sql.Identifier(AUDITOR_ROLE)
    )
