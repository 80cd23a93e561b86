"""``MemoryStore`` / ``AsyncMemoryStore``: LangGraph's ``BaseStore`` over the engine.

``batch`` / ``abatch`` are the choke point (DESIGN §8): every op is checked against the
spec (:mod:`primitives.langgraph._namespaces`), the ops are grouped by anchor, and each
group runs in one tenant transaction (the tenant set for the transaction, journal events
in the same transaction, one retry on a transient error). A group of puts is one statement
sent with ``BEGIN`` and ``COMMIT`` in one round trip (``engine.write_once`` of
:func:`~primitives.engine._store_ops.put_items`), a group of gets one statement too; any
other group, and the puts that statement leaves (a delete, a key given twice, an expiry to
push back, a key a concurrent writer created first...), run op by op through
``engine.write``. Ops run in the order given; results come back in that order.

Where the audit posture differs from BaseStore (see ``docs/langgraph.md``):

- ``delete`` / ``put(..., None)`` tombstone the item's row (a journal event); the row stays.
  On a transient tier the tombstoned row is removed with its scope (``end_scope``).
- an update supersedes the previous version (which stays, linked); an unchanged put writes
  nothing and keeps ``updated_at``.
- a write the spec's write policy routes elsewhere (e.g. semantic memory under
  ``promotion_only``) raises the engine's ``GovernanceError`` unchanged.
- a query ``search`` orders by meaning: the content signals (semantic, lexical) fused as
  the spec says, the other signals (recency...) as aids that order items alike in meaning;
  each hit's ``score`` is its relevance (the cosine similarity when an embedder is set),
  ``fused_score`` the fused score (:class:`RankedItem`).
- a query ``search`` of a spec with ``retrieval.abstain`` drops results below its
  ``min_fused_score``; when none remain it returns an empty ``SearchResult`` (a list) whose
  ``abstained`` is True and ``message`` the spec's.

Example::

    store = MemoryStore.from_spec(load_spec("agents/spectral_agent.yaml"))
    store.put(("ws-1", "workspace", "procedural"), "style", {"text": "short answers"})
    store.search(("ws-1",), query="answers")
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

from primitives.db._oneshot import NOT_SENT, OnceCall, afetch_each
from primitives.embeddings import Embedder, as_embedder
from primitives.engine import (
    AsyncEngine,
    AsyncTenantMemory,
    Engine,
    SearchResult,
    TenantMemory,
    resolve_anchor,
)
from primitives.engine import _store_ops as store_ops
from primitives.engine._base import render
from primitives.engine._core import EMBED_CONTEXT, Context, Step
from primitives.engine._core import Op as CoreOp
from primitives.engine._input import check_json
from primitives.engine._store_ops import (
    ItemGet,
    ItemNamespaces,
    ItemOp,
    ItemPut,
    ItemSearch,
    StoredItem,
    filter_conditions,
)
from primitives.errors import PolicyViolation, StorageError, TenancyError
from primitives.langgraph._content import item_content, item_texts
from primitives.langgraph._namespaces import NamespaceLayout
from primitives.spec import AgentSpec

__all__ = ["AsyncMemoryStore", "MemoryStore", "RankedItem"]

Anchor = tuple[tuple[str, str], ...]
R = TypeVar("R")
_UNIQUE_VIOLATION = "23505"
Convert = Callable[[Any], Result]


@dataclass
class _Group:
    """The ops of one anchor: run together in one tenant transaction."""

    anchor: Anchor
    positions: list[int] = field(default_factory=list)
    ops: list[ItemOp] = field(default_factory=list)
    converts: list[Convert] = field(default_factory=list)


class _Translator:
    """BaseStore ops -> engine item ops, grouped by anchor; engine results -> BaseStore results.

    Pure: the sync and async stores share it and differ only in how a group is run.
    """

    def __init__(self, spec: AgentSpec, only: Anchor | None = None,
                 fields: list[str] | None = None, distance: str = "cosine") -> None:
        self.spec = spec
        self.distance = distance
        """The index config's ``distance_type``: how a query hit's ``score`` is given."""
        self.layout = NamespaceLayout(spec)
        self.content_limit = spec.persistence.store.limits.content_chars
        self.only = only
        self.fields = fields
        """The store's ``index_config["fields"]``: a put without ``index=`` indexes these."""

    def bound(self, anchor: Mapping[str, object]) -> _Translator:
        """A translator that refuses every op outside ``anchor``."""
        resolved = resolve_anchor(self.spec, anchor)
        return _Translator(self.spec, tuple((k, v) for k, v in resolved.values if v is not None),
                           self.fields, self.distance)

    def plan(self, ops: Iterable[Op], *, expired: bool = False) -> tuple[list[_Group], int]:
        """``expired``: reads return expired items too (``omit_expired=False``)."""
        groups: dict[Anchor, _Group] = {}
        count = 0
        for position, op in enumerate(ops):
            count = position + 1
            validate_op_namespace(op)
            anchor, item_op, convert = self._translate(op, expired)
            if self.only is not None and anchor != self.only:
                raise TenancyError(
                    f"this store is bound to {dict(self.only)}; {type(op).__name__} addresses "
                    f"{dict(anchor)}", agent=self.spec.agent)
            group = groups.setdefault(anchor, _Group(anchor))
            group.positions.append(position)
            group.ops.append(item_op)
            group.converts.append(convert)
        return list(groups.values()), count

    @staticmethod
    def scatter(group: _Group, results: Sequence[Any], out: list[Result]) -> None:
        for position, convert, result in zip(group.positions, group.converts, results,
                                             strict=True):
            out[position] = convert(result)

    def _translate(self, op: Op, expired: bool) -> tuple[Anchor, ItemOp, Convert]:
        if isinstance(op, GetOp):
            address = self.layout.address(op.namespace)
            return address.anchor, ItemGet(address.tier, address.namespace, op.key,
                                           op.refresh_ttl, expired), self._to_item(address.anchor)
        if isinstance(op, PutOp):
            address = self.layout.address(op.namespace)
            content = ""
            texts: tuple[str, ...] = ()
            if op.value is not None:
                # before item_content, which would recurse into a deep value
                check_json(op.value, "value", depth=self.spec.persistence.store.limits.json_depth)
                index = self.fields if op.index is None else op.index
                content = item_content(op.value, op.key, index, self.content_limit)
                if index:  # a list of paths
                    texts = tuple(t[:self.content_limit] for t in item_texts(op.value, index))
            return address.anchor, ItemPut(
                address.tier, address.typology, address.namespace, op.key,
                None if op.value is None else dict(op.value), content, address.scope_id,
                op.ttl, op.index is not False, embed_context(op.value, self.spec),
                texts=texts), _nothing
        if isinstance(op, SearchOp):
            scope = self.layout.scope(op.namespace_prefix)
            search = ItemSearch(scope.tier, scope.prefix, filter_conditions(op.filter),
                                op.limit, op.offset, op.query, op.refresh_ttl, expired)
            return scope.anchor, search, self._to_search_items(scope.anchor)
        if isinstance(op, ListNamespacesOp):
            return self._listing(op, expired)
        raise TypeError(f"unknown store op {type(op).__name__}")

    def _listing(self, op: ListNamespacesOp, expired: bool) -> tuple[Anchor, ItemOp, Convert]:
        conditions = op.match_conditions or ()
        prefixes = [c.path for c in conditions if c.match_type == "prefix" and c.path]
        if not prefixes:
            raise TenancyError(
                f"list_namespaces of agent '{self.spec.agent}' needs a prefix that starts with "
                f"the anchor ({', '.join(self.layout.keys)}): every tenant's namespaces are "
                "listed in its own transaction", agent=self.spec.agent)
        scope = self.layout.listing_scope(prefixes[0])

        def convert(pairs: list[tuple[str, tuple[str, ...]]]) -> list[tuple[str, ...]]:
            found = (self.layout.full(scope.anchor, tier, ns) for tier, ns in pairs)
            matching = [ns for ns in found if all(_matches(c.match_type, c.path, ns)
                                                  for c in conditions)]
            if op.max_depth is not None:
                matching = [ns[:op.max_depth] for ns in matching]
            ordered = sorted(set(matching))
            return ordered[op.offset:op.offset + op.limit]

        return scope.anchor, ItemNamespaces(scope.tier, expired), convert

    def _to_item(self, anchor: Anchor) -> Convert:
        def convert(stored: StoredItem | None) -> Item | None:
            if stored is None:
                return None
            memory = stored.memory
            return Item(value=memory.value, key=memory.key,
                        namespace=self.layout.full(anchor, memory.tier, memory.namespace),
                        created_at=stored.created_at, updated_at=memory.updated_at)
        return convert

    def _score(self, found: StoredItem) -> float | None:
        """A hit's score under the index config's ``distance_type``: the cosine similarity
        (``cosine``, and ``inner_product``: the inner product of the unit-length vectors), or
        ``l2``: minus the L2 distance between the unit-length vectors, -sqrt(2 - 2 cos). Only
        a semantic similarity is converted (see :func:`store_ops.relevance`)."""
        score = found.score
        if score is None or self.distance != "l2" or "semantic" not in (found.scores or {}):
            return score
        return -math.sqrt(max(0.0, 2.0 - 2.0 * score))

    def _to_search_items(self, anchor: Anchor) -> Convert:
        def convert(found: list[StoredItem]) -> list[SearchItem]:
            items: list[SearchItem] = [
                RankedItem(self.layout.full(anchor, s.memory.tier, s.memory.namespace),
                           s.memory.key, s.memory.value, s.created_at, s.memory.updated_at,
                           self._score(s), fused_score=s.fused, ranks=s.ranks, signal_scores=s.scores)
                for s in found]
            if isinstance(found, SearchResult) and (found.abstained or
                                                    found.pending_embeddings is not None):
                # a list still, that says the search abstained (retrieval.abstain) or how
                # many rows wait for their vector (retrieval.embedding.embed: deferred)
                return SearchResult(items, abstained=found.abstained, message=found.message,
                                    pending_embeddings=found.pending_embeddings)
            return items
        return convert


