"""The active-memory view and the compliance views read by auditors (DESIGN §5).

Every view is ``security_invoker``: it runs with the reader's privileges and row-level
security, so the app role sees its tenant's rows and the auditor sees every tenant's.
Each builder returns one ``CREATE OR REPLACE VIEW`` statement; :data:`VIEW_COLUMNS`
lists what each view returns (also used to check the builders in tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Final

from psycopg import sql

from primitives.compile._expr import ERASED_CONTENT_PATTERN, active_predicate, column
from primitives.compile._names import FRAMEWORK_SCHEMA, Table, Tables
from primitives.compile._rls import auditor_policy_name, tenant_policy_name
from primitives.spec import AgentSpec, RetentionPolicy

__all__ = [
    "ERASED_EVENT_KIND",
    "RETENTION_STATES",
    "SANITIZED_EVENT_KIND",
    "SUPERSESSION_CHAINS_FUNCTION",
    "VIEW_COLUMNS",
    "action_basis_view",
    "active_memories_view",
    "erasures_view",
    "lineage_view",
    "orphan_after",
    "policy_coverage_view",
    "redactions_view",
    "retention_state_view",
    "sanitization_view",
    "supersession_chains_function",
    "supersession_chains_signature",
    "supersession_view",
    "supersession_view_per_tenant",
    "view_comments",
]

ERASED_EVENT_KIND: Final = "erased"
"""Journal ``kind`` of the event that records an erasure."""

PII_EVENT_KINDS: Final = ("pii_redacted", "pii_consent", "pii_raw_read")
"""Journal kinds of the PII discipline: a write redacted (payload ``policy``, ``kinds``,
``fields``, ``action`` redacted | kept_with_consent, ``consent_event``), a consent recorded
(``kinds``, ``reason_sha256``), a raw read by the privacy admin (``found``, ``memory``,
``reason_sha256``)."""

SANITIZED_EVENT_KIND: Final = "sanitized"
"""Journal ``kind`` of a crossing of a sanitization gate; payload keys ``gate``, ``from``,
``to``, ``stripped``."""

RETENTION_STATES: Final = ("ACTIVE", "REFERENCED", "ORPHANED", "TOMBSTONED")

VIEW_COLUMNS: Final[dict[str, tuple[str, ...]]] = {
    # active_memories returns every column of <prefix>_memories
    "audit_lineage": ("memory_id", "step", "seq", "event_id", "kind", "actor", "occurred_at",
                      "payload", "prev_hash", "hash", "tier", "typology", "key"),
    "audit_supersession": ("root_id", "memory_id", "depth", "superseded_by", "is_latest", "tier",
                           "typology", "namespace", "key", "created_at", "superseded_at"),
    "audit_action_basis": ("action_id", "link_kind", "linked_at", "memory_id", "tier",
                           "typology", "namespace", "key", "content", "memory_created_at",
                           "superseded_by", "memory_state"),
    "audit_retention_state": ("memory_id", "tier", "typology", "namespace", "key", "persistent",
                              "created_at", "last_accessed_at", "link_count",
                              "retention_state"),
    "audit_erasures": ("memory_id", "tier", "key", "erased_at", "erasure_reason",
                       "erasure_event_seq", "residue"),
    "audit_sanitization": ("seq", "event_id", "memory_id", "actor", "occurred_at", "gate",
                           "from_ref", "to_ref", "stripped", "payload"),
    "audit_redactions": ("seq", "event_id", "kind", "memory_id", "actor", "occurred_at",
                         "policy", "action", "kinds", "fields", "consent_event", "raw_found"),
    "audit_policy_coverage": ("table_schema", "table_name", "present", "rls_enabled",
                              "rls_forced", "tenant_policy", "auditor_policy", "owner"),
}
"""Columns of each audit view after the tenant column (``audit_policy_coverage`` has none)."""

_AS = sql.SQL("{} AS {}")
_LINES = sql.SQL(",\n       ")


def _select(items: Sequence[sql.Composable | tuple[sql.Composable, str]]) -> sql.Composed:
    """A select list, one item per line; ``(expr, name)`` pairs become ``expr AS name``."""
    parts: list[sql.Composable] = []
    for item in items:
        if isinstance(item, tuple):
            parts.append(_AS.format(item[0], sql.Identifier(item[1])))
        else:
            parts.append(item)
    return _LINES.join(parts)


def _view(relation: Table, body: sql.Composable) -> sql.Composed:
    return sql.SQL("CREATE OR REPLACE VIEW {} WITH (security_invoker = true) AS\n{}").format(
        relation.ident, body
    )


def _on_memory(tables: Tables, left: str, right: str, right_column: str) -> sql.Composed:
    """``left.tenant = right.tenant AND left.id = right.<column>``."""
    t = tables.tenant_column
    return sql.SQL("{} = {} AND {} = {}").format(
        column(t, left), column(t, right), column("id", left), column(right_column, right)
    )


def _memory_state(alias: str) -> sql.Composed:
    """The state of one memory row as a word, most final state first."""
    cases = [
        ("erased_at", "ERASED"), ("tombstoned_at", "TOMBSTONED"),
        ("superseded_at", "SUPERSEDED"), ("invalidated_at", "INVALIDATED"),
        ("archived_at", "ARCHIVED"),
    ]
    whens = sql.SQL(" ").join(
        sql.SQL("WHEN {} IS NOT NULL THEN {}").format(column(c, alias), sql.Literal(word))
        for c, word in cases
    )
    return sql.SQL("CASE {} WHEN {} <= now() THEN 'EXPIRED' ELSE 'ACTIVE' END").format(
        whens, column("expires_at", alias)
    )


def active_memories_view(tables: Tables, memory_columns: Sequence[str]) -> sql.Composed:
    """``<prefix>_active_memories``: rows in retrieval (active, not erased, not expired)."""
    body = sql.SQL(
        "SELECT {}\nFROM {} AS m\nWHERE {} AND m.erased_at IS NULL\n"
        "  AND (m.expires_at IS NULL OR m.expires_at > now())"
    ).format(
        _select([column(c, "m") for c in memory_columns]),
        tables.memories.ident,
        active_predicate("m"),
    )
    return _view(tables.active_memories, body)


def lineage_view(tables: Tables) -> sql.Composed:
    """``<prefix>_audit_lineage``: each memory's journal events, ``step`` 1, 2, ... in order."""
    t = tables.tenant_column
    step = sql.SQL("row_number() OVER (PARTITION BY {}, e.memory_id ORDER BY e.seq)").format(
        column(t, "e")
    )
    items: list[sql.Composable | tuple[sql.Composable, str]] = [
        column(t, "e"), column("memory_id", "e"), (step, "step"),
    ]
    items += [column(c, "e") for c in ("seq", "event_id", "kind", "actor", "occurred_at",
                                       "payload", "prev_hash", "hash")]
    items += [column(c, "m") for c in ("tier", "typology", "key")]
    body = sql.SQL(
        "SELECT {}\nFROM {} AS e\nLEFT JOIN {} AS m ON {}\nWHERE e.memory_id IS NOT NULL"
    ).format(
        _select(items), tables.events.ident, tables.memories.ident,
        _on_memory(tables, "m", "e", "memory_id"),
    )
    return _view(tables.audit_lineage, body)


