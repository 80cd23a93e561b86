"""``compile_citus``: the plan of :func:`compile_plan`, adapted to a Citus cluster (DESIGN §11).

Every table of an agent holds one tenant's rows under the tenant column, which leads
every key, so every table is distributed by that column and colocated with
``<prefix>_memories``: all of one tenant's rows, across tables, live on one node, and
each tenant-scoped statement is routed to a single shard. No table needs to be a
reference table: the agent has no table shared by all tenants (the framework's own
bookkeeping in schema ``primitives`` stays on the coordinator, read only by migrate).

What differs from the single-node plan, and why:

- Cluster settings first, as the migrating admin: the application role gets
  ``citus.propagate_set_commands = 'local'``, so the ``SET LOCAL primitives.tenant``
  of each tenant transaction reaches the workers, where row-level security and the
  journal trigger read it. This transaction turns on ``citus.enable_unsafe_triggers``
  (the journal and delete-guard triggers fire on the shards) and sequential
  shard DDL (distributing tables and adding foreign keys in one transaction).
- ``primitives.event_hash`` is distributed explicitly: ``chain_event`` calls it from
  PL/pgSQL, which records no dependency Citus could follow to the workers. So is each
  agent's bounds function (``<prefix>_memories_bounds``), which the memories shards'
  CHECK constraint calls on the workers.
- Tables are created without their foreign keys, each is distributed right after
  its indexes, triggers, policies and grants (so the shards get them), and the
  foreign keys are added once every table is distributed. Each one includes the
  tenant column on both sides, as Citus requires between colocated tables.
- The journal keeps the generic ``primitives.chain_event`` trigger (the single-node
  plan compiles a per-agent one, whose query would name the distributed journal from
  inside a shard).
- Row-level security policies compare the tenant column with
  ``nullif(current_setting('primitives.tenant', true), '')`` itself: Citus refuses a
  subquery in a policy of a distributed table, so the single-node form (a scalar subquery,
  evaluated once per statement) cannot be used.
- The leakproof full-text operator class is left out (``text_match`` off): Citus cannot
  distribute a table that depends on an operator class.
- Each ``create_distributed_table`` ends a transaction (``Step.commit_after``): Citus
  creates the shards over connections of its own, which must see the table as committed.
- The audit supersession view has no recursive CTE (Citus runs one over a distributed table
  only when it filters on the distribution column, so an auditor could not read the view):
  :func:`~primitives.compile._views.supersession_view_per_tenant` groups each tenant's
  links and walks them with the pure function ``primitives.supersession_chains``, created on
  every node; the whole query runs on each shard. Same columns, same rows.
- The delete guard on ``<prefix>_memories`` fires on a shard, where a query on the
  distributed ``<prefix>_action_links`` would be a nested distributed query, which
  Citus refuses. ``primitives.guard_memory_delete_citus`` reads the tenant's
  colocated action-links shard on the same node instead.

Pure like the rest of the package: statements are built with ``psycopg.sql`` only.

Example::

    plan = compile_citus(load_spec("agents/spectral_agent.yaml"))
    print(plan.render())
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Final

from psycopg import sql

from primitives.compile._access import auditor_access
from primitives.compile._capabilities import DEFAULT_CAPABILITIES, Capabilities
from primitives.compile._checkpointer import checkpointer_tables
from primitives.compile._ddl import (
    Constraint,
    TableDef,
    bounds_signature,
    replace_checks_one_by_one,
)
from primitives.compile._definer import (
    CHECKPOINT_DELETE_THREADS_CITUS_ARGS,
    DELETE_TRANSIENT_CITUS_ARGS,
    ERASE_ROW_CITUS_ARGS,
    checkpoint_delete_threads_function,
    checkpoint_delete_threads_functions_citus,
    erase_functions_citus,
    transient_delete_functions_citus,
)
from primitives.compile._expr import current_tenant_expr, current_tenant_value
from primitives.compile._names import APP_ROLE, AUDITOR_ROLE, FRAMEWORK_SCHEMA, Table, Tables
from primitives.compile._non_mirror import guard_functions
from primitives.compile._plan import (
    Plan,
    Step,
    _schema_steps,
    _table_steps,
    _unpublish_steps,
    _view_steps,
    compile_plan,
)
from primitives.compile._views import (
    supersession_chains_function,
    supersession_chains_signature,
    supersession_view_per_tenant,
)
from primitives.spec import AgentSpec

__all__ = [
    "CITUS_GUARD_FUNCTION",
    "compile_citus",
    "distribute_table_sql",
    "distributed_tables",
]

CITUS_GUARD_FUNCTION: Final = "guard_memory_delete_citus"
"""Name (schema ``primitives``) of the shard-local delete guard the Citus plan installs."""

_DISTRIBUTED_FUNCTIONS: Final = (
    "event_hash(text, bigint, text, uuid, text, jsonb, timestamptz)",
)
"""Framework functions the workers need that no table dependency brings along."""

# Same refusals and SQLSTATEs as primitives.guard_memory_delete() (migration 0002),
# but the action-links lookup reads the colocated shard on this node. Arguments:
# action-links table, tenant column. Only ever attached to <prefix>_memories.
_GUARD_FUNCTION: Final = sql.SQL("""\
CREATE OR REPLACE FUNCTION {name}() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
DECLARE
    links        regclass := TG_ARGV[0]::regclass;
    tenant_col   text     := TG_ARGV[1];
    tenant_value text;
    target       text;
    is_linked    boolean;
