"""``primitives doctor``: read the catalog and name every object that breaks a tenancy rule.

The rules are DESIGN §5's; each check has a name (:data:`CHECKS`) and each finding names
the offending object. Collecting (:func:`collect_catalog`, a few catalog queries any role
may run) is kept apart from judging (:func:`diagnose`, pure), so the checks are tested
without a database.

Example::

    with psycopg.connect(auditor_dsn(resolve_dsn()), autocommit=True) as conn:
        report = run_doctor(conn, load_specs(["agents/spectral_agent.yaml"]))
    for finding in report.findings:
        print(finding.check, finding.object, finding.problem)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

import psycopg

from primitives._doctor_drift import drift_findings
from primitives._doctor_runtime import (
    Definer,
    RoleSetting,
    RuntimeReach,
    collect_definers,
    collect_reach,
    collect_role_settings,
    definer_findings,
    reach_findings,
    role_setting_findings,
)
from primitives._project import canonical_capabilities, detect_capabilities
from primitives.compile import Table, Tables, agent_tables, compile_plan
from primitives.compile._names import APP_ROLE, AUDITOR_ROLE, FRAMEWORK_SCHEMA, MAINTAINER_ROLE
from primitives.compile._non_mirror import guarded as guarded_entries
from primitives.compile._rls import tenant_policy_name
from primitives.discipline._canonical import canonical_problems
from primitives.errors import StorageError
from primitives.spec import AgentSpec

__all__ = ["CHECKS", "Catalog", "Creator", "Definer", "DoctorReport", "Finding", "RoleSetting",
           "RuntimeReach", "collect_catalog", "diagnose", "run_doctor"]

CHECKS: Final[Mapping[str, str]] = {
    "present": "every table and view the spec compiles into exists",
    "rls_enabled": "every table has row level security enabled",
    "rls_forced": "every table has row level security forced (binds the owner too)",
    "tenant_policy": "every table has the tenant policy for the app role, FOR ALL, with "
                     "identical USING and WITH CHECK on the tenant column",
    "extra_policy": "no other permissive policy widens what the app role sees; auditor "
                    "policies are SELECT only",
    "runtime_role": "no runtime role (app, auditor, or a member of either) is superuser or "
                    "has BYPASSRLS",
    "maintainer_role": "the maintainer role (which `primitives maintain` takes with SET ROLE) "
                       "exists, cannot log in, is not superuser, has no BYPASSRLS, and no "
                       "runtime role is a member of it (none can SET ROLE to it)",
    "runtime_create": "no runtime role may create schemas in the database or objects in a "
                      "schema (its functions or operators could stand in for the built-ins "
                      "the compiled PL/pgSQL functions call)",
    "owner": "no runtime role owns an agent table, view or partition",
    "grants": "the app role holds at most SELECT and INSERT on a table (UPDATE, DELETE, "
              "TRUNCATE or MAINTAIN would let a session LOCK it against every tenant; "
              "TRUNCATE also ignores row level security) and UPDATE of columns other than "
              "the tenant column; the auditor only SELECT; nothing for PUBLIC",
    "tenant_leading_unique": "every primary key, unique constraint and unique index leads "
                             "with the tenant column",
    "partition_grant": "nothing is granted on a partition directly",
    "security_invoker": "every view runs as its reader (security_invoker)",
    "triggers": "journals carry the chain and refuse triggers, append-only tables the refuse "
                "trigger, memories the delete guard (and the non-mirror guard where the spec "
                "declares a trigram_trigger and pg_trgm is installed); all enabled",
    "role_settings": "no runtime role carries settings of its own (ALTER ROLE ... SET): a "
                     "session could set them for every later connection of every tenant",
    "runtime_functions": "no runtime role may terminate or cancel backends, take advisory "
                         "locks, or read the per-table statistics views and functions",
    "security_definer": "every SECURITY DEFINER function of the agent and framework schemas "
                        "has SET search_path = pg_catalog, pg_temp and no EXECUTE for PUBLIC",
    "drift": "each table matches the spec's compiled plan: generated column expressions, "
             "CHECK constraints present and validated, triggers present and enabled",
}
"""Every check ``primitives doctor`` runs, by name, with what it requires."""

_APP_PRIVILEGES: Final = frozenset({"SELECT", "INSERT"})
_APP_COLUMN_PRIVILEGES: Final = frozenset({"SELECT", "INSERT", "UPDATE"})
_LOCKING: Final = frozenset({"UPDATE", "DELETE", "TRUNCATE", "MAINTAIN"})
_AUDITOR_PRIVILEGES: Final = frozenset({"SELECT"})
_ON: Final = frozenset({"true", "on", "yes", "1"})

# pg_trigger.tgtype bits
_ROW, _BEFORE, _INSERT, _DELETE, _UPDATE, _TRUNCATE = 1, 2, 4, 8, 16, 32


class Relation(NamedTuple):
    schema: str
    name: str
    oid: int | None
    kind: str | None
    rls_enabled: bool
    rls_forced: bool
    owner: str | None
    options: list[str] | None


class Policy(NamedTuple):
    table_oid: int
    name: str
    command: str  # '*' all, 'r' select, 'a' insert, 'w' update, 'd' delete
    permissive: bool
    roles: list[str]  # 'public' for PUBLIC
    using: str | None
    check: str | None


class Role(NamedTuple):
    name: str
    superuser: bool
    bypassrls: bool
    via: list[str]  # the runtime roles it is (a member of)


class MaintainerRole(NamedTuple):
    exists: bool
    login: bool
    superuser: bool
    bypassrls: bool
    members: list[str]  # every role that is (through others) a member of it


class Creator(NamedTuple):
    role: str
    where: str  # 'database <name>' or 'schema <name>'


class Grant(NamedTuple):
    table_oid: int
    grantee: str  # 'PUBLIC' for PUBLIC
    privilege: str
    column: str | None = None  # a column-level grant


class UniqueIndex(NamedTuple):
    table_oid: int
    name: str
    lead: str | None  # None: the first key is an expression


class Trigger(NamedTuple):
    table_oid: int
    name: str
    type_bits: int
    enabled: str  # 'O' / 'A' fire; 'D' disabled; 'R' replica only
    function: str


class Child(NamedTuple):
    oid: int
    parent_oid: int
    schema: str
    name: str
    owner: str


@dataclass(frozen=True)
class Catalog:
    """What :func:`diagnose` reads: catalog rows about the agents' relations and the roles."""

    relations: Sequence[Relation]
    policies: Sequence[Policy] = ()
    roles: Sequence[Role] = ()
    grants: Sequence[Grant] = ()
    indexes: Sequence[UniqueIndex] = ()
    triggers: Sequence[Trigger] = ()
    children: Sequence[Child] = ()
    creators: Sequence[Creator] = ()
    role_settings: Sequence[RoleSetting] = ()
    reach: Sequence[RuntimeReach] = ()
    definers: Sequence[Definer] = ()
    maintainer: MaintainerRole | None = None  # None: not read (no findings)


