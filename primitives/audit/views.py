"""The compliance views of an agent as SQLAlchemy Core tables, for Python, pandas and notebooks.

Auditors query the views the plan created (``<prefix>_audit_*``, DESIGN §5) through these
``Table`` objects instead of writing SQL against internal tables. Each table is
schema-qualified and typed from :data:`primitives.compile.VIEW_COLUMNS`; every view but
``policy_coverage`` starts with the agent's tenant column. Building them is pure: nothing
connects until a query runs.

Example (as the auditor role; reads every tenant)::

    import sqlalchemy as sa
    from primitives.audit.views import audit_tables, create_audit_engine
    from primitives.spec import load_spec

    views = audit_tables(load_spec("agents/spectral_agent.yaml"))
    engine = create_audit_engine()           # auditor DSN of the resolved server
    query = (
        sa.select(views.erasures.c.workspace_id, views.erasures.c.memory_id,
                  views.erasures.c.residue)
        .where(views.erasures.c.residue)      # must always be empty
    )
    with engine.connect() as conn:
        leftovers = conn.execute(query).all()
    # pandas: pd.read_sql(sa.select(views.retention_state), engine)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any, Final

import psycopg
import sqlalchemy as sa
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import URL
from sqlalchemy.types import TypeEngine

from primitives.compile import VIEW_COLUMNS, Tables, agent_tables
from primitives.compile._views import view_comments
from primitives.errors import StorageError
from primitives.spec import AgentSpec

__all__ = [
    "COLUMN_TYPES",
    "SHORT_NAMES",
    "AuditViews",
    "audit_tables",
    "create_audit_engine",
    "show_query",
    "sqlalchemy_url",
]

_TEXT = sa.Text()
_UUID = sa.Uuid(as_uuid=True)
_TIME = sa.DateTime(timezone=True)
_JSONB = postgresql.JSONB()
_BIGINT = sa.BigInteger()
_BOOL = sa.Boolean()

COLUMN_TYPES: Final[Mapping[str, TypeEngine[Any]]] = {
    "memory_id": _UUID, "event_id": _UUID, "root_id": _UUID, "superseded_by": _UUID,
    "seq": _BIGINT, "step": _BIGINT, "link_count": _BIGINT, "erasure_event_seq": _BIGINT,
    "depth": sa.Integer(),
    "occurred_at": _TIME, "created_at": _TIME, "superseded_at": _TIME, "linked_at": _TIME,
    "memory_created_at": _TIME, "last_accessed_at": _TIME, "erased_at": _TIME,
    "payload": _JSONB, "stripped": _JSONB, "kinds": _JSONB, "fields": _JSONB,
    "consent_event": _UUID, "raw_found": _BOOL,
    "namespace": postgresql.ARRAY(sa.Text()),
    "is_latest": _BOOL, "persistent": _BOOL, "residue": _BOOL, "present": _BOOL,
    "rls_enabled": _BOOL, "rls_forced": _BOOL, "tenant_policy": _BOOL, "auditor_policy": _BOOL,
    **{name: _TEXT for name in (
        "kind", "actor", "prev_hash", "hash", "tier", "typology", "key", "action_id",
        "link_kind", "content", "memory_state", "retention_state", "erasure_reason", "gate",
        "from_ref", "to_ref", "table_schema", "table_name", "owner", "policy", "action",
    )},
}
"""SQLAlchemy type of every column name that appears in :data:`VIEW_COLUMNS`."""

SHORT_NAMES: Final[Mapping[str, str]] = {
    "lineage": "lineage",
    "supersession": "supersession",
    "actions": "action_basis",
    "retention": "retention_state",
    "erasures": "erasures",
    "sanitization": "sanitization",
    "redactions": "redactions",
    "coverage": "policy_coverage",
}
"""Names the ``primitives audit show`` command accepts, mapped to :class:`AuditViews` fields."""


@dataclass(frozen=True)
class AuditViews:
    """One SQLAlchemy ``Table`` per compliance view of one agent.

    Field ``x`` is the view ``<prefix>_audit_x``; ``tenant_column`` names the tenant column
    that leads every view except ``policy_coverage``.
    """

    agent: str
    tenant_column: str
    lineage: sa.Table
    supersession: sa.Table
    action_basis: sa.Table
    retention_state: sa.Table
    erasures: sa.Table
    sanitization: sa.Table
    redactions: sa.Table
    policy_coverage: sa.Table

    def __iter__(self) -> Iterator[sa.Table]:
        """The views, in the order the plan creates them."""
        return (value for value in (getattr(self, f.name) for f in fields(self))
                if isinstance(value, sa.Table))

    def view(self, name: str) -> sa.Table:
        """A view by field name (``action_basis``), CLI name (``actions``) or view name."""
        field = SHORT_NAMES.get(name, name)
        for table in self:
            if field in (table.name, table.name.split("_audit_", 1)[-1]):
                return table
        known = ", ".join(SHORT_NAMES)
        raise KeyError(f"agent '{self.agent}' has no audit view '{name}'; expected one of {known}")

    def has_tenant(self, table: sa.Table) -> bool:
        """Whether ``table`` has the tenant column (every view but ``policy_coverage``)."""
        return self.tenant_column in table.c


def _view_table(tables: Tables, short: str, metadata: sa.MetaData, comment: str) -> sa.Table:
    name = f"{tables.prefix}_audit_{short}"
    names = VIEW_COLUMNS[f"audit_{short}"]
    if short != "policy_coverage":
        names = (tables.tenant_column, *names)
    columns = [sa.Column(n, COLUMN_TYPES.get(n, _TEXT) if n != tables.tenant_column else _TEXT)
               for n in names]
    # keep_existing: asking twice with one MetaData returns the table already defined there.
    return sa.Table(name, metadata, *columns, schema=tables.schema, comment=comment,
                    info={"agent": tables.agent, "view": short}, keep_existing=True)


def audit_tables(spec: AgentSpec, metadata: sa.MetaData | None = None) -> AuditViews:
    """The compliance views of ``spec`` as SQLAlchemy Core tables (pure, no I/O).

    ``metadata`` defaults to a fresh ``MetaData``; pass one to collect several agents'
    views in one place.

    >>> from primitives.spec import load_spec
    >>> views = audit_tables(load_spec("agents/spectral_agent.yaml"))  # doctest: +SKIP
    >>> str(views.erasures)  # doctest: +SKIP
    'platform.spectral_audit_erasures'
    """
    tables = agent_tables(spec)
    metadata = metadata if metadata is not None else sa.MetaData()
    comments = view_comments(tables)
    shorts = ("lineage", "supersession", "action_basis", "retention_state", "erasures",
              "sanitization", "redactions", "policy_coverage")
    built = {
        short: _view_table(tables, short, metadata, comments[f"{tables.prefix}_audit_{short}"])
        for short in shorts
    }
    return AuditViews(agent=spec.agent, tenant_column=tables.tenant_column, **built)


def sqlalchemy_url(dsn: str) -> URL:
    """A ``postgresql+psycopg`` URL for a libpq DSN (``key=value`` or ``postgresql://``).

    A unix-socket directory (``host=/path``), several hosts, and every other libpq
    parameter travel in the URL's query, which the psycopg dialect hands to libpq.
    """
    try:
        params: dict[str, Any] = dict(conninfo_to_dict(dsn))
    except psycopg.ProgrammingError as err:
        raise StorageError(f"not a valid PostgreSQL DSN: {err}") from err
    host = params.pop("host", None)
    port = params.pop("port", None)
    query = {k: str(v) for k, v in params.items() if k not in ("user", "password", "dbname")}
    plain_host = isinstance(host, str) and host and not host.startswith("/") and "," not in host
    plain_port = isinstance(port, str | int) and str(port).isdigit()
    if host is not None and not plain_host:
        query["host"] = str(host)
    if port is not None and not (plain_host and plain_port):
        query["port"] = str(port)
    return URL.create(
        "postgresql+psycopg",
        username=params.get("user"),
        password=params.get("password"),
        host=str(host) if plain_host else None,
        port=int(port) if plain_host and plain_port else None,
        database=params.get("dbname"),
        query=query,
    )


def create_audit_engine(dsn: str | None = None, **engine_options: Any) -> sa.Engine:
    """A SQLAlchemy engine for the auditor role; transactions are read-only.

    ``dsn`` defaults to the auditor DSN of the resolved server (``$PRIMITIVES_AUDITOR_DSN``,
    else ``$PRIMITIVES_DSN`` or the embedded server as ``primitives_auditor``). The
    embedded server may be started; nothing connects until the engine is used.
    """
    if dsn is None:
        from primitives.db import auditor_dsn, resolve_dsn

        dsn = auditor_dsn(resolve_dsn())
    engine = sa.create_engine(sqlalchemy_url(dsn), **engine_options)
    return engine.execution_options(postgresql_readonly=True)


_ORDER: Final[Mapping[str, tuple[str, ...]]] = {
    "lineage": ("memory_id", "step"),
    "supersession": ("root_id", "depth"),
    "action_basis": ("action_id", "memory_id"),
    "retention_state": ("created_at", "memory_id"),
    "erasures": ("erased_at", "memory_id"),
    "sanitization": ("seq",),
    "redactions": ("seq",),
    "policy_coverage": ("table_schema", "table_name"),
}


def show_query(
    views: AuditViews, name: str, *, tenant: str | None = None, limit: int | None = None
) -> sa.Select[Any]:
    """``SELECT`` of one view in a stable order, optionally one tenant's rows and at most ``limit``.

    Raises ``KeyError`` for an unknown view and ``ValueError`` for a tenant filter on
    ``policy_coverage``, which has no tenant column.
    """
    table = views.view(name)
    short = str(table.info["view"])
    query = sa.select(table)
    if tenant is not None:
        if not views.has_tenant(table):
            raise ValueError(f"{table.fullname} has no tenant column; drop the tenant filter")
        query = query.where(table.c[views.tenant_column] == tenant)
    order = (views.tenant_column, *_ORDER[short]) if views.has_tenant(table) else _ORDER[short]
    query = query.order_by(*(table.c[c] for c in order))
    return query.limit(limit) if limit is not None else query
