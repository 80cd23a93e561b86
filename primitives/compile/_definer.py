"""The engine's hard deletes, as SECURITY DEFINER functions owned by the owner role.

A table-level DELETE (or UPDATE) grant lets the holder ``LOCK TABLE`` in any mode, so one
session of the app role could stop every tenant. The app role holds neither; the few
deletes the engine does (a transient row at its scope's end, a LangGraph thread, a run's
checkpoints, unreferenced blobs, pruned checkpoints) run in these functions instead.

Each one runs as ``primitives_owner`` with ``search_path = pg_catalog, pg_temp`` and
schema-qualified names, deletes only rows of the transaction's tenant
(``primitives.current_tenant()``, and the owner's own tenant policy), and is executable by
the app role alone. LANGUAGE sql with a string body: no dependency on the tables' columns
that would block a later plan from changing them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from psycopg import sql

from primitives.compile._names import APP_ROLE, PRIVACY_ADMIN_ROLE, Tables

if TYPE_CHECKING:
    from primitives.compile._checkpointer import CheckpointerTables

__all__ = [
    "CHECKPOINT_DELETE_THREADS_CITUS_ARGS",
    "ERASE_ROW_CITUS_ARGS",
    "checkpoint_delete_blobs_function",
    "checkpoint_delete_runs_function",
    "checkpoint_delete_threads_function",
    "checkpoint_delete_threads_functions_citus",
    "checkpoint_functions",
    "checkpoint_prune_function",
    "definer_names",
    "erase_functions",
    "erase_functions_citus",
    "erase_row_function",
    "memory_functions",
    "pii_raw_functions",
    "read_pii_raw_function",
    "transient_delete_function",
    "transient_delete_functions_citus",
]

_DEFINER = sql.SQL("""\
CREATE OR REPLACE FUNCTION {function}({args}) RETURNS {returns}
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
{body}
$fn$""")

_TENANT = sql.SQL("primitives.current_tenant()")


def _function(schema: str, tables: Tables, suffix: str) -> sql.Identifier:
    return sql.Identifier(schema, tables.object_name(suffix))


def _steps(function: sql.Identifier, args: str, returns: str, body: sql.Composable,
           label: str, role: str = APP_ROLE) -> tuple[tuple[str, sql.Composed], ...]:
    """(label, statement) pairs: the function, no EXECUTE for PUBLIC, EXECUTE for ``role``
    (the app role unless said)."""
    signature = sql.SQL("{}({})").format(function, sql.SQL(args))
    return (
        (f"{label} (SECURITY DEFINER)", _DEFINER.format(
            function=function, args=sql.SQL(args), returns=sql.SQL(returns), body=body)),
        (f"{label}: not callable by PUBLIC",
         sql.SQL("REVOKE ALL ON FUNCTION {} FROM PUBLIC").format(signature)),
        (f"{label}: callable by {'the app role' if role == APP_ROLE else role}",
         sql.SQL("GRANT EXECUTE ON FUNCTION {} TO {}").format(signature,
                                                               sql.Identifier(role))),
    )


def _cluster_steps(function: sql.Identifier, args: str, params: str, returns: str,
                   body: sql.Composable, label: str, aside: str = ""
                   ) -> tuple[tuple[str, sql.Composed], ...]:
    """(label, statement) pairs of a cluster form that takes the tenant first: the PL/pgSQL
    function (named ``params``, of types ``args``), no EXECUTE for PUBLIC, EXECUTE for the
    app role. ``aside`` (e.g. "of a set of rows") tells it from its single-node twin."""
    signature = sql.SQL("{}({})").format(function, sql.SQL(args))
    tagged = f"{label} ({aside})" if aside else label
    return (
        (f"{label} (SECURITY DEFINER, {aside + ', ' if aside else ''}on the cluster)",
         _DEFINER_PLPGSQL.format(function=function, args=sql.SQL(params),
                                 returns=sql.SQL(returns), body=body)),
        (f"{tagged}: not callable by PUBLIC",
         sql.SQL("REVOKE ALL ON FUNCTION {} FROM PUBLIC").format(signature)),
        (f"{tagged}: callable by the app role",
         sql.SQL("GRANT EXECUTE ON FUNCTION {} TO {}").format(signature,
                                                             sql.Identifier(APP_ROLE))),
    )


def transient_delete_function(tables: Tables) -> sql.Identifier:
    """``<schema>.<prefix>_delete_transient(uuid)``: hard delete of one memory row."""
    return _function(tables.schema, tables, "delete_transient")


def erase_row_function(tables: Tables) -> sql.Identifier:
    """``<schema>.<prefix>_erase_row(uuid, text, uuid, text, jsonb)``: a governed erasure of
    one row, with its journal event."""
    return _function(tables.schema, tables, "erase_row")


def memory_functions(tables: Tables) -> tuple[tuple[str, sql.Composed], ...]:
    """The memories table's function: delete one row of the tenant by id (the delete guard,
    ``primitives.guard_memory_delete``, still refuses persistent and action-linked rows)."""
    delete = sql.SQL("DELETE FROM {} AS m WHERE m.{} = {} AND m.id = $1 RETURNING true").format(
        tables.memories.ident, tables.tenant, _TENANT)
    return _steps(transient_delete_function(tables), "uuid", "boolean", delete,
                  f"function {tables.schema}.{tables.object_name('delete_transient')}")


def read_pii_raw_function(tables: Tables) -> sql.Identifier:
    """``<schema>.<prefix>_read_pii_raw(uuid, uuid, text, jsonb)``: the privacy admin's read
    of one row's raw fields, journalled."""
    return _function(tables.schema, tables, "read_pii_raw")