@dataclass(frozen=True)
class Finding:
    """One broken rule: the check's name, the offending object, and what is wrong."""

    check: str
    object: str
    problem: str


@dataclass(frozen=True)
class DoctorReport:
    agents: tuple[str, ...]
    relations: int
    findings: tuple[Finding, ...]
    warnings: tuple[str, ...] = ()
    """What is not broken but weaker than the spec says (a non-mirror canonical table that
    does not exist yet, pg_trgm missing): reported, not failed."""

    @property
    def ok(self) -> bool:
        return not self.findings


_RELATIONS: Final = """
SELECT r.schema, r.name, c.oid::bigint, c.relkind::text, coalesce(c.relrowsecurity, false),
       coalesce(c.relforcerowsecurity, false), pg_catalog.pg_get_userbyid(c.relowner)::text,
       c.reloptions
FROM unnest(%(schemas)s::text[], %(names)s::text[]) AS r (schema, name)
LEFT JOIN pg_catalog.pg_namespace AS n ON n.nspname = r.schema
LEFT JOIN pg_catalog.pg_class AS c ON c.relnamespace = n.oid AND c.relname = r.name
"""

_CHILDREN: Final = """
WITH RECURSIVE kids (oid, root) AS (
    SELECT inhrelid, inhparent FROM pg_catalog.pg_inherits
    WHERE inhparent::bigint = ANY (%(oids)s::bigint[])
    UNION ALL
    SELECT i.inhrelid, kids.root FROM pg_catalog.pg_inherits AS i JOIN kids ON i.inhparent = kids.oid
)
SELECT kids.oid::bigint, kids.root::bigint, n.nspname::text, c.relname::text,
       pg_catalog.pg_get_userbyid(c.relowner)::text
FROM kids
JOIN pg_catalog.pg_class AS c ON c.oid = kids.oid
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
"""