BEGIN
    IF TG_WHEN <> 'BEFORE' OR TG_OP <> 'DELETE' OR TG_LEVEL <> 'ROW' OR TG_NARGS <> 2 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('primitives.guard_memory_delete_citus() on %I.%I must be a BEFORE '
                             'DELETE FOR EACH ROW trigger with arguments (action-links table, '
                             'tenant column)', TG_TABLE_SCHEMA, TG_TABLE_NAME);
    END IF;
    IF coalesce(OLD.persistent, false) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'PM002',
            MESSAGE = format('refusing to delete memory %s from %I.%I: it is persistent-tier '
                             'memory, which is never hard-deleted',
                             OLD.id, TG_TABLE_SCHEMA, TG_TABLE_NAME),
            HINT    = 'Supersede, archive or tombstone it; erasure goes through the governed '
                      'erase path.';
    END IF;
    EXECUTE format('SELECT ($1).%I::text', tenant_col) INTO tenant_value USING OLD;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = links) THEN
        target := pg_catalog.shard_name(
            links, pg_catalog.get_shard_id_for_distribution_column(links, tenant_value));
    ELSE
        target := links::text;
    END IF;
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s l WHERE l.%I = $1 AND l.memory_id = $2)',
                   target, tenant_col)
        INTO is_linked USING tenant_value, OLD.id;
    IF is_linked THEN
        RAISE EXCEPTION USING
            ERRCODE = 'PM003',
            MESSAGE = format('refusing to delete memory %s from %I.%I: an action in %s is '
                             'linked to it', OLD.id, TG_TABLE_SCHEMA, TG_TABLE_NAME, links),
            HINT    = 'Memory that justified an action stays provable; tombstone or archive '
                      'it instead.';
    END IF;
    RETURN OLD;