def pii_raw_functions(tables: Tables, *, embedding: bool = False
                      ) -> tuple[tuple[str, sql.Composed], ...]:
    """With the raw-PII table: erasure again, now also deleting the row's raw copy, and the
    privacy admin's read (``$1`` memory id, ``$2`` event id, ``$3`` actor, ``$4`` payload):
    it returns the raw fields of the tenant's row, if kept, and appends a ``pii_raw_read``
    event (``found``: whether anything was kept) in the same statement, so no raw value is
    read without one. EXECUTE for ``primitives_privacy_admin`` alone."""
    assert tables.pii_raw is not None
    read = sql.SQL(
        "WITH r AS (SELECT p.content, p.value, p.envelope, p.consent_event FROM {raw} AS p "
        "WHERE p.{t} = {tenant} AND p.memory_id = $1),\n"
        "e AS (INSERT INTO {events} ({t}, event_id, kind, memory_id, actor, payload) "
        "SELECT {tenant}, $2, 'pii_raw_read', (SELECT m.id FROM {mem} AS m "
        "WHERE m.{t} = {tenant} AND m.id = $1), $3, "
        "$4 || jsonb_build_object('found', EXISTS (SELECT 1 FROM r), 'memory', $1::text))\n"
        "SELECT r.content, r.value, r.envelope, r.consent_event FROM r "
        "UNION ALL SELECT NULL, NULL, NULL, NULL WHERE NOT EXISTS (SELECT 1 FROM r)"
    ).format(raw=tables.pii_raw.ident, t=tables.tenant, tenant=_TENANT,
             events=tables.events.ident, mem=tables.memories.ident)
    label = f"function {tables.schema}.{tables.object_name('read_pii_raw')}"
    erase = erase_functions(tables, embedding=embedding, raw=True)[1:]
    return (*((f"{what} (again: erasure also deletes the raw copy)", statement)
              for what, statement in erase),
            *_steps(read_pii_raw_function(tables), "uuid, uuid, text, jsonb",
                    "TABLE (content text, value jsonb, envelope jsonb, consent_event uuid)",
                    read, label, role=PRIVACY_ADMIN_ROLE))


