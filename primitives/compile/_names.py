"""Names of everything a spec compiles into: schemas, tables, views, roles, framework functions.

The engine, the store and the audit layer import :func:`agent_tables` to address an agent's
tables, so the names live in one place and never drift from the compiled DDL.

>>> from primitives.spec import load_spec
>>> tables = agent_tables(load_spec("agents/spectral_agent.yaml"))  # doctest: +SKIP
>>> tables.memories.qualified  # doctest: +SKIP
'platform.spectral_memories'
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Final, Literal

from psycopg import sql

from primitives.errors import SpecError
from primitives.spec import AgentSpec

__all__ = [
    "APP_ROLE",
    "AUDITOR_ROLE",
    "FRAMEWORK_SCHEMA",
    "MAINTAINER_ROLE",
    "MAX_IDENTIFIER_BYTES",
    "OWNER_ROLE",
    "TENANT_SETTING",
    "Table",
    "Tables",
    "agent_tables",
    "check_name_length",
    "framework_function",
    "has_outbox",
    "is_governed",
]

# Kept equal to primitives.db._names; restated so compile stays importable on its own.
OWNER_ROLE: Final = "primitives_owner"
APP_ROLE: Final = "primitives_app"
AUDITOR_ROLE: Final = "primitives_auditor"
MAINTAINER_ROLE: Final = "primitives_maintainer"
PRIVACY_ADMIN_ROLE: Final = "primitives_privacy_admin"
TENANT_SETTING: Final = "primitives.tenant"
FRAMEWORK_SCHEMA: Final = "primitives"

MAX_IDENTIFIER_BYTES: Final = 63
"""PostgreSQL truncates longer names silently (NAMEDATALEN - 1); compile refuses them instead."""

FrameworkFunction = Literal[
    "chain_event", "refuse_journal_mutation", "guard_memory_delete", "current_tenant"
]


def framework_function(name: FrameworkFunction) -> sql.Identifier:
    """The qualified name of a trigger or helper function created by the framework migrations."""
    return sql.Identifier(FRAMEWORK_SCHEMA, name)


@dataclass(frozen=True)
class Table:
    """One relation (table or view) of an agent.

    ``ident`` composes into SQL (``"platform"."spectral_memories"``); ``name`` and
    ``qualified`` are plain strings for messages, catalog lookups and ``::regclass``.
    """

    schema: str
    name: str
    kind: Literal["table", "view"] = "table"

    @property
    def ident(self) -> sql.Identifier:
        """Schema-qualified identifier, for use inside ``sql.SQL(...).format()``."""
        return sql.Identifier(self.schema, self.name)

    @property
    def bare(self) -> sql.Identifier:
        """Unqualified identifier (the name alone)."""
        return sql.Identifier(self.name)

    @property
    def qualified(self) -> str:
        """``schema.name`` as plain text (names are lower_snake_case, so no quoting is needed)."""
        return f"{self.schema}.{self.name}"

    def __str__(self) -> str:
        return self.qualified


@dataclass(frozen=True)
class Tables:
    """Every relation an agent's plan creates, plus the names needed to address them.

    Optional tables are ``None`` when the spec does not need them (``edges``, ``entities``,
    ``node_entities`` and ``sessions`` need ``graph:``; ``canonical_refs`` needs a
    ``discipline.non_mirror`` category; ``action_requests`` and ``approvals``
    need a write policy in mode ``governed``; the ``checkpoint*`` tables, in the checkpointer
    schema, need ``persistence.checkpointer.enabled``; ``outbox`` needs
    ``discipline.visibility.cross_context: event_driven`` with events and a gate).
    """

    agent: str
    schema: str
    prefix: str
    tenant_column: str
    anchor_columns: tuple[str, ...]
    checkpointer_schema: str | None
    # tables
    memories: Table
    events: Table
    action_links: Table
    scopes: Table
    promotions: Table
    edges: Table | None
    entities: Table | None
    node_entities: Table | None
    sessions: Table | None
    action_requests: Table | None
    approvals: Table | None
    pii_raw: Table | None
    canonical_refs: Table | None
    outbox: Table | None
    checkpoints: Table | None
    checkpoint_blobs: Table | None
    checkpoint_writes: Table | None
    # views
    active_memories: Table
    audit_lineage: Table
    audit_supersession: Table
    audit_action_basis: Table
    audit_retention_state: Table
    audit_erasures: Table
    audit_sanitization: Table
    audit_redactions: Table
    audit_policy_coverage: Table

    def __hash__(self) -> int:
        # Statement builders are cached by their Tables argument, on every call of the write
        # and search paths: hash the 29 fields once per object, not once per call.
        cached: int | None = self.__dict__.get("_hash")
        if cached is None:
            cached = hash(tuple(getattr(self, f.name) for f in fields(self)))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __getstate__(self) -> dict[str, object]:
        # String hashes differ between processes: a pickled copy computes its own.
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    @property
    def tenant(self) -> sql.Identifier:
        """The tenant column as an identifier."""
        return sql.Identifier(self.tenant_column)

    @property
    def tables(self) -> tuple[Table, ...]:
        """Every table (not view), in creation order."""
        found = (getattr(self, f.name) for f in fields(self))
        return tuple(t for t in found if isinstance(t, Table) and t.kind == "table")

    @property
    def views(self) -> tuple[Table, ...]:
        """Every view, in creation order."""
        found = (getattr(self, f.name) for f in fields(self))
        return tuple(t for t in found if isinstance(t, Table) and t.kind == "view")

    @property
    def audit_views(self) -> tuple[Table, ...]:
        """The compliance views read by the auditor role."""
        return tuple(v for v in self.views if v.name.startswith(f"{self.prefix}_audit_"))

    def object_name(self, suffix: str) -> str:
        """``<prefix>_<suffix>``: the name of an index, constraint or policy of this agent."""
        return f"{self.prefix}_{suffix}"

    @property
    def chain_function(self) -> sql.Identifier:
        """The journal's compiled chain trigger function, ``<schema>.<prefix>_chain_event``."""
        return sql.Identifier(self.schema, self.object_name(CHAIN_FUNCTION_SUFFIX))

    @property
    def chain_function_name(self) -> str:
        """:attr:`chain_function` as ``schema.name`` text, as the catalog reports it."""
        return f"{self.schema}.{self.object_name(CHAIN_FUNCTION_SUFFIX)}"