def embed_context(value: Mapping[str, Any] | None, spec: AgentSpec) -> dict[str, str] | None:
    """An item's ``embed_context``: a mapping of labels to texts (or one text, labelled
    ``context``) that goes into its embedded text after the content, ``(label: text)`` each,
    as ``retrieval.embedding.envelope_keys`` does for the engine's rows; neither the item's
    content nor searched lexically. None when the value has none; anything else is refused."""
    given = None if value is None else value.get(EMBED_CONTEXT)
    if given is None:
        return None
    if isinstance(given, str):
        given = {"context": given}
    if not isinstance(given, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in given.items()):
        raise PolicyViolation(f"an item's '{EMBED_CONTEXT}' is a text or a mapping of labels "
                              f"to texts, got {type(given).__name__}", agent=spec.agent,
                              field=EMBED_CONTEXT)
    return dict(given) or None


class RankedItem(SearchItem):
    """A query search's hit: ``score`` is its relevance, a value to threshold (the cosine
    similarity of query and item when the semantic signal ran; see
    :func:`primitives.engine._store_ops.relevance`); ``fused_score`` the engine's fused
    score, ``ranks`` / ``signal_scores`` each signal's rank and score. A listing (no query)
    has ``score`` None and the rest None too."""

    __slots__ = ("fused_score", "ranks", "signal_scores")

    def __init__(self, namespace: tuple[str, ...], key: str, value: dict[str, Any],
                 created_at: Any, updated_at: Any, score: float | None = None, *,
                 fused_score: float | None = None, ranks: Mapping[str, int] | None = None,
                 signal_scores: Mapping[str, float] | None = None) -> None:
        super().__init__(namespace, key, value, created_at, updated_at, score)
        self.fused_score = fused_score
        self.ranks = dict(ranks) if ranks is not None else None
        self.signal_scores = dict(signal_scores) if signal_scores is not None else None