def erase_functions(tables: Tables, *, embedding: bool = False, raw: bool = False,
                    outbox: bool = False) -> tuple[tuple[str, sql.Composed], ...]:
    """Erase one memory row (``$1``): its content becomes ``sha256:<hex>`` of itself,
    computed here so that no caller can write text through the function; value, envelope,
    tags, provenance, source and the vector are cleared; ``$2`` is the stored reason. The
    same statement appends the row's ``erased`` event (``$3`` event id, ``$4`` actor, ``$5``
    payload), so no row is erased without one. The app role needs no UPDATE on the columns
    it clears. Created with the journal, which it writes; with ``raw`` (created again once the
    raw-PII table exists) it also deletes the row's raw copy; with ``outbox`` (created again
    with the outbox of an event-driven agent) the payloads published from the row become
    ``{"erased": true}``."""
    vector = sql.SQL(", embedding = NULL") if embedding else sql.SQL("")
    copy = sql.SQL("gone AS (DELETE FROM {} AS p WHERE p.{} = {} AND p.memory_id = $1), "
                   ).format(tables.pii_raw.ident, tables.tenant, _TENANT) if (
        raw and tables.pii_raw is not None) else sql.SQL("")
    if outbox and tables.outbox is not None:
        copy = sql.SQL("{}scrubbed AS (UPDATE {} AS o SET payload = '{{\"erased\": true}}'::jsonb "
                       "WHERE o.{} = {} AND o.memory_id = $1), ").format(
            copy, tables.outbox.ident, tables.tenant, _TENANT)
    erase = sql.SQL(
        "WITH {}erased AS (UPDATE {} AS m SET "
        "content = 'sha256:' || encode(sha256(convert_to(m.content, 'UTF8')), 'hex'), "
        "value = '{{}}'::jsonb, envelope = '{{}}'::jsonb, tags = '{{}}'::text[], "
        "provenance = '{{}}'::jsonb, source = NULL{}, erased_at = now(), erasure_reason = $2, "
        "updated_at = now() WHERE m.{} = {} AND m.id = $1 AND m.erased_at IS NULL "
        "RETURNING m.id)\n"
        "INSERT INTO {} ({}, event_id, kind, memory_id, actor, payload) "
        "SELECT {}, $3, 'erased', erased.id, $4, $5 FROM erased RETURNING true"
    ).format(copy, tables.memories.ident, vector, tables.tenant, _TENANT, tables.events.ident,
             tables.tenant, _TENANT)
    label = f"function {tables.schema}.{tables.object_name('erase_row')}"
    # An earlier plan made erase_row(uuid, text, text), which wrote its caller's text and no
    # event: a re-applied plan must not leave it callable beside this one.
    earlier = sql.SQL("DROP FUNCTION IF EXISTS {}(uuid, text, text)").format(
        erase_row_function(tables))
    return ((f"{label}: the earlier signature dropped", earlier),
            *_steps(erase_row_function(tables), "uuid, text, uuid, text, jsonb", "boolean",
                    erase, label))


_DEFINER_PLPGSQL = sql.SQL("""\
CREATE OR REPLACE FUNCTION {function}({args}) RETURNS {returns}
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
{body}
$fn$""")


ERASE_ROW_CITUS_ARGS: Final = "text, uuid, text, uuid, text, jsonb"
"""The cluster's erasure function takes the tenant first: Citus delegates the call to the
worker that holds the tenant's shards (:func:`erase_functions_citus`)."""