def supersession_view(tables: Tables) -> sql.Composed:
    """``<prefix>_audit_supersession``: chains old -> new via ``superseded_by``, with depth.

    A chain starts at a row that supersedes nothing (depth 0) and follows ``superseded_by``
    to the latest version (``is_latest``); cycles are cut.
    """
    t = tables.tenant_column
    tenant_m, tenant_c = column(t, "m"), column(t, "c")
    body = sql.SQL(
        "WITH RECURSIVE chain AS (\n"
        "    SELECT {tenant_m}, m.id AS root_id, m.id AS memory_id, m.superseded_by,"
        " 0 AS depth, ARRAY[m.id] AS path\n"
        "    FROM {memories} AS m\n"
        "    WHERE m.superseded_by IS NOT NULL\n"
        "      AND NOT EXISTS (SELECT 1 FROM {memories} AS p WHERE {p_is_predecessor})\n"
        "    UNION ALL\n"
        "    SELECT {tenant_c}, c.root_id, n.id, n.superseded_by, c.depth + 1, c.path || n.id\n"
        "    FROM chain AS c\n"
        "    JOIN {memories} AS n ON {n_is_successor}\n"
        "    WHERE n.id <> ALL (c.path)\n"
        ")\n"
        "SELECT {select}\n"
        "FROM chain AS c\n"
        "JOIN {memories} AS m ON {m_is_member}"
    ).format(
        tenant_m=tenant_m,
        tenant_c=tenant_c,
        memories=tables.memories.ident,
        p_is_predecessor=sql.SQL("{} = {} AND p.superseded_by = m.id").format(
            column(t, "p"), tenant_m),
        n_is_successor=_on_memory(tables, "n", "c", "superseded_by"),
        select=_select([
            tenant_c, column("root_id", "c"), column("memory_id", "c"), column("depth", "c"),
            column("superseded_by", "c"),
            (sql.SQL("c.superseded_by IS NULL"), "is_latest"),
            *(column(x, "m") for x in ("tier", "typology", "namespace", "key", "created_at",
                                       "superseded_at")),
        ]),
        m_is_member=_on_memory(tables, "m", "c", "memory_id"),
    )
    return _view(tables.audit_supersession, body)


