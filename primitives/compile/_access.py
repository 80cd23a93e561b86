"""An agent's access policy (``discipline.visibility.policy``, seed 001 §5 and §10), in grants.

Without an access policy the auditor role reads every table of the agent but the raw-PII
table, and every compliance view. An access policy narrows that, in the database's own
privileges (checked whatever the caller runs):

* the auditor reads the compliance views the policy lists in ``auditor_views`` and no other
  (the grant on an unlisted view is revoked at migrate);
* on the tables, never the payload columns (:data:`WITHHELD`): the memory rows' ``value``,
  ``envelope`` and ``embedding``, an action request's ``payload``, a checkpoint's state and
  blobs. Full payloads are the
  tenant's own (its app role) and the privacy admin's (raw values kept with consent); an
  auditor sees the journal, the hashes and the states, not what was remembered.

Every view a policy may list reads no withheld column, so listing one never needs a payload
(``erasures``, whose residue check reads ``value`` and ``envelope``, cannot be listed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from psycopg import sql

from primitives.compile._ddl import TableDef
from primitives.compile._names import AUDITOR_ROLE, Table, Tables
from primitives.compile._rls import grant_auditor_sql
from primitives.spec import AccessPolicy, AgentSpec

__all__ = ["AUDITOR_VIEWS", "WITHHELD", "AuditorAccess", "auditor_access", "auditor_grant"]

AUDITOR_VIEWS: Final[dict[str, str]] = {
    "lineage": "audit_lineage",
    "supersession_chains": "audit_supersession",
    "action_basis": "audit_action_basis",
    "retention_state": "audit_retention_state",
    "erasures": "audit_erasures",
    "sanitization_crossings": "audit_sanitization",
    "redactions": "audit_redactions",
    "policy_coverage": "audit_policy_coverage",
}
"""The names ``auditor_views`` uses, and the view (``<prefix>_<suffix>``) each names."""

WITHHELD: Final[dict[str, tuple[str, ...]]] = {
    "memories": ("value", "envelope", "embedding"),
    "action_requests": ("payload",),
    "checkpoints": ("checkpoint", "metadata"),
    "checkpoint_blobs": ("blob",),
    "checkpoint_writes": ("blob",),
}
"""Per table (``<prefix>_<suffix>``): the payload columns an access policy keeps from the
auditor."""


@dataclass(frozen=True)
class AuditorAccess:
    """What the auditor may read under an access policy: view names, withheld columns."""

    views: frozenset[str]
    withheld: dict[str, tuple[str, ...]]


def auditor_access(spec: AgentSpec, tables: Tables) -> AuditorAccess | None:
    """The auditor's access under the spec's access policy; None without one."""
    name = spec.discipline.visibility.policy
    policy = spec.policies.get(name) if name else None
    if not isinstance(policy, AccessPolicy):
        return None
    return AuditorAccess(
        views=frozenset(tables.object_name(AUDITOR_VIEWS[v]) for v in policy.auditor_views),
        withheld={tables.object_name(t): cols for t, cols in WITHHELD.items()})


def auditor_grant(access: AuditorAccess | None, relation: Table,
                  definition: TableDef | None) -> sql.Composed | None:
    """The auditor's grant on ``relation``: the whole relation without an access policy;
    under one, a listed view, or a table's columns but the withheld ones (None: no grant)."""
    if access is None:
        return grant_auditor_sql(relation)
    if relation.kind == "view":
        return grant_auditor_sql(relation) if relation.name in access.views else None
    withheld = access.withheld.get(relation.name, ())
    if not withheld or definition is None:
        return grant_auditor_sql(relation)
    columns = [c for c in definition.column_names if c not in withheld]
    return sql.SQL("GRANT SELECT ({}) ON TABLE {} TO {}").format(
        sql.SQL(", ").join(map(sql.Identifier, columns)), relation.ident,
        sql.Identifier(AUDITOR_ROLE))
