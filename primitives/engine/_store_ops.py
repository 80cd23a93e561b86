"""Key-value items over memory rows: the engine operations behind the LangGraph store.

An item is the current version of ``(tier, namespace, key)``: the row that holds the
current-key slot and is active and unexpired. Writes go through :func:`core.observe`
(write policy, limits, supersession, journal); deletes are tombstones
(:func:`core.change_state`), never a DELETE. Store metadata lives in
``provenance.store``: ``created_at`` (the first write of the key, kept across updates),
``ttl_minutes`` (expiry pushed back on write and, when asked, on read), ``index``
(``false``: ranked by no signal, listed after a query search's ranked hits) and
``vectors`` (one packed vector per indexed text, when there are several: :attr:`ItemPut.texts`).

The operations are generators like every core operation, so the sync and async engines
run them unchanged (``TenantMemory.item_batch`` / ``AsyncTenantMemory.item_batch``).

Example::

    with engine.tenant({"workspace_id": "ws-1"}) as mem:
        mem.item_batch([ItemPut("workspace", "procedural", ("procedural",), "style",
                                {"text": "short answers"}, content="short answers")])
"""

from __future__ import annotations

import base64
import json
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import sql
from psycopg.types.json import Jsonb

from primitives.engine import _core as core
from primitives.engine import _queries as q
from primitives.engine._core import Context, Op, Step
from primitives.engine._ids import new_uuid
from primitives.engine._input import bounded_labels, bounded_text, check_json
from primitives.engine._records import MEMORY_COLUMNS, Hit, Memory, SearchResult
from primitives.errors import GovernanceError, PolicyViolation, TenancyError
from primitives.lifecycle._embed import pending_count_statement
from primitives.retrieval import Restriction
from primitives.spec import AgentSpec

__all__ = [
    "FILTER_OPERATORS",
    "ItemGet",
    "ItemNamespaces",
    "ItemOp",
    "ItemPut",
    "ItemSearch",
    "StoredItem",
    "confirm_memory",
    "exempt_memory",
    "filter_conditions",
    "memory_stats",
    "put_items",
    "run_item_ops",
]

FILTER_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
MAX_SEARCH_CANDIDATES = 1000
# A store query search fetches at least this many fused candidates before ordering them by
# meaning, so an item the aids (recency...) ranked low but the content signals rank first
# is among them.
STORE_CANDIDATES = 50
# The signals that judge what an item says: a store query search orders by them first.
MEANING_SIGNALS = ("semantic", "lexical")
"""The most items one query search returns, offset included (the engine's own limit)."""

Condition = tuple[str, str, Any]


@dataclass(frozen=True)
class StoredItem:
    """One item: its memory row, when the key was first written, its TTL and search score.

    For a query search: ``score`` is the item's relevance (:func:`relevance`), ``fused``
    the engine's fused score, ``ranks`` / ``scores`` each signal's rank and score."""

    memory: Memory
    created_at: datetime
    ttl_minutes: float | None
    expired: bool
    indexed: bool
    score: float | None = None
    fused: float | None = None
    ranks: Mapping[str, int] | None = None
    scores: Mapping[str, float] | None = None
    vectors: tuple[tuple[float, ...], ...] = ()
    """One vector per indexed text, when the item's content came from several
    (:attr:`ItemPut.texts`); a query's semantic score is the best of them."""

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> StoredItem:
        n = len(MEMORY_COLUMNS)
        created, ttl, expired, indexed, vectors = row[n:n + 5]
        return cls(Memory.from_row(tuple(row[:n])), created, ttl, bool(expired), bool(indexed),
                   vectors=tuple(unpack_vector(v) for v in vectors or ()))


def pack_vector(vector: Sequence[float]) -> str:
    """A vector as base64 of little-endian float32 (how an item's per-text vectors are kept
    in its row's ``provenance.store.vectors``: a quarter of their JSON size).

    >>> unpack_vector(pack_vector([0.5, -1.0]))
    (0.5, -1.0)
    """
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


def unpack_vector(packed: str) -> tuple[float, ...]:
    raw = base64.b64decode(packed)
    return struct.unpack(f"<{len(raw) // 4}f", raw)


@dataclass(frozen=True)
class ItemGet:
    tier: str
    namespace: tuple[str, ...]
    key: str
    refresh_ttl: bool = True
    expired: bool = False
    """Return the item even when it has expired (LangGraph's ``omit_expired=False``)."""