SUPERSESSION_CHAINS_FUNCTION: Final = "supersession_chains"
"""Name (schema ``primitives``) of the function that walks one tenant's supersession links,
used by :func:`supersession_view_per_tenant`."""

_CHAINS_SIGNATURE: Final = "(ids uuid[], successors uuid[])"

# The chains of one tenant from its links (ids[i] superseded by successors[i]): the same
# walk as supersession_view's recursive CTE (roots supersede nothing, cycles are cut), over
# the arrays it is given instead of a table. Pure: it reads no relation, so it runs
# wherever the query that calls it runs. search_path pinned (and the function never inlined).
_CHAINS_FUNCTION: Final = sql.SQL("""\
CREATE OR REPLACE FUNCTION {name}{signature}
RETURNS TABLE (root_id uuid, memory_id uuid, depth integer, superseded_by uuid)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog
AS $fn$
WITH RECURSIVE link AS (
    SELECT l.id, l.successor FROM unnest(ids, successors) AS l (id, successor)
), chain AS (
    SELECT l.id AS root_id, l.id AS memory_id, l.successor AS superseded_by, 0 AS depth,
           ARRAY[l.id] AS path
    FROM link AS l
    WHERE l.successor IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM link AS p WHERE p.successor = l.id)
    UNION ALL
    SELECT c.root_id, c.superseded_by, n.successor, c.depth + 1, c.path || c.superseded_by
    FROM chain AS c
    LEFT JOIN link AS n ON n.id = c.superseded_by
    WHERE c.superseded_by IS NOT NULL AND c.superseded_by <> ALL (c.path)
)
SELECT chain.root_id, chain.memory_id, chain.depth, chain.superseded_by FROM chain
$fn$""")


def supersession_chains_function() -> sql.Composed:
    """``CREATE OR REPLACE FUNCTION primitives.supersession_chains(ids, successors)``."""
    return _CHAINS_FUNCTION.format(
        name=sql.Identifier(FRAMEWORK_SCHEMA, SUPERSESSION_CHAINS_FUNCTION),
        signature=sql.SQL(_CHAINS_SIGNATURE))


def supersession_chains_signature() -> str:
    """``primitives.supersession_chains(uuid[], uuid[])``, as ``regprocedure`` reads it."""
    return f"{FRAMEWORK_SCHEMA}.{SUPERSESSION_CHAINS_FUNCTION}(uuid[], uuid[])"


def supersession_view_per_tenant(tables: Tables) -> sql.Composed:
    """``<prefix>_audit_supersession`` without a recursive CTE in the view: the same columns
    and rows as :func:`supersession_view`, each tenant's links gathered into two arrays
    (``GROUP BY`` the tenant) and walked by :func:`supersession_chains_function`.

    For a Citus cluster, which runs a recursive CTE over a distributed table only when it
    filters on the distribution column: grouped by the tenant and joined on it, the whole
    query runs on each shard. A chain's member that is not a row of the tenant's memories
    ends the chain before it, as the recursive form's join does.
    """
    t = tables.tenant_column
    tenant_g = column(t, "g")
    body = sql.SQL(
        "SELECT {select}\n"
        "FROM (SELECT {tenant_s}, array_agg(s.id) AS ids, array_agg(s.superseded_by) AS successors\n"
        "      FROM {memories} AS s\n"
        "      WHERE s.superseded_by IS NOT NULL\n"
        "      GROUP BY {tenant_s}) AS g\n"
        "CROSS JOIN LATERAL {chains}(g.ids, g.successors) AS c\n"
        "JOIN {memories} AS m ON {m_is_member}"
    ).format(
        select=_select([
            tenant_g, column("root_id", "c"), column("memory_id", "c"), column("depth", "c"),
            column("superseded_by", "c"),
            (sql.SQL("c.superseded_by IS NULL"), "is_latest"),
            *(column(x, "m") for x in ("tier", "typology", "namespace", "key", "created_at",
                                       "superseded_at")),
        ]),
        tenant_s=column(t, "s"),
        memories=tables.memories.ident,
        chains=sql.Identifier(FRAMEWORK_SCHEMA, SUPERSESSION_CHAINS_FUNCTION),
        m_is_member=sql.SQL("{} = {} AND {} = {}").format(
            column(t, "m"), tenant_g, column("id", "m"), column("memory_id", "c")),
    )
    return _view(tables.audit_supersession, body)