def _nothing(_: Any) -> None:
    return None


def _embedding(spec: AgentSpec, embedder: Any,
               index: IndexConfig | None) -> tuple[Embedder | None, list[str] | None]:
    """The store's embedder and default fields from ``embedder`` and LangGraph's
    ``index`` config (``{"dims", "embed", "fields"}``). ``embed`` may be any LangChain
    ``Embeddings`` object or an embedding function; ``dims`` must be the spec's
    ``retrieval.embedding.dims`` (``ModelMismatch`` otherwise, raised by the engine)."""
    if index is None:
        return (None if embedder is None else as_embedder(embedder)), None
    embed = index.get("embed")
    if embedder is None and embed is not None:
        if isinstance(embed, str) or not callable(getattr(embed, "embed_query", None)):
            from langgraph.store.base.embed import ensure_embeddings
            embed = ensure_embeddings(embed)
        embedder = embed
    dims = index.get("dims")
    model = None if embedder is None else as_embedder(
        embedder, dims=dims if isinstance(dims, int) else None)
    fields = index.get("fields")
    return model, (None if fields is None else list(fields))


_DISTANCES = ("cosine", "inner_product", "l2")


def _distance(spec: AgentSpec, index: IndexConfig | None) -> str:
    """The index config's ``distance_type`` (``cosine`` when not given); the vectors are
    compared by cosine in any case, and the type chooses how a hit's score reads."""
    distance = "cosine" if index is None else str(index.get("distance_type") or "cosine")
    if distance not in _DISTANCES:
        raise PolicyViolation(
            f"index distance_type {distance!r} is not one this store reports: "
            f"{', '.join(_DISTANCES)} (items are compared by the cosine of their vectors)",
            agent=spec.agent, field="distance_type")
    return distance


def _keeps_expired(ttl: TTLConfig | None) -> bool:
    """Reads return expired items only when the TTL config says ``omit_expired: False``:
    nothing sweeps them away (the rows stay, as every row does), so by default they are
    omitted from every read at once."""
    return ttl is not None and ttl.get("omit_expired") is False


def _lost_race(err: StorageError) -> bool:
    """Two transactions wrote the same new key at once: the loser's rerun sees the winner's
    row and supersedes it (BaseStore's last-write-wins), so the group runs once more."""
    return err.context.get("sqlstate") == _UNIQUE_VIOLATION