def erase_functions_citus(tables: Tables, *, embedding: bool = False, raw: bool = False,
                          outbox: bool = False) -> tuple[tuple[str, sql.Composed], ...]:
    """:func:`erase_functions`' function in the form a Citus cluster runs:
    ``<prefix>_erase_row(tenant, id, reason, event id, actor, payload)`` with the same
    effects and result, as PL/pgSQL.

    - The tenant is the first argument, so that the plan can distribute the function by it,
      colocated with the memories (``force_delegation``): the coordinator sends the call to
      the worker holding the tenant's shards, over the application role's connection of the
      transaction, and the function's statements run there. Run on the coordinator, the
      function (as its owner) would reach the shards over connections of another user,
      which Citus refuses once the transaction has written them as the application role.
      The function refuses any tenant but the transaction's.
    - Citus refuses a function that is not immutable over a column in a distributed
      ``UPDATE`` (``convert_to``): the hash is read first, with the row locked.
    - ``INSERT ... SELECT`` would reach the shards through ``COPY``, which row-level security
      refuses: the ``erased`` event is inserted with ``VALUES`` when a row was erased."""
    vector = sql.SQL(", embedding = NULL") if embedding else sql.SQL("")
    parts: list[sql.Composable] = []
    if raw and tables.pii_raw is not None:
        parts.append(sql.SQL(
            "DELETE FROM {} AS p WHERE p.{} = p_tenant AND p.memory_id = p_id;\n    "
        ).format(tables.pii_raw.ident, tables.tenant))
    if outbox and tables.outbox is not None:
        parts.append(sql.SQL(
            "UPDATE {} AS o SET payload = '{{\"erased\": true}}'::jsonb "
            "WHERE o.{} = p_tenant AND o.memory_id = p_id;\n    ").format(tables.outbox.ident,
                                                                     tables.tenant))
    body = sql.SQL(
        "DECLARE\n    hashed text;\nBEGIN\n"
        "    IF p_tenant IS DISTINCT FROM primitives.current_tenant() THEN\n"
        "        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege', MESSAGE = "
        "'erasure is allowed only for the tenant of the current transaction';\n"
        "    END IF;\n    {parts}"
        "SELECT 'sha256:' || encode(sha256(convert_to(m.content, 'UTF8')), 'hex') "
        "INTO hashed FROM {mem} AS m WHERE m.{t} = p_tenant AND m.id = p_id "
        "AND m.erased_at IS NULL FOR UPDATE;\n"
        "    IF NOT FOUND THEN\n        RETURN NULL;\n    END IF;\n"
        "    UPDATE {mem} AS m SET content = hashed, value = '{{}}'::jsonb, "
        "envelope = '{{}}'::jsonb, tags = '{{}}'::text[], provenance = '{{}}'::jsonb, "
        "source = NULL{vector}, erased_at = now(), erasure_reason = p_reason, "
        "updated_at = now() WHERE m.{t} = p_tenant AND m.id = p_id;\n"
        "    INSERT INTO {events} ({t}, event_id, kind, memory_id, actor, payload) "
        "VALUES (p_tenant, p_event_id, 'erased', p_id, p_actor, p_payload);\n"
        "    RETURN true;\nEND"
    ).format(parts=sql.Composed(parts), mem=tables.memories.ident, t=tables.tenant,
             vector=vector, events=tables.events.ident)
    function = erase_row_function(tables)
    return _cluster_steps(
        function, ERASE_ROW_CITUS_ARGS,
        "p_tenant text, p_id uuid, p_reason text, p_event_id uuid, p_actor text, "
        "p_payload jsonb", "boolean", body,
        f"function {tables.schema}.{tables.object_name('erase_row')}")


DELETE_TRANSIENT_CITUS_ARGS: Final = "text, uuid[]"
"""The cluster's set form of the delete function takes the tenant first: Citus delegates the
call to the worker that holds the tenant's shards (:func:`transient_delete_functions_citus`)."""