END
$fn$""")


def _literal_name(relation: Table) -> sql.Literal:
    """``'"schema"."name"'``: a relation name as Citus functions take it (text or regclass)."""
    return sql.Literal(relation.ident.as_string(None))


def distributed_tables(plan: Plan) -> tuple[Table, ...]:
    """The tables the Citus plan distributes by the tenant column: every table of the agent."""
    return tuple(definition.table for definition in plan.definitions)


def distribute_table_sql(
    table: Table, tenant_column: str, colocate_with: Table | None, *, shard_count: int | None = None
) -> sql.Composed:
    """``SELECT create_distributed_table(...)`` unless the table is distributed already.

    ``colocate_with=None`` joins Citus's default colocation group for text columns
    (the first table of an agent, ``<prefix>_memories``); every other table names it.
    """
    args: list[sql.Composable] = [
        sql.SQL("{}::regclass").format(_literal_name(table)),
        sql.Literal(tenant_column),
        sql.SQL("colocate_with => {}").format(
            _literal_name(colocate_with) if colocate_with is not None else sql.Literal("default")
        ),
    ]
    if shard_count is not None:
        args.append(sql.SQL("shard_count => {}").format(sql.Literal(shard_count)))
    return sql.SQL(
        "SELECT pg_catalog.create_distributed_table({}) WHERE NOT EXISTS "
        "(SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = {}::regclass)"
    ).format(sql.SQL(", ").join(args), _literal_name(table))


def _distribute_function_sql(qualified_signature: str) -> sql.Composed:
    regprocedure = sql.Literal(qualified_signature)
    return sql.SQL(
        "SELECT pg_catalog.create_distributed_function({}::regprocedure) WHERE NOT EXISTS "
        "(SELECT 1 FROM pg_catalog.pg_dist_object WHERE classid = 'pg_catalog.pg_proc'::regclass "
        "AND objid = {}::regprocedure)"
    ).format(regprocedure, regprocedure)


_TENANT_SUBQUERY: Final = current_tenant_expr().as_string(None)
_TENANT_PLAIN: Final = current_tenant_value().as_string(None)


def _without_subquery(step: Step) -> Step:
    """A ``CREATE POLICY`` step with the tenant read directly, not through a subquery."""
    text = step.statement.as_string(None)
    if not text.startswith("CREATE POLICY") or _TENANT_SUBQUERY not in text:
        return step
    return replace(step, statement=_fixed(text.replace(_TENANT_SUBQUERY, _TENANT_PLAIN)))


def _fixed(statement: str) -> sql.Composed:
    return sql.Composed([sql.SQL(statement)])


def _cluster_steps() -> Iterator[Step]:
    yield Step("cluster settings: run as the migrating admin, not the owner role",
               _fixed("RESET ROLE"))
    yield Step(
        "cluster settings: SET LOCAL of the app role's transactions reaches the workers",
        sql.SQL("ALTER ROLE {} SET citus.propagate_set_commands = 'local'").format(
            sql.Identifier(APP_ROLE)),
    )
    yield Step("this transaction: triggers on distributed tables (journal chain, delete guard)",
               _fixed("SET LOCAL citus.enable_unsafe_triggers = on"))
    yield Step("this transaction: shard DDL over one connection per node (FKs after DDL)",
               _fixed("SET LOCAL citus.multi_shard_modify_mode = 'sequential'"))
    for signature in _DISTRIBUTED_FUNCTIONS:
        yield Step(f"{FRAMEWORK_SCHEMA}.{signature}: on every node",
                   _distribute_function_sql(f"{FRAMEWORK_SCHEMA}.{signature}"))


def _guard_function_sql() -> sql.Composed:
    return _GUARD_FUNCTION.format(name=sql.Identifier(FRAMEWORK_SCHEMA, CITUS_GUARD_FUNCTION))


def _with_citus_guard(definition: TableDef) -> TableDef:
    guard = sql.Identifier(FRAMEWORK_SCHEMA, CITUS_GUARD_FUNCTION)
    triggers = tuple(
        replace(t, function=guard) if t.function == sql.Identifier(
            FRAMEWORK_SCHEMA, "guard_memory_delete") else t
        for t in definition.triggers
    )
    return replace(definition, triggers=triggers)


def _with_generic_chain(definition: TableDef, tables: Tables) -> TableDef:
    """The journal with ``primitives.chain_event(tenant column)`` in place of the compiled one.

    On a worker the trigger fires on a shard, and the compiled function's query names the
    distributed journal, which would be a nested distributed query; the generic function
    reads ``TG_TABLE_NAME``, the shard itself.
    """
    generic = sql.Identifier(FRAMEWORK_SCHEMA, "chain_event")
    triggers = tuple(
        replace(t, function=generic, args=(tables.tenant_column,))
        if t.function == tables.chain_function else t
        for t in definition.triggers
    )
    comment = definition.comment.replace(tables.chain_function_name,
                                         f"{FRAMEWORK_SCHEMA}.chain_event")
    # the compiled chain function goes; the journal's other functions (erasure) stay
    functions = tuple(f for f in definition.functions
                      if tables.chain_function_name not in f[0])
    return replace(definition, triggers=triggers, functions=functions, comment=comment)


def _with_citus_erasure(definition: TableDef, tables: Tables, *,
                        embedding: bool) -> TableDef:
    """The erasure function (``<prefix>_erase_row``, made with the journal, again with the
    raw-PII table and with the outbox) in its cluster form,
    :func:`~primitives.compile._definer.erase_functions_citus`, with the same parts as the
    single-node one it replaces."""
    label = f"function {tables.schema}.{tables.object_name('erase_row')}"
    mine = [f for f in definition.functions
            if f[0].startswith(label) and "earlier signature" not in f[0]]
    if not mine:
        return definition
    raw = definition.table == tables.pii_raw or (
        definition.table == tables.outbox and tables.pii_raw is not None)
    citus = erase_functions_citus(tables, embedding=embedding, raw=raw,
                                  outbox=definition.table == tables.outbox)
    again = mine[0][0].partition(" (again")[2]
    citus = tuple((f"{what} (again{again}" if again else what, body) for what, body in citus)
    first = definition.functions.index(mine[0])
    kept = [f for f in definition.functions if f not in mine]
    return replace(definition, functions=(*kept[:first], *citus, *kept[first:]))


def _erasure_delegated(tables: Tables) -> Step:
    """The erasure function distributed by its tenant argument, colocated with the memories,
    its calls always delegated to the tenant's worker (inside transactions too)."""
    return Step(
        f"function {tables.schema}.{tables.object_name('erase_row')}: runs on the worker "
        "of the tenant it is called for",
        _delegated_by_tenant(
            f"{tables.schema}.{tables.object_name('erase_row')}({ERASE_ROW_CITUS_ARGS})",
            tables))


