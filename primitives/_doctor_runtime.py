"""``primitives doctor``'s checks of what a runtime session may do beyond its tables.

A hostile session of the application role reaches every tenant through what its role may
do outside the tenant policy: persist settings on its role, call built-in functions that
act on other backends (or read every table's statistics), or call a ``SECURITY DEFINER``
function that runs as the owner. Collected here (a few catalog queries the auditor may
run), judged by pure functions that :mod:`primitives._doctor` calls.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Final, NamedTuple

import psycopg

__all__ = [
    "Definer",
    "RoleSetting",
    "RuntimeReach",
    "collect_definers",
    "collect_reach",
    "collect_role_settings",
    "definer_findings",
    "reach_findings",
    "role_setting_findings",
]


class RoleSetting(NamedTuple):
    role: str
    database: str | None  # None: every database
    setting: str  # 'name=value'


class RuntimeReach(NamedTuple):
    role: str
    kind: str  # 'function' or 'view'
    name: str


class Definer(NamedTuple):
    function: str  # schema.name(args)
    search_path: str | None  # the SET search_path value, None when not fixed
    public_execute: bool


# Settings of a runtime role, or of a role that is a member of one (it connects with them).
_ROLE_SETTINGS: Final = """
WITH RECURSIVE runtime (oid) AS (
    SELECT oid FROM pg_catalog.pg_roles WHERE rolname = ANY (%(roles)s::text[])
    UNION
    SELECT m.member FROM pg_catalog.pg_auth_members AS m JOIN runtime ON m.roleid = runtime.oid
)
SELECT pg_catalog.pg_get_userbyid(s.setrole)::text, d.datname::text, c.setting
FROM pg_catalog.pg_db_role_setting AS s
JOIN runtime ON runtime.oid = s.setrole
LEFT JOIN pg_catalog.pg_database AS d ON d.oid = s.setdatabase
CROSS JOIN LATERAL unnest(s.setconfig) AS c (setting)
WHERE s.setdatabase = 0
   OR s.setdatabase = (SELECT oid FROM pg_catalog.pg_database
                       WHERE datname = pg_catalog.current_database())
ORDER BY 1, 2, 3
"""

# The same selection as migration 0004: what acts on other backends or reads every
# table's activity. has_*_privilege counts membership, PUBLIC and grants alike.
_REACH: Final = """
SELECT r.rolname::text, 'function', p.oid::regprocedure::text
FROM pg_catalog.pg_proc AS p CROSS JOIN pg_catalog.pg_roles AS r
WHERE r.rolname = ANY (%(roles)s::text[])
  AND p.pronamespace = 'pg_catalog'::regnamespace
  AND (p.proname IN ('pg_terminate_backend', 'pg_cancel_backend')
       OR p.proname ~ '^pg_(try_)?advisory_'
       OR (p.proname LIKE 'pg\\_stat\\_get\\_%%' AND p.pronargs = 1
           AND p.proargtypes[0] = 'oid'::regtype))
  AND pg_catalog.has_function_privilege(r.oid, p.oid, 'EXECUTE')
UNION ALL
SELECT r.rolname::text, 'view', c.oid::regclass::text
FROM pg_catalog.pg_class AS c CROSS JOIN pg_catalog.pg_roles AS r
WHERE r.rolname = ANY (%(roles)s::text[])
  AND c.relnamespace = 'pg_catalog'::regnamespace AND c.relkind = 'v'
  AND (c.relname ~ '^pg_stat(io)?_(all|user|sys|xact_all|xact_user|xact_sys)_(tables|indexes|sequences|functions)$'
       OR c.relname IN ('pg_stat_database', 'pg_stat_database_conflicts'))
  AND pg_catalog.has_table_privilege(r.oid, c.oid, 'SELECT')
ORDER BY 1, 2, 3
"""

_DEFINERS: Final = """
SELECT n.nspname || '.' || p.proname || '(' || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')',
       (SELECT substr(c, length('search_path=') + 1) FROM unnest(p.proconfig) AS c
        WHERE c LIKE 'search\\_path=%%'),
       p.proacl IS NULL OR EXISTS (SELECT 1 FROM pg_catalog.aclexplode(p.proacl) AS a
                                   WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
FROM pg_catalog.pg_proc AS p
JOIN pg_catalog.pg_namespace AS n ON n.oid = p.pronamespace
WHERE p.prosecdef AND n.nspname = ANY (%(schemas)s::text[])
ORDER BY 1
"""


def collect_role_settings(conn: psycopg.Connection[Any], roles: Sequence[str]) -> list[RoleSetting]:
    return [RoleSetting(*row) for row in conn.execute(_ROLE_SETTINGS, {"roles": list(roles)})]


def collect_reach(conn: psycopg.Connection[Any], roles: Sequence[str]) -> list[RuntimeReach]:
    return [RuntimeReach(*row) for row in conn.execute(_REACH, {"roles": list(roles)})]


def collect_definers(conn: psycopg.Connection[Any], schemas: Sequence[str]) -> list[Definer]:
    return [Definer(*row) for row in conn.execute(_DEFINERS, {"schemas": list(schemas)})]


def role_setting_findings(settings: Sequence[RoleSetting]) -> Iterator[tuple[str, str, str]]:
    """(check, object, problem) for every setting persisted on a runtime role."""
    for s in settings:
        where = "every database" if s.database is None else f"database {s.database}"
        yield ("role_settings", f"role {s.role}",
               f"carries {s.setting} in {where}: every new connection of the role starts with "
               f"it; run ALTER ROLE {s.role} RESET ALL (a superuser deletes what RESET cannot, "
               "e.g. transaction_read_only, from pg_db_role_setting)")


def reach_findings(reach: Sequence[RuntimeReach]) -> Iterator[tuple[str, str, str]]:
    """(check, object, problem) for every function or view no runtime role may use."""
    for r in reach:
        if r.kind == "view":
            what = f"may read {r.name}, which shows every tenant's table activity"
        elif "advisory" in r.name:
            what = (f"may call {r.name}: a session could hold another tenant's lock and "
                    "stall its writes")
        elif r.name.startswith("pg_stat_get_"):
            what = f"may call {r.name}, which counts every tenant's rows"
        else:
            what = f"may call {r.name} on other tenants' backends"
        yield ("runtime_functions", f"role {r.role}",
               f"{what}; a superuser applies migration 0004 (REVOKE ... FROM PUBLIC)")


def definer_findings(definers: Sequence[Definer]) -> Iterator[tuple[str, str, str]]:
    """(check, object, problem) for SECURITY DEFINER functions open to misuse."""
    for d in definers:
        path = [p.strip() for p in (d.search_path or "").split(",") if p.strip()]
        if not path or path[0] != "pg_catalog" or any(p not in ("pg_catalog", "pg_temp")
                                                      for p in path):
            yield ("security_definer", f"function {d.function}",
                   "runs as its owner without SET search_path = pg_catalog, pg_temp: a "
                   "caller's search_path could stand in for what it calls")
        if d.public_execute:
            yield ("security_definer", f"function {d.function}",
                   "runs as its owner and PUBLIC may execute it; REVOKE EXECUTE ... FROM "
                   "PUBLIC and grant it to the roles that need it")
