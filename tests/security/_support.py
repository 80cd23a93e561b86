"""Shared data and helpers for the security suite (fixtures live in ``conftest.py``).

The five reference specs are loaded at import so tests can be parametrised over every
table and view they compile into. Rows for tables the engine does not write (graph,
governed requests, promotions, sessions, the LangGraph checkpointer's tables) are
inserted as the application role with minimal valid columns (:func:`minimal_row`); a
table kind it does not know fails loudly, so a new table cannot slip past the suite.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from primitives.compile import Table, Tables, agent_tables
from primitives.db._citus import is_citus_coordinator
from primitives.engine import Engine
from primitives.engine._core import append_only
from primitives.spec import AgentSpec, load_specs

ROOT = Path(__file__).resolve().parents[2]
SPECS: tuple[AgentSpec, ...] = tuple(load_specs(sorted(ROOT.glob("agents/*.yaml"))))
SPEC_BY_AGENT: dict[str, AgentSpec] = {spec.agent: spec for spec in SPECS}
TABLES_BY_AGENT: dict[str, Tables] = {spec.agent: agent_tables(spec) for spec in SPECS}

APPROVERS = ["council", "admin", "dpo", "security-review"]
"""A superset of every reference spec's ``deletion_requires``: erasure is allowed for all."""

COVERAGE = "audit_policy_coverage"
"""The one view that reads the catalog, not tenant rows."""


def suffix(tables: Tables, relation: Table) -> str:
    """``memories`` for ``spectral_memories``: what kind of relation this is."""
    return relation.name.removeprefix(f"{tables.prefix}_")


def _params(kind: str) -> list[Any]:
    out = []
    for spec in SPECS:
        tables = TABLES_BY_AGENT[spec.agent]
        relations = {"table": tables.tables, "view": tables.views,
                     "audit": tables.audit_views}[kind]
        out += [pytest.param(spec.agent, rel, id=rel.name) for rel in relations]
    return out


TABLE_PARAMS = _params("table")
VIEW_PARAMS = _params("view")
AUDIT_VIEW_PARAMS = _params("audit")
RELATION_PARAMS = TABLE_PARAMS + VIEW_PARAMS
TENANT_RELATION_PARAMS = [
    p for p in RELATION_PARAMS if suffix(TABLES_BY_AGENT[p.values[0]], p.values[1]) != COVERAGE
    and p.values[1] != TABLES_BY_AGENT[p.values[0]].pii_raw
]
"""Every table and view that holds tenant rows and the app role reads: all but the
catalog-reading coverage view and the raw-PII table, which no runtime role may SELECT at all
(tests/integration/test_pii.py: the app role is refused, and the privacy admin's read
function returns only the bound tenant's rows)."""

SPEC_PARAMS = [pytest.param(spec.agent, id=spec.agent) for spec in SPECS]


def new_tenant(label: str = "t") -> str:
    """A tenant id no other test (or earlier run against the same server) uses."""
    return f"{label}-{uuid.uuid4().hex[:12]}"


def anchor_for(spec: AgentSpec, tenant: str) -> dict[str, str]:
    """The anchor of ``tenant``; other required anchor keys get a fixed value."""
    anchor = {key: "k" for key in spec.anchor.required_at_write}
    anchor[spec.anchor.tenant_key] = tenant
    return anchor


def transient_tier(spec: AgentSpec) -> str:
    """The first tier that is not persistent (every reference spec has one, episodic)."""
    return next(t.name for t in spec.tiers if not t.persistent)


def into_scope(spec: AgentSpec, tier: str, scope: str) -> dict[str, str]:
    """``end_scope`` keywords for ``tier``: the scope compounded rows land in when the next
    tier up is transient (``{"into_scope": "<scope>:parent"}``), else none."""
    from primitives.lifecycle._boundary import boundary_rules
    upward = [r for r in boundary_rules(spec)
              if r.from_tier == tier and not spec.tier(r.to_tier).persistent]
    return {"into_scope": f"{scope}:parent"} if upward else {}