def _matches(match_type: str, path: Sequence[str], namespace: tuple[str, ...]) -> bool:
    """Whole-segment prefix or suffix match; ``*`` stands for exactly one segment."""
    if not path:
        return True
    if len(namespace) < len(path):
        return False
    window = namespace[:len(path)] if match_type == "prefix" else namespace[-len(path):]
    return all(p == "*" or p == s for p, s in zip(path, window, strict=True))


class MemoryStore(BaseStore):
    """Synchronous LangGraph store over the engine. Create with :meth:`from_spec`.

    ``abatch`` runs ``batch`` in a worker thread, so the store works in async graphs too;
    :class:`AsyncMemoryStore` is the native async one.
    """

    supports_ttl = True

    def __init__(self, engine: Engine, *, ttl: TTLConfig | None = None,
                 actor: str = "store", index: IndexConfig | None = None) -> None:
        self.engine = engine
        self.spec = engine.spec
        self.ttl_config = ttl
        self.actor = actor
        self.index_config = index
        self._translator = _Translator(engine.spec, fields=None if index is None else
                                       index.get("fields"), distance=_distance(engine.spec, index))

    @classmethod
    def from_spec(cls, spec: AgentSpec, dsn: str | None = None, *,
                  embedder: Embedder | Any | None = None, ttl: TTLConfig | None = None,
                  actor: str = "store", max_connections: int = 4,
                  index: IndexConfig | None = None) -> MemoryStore:
        """Connect as the application role (``dsn`` defaults to the resolved one). With
        ``embedder`` (an :class:`Embedder` or any LangChain ``Embeddings`` object), writes
        store vectors and query searches run the semantic signal. ``index`` is LangGraph's
        index config: ``embed`` (when no ``embedder``), ``dims`` (checked against the
        spec's) and ``fields`` (what a put without ``index=`` indexes)."""
        model, _ = _embedding(spec, embedder, index)
        engine = Engine.connect(spec, dsn, max_connections=max_connections, embedder=model)
        return cls(engine, ttl=ttl, actor=actor, index=index)

    def setup(self) -> None:
        """Nothing to do: the tables come from the spec (``primitives migrate``) and
        ``from_spec`` has already checked them. Kept so code written for LangGraph's
        stores runs unchanged."""

    def start_ttl_sweeper(self, sweep_interval_minutes: int | None = None,
                          ) -> concurrent.futures.Future[None]:
        """Nothing to sweep: an expired item leaves every read at once and its row stays
        (the audit posture, ``docs/langgraph.md``). Returns a finished future, as LangGraph's
        stores return one for their sweeper, so code that starts one runs unchanged."""
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        done.set_result(None)
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Nothing runs (see :meth:`start_ttl_sweeper`): True."""
        return True

    def for_tenant(self, anchor: Mapping[str, object]) -> MemoryStore:
        """A view of this store (same pool) that refuses ops on any other anchor: hand it to
        code that builds namespaces from untrusted input, such as a model's tool calls."""
        bound = copy.copy(self)
        bound._translator = self._translator.bound(anchor)
        return bound

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        groups, count = self._translator.plan(ops, expired=_keeps_expired(self.ttl_config))
        out: list[Result] = [None] * count
        for group in groups:
            self._translator.scatter(group, self._run_group(group.anchor, group.ops), out)
        return out

    def _run_group(self, anchor: Anchor, ops: list[ItemOp]) -> list[Any]:
        """The engine's results of one anchor's ops, in one tenant transaction (two when the
        one-statement put leaves ops to the general path)."""
        if _reads_only(ops):
            # gets, searches and listings: one round trip for the first statement
            results = self.engine.read(dict(anchor), _reader(ops), actor=self.actor)
            self.engine._accessed(resolve_anchor(self.spec, dict(anchor)).tenant,
                                  _found(ops, results))
            return results
        rest: list[ItemOp] = ops
        written: list[Any] = [None] * len(ops)  # a put's result is None
        puts = _puts_only(ops)
        if puts is not None:
            # one statement, one round trip (store_ops.put_items); what it leaves to the
            # general path runs below, op by op, in a transaction of its own
            rest = _left_over(puts, self.engine.write_once(
                dict(anchor), partial(store_ops.put_items, ops=puts), actor=self.actor))
        for attempt in (1, 2):
            if not rest:
                break
            try:
                done = self.engine.write(dict(anchor), _runner(rest), actor=self.actor)
                written = done if rest is ops else written
                break
            except StorageError as err:
                if attempt == 2 or not _lost_race(err):
                    raise
        return written

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    def close(self) -> None:
        self.engine.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _runner(ops: list[ItemOp]) -> Callable[[TenantMemory], list[Any]]:
    return lambda mem: mem.item_batch(ops)