@dataclass(frozen=True)
class ItemPut:
    """Write (``value`` given) or tombstone (``value=None``) one item.

    ``namespace`` is what follows the tier (stored in the row's ``namespace``); ``content``
    is the text the retrieval signals read.
    """

    tier: str
    typology: str
    namespace: tuple[str, ...]
    key: str
    value: Mapping[str, Any] | None
    content: str = ""
    scope_id: str | None = None
    ttl_minutes: float | None = None
    indexed: bool = True
    context: Mapping[str, str] | None = None
    """What goes into the item's embedded text after its content (the value's
    ``embed_context``), kept in the row's envelope (:data:`core.EMBED_CONTEXT`)."""
    texts: tuple[str, ...] = ()
    """The texts the content joins when it came from several (index paths): with an
    embedder, each is also embedded alone, the vectors kept with the row
    (``provenance.store.vectors``), and a query's semantic score for the item is the best
    of them, as a store that embeds each indexed field does."""


@dataclass(frozen=True)
class ItemSearch:
    """Items under ``prefix`` (segments after the tier) of one tier, or of every tier.

    Without ``query``: newest update first. With it: the engine's hybrid search, then the
    prefix, filter and ``index=False`` exclusion, in the search's order.
    """

    tier: str | None
    prefix: tuple[str, ...] = ()
    conditions: tuple[Condition, ...] = ()
    limit: int = 10
    offset: int = 0
    query: str | None = None
    refresh_ttl: bool = True
    expired: bool = False
    """A listing (no ``query``) includes expired items; a query search never does."""


@dataclass(frozen=True)
class ItemNamespaces:
    """Distinct ``(tier, namespace)`` pairs of active items (of one tier, or all)."""

    tier: str | None = None
    expired: bool = False
    """Count expired items too."""


ItemOp = ItemGet | ItemPut | ItemSearch | ItemNamespaces


def filter_conditions(filter: Mapping[str, Any] | None) -> tuple[Condition, ...]:
    """Normalise a BaseStore filter (``{"field": value}`` or ``{"field": {"$op": value}}``).

    Raises :class:`PolicyViolation` for an unknown operator, or an ordering operator whose
    operand is not a number or a string.
    """
    out: list[Condition] = []
    for field, spec in (filter or {}).items():
        if not isinstance(field, str):
            raise PolicyViolation(f"filter fields are strings, got {field!r}")
        if isinstance(spec, Mapping) and spec and all(str(k).startswith("$") for k in spec):
            for operator, operand in spec.items():
                out.append(_condition(field, str(operator), operand))
        else:
            out.append((field, "$eq", spec))
    return tuple(out)


def _condition(field: str, operator: str, operand: Any) -> Condition:
    if operator not in FILTER_OPERATORS:
        raise PolicyViolation(f"filter on '{field}': unsupported operator '{operator}'; "
                              f"supported: {', '.join(FILTER_OPERATORS)}")
    if operator in ("$eq", "$ne"):
        return field, operator, operand
    number = isinstance(operand, int | float) and not isinstance(operand, bool)
    if number and not math.isfinite(operand):
        raise PolicyViolation(f"filter on '{field}': {operator} needs a finite number")
    if not (number or isinstance(operand, str)):
        raise PolicyViolation(f"filter on '{field}': {operator} compares numbers or strings, "
                              f"got {type(operand).__name__}")
    return field, operator, operand


def _filter_params(conditions: Sequence[Condition], prefix: str = "") -> dict[str, Any]:
    params: dict[str, Any] = {}
    for i, (field, operator, operand) in enumerate(conditions):
        params[f"{prefix}f{i}"] = field
        params[f"{prefix}v{i}"] = Jsonb(operand) if operator in ("$eq", "$ne") else operand
    return params


def _anchor_params(ctx: Context) -> dict[str, Any]:
    return {**ctx.anchor.as_dict(), "tenant": ctx.tenant}


# operations -------------------------------------------------------------------------------------
def get_item(ctx: Context, op: ItemGet, *, final: bool = False) -> Op[StoredItem | None]:
    """One item by key. ``final``: the get is the whole transaction, so its read is ``last``
    (a TTL refresh after it is an independent write of its own)."""
    row = yield Step(q.item_get(ctx.tables, op.expired),
                     {**_anchor_params(ctx), "tier": op.tier, "namespace": list(op.namespace),
                      "key": op.key}, "one", last=final)
    if row is None:
        return None
    item = StoredItem.from_row(row)
    if op.refresh_ttl:
        yield from _refresh([item], ctx)
    return item


