"""Names shared by the framework migrations and the Python code that relies on them.

The SQLSTATEs below are raised by the trigger functions in
``migrations/0002_audit_functions.sql``. They live in class ``PM`` ("primitives
memory"), which PostgreSQL does not use, so they never clash with a server error.
A test triggers each one and checks the code, so the SQL and these constants
cannot drift apart.
"""

from __future__ import annotations

from typing import Final

OWNER_ROLE: Final = "primitives_owner"
"""NOLOGIN role that owns every schema, table and function the framework creates."""

APP_ROLE: Final = "primitives_app"
"""LOGIN role used by every runtime path: NOSUPERUSER NOBYPASSRLS, owns nothing."""

AUDITOR_ROLE: Final = "primitives_auditor"
"""LOGIN role that reads the audit views only."""

MAINTAINER_ROLE: Final = "primitives_maintainer"
"""NOLOGIN role of ``primitives maintain``: sees every tenant, holds only maintenance
privileges; the admin connection takes it with SET ROLE, no runtime role can."""

PRIVACY_ADMIN_ROLE: Final = "primitives_privacy_admin"
"""LOGIN role, a member of the app role, that alone may run an agent's raw-PII read function
(each read journalled)."""

TENANT_SETTING: Final = "primitives.tenant"
"""The transaction-local setting read by ``primitives.current_tenant()``."""

SQLSTATE_APPEND_ONLY: Final = "PM001"
"""UPDATE, DELETE or TRUNCATE on an event journal (``primitives.refuse_journal_mutation``)."""

SQLSTATE_PERSISTENT_DELETE: Final = "PM002"
"""Hard DELETE of a persistent-tier memory row (``primitives.guard_memory_delete``)."""

SQLSTATE_LINKED_DELETE: Final = "PM003"
"""Hard DELETE of a memory row an action links to (``primitives.guard_memory_delete``)."""

SQLSTATE_JOURNAL_ISOLATION: Final = "PM004"
"""A journal insert outside READ COMMITTED, where the hash chain could fork (``primitives.chain_event``)."""

SQLSTATE_NON_MIRROR: Final = "PM005"
"""A memory write copies canonical text (an agent's compiled non-mirror guard)."""

SQLSTATE_CAPACITY: Final = "PM006"
"""A memory write past its tier's declared capacity (an agent's compiled capacity guard):
``STORAGE_FULL``, not a policy refusal."""

POLICY_SQLSTATES: Final = frozenset(
    {
        "42501",  # insufficient_privilege: grants, and row-level security WITH CHECK
        SQLSTATE_APPEND_ONLY,
        SQLSTATE_PERSISTENT_DELETE,
        SQLSTATE_LINKED_DELETE,
        SQLSTATE_NON_MIRROR,
    }
)
"""SQLSTATEs meaning "the database refused this on policy grounds" (mapped to PolicyViolation)."""