def _puts_only(ops: Sequence[ItemOp]) -> list[ItemPut] | None:
    """``ops`` when every one puts a value (a write group's common case), else None."""
    puts = [op for op in ops if isinstance(op, ItemPut) and op.value is not None]
    return puts if len(puts) == len(ops) else None


def _left_over(puts: list[ItemPut], outcomes: list[str] | None) -> list[ItemOp]:
    """The puts :func:`store_ops.put_items` left to the general path: all of them when it
    took none (``None``) or wrote nothing (``fallback``), else those that lost the race for
    a new key (the general path then supersedes the winner: last write wins)."""
    if outcomes is None or "fallback" in outcomes:
        return list(puts)
    return [op for op, outcome in zip(puts, outcomes, strict=True) if outcome == "lost"]


def _found(ops: Sequence[ItemOp], results: Sequence[Any]) -> list[Any]:
    """The items a group's searches returned: retrieval marks them read (access tracking)."""
    return [item for op, result in zip(ops, results, strict=True)
            if isinstance(op, ItemSearch) for item in result]


def _reads_only(ops: Sequence[ItemOp]) -> bool:
    return all(isinstance(op, ItemGet | ItemSearch | ItemNamespaces) for op in ops)


def _reader(ops: list[ItemOp]) -> Callable[[Context], CoreOp[list[Any]]]:
    return lambda ctx: store_ops.run_item_ops(ctx, ops)