def _delegated_by_tenant(signature: str, tables: Tables) -> sql.Composed:
    """``create_distributed_function`` of ``signature`` by its first argument (the tenant),
    colocated with the memories, every call delegated to the tenant's worker
    (``force_delegation``: inside transactions too)."""
    return sql.SQL("SELECT pg_catalog.create_distributed_function({}::regprocedure, '$1', "
                   "colocate_with => {}, force_delegation => true)").format(
        sql.Literal(signature), sql.Literal(tables.memories.qualified))


def _cluster_views(steps: Iterator[Step], tables: Tables) -> Iterator[Step]:
    """The plan's view steps, the supersession view in its per-tenant form (after the
    function it calls, on every node)."""
    title = f"{tables.audit_supersession.qualified}: view"
    replaced = False
    for step in steps:
        if step.title != title:
            yield step
            continue
        signature = supersession_chains_signature()
        yield Step(f"{signature}: walks one tenant's supersession links",
                   supersession_chains_function())
        yield Step(f"{signature}: on every node", _distribute_function_sql(signature))
        # the view runs with its reader's rights: whoever reads it calls the function
        yield Step(f"{signature}: only the roles that read the view call it",
                   sql.SQL("REVOKE ALL ON FUNCTION {} FROM PUBLIC").format(sql.SQL(signature)))
        yield Step(f"{signature}: the application role and the auditor read the view",
                   sql.SQL("GRANT EXECUTE ON FUNCTION {} TO {}, {}").format(
                       sql.SQL(signature), sql.Identifier(APP_ROLE),
                       sql.Identifier(AUDITOR_ROLE)))
        yield replace(step, statement=supersession_view_per_tenant(tables))
        replaced = True
    if not replaced:  # pragma: no cover - the single-node plan always has the view
        raise AssertionError(f"no step '{title}' in the plan")


def _with_citus_delete(definition: TableDef, tables: Tables) -> TableDef:
    """The memories with the cluster's set form of the delete function beside the
    single-node one (:func:`~primitives.compile._definer.transient_delete_functions_citus`)."""
    return replace(definition, functions=(*definition.functions,
                                          *transient_delete_functions_citus(tables)))


def _delete_delegated(tables: Tables) -> Step:
    """The set form of the delete function distributed by its tenant argument, as
    :func:`_erasure_delegated`."""
    name = tables.object_name("delete_transient")
    return Step(
        f"function {tables.schema}.{name} (of a set of rows): runs on the worker of the "
        "tenant it is called for",
        _delegated_by_tenant(f"{tables.schema}.{name}({DELETE_TRANSIENT_CITUS_ARGS})", tables))


def _with_citus_checkpoint_delete(definition: TableDef, tables: Tables) -> TableDef:
    """The checkpointer's pending writes (whose definition makes the checkpointer's deletes)
    with the cluster's form of the thread delete beside the single-node one
    (:func:`~primitives.compile._definer.checkpoint_delete_threads_functions_citus`)."""
    names = checkpointer_tables(tables)
    if names is None or definition.table != names.writes:
        return definition
    return replace(definition, functions=(
        *definition.functions, *checkpoint_delete_threads_functions_citus(names)))


def _checkpoint_delete_delegated(tables: Tables) -> Iterator[Step]:
    """The cluster's thread delete distributed by its tenant argument, as
    :func:`_erasure_delegated` (nothing when the agent has no checkpointer)."""
    names = checkpointer_tables(tables)
    if names is None:
        return
    function = checkpoint_delete_threads_function(names).as_string(None).replace('"', "")
    yield Step(
        f"function {function} (by tenant): runs on the worker of the tenant it is called for",
        _delegated_by_tenant(f"{function}({CHECKPOINT_DELETE_THREADS_CITUS_ARGS})", tables))


