"""Read-only tools for compliance auditors (DESIGN §5): views as tables, chain verification.

Everything here runs as the auditor role (``primitives_auditor``), which reads every
tenant's rows of the audit views and journals and writes nothing.

- :mod:`primitives.audit.views`: the compliance views as SQLAlchemy Core tables
  (:func:`audit_tables`), and a read-only auditor engine (:func:`create_audit_engine`).
- :func:`verify_chains`: re-walk each tenant's hash chain with ``primitives.verify_chain``;
  optional :class:`Anchor` heads, kept outside the database, catch removal of the newest events.

Example::

    from primitives.audit import audit_tables, create_audit_engine, verify_chains
"""

from primitives.audit._chain import (
    Anchor,
    ChainReport,
    anchors_from_reports,
    connect_auditor,
    verify_chains,
)
from primitives.audit.views import (
    SHORT_NAMES,
    AuditViews,
    audit_tables,
    create_audit_engine,
    show_query,
    sqlalchemy_url,
)

__all__ = [
    "SHORT_NAMES",
    "Anchor",
    "AuditViews",
    "ChainReport",
    "anchors_from_reports",
    "audit_tables",
    "connect_auditor",
    "create_audit_engine",
    "show_query",
    "sqlalchemy_url",
    "verify_chains",
]