class AsyncMemoryStore(BaseStore):
    """Asynchronous LangGraph store over the async engine. Create with :meth:`from_spec`.

    ``batch`` (the sync API) may be called from another thread than the event loop's, as
    LangGraph does for sync nodes in async runs; from the loop's own thread it raises.
    """

    supports_ttl = True

    def __init__(self, engine: AsyncEngine, *, ttl: TTLConfig | None = None,
                 actor: str = "store", index: IndexConfig | None = None) -> None:
        self.engine = engine
        self.spec = engine.spec
        self.ttl_config = ttl
        self.actor = actor
        self.index_config = index
        self._translator = _Translator(engine.spec, fields=None if index is None else
                                       index.get("fields"), distance=_distance(engine.spec, index))
        self._loop = asyncio.get_running_loop()
        self._work = _Work()
        """The queue of waiting calls and the tasks running them (shared with bound views)."""
        self._max_drainers = max(1, engine._pool.max_size)

    @classmethod
    async def from_spec(cls, spec: AgentSpec, dsn: str | None = None, *,
                        embedder: Embedder | Any | None = None,
                        ttl: TTLConfig | None = None, actor: str = "store",
                        max_connections: int = 4,
                        index: IndexConfig | None = None) -> AsyncMemoryStore:
        """As :meth:`MemoryStore.from_spec`, on the async engine."""
        model, _ = _embedding(spec, embedder, index)
        engine = await AsyncEngine.connect(spec, dsn, max_connections=max_connections,
                                           embedder=model)
        return cls(engine, ttl=ttl, actor=actor, index=index)

    async def setup(self) -> None:
        """Nothing to do (see :meth:`MemoryStore.setup`)."""

    async def start_ttl_sweeper(self, sweep_interval_minutes: int | None = None,
                                ) -> asyncio.Task[None]:
        """Nothing to sweep (see :meth:`MemoryStore.start_ttl_sweeper`): a finished task."""
        return self._loop.create_task(_no_sweep())

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Nothing runs: True."""
        return True

    def for_tenant(self, anchor: Mapping[str, object]) -> AsyncMemoryStore:
        """A view of this store (same pool) that refuses ops on any other anchor."""
        bound = copy.copy(self)
        bound._translator = self._translator.bound(anchor)
        return bound

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Concurrent calls are queued by anchor and run by at most one task per pool
        connection, so any number of them wait in the queue, never for a connection (no pool
        timeout); queued calls on one anchor run together in one transaction (see
        :meth:`_drain`), different anchors in parallel. Each call's ops are translated once,
        here (an op's own error is raised here)."""
        listed = list(ops)
        plan = self._translator.plan(listed, expired=_keeps_expired(self.ttl_config))
        groups = plan[0]
        anchor = groups[0].anchor if len(groups) == 1 else None
        call = _Call(listed, self._loop.create_future(), plan)
        self._work.queue.setdefault(anchor, []).append(call)
        self._spawn()
        return await call.future

    def _spawn(self) -> None:
        work = self._work
        if work.queue and len(work.drainers) < self._max_drainers:
            task = self._loop.create_task(self._drain())
            work.drainers.add(task)
            task.add_done_callback(self._drained)

    def _drained(self, task: asyncio.Task[None]) -> None:
        """A task is done (finished, failed or cancelled, even before it started): the calls
        it held are cancelled, its anchor is free, and a new task takes the rest of the
        queue."""
        work = self._work
        work.drainers.discard(task)
        for anchor, calls in work.held.pop(task, ()):
            if anchor is not None:
                work.busy.discard(anchor)
            for call in calls:
                call.future.cancel()  # nothing when it was settled already
        if not self._loop.is_closed():
            self._spawn()

    async def _drain(self) -> None:
        """Take the calls queued for anchors no other task is running, until none is left;
        each anchor's calls run as one batch (one transaction), identical reads once when the
        batch has no write, or, when some calls only read and others write, as two: the
        reading calls' batch first, then the others' (:func:`_reads_first`); if that batch fails, each call runs alone, so one call's refusal
        is its own (the failed transaction wrote nothing). One anchor runs in one task at a
        time, so two transactions of a tenant never wait on each other's rows. A task takes
        its share of the free anchors (the free anchors over the tasks not running any), and
        sends their transactions, each with its own tenant, in one round trip on one
        connection (:meth:`_run_many`). Calls that span anchors (queued under None) always
        run alone. A cancelled task cancels the calls it took (:meth:`_drained`)."""
        work = self._work
        task = asyncio.current_task()
        assert task is not None
        while True:
            free = [a for a in work.queue if a is None or a not in work.busy]
            if not free:
                return
            chosen: list[Anchor | None]
            if free[0] is None or len(free) == 1:
                chosen = free[:1]
            else:
                idle = max(1, len(work.drainers) - len(work.held))
                anchored: list[Anchor | None] = [a for a in free if a is not None]
                chosen = anchored[:-(-len(free) // idle)]
            taken: list[tuple[Anchor | None, list[_Call]]] = []
            for anchor in chosen:
                calls = work.queue.pop(anchor)
                if len(calls) > _TAKE:
                    work.queue[anchor] = calls[_TAKE:]
                    calls = calls[:_TAKE]
                if anchor is not None:
                    work.busy.add(anchor)
                    # the calls that only read, then the others: each part can be one
                    # statement (a mixed batch could not), two transactions of the anchor
                    taken.extend((anchor, part) for part in _reads_first(calls))
                else:
                    taken.append((anchor, calls))
            work.held[task] = taken
            try:
                if len(taken) == 1:
                    await self._run_calls(*taken[0])
                else:
                    await self._run_many(taken)
            finally:
                if not task.cancelling():
                    del work.held[task]
                    for anchor, _ in taken:
                        if anchor is not None:
                            work.busy.discard(anchor)

    async def _run_many(self, taken: list[tuple[Anchor | None, list[_Call]]]) -> None:
        """Several anchors' batches: each one-statement batch (a group of reads, a group of
        puts that :func:`store_ops.put_items` takes) is its own tenant transaction, all sent
        in one round trip on one connection (:func:`~primitives.db._oneshot.afetch_each`); the rest, and a batch
        whose transaction failed (it wrote nothing), go the way one anchor's batch goes
        (:meth:`_run_calls`)."""
        ready: list[_Batch] = []
        later: list[tuple[Anchor | None, list[_Call]]] = []
        for anchor, calls in taken:
            try:
                batch = self._first_step(anchor, calls) if anchor is not None else None
            except Exception:  # the general way gives each call its own error
                batch = None
            if batch is None:
                later.append((anchor, calls))
            else:
                ready.append(batch)
        if ready:
            try:
                later.extend(await self._send_many(ready))
            except Exception:  # the round trip failed (a lost connection): the general way
                later.extend((batch.anchor, batch.calls) for batch in ready
                             if not all(call.future.done() for call in batch.calls))
        for anchor, calls in later:
            await self._run_calls(anchor, calls)

    def _first_step(self, anchor: Anchor, calls: list[_Call]) -> _Batch | None:
        """The batch of one anchor's calls, its operation driven to its first statement;
        None when that statement is not the whole transaction, or the operation refuses or
        needs the general path (nothing was sent)."""
        ops = [op for c in calls for op in c.ops]
        _, where, firsts = _once(ops)
        item_ops = [op for c in calls for op in c.plan[0][0].ops]
        converts = [convert for c in calls for convert in c.plan[0][0].converts]
        merged = [item_ops[i] for i in firsts]
        puts = None if _reads_only(merged) else _puts_only(merged)
        if puts is None and not _reads_only(merged):
            return None
        ctx = self.engine.context(resolve_anchor(self.spec, dict(anchor)), self.actor)
        make = _reader(merged) if puts is None else partial(store_ops.put_items, ops=puts)
        operation = make(ctx)
        try:
            step = next(operation)
        except Exception:  # StopIteration (no statement, or the general path) or a refusal
            return None
        if not isinstance(step, Step) or not step.last:
            operation.close()
            return None
        return _Batch(anchor, calls, where, merged, [converts[i] for i in firsts], puts, ctx,
                      operation, step)

    async def _send_many(self, batches: list[_Batch]) -> list[tuple[Anchor | None, list[_Call]]]:
        """Send ``batches`` in one round trip; settle their calls; return those to run again
        the general way."""
        again: list[tuple[Anchor | None, list[_Call]]] = []
        pool = self.engine._pool
        conn = await pool.getconn()
        try:
            rows = await afetch_each(conn, [
                OnceCall(batch.ctx.tenant, render(batch.step.statement, conn),
                         batch.step.params, batch.step.fetch) for batch in batches])
        finally:
            await pool.putconn(conn)
        for batch, got in zip(batches, rows, strict=True):
            if got is NOT_SENT:
                batch.operation.close()
                again.append((batch.anchor, batch.calls))
                continue
            try:
                results = await self._finish(batch, got)
            except Exception:  # as when one anchor's batch fails: each call runs alone
                for call in batch.calls:
                    await self._run_alone(call)
                continue
            _hand_out(batch.calls, batch.where,
                      [convert(r) for convert, r in zip(batch.converts, results, strict=True)])
        return again

    async def _finish(self, batch: _Batch, rows: Any) -> list[Any]:
        """The engine's results of a batch whose first statement (its whole transaction)
        returned ``rows``: its operation run on (a TTL refresh, in a transaction of its own),
        the puts it left run the general way (as in :meth:`_run_group`)."""
        operation, ctx = batch.operation, batch.ctx
        try:
            step = operation.send(rows)
        except StopIteration as done:
            value = done.value
        else:
            value = await self.engine.run_once(
                ctx, _resumed(operation, step),
                after_last="new" if batch.puts is None else "refuse")
        if batch.puts is None:
            await self.engine._accessed(ctx.tenant, _found(batch.ops, value))
            return list(value)
        self.engine.note_pending(ctx)
        return await self._rest(batch.anchor, batch.ops, _left_over(batch.puts, value))

    async def _run_calls(self, anchor: Anchor | None, calls: list[_Call]) -> None:
        if anchor is None or len(calls) == 1:
            for call in calls:
                await self._run_alone(call)
            return
        ops = [op for c in calls for op in c.ops]
        unique, where, firsts = _once(ops)
        # each call of one anchor is one group of its ops, in order: the batch's group is
        # the calls' groups end to end, less the repeated reads
        item_ops = [op for c in calls for op in c.plan[0][0].ops]
        converts = [convert for c in calls for convert in c.plan[0][0].converts]
        merged = _Group(anchor, list(range(len(firsts))), [item_ops[i] for i in firsts],
                        [converts[i] for i in firsts])
        try:
            results = await self._execute(unique, plan=([merged], len(unique)))
        except Exception:  # rerun one by one, below
            for call in calls:
                await self._run_alone(call)
            return
        _hand_out(calls, where, results)

    async def _run_alone(self, call: _Call) -> None:
        try:
            _settle(call, await self._execute(call.ops, plan=call.plan))
        except Exception as err:  # handed to the caller
            _settle(call, error=err)

    async def _execute(self, ops: Iterable[Op],
                       plan: tuple[list[_Group], int] | None = None) -> list[Result]:
        """The results of ``ops`` (``plan``: their translation, when made already)."""
        groups, count = plan if plan is not None else self._translator.plan(
            ops, expired=_keeps_expired(self.ttl_config))
        out: list[Result] = [None] * count
        for group in groups:
            self._translator.scatter(group, await self._run_group(group.anchor, group.ops),
                                     out)
        return out

    async def _run_group(self, anchor: Anchor, ops: list[ItemOp]) -> list[Any]:
        """As :meth:`MemoryStore._run_group`, on the async engine."""
        if _reads_only(ops):
            results = await self.engine.read(dict(anchor), _reader(ops), actor=self.actor)
            await self.engine._accessed(resolve_anchor(self.spec, dict(anchor)).tenant,
                                        _found(ops, results))
            return results
        rest: list[ItemOp] = ops
        puts = _puts_only(ops)
        if puts is not None:
            rest = _left_over(puts, await self.engine.write_once(
                dict(anchor), partial(store_ops.put_items, ops=puts), actor=self.actor))
        return await self._rest(anchor, ops, rest)

    async def _rest(self, anchor: Anchor, ops: list[ItemOp], rest: list[ItemOp]) -> list[Any]:
        """Run ``rest`` of ``ops`` (all of them, or the puts the one statement left) the
        general way, op by op in one transaction; the results of ``ops``."""
        written: list[Any] = [None] * len(ops)  # a put's result is None
        for attempt in (1, 2):
            if not rest:
                break
            try:
                done = await self.engine.write(dict(anchor), _arunner(rest), actor=self.actor)
                written = done if rest is ops else written
                break
            except StorageError as err:
                if attempt == 2 or not _lost_race(err):
                    raise
        return written

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            raise asyncio.InvalidStateError(
                "synchronous calls to AsyncMemoryStore from its own event loop would block "
                "it: use the async methods (await store.aput(...), store.aget(...), ...)")
        return asyncio.run_coroutine_threadsafe(self.abatch(list(ops)), self._loop).result()

    async def aclose(self) -> None:
        await self.engine.close()

    async def __aenter__(self) -> AsyncMemoryStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def _no_sweep() -> None:
    return None


_TAKE = 256
"""Queued calls one drainer takes at a time."""


class _Nothing:
    """No anchor is free to run (see :meth:`AsyncMemoryStore._drain`)."""


_NO_ANCHOR = _Nothing()


@dataclass
class _Work:
    """An async store's queue: waiting calls by anchor (None: calls spanning anchors), the
    anchors a task is running, and the running tasks."""

    queue: dict[Anchor | None, list[_Call]] = field(default_factory=dict)
    busy: set[Anchor] = field(default_factory=set)
    drainers: set[asyncio.Task[None]] = field(default_factory=set)
    held: dict[asyncio.Task[None], list[tuple[Anchor | None, list[_Call]]]] = field(
        default_factory=dict)
    """The anchors and calls each task is running."""


def _reads_first(calls: list[_Call]) -> list[list[_Call]]:
    """``calls`` of one anchor as the calls that only read and the others, in their order
    within each part (a part left empty is left out). The calls are in flight together, so
    any order between two of them is one a caller may see; reads first is the order a
    LangGraph batch runs its ops in (gets, searches and listings before puts)."""
    reads = [call for call in calls if _reads_only(call.plan[0][0].ops)]
    if not reads or len(reads) == len(calls):
        return [calls]
    return [reads, [call for call in calls if not _reads_only(call.plan[0][0].ops)]]


def _once(ops: list[Op]) -> tuple[list[Op], list[int], list[int]]:
    """The ops to run, each identical read once when none of ``ops`` writes; where each op's
    result is among them; and where each of them is in ``ops``. With a write, every op runs,
    in order."""
    if any(isinstance(op, PutOp) for op in ops):
        every = list(range(len(ops)))
        return ops, every, every
    unique: list[Op] = []
    firsts: list[int] = []
    seen: dict[Any, int] = {}
    where: list[int] = []
    for n, op in enumerate(ops):
        signature = _signature(op)
        if signature not in seen:
            seen[signature] = len(unique)
            unique.append(op)
            firsts.append(n)
        where.append(seen[signature])
    return unique, where, firsts


def _signature(op: Op) -> Any:
    """What makes two reads the same: a get's fields, else the op's ``repr`` (a search's
    filter is a dict)."""
    if type(op) is GetOp:
        return GetOp, tuple(op.namespace), op.key, op.refresh_ttl
    return repr(op)


@dataclass
class _Call:
    """One awaited ``abatch`` call waiting in an async store's queue."""

    ops: list[Op]
    future: asyncio.Future[list[Result]]
    plan: tuple[list[_Group], int]
    """The ops translated (:meth:`_Translator.plan`), in groups by anchor, and their count."""


@dataclass
class _Batch:
    """One anchor's queued calls as one transaction of one statement, ready to send: the
    calls, where each op's result is among the ops run (``where``), those ops translated
    and their converters, the puts (None: reads), the context, and the operation with the
    statement it yielded first."""

    anchor: Anchor
    calls: list[_Call]
    where: list[int]
    ops: list[ItemOp]
    converts: list[Convert]
    puts: list[ItemPut] | None
    ctx: Context
    operation: CoreOp[Any]
    step: Step


def _resumed(operation: CoreOp[R], step: Any) -> CoreOp[R]:
    """``operation`` from ``step``, the statement it yielded last and has not been sent."""
    while True:
        sent = yield step
        try:
            step = operation.send(sent)
        except StopIteration as done:
            value: R = done.value
            return value


def _hand_out(calls: list[_Call], where: list[int], results: list[Result]) -> None:
    """Settle each call with its ops' results (``where``: each op's among ``results``); a
    read run once for several callers gives each a copy."""
    handed: set[int] = set()

    def own(j: int) -> Result:
        result = results[j] if j not in handed else copy.deepcopy(results[j])
        handed.add(j)
        return result

    start = 0
    for call in calls:
        _settle(call, [own(where[i]) for i in range(start, start + len(call.ops))])
        start += len(call.ops)


def _settle(call: _Call, results: list[Result] | None = None, *,
            error: BaseException | None = None) -> None:
    if call.future.done():  # the caller was cancelled
        return
    if error is not None:
        call.future.set_exception(error)
    else:
        call.future.set_result(list(results or []))


def _arunner(ops: list[ItemOp]) -> Callable[[AsyncTenantMemory], Any]:
    return lambda mem: mem.item_batch(ops)
