"""``compile_plan``: an AgentSpec becomes an ordered, idempotent, reviewable list of DDL steps.

>>> from primitives.spec import load_spec
>>> plan = compile_plan(load_spec("agents/spectral_agent.yaml"))  # doctest: +SKIP
>>> print(plan.render())  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import cached_property

from psycopg import sql

from primitives.compile._access import AuditorAccess, auditor_access, auditor_grant
from primitives.compile._capabilities import (
    DEFAULT_CAPABILITIES,
    Capabilities,
    require_server_version,
)
from primitives.compile._checkpointer import checkpointer_definitions, checkpointer_tables
from primitives.compile._ddl import (
    TableDef,
    add_columns_sql,
    bounds_constraint_name,
    bounds_function_name,
    bounds_function_sql,
    bounds_grant_sql,
    bounds_revoke_sql,
    comment_sql,
    create_index_sql,
    create_table_sql,
    create_trigger_sql,
    drop_index_sql,
    drop_superseded_indexes_sql,
    drop_trigger_sql,
    replace_checks_sql,
    validate_checks_sql,
)
from primitives.compile._definer import definer_names
from primitives.compile._names import (
    APP_ROLE,
    MAINTAINER_ROLE,
    Table,
    Tables,
    agent_tables,
    check_name_length,
)
from primitives.compile._non_mirror import canonical_refs_table
from primitives.compile._optional_tables import (
    action_requests_table,
    approvals_table,
    edges_table,
    entities_table,
    node_entities_table,
    pii_raw_table,
    sessions_table,
)
from primitives.compile._outbox import PUBLISH_TRIGGER, drop_publish_trigger_sql, outbox_table
from primitives.compile._rls import (
    auditor_policy_name,
    auditor_policy_sql,
    create_schema_sql,
    drop_policy_sql,
    enable_rls_sql,
    force_rls_sql,
    grant_app_sql,
    grant_maintainer_sql,
    grant_schema_usage_sql,
    maintainer_policy_name,
    maintainer_policy_sql,
    owner_policy_name,
    owner_policy_sql,
    revoke_all_sql,
    set_owner_role_sql,
    tenant_policy_name,
    tenant_policy_sql,
)
from primitives.compile._seeded import with_clock
from primitives.compile._tables import (
    action_links_table,
    events_table,
    memories_table,
    promotions_table,
    scopes_table,
)
from primitives.compile._views import (
    action_basis_view,
    active_memories_view,
    erasures_view,
    lineage_view,
    policy_coverage_view,
    redactions_view,
    retention_state_view,
    sanitization_view,
    supersession_view,
    view_comments,
)
from primitives.errors import SpecError
from primitives.spec import AgentSpec

__all__ = ["Plan", "Step", "compile_plan", "table_definitions"]


@dataclass(frozen=True)
class Step:
    """One SQL statement of a plan and the title shown above it when rendered."""

    title: str
    statement: sql.Composed
    commit_after: bool = False
    """Only in a Citus plan: the statement distributes a table, and the plan commits after it
    (Citus creates shards over connections of its own, which must see what came before)."""

    def render(self) -> str:
        return f"-- {self.title}\n{self.statement.as_string(None)};\n"


@dataclass(frozen=True)
class Plan:
    """The compiled DDL of one agent: ordered, idempotent statements, rendered for review."""

    agent: str
    steps: tuple[Step, ...]
    tables: Tables
    capabilities: Capabilities
    definitions: tuple[TableDef, ...]
    validations: tuple[Step, ...] = ()
    """Run after the plan commits, each in its own transaction: the existing rows against the
    CHECKs the plan added ``NOT VALID`` (no exclusive lock is held during the scan)."""

    @property
    def statements(self) -> tuple[sql.Composed, ...]:
        """The statements alone, in order (what ``primitives.db.apply_plan`` runs)."""
        return tuple(step.statement for step in self.steps)

    def render(self) -> str:
        """The whole plan as SQL text, each statement under a ``-- title`` line."""
        return self._rendered

    @cached_property
    def _rendered(self) -> str:
        enabled = [name for name in ("vector", "trigram", "btree_gin")
                   if getattr(self.capabilities, name)]
        header = (
            f"-- primitives plan for agent '{self.agent}': {len(self.steps)} statements\n"
            f"-- store {self.tables.schema}.{self.tables.prefix}_*, tenant column "
            f"{self.tables.tenant_column}; extensions: {', '.join(enabled) or 'none'}"
            f"{'; leakproof full-text match' if self.capabilities.text_match else ''}\n"
        )
        validations = "".join("\n" + step.render() for step in self.validations)
        if validations:
            validations = ("\n-- after the plan commits, each in its own transaction (readers "
                           "and writers are not blocked):\n" + validations)
        return header + "".join("\n" + step.render() for step in self.steps) + validations

    @cached_property
    def checksum(self) -> str:
        """sha256 (hex) of :meth:`render`: the plan's identity in ``primitives.agent_plans``."""
        return hashlib.sha256(self.render().encode()).hexdigest()

    def definition(self, table: Table) -> TableDef:
        """The definition of one of the plan's tables (columns, keys, indexes, triggers)."""
        for definition in self.definitions:
            if definition.table == table:
                return definition
        raise KeyError(table.qualified)