CHAIN_FUNCTION_SUFFIX: Final = "chain_event"
"""``<prefix>_chain_event``: the journal's compiled chain trigger function (single node)."""

_TABLE_SUFFIXES = (
    "memories", "memory_events", "action_links", "scopes", "promotions",
    "edges", "entities", "node_entities", "sessions", "action_requests", "approvals", "pii_raw",
    "canonical_refs",
    "outbox", "publish",
)
_VIEW_SUFFIXES = (
    "active_memories", "audit_lineage", "audit_supersession", "audit_action_basis",
    "audit_retention_state", "audit_erasures", "audit_sanitization", "audit_redactions",
    "audit_policy_coverage",
)


def check_name_length(spec: AgentSpec, name: str) -> str:
    """Return ``name``, or raise SpecError when PostgreSQL would truncate it."""
    excess = len(name.encode()) - MAX_IDENTIFIER_BYTES
    if excess > 0:
        prefix = spec.persistence.store.prefix
        raise SpecError(
            f"the name '{name}' is longer than PostgreSQL's {MAX_IDENTIFIER_BYTES} bytes and "
            f"would be truncated; shorten the prefix '{prefix}' by at least {excess} characters",
            file=spec.source, field="persistence.store.prefix",
        )
    return name


def keeps_raw_pii(spec: AgentSpec) -> bool:
    """Whether the spec's PII policy keeps raw values with consent (needs the raw-PII table)."""
    pii = spec.discipline.pii
    if pii is None:
        return False
    policy = spec.policies.get(pii.policy)
    return bool(getattr(policy, "raw_with_consent", False))


def is_governed(spec: AgentSpec) -> bool:
    """Whether some typology's write policy is ``governed`` (needs requests and approvals)."""
    return any(p.mode == "governed" for p in spec.behavior.write_policy.values())


def has_outbox(spec: AgentSpec) -> bool:
    """Whether the spec publishes crossings through an outbox (``cross_context:
    event_driven`` with events and at least one sanitization gate)."""
    visibility = spec.discipline.visibility
    return (visibility.cross_context == "event_driven" and bool(visibility.events)
            and bool(spec.discipline.sanitization))


def _checkpointer_table(spec: AgentSpec, suffix: str) -> Table | None:
    """One of LangGraph's checkpointer tables, in the checkpointer schema (``None`` if off)."""
    checkpointer = spec.persistence.checkpointer
    if not checkpointer.enabled:
        return None
    name = check_name_length(spec, f"{spec.persistence.store.prefix}_{suffix}")
    return Table(checkpointer.schema_, name)


def agent_tables(spec: AgentSpec) -> Tables:
    """The names of every table and view ``spec`` compiles into.

    Raises :class:`~primitives.errors.SpecError` when the prefix makes a name longer than
    PostgreSQL keeps (63 bytes).
    """
    store = spec.persistence.store
    schema, prefix = store.schema_, store.prefix
    for suffix in (*_TABLE_SUFFIXES, *_VIEW_SUFFIXES, CHAIN_FUNCTION_SUFFIX):
        check_name_length(spec, f"{prefix}_{suffix}")

    def table(suffix: str) -> Table:
        return Table(schema, f"{prefix}_{suffix}")

    def view(suffix: str) -> Table:
        return Table(schema, f"{prefix}_{suffix}", "view")

    graph = spec.graph is not None
    governed = is_governed(spec)
    checkpointer = spec.persistence.checkpointer
    return Tables(
        agent=spec.agent,
        schema=schema,
        prefix=prefix,
        tenant_column=spec.anchor.tenant_key,
        anchor_columns=tuple(spec.anchor.keys),
        checkpointer_schema=checkpointer.schema_ if checkpointer.enabled else None,
        memories=table("memories"),
        events=table("memory_events"),
        action_links=table("action_links"),
        scopes=table("scopes"),
        promotions=table("promotions"),
        edges=table("edges") if graph else None,
        entities=table("entities") if graph else None,
        node_entities=table("node_entities") if graph else None,
        sessions=table("sessions") if graph else None,
        action_requests=table("action_requests") if governed else None,
        approvals=table("approvals") if governed else None,
        pii_raw=table("pii_raw") if keeps_raw_pii(spec) else None,
        canonical_refs=table("canonical_refs") if spec.discipline.non_mirror else None,
        outbox=table("outbox") if has_outbox(spec) else None,
        checkpoints=_checkpointer_table(spec, "checkpoints"),
        checkpoint_blobs=_checkpointer_table(spec, "checkpoint_blobs"),
        checkpoint_writes=_checkpointer_table(spec, "checkpoint_writes"),
        active_memories=view("active_memories"),
        audit_lineage=view("audit_lineage"),
        audit_supersession=view("audit_supersession"),
        audit_action_basis=view("audit_action_basis"),
        audit_retention_state=view("audit_retention_state"),
        audit_erasures=view("audit_erasures"),
        audit_sanitization=view("audit_sanitization"),
        audit_redactions=view("audit_redactions"),
        audit_policy_coverage=view("audit_policy_coverage"),
    )