def transient_delete_functions_citus(tables: Tables) -> tuple[tuple[str, sql.Composed], ...]:
    """On a Citus cluster, beside :func:`memory_functions`' delete:
    ``<prefix>_delete_transient(tenant, ids)`` deletes the tenant's rows ``ids`` and returns
    how many went (the delete guard still refuses persistent and action-linked rows). The
    plan distributes it by the tenant, colocated with the memories, with
    ``force_delegation``, for the reason :func:`erase_functions_citus` gives (``end_scope``
    removes a closing scope's rows with it after writing the tenant's shards). It refuses
    any tenant but the transaction's."""
    body = sql.SQL(
        "DECLARE\n    deleted integer;\nBEGIN\n"
        "    IF p_tenant IS DISTINCT FROM primitives.current_tenant() THEN\n"
        "        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege', MESSAGE = "
        "'a delete is allowed only for the tenant of the current transaction';\n"
        "    END IF;\n"
        "    DELETE FROM {mem} AS m WHERE m.{t} = p_tenant AND m.id = ANY (p_ids);\n"
        "    GET DIAGNOSTICS deleted = ROW_COUNT;\n    RETURN deleted;\nEND"
    ).format(mem=tables.memories.ident, t=tables.tenant)
    function = transient_delete_function(tables)
    return _cluster_steps(
        function, DELETE_TRANSIENT_CITUS_ARGS, "p_tenant text, p_ids uuid[]", "integer", body,
        f"function {tables.schema}.{tables.object_name('delete_transient')}",
        "of a set of rows")


def _checkpoint_function(t: CheckpointerTables, suffix: str) -> sql.Identifier:
    """``<checkpointer schema>.<prefix>_checkpoints_<suffix>``."""
    return sql.Identifier(t.checkpoints.schema, f"{t.checkpoints.name}_{suffix}")


def checkpoint_delete_threads_function(t: CheckpointerTables) -> sql.Identifier:
    return _checkpoint_function(t, "delete_threads")


def checkpoint_delete_runs_function(t: CheckpointerTables) -> sql.Identifier:
    return _checkpoint_function(t, "delete_runs")


def checkpoint_delete_blobs_function(t: CheckpointerTables) -> sql.Identifier:
    return _checkpoint_function(t, "delete_blobs")


def checkpoint_prune_function(t: CheckpointerTables) -> sql.Identifier:
    return _checkpoint_function(t, "prune")


def definer_names(tables: Tables, t: CheckpointerTables | None) -> tuple[str, ...]:
    """The functions' names (without schema), for the identifier length check."""
    names = [tables.object_name("delete_transient"), tables.object_name("erase_row"),
             tables.object_name("read_pii_raw"), tables.object_name("non_mirror_guard"),
             tables.object_name("canonical_version")]
    if t is not None:
        names += [f"{t.checkpoints.name}_{s}"
                  for s in ("delete_threads", "delete_runs", "delete_blobs", "prune")]
    return tuple(names)


