"""Migrating a Citus cluster: framework migrations on every node, distributed agent plans.

A Citus coordinator runs each distributed statement over connections of its own, one per
worker and per user, so what one of them created inside a transaction is invisible to the
others until it commits. Three consequences shape this module:

- The framework's roles exist on every node before any migration runs (their
  ``CREATE ROLE`` statements, read from the migration files, are run on the coordinator
  first and committed; Citus propagates roles). The coordinator reaches the workers as the
  user that runs a statement, so the owner and maintainer roles, which the single-node plan
  keeps ``NOLOGIN``, can log in on a cluster; they have no password, so an authentication
  method other than ``trust`` still keeps clients out.
- The framework migrations are applied on each node separately, with Citus's DDL
  propagation off (each node keeps its own ``primitives.schema_migrations``).
- An agent's distributed plan commits after each table it distributes
  (:attr:`primitives.compile.Step.commit_after`); every statement is idempotent, so an
  interrupted plan is run again.

On the coordinator, ``primitives.set_tenant`` runs ``SET LOCAL primitives.tenant``, which
Citus forwards to the workers, where row-level security and the journal trigger read it:
the function first sets ``citus.propagate_set_commands = 'local'`` for its transaction (the
distributed plan also sets it for the app role, which a role setting could undo), then
copies the calling session's :data:`WORKER_SETTINGS` the same way, so that the settings a
role persists on itself are not those of the engine's statements on the workers. When the
role persists ``idle_session_timeout``, which acts between transactions where no ``SET
LOCAL`` holds and would end the backend's cached connections to the workers, the function
sets ``citus.max_cached_conns_per_worker`` to 0 for the transaction: its connections to the
workers close when it ends, and the next one opens new ones. On each
worker, no runtime role may read other sessions' statement texts, which hold the values the
coordinator deparses into them (:data:`_WORKER_ACTIVITY_REVOKE`).

Example::

    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        if is_citus_coordinator(conn):
            migrate_cluster(conn, admin_dsn)
            apply_distributed_plan(conn, plan.agent, plan.checksum, plan.steps)
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from primitives.db._migrate import (
    _HAS_CITUS,
    _PLAN_CHECKSUM,
    _RECORD_PLAN,
    DDL_XACT_LOCK,
    _describe,
    _require_idle,
    apply_migrations,
    load_migrations,
)
from primitives.db._names import MAINTAINER_ROLE, OWNER_ROLE
from primitives.errors import MigrationError, StorageError

__all__ = [
    "WORKER_SETTINGS",
    "WORKER_SETTINGS_NOT_FORWARDED",
    "apply_distributed_plan",
    "cluster_nodes",
    "is_citus",
    "is_citus_coordinator",
    "migrate_cluster",
]

_log = logging.getLogger("primitives.db")

_CREATE_ROLE = re.compile(rb"CREATE ROLE (\w+)([^;]*);")
_LOGIN_ROLES = (OWNER_ROLE, MAINTAINER_ROLE)
"""Roles the coordinator connects to the workers as, while it runs the plans and the
maintenance passes."""

WORKER_SETTINGS: Final[tuple[str, ...]] = (
    # default_transaction_read_only = on would make the worker's transaction read-only;
    # its transaction_read_only is still settable there (no query has run yet)
    "transaction_read_only",
    "statement_timeout",
    "lock_timeout",
    "idle_in_transaction_session_timeout",
    "transaction_timeout",
    # between transactions it would end the cached connections to the workers:
    # set_tenant keeps none when the role persists it (below)
    "idle_session_timeout",
    "synchronous_commit",
    "row_security",
    "search_path",
    "gin_fuzzy_search_limit",
    "datestyle",
    "intervalstyle",
    "extra_float_digits",
    "standard_conforming_strings",
    "bytea_output",
)
"""Settings that ``primitives.set_tenant`` on a coordinator copies from the calling session
to the workers' transactions (``SET LOCAL``, which Citus forwards). The coordinator reaches
a worker as the transaction's role, so the role's persisted settings (``ALTER ROLE
CURRENT_USER SET ...``, which Citus propagates to the workers) are that connection's
defaults; the runtime's own connection outranks them with startup options
(:mod:`primitives.db._session`), which do not travel to the workers. A setting missing from
the server (``transaction_timeout`` before PostgreSQL 17) is skipped."""

WORKER_SETTINGS_NOT_FORWARDED: Final[Mapping[str, str]] = {
    "default_transaction_read_only": "its effect, transaction_read_only, is forwarded",
    "default_transaction_isolation": "Citus opens every worker transaction with the "
                                     "coordinator's isolation level",
    "default_transaction_deferrable": "deferrable matters only to serializable read-only "
                                      "transactions, and cannot be set after the first query",
    "client_encoding": "Citus never forwards it and sets its connections' encoding itself",
}
"""The runtime's session settings (:data:`~primitives.db._session.PINNED_SETTINGS`,
:data:`~primitives.db._session.DEFAULT_SETTINGS`) that are not in :data:`WORKER_SETTINGS`,
each with why."""

_SET_TENANT_SET_LOCAL = sql.SQL("""\
CREATE OR REPLACE FUNCTION primitives.set_tenant(tenant text) RETURNS text
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    setting text;
    value text;