def action_basis_view(tables: Tables) -> sql.Composed:
    """``<prefix>_audit_action_basis``: each action and the memory rows that justified it."""
    t = tables.tenant_column
    items: list[sql.Composable | tuple[sql.Composable, str]] = [
        column(t, "l"), column("action_id", "l"), (column("kind", "l"), "link_kind"),
        (column("created_at", "l"), "linked_at"), column("memory_id", "l"),
        *(column(x, "m") for x in ("tier", "typology", "namespace", "key", "content")),
        (column("created_at", "m"), "memory_created_at"), column("superseded_by", "m"),
        (_memory_state("m"), "memory_state"),
    ]
    body = sql.SQL("SELECT {}\nFROM {} AS l\nJOIN {} AS m ON {}").format(
        _select(items), tables.action_links.ident, tables.memories.ident,
        _on_memory(tables, "m", "l", "memory_id"),
    )
    return _view(tables.audit_action_basis, body)


def orphan_after(spec: AgentSpec) -> timedelta | None:
    """How long an unreferenced persistent row stays unused before it counts as ORPHANED."""
    retention = spec.persistent_tier.retention
    if retention is None:
        return None
    if retention.orphan_after is not None:
        return retention.orphan_after
    policy = spec.policies.get(retention.policy) if retention.policy else None
    return policy.orphan_after if isinstance(policy, RetentionPolicy) else None


def _interval_text(value: timedelta) -> str:
    """``'180 days'`` or ``'5400 seconds'``: stable text, whatever the driver's timedelta format."""
    seconds = int(value.total_seconds())
    return f"{seconds // 86400} days" if seconds % 86400 == 0 else f"{seconds} seconds"


def retention_state_view(spec: AgentSpec, tables: Tables) -> sql.Composed:
    """``<prefix>_audit_retention_state``: ACTIVE / REFERENCED / ORPHANED / TOMBSTONED per row.

    TOMBSTONED if tombstoned; else REFERENCED if an action links it; else ORPHANED if it
    left retrieval (archived, superseded, invalidated) or, for the persistent tier with a
    retention ``orphan_after``, went unused that long; else ACTIVE.
    """
    t = tables.tenant_column
    left = sql.SQL(" OR ").join(
        sql.SQL("m.{} IS NOT NULL").format(sql.Identifier(c))
        for c in ("archived_at", "superseded_at", "invalidated_at")
    )
    idle = orphan_after(spec)
    if idle is not None:
        left = sql.SQL("{} OR (m.persistent AND coalesce(m.last_accessed_at, m.created_at) < "
                       "now() - {}::interval)").format(left, sql.Literal(_interval_text(idle)))
    state = sql.SQL(
        "CASE WHEN m.tombstoned_at IS NOT NULL THEN 'TOMBSTONED' "
        "WHEN k.link_count > 0 THEN 'REFERENCED' "
        "WHEN {} THEN 'ORPHANED' ELSE 'ACTIVE' END"
    ).format(left)
    items: list[sql.Composable | tuple[sql.Composable, str]] = [
        column(t, "m"), (column("id", "m"), "memory_id"),
        *(column(x, "m") for x in ("tier", "typology", "namespace", "key", "persistent",
                                   "created_at", "last_accessed_at")),
        column("link_count", "k"), (state, "retention_state"),
    ]
    body = sql.SQL(
        "SELECT {}\nFROM {} AS m\n"
        "CROSS JOIN LATERAL (SELECT count(*) AS link_count FROM {} AS l WHERE {}) AS k"
    ).format(
        _select(items), tables.memories.ident, tables.action_links.ident,
        _on_memory(tables, "m", "l", "memory_id"),
    )
    return _view(tables.audit_retention_state, body)