def persistent_write(spec: AgentSpec) -> tuple[str, str]:
    """(persistent tier, a typology of it that may be written directly: not promotion_only or
    governed), one that may also be superseded (not append_only) where the tier has one."""
    tier = spec.persistent_tier.name
    writable = []
    for typology in spec.typology[tier]:
        policy = spec.behavior.write_policy.get(typology)  # type: ignore[call-overload]
        if policy is None or policy.mode not in ("promotion_only", "governed"):
            writable.append(typology)
    for typology in sorted(writable, key=lambda t: append_only(spec, tier, t)):
        return tier, typology
    raise AssertionError(f"{spec.agent}: no directly writable typology in {tier}")


def connect_engine(spec: AgentSpec, dsn: str, **kwargs: Any) -> Engine:
    """``Engine.connect`` without the "signal not evaluated" warnings (expected here)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return Engine.connect(spec, dsn, **kwargs)


@dataclass(frozen=True)
class Refs:
    """Ids of one tenant's rows that other rows point at (foreign keys)."""

    memory_id: UUID
    other_memory_id: UUID
    entity_id: UUID
    request_id: UUID


def minimal_row(spec: AgentSpec, tables: Tables, relation: Table, tenant: str,
                refs: Refs) -> dict[str, Any]:
    """Column -> value for one valid row of ``relation`` for ``tenant``."""
    unique = uuid.uuid4().hex[:12]
    kind = suffix(tables, relation)
    rows: dict[str, dict[str, Any]] = {
        "memories": {"id": uuid.uuid4(), "tier": transient_tier(spec), "typology": "episodic",
                     "key": f"probe-{unique}", "content": f"probe row {unique}"},
        "memory_events": {"kind": "sanitized", "memory_id": refs.memory_id,
                          "actor": "security-test",
                          "payload": Jsonb({"gate": "strip", "from": "workspace.semantic",
                                            "to": "world_signal", "stripped": ["id"]})},
        "action_links": {"action_id": f"action-{unique}", "memory_id": refs.memory_id,
                         "kind": "basis"},
        "scopes": {"tier": transient_tier(spec), "scope_id": f"scope-{unique}"},
        "promotions": {"rule": f"rule-{unique}", "source_id": refs.other_memory_id,
                       "target_id": refs.memory_id},
        "sessions": {"session_id": f"session-{unique}"},
        "pii_raw": {"memory_id": refs.memory_id, "content": f"raw {unique}",
                    "consent_event": uuid.uuid4()},
        "outbox": {"event": "probe.written", "gate": "strip", "to_ref": "world_signal",
                   "memory_id": refs.memory_id, "payload": Jsonb({"content": "probe"})},
        "action_requests": {"id": refs.request_id, "kind": "memory_promote_request"},
        "approvals": {"request_id": refs.request_id, "approver": f"approver-{unique}",
                      "decision": "approve"},
        "checkpoints": {"thread_id": f"thread-{unique}", "checkpoint_id": f"cp-{unique}",
                        "checkpoint": Jsonb({"v": 1})},
        "checkpoint_blobs": {"thread_id": f"thread-{unique}", "channel": "messages",
                             "version": "1", "type": "json", "blob": b"{}"},
        "checkpoint_writes": {"thread_id": f"thread-{unique}", "checkpoint_id": f"cp-{unique}",
                              "task_id": f"task-{unique}", "idx": 0, "channel": "messages",
                              "blob": b"{}"},
    }
    if spec.discipline.non_mirror:
        rows["canonical_refs"] = {"memory_id": refs.memory_id,
                                  "category": spec.discipline.non_mirror[0].category,
                                  "canonical_key": f"key-{unique}", "canonical_version": "1"}
    if spec.graph is not None:
        entity_type = spec.graph.entity_types[0] if spec.graph.entity_types else "concept"
        rows |= {
            "entities": {"id": refs.entity_id, "canonical_name": f"entity {unique}",
                         "type": entity_type},
            "edges": {"source_id": refs.memory_id, "target_id": refs.other_memory_id,
                      "relation_type": spec.graph.edges[0]},
            "node_entities": {"memory_id": refs.memory_id, "entity_id": refs.entity_id},
        }
    if kind not in rows:
        raise AssertionError(f"no minimal row for {relation.qualified}: add its kind '{kind}' "
                             "to tests/security/_support.py:minimal_row")
    row = anchor_for(spec, tenant) if kind == "memories" else {tables.tenant_column: tenant}
    return row | rows[kind]