BEGIN
    -- SET LOCAL, not set_config: the coordinator forwards SET LOCAL to the workers, when
    -- citus.propagate_set_commands is 'local'; set here for the transaction, so that no
    -- role or session setting (ALTER ROLE ... RESET ALL) keeps the tenant off the workers
    SET LOCAL citus.propagate_set_commands = 'local';
    -- the workers' connections start with the role's persisted settings: this session's
    -- values (the runtime's startup options) go with the transaction instead
    FOREACH setting IN ARRAY ARRAY[{settings}]::text[] LOOP
        value := pg_catalog.current_setting(setting, true);
        CONTINUE WHEN value IS NULL;
        IF setting = 'search_path' THEN  -- a list, shown quoted
            EXECUTE 'SET LOCAL search_path = ' || CASE value WHEN '' THEN '''''' ELSE value END;
        ELSE
            EXECUTE pg_catalog.format('SET LOCAL %I = %L', setting, value);
        END IF;
    END LOOP;
    -- a role that persists idle_session_timeout ends this backend's cached connections to
    -- the workers between two transactions (where no SET LOCAL holds), and the next
    -- transaction would fail on them: then none is kept once the transaction ends
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_db_role_setting AS s,
                              pg_catalog.unnest(s.setconfig) AS c(item)
               WHERE s.setrole = (SELECT r.oid FROM pg_catalog.pg_roles AS r
                                  WHERE r.rolname = current_user)
                 AND s.setdatabase IN (0, (SELECT d.oid FROM pg_catalog.pg_database AS d
                                           WHERE d.datname = pg_catalog.current_database()))
                 AND pg_catalog.split_part(c.item, '=', 1) = 'idle_session_timeout'
                 AND c.item NOT IN ('idle_session_timeout=0', 'idle_session_timeout=0ms')) THEN
        SET LOCAL citus.max_cached_conns_per_worker = 0;
    END IF;
    EXECUTE pg_catalog.format('SET LOCAL primitives.tenant = %L', tenant);
    RETURN tenant;
END
$fn$""").format(settings=sql.SQL(", ").join(map(sql.Literal, WORKER_SETTINGS)))


_WORKER_ACTIVITY_REVOKE = sql.SQL("""\
DO $revoke$
BEGIN
    -- The coordinator sends each statement to a worker with the values deparsed into its
    -- text, over a connection of the transaction's role: on a worker, a session of that role
    -- would read every tenant's values in pg_stat_activity (a query the coordinator routes
    -- to a worker evaluates its functions there). Only a superuser may revoke them.
    IF NOT coalesce((SELECT rolsuper FROM pg_catalog.pg_roles
                     WHERE rolname = current_user), false) THEN
        RAISE WARNING '% is not a superuser: on worker %, runtime roles may read the text of '
                      'the statements the coordinator sends, which holds every value',
                      current_user, pg_catalog.inet_server_port();
        RETURN;
    END IF;
    REVOKE EXECUTE ON FUNCTION pg_catalog.pg_stat_get_activity(integer) FROM PUBLIC;
    REVOKE EXECUTE ON FUNCTION pg_catalog.pg_stat_get_backend_activity(integer) FROM PUBLIC;
    REVOKE SELECT ON pg_catalog.pg_stat_activity FROM PUBLIC;