def get_items(ctx: Context, ops: Sequence[ItemGet], *,
              final: bool = False) -> Op[list[StoredItem | None]]:
    """:func:`get_item` of each op, in one statement (:func:`q.item_get_many`); then one
    TTL refresh of the items found that carry a TTL and whose op asks for it."""
    rows = yield Step(q.item_get_many(ctx.tables), {
        **_anchor_params(ctx), "items": Jsonb([
            {"n": n, "tier": op.tier, "namespace": list(op.namespace), "key": op.key}
            for n, op in enumerate(ops)])}, "all", last=final)
    found: list[StoredItem | None] = [None] * len(ops)
    for row in rows:
        found[row[0]] = StoredItem.from_row(row[1:])
    yield from _refresh([item for op, item in zip(ops, found, strict=True)
                         if item is not None and op.refresh_ttl], ctx)
    return found


def put_item(ctx: Context, op: ItemPut) -> Op[None]:
    """Write or tombstone one item (see the module docstring)."""
    check_item_address(ctx, op)
    # The current row is locked (FOR UPDATE): writers of an existing key take turns here,
    # and the first writes of a new key race in core.observe, which supersedes the winner.
    row = yield Step(q.item_by_key(ctx.tables), {
        "tenant": ctx.tenant, "tier": op.tier, "namespace": list(op.namespace),
        "key": op.key}, "one")
    current = StoredItem.from_row(row) if row is not None else None
    if current is not None and (current.expired or not current.memory.active):
        # An expired, archived or invalidated row leaves the key: the next write starts over.
        reason = "expired" if current.expired else f"rewritten after it was {current.memory.state}"
        yield from core.change_state(ctx, "tombstone", current.memory.id,
                                     reason=None, cause=f"store: {reason}")
        current = None
    if op.value is None:
        if current is not None:
            yield from core.change_state(ctx, "tombstone", current.memory.id,
                                         reason=None, cause="store: deleted")
        return None
    memory = yield from core.observe(
        ctx, op.tier, op.content, typology=op.typology, key=op.key, namespace=op.namespace,
        value=op.value, scope_id=op.scope_id,
        envelope={core.EMBED_CONTEXT: dict(op.context)} if op.context else None)
    meta: dict[str, Any] = {}
    if current is not None:
        meta["created_at"] = current.created_at.isoformat()
    if op.ttl_minutes is not None:
        meta["ttl_minutes"] = float(op.ttl_minutes)
    if not op.indexed:
        meta["index"] = False
    unchanged = current is not None and memory.id == current.memory.id
    if len(op.texts) > 1 and op.indexed and ctx.embeds:
        assert ctx.embedder is not None
        packed = [pack_vector(v) for v in current.vectors] if (
            unchanged and current is not None) else []
        if not packed:
            packed = [pack_vector(v) for v in (yield core.Embed(ctx.embedder, op.texts))]
        if sum(map(len, packed)) <= ctx.spec.persistence.store.limits.value_bytes // 2:
            meta["vectors"] = packed  # else the joined text's vector alone stands
    had_ttl = current is not None and current.ttl_minutes is not None
    # An unchanged value writes nothing, except to set, push back or clear its expiry.
    if (had_ttl or op.ttl_minutes is not None) if unchanged else bool(meta):
        yield Step(q.set_item_meta(ctx.tables), {
            "tenant": ctx.tenant, "id": memory.id, "meta": Jsonb(meta),
            "ttl_minutes": meta.get("ttl_minutes")})
    return None