def _reference_table_sql(table: tuple[str, str]) -> sql.Composed:
    """``SELECT create_reference_table(...)`` when the table exists and is not in Citus's
    metadata yet (a table that does not exist yet is left for a later migrate)."""
    return sql.SQL(
        "SELECT pg_catalog.create_reference_table(pg_catalog.to_regclass({name})) "
        "WHERE pg_catalog.to_regclass({name}) IS NOT NULL AND NOT EXISTS "
        "(SELECT 1 FROM pg_catalog.pg_dist_partition "
        "WHERE logicalrelid = pg_catalog.to_regclass({name}))"
    ).format(name=sql.Literal(sql.Identifier(*table).as_string(None)))


def _canonical_reference_steps(spec: AgentSpec) -> Iterator[Step]:
    """Each canonical table a non-mirror entry names, made a reference table (a copy on
    every node), as the migrating admin: the guard fires on the workers, where it reads the
    canonical text, and the references' foreign key to it leaves a distributed table, which
    Citus allows only to a reference table."""
    seen: set[tuple[str, str]] = set()
    for item in spec.discipline.non_mirror:
        table = item.canonical_table
        if table is None or table in seen:
            continue
        seen.add(table)
        name = ".".join(table)
        yield Step(f"{name}: canonical table of {item.category}, on every node (reference "
                   "table)", _reference_table_sql(table), commit_after=True)


def _guard_index_reference_steps(tables: Tables) -> Iterator[Step]:
    """The guard's index of the canonical texts (postings, row versions, signatures), made
    reference tables: the guard reads them on the worker where it fires, and the refresh
    joins them with the canonical tables, reference tables too."""
    for suffix in ("canonical_indexed", "canonical_postings", "canonical_signatures"):
        table = (tables.schema, tables.object_name(suffix))
        yield Step(f"{'.'.join(table)}: on every node (reference table)",
                   _reference_table_sql(table), commit_after=True)


def _with_guard_index_references(steps: Iterator[Step], tables: Tables) -> Iterator[Step]:
    """``steps``, with the guard's index tables made reference tables before the refresh
    function that fills them is created."""
    refresh = f"refresh function {tables.object_name('refresh_canonical_index')} (SECURITY"
    for step in steps:
        if refresh in step.title:
            yield from _guard_index_reference_steps(tables)
        yield step


def _with_citus_non_mirror(definition: TableDef, spec: AgentSpec, tables: Tables,
                           capabilities: Capabilities) -> TableDef:
    """The non-mirror guard's functions in their cluster form
    (:func:`~primitives.compile._non_mirror.guard_functions` with ``citus``), in place of
    the single-node ones."""
    single = {title for title, _ in guard_functions(spec, tables, capabilities)}
    mine = [i for i, (title, _) in enumerate(definition.functions) if title in single]
    if not mine:
        return definition
    kept = [f for f in definition.functions if f[0] not in single]
    cluster = guard_functions(spec, tables, capabilities, citus=True)
    return replace(definition, functions=(*kept[:mine[0]], *cluster, *kept[mine[0]:]))


def _is_canonical_key(title: str, statement: sql.Composed) -> bool:
    return title.startswith("foreign key ") and ", ADD CONSTRAINT " in statement.as_string(None)


def _without_canonical_keys(definition: TableDef) -> TableDef:
    """The references table without its foreign keys to canonical tables: they are added
    once it is distributed (:func:`_canonical_key_steps`)."""
    return replace(definition, functions=tuple(
        f for f in definition.functions if not _is_canonical_key(*f)))


def _canonical_key_steps(definition: TableDef) -> Iterator[Step]:
    """The references table's foreign keys to canonical tables (reference tables), each
    replaced in two statements: Citus refuses ``ADD CONSTRAINT`` beside other subcommands,
    and a foreign key from a table not yet distributed to a reference table."""
    for title, statement in definition.functions:
        if not _is_canonical_key(title, statement):
            continue
        head, _, added = statement.as_string(None).partition(", ADD CONSTRAINT ")
        table = head.partition(" DROP CONSTRAINT")[0]
        label = f"{definition.table.qualified}: {title}"
        yield Step(f"{label}: drop", _fixed(head))
        yield Step(f"{label}: add", _fixed(f"{table} ADD CONSTRAINT {added}"))