END
$revoke$""")
"""Run on every worker by :func:`migrate_cluster`: what the worker's statement texts hold
(the values, as literals) is read by no runtime role there. The coordinator's texts hold
none (``primitives.set_tenant`` binds the tenant; the engine binds every value)."""

def is_citus(conn: psycopg.Connection[Any]) -> bool:
    """Whether the ``citus`` extension is installed in this database."""
    row = conn.execute(_HAS_CITUS).fetchone()
    return bool(row and row[0])


def is_citus_coordinator(conn: psycopg.Connection[Any]) -> bool:
    """Whether this database is a Citus coordinator (the node agent plans are applied on)."""
    if not is_citus(conn):
        return False
    row = conn.execute("SELECT pg_catalog.citus_is_coordinator()").fetchone()
    return bool(row and row[0])


def cluster_nodes(conn: psycopg.Connection[Any]) -> list[tuple[str, int]]:
    """``(host, port)`` of every active primary node, the coordinator first."""
    rows = conn.execute(
        "SELECT nodename, nodeport FROM pg_catalog.pg_dist_node "
        "WHERE noderole = 'primary' AND isactive ORDER BY groupid, nodeid"
    ).fetchall()
    return [(str(host), int(port)) for host, port in rows]


def _node_dsn(admin_dsn: str, host: str, port: int) -> str:
    params = conninfo_to_dict(admin_dsn)
    params.update(host=host, port=str(port))
    params.pop("hostaddr", None)
    options = params.get("options") or ""
    params["options"] = f"{options} -c citus.enable_ddl_propagation=off".strip()
    return make_conninfo("", **params)


def _create_roles(conn: psycopg.Connection[Any]) -> list[str]:
    """The framework's roles, created where missing and committed, before any migration."""
    created: list[str] = []
    for migration in load_migrations():
        for name, attributes in _CREATE_ROLE.findall(migration.sql):
            role = name.decode()
            exists = conn.execute(
                "SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s", (role,)
            ).fetchone()
            if exists:
                continue
            if role in _LOGIN_ROLES:
                attributes = attributes.replace(b"NOLOGIN", b"LOGIN")
            conn.execute(sql.SQL("CREATE ROLE {} {}").format(
                sql.Identifier(role), sql.SQL(attributes.decode().strip())))
            created.append(role)
    return created


def migrate_cluster(conn: psycopg.Connection[Any], admin_dsn: str) -> list[str]:
    """Roles, then the framework migrations on every node; the coordinator's applied names.

    ``admin_dsn`` is the coordinator's; each worker is reached with the same credentials
    at the host and port ``pg_dist_node`` lists. Raises ``MigrationError`` naming the node.
    """
    _require_idle(conn, "migrate_cluster")
    for role in _create_roles(conn):
        _log.info("created role %s on the cluster", role)
    applied: list[str] = []
    for index, (host, port) in enumerate(cluster_nodes(conn)):
        where = f"{host}:{port}"
        try:
            with psycopg.connect(_node_dsn(admin_dsn, host, port), autocommit=True) as node:
                names = apply_migrations(node)
                for role in _LOGIN_ROLES:
                    node.execute(sql.SQL("ALTER ROLE {} LOGIN").format(sql.Identifier(role)))
                if index == 0:
                    node.execute(_SET_TENANT_SET_LOCAL)
                else:
                    node.execute(_WORKER_ACTIVITY_REVOKE)
        except MigrationError as err:
            raise MigrationError(f"node {where}: {err}", node=where) from err
        except psycopg.Error as err:
            raise StorageError(f"cannot migrate node {where}: {_describe(err)}",
                               node=where) from err
        if index == 0:
            applied = names
    return applied


def apply_distributed_plan(
    conn: psycopg.Connection[Any], name: str, checksum: str, steps: Sequence[Any]
) -> bool:
    """Apply a Citus plan (:func:`primitives.compile.compile_citus`); False if unchanged.

    One transaction per table distributed (each step with ``commit_after`` ends one); the
    ``SET LOCAL`` statements seen so far open every later transaction again. The
    bookkeeping row is written with the last statement.
    """
    _require_idle(conn, "apply_distributed_plan")
    row = conn.execute(_PLAN_CHECKSUM, (name,)).fetchone()
    if row is not None and row[0] == checksum:
        return False
    session: list[sql.Composed] = []
    chunks: list[list[Any]] = [[]]
    for step in steps:
        chunks[-1].append(step)
        if getattr(step, "commit_after", False):
            chunks.append([])
    try:
        for number, chunk in enumerate(chunks):
            with conn.transaction():
                conn.execute(DDL_XACT_LOCK)
                for statement in session:
                    conn.execute(statement)
                for step in chunk:
                    conn.execute(step.statement)
                    if step.statement.as_string(conn).startswith(("SET LOCAL", "RESET ROLE")):
                        session.append(step.statement)
                if number == len(chunks) - 1:
                    conn.execute(sql.SQL("RESET ROLE"))
                    conn.execute(_RECORD_PLAN, (name, checksum, len(steps)))
    except psycopg.Error as err:
        raise MigrationError(
            f"distributed plan for agent {name!r} failed: {_describe(err)}",
            agent=name, sqlstate=err.sqlstate,
        ) from err
    _log.info("applied distributed plan for agent %s (%d statements)", name, len(steps))
    return True