def erasures_view(tables: Tables, *, has_embedding: bool) -> sql.Composed:
    """``<prefix>_audit_erasures``: erased rows, and whether anything of them remains.

    ``residue`` is computed from what is stored now: true when content is not
    ``sha256:<hex>``; value, envelope, provenance or tags are not empty; source or an
    embedding is still stored; an edge from or to the row still holds evidence; or (graph
    specs) an entity is still named or aliased the subject whose hash the erasure event
    recorded (``payload.subject_sha256``).
    """
    t = tables.tenant_column
    residue: list[sql.Composable] = [
        sql.SQL("m.content !~ {}").format(sql.Literal(ERASED_CONTENT_PATTERN)),
        sql.SQL("m.value <> '{}'::jsonb"),
        sql.SQL("m.envelope <> '{}'::jsonb"),
        sql.SQL("m.provenance <> '{}'::jsonb"),
        sql.SQL("m.tags <> '{}'::text[]"),
        sql.SQL("m.source IS NOT NULL"),
    ]
    if has_embedding:
        residue.append(sql.SQL("m.embedding IS NOT NULL"))
    if tables.edges is not None:
        residue.append(sql.SQL(
            "EXISTS (SELECT 1 FROM {} AS g WHERE {} = {} AND (g.source_id = m.id "
            "OR g.target_id = m.id) AND g.evidence <> '[]'::jsonb)"
        ).format(tables.edges.ident, column(t, "g"), column(t, "m")))
    if tables.entities is not None:
        def hashed(expr: sql.Composable) -> sql.Composed:
            return sql.SQL("encode(sha256(convert_to(lower({}), 'UTF8')), 'hex')").format(expr)
        residue.append(sql.SQL(
            "EXISTS (SELECT 1 FROM {} AS n WHERE {} = {} AND ({} = x.subject_sha256 OR "
            "EXISTS (SELECT 1 FROM unnest(n.aliases) AS a WHERE {} = x.subject_sha256)))"
        ).format(tables.entities.ident, column(t, "n"), column(t, "m"),
                 hashed(column("canonical_name", "n")), hashed(sql.Identifier("a"))))
    erased_event = sql.SQL(
        "LEFT JOIN LATERAL (SELECT e.seq, e.payload ->> 'subject_sha256' AS subject_sha256 "
        "FROM {} AS e WHERE {} = {} AND e.memory_id = m.id AND e.kind = {} "
        "ORDER BY e.seq DESC LIMIT 1) AS x ON true"
    ).format(tables.events.ident, column(t, "e"), column(t, "m"),
             sql.Literal(ERASED_EVENT_KIND))
    items: list[sql.Composable | tuple[sql.Composable, str]] = [
        column(t, "m"), (column("id", "m"), "memory_id"),
        *(column(x, "m") for x in ("tier", "key", "erased_at", "erasure_reason")),
        (sql.SQL("x.seq"), "erasure_event_seq"),
        (sql.SQL("coalesce({}, false)").format(sql.SQL(" OR ").join(residue)), "residue"),
    ]
    body = sql.SQL("SELECT {}\nFROM {} AS m\n{}\nWHERE m.erased_at IS NOT NULL").format(
        _select(items), tables.memories.ident, erased_event
    )
    return _view(tables.audit_erasures, body)


def sanitization_view(tables: Tables) -> sql.Composed:
    """``<prefix>_audit_sanitization``: journal events of memory crossing a sanitization gate."""
    t = tables.tenant_column
    items: list[sql.Composable | tuple[sql.Composable, str]] = [
        column(t, "e"),
        *(column(x, "e") for x in ("seq", "event_id", "memory_id", "actor", "occurred_at")),
        (sql.SQL("e.payload ->> 'gate'"), "gate"),
        (sql.SQL("e.payload ->> 'from'"), "from_ref"),
        (sql.SQL("e.payload ->> 'to'"), "to_ref"),
        (sql.SQL("e.payload -> 'stripped'"), "stripped"),
        column("payload", "e"),
    ]
    body = sql.SQL("SELECT {}\nFROM {} AS e\nWHERE e.kind = {}").format(
        _select(items), tables.events.ident, sql.Literal(SANITIZED_EVENT_KIND)
    )
    return _view(tables.audit_sanitization, body)