_POLICIES: Final = """
SELECT p.polrelid::bigint, p.polname::text, p.polcmd::text, p.polpermissive,
       ARRAY(SELECT CASE WHEN r = 0 THEN 'public' ELSE pg_catalog.pg_get_userbyid(r)::text END
             FROM unnest(p.polroles) AS r),
       pg_catalog.pg_get_expr(p.polqual, p.polrelid),
       pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid)
FROM pg_catalog.pg_policy AS p
WHERE p.polrelid::bigint = ANY (%(oids)s::bigint[])
"""

_ROLES: Final = """
WITH RECURSIVE runtime (oid, via) AS (
    SELECT oid, rolname::text FROM pg_catalog.pg_roles WHERE rolname = ANY (%(roles)s::text[])
    UNION
    SELECT m.member, runtime.via
    FROM pg_catalog.pg_auth_members AS m JOIN runtime ON m.roleid = runtime.oid
)
SELECT r.rolname::text, r.rolsuper, r.rolbypassrls, array_agg(DISTINCT runtime.via)
FROM runtime JOIN pg_catalog.pg_roles AS r ON r.oid = runtime.oid
GROUP BY 1, 2, 3
"""

_MAINTAINER: Final = """
WITH RECURSIVE members (oid) AS (
    SELECT m.member FROM pg_catalog.pg_auth_members AS m
    JOIN pg_catalog.pg_roles AS g ON g.oid = m.roleid WHERE g.rolname = %(role)s
    UNION
    SELECT m.member FROM pg_catalog.pg_auth_members AS m JOIN members ON m.roleid = members.oid
)
SELECT true, r.rolcanlogin, r.rolsuper, r.rolbypassrls,
       ARRAY(SELECT x.rolname::text FROM pg_catalog.pg_roles AS x
             WHERE x.oid IN (SELECT oid FROM members) ORDER BY 1)
FROM pg_catalog.pg_roles AS r WHERE r.rolname = %(role)s
"""

# Where the runtime roles may create: a schema of their own, or a function or operator in a
# schema on their search_path, could stand in for a built-in that the compiled PL/pgSQL
# functions (chain trigger, bounds) resolve when they are planned. Temporary schemas are left
# out: PostgreSQL never looks up functions or operators there.
_CREATORS: Final = """
SELECT r.rolname::text, 'database ' || pg_catalog.current_database()
FROM pg_catalog.pg_roles AS r
WHERE r.rolname = ANY (%(roles)s::text[])
  AND pg_catalog.has_database_privilege(r.oid, pg_catalog.current_database(), 'CREATE')
UNION ALL
SELECT r.rolname::text, 'schema ' || n.nspname
FROM pg_catalog.pg_roles AS r CROSS JOIN pg_catalog.pg_namespace AS n
WHERE r.rolname = ANY (%(roles)s::text[])
  AND n.nspname NOT LIKE 'pg\\_temp\\_%%' AND n.nspname NOT LIKE 'pg\\_toast\\_temp\\_%%'
  AND pg_catalog.has_schema_privilege(r.oid, n.oid, 'CREATE')
ORDER BY 1, 2
"""

_GRANTS: Final = """
SELECT c.oid::bigint,
       CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee)::text END,
       a.privilege_type
FROM pg_catalog.pg_class AS c CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) AS a
WHERE c.oid::bigint = ANY (%(oids)s::bigint[])
"""

_COLUMN_GRANTS: Final = """
SELECT t.attrelid::bigint,
       CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee)::text END,
       a.privilege_type, t.attname::text
FROM pg_catalog.pg_attribute AS t CROSS JOIN LATERAL pg_catalog.aclexplode(t.attacl) AS a
WHERE t.attrelid::bigint = ANY (%(oids)s::bigint[]) AND t.attnum > 0 AND NOT t.attisdropped
"""