def put_items(ctx: Context, ops: Sequence[ItemPut], *,
              one: bool = True) -> Op[list[str] | None]:
    """The puts ``ops`` as one statement that is the whole transaction
    (:func:`~primitives.engine._queries.item_put_many`): the same rows, store metadata and
    journal events as :func:`put_item` run op by op, checked by the same functions before
    anything is sent. Returns each op's outcome (``written``, ``unchanged``, ``lost``: a
    concurrent writer took the new key first, this op wrote nothing; ``fallback``: nothing
    was written), or ``None``, with nothing sent, when an op needs :func:`put_item`: a
    delete, a key given twice, a vector made inline, personal data redacted, an append-only
    typology, a graph that records ``supersedes`` edges, a ticked tier, a temporal edge, or
    the anchor's provenance keys. A single op goes as :func:`q.item_put_one` (``one=False``:
    as the array of :func:`q.item_put_many`, which ``python -m bench.server_ab`` weighs it
    against).

    On a Citus coordinator (``ctx.citus``) it always returns ``None``: the one statement
    inserts from its own results (``INSERT ... SELECT`` in a common table expression), which
    Citus runs through ``COPY`` into the shards, refused under row-level security; the
    general path's writes have their cluster form (:func:`core.observe`)."""
    spec = ctx.spec
    if not ops or ctx.embeds or ctx.anchor.provenance or ctx.citus:
        return None
    graph = spec.graph
    supersedes_edge = (graph is not None and "supersedes" in graph.edges
                       and ctx.tables.edges is not None)
    items: list[dict[str, Any]] = []
    slots: set[tuple[str, tuple[str, ...], str]] = set()
    for n, op in enumerate(ops):
        slot = (op.tier, tuple(op.namespace), op.key)
        if op.value is None or slot in slots:
            return None
        slots.add(slot)
        check_key(ctx, op)  # the value is checked by the write's own checks, next
        w, rest = core._checked_observe(
            ctx, op.tier, op.content, typology=op.typology, key=op.key,
            namespace=op.namespace, value=op.value, scope_id=op.scope_id,
            envelope={core.EMBED_CONTEXT: dict(op.context)} if op.context else None)
        if (w.pii is not None or rest["ttl_ticks"] is not None
                or core.links_to_previous(spec, w.scope_id)
                or core.append_only(spec, w.tier, w.typology) or supersedes_edge):
            return None
        policy = core._conflict_policy(spec, w.typology)
        meta: dict[str, Any] = {}
        if op.ttl_minutes is not None:
            meta["ttl_minutes"] = float(op.ttl_minutes)
        if not op.indexed:
            meta["index"] = False
        items.append({
            "n": n, "id": str(new_uuid()), "sup_event": str(q.new_event_id()),
            "obs_event": str(q.new_event_id()), "tier": w.tier, "typology": w.typology,
            "scope_id": w.scope_id, "namespace": w.namespace, "key": op.key,
            "content": w.content, "value": w.value, "envelope": w.envelope, "tags": w.tags,
            "payload": core.observed_payload(w, op.key, "direct"), "meta": meta,
            "ttl": meta.get("ttl_minutes"), **_conflict_fields(policy)})
        value_json = w.value_json
    scoped = any(item["scope_id"] is not None for item in items)
    resolves = any(item["conflict"] is not None for item in items)
    params: dict[str, Any] = {**ctx.anchor.as_dict(), "tenant": ctx.tenant, "actor": ctx.actor}
    if one and len(items) == 1:  # the common put: its fields as parameters (q.item_put_one)
        statement = q.item_put_one(ctx.tables, scoped=scoped, resolves=resolves)
        params.update(_one_item_params(items[0], value_json))
    else:
        statement = q.item_put_many(ctx.tables, scoped=scoped, resolves=resolves)
        params["items"] = Jsonb(items)
    rows = yield Step(statement, params, "all", last=True)
    outcomes = [outcome for _, outcome in rows]
    if ctx.has_embedding and ctx.deferred:  # the rows wait for the embedding worker
        ctx.left_pending.extend(UUID(item["id"]) for item, outcome in zip(
            items, outcomes, strict=True) if outcome == "written")
    return outcomes


def _one_item_params(item: Mapping[str, Any], value_json: str) -> dict[str, Any]:
    """:func:`put_items`'s item as :func:`q.item_put_one`'s parameters: JSON fields as
    text (the value's canonical JSON, computed by the write's checks, as it is), the
    conflict strategy's fields NULL when the typology has none."""
    conflict = item["conflict"]
    return {
        "put_id": item["id"], "put_sup_event": item["sup_event"],
        "put_obs_event": item["obs_event"], "put_tier": item["tier"],
        "put_typology": item["typology"], "put_scope_id": item["scope_id"],
        "put_namespace": list(item["namespace"]), "put_key": item["key"],
        "put_content": item["content"], "put_value": value_json,
        "put_envelope": core.canonical_json(item["envelope"]), "put_tags": list(item["tags"]),
        "put_payload": json.dumps(item["payload"], separators=(",", ":"), default=str),
        "put_meta": core.canonical_json(item["meta"]), "put_ttl": item["ttl"],
        "put_res_event": item["res_event"],
        "put_conflict": None if conflict is None else json.dumps(conflict),
        "put_invalidate": item.get("invalidate"), "put_archive": item.get("archive"),
        "put_confidence": item.get("confidence"), "put_decay_rate": item.get("decay_rate")}


