"""AgentSpec -> Plan: the DDL, row-level security, indexes and audit views a spec implies.

Pure: nothing here opens a connection. Every statement is a ``psycopg.sql.Composed``
built from identifiers and literals, idempotent, and renderable for review.

Example::

    from primitives.compile import Capabilities, agent_tables, compile_plan
    from primitives.spec import load_spec

    spec = load_spec("agents/spectral_agent.yaml")
    plan = compile_plan(spec, capabilities=Capabilities(vector=False))
    print(plan.render())                 # the SQL, each statement under a "-- title" line
    plan.checksum                        # sha256 of the rendered SQL
    agent_tables(spec).memories.ident    # "platform"."spectral_memories", for sql.SQL(...)
"""

from primitives.compile._capabilities import (
    DEFAULT_CAPABILITIES,
    MIN_SERVER_VERSION,
    Capabilities,
    require_server_version,
)
from primitives.compile._citus import compile_citus
from primitives.compile._ddl import Column, Constraint, Index, TableDef, Trigger
from primitives.compile._expr import (
    ACTIVE_STATE_COLUMNS,
    ERASED_CONTENT_PATTERN,
    active_predicate,
    current_tenant_expr,
)
from primitives.compile._names import Table, Tables, agent_tables
from primitives.compile._optional_tables import REQUEST_STATUSES
from primitives.compile._plan import Plan, Step, compile_plan, table_definitions
from primitives.compile._rls import tenant_policy_expression
from primitives.compile._tables import (
    CURRENT_KEY_COLUMNS,
    GENERATED_MEMORY_COLUMNS,
    OBSERVED_EVENT_KIND,
    RETIRED_MEMORY_INDEXES,
)
from primitives.compile._views import (
    ERASED_EVENT_KIND,
    RETENTION_STATES,
    SANITIZED_EVENT_KIND,
    VIEW_COLUMNS,
)

__all__ = [
    "ACTIVE_STATE_COLUMNS",
    "CURRENT_KEY_COLUMNS",
    "DEFAULT_CAPABILITIES",
    "ERASED_CONTENT_PATTERN",
    "ERASED_EVENT_KIND",
    "GENERATED_MEMORY_COLUMNS",
    "MIN_SERVER_VERSION",
    "OBSERVED_EVENT_KIND",
    "REQUEST_STATUSES",
    "RETENTION_STATES",
    "RETIRED_MEMORY_INDEXES",
    "SANITIZED_EVENT_KIND",
    "VIEW_COLUMNS",
    "Capabilities",
    "Column",
    "Constraint",
    "Index",
    "Plan",
    "Step",
    "Table",
    "TableDef",
    "Tables",
    "Trigger",
    "active_predicate",
    "agent_tables",
    "compile_citus",
    "compile_plan",
    "current_tenant_expr",
    "require_server_version",
    "table_definitions",
    "tenant_policy_expression",
]