_UNIQUE_INDEXES: Final = """
SELECT i.indrelid::bigint, n.nspname || '.' || ic.relname, a.attname::text
FROM pg_catalog.pg_index AS i
JOIN pg_catalog.pg_class AS ic ON ic.oid = i.indexrelid
JOIN pg_catalog.pg_namespace AS n ON n.oid = ic.relnamespace
LEFT JOIN pg_catalog.pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
WHERE i.indisunique AND i.indrelid::bigint = ANY (%(oids)s::bigint[])
"""

_TRIGGERS: Final = """
SELECT t.tgrelid::bigint, t.tgname::text, t.tgtype::int, t.tgenabled::text,
       pn.nspname || '.' || p.proname
FROM pg_catalog.pg_trigger AS t
JOIN pg_catalog.pg_proc AS p ON p.oid = t.tgfoid
JOIN pg_catalog.pg_namespace AS pn ON pn.oid = p.pronamespace
WHERE NOT t.tgisinternal AND t.tgrelid::bigint = ANY (%(oids)s::bigint[])
"""


def collect_catalog(conn: psycopg.Connection[Any], agents: Sequence[Tables]) -> Catalog:
    """Read the catalog rows :func:`diagnose` needs (any role may read them)."""
    wanted = [r for tables in agents for r in (*tables.tables, *tables.views)]
    relations = [Relation(*row) for row in conn.execute(_RELATIONS, {
        "schemas": [r.schema for r in wanted], "names": [r.name for r in wanted],
    })]
    oids = [r.oid for r in relations if r.oid is not None]
    children = [Child(*row) for row in conn.execute(_CHILDREN, {"oids": oids})]
    everything = oids + [c.oid for c in children]
    roles = [Role(*row) for row in conn.execute(_ROLES, {"roles": [APP_ROLE, AUDITOR_ROLE]})]
    return Catalog(
        relations=relations,
        policies=[Policy(*row) for row in conn.execute(_POLICIES, {"oids": oids})],
        roles=roles,
        creators=[Creator(*row) for row in conn.execute(
            _CREATORS, {"roles": [r.name for r in roles]})],
        grants=[Grant(*row) for query in (_GRANTS, _COLUMN_GRANTS)
                for row in conn.execute(query, {"oids": everything})],
        indexes=[UniqueIndex(*row) for row in conn.execute(_UNIQUE_INDEXES,
                                                           {"oids": everything})],
        triggers=[Trigger(*row) for row in conn.execute(_TRIGGERS, {"oids": oids})],
        children=children,
        role_settings=collect_role_settings(conn, [APP_ROLE, AUDITOR_ROLE]),
        reach=collect_reach(conn, [APP_ROLE, AUDITOR_ROLE]),
        maintainer=_maintainer(conn),
        definers=collect_definers(conn, sorted(
            {FRAMEWORK_SCHEMA} | {s for t in agents for s in (t.schema, t.checkpointer_schema)
                                  if s})),
    )


def _maintainer(conn: psycopg.Connection[Any]) -> MaintainerRole:
    row = conn.execute(_MAINTAINER, {"role": MAINTAINER_ROLE}).fetchone()
    return MaintainerRole(*row) if row else MaintainerRole(False, False, False, False, [])


def _label(relation: Table) -> str:
    return f"{relation.kind} {relation.qualified}"


def _relation_checks(tables: Tables, catalog: Catalog) -> Iterator[Finding]:
    found = {(r.schema, r.name): r for r in catalog.relations}
    policy = tenant_policy_name(tables)
    for table in (*tables.tables, *tables.views):
        row = found.get((table.schema, table.name))
        label = _label(table)
        if row is None or row.oid is None:
            yield Finding("present", label, "missing: run `primitives migrate` for this spec")
            continue
        if table.kind == "view":
            options = dict(o.split("=", 1) for o in row.options or [] if "=" in o)
            if options.get("security_invoker", "").lower() not in _ON:
                yield Finding("security_invoker", label, "is not security_invoker: it reads "
                              "with its owner's rights instead of the reader's")
            continue
        if not row.rls_enabled:
            yield Finding("rls_enabled", label, "row level security is not enabled")
        if not row.rls_forced:
            yield Finding("rls_forced", label, "row level security is not forced; the owner "
                          "bypasses every policy")
        mine = [p for p in catalog.policies if p.table_oid == row.oid]
        yield from _policy_checks(tables, label, policy, mine)