def _conflict_fields(policy: Any) -> dict[str, Any]:
    """What :func:`core.resolve_conflict` does to a superseded version, as
    :func:`put_items`'s item fields (nothing when the typology has no strategy)."""
    if policy is None:
        return {"res_event": None, "conflict": None}
    validity = policy.strategy == "update_with_validity"
    confidence, decay_rate = policy.contradicted_confidence, policy.contradicted_decay_rate
    if validity:
        confidence = core.CONTRADICTED_CONFIDENCE if confidence is None else confidence
        decay_rate = core.CONTRADICTED_DECAY_RATE if decay_rate is None else decay_rate
    return {"res_event": str(q.new_event_id()), "invalidate": validity,
            "archive": not validity, "confidence": confidence, "decay_rate": decay_rate,
            "conflict": {"strategy": policy.strategy, "detected": "key",
                         "confidence": confidence, "decay_rate": decay_rate}}


def check_item_address(ctx: Context, op: ItemPut) -> None:
    """Refuse a key, namespace or value the write would refuse, before the key is read."""
    check_key(ctx, op)
    if op.value is not None:
        check_json(op.value, "value", depth=ctx.spec.persistence.store.limits.json_depth)


def check_key(ctx: Context, op: ItemPut) -> None:
    """The key and namespace checks of :func:`check_item_address`."""
    limits = ctx.spec.persistence.store.limits
    bounded_text(op.key, "key", limits.key_chars, "key_chars")
    bounded_labels(op.namespace, "namespace", count=limits.namespace_labels,
                   chars=limits.label_chars, count_setting="namespace_labels",
                   chars_setting="label_chars")


def search_items(ctx: Context, op: ItemSearch) -> Op[list[StoredItem]]:
    if op.limit <= 0:
        return []
    if op.offset < 0:
        raise PolicyViolation(f"offset must not be negative, got {op.offset}")
    params: dict[str, Any] = {**_anchor_params(ctx), **_filter_params(op.conditions),
                              "tier": op.tier, "prefix": list(op.prefix)}
    where = q.value_filter(list(op.conditions))
    if not (op.query and op.query.strip()):
        rows = yield Step(q.item_rows(ctx.tables, tier=op.tier is not None,
                                      prefix_len=len(op.prefix), where=where, page=True,
                                      expired=op.expired),
                          {**params, "limit": op.limit, "offset": op.offset}, "all")
        items = [StoredItem.from_row(r) for r in rows]
    else:
        items = yield from _query_search(ctx, op, params, where)
    if op.refresh_ttl:
        yield from _refresh(items, ctx)
    return items


def _restriction(ctx: Context, op: ItemSearch) -> Restriction:
    """What the store's search admits beyond tenant and tier: the further anchor columns, the
    namespace prefix, the value filter and ``index=False`` items left out, as one clause on
    the memory row that every signal applies before ranking."""
    further = ctx.tables.anchor_columns[1:]
    parts: list[sql.Composable] = [
        sql.SQL("m.{} IS NOT DISTINCT FROM {}").format(
            sql.Identifier(column), sql.Placeholder(f"r_anchor_{i}"))
        for i, column in enumerate(further)]
    params: dict[str, Any] = {f"r_anchor_{i}": ctx.anchor.as_dict().get(column)
                              for i, column in enumerate(further)}
    if op.prefix:
        parts.append(sql.SQL("m.namespace[1:{}] = %(r_prefix)s::text[]").format(
            sql.Literal(len(op.prefix))))
        params["r_prefix"] = list(op.prefix)
    parts += [q.value_filter(list(op.conditions), prefix="r_"), q.INDEXED]
    params.update(_filter_params(op.conditions, prefix="r_"))
    shape = tuple((operator, isinstance(operand, str)) for _, operator, operand in op.conditions)
    return Restriction(("store", further, len(op.prefix), shape),
                       sql.SQL(" AND ").join(parts), params)