def redactions_view(tables: Tables) -> sql.Composed:
    """``<prefix>_audit_redactions``: the PII discipline's journal events: what was redacted
    where (kinds and counts, never a value), consents recorded, and raw reads."""
    t = tables.tenant_column
    items: list[sql.Composable | tuple[sql.Composable, str]] = [
        column(t, "e"),
        *(column(x, "e") for x in ("seq", "event_id", "kind", "memory_id", "actor",
                                   "occurred_at")),
        (sql.SQL("e.payload ->> 'policy'"), "policy"),
        (sql.SQL("e.payload ->> 'action'"), "action"),
        (sql.SQL("e.payload -> 'kinds'"), "kinds"),
        (sql.SQL("e.payload -> 'fields'"), "fields"),
        (sql.SQL("(e.payload ->> 'consent_event')::uuid"), "consent_event"),
        (sql.SQL("(e.payload ->> 'found')::boolean"), "raw_found"),
    ]
    body = sql.SQL("SELECT {}\nFROM {} AS e\nWHERE e.kind IN ({})").format(
        _select(items), tables.events.ident,
        sql.SQL(", ").join(sql.Literal(k) for k in PII_EVENT_KINDS))
    return _view(tables.audit_redactions, body)


def policy_coverage_view(tables: Tables) -> sql.Composed:
    """``<prefix>_audit_policy_coverage``: per table, RLS enabled/forced and policies present."""
    rows = sql.SQL(",\n             ").join(
        sql.SQL("({}, {})").format(sql.Literal(table.schema), sql.Literal(table.name))
        for table in tables.tables
    )

    def has_policy(name: str) -> sql.Composed:
        return sql.SQL(
            "EXISTS (SELECT 1 FROM pg_catalog.pg_policy AS p "
            "WHERE p.polrelid = c.oid AND p.polname = {})"
        ).format(sql.Literal(name))

    items: list[sql.Composable | tuple[sql.Composable, str]] = [
        column("table_schema", "r"), column("table_name", "r"),
        (sql.SQL("c.oid IS NOT NULL"), "present"),
        (sql.SQL("coalesce(c.relrowsecurity, false)"), "rls_enabled"),
        (sql.SQL("coalesce(c.relforcerowsecurity, false)"), "rls_forced"),
        (has_policy(tenant_policy_name(tables)), "tenant_policy"),
        (has_policy(auditor_policy_name(tables)), "auditor_policy"),
        (sql.SQL("pg_catalog.pg_get_userbyid(c.relowner)"), "owner"),
    ]
    body = sql.SQL(
        "SELECT {}\nFROM (VALUES {}) AS r (table_schema, table_name)\n"
        "LEFT JOIN pg_catalog.pg_namespace AS n ON n.nspname = r.table_schema\n"
        "LEFT JOIN pg_catalog.pg_class AS c ON c.relnamespace = n.oid "
        "AND c.relname = r.table_name AND c.relkind IN ('r', 'p')"
    ).format(_select(items), rows)
    return _view(tables.audit_policy_coverage, body)


def view_comments(tables: Tables) -> dict[str, str]:
    """Auditor-facing description of each view, keyed by view name."""
    agent, t = tables.agent, tables.tenant_column
    return {
        tables.active_memories.name: f"Memory rows of agent '{agent}' currently in retrieval "
        "(not superseded, invalidated, archived, tombstoned, erased or expired).",
        tables.audit_lineage.name: f"Lineage: every journal event of each memory of agent "
        f"'{agent}', in order (step 1, 2, ...).",
        tables.audit_supersession.name: f"Supersession chains of agent '{agent}': root_id is "
        "the oldest version, depth counts versions after it, is_latest marks the newest.",
        tables.audit_action_basis.name: f"The memory rows each action of agent '{agent}' "
        "relied on, with their state now.",
        tables.audit_retention_state.name: f"Retention state of each memory of agent "
        f"'{agent}': {', '.join(RETENTION_STATES)}.",
        tables.audit_erasures.name: f"Erased memory of agent '{agent}'; residue is true when "
        "anything beyond the content hash remains (must always be false).",
        tables.audit_sanitization.name: f"Memory of agent '{agent}' that crossed a "
        "sanitization gate, from the journal.",
        tables.audit_redactions.name: f"Personal data of agent '{agent}' redacted before "
        "writes, consents recorded and raw reads by the privacy admin, from the journal "
        "(kinds and counts, never a value).",
        tables.audit_policy_coverage.name: f"Row-level security coverage of every table of "
        f"agent '{agent}' (tenant column {t}), read from the catalog.",
    }