def _policy_checks(
    tables: Tables, label: str, tenant_policy: str, policies: Sequence[Policy]
) -> Iterator[Finding]:
    column = tables.tenant_column
    tenant = [p for p in policies if p.name == tenant_policy]
    if not tenant:
        yield Finding("tenant_policy", label, f"has no policy {tenant_policy}")
    for p in tenant:
        where = f"policy {p.name} on {label}"
        if p.command != "*" or not p.permissive:
            yield Finding("tenant_policy", where, "must be PERMISSIVE FOR ALL")
        if APP_ROLE not in p.roles and "public" not in p.roles:
            yield Finding("tenant_policy", where, f"does not apply to {APP_ROLE}")
        if p.using is None or p.using != p.check:
            yield Finding("tenant_policy", where, f"USING ({p.using}) and WITH CHECK "
                          f"({p.check}) must be identical")
        elif column not in p.using or "primitives.tenant" not in p.using:
            yield Finding("tenant_policy", where, f"does not compare {column} with the "
                          "transaction's primitives.tenant")
    for p in policies:
        if p.name == tenant_policy:
            continue
        where = f"policy {p.name} on {label}"
        if p.permissive and (APP_ROLE in p.roles or "public" in p.roles):
            yield Finding("extra_policy", where, f"is a further permissive policy for "
                          f"{'PUBLIC' if 'public' in p.roles else APP_ROLE}: it widens what "
                          "the tenant policy lets through")
        if AUDITOR_ROLE in p.roles and p.command != "r":
            yield Finding("extra_policy", where, f"lets {AUDITOR_ROLE} do more than SELECT")


def _role_checks(catalog: Catalog) -> Iterator[Finding]:
    present = {r.name for r in catalog.roles}
    for name in (APP_ROLE, AUDITOR_ROLE):
        if name not in present:
            yield Finding("runtime_role", f"role {name}", "does not exist: run "
                          "`primitives migrate`")
    for role in sorted(catalog.roles):
        member = "" if role.name in role.via else f" (a member of {', '.join(role.via)})"
        if role.superuser:
            yield Finding("runtime_role", f"role {role.name}",
                          f"is SUPERUSER{member}: row level security does not bind it")
        if role.bypassrls:
            yield Finding("runtime_role", f"role {role.name}",
                          f"has BYPASSRLS{member}: row level security does not bind it")


def _maintainer_checks(catalog: Catalog) -> Iterator[Finding]:
    role = catalog.maintainer
    if role is None:
        return
    where = f"role {MAINTAINER_ROLE}"
    if not role.exists:
        yield Finding("maintainer_role", where, "does not exist: run `primitives migrate`")
        return
    for flag, what in ((role.login, "can log in (LOGIN): it must be taken only with SET ROLE "
                                    "from the admin connection"),
                       (role.superuser, "is SUPERUSER"),
                       (role.bypassrls, "has BYPASSRLS: its policies no longer bind it")):
        if flag:
            yield Finding("maintainer_role", where, what)
    runtime = {APP_ROLE, AUDITOR_ROLE} | {r.name for r in catalog.roles}
    for member in sorted(runtime.intersection(role.members)):
        yield Finding("maintainer_role", where, f"has runtime role {member} as a member: its "
                      "sessions could SET ROLE to a role that sees every tenant")


def _create_checks(catalog: Catalog) -> Iterator[Finding]:
    superusers = {r.name for r in catalog.roles if r.superuser}  # named by runtime_role
    for c in catalog.creators:
        if c.role not in superusers:
            yield Finding("runtime_create", f"role {c.role}",
                          f"may CREATE in {c.where}: what it creates there could stand in "
                          "for a built-in function or operator; revoke CREATE")