def table_definitions(
    spec: AgentSpec, capabilities: Capabilities = DEFAULT_CAPABILITIES, tables: Tables | None = None
) -> tuple[TableDef, ...]:
    """Every table of the agent, in creation order (a referenced table before its referrers)."""
    tables = tables or agent_tables(spec)
    definitions = [
        memories_table(spec, tables, capabilities),
        events_table(tables, embedding=capabilities.vector, spec=spec),
        action_links_table(tables),
        scopes_table(spec, tables),
        promotions_table(tables),
    ]
    if spec.graph is not None:
        definitions += [
            entities_table(spec, spec.graph, tables, capabilities),
            edges_table(spec, spec.graph, tables),
            node_entities_table(tables),
            sessions_table(tables),
        ]
    if tables.action_requests is not None:
        definitions += [action_requests_table(spec, tables), approvals_table(tables)]
    if tables.pii_raw is not None:
        definitions.append(pii_raw_table(tables, embedding=capabilities.vector))
    if tables.canonical_refs is not None:
        definitions.append(canonical_refs_table(spec, tables, capabilities))
    if tables.outbox is not None:
        definitions.append(outbox_table(spec, tables, embedding=capabilities.vector))
    definitions += checkpointer_definitions(spec, tables)
    return with_clock(spec, tables, tuple(definitions))


def _check_names(spec: AgentSpec, tables: Tables, definitions: tuple[TableDef, ...]) -> None:
    for definition in definitions:
        duplicated = [n for n, count in Counter(definition.column_names).items() if count > 1]
        if duplicated:
            raise SpecError(
                f"anchor key '{duplicated[0]}' clashes with a column the framework puts in "
                f"{definition.table.name}; rename the anchor key (e.g. '{duplicated[0]}_id')",
                file=spec.source, field="anchor.keys",
            )
        bounds = ((bounds_function_name(definition.table),
                   bounds_constraint_name(definition.table)) if definition.bounds else ())
        for name in (
            *bounds,
            *(c.name for c in definition.constraints),
            *(i.name for i in definition.indexes),
            *(t.name for t in definition.triggers),
        ):
            check_name_length(spec, name)
    check_name_length(spec, tenant_policy_name(tables))
    check_name_length(spec, auditor_policy_name(tables))
    check_name_length(spec, owner_policy_name(tables))
    check_name_length(spec, maintainer_policy_name(tables))
    for name in definer_names(tables, checkpointer_tables(tables)):
        check_name_length(spec, name)


def _schema_steps(tables: Tables) -> Iterator[Step]:
    schemas = [tables.schema]
    if tables.checkpointer_schema and tables.checkpointer_schema != tables.schema:
        schemas.append(tables.checkpointer_schema)
    for schema in schemas:
        yield Step(f"schema {schema}", create_schema_sql(schema))
        yield Step(f"schema {schema}: usage for the runtime roles", grant_schema_usage_sql(schema))


def _table_steps(tables: Tables, definition: TableDef, *, not_valid: bool = False,
                 access: AuditorAccess | None = None) -> Iterator[Step]:
    table = definition.table
    name = table.qualified
    yield Step(f"{name}: table", create_table_sql(definition))
    added = add_columns_sql(definition)
    if added is not None:
        yield Step(f"{name}: columns added since the table first shipped", added)
    if definition.bounds:
        bounds = f"{table.schema}.{bounds_function_name(table)}"
        yield Step(f"{name}: bounds function {bounds} (its CHECKs, planned once per session)",
                   bounds_function_sql(definition))
        yield Step(f"{name}: bounds function: not callable by PUBLIC",
                   bounds_revoke_sql(definition))
        yield Step(f"{name}: bounds function: the app role writes the table",
                   bounds_grant_sql(definition, APP_ROLE))
        yield Step(f"{name}: bounds function: the maintainer role writes the table",
                   bounds_grant_sql(definition, MAINTAINER_ROLE))
    checks = replace_checks_sql(definition, not_valid=not_valid)
    if checks is not None:
        yield Step(f"{name}: checks (replaced, so they follow the spec)", checks)
    for retired, why in definition.retired_indexes:
        yield Step(f"{name}: drop index {retired} ({why})", drop_index_sql(table, retired))
    for index in definition.indexes:
        if index.replaces is not None:
            yield Step(f"{name}: drop index {index.replaces} (replaced by {index.name})",
                       drop_index_sql(table, index.replaces))
        if index.supersedes_prefix is not None:
            yield Step(f"{name}: drop earlier definitions of index {index.name} "
                       f"({index.supersedes_prefix}*)",
                       drop_superseded_indexes_sql(table, index.supersedes_prefix, index.name))
        yield Step(f"{name}: index {index.name}", create_index_sql(table, index))
    for label, function in definition.functions:
        yield Step(f"{name}: {label}", function)
    for retired, why in definition.retired_triggers:
        yield Step(f"{name}: drop trigger {retired} ({why})", drop_trigger_sql(table, retired))
    for trigger in definition.triggers:
        yield Step(f"{name}: trigger {trigger.name}", create_trigger_sql(table, trigger))
    if definition.comment:
        yield Step(f"{name}: comment", comment_sql(table, definition.comment))
    yield Step(f"{name}: enable row level security", enable_rls_sql(table))
    yield Step(f"{name}: force row level security", force_rls_sql(table))
    for policy, create in (
        (tenant_policy_name(tables), tenant_policy_sql),
        (auditor_policy_name(tables), auditor_policy_sql),
        (owner_policy_name(tables), owner_policy_sql),
        (maintainer_policy_name(tables), maintainer_policy_sql),
    ):
        yield Step(f"{name}: replace policy {policy}", drop_policy_sql(policy, table))
        yield Step(f"{name}: policy {policy}", create(tables, table))
    yield from _grant_steps(table, definition, tables, access)


