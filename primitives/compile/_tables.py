"""The core tables of every agent: memories, the journal, action links, scopes, promotions.

Each builder returns a :class:`~primitives.compile._ddl.TableDef`; the tenant column leads
every column list, key and (where the index method allows) index.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Final

from psycopg import sql

from primitives.compile import _seeded
from primitives.compile._capabilities import Capabilities
from primitives.compile._capacity import (
    CAPACITY_TRIGGER,
    capacity_functions,
    capacity_trigger,
)
from primitives.compile._ddl import (
    BIGINT,
    BOOLEAN,
    EMPTY_JSONB,
    EMPTY_TEXT_ARRAY,
    INTEGER,
    JSONB,
    NOW,
    RANDOM_UUID,
    REAL,
    TEXT,
    TEXT_ARRAY,
    TIMESTAMPTZ,
    UUID,
    Column,
    Constraint,
    Index,
    TableDef,
    Trigger,
    check,
    foreign_key,
    in_list,
    primary_key,
)
from primitives.compile._definer import erase_functions, memory_functions
from primitives.compile._expr import active_predicate, pending_embedding_predicate
from primitives.compile._maintenance_idx import maintenance_indexes
from primitives.compile._names import Tables, framework_function
from primitives.compile._non_mirror import guard_functions, guard_trigger
from primitives.spec import AgentSpec

__all__ = [
    "CURRENT_KEY_COLUMNS",
    "GENERATED_MEMORY_COLUMNS",
    "OBSERVED_EVENT_KIND",
    "RETIRED_MEMORY_INDEXES",
    "action_links_table",
    "append_only_triggers",
    "chain_function_sql",
    "events_table",
    "gin_index",
    "memories_table",
    "promotions_table",
    "scopes_table",
    "tenant_column",
]

GENERATED_MEMORY_COLUMNS = ("persistent", "tsv")
"""Columns of ``<prefix>_memories`` the database computes; never INSERT or UPDATE them."""

CURRENT_KEY_COLUMNS = ("tier", "namespace", "key")
"""After the tenant column: the key of the current-version unique index (``ON CONFLICT`` target)."""

_ONE = sql.SQL("1")
_ZERO = sql.SQL("0")


def tenant_column(tables: Tables) -> Column:
    return Column(tables.tenant_column, TEXT, not_null=True)


def _ts(name: str, *, now: bool = False) -> Column:
    return Column(name, TIMESTAMPTZ, not_null=now, default=NOW if now else None)


def _bounded(name: str, expression: sql.Composable, limit: int) -> Constraint:
    return check(name, sql.SQL("{} <= {}").format(expression, sql.Literal(limit)))


def _json_size(column: str) -> sql.Composed:
    return sql.SQL("octet_length({}::text)").format(sql.Identifier(column))


def gin_index(
    name: str, tenant: str, element: sql.Composable, capabilities: Capabilities
) -> Index:
    """A GIN index that leads with the tenant column when btree_gin is available."""
    if capabilities.btree_gin:
        return Index(name, "gin", (sql.Identifier(tenant), element), tenant)
    return Index(name, "gin", (element,), None)


def _tsv_index(name: Callable[[str], str], tenant: str, capabilities: Capabilities) -> Index:
    """The full-text index: on the leakproof match's operator class where the database has
    it (row-level security then lets the index serve the lexical signal), replacing the
    plain one an earlier plan built."""
    if capabilities.text_match:
        return replace(gin_index(name("memories_tsv_match_idx"), tenant,
                                 sql.SQL("tsv primitives.tsvector_match_ops"), capabilities),
                       replaces=name("memories_tsv_idx"))
    return gin_index(name("memories_tsv_idx"), tenant, sql.Identifier("tsv"), capabilities)


def append_only_triggers() -> tuple[Trigger, ...]:
    """``primitives.refuse_journal_mutation`` for row UPDATE/DELETE and statement TRUNCATE."""
    refuse = framework_function("refuse_journal_mutation")
    return (
        Trigger("primitives_refuse_mutation", "BEFORE", "UPDATE OR DELETE", "ROW", refuse),
        Trigger("primitives_refuse_truncate", "BEFORE", "TRUNCATE", "STATEMENT", refuse),
    )


def _memory_columns(spec: AgentSpec, tables: Tables, capabilities: Capabilities) -> list[Column]:
    anchor = spec.anchor
    columns = [tenant_column(tables)]
    columns += [
        Column(key, TEXT, not_null=key in anchor.required_at_write)
        for key in anchor.keys[1:]
    ]
    persistent_expr = sql.SQL("{} = {}").format(
        sql.Identifier("tier"), sql.Literal(spec.persistent_tier.name)
    )
    tsv_expr = sql.SQL("to_tsvector({}::regconfig, {})").format(
        sql.Literal(spec.retrieval.text_search_config), sql.Identifier("content")
    )
    columns += [
        Column("id", UUID, not_null=True, default=RANDOM_UUID),
        Column("tier", TEXT, not_null=True),
        Column("typology", TEXT, not_null=True),
        Column("persistent", BOOLEAN, generated=persistent_expr),
        Column("scope_id", TEXT),
        Column("namespace", TEXT_ARRAY, not_null=True, default=EMPTY_TEXT_ARRAY),
        Column("key", TEXT, not_null=True),
        Column("content", TEXT, not_null=True),
        Column("value", JSONB, not_null=True, default=EMPTY_JSONB),
        Column("envelope", JSONB, not_null=True, default=EMPTY_JSONB),
        Column("tags", TEXT_ARRAY, not_null=True, default=EMPTY_TEXT_ARRAY),
        Column("provenance", JSONB, not_null=True, default=EMPTY_JSONB),
        Column("tsv", sql.SQL("tsvector"), generated=tsv_expr),
    ]
    if capabilities.vector:
        dims = sql.SQL("halfvec({})").format(sql.Literal(spec.retrieval.embedding.dims))
        columns += [Column("embedding", dims), Column("embedding_model", TEXT)]
    columns += [
        Column("confidence", REAL, not_null=True, default=_ONE),
        Column("decay_rate", REAL),
        Column("access_count", INTEGER, not_null=True, default=_ZERO),
        _ts("last_accessed_at"),
        _ts("event_time", now=True),
        _ts("created_at", now=True),
        _ts("updated_at", now=True),
        _ts("valid_from", now=True),
        # the last corroboration of the row: a validity window runs from here (or from
        # valid_from before any), so re-corroboration extends it
        Column("corroborated_at", TIMESTAMPTZ, added=True),
        _ts("invalidated_at"),
        _ts("superseded_at"),
        Column("superseded_by", UUID),
        _ts("archived_at"),
        _ts("tombstoned_at"),
        _ts("erased_at"),
        Column("erasure_reason", TEXT),
        _ts("expires_at"),
        Column("ttl_ticks", INTEGER),
        Column("source", TEXT),
        Column("actor", TEXT),
        # tick-based tiers (seed 001): ticks the row has lived, and the ages at which it was
        # referenced (primitives.engine._ticks); a references promotion counts them in a
        # window. Last, so the views that list every column only gain columns at their end.
        Column("age_ticks", INTEGER, added=True),
        Column("reference_ticks", sql.SQL("integer[]"), added=True),
    ]
    return columns


def _tier_pairs(spec: AgentSpec) -> sql.Composed:
    """The allowed ``tier:typology`` pairs as one text-array constant. Tier names cannot hold
    ``:``. The check compares one string with a constant array: PostgreSQL reads a check's
    stored expression on every insert, and this form is a few nodes where a list of row
    comparisons is dozens."""
    pairs = [f"{tier.name}:{kind}" for tier in spec.tiers
             for kind in spec.typology.get(tier.name, [])]
    return sql.SQL("{}::text[]").format(sql.Literal("{" + ",".join(pairs) + "}"))


MEMORY_UPDATE_COLUMNS = (
    # supersession, state changes, confirmation
    "superseded_at", "superseded_by", "invalidated_at", "archived_at", "tombstoned_at",
    "confidence", "decay_rate", "updated_at", "corroborated_at",
    # retrieval's batched access marks (primitives.lifecycle._access)
    "access_count", "last_accessed_at",
    # vectors written after the row, store metadata and expiry
    "embedding", "embedding_model", "provenance", "expires_at",
    # tick-based tiers (primitives.engine._ticks): tick() and reference() set them
    "ttl_ticks", "age_ticks", "reference_ticks",
    # erasure (engine erase) changes content, value, envelope, tags and source only through
    # the SECURITY DEFINER function <prefix>_erase_row: no runtime session rewrites them
)
"""The memories columns the app role may UPDATE (column-level grant): the ones the engine's
UPDATE statements set. Never the tenant, anchor keys, id, tier, typology or key."""

MEMORY_BOUNDS_COLUMNS = ("tier", "typology", "content", "value", "envelope", "provenance",
                         "confidence", "erased_at", "erasure_reason")
"""The columns the memories table's CHECK constraints read, in the order its bounds function
takes them: every observation writes the table, so its checks run as one compiled function
(:func:`~primitives.compile._ddl.bounds_function_sql`)."""


def memories_table(spec: AgentSpec, tables: Tables, capabilities: Capabilities) -> TableDef:
    """``<prefix>_memories``: one row per memory, every state change kept (soft supersession)."""
    t, name = tables.tenant_column, tables.object_name
    limits = spec.persistence.store.limits
    constraints = (
        primary_key(name("memories_pkey"), (t, "id")),
        check(name("memories_tier_check"),
              sql.SQL("tier IN ({})").format(in_list(spec.tier_names))),
        check(name("memories_typology_check"),
              sql.SQL("(tier || ':' || typology) = ANY ({})").format(_tier_pairs(spec))),
        _bounded(name("memories_content_check"),
                 sql.SQL("char_length(content)"), limits.content_chars),
        _bounded(name("memories_value_check"), _json_size("value"), limits.value_bytes),
        _bounded(name("memories_envelope_check"), _json_size("envelope"), limits.envelope_bytes),
        _bounded(name("memories_provenance_check"), _json_size("provenance"), limits.value_bytes),
        check(name("memories_confidence_check"), sql.SQL("confidence BETWEEN 0 AND 1")),
        check(name("memories_erasure_check"),
              sql.SQL("erased_at IS NULL OR erasure_reason IS NOT NULL")),
    )
    tenant = sql.Identifier(t)
    indexes = [
        Index(name("memories_current_key"), "btree",
              (tenant, *map(sql.Identifier, CURRENT_KEY_COLUMNS)), t, unique=True,
              where=sql.SQL("superseded_at IS NULL AND tombstoned_at IS NULL")),
        Index(name("memories_recent_idx"), "btree",
              (tenant, sql.Identifier("tier"), sql.SQL("created_at DESC")), t,
              where=active_predicate()),
        Index(name("memories_scope_idx"), "btree",
              (tenant, sql.Identifier("scope_id"), sql.Identifier("tier")), t,
              where=sql.SQL("scope_id IS NOT NULL")),
        Index(name("memories_superseded_by_idx"), "btree",
              (tenant, sql.Identifier("superseded_by")), t,
              where=sql.SQL("superseded_by IS NOT NULL")),
        Index(name("memories_expires_idx"), "btree",
              (tenant, sql.Identifier("expires_at")), t,
              where=sql.SQL("expires_at IS NOT NULL")),
        _tsv_index(name, t, capabilities),
        # what maintain passes may change, so that a pass finds it without reading every row
        *maintenance_indexes(spec, tables),
    ]
    if capabilities.vector:
        # HNSW cannot lead with the tenant; retrieval filters by tenant with iterative scans.
        indexes.append(Index(name("memories_embedding_idx"), "hnsw",
                             (sql.SQL("embedding halfvec_cosine_ops"),), None))
        if spec.retrieval.embedding.embed == "deferred":
            # The rows a deferred write left for the embedding worker, oldest first: finding
            # them, and counting them for a search, reads this index alone, which stays as
            # small as the worker's backlog.
            indexes.append(Index(name("memories_embedding_pending_idx"), "btree",
                                 (tenant, sql.Identifier("created_at"), sql.Identifier("id")),
                                 t, where=pending_embedding_predicate()))
    guard = Trigger(
        "primitives_guard_delete", "BEFORE", "DELETE", "ROW",
        framework_function("guard_memory_delete"),
        (tables.action_links.ident.as_string(None), t),
    )
    return TableDef(
        table=tables.memories,
        columns=tuple(_memory_columns(spec, tables, capabilities)),
        constraints=constraints,
        indexes=tuple(indexes),
        triggers=(guard, *guard_trigger(spec, tables, capabilities),
                  *capacity_trigger(spec, tables)),
        app_update_columns=MEMORY_UPDATE_COLUMNS,
        comment=_memories_comment(spec, tables),
        functions=(*memory_functions(tables), *guard_functions(spec, tables, capabilities),
                   *capacity_functions(spec, tables),
                   *_seeded.seeded_functions(spec, tables)),
        retired_triggers=() if capacity_trigger(spec, tables) else (
            (CAPACITY_TRIGGER, "no tier declares a capacity that refuses"),),
        retired_indexes=(
            *((name(n), _UNUSABLE_UNDER_RLS) for n in RETIRED_MEMORY_INDEXES),
            # earlier plans built it for a trigram_trigger defense
            *(((name("memories_content_trgm_idx"), _NOT_THE_GUARD),) if any(
                "trigram_trigger" in item.defenses for item in spec.discipline.non_mirror)
              else ())),
        bounds=MEMORY_BOUNDS_COLUMNS,
    )


OBSERVED_EVENT_KIND: Final = "observed"
"""The journal event of a new memory row: by far the most common kind."""

RETIRED_MEMORY_INDEXES = ("memories_envelope_idx", "memories_tags_idx")
"""GIN indexes on ``envelope`` and ``tags`` that earlier plans built. Containment (``@>``) is
not leakproof, so under row-level security PostgreSQL never lets an index serve it for the
application role: the indexes were written on every insert and read by no query the engine
runs (the envelope signal and erasure filter the tenant's rows instead)."""
_UNUSABLE_UNDER_RLS = "no query can use it under row-level security"
_NOT_THE_GUARD = ("the non-mirror guard compares writes with the canonical text, not with "
                  "other memories; no query reads this index")


def _memories_comment(spec: AgentSpec, tables: Tables) -> str:
    tiers = ", ".join(spec.tier_names)
    text = (
        f"Memory rows of agent '{spec.agent}' (tiers {tiers}; persistent tier "
        f"'{spec.persistent_tier.name}'), tenant column {tables.tenant_column}. Rows leave "
        "retrieval by state change (superseded_at, invalidated_at, archived_at, tombstoned_at), "
        f"never by DELETE of persistent or action-linked rows; every change is journalled in "
        f"{tables.events.qualified}."
    )
    categories = [item.category for item in spec.discipline.non_mirror]
    if categories:
        text += (
            " Non-mirror categories, held by reference and never copied here: "
            + ", ".join(categories) + "."
        )
    return text


# The journal's chain trigger, compiled per agent: the table and tenant column are written
# into the body, so PL/pgSQL plans its statements once per session instead of running
# dynamic SQL on every event (primitives.chain_event, the generic version in migration
# 0002 and 0004, looks both up per call). Same checks, lock key, SQLSTATEs and hash.
_CHAIN_FUNCTION = sql.SQL("""\
CREATE OR REPLACE FUNCTION {function}() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
DECLARE
    last_seq  bigint;
    last_hash text;{declare}
BEGIN
    -- Under REPEATABLE READ a writer that waited for the lock below would still
    -- read the chain as of its snapshot and fork it; refuse instead.
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'PM004',
            MESSAGE = format('%I.%I: journal events are appended under READ COMMITTED only (this '
                             'transaction is %s), otherwise the hash chain could fork',
                             TG_TABLE_SCHEMA, TG_TABLE_NAME,
                             pg_catalog.current_setting('transaction_isolation'));
    END IF;
    IF NEW.{tenant} IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'not_null_violation',
            MESSAGE = format('%I.%I: the tenant column %I must be set on every journal event',
                             TG_TABLE_SCHEMA, TG_TABLE_NAME, {tenant_name});
    END IF;

    -- One writer per (journal, tenant) at a time, until commit or rollback.
    -- (through primitives.tenant_xact_lock: runtime roles may not take advisory locks)
    PERFORM primitives.tenant_xact_lock(NEW.{tenant}, 'journal ' || TG_RELID::text);

    SELECT e.seq, e.hash{select} INTO last_seq, last_hash{into}
    FROM {journal} AS e
    WHERE e.{tenant} = NEW.{tenant}
    ORDER BY e.seq DESC
    LIMIT 1;

    NEW.seq         := coalesce(last_seq, 0) + 1;
    NEW.prev_hash   := coalesce(last_hash, repeat('0', 64));
{stamp}
    NEW.payload     := coalesce(NEW.payload, '{{}}'::jsonb);
    NEW.hash        := primitives.event_hash(NEW.prev_hash, NEW.seq, NEW.kind, NEW.memory_id,
                                             NEW.actor, NEW.payload, NEW.occurred_at);
    RETURN NEW;
END
$fn$""")


_WALL_STAMP = sql.SQL("    NEW.occurred_at := coalesce(NEW.occurred_at, now());")

_SEEDED_STAMP = sql.SQL("""\
    IF seed IS NULL THEN
        NEW.occurred_at := coalesce(NEW.occurred_at, now());
    ELSE
        NEW.occurred_at := {at};
    END IF;""")

_SEEDED_ID = sql.SQL("""
    IF seed IS NOT NULL AND (NEW.event_id IS NULL
                             OR substr(NEW.event_id::text, 15, 1) <> '8') THEN
        NEW.event_id := {uuid}(seed || ':event:' || NEW.seq::text);
    END IF;""")


def chain_function_sql(tables: Tables, spec: AgentSpec | None = None) -> sql.Composed:
    """``CREATE OR REPLACE FUNCTION <schema>.<prefix>_chain_event()``: the journal's chain trigger.

    A BEFORE INSERT row trigger on ``<prefix>_memory_events`` that sets ``seq``,
    ``prev_hash`` and ``hash`` per tenant, exactly as ``primitives.chain_event`` does
    (``primitives.verify_chain`` checks either), with the names compiled in. For a
    deterministic ``spec``, inside a job it also sets the seeded ``occurred_at`` and
    ``event_id`` (:mod:`primitives.compile._seeded`).
    """
    parts: dict[str, sql.Composable] = {
        "declare": sql.SQL(""), "select": sql.SQL(""), "into": sql.SQL(""),
        "stamp": _WALL_STAMP}
    if spec is not None and _seeded.seeded(spec):
        stamp: sql.Composable = (
            _SEEDED_STAMP.format(at=_seeded.next_time_sql(tables))
            if spec.determinism.clock == "ticks" else _WALL_STAMP)
        if spec.determinism.ids == "seeded":
            stamp = sql.Composed([stamp, _SEEDED_ID.format(uuid=_seeded.uuid_fn(tables))])
        parts = {
            "declare": sql.SQL(
                "\n    last_at   timestamptz;\n    last_kind text;\n"
                "    seed      text := nullif(pg_catalog.current_setting({}, true), '');"
            ).format(sql.Literal(_seeded.SEED_SETTING)),
            "select": sql.SQL(", e.occurred_at, e.kind"), "into": sql.SQL(", last_at, last_kind"),
            "stamp": stamp}
    return _CHAIN_FUNCTION.format(
        function=tables.chain_function,
        tenant=tables.tenant,
        tenant_name=sql.Literal(tables.tenant_column),
        journal=tables.events.ident,
        **parts,
    )


def revoke_function_sql(function: sql.Identifier) -> sql.Composed:
    """``REVOKE ALL ON FUNCTION f() FROM PUBLIC``: a trigger function is for its trigger only."""
    return sql.SQL("REVOKE ALL ON FUNCTION {}() FROM PUBLIC").format(function)


def events_table(tables: Tables, *, embedding: bool = False,
                 spec: AgentSpec | None = None) -> TableDef:
    """``<prefix>_memory_events``: the append-only, per-tenant hash-chained audit journal."""
    t, name = tables.tenant_column, tables.object_name
    tenant = sql.Identifier(t)
    columns = (
        tenant_column(tables),
        Column("seq", BIGINT, not_null=True),
        Column("event_id", UUID, not_null=True, default=RANDOM_UUID),
        Column("prev_hash", TEXT, not_null=True),
        Column("hash", TEXT, not_null=True),
        Column("kind", TEXT, not_null=True),
        Column("memory_id", UUID),
        Column("actor", TEXT),
        Column("payload", JSONB, not_null=True, default=EMPTY_JSONB),
        _ts("occurred_at", now=True),
    )
    indexes = (
        Index(name("memory_events_event_id_key"), "btree",
              (tenant, sql.Identifier("event_id")), t, unique=True),
        Index(name("memory_events_memory_idx"), "btree",
              (tenant, sql.Identifier("memory_id"), sql.Identifier("seq")), t,
              where=sql.SQL("memory_id IS NOT NULL")),
        # Events by kind for the audit views (sanitized, erased, ...). Nearly every event is
        # an observation, which no query looks up by kind: those stay out of the index, so
        # the write path does not pay for an entry per event.
        Index(name("memory_events_kind_rare_idx"), "btree",
              (tenant, sql.Identifier("kind"), sql.Identifier("seq")), t,
              where=sql.SQL("kind <> {}").format(sql.Literal(OBSERVED_EVENT_KIND)),
              replaces=name("memory_events_kind_idx")),
    )
    chain = Trigger("primitives_chain_event", "BEFORE", "INSERT", "ROW", tables.chain_function)
    return TableDef(
        table=tables.events,
        columns=columns,
        constraints=(primary_key(name("memory_events_pkey"), (t, "seq")),),
        indexes=indexes,
        triggers=(chain, *append_only_triggers()),
        app_privileges=("SELECT", "INSERT"),
        comment=(
            f"Audit journal of agent '{tables.agent}': one event per memory change, written in "
            f"the same transaction. Hash-chained per {t} (seq, prev_hash, hash set by "
            f"{tables.chain_function_name}); UPDATE, DELETE and TRUNCATE are refused."
        ),
        functions=(
            (f"chain function {tables.chain_function_name}", chain_function_sql(tables, spec)),
            (f"chain function {tables.chain_function_name}: not callable by PUBLIC",
             revoke_function_sql(tables.chain_function)),
            # erasure writes the row and its journal event: the journal must exist first
            *erase_functions(tables, embedding=embedding),
        ),
    )


def action_links_table(tables: Tables) -> TableDef:
    """``<prefix>_action_links``: action -> the memory rows that justified it (append-only)."""
    t, name = tables.tenant_column, tables.object_name
    columns = (
        tenant_column(tables),
        Column("action_id", TEXT, not_null=True),
        Column("memory_id", UUID, not_null=True),
        Column("kind", TEXT, not_null=True),
        _ts("created_at", now=True),
    )
    constraints = (
        primary_key(name("action_links_pkey"), (t, "action_id", "memory_id")),
        foreign_key(name("action_links_memory_fkey"), (t, "memory_id"),
                    tables.memories, (t, "id")),
    )
    return TableDef(
        table=tables.action_links,
        columns=columns,
        constraints=constraints,
        indexes=(Index(name("action_links_memory_idx"), "btree",
                       (sql.Identifier(t), sql.Identifier("memory_id")), t),),
        triggers=append_only_triggers(),
        app_privileges=("SELECT", "INSERT"),
        comment=(
            f"Memory basis of each action of agent '{tables.agent}'. Append-only; a linked "
            "memory row can never be hard-deleted (primitives.guard_memory_delete)."
        ),
    )


def scopes_table(spec: AgentSpec, tables: Tables) -> TableDef:
    """``<prefix>_scopes``: open and closed instances of each tier's scope (a run, a session)."""
    t, name = tables.tenant_column, tables.object_name
    columns = (
        tenant_column(tables),
        Column("tier", TEXT, not_null=True),
        Column("scope_id", TEXT, not_null=True),
        _ts("opened_at", now=True),
        _ts("last_activity_at", now=True),
        _ts("closed_at"),
    )
    constraints = (
        primary_key(name("scopes_pkey"), (t, "tier", "scope_id")),
        check(name("scopes_tier_check"),
              sql.SQL("tier IN ({})").format(in_list(spec.tier_names))),
    )
    return TableDef(
        table=tables.scopes,
        columns=columns,
        constraints=constraints,
        indexes=(Index(name("scopes_open_idx"), "btree",
                       (sql.Identifier(t), sql.Identifier("tier"),
                        sql.Identifier("last_activity_at")), t,
                       where=sql.SQL("closed_at IS NULL")),),
        app_update_columns=("last_activity_at", "closed_at"),
        comment=f"Scope instances (runs, sessions, jobs) of agent '{tables.agent}' by tier.",
    )


def promotions_table(tables: Tables) -> TableDef:
    """``<prefix>_promotions``: idempotency ledger, one row per (rule, source) promoted."""
    t, name = tables.tenant_column, tables.object_name
    columns = (
        tenant_column(tables),
        Column("rule", TEXT, not_null=True),
        Column("source_id", UUID, not_null=True),
        Column("target_id", UUID),
        _ts("promoted_at", now=True),
    )
    return TableDef(
        table=tables.promotions,
        columns=columns,
        constraints=(primary_key(name("promotions_pkey"), (t, "rule", "source_id")),),
        app_privileges=("SELECT", "INSERT"),
        comment=(
            f"Promotion ledger of agent '{tables.agent}': a (rule, source) pair is promoted "
            "at most once, so re-running a boundary is harmless."
        ),
    )