def _ownership_and_grants(agents: Sequence[Tables], catalog: Catalog) -> Iterator[Finding]:
    runtime = {r.name: r.via for r in catalog.roles} or {APP_ROLE: [APP_ROLE],
                                                         AUDITOR_ROLE: [AUDITOR_ROLE]}
    labels: dict[int, str] = {}
    kinds = {(t.schema, t.name): t for tables in agents for t in (*tables.tables, *tables.views)}
    for r in catalog.relations:
        if r.oid is None:
            continue
        labels[r.oid] = _label(kinds[(r.schema, r.name)])
        if r.owner in runtime:
            yield Finding("owner", labels[r.oid], f"is owned by runtime role {r.owner}")
    partitions = {c.oid: f"partition {c.schema}.{c.name}" for c in catalog.children}
    tenant_columns = {r.oid: tables.tenant_column for tables in agents for r in catalog.relations
                      if r.oid is not None and kinds.get((r.schema, r.name)) in tables.tables}
    for c in catalog.children:
        if c.owner in runtime:
            yield Finding("owner", partitions[c.oid], f"is owned by runtime role {c.owner}")
    for g in catalog.grants:
        if g.table_oid in partitions:
            if g.grantee in runtime or g.grantee == "PUBLIC":
                yield Finding("partition_grant", partitions[g.table_oid],
                              f"grants {g.privilege} to {g.grantee} directly; grant on the "
                              "parent table only, where row level security applies")
            continue
        label = labels.get(g.table_oid, str(g.table_oid))
        if g.grantee == "PUBLIC":
            yield Finding("grants", label, f"grants {g.privilege} to PUBLIC")
            continue
        via = runtime.get(g.grantee)
        if via is None:
            continue
        if g.column is not None:
            yield from _column_grant_checks(g, label, APP_ROLE in via,
                                            tenant_columns.get(g.table_oid))
            continue
        allowed = _APP_PRIVILEGES if APP_ROLE in via else _AUDITOR_PRIVILEGES
        if g.privilege not in allowed:
            why = (": a session could LOCK the table in any mode and every tenant would wait"
                   if g.privilege in _LOCKING else "")
            yield Finding("grants", label, f"grants {g.privilege} to {g.grantee}{why}")


def _column_grant_checks(g: Grant, label: str, app: bool,
                         tenant_column: str | None) -> Iterator[Finding]:
    allowed = _APP_COLUMN_PRIVILEGES if app else _AUDITOR_PRIVILEGES
    if g.privilege not in allowed:
        yield Finding("grants", label, f"grants {g.privilege} ({g.column}) to {g.grantee}")
    elif g.privilege == "UPDATE" and g.column == tenant_column:
        yield Finding("grants", label, f"grants UPDATE ({g.column}) to {g.grantee}: a row "
                      "could be moved to another tenant")


def _unique_index_checks(agents: Sequence[Tables], catalog: Catalog) -> Iterator[Finding]:
    tenant_of: dict[int, str] = {}
    by_name = {(t.schema, t.name): tables for tables in agents for t in tables.tables}
    for r in catalog.relations:
        owner = by_name.get((r.schema, r.name))
        if r.oid is not None and owner is not None:
            tenant_of[r.oid] = owner.tenant_column
    for c in catalog.children:
        if c.parent_oid in tenant_of:
            tenant_of[c.oid] = tenant_of[c.parent_oid]
    for index in catalog.indexes:
        tenant = tenant_of.get(index.table_oid)
        if tenant is not None and index.lead != tenant:
            lead = "an expression" if index.lead is None else f"column {index.lead}"
            yield Finding("tenant_leading_unique", f"index {index.name}",
                          f"is unique but leads with {lead}, not the tenant column {tenant}: "
                          "a global unique key tells one tenant what another holds")


# (function, operation bit, row level) each kind of table must carry
_REFUSE = tuple(((f"{FRAMEWORK_SCHEMA}.refuse_journal_mutation",), op, row)
                for op, row in ((_UPDATE, True), (_DELETE, True), (_TRUNCATE, False)))
_GUARD = ((f"{FRAMEWORK_SCHEMA}.guard_memory_delete",), _DELETE, True)


def _chain(tables: Tables) -> tuple[tuple[str, ...], int, bool]:
    """The journal's chain trigger: the agent's compiled function, or the generic one (Citus)."""
    return ((tables.chain_function_name, f"{FRAMEWORK_SCHEMA}.chain_event"), _INSERT, True)