def insert_sql(relation: Table, row: Mapping[str, Any]) -> sql.Composed:
    return sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
        relation.ident,
        sql.SQL(", ").join(sql.Identifier(c) for c in row),
        sql.SQL(", ").join(sql.Placeholder(c) for c in row),
    )


def insert_row(conn: psycopg.Connection[Any], agent: str, relation: Table, tenant: str,
               refs: Refs) -> None:
    spec, tables = SPEC_BY_AGENT[agent], TABLES_BY_AGENT[agent]
    row = minimal_row(spec, tables, relation, tenant, refs)
    conn.execute(insert_sql(relation, row), row)


def count_sql(relation: Table, tenant_column: str | None = None) -> sql.Composed:
    """``SELECT count(*)``, optionally ``WHERE <tenant column> = %s``."""
    statement = sql.SQL("SELECT count(*) FROM {}").format(relation.ident)
    if tenant_column is None:
        return statement
    return sql.SQL("{} WHERE {} = %s").format(statement, sql.Identifier(tenant_column))


def count(conn: psycopg.Connection[Any], relation: Table, tenant_column: str | None = None,
          tenant: str | None = None) -> int:
    params = (tenant,) if tenant_column is not None else ()
    row = conn.execute(count_sql(relation, tenant_column), params).fetchone()
    assert row is not None
    return int(row[0])


def verify_chain(conn: psycopg.Connection[Any], tables: Tables, tenant: str) -> int | None:
    """The first broken seq of ``tenant``'s journal, or None (run inside its transaction)."""
    row = conn.execute("SELECT primitives.verify_chain(%s::regclass, %s, %s)",
                       (tables.events.qualified, tables.tenant_column, tenant)).fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Seeded:
    """One tenant's seeded rows: every table and every tenant view holds at least one."""

    tenant: str
    marker: str
    memory_ids: tuple[UUID, ...]
    scope_id: str
    subject: str
    refs: Refs


@dataclass(frozen=True)
class World:
    """One agent's tenants: ``a`` and ``b`` hold rows everywhere, ``c`` holds none."""

    a: Seeded
    b: Seeded
    c: str


_RAW = ("memory_events", "promotions", "entities", "edges", "node_entities", "sessions",
        "action_requests", "approvals", "outbox", "checkpoints", "checkpoint_blobs",
        "checkpoint_writes")
"""Relations seeded with raw INSERTs as the app role (the engine does not write them yet;
``memory_events`` gets a ``sanitized`` event, which only a sanitization gate writes;
``outbox`` an entry, which only a promotion into the gate's semantic ``from`` writes in
the reference spec)."""


def seed_tenant(engine: Engine, tenant: str) -> Seeded:
    """Write rows for ``tenant`` into every table of ``engine``'s agent, in one transaction."""
    spec, tables = engine.spec, engine.tables
    marker = f"m{uuid.uuid4().hex[:12]}"
    scope_id, subject = f"scope-{marker}", f"subject-{marker}"
    transient = transient_tier(spec)
    tier, typology = persistent_write(spec)
    with engine.tenant(anchor_for(spec, tenant)) as mem:
        note = mem.observe(transient, f"{marker} transient observation", scope_id=scope_id,
                           envelope={"marker": marker})
        first = mem.observe(tier, f"{marker} first version", typology=typology, key="pref",
                            envelope={"marker": marker})
        # an append-only typology keeps its entries: the second version is a new entry
        latest = mem.observe(tier, f"{marker} second version", typology=typology,
                             key="pref-2" if append_only(spec, tier, typology) else "pref",
                             envelope={"marker": marker})
        drafts: list[uuid.UUID] = []
        if append_only(spec, tier, typology):
            # no persistent supersession: the audit's supersession chain comes from a keyed
            # rewrite in the transient tier instead
            for version in ("first", "second"):
                drafts.append(mem.observe(transient, f"{marker} {version} draft",
                                          scope_id=scope_id, key="draft",
                                          envelope={"marker": marker}).id)
        mem.link_action(f"action-{marker}", [latest.id], "basis")
        unsourced = [i.category for i in spec.discipline.non_mirror if not i.canonical_source]
        if unsourced:  # the canonical tables do not exist here: a category without one
            mem.reference(latest.id, unsourced[0], f"ref-{marker}", version="1")
        doomed = mem.observe(tier, f"{marker} about a data subject", typology=typology,
                             envelope={"subject": subject})
        assert mem.erase(subject, approvals=APPROVERS, reason="security suite") == 1
        refs = Refs(memory_id=latest.id, other_memory_id=note.id, entity_id=uuid.uuid4(),
                    request_id=uuid.uuid4())
        for relation in tables.tables:
            if suffix(tables, relation) in _RAW:
                insert_row(mem.connection, spec.agent, relation, tenant, refs)
        # audit_redactions reads pii_* events; agents without a PII policy never write one
        mem.connection.execute(sql.SQL(
            "INSERT INTO {} ({}, event_id, kind, memory_id, actor, payload) "
            "VALUES (%s, %s, 'pii_redacted', %s, 'security-test', %s)").format(
            tables.events.ident, tables.tenant), (tenant, uuid.uuid4(), latest.id, Jsonb({
                "policy": "security", "kinds": {"email": 1}, "fields": ["content"],
                "action": "redacted", "consent_event": None})))
    return Seeded(tenant, marker, (note.id, first.id, latest.id, doomed.id, *drafts),
                  scope_id, subject, refs)