def _query_search(ctx: Context, op: ItemSearch, params: dict[str, Any],
                  where: sql.Composable) -> Op[list[StoredItem]]:
    """Hybrid search over the items the prefix, filter and ``index`` flag admit, in search
    order: the restriction is inside the search statement, so a selective filter still
    returns ``limit`` items when the tenant has them. Items written with ``index=False``
    follow the ranked ones (score None) when the page has room. When the search abstains
    (``retrieval.abstain``), an empty :class:`SearchResult` that says so."""
    wanted = op.offset + op.limit
    tiers = [op.tier] if op.tier is not None else None
    reranked = ctx.reranker is not None
    fetched = wanted if reranked else max(wanted, STORE_CANDIDATES)
    hits = yield from core.search(ctx if reranked else _meaning_first(ctx), op.query or "",
                                  tiers=tiers, limit=min(fetched, MAX_SEARCH_CANDIDATES),
                                  restrict=_restriction(ctx, op))
    if not hits and hits.abstained:  # an abstention (retrieval.abstain) says so
        return SearchResult(abstained=hits.abstained, message=hits.message,
                            pending_embeddings=hits.pending_embeddings)
    candidates = list(hits)
    rows = yield Step(q.item_rows(ctx.tables, tier=op.tier is not None,
                                  prefix_len=len(op.prefix),
                                  where=sql.SQL(" AND ").join([where, q.INDEXED]), by_ids=True),
                      {**params, "ids": [h.memory.id for h in candidates]}, "all")
    found = {item.memory.id: item for item in map(StoredItem.from_row, rows)}
    candidates = yield from _by_best_text(ctx, op.query or "", candidates, found)
    ordered = (candidates if reranked else by_meaning(ctx.spec, candidates))[:wanted]
    ran = _ran(hits)
    kept = [replace(found[h.memory.id], score=relevance(h, ran), fused=h.score,
                    ranks=dict(h.ranks), scores=dict(h.scores))
            for h in ordered if h.memory.id in found]
    if len(kept) < wanted:
        rest = yield Step(q.item_rows(ctx.tables, tier=op.tier is not None,
                                      prefix_len=len(op.prefix),
                                      where=sql.SQL(" AND ").join([where, q.UNINDEXED]),
                                      page=True),
                          {**params, "limit": wanted - len(kept), "offset": 0}, "all")
        kept += [StoredItem.from_row(r) for r in rest]
    return SearchResult(kept[op.offset:wanted], pending_embeddings=hits.pending_embeddings)


def _by_best_text(ctx: Context, query: str, hits: list[Hit],
                  found: Mapping[UUID, StoredItem]) -> Op[list[Hit]]:
    """The semantic signal over items with one vector per indexed text
    (:attr:`ItemPut.texts`): such an item's semantic score is its best text's cosine with
    the query, and the semantic ranks follow the scores. Unchanged when no hit has them."""
    if ctx.embedder is None or not any(
            "semantic" in h.ranks and found.get(h.memory.id) is not None
            and found[h.memory.id].vectors for h in hits):
        return hits
    query_vector = (yield core.Embed(ctx.embedder, (query,), query=True))[0]
    rescored: list[Hit] = []
    for hit in hits:
        item = found.get(hit.memory.id)
        if "semantic" in hit.ranks and item is not None and item.vectors:
            best = max(_cosine(query_vector, v) for v in item.vectors)
            hit = replace(hit, scores={**hit.scores, "semantic": best})
        rescored.append(hit)
    semantic = sorted((h for h in rescored if "semantic" in h.ranks),
                      key=lambda h: -h.scores["semantic"])
    rank = {h.memory.id: i for i, h in enumerate(semantic, 1)}
    return [replace(h, ranks={**h.ranks, "semantic": rank[h.memory.id]})
            if h.memory.id in rank else h for h in rescored]


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


_MEANING_SPECS: dict[int, tuple[AgentSpec, AgentSpec]] = {}


def _meaning_first(ctx: Context) -> Context:
    """The context a store query search runs in: the aid signals (every signal but semantic
    and lexical) still run and rank, with fusion weight 0, so the statement's fused score
    and its candidate list are the content signals' alone; :func:`by_meaning` adds the
    aids back as the second key. Unchanged when no content signal can run (the fused
    score then orders everything) or the spec has no aid."""
    meaning = "lexical" in ctx.signals or ("semantic" in ctx.signals and
                                           ctx.embedder is not None)
    aids = [s for s in ctx.signals if s not in MEANING_SIGNALS]
    if not meaning or not aids:
        return ctx
    cached = _MEANING_SPECS.get(id(ctx.spec))
    if cached is None or cached[0] is not ctx.spec:
        retrieval = ctx.spec.retrieval
        fusion = retrieval.fusion.model_copy(
            update={"weights": {**retrieval.fusion.weights, **dict.fromkeys(aids, 0.0)}})
        cached = (ctx.spec, ctx.spec.model_copy(
            update={"retrieval": retrieval.model_copy(update={"fusion": fusion})}))
        _MEANING_SPECS[id(ctx.spec)] = cached
    return replace(ctx, spec=cached[1])


def _ran(hits: Sequence[Hit]) -> frozenset[str]:
    return frozenset(s for h in hits for s in h.ranks)