_OPS = {_INSERT: "INSERT", _UPDATE: "UPDATE", _DELETE: "DELETE", _TRUNCATE: "TRUNCATE"}


def _non_mirror_guard(tables: Tables) -> tuple[tuple[str, ...], int, bool]:
    return ((f"{tables.schema}.{tables.object_name('non_mirror_guard')}",), _INSERT, True)


def _trigger_checks(agents: Sequence[Tables], catalog: Catalog,
                    guarded: frozenset[str] = frozenset()) -> Iterator[Finding]:
    oids = {(r.schema, r.name): r.oid for r in catalog.relations if r.oid is not None}
    for tables in agents:
        memories = (_GUARD, _non_mirror_guard(tables)) if (
            tables.agent in guarded) else (_GUARD,)
        required: list[tuple[Table | None, tuple[tuple[tuple[str, ...], int, bool], ...]]] = [
            (tables.events, (_chain(tables), *_REFUSE)), (tables.action_links, _REFUSE),
            (tables.approvals, _REFUSE), (tables.memories, memories),
        ]
        for table, needs in required:
            oid = oids.get((table.schema, table.name)) if table is not None else None
            if table is None or oid is None:
                continue
            mine = [t for t in catalog.triggers if t.table_oid == oid]
            for functions, op, row in needs:
                firing = [t for t in mine if t.function in functions and t.type_bits & op
                          and t.type_bits & _BEFORE and bool(t.type_bits & _ROW) == row]
                if not any(t.enabled in ("O", "A") for t in firing):
                    state = "is disabled" if firing else "is missing"
                    calling = " or ".join(f"{f}()" for f in functions)
                    yield Finding("triggers", _label(table), f"the BEFORE {_OPS[op]} trigger "
                                  f"calling {calling} {state}")


def diagnose(agents: Sequence[Tables], catalog: Catalog,
             guarded: frozenset[str] = frozenset()) -> list[Finding]:
    """Every finding for ``agents`` given ``catalog``, in :data:`CHECKS` order (pure).
    ``guarded``: the agents whose memories table must carry the non-mirror guard."""
    findings: list[Finding] = []
    for tables in agents:
        findings += _relation_checks(tables, catalog)
    findings += _role_checks(catalog)
    findings += _maintainer_checks(catalog)
    findings += _create_checks(catalog)
    findings += _ownership_and_grants(agents, catalog)
    findings += _unique_index_checks(agents, catalog)
    findings += _trigger_checks(agents, catalog, guarded)
    for found in (role_setting_findings(catalog.role_settings), reach_findings(catalog.reach),
                  definer_findings(catalog.definers)):
        findings += (Finding(*f) for f in found)
    order = list(CHECKS)
    unique = dict.fromkeys(findings)  # several specs may share one object
    return sorted(unique, key=lambda f: (order.index(f.check), f.object, f.problem))


def run_doctor(conn: psycopg.Connection[Any], specs: Sequence[AgentSpec]) -> DoctorReport:
    """Collect the catalog for ``specs`` and diagnose it."""
    agents = [agent_tables(spec) for spec in specs]
    try:
        catalog = collect_catalog(conn, agents)
    except psycopg.Error as err:
        raise StorageError(f"cannot read the catalog: {err}", sqlstate=err.sqlstate) from err
    try:
        caps = detect_capabilities(conn)
        warnings = [note for spec in specs for note in canonical_problems(conn, spec, caps)[1]]
    except psycopg.Error as err:
        raise StorageError(f"cannot read the catalog: {err}", sqlstate=err.sqlstate) from err
    guarded = frozenset(spec.agent for spec in specs if guarded_entries(spec, caps))
    try:
        drift = [Finding(*f) for spec in specs
                 for f in drift_findings(conn, compile_plan(
                     spec, capabilities=canonical_capabilities(conn, spec, caps)[0]))]
    except psycopg.Error as err:
        raise StorageError(f"cannot read the catalog: {err}", sqlstate=err.sqlstate) from err
    return DoctorReport(
        agents=tuple(spec.agent for spec in specs),
        relations=len({(r.schema, r.name) for r in catalog.relations}),
        findings=(*diagnose(agents, catalog, guarded), *dict.fromkeys(drift)),
        warnings=tuple(warnings),
    )