def _grant_steps(relation: Table, definition: TableDef | None = None,
                 tables: Tables | None = None,
                 access: AuditorAccess | None = None) -> Iterator[Step]:
    name = relation.qualified
    privileges = definition.app_privileges if definition is not None else ("SELECT",)
    # only the columns this table has (no embedding without pgvector)
    columns = tuple(c for c in definition.app_update_columns
                    if c in definition.column_names) if definition is not None else ()
    yield Step(f"{name}: reset grants", revoke_all_sql(relation))
    yield Step(f"{name}: grants for the app role",
               grant_app_sql(relation, privileges, columns))
    if tables is None or relation != tables.pii_raw:  # raw personal data: no auditor reads
        # under an access policy: listed views only, no payload columns (compile._access)
        auditor = auditor_grant(access, relation, definition)
        if auditor is not None:
            yield Step(f"{name}: grants for the auditor role", auditor)
    maintainer = grant_maintainer_sql(tables, relation, privileges, columns) if (
        definition is not None and tables is not None) else None
    if maintainer is not None:
        yield Step(f"{name}: grants for the maintainer role", maintainer)


def _unpublish_steps(tables: Tables) -> Iterator[Step]:
    """Without an outbox: drop the publish trigger an earlier plan of the spec created."""
    if tables.outbox is None:
        yield Step(f"{tables.memories.qualified}: drop trigger {PUBLISH_TRIGGER} if an "
                   "earlier plan published (this spec publishes nothing)",
                   drop_publish_trigger_sql(tables))


def _view_steps(
    spec: AgentSpec, tables: Tables, memories: TableDef, capabilities: Capabilities
) -> Iterator[Step]:
    views = (
        (tables.active_memories, active_memories_view(tables, memories.column_names)),
        (tables.audit_lineage, lineage_view(tables)),
        (tables.audit_supersession, supersession_view(tables)),
        (tables.audit_action_basis, action_basis_view(tables)),
        (tables.audit_retention_state, retention_state_view(spec, tables)),
        (tables.audit_erasures, erasures_view(tables, has_embedding=capabilities.vector)),
        (tables.audit_sanitization, sanitization_view(tables)),
        (tables.audit_redactions, redactions_view(tables)),
        (tables.audit_policy_coverage, policy_coverage_view(tables)),
    )
    comments = view_comments(tables)
    for view, statement in views:
        yield Step(f"{view.qualified}: view", statement)
        yield Step(f"{view.qualified}: comment", comment_sql(view, comments[view.name]))
        yield from _grant_steps(view, access=auditor_access(spec, tables))


def compile_plan(spec: AgentSpec, *, capabilities: Capabilities = DEFAULT_CAPABILITIES) -> Plan:
    """Compile ``spec`` into its DDL plan. Pure and deterministic: same spec, same SQL.

    Raises :class:`~primitives.errors.SpecError` for names PostgreSQL cannot hold (too long,
    or an anchor key that clashes with a framework column) and
    :class:`~primitives.errors.StorageError` for a server older than PostgreSQL 15.
    """
    require_server_version(capabilities)
    if "semantic" not in spec.retrieval.signals:
        # No semantic signal: no embedding column, no vector index, whatever the server has.
        capabilities = replace(capabilities, vector=False)
    tables = agent_tables(spec)
    definitions = table_definitions(spec, capabilities, tables)
    _check_names(spec, tables, definitions)
    steps: list[Step] = [Step("objects are owned by the owner role", set_owner_role_sql())]
    steps += _schema_steps(tables)
    for definition in definitions:
        steps += _table_steps(tables, definition, not_valid=True,
                              access=auditor_access(spec, tables))
    steps += _unpublish_steps(tables)
    steps += _view_steps(spec, tables, definitions[0], capabilities)
    validations = tuple(
        Step(f"{d.table.qualified}: validate the checks against the existing rows", v)
        for d in definitions for v in [validate_checks_sql(d)] if v is not None)
    return Plan(
        agent=spec.agent,
        steps=tuple(steps),
        tables=tables,
        capabilities=capabilities,
        definitions=definitions,
        validations=validations,
    )
