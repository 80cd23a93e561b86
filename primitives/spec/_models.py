"""The spec language: one typed field per primitive of seed 003, in its order.

Foundational (1-5): anchor, typology, tiers, persistence, retrieval.
Behavioural (6-12): see :mod:`primitives.spec._behavior`.
Discipline (13-15): non-mirror list, sanitization gates, visibility (plus PII, seed 001).
Audit (16): the universal posture.
Seed 001 adds ``determinism``; seed 002 adds ``graph`` and ``retrieval.intents``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import Field, PrivateAttr, field_validator, model_validator

from primitives.spec._behavior import Behavior
from primitives.spec._common import Duration, Name, SpecModel, TierTypologyRef, Typology
from primitives.spec._policies import Policy

__all__ = [
    "LIFECYCLE_EVENTS",
    "SIGNALS",
    "AgentSpec",
    "Anchor",
    "Audit",
    "AuditExemption",
    "Boundary",
    "Capacity",
    "CheckpointerPersistence",
    "Determinism",
    "Discipline",
    "EmbeddingConfig",
    "Escalation",
    "Fusion",
    "Graph",
    "IntentRouting",
    "Lexical",
    "NonMirror",
    "Persistence",
    "PiiDiscipline",
    "Retention",
    "Retrieval",
    "SanitizationGate",
    "Signal",
    "StoreLimits",
    "StorePersistence",
    "Tier",
    "Visibility",
]

LifecycleEvent = Literal[
    "interaction_end",
    "conversation_end",
    "thread_close",
    "cycle_end",
    "run_end",
    "session_end",
    "job_end",
]
LIFECYCLE_EVENTS: tuple[str, ...] = get_args(LifecycleEvent)

Signal = Literal["semantic", "lexical", "envelope", "recency", "graph"]
SIGNALS: tuple[str, ...] = get_args(Signal)


# 1. Anchor ---------------------------------------------------------------------------------------
class Anchor(SpecModel):
    """The scope tuple that keys the agent's memory. The first key is the tenant (RLS) key."""

    keys: list[Name] = Field(min_length=1, max_length=4)
    required_at_write: list[Name]
    nullable_for_cross_scope: list[Name] = Field(default_factory=list)
    provenance: list[Name] = Field(
        default_factory=list,
        description="contextual keys recorded with each write but not part of the scope",
    )
    renamed_from: dict[Name, Name] = Field(
        default_factory=dict,
        description="declared renames, new key: old key; `primitives migrate` renames the "
        "column in every table instead of refusing a key that disappeared",
    )

    @model_validator(mode="after")
    def _renames_name_keys(self) -> Anchor:
        for new, old in self.renamed_from.items():
            if new not in self.keys:
                raise ValueError(f"renamed_from: '{new}' is not one of the anchor keys")
            if old in self.keys:
                raise ValueError(f"renamed_from: '{old}' is still an anchor key")
        return self

    aliases: dict[Name, Name] = Field(
        default_factory=dict,
        description="other names accepted for anchor keys wherever an anchor is given "
        "(`config['configurable']`, tools, store namespace templates), e.g. "
        "`langgraph_user_id: user_id`",
    )

    @model_validator(mode="after")
    def _aliases_name_keys(self) -> Anchor:
        for alias, key in self.aliases.items():
            if key not in self.keys:
                raise ValueError(f"alias '{alias}' names '{key}', which is not an anchor key "
                                 f"({', '.join(self.keys)})")
            if alias in self.keys:
                raise ValueError(f"alias '{alias}' is itself an anchor key")
        return self

    @property
    def tenant_key(self) -> str:
        return self.keys[0]

    def canonical(self, name: str) -> str:
        """The anchor key ``name`` stands for (itself when it is no alias)."""
        return self.aliases.get(name, name)


# 3. Tiers ----------------------------------------------------------------------------------------
class Escalation(SpecModel):
    from_: Name = Field(alias="from")
    to: Name