def relevance(hit: Hit, ran: frozenset[str]) -> float | None:
    """What a store hit's ``score`` says: the cosine similarity of the query and the item
    (-1..1) when the semantic signal ran (None for an item outside its candidate list);
    else the lexical signal's score (BM25 or ``ts_rank_cd``, as the spec ranks; 0 when the
    item matched no query word); else, when neither content signal ran, the fused score."""
    for signal in MEANING_SIGNALS:
        if signal in ran:
            value = hit.scores.get(signal)
            return value if value is not None or signal == "semantic" else 0.0
    return hit.score


def _tied_ranks(hits: Sequence[Hit], signals: Sequence[str]) -> dict[str, dict[UUID, int]]:
    """Each signal's ranks with equal scores sharing the best of their ranks (1, 1, 3): two
    items a signal scores the same are alike in its eyes, whatever order it returned."""
    out: dict[str, dict[UUID, int]] = {}
    for signal in signals:
        ranked = sorted((h for h in hits if signal in h.ranks), key=lambda h: h.ranks[signal])
        ranks: dict[UUID, int] = {}
        previous: tuple[float, int] | None = None
        for hit in ranked:
            score = hit.scores.get(signal)
            if previous is not None and score is not None and \
                    math.isclose(score, previous[0], rel_tol=1e-9, abs_tol=1e-12):
                ranks[hit.memory.id] = previous[1]
                continue
            ranks[hit.memory.id] = hit.ranks[signal]
            previous = (score, hit.ranks[signal]) if score is not None else None
        out[signal] = ranks
    return out


def by_meaning(spec: AgentSpec, hits: Sequence[Hit]) -> list[Hit]:
    """A store query search's order: by meaning first, as a similarity search would rank.

    The content signals that ran (semantic, lexical) are fused with the spec's method, k and
    weights (``retrieval.fusion``); the other signals (recency, envelope, graph...) are
    aids: fused the same way with their declared weights, they order items the content
    signals rank alike; then the statement's score (times the tier weight and the item's
    effective confidence). When no content signal ran (no embedder and no lexical), the
    statement's order (every declared signal fused) stands."""
    used = _ran(hits)
    ran = [s for s in MEANING_SIGNALS if s in used]
    if not ran:
        return list(hits)
    fusion = spec.retrieval.fusion
    declared = {str(s): float(w) for s, w in fusion.weights.items()}
    weights = {s: declared.get(s, 1.0) for s in used}
    aids = [s for s in used if s not in MEANING_SIGNALS]

    def aid(hit: Hit) -> float:
        return sum(weights[s] / (fusion.k + hit.ranks[s]) for s in aids if s in hit.ranks)

    if fusion.method == "rrf":
        tied = _tied_ranks(hits, ran)

        def meaning(hit: Hit) -> float:
            return sum(weights[s] / (fusion.k + tied[s][hit.memory.id])
                       for s in ran if hit.memory.id in tied[s])
    else:
        bounds = {s: (min(v), max(v)) for s in ran
                  if (v := [h.scores[s] for h in hits if s in h.scores])}

        def meaning(hit: Hit) -> float:
            total = 0.0
            for s in ran:
                if s in hit.scores:
                    low, high = bounds[s]
                    total += weights[s] * ((hit.scores[s] - low) / (high - low)
                                           if high > low else 1.0)
            return total
    return sorted(hits, key=lambda h: (-meaning(h), -aid(h), -h.score))


def _refresh(items: Sequence[StoredItem], ctx: Context) -> Op[None]:
    ids = [item.memory.id for item in items if item.ttl_minutes is not None
           and not item.expired]  # an expired item read with omit_expired=False stays so
    if ids:
        yield Step(q.refresh_item_ttl(ctx.tables), {"tenant": ctx.tenant, "ids": ids})


def list_namespaces(ctx: Context, op: ItemNamespaces) -> Op[list[tuple[str, tuple[str, ...]]]]:
    rows = yield Step(q.item_namespaces(ctx.tables, tier=op.tier is not None,
                                        expired=op.expired),
                      {**_anchor_params(ctx), "tier": op.tier}, "all")
    return sorted((tier, tuple(namespace)) for tier, namespace in rows)