def _checks_one_by_one(steps: Iterable[Step], definition: TableDef) -> Iterator[Step]:
    """``steps`` with the table's CHECK replacement as one ``ALTER TABLE`` per subcommand
    (:func:`~primitives.compile._ddl.replace_checks_one_by_one`): a plan applied again to a
    cluster runs it on a distributed table."""
    title = f"{definition.table.qualified}: checks (replaced, so they follow the spec)"
    for step in steps:
        if step.title != title:
            yield step
            continue
        for n, statement in enumerate(replace_checks_one_by_one(definition, not_valid=True), 1):
            yield replace(step, title=f"{title}, part {n}", statement=statement)


def _foreign_keys(definition: TableDef) -> tuple[Constraint, ...]:
    return tuple(c for c in definition.constraints if c.kind == "foreign_key")


def _foreign_key_steps(definition: TableDef) -> Iterator[Step]:
    # Two statements: Citus refuses ADD CONSTRAINT ... FOREIGN KEY beside other subcommands.
    table = definition.table
    for fk in _foreign_keys(definition):
        yield Step(f"{table.qualified}: replace foreign key {fk.name}",
                   sql.SQL("ALTER TABLE {} DROP CONSTRAINT IF EXISTS {}").format(
                       table.ident, sql.Identifier(fk.name)))
        yield Step(f"{table.qualified}: foreign key {fk.name} (colocated, tenant first)",
                   sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} {}").format(
                       table.ident, sql.Identifier(fk.name), fk.body))


def compile_citus(
    spec: AgentSpec,
    *,
    capabilities: Capabilities = DEFAULT_CAPABILITIES,
    shard_count: int | None = None,
) -> Plan:
    """Compile ``spec`` for a Citus coordinator: :func:`compile_plan` plus distribution DDL.

    Every table is distributed by the tenant column and colocated with
    ``<prefix>_memories``; ``shard_count`` (default: the cluster's
    ``citus.shard_count``) applies to a new colocation group only. Apply the plan
    with ``primitives.db.apply_plan`` as the admin, on the coordinator, after
    ``CREATE EXTENSION citus`` and the framework migrations. Raises what
    :func:`compile_plan` raises.
    """
    base = compile_plan(spec, capabilities=replace(capabilities, text_match=False))
    tables: Tables = base.tables
    definitions = tuple(
        _with_citus_erasure(
            _with_citus_delete(_with_citus_non_mirror(_with_citus_guard(d), spec, tables,
                                                      base.capabilities), tables)
            if d.table == tables.memories
            else _with_generic_chain(d, tables) if d.table == tables.events
            else _with_citus_checkpoint_delete(d, tables), tables, embedding=base.capabilities.vector)
        for d in base.definitions
    )
    steps: list[Step] = [*_cluster_steps(), *_canonical_reference_steps(spec)]
    steps.append(base.steps[0])  # SET LOCAL ROLE primitives_owner
    steps += _schema_steps(tables)
    steps.append(Step(f"{FRAMEWORK_SCHEMA}.{CITUS_GUARD_FUNCTION}: shard-local delete guard",
                      _guard_function_sql()))
    for definition in definitions:
        without_fks = replace(_without_canonical_keys(definition), constraints=tuple(
            c for c in definition.constraints if c.kind != "foreign_key"))
        steps += _with_guard_index_references(
            (_without_subquery(step)
             for step in _checks_one_by_one(
                 _table_steps(tables, without_fks, not_valid=True,
                              access=auditor_access(spec, tables)), without_fks)), tables)
        if definition.bounds:
            # the shards' CHECK calls it on the workers
            steps.append(Step(
                f"{definition.table.qualified}: bounds function on every node",
                _distribute_function_sql(bounds_signature(definition).as_string(None))))
        colocate = None if definition.table == tables.memories else tables.memories
        steps.append(Step(
            f"{definition.table.qualified}: distribute by {tables.tenant_column}"
            + (f", colocated with {tables.memories.qualified}" if colocate else ""),
            distribute_table_sql(definition.table, tables.tenant_column, colocate,
                                 shard_count=shard_count if colocate is None else None),
            commit_after=True,
        ))
    for definition in definitions:
        steps += _foreign_key_steps(definition)
        steps += _canonical_key_steps(definition)
    steps.append(_erasure_delegated(tables))
    steps.append(_delete_delegated(tables))
    steps += _checkpoint_delete_delegated(tables)
    steps += _unpublish_steps(tables)
    steps += _cluster_views(_view_steps(spec, tables, definitions[0], base.capabilities), tables)
    steps += base.validations  # the distributed plan commits in parts; these run last
    return Plan(
        agent=spec.agent,
        steps=tuple(steps),
        tables=tables,
        capabilities=base.capabilities,
        definitions=definitions,
    )