class Boundary(SpecModel):
    """What ends a tier's scope: exactly one of a lifecycle event, a scope change, an escalation."""

    lifecycle: LifecycleEvent | None = None
    scope_change: Name | None = None
    anchor_escalation: Escalation | None = None
    idle_after: Duration | None = Field(
        default=None, description="the scope also ends after this much inactivity"
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> Boundary:
        given = [k for k in ("lifecycle", "scope_change", "anchor_escalation") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(
                "a boundary is exactly one of: lifecycle, scope_change, anchor_escalation"
                + (f" (got {', '.join(given)})" if given else "")
            )
        return self

    @property
    def kind(self) -> str:
        for name in ("lifecycle", "scope_change", "anchor_escalation"):
            if getattr(self, name) is not None:
                return name
        raise AssertionError("validated boundary has a kind")


class Retention(SpecModel):
    """Four-state retention of the persistent tier: ACTIVE, REFERENCED, ORPHANED, TOMBSTONED."""

    policy: Name | None = Field(default=None, description="a policies/ file of kind 'retention'")
    orphan_after: Duration | None = Field(
        default=None, description="an unreferenced, unretrieved row becomes ORPHANED after this"
    )
    tombstone_orphans_after: Duration | None = None
    audit_retention: Duration | None = Field(
        default=None, description="how long journal events are kept immutable at minimum"
    )
    deletion_requires: list[Name] = Field(default_factory=list)


class Capacity(SpecModel):
    """What a tier may hold (seed 001 §1.B, §9): rows and/or tokens per tenant or per scope."""

    rows: int | None = Field(default=None, ge=1, description="live rows at most")
    tokens: int | None = Field(
        default=None, ge=1,
        description="estimated tokens of the live rows' content at most (ceil(characters / 4)"
        ", the context budget's estimate); seed 001's CWM token_estimate is 512")
    per: Literal["tenant", "scope"] = Field(
        default="tenant", description="counted per tenant, or per scope (a job, a session)")
    on_full: Literal["refuse", "evict"] = Field(
        default="refuse",
        description="refuse: a write past the capacity is refused with STORAGE_FULL in the "
        "write's own statement and nothing stored is touched; evict: after each tick's "
        "promotions, the rows over the capacity leave the tier, fewest ticks left first "
        "(an `evicted` event each); only on a tier that a references promotion fills")

    @model_validator(mode="after")
    def _bounded(self) -> Capacity:
        if self.rows is None and self.tokens is None:
            raise ValueError("a capacity names rows, tokens or both")
        return self


class Tier(SpecModel):
    name: Name
    boundary: Boundary
    persistent: bool = False
    ttl_ticks: int | None = Field(default=None, ge=1, description="seed 001: TTL in workflow ticks")
    placement: Literal["store", "checkpointer"] = "store"
    retention: Retention | None = None
    capacity: Capacity | None = Field(
        default=None, description="seed 001: what the tier may hold; past it, STORAGE_FULL "
        "or eviction")
    description: str | None = None
    renamed_from: Name | None = Field(
        default=None,
        description="the tier's earlier name: `primitives migrate` moves its rows and "
        "constraints to the new name instead of refusing a tier that disappeared",
    )


# 4. Persistence ----------------------------------------------------------------------------------
class CheckpointerPersistence(SpecModel):
    enabled: bool = True
    schema_: Name = Field(default="langgraph", alias="schema")


class StoreLimits(SpecModel):
    """Bounds on memory rows: no wide text columns (seed 003, non-mirror)."""

    content_chars: int = Field(default=4000, ge=16, le=100_000)
    value_bytes: int = Field(default=32_768, ge=256, le=1_048_576)
    envelope_bytes: int = Field(default=8_192, ge=256, le=262_144)
    key_chars: int = Field(default=512, ge=36, le=4096)
    namespace_labels: int = Field(default=16, ge=1, le=256)
    label_chars: int = Field(default=256, ge=8, le=4096)
    tags: int = Field(default=64, ge=0, le=1024)
    tag_chars: int = Field(default=256, ge=8, le=4096)
    source_chars: int = Field(default=512, ge=16, le=8192)
    scope_id_chars: int = Field(default=256, ge=8, le=4096)
    json_depth: int = Field(default=32, ge=2, le=512)


class NamespaceTemplate(SpecModel):
    """A store namespace shape mapped onto the anchor and a tier (e.g. LangMem's
    ``("memories", "{langgraph_user_id}")``)."""

    template: list[str] = Field(
        min_length=1,
        description="segments: a literal, or `{name}` where name is an anchor key or an alias "
        "of one (the tenant key must appear); a namespace that starts with these segments "
        "addresses this tier, and its further segments are free",
    )
    tier: Name = Field(description="the persistent, store-placed tier its items live in")
    typology: Typology | None = Field(
        default=None, description="the typology of its items; needed when the tier holds several")


class StorePersistence(SpecModel):
    schema_: Name = Field(alias="schema")
    prefix: Name
    limits: StoreLimits = Field(default_factory=StoreLimits)
    namespaces: list[NamespaceTemplate] = Field(
        default_factory=list,
        description="namespace templates the store accepts beside its layout "
        "`(anchor..., tier, ...)`; the first that fits a namespace wins",
    )


class Persistence(SpecModel):
    checkpointer: CheckpointerPersistence = Field(default_factory=CheckpointerPersistence)
    store: StorePersistence


# 5. Retrieval ------------------------------------------------------------------------------------
class Fusion(SpecModel):
    method: Literal["rrf", "weighted"] = Field(
        default="rrf",
        description="rrf: sum of weight / (k + rank) per signal; weighted: sum of weight x the "
        "signal's score min-max normalized over the rows it returned")
    k: int = Field(default=5, ge=1, description=(
        "the rrf constant: a small k trusts each signal's first ranks (measured on LoCoMo "
        "dev, semantic + BM25 lexical, recall@10: k 5 0.756, k 20 0.693, k 60 0.641; "
        "docs/retrieval.md)"))
    weights: dict[Signal, float] = Field(default_factory=dict)


class EmbeddingConfig(SpecModel):
    model: str = "BAAI/bge-small-en-v1.5"
    dims: int = Field(default=384, ge=8, le=4000)
    query_instruction: str | None = "Represent this sentence for searching relevant passages: "
    text: Literal["content", "content_with_context"] = Field(
        default="content",
        description="what is embedded: the content alone, or after its event time "
        "(`[1:56 pm on 8 May, 2023] <content>`)",
    )
    envelope_keys: list[Name] = Field(
        default_factory=list,
        description="envelope keys whose values are embedded after the content, each as "
        "` (key: value)` (e.g. the message a turn answers); stored with the row, so "
        "re-embedding gives the same vector; neither shown as content nor searched lexically",
    )
    embed: Literal["inline", "deferred"] = Field(
        default="inline",
        description="when a write's vector is made: `inline` embeds it inside the write "
        "(the model runs on the hot path; the row is found semantically as soon as it "
        "commits); `deferred` stores the row without a vector (found at once by the "
        "lexical, envelope and recency signals) and leaves the model to a worker: "
        "`mem.embed_pending()`, `engine.embed_pending()`, the engine's background worker or "
        "`primitives maintain --embed`, which embed waiting rows in batches; a search reports "
        "how many rows still wait (`pending_embeddings`)",
    )

    @field_validator("envelope_keys")
    @classmethod
    def _each_key_once(cls, keys: list[str]) -> list[str]:
        repeated = sorted({k for k in keys if keys.count(k) > 1})
        if repeated:
            raise ValueError(f"envelope key(s) listed more than once: {', '.join(repeated)}")
        return keys


Intent = Literal["why", "when", "who", "what", "general"]
EdgeType = Literal["temporal", "causal", "entity", "derived_from", "supersedes"]
EntityType = Literal["person", "project", "organization", "place", "concept", "tool"]


def _seed_002_traversal() -> dict[Intent, list[EdgeType]]:
    # Seed 002 §11.2: causal BFS for why, temporal chain for when, entity lookup otherwise.
    return {"why": ["causal"], "when": ["temporal"], "who": ["entity"], "what": ["entity"],
            "general": ["entity"]}


class IntentRouting(SpecModel):
    """Algorithmic intent routing (seed 002 §11): signal weights chosen by query intent."""

    classifier: Literal["keyword", "embedding"] = "keyword"
    threshold: float = Field(default=0.45, ge=0, le=1)
    routes: dict[Intent, dict[Signal, float]]
    traverse: dict[Intent, list[EdgeType]] = Field(
        default_factory=_seed_002_traversal,
        description="edge types the graph signal follows for each intent (default: seed 002 §11.2)",
    )


class Reranker(SpecModel):
    model: str = "BAAI/bge-reranker-base"
    top_n: int = Field(default=20, ge=1)


class Abstain(SpecModel):
    """'I don't know' as a first-class answer: below this fused score nothing is returned."""

    min_fused_score: float = Field(ge=0)
    message: str = "I don't know."


class Lexical(SpecModel):
    """How the lexical signal matches and ranks (PostgreSQL full-text search)."""

    ranking: Literal["websearch", "bm25", "token_overlap"] = Field(
        default="bm25",
        description="bm25: any query word may match, ranked by BM25 (IDF within the tenant); "
        "websearch: every query word must match (websearch_to_tsquery syntax), ranked by "
        "ts_rank_cd (LoCoMo dev recall@10 alone: bm25 0.644, websearch 0.098); "
        "token_overlap (seed 001 §3): lower-cased tokens split on non-alphanumerics, score = "
        "the entry's tokens that are query terms / the entry's token count, ranked by score, "
        "then event time (newest first), then id; no fusion, no vectors, the same order on "
        "every run",
    )
    k1: float = Field(default=0.9, ge=0, description="BM25 term-frequency saturation (LoCoMo "
                      "dev: 0.9 with b 0.4 measured 0.644, the textbook 1.2 / 0.75 0.633)")
    b: float = Field(default=0.4, ge=0, le=1, description="BM25 document-length normalisation")


class Retrieval(SpecModel):
    signals: list[Signal] = Field(min_length=1)
    lexical: Lexical = Field(default_factory=Lexical)
    fusion: Fusion = Field(default_factory=Fusion)
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    scope: dict[Name, float] = Field(
        default_factory=dict, description="per-tier weight; tiers not listed are not searched"
    )
    reranker: Reranker | None = None
    intents: IntentRouting | None = None
    text_search_config: Name = "english"
    semantic_exact_below: Annotated[int, Field(ge=0)] | Literal["auto"] = Field(
        default="auto",
        description="tenants with fewer rows use an exact vector scan, larger ones the HNSW "
        "index; auto: sqrt(30 x candidate cap x rows of the table), at least 1,000 (about "
        "12,000 at 100,000 rows and 39,000 at a million, where the two paths were measured to "
        "cross)",
    )
    default_limit: int = Field(default=10, ge=1, le=1000)
    abstain: Abstain | None = None

    @model_validator(mode="after")
    def _deferred_rows_are_found_lexically(self) -> Retrieval:
        # A deferred row has no vector until the worker runs; only a text signal finds it
        # for a query meanwhile.
        if self.embedding.embed == "deferred" and "lexical" not in self.signals:
            raise ValueError(
                "embedding.embed: deferred leaves new rows without a vector until the "
                "embedding worker runs; add lexical to retrieval.signals so a query finds "
                "them meanwhile")
        return self


# Graph (seed 002) --------------------------------------------------------------------------------
class Graph(SpecModel):
    edges: list[EdgeType] = Field(min_length=1)
    entity_types: list[EntityType] = Field(default_factory=list)
    protect_entity_mentions_over: int | None = Field(default=None, ge=1)
    max_depth: int = Field(default=3, ge=1, le=8)
    walk_from: int = Field(
        default=5, ge=0, le=100,
        description="the graph signal also walks from this many top rows of each other query "
        "signal (semantic, lexical), besides the memories mentioning an entity the query names",
    )
    temporal_edges_on_write: bool = True
    confidence: dict[
        Literal["user", "extraction", "inference", "confirmed", "contradicted"], float
    ] = Field(default_factory=dict, description="initial confidence by source (seed 002 §12.1)")
    reinforcement: float | None = Field(default=None, ge=0, le=1)


# 13-15. Discipline -------------------------------------------------------------------------------
Defense = Literal["reference_only", "trigram_trigger", "workshop_discipline"]


class NonMirror(SpecModel):
    category: Name
    canonical_source: str | None = Field(
        default=None, description="schema.table.column holding the canonical text, if any"
    )
    defense: Defense = Field(default="reference_only", description="the primary defense")
    backstop: list[Defense] = Field(
        default_factory=list,
        description="defense-in-depth behind the primary one (seed 003: the Operations Agent "
        "keeps workshop discipline primary with a trigram trigger as backstop)",
    )
    canonical_key: Name = Field(
        default="id",
        description="the canonical table's column naming a row (its primary key or a unique "
        "column): a refused copy names the row by it, and references point to it",
    )
    canonical_version: Name | None = Field(
        default=None,
        description="the canonical table's column holding the row's version: a reference pins "
        "it and reads stale once the row moves on (without one, the sha256 of the canonical "
        "text is pinned instead)",
    )
    similarity_threshold: float = Field(
        default=0.6, gt=0, le=1,
        description="pg_trgm word_similarity(canonical text, written content) at or above "
        "which a write is refused as a copy (trigram_trigger, and reference_only with a "
        "canonical_source)",
    )
    note_chars: int = Field(
        default=500, ge=1,
        description="reference_only, workshop_discipline: the most characters of content a "
        "memory referencing a row of this category may hold (a note about the row, never "
        "its body); a longer one is refused when the reference is written",
    )

    @property
    def canonical_table(self) -> tuple[str, str] | None:
        """``(schema, table)`` of :attr:`canonical_source`, or ``None`` without one."""
        if self.canonical_source is None:
            return None
        schema, table, _ = self.canonical_source.split(".")
        return schema, table

    @property
    def canonical_column(self) -> str | None:
        """The column of :attr:`canonical_source` holding the canonical text."""
        return None if self.canonical_source is None else self.canonical_source.split(".")[2]

    @property
    def trigram_guarded(self) -> bool:
        """The guard compares writes with the canonical text: a ``trigram_trigger`` or
        ``reference_only`` defense (primary or backstop) of a category with a canonical
        source (reference_only: the text may only be referenced, so a copy is refused)."""
        return (("trigram_trigger" in self.defenses or "reference_only" in self.defenses)
                and self.canonical_source is not None)

    @property
    def bounded_notes(self) -> bool:
        """A note referencing the category is bounded by :attr:`note_chars`: its defense or
        a backstop is ``reference_only`` or ``workshop_discipline``."""
        return "reference_only" in self.defenses or "workshop_discipline" in self.defenses

    @property
    def defenses(self) -> list[str]:
        """The primary defense followed by the backstops."""
        return [self.defense, *self.backstop]


class SanitizationGate(SpecModel):
    name: Name
    from_: TierTypologyRef = Field(alias="from")
    to: Name
    strip: list[Name] = Field(default_factory=list)
    transform: Literal["strip_identifiers", "hedge_map", "aggregate_only", "none"] = (
        "strip_identifiers"
    )
    policy: Name | None = None
    keep_if_specific: bool = Field(
        default=True,
        description="an observation that needs the stripped detail to mean anything stays put",
    )
    min_sources: int = Field(
        default=2, ge=1,
        description="aggregate_only: distinct sources of one tenant (the row's source and the "
                    "evidence keys in provenance.corroborated_by) a fact needs to cross",
    )
    min_tenants: int | None = Field(
        default=None, ge=2,
        description="aggregate_only on an event-driven agent: the row is held at write time "
                    "and published by `primitives maintain` once this many distinct tenants "
                    "hold the same normalised content (case and whitespace folded) in the "
                    "gate's `from`; the tenants are then the independent sources and "
                    "min_sources is not counted",
    )


class Visibility(SpecModel):
    rls: Literal["session_var"] = "session_var"
    cross_context: Literal["event_driven", "tool_mediated", "none"] = "none"
    events: list[str] = Field(default_factory=list)
    tools: list[Name] = Field(default_factory=list)
    policy: Name | None = Field(
        default=None, description="a policies/ file of kind 'access' (admin raw reads, auditors)"
    )


PiiCheckpoint = Literal["persistent_write", "promotion", "any_write"]
_PERSISTENT_WRITE: PiiCheckpoint = "persistent_write"


class PiiDiscipline(SpecModel):
    policy: Name = Field(description="a policies/ file of kind 'pii'")
    before: list[PiiCheckpoint] = Field(default_factory=lambda: [_PERSISTENT_WRITE])


class Discipline(SpecModel):
    non_mirror: list[NonMirror] = Field(default_factory=list)
    sanitization: list[SanitizationGate] = Field(default_factory=list)
    visibility: Visibility = Field(default_factory=Visibility)
    pii: PiiDiscipline | None = None

    @model_validator(mode="before")
    @classmethod
    def _plain_categories(cls, data: Any) -> Any:
        # `non_mirror: [world_model_rule_content]` is shorthand for `{category: ...}`.
        if isinstance(data, dict) and isinstance(data.get("non_mirror"), list):
            data = dict(data)
            data["non_mirror"] = [
                {"category": item} if isinstance(item, str) else item for item in data["non_mirror"]
            ]
        return data


# Seed 001 ----------------------------------------------------------------------------------------
class Determinism(SpecModel):
    clock: Literal["wall", "ticks"] = "wall"
    ids: Literal["random", "seeded"] = "random"
    snapshot_hash: Literal["none", "sha256_canonical_json"] = "none"
    replay: Literal["none", "exact"] = "none"
    seed_key: Name | None = Field(default=None, description="anchor or context key holding the seed")


# 16. Audit ---------------------------------------------------------------------------------------
class AuditExemption(SpecModel):
    what: str
    justification: str = Field(min_length=1)


class Audit(SpecModel):
    posture: Literal["default"] = "default"
    exemptions: list[AuditExemption] = Field(default_factory=list)


# The spec ----------------------------------------------------------------------------------------
class AgentSpec(SpecModel):
    """A validated agent memory spec with every default filled in."""

    version: Literal[1]
    agent: Name
    description: str | None = None
    anchor: Anchor
    typology: dict[Name, list[Typology]]
    tiers: list[Tier] = Field(min_length=1, max_length=6)
    persistence: Persistence
    retrieval: Retrieval
    behavior: Behavior = Field(default_factory=Behavior)
    discipline: Discipline = Field(default_factory=Discipline)
    audit: Audit = Field(default_factory=Audit)
    graph: Graph | None = None
    determinism: Determinism = Field(default_factory=Determinism)
    policies: dict[Name, Policy] = Field(
        default_factory=dict, description="filled by the loader: every policy the spec references"
    )
    deviations: list[Deviation] = Field(
        default_factory=list, description="filled by the loader: every justified deviation"
    )
    source: str | None = Field(default=None, description="filled by the loader: the spec's path")
    _declared: Any = PrivateAttr(default=None)
    """Set by the loader: the spec's YAML and where each key is written (see ``unenforced``)."""
    _pii_guard: Any = PrivateAttr(default=None)
    """Built on first use by ``primitives.discipline.pii_guard``."""

    @model_validator(mode="before")
    @classmethod
    def _audit_shorthand(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("audit") == "default":
            data = dict(data)
            data["audit"] = {"posture": "default"}
        return data

    @model_validator(mode="after")
    def _store_namespaces_fit(self) -> AgentSpec:
        for n, entry in enumerate(self.persistence.store.namespaces):
            where = f"persistence.store.namespaces[{n}]"
            tier = next((t for t in self.tiers if t.name == entry.tier), None)
            if tier is None or tier.placement != "store" or not tier.persistent:
                raise ValueError(f"{where}: '{entry.tier}' is not a persistent, store-placed "
                                 "tier of this spec")
            kinds = self.typology.get(entry.tier, [])
            if entry.typology is not None and entry.typology not in kinds:
                raise ValueError(f"{where}: tier '{entry.tier}' holds {', '.join(kinds)}, "
                                 f"not {entry.typology}")
            if entry.typology is None and len(kinds) > 1:
                raise ValueError(f"{where}: tier '{entry.tier}' holds {', '.join(kinds)}: "
                                 "name the typology")
            if entry.template[0].startswith("{"):
                raise ValueError(f"{where}: the first segment is a literal (a template that "
                                 "starts with a value would take every namespace)")
            named = [self.anchor.canonical(seg[1:-1]) for seg in entry.template
                     if seg.startswith("{") and seg.endswith("}")]
            unknown = [k for k in named if k not in self.anchor.keys]
            if unknown or len(set(named)) != len(named) or self.anchor.tenant_key not in named:
                raise ValueError(f"{where}: each {{name}} is a different anchor key or alias "
                                 f"({', '.join(self.anchor.keys)}; aliases: "
                                 f"{', '.join(self.anchor.aliases) or 'none'}) and the tenant "
                                 f"key '{self.anchor.tenant_key}' is one of them")
        return self

    @property
    def persistent_tier(self) -> Tier:
        return next(t for t in self.tiers if t.persistent)

    @property
    def tier_names(self) -> list[str]:
        return [t.name for t in self.tiers]

    def tier(self, name: str) -> Tier:
        for t in self.tiers:
            if t.name == name:
                return t
        raise KeyError(name)

    @property
    def typologies(self) -> list[str]:
        """Every typology used by some tier, in canonical order."""
        used = {t for kinds in self.typology.values() for t in kinds}
        return [t for t in get_args(Typology) if t in used]


class Deviation(SpecModel):
    """A behavioural value that differs from its typology default, with its justification."""

    primitive: str
    subject: str
    field: str
    default: Any
    value: Any
    justification: str


AgentSpec.model_rebuild()