def run_item_ops(ctx: Context, ops: Sequence[ItemOp]) -> Op[list[Any]]:
    """Run item operations in order in the caller's tenant transaction; one result each
    (``StoredItem | None`` for a get, ``None`` for a put, a list for a search or a
    namespace listing)."""
    if len(ops) > 1 and all(isinstance(op, ItemGet) for op in ops):
        # gets only: one statement (the store's concurrent gets of one tenant, batched)
        return list((yield from get_items(ctx, [op for op in ops if isinstance(op, ItemGet)],
                                          final=True)))
    results: list[Any] = []
    alone = len(ops) == 1
    for op in ops:
        if isinstance(op, ItemGet):
            results.append((yield from get_item(ctx, op, final=alone)))
        elif isinstance(op, ItemPut):
            yield from put_item(ctx, op)
            results.append(None)
        elif isinstance(op, ItemSearch):
            results.append((yield from search_items(ctx, op)))
        else:
            results.append((yield from list_namespaces(ctx, op)))
    return results


# memory tools (seed 002 §13) --------------------------------------------------------------------
def confirm_memory(ctx: Context, memory_id: UUID, *, reason: str | None = None) -> Op[Memory]:
    """Protect an active memory from decay: confidence 1, decay rate 0; a journal event."""
    memory = Memory.from_row_or_none((yield core.get_step(ctx, memory_id)))
    if memory is None:
        raise TenancyError(f"no memory {memory_id} in this tenant", memory_id=str(memory_id))
    if not memory.active:
        raise GovernanceError(f"memory {memory_id} is not active ({memory.state}); only an "
                              "active memory can be confirmed", memory_id=str(memory_id))
    row = yield Step(q.confirm_memory(ctx.tables), {"tenant": ctx.tenant, "id": memory_id},
                     "one")
    yield core._event(ctx, "confirmed", memory_id, {
        "previous_confidence": memory.confidence, "confidence": 1.0, "decay_rate": 0.0,
        **core.reason_payload(reason)})
    return Memory.from_row(row)


def exempt_memory(ctx: Context, memory_id: UUID, *, reason: str | None = None) -> Op[Memory]:
    """Exempt an active memory from decay (decay rate 0; its confidence unchanged), with an
    ``exempted`` event: the disposition that keeps a forcing-function row past its horizon
    without promoting or archiving it."""
    memory = Memory.from_row_or_none((yield core.get_step(ctx, memory_id)))
    if memory is None:
        raise TenancyError(f"no memory {memory_id} in this tenant", memory_id=str(memory_id))
    if not memory.active:
        raise GovernanceError(f"memory {memory_id} is not active ({memory.state}); only an "
                              "active memory can be exempted", memory_id=str(memory_id))
    row = yield Step(q.exempt_memory(ctx.tables), {"tenant": ctx.tenant, "id": memory_id},
                     "one")
    yield core._event(ctx, "exempted", memory_id, {
        "confidence": memory.confidence, "decay_rate": 0.0, **core.reason_payload(reason)})
    return Memory.from_row(row)


def memory_stats(ctx: Context) -> Op[dict[str, Any]]:
    """Counts of the tenant's memory: active rows by typology and tier, every row by state,
    journal length and last event, open and all scopes; with ``graph:``, the graph metrics
    of seed 002 §13 as well (:func:`primitives.engine._insight.graph_stats`)."""
    rows = yield Step(q.memory_counts(ctx.tables), {"tenant": ctx.tenant}, "all")
    summary = yield Step(q.journal_summary(ctx.tables), {"tenant": ctx.tenant}, "one")
    typologies: dict[str, int] = dict.fromkeys(ctx.spec.typologies, 0)
    tiers: dict[str, int] = dict.fromkeys(ctx.spec.tier_names, 0)
    states: dict[str, int] = {}
    for tier, typology, state, count in rows:
        states[state] = states.get(state, 0) + count
        if state == "active":
            typologies[typology] = typologies.get(typology, 0) + count
            tiers[tier] = tiers.get(tier, 0) + count
    events, last_event, open_scopes, scopes = summary
    stats = {"nodes": typologies, "tiers": tiers, "states": states,
             "active": sum(typologies.values()), "journal_events": events,
             "last_write": last_event, "open_scopes": open_scopes, "scopes": scopes}
    if ctx.deferred and ctx.has_embedding:  # rows still waiting for the embedding worker
        waiting = yield Step(pending_count_statement(ctx.tables), {"tenant": ctx.tenant}, "one")
        stats["pending_embeddings"] = int(waiting[0]) if waiting else 0
    if ctx.spec.graph is not None and ctx.tables.edges is not None:
        from primitives.engine._insight import graph_stats  # it imports consolidation
        stats.update((yield from graph_stats(ctx)))
    return stats