def checkpoint_functions(t: CheckpointerTables) -> tuple[tuple[str, sql.Composed], ...]:
    """The checkpointer's deletes: whole threads, the checkpoints of runs (returning the
    (thread, namespace) pairs touched), unreferenced blobs, and pruning one namespace."""
    mine = sql.SQL("{} = {}").format(t.tenant, _TENANT)
    threads = sql.SQL(";\n").join(
        sql.SQL("DELETE FROM {} WHERE {} AND thread_id = ANY ($1)").format(table.ident, mine)
        for table in (t.writes, t.blobs, t.checkpoints))
    runs = sql.SQL(
        "WITH gone AS (DELETE FROM {cp} WHERE {mine} AND metadata ->> 'run_id' = ANY ($1) "
        "RETURNING thread_id, checkpoint_ns, checkpoint_id),\n"
        "writes AS (DELETE FROM {w} AS w USING gone WHERE w.{t} = {tenant} "
        "AND w.thread_id = gone.thread_id AND w.checkpoint_ns = gone.checkpoint_ns "
        "AND w.checkpoint_id = gone.checkpoint_id)\n"
        "SELECT DISTINCT gone.thread_id, gone.checkpoint_ns FROM gone"
    ).format(cp=t.checkpoints.ident, w=t.writes.ident, t=t.tenant, mine=mine, tenant=_TENANT)
    blobs = sql.SQL(
        "DELETE FROM {b} AS b USING unnest($1, $2) AS p(thread_id, checkpoint_ns) "
        "WHERE b.{t} = {tenant} AND b.thread_id = p.thread_id "
        "AND b.checkpoint_ns = p.checkpoint_ns AND NOT EXISTS (SELECT 1 FROM {cp} AS c "
        "WHERE c.{t} = b.{t} AND c.thread_id = b.thread_id "
        "AND c.checkpoint_ns = b.checkpoint_ns "
        "AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)"
    ).format(b=t.blobs.ident, cp=t.checkpoints.ident, t=t.tenant, tenant=_TENANT)
    older = sql.SQL("{} AND thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id < $3 "
                    "AND checkpoint_id <> ALL ($4)").format(mine)
    prune = sql.SQL(";\n").join([
        sql.SQL("DELETE FROM {} WHERE {}").format(t.writes.ident, older),
        sql.SQL("DELETE FROM {} WHERE {}").format(t.checkpoints.ident, older),
        sql.SQL("UPDATE {} SET parent_checkpoint_id = NULL WHERE {} AND thread_id = $1 "
                "AND checkpoint_ns = $2 AND checkpoint_id = ANY ($4) "
                "AND parent_checkpoint_id <> ALL ($4)").format(t.checkpoints.ident, mine),
    ])
    def label(function: sql.Identifier) -> str:
        return "function " + function.as_string(None).replace('"', "")

    steps: list[tuple[str, sql.Composed]] = []
    for function, args, returns, body in (
        (checkpoint_delete_threads_function(t), "text[]", "void", threads),
        (checkpoint_delete_runs_function(t), "text[]", "TABLE (thread text, namespace text)",
         runs),
        (checkpoint_delete_blobs_function(t), "text[], text[]", "void", blobs),
        (checkpoint_prune_function(t), "text, text, text, text[]", "void", prune),
    ):
        steps += _steps(function, args, returns, body, label(function))
    return tuple(steps)


CHECKPOINT_DELETE_THREADS_CITUS_ARGS: Final = "text, text[]"
"""The cluster's thread delete takes the tenant first: Citus delegates the call to the worker
that holds the tenant's shards (:func:`checkpoint_delete_threads_functions_citus`)."""


def checkpoint_delete_threads_functions_citus(
    t: CheckpointerTables,
) -> tuple[tuple[str, sql.Composed], ...]:
    """On a Citus cluster, beside :func:`checkpoint_functions`' thread delete:
    ``<prefix>_checkpoints_delete_threads(tenant, thread ids)`` deletes the tenant's
    checkpoints, blobs and pending writes of those threads. The plan distributes it by the
    tenant, colocated with the memories, with ``force_delegation``, for the reason
    :func:`erase_functions_citus` gives (an erasure deletes the threads after writing the
    tenant's shards as the application role). It refuses any tenant but the
    transaction's."""
    deletes = sql.SQL("").join(
        sql.SQL("    DELETE FROM {} AS x WHERE x.{} = p_tenant "
                "AND x.thread_id = ANY (p_thread_ids);\n").format(table.ident, t.tenant)
        for table in (t.writes, t.blobs, t.checkpoints))
    body = sql.SQL(
        "BEGIN\n"
        "    IF p_tenant IS DISTINCT FROM primitives.current_tenant() THEN\n"
        "        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege', MESSAGE = "
        "'a checkpoint delete is allowed only for the tenant of the current transaction';\n"
        "    END IF;\n{deletes}END").format(deletes=deletes)
    function = checkpoint_delete_threads_function(t)
    return _cluster_steps(
        function, CHECKPOINT_DELETE_THREADS_CITUS_ARGS, "p_tenant text, p_thread_ids text[]",
        "void", body, "function " + function.as_string(None).replace('"', ""), "by tenant")