def relation_counts(conn: psycopg.Connection[Any], tables: Tables,
                    tenant: str) -> Iterator[tuple[str, int]]:
    """(table name, rows of ``tenant``) for every table, read in the current transaction; the
    raw-PII table, which the app role may not read, as the privacy admin's function would
    see it is not counted (its own tests: tests/integration/test_pii.py)."""
    for relation in tables.tables:
        if relation != tables.pii_raw:
            yield relation.name, count(conn, relation, tables.tenant_column, tenant)


# -- the same tests on a Citus cluster (tests/citus) ---------------------------------------------

CITUS_VIEW_WRITE = "cannot modify views when the query contains citus tables"
"""Citus's refusal (0A000) of a write through a view over distributed tables, raised before
PostgreSQL checks the privileges or whether the view is updatable."""

CITUS_REKEY = "modifying the partition value of rows is not allowed"
"""Citus's refusal (0A000) of an UPDATE of the distribution column (the tenant column), for
every role, raised before row-level security is checked."""


def on_citus(conn: psycopg.Connection[Any]) -> bool:
    """Whether ``conn`` is connected to a Citus coordinator: tests/citus runs this suite there,
    and a test whose premise is single-node (a refusal Citus raises before PostgreSQL does,
    state that lives on the workers' shards) branches on this explicitly."""
    return is_citus_coordinator(conn)


def citus_refusal(err: BaseException, words: str) -> bool:
    """Whether ``err`` is Citus's refusal ``words`` (0A000): a psycopg error, or a framework
    error that carries the SQLSTATE in its context."""
    sqlstate = getattr(err, "sqlstate", None) or getattr(err, "context", {}).get("sqlstate")
    return sqlstate == "0A000" and words in str(err)


def citus_workers(admin: psycopg.Connection[Any], user: str) -> list[str]:
    """The DSN of each worker of the coordinator ``admin`` is connected to, as ``user``
    (the roles are the same on every node). The sessions see the shards in the catalog
    (``citus.override_table_visibility`` off; a worker hides them from ``pg_class`` by
    default), so what the catalog then withholds is withheld by privileges and policies."""
    dbname = admin.info.get_parameters().get("dbname", "postgres")
    rows = admin.execute("SELECT nodename, nodeport FROM pg_catalog.pg_dist_node "
                         "WHERE groupid <> 0 AND noderole = 'primary' AND isactive "
                         "ORDER BY nodeport").fetchall()
    return [f"host={host} port={port} user={user} dbname={dbname} "
            "options='-c citus.override_table_visibility=off'" for host, port in rows]


def shard_names(admin: psycopg.Connection[Any], relation: Table) -> list[str]:
    """The names (without schema) of the shards of the distributed ``relation``."""
    return [name for (name,) in admin.execute(
        "SELECT c.relname || '_' || s.shardid FROM pg_catalog.pg_dist_shard AS s "
        "JOIN pg_catalog.pg_class AS c ON c.oid = s.logicalrelid "
        "WHERE s.logicalrelid = %s::regclass ORDER BY s.shardid",
        (relation.qualified,)).fetchall()]
