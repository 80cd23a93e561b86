"""The engine's one core, shared by the sync and async executors (STYLE habit 7).

Each operation is a generator: it yields :class:`Step` s (a statement, its
parameters and how many rows it wants back), receives the rows, and returns its
result. The executors in ``_sync.py`` and ``_async.py`` only run steps, so the
logic (write policy, limits, supersession, journal events) exists once.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, NamedTuple, TypeVar
from uuid import UUID

from psycopg import sql
from psycopg.types.json import Jsonb

from primitives import retrieval
from primitives.compile import Tables
from primitives.db._oneshot import Fetch
from primitives.discipline import PiiScan, pii_guard
from primitives.embeddings import Embedder
from primitives.engine import _queries as q
from primitives.engine._anchor import Anchor
from primitives.engine._ids import new_uuid
from primitives.engine._input import (
    bounded_labels,
    bounded_text,
    check_json,
    check_object,
    clean_text,
)
from primitives.engine._records import MEMORY_COLUMNS, Explanation, Hit, Memory, SearchResult
from primitives.errors import (
    GovernanceError,
    ModelMismatch,
    PolicyViolation,
    StorageError,
    TenancyError,
)
from primitives.lifecycle import _boundary as boundary
from primitives.lifecycle import _cluster_writes as cluster_writes
from primitives.lifecycle._boundary import ScopeEnd
from primitives.lifecycle._decay import DecayModels, decay_models
from primitives.spec import AgentSpec

__all__ = ["Compute", "Context", "Embed", "Op", "Rerank", "Step", "canonical_json",
           "content_hash"]

@dataclass(frozen=True)
class Step:
    statement: sql.Composed | sql.SQL
    params: Mapping[str, Any]
    fetch: Fetch = "none"
    last: bool = False
    """The operation's final statement, when the operation is its transaction's only one: an
    executor may send the COMMIT with it (``Engine.observe``)."""


class Compute:
    """A step the executor runs with a model instead of the database (the async executor
    runs it in a worker thread); it is sent back ``compute()``."""

    def compute(self) -> Any:
        raise NotImplementedError


@dataclass(frozen=True)
class Embed(Compute):
    """Embed ``texts``: sent back one vector per text."""

    embedder: Embedder
    texts: tuple[str, ...]
    query: bool = False

    def compute(self) -> list[list[float]]:
        if self.query:
            return [self.embedder.embed_query(text) for text in self.texts]
        return self.embedder.embed_documents(self.texts)


@dataclass(frozen=True)
class Rerank(Compute):
    """Rerank the first ``top_n`` hits for ``query``: sent back all the hits, reordered."""

    reranker: retrieval.Reranker
    query: str
    hits: tuple[Hit, ...]
    top_n: int

    def compute(self) -> list[Hit]:
        return retrieval.rerank_hits(self.reranker, self.query, self.hits, self.top_n)


R = TypeVar("R")
Op = Generator[Step | Compute, Any, R]
"""An operation: yields steps, is sent each step's rows, returns its result (``Op[R]``)."""


def content_hash(text: str) -> str:
    """sha256 hex of ``text``: what the journal records instead of content itself."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, UTF-8: the same value always gives the same text."""
    if type(value) is dict and not value:
        return "{}"  # most values and envelopes: what json.dumps gives, without the encoder
    return _CANONICAL.encode(value)


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                              default=str)
"""What ``json.dumps`` with these settings builds on every call (its encoder is shared only
for the default settings), made once: a third of the time for a small value."""


@dataclass(frozen=True)
class Context:
    """What every operation needs: the spec, its tables, the anchor and the actor."""

    spec: AgentSpec
    tables: Tables
    signals: tuple[str, ...]
    anchor: Anchor
    actor: str
    has_embedding: bool = False
    embedder: Embedder | None = None
    checked_models: set[str] = field(default_factory=set)
    """Embedding models already checked against the tenant's rows in this transaction."""
    classifier: retrieval.IntentClassifier | None = None
    """Query intent for ``retrieval.intents`` (None: no intent routing)."""
    reranker: retrieval.Reranker | None = None
    """Reorders the top fused hits (None: off, the default)."""
    text_match: bool = False
    """The full-text index is on the leakproof match: the lexical signal matches with it."""
    trigram: bool = True
    """pg_trgm is installed: tier boundaries measure near-duplicate text with it."""
    decay: DecayModels | None = None
    """The spec's decay models (None: taken from the spec when a search needs them)."""
    job_seed: str | None = None
    """The job this transaction was opened as (a deterministic spec's ``seed_key``, from the
    anchor; ``Engine.tenant`` opens it): ids and timestamps are seeded
    (:mod:`primitives.engine._determinism`). None: not a job's transaction."""
    left_pending: list[UUID] = field(default_factory=list)
    """Rows this transaction wrote without a vector for a worker to embed
    (``retrieval.embedding.embed: deferred``, on a table with an embedding column)."""
    citus: bool = False
    """The database is a Citus coordinator: a statement Citus cannot route to one shard
    whole takes its cluster form (every write part ``INSERT ... VALUES``), and the search's
    settings statement keeps every plan a custom one (``retrieval.hnsw_settings(citus=True)``;
    docs/scaling.md)."""

    @property
    def tenant(self) -> str:
        return self.anchor.tenant

    @property
    def deferred(self) -> bool:
        """The spec defers embedding (``retrieval.embedding.embed: deferred``): writes store
        no vector; a worker embeds them later."""
        return self.spec.retrieval.embedding.embed == "deferred"

    @property
    def embeds(self) -> bool:
        """Writes store vectors inline: an embedder and an embedding column (pgvector)
        exist, and the spec does not defer embedding."""
        return self.embedder is not None and self.has_embedding and not self.deferred


DEFAULT_RERANK_TOP_N = 20
"""Hits a reranker reorders when the spec declares no ``retrieval.reranker.top_n``."""


# helpers ----------------------------------------------------------------------------------------
def search_scope(spec: AgentSpec) -> dict[str, float]:
    """The tiers a search covers by default, with their weights: ``retrieval.scope``, or every
    tier at weight 1 when the spec lists none."""
    return dict(spec.retrieval.scope) or {name: 1.0 for name in spec.tier_names}


def _event(ctx: Context, kind: str, memory_id: UUID | None, payload: Mapping[str, Any]) -> Step:
    return Step(q.insert_event(ctx.tables), {
        "tenant": ctx.tenant, "event_id": q.new_event_id(), "kind": kind,
        "memory_id": memory_id, "actor": ctx.actor, "payload": Jsonb(dict(payload)),
    })


def reason_payload(reason: str | None) -> dict[str, str | None]:
    """A caller's free-text reason as the journal records it: its sha256 only. The journal
    can never be changed, so text that erasure may have to remove never enters it."""
    return {"reason_sha256": content_hash(reason) if reason is not None else None}


def _text(value: str, what: str) -> str:
    """``value`` as a plain string, as the database stores it (a ``str`` subclass, such as a
    string enum member, becomes the text it holds); anything else is refused."""
    if type(value) is str:
        return value
    if isinstance(value, str):
        return str.__str__(value)
    raise PolicyViolation(f"{what} must be a string, not {type(value).__name__} ({value!r})")


def _memory_id(memory_id: UUID | str | None) -> UUID:
    """A new row's id: the caller's (a UUID, or its text) or a fresh random one."""
    if memory_id is None:
        return new_uuid()
    if type(memory_id) is UUID:
        return memory_id
    if not isinstance(memory_id, str | UUID):
        raise PolicyViolation(f"memory_id must be a UUID, not {type(memory_id).__name__}",
                              field="memory_id")
    try:
        return UUID(str(memory_id))
    except ValueError:
        raise PolicyViolation(f"memory_id must be a UUID, not {str(memory_id)[:64]!r}",
                              field="memory_id") from None


def _typology(spec: AgentSpec, tier: str, typology: str | None) -> str:
    kinds = spec.typology.get(tier)
    if kinds is None:
        raise TenancyError(f"unknown tier '{tier}' for agent '{spec.agent}'; tiers: "
                           f"{', '.join(spec.tier_names)}", tier=tier)
    if typology is None:
        if len(kinds) != 1:
            raise TenancyError(f"tier '{tier}' holds {', '.join(kinds)}: say which typology",
                               tier=tier)
        return kinds[0]
    if typology not in kinds:
        raise TenancyError(f"tier '{tier}' holds {', '.join(kinds)}, not '{typology}'",
                           tier=tier)
    return typology


def append_only(spec: AgentSpec, tier: str, typology: str) -> bool:
    """The typology's persistent rows are an append-only event store (``lifecycle.persistent:
    append_only``): their content is never replaced, so a keyed rewrite and a supersession
    are refused."""
    if not spec.tier(tier).persistent:
        return False
    policy = spec.behavior.lifecycle.get(typology)  # type: ignore[call-overload]
    return policy is not None and policy.persistent == "append_only"


def refuse_append_only(spec: AgentSpec, tier: str, typology: str, memory_id: UUID) -> None:
    if append_only(spec, tier, typology):
        raise GovernanceError(
            f"{typology} memory of agent '{spec.agent}' is append-only "
            f"(behavior.lifecycle.persistent: append_only): memory {memory_id} is never "
            "replaced; write a new entry instead", tier=tier, typology=typology,
            memory_id=str(memory_id))


def check_write_policy(spec: AgentSpec, tier: str, typology: str, *,
                       promotion: bool = False, approved: bool = False) -> None:
    """Refuse writes the spec's write policy routes elsewhere; say which path to take.

    It holds for every write a caller can start, a supersession included: the paths that
    may write governed or ``promotion_only`` memory (promotion, the approval flow, the
    sanitization crossing) are the engine's own operations, never an argument of a write.
    ``promotion``: the write is one of those operations of the engine's own (consolidation),
    which may write ``promotion_only`` memory; governed memory still needs its approval.
    ``approved``: the write is the governed path's own (:mod:`primitives.engine._sem`: an
    approved request or a recorded user intent), which may write governed memory."""
    if not promotion:
        for rule in spec.behavior.promotion:
            source = rule.from_.split(".", 1)[0]
            if rule.criteria == "references" and rule.to.split(".", 1)[0] == tier:
                raise GovernanceError(
                    f"tier '{tier}' of agent '{spec.agent}' is written only by promotion from "
                    f"{source} (behavior.promotion criteria references): observe the memory "
                    f"in {source}, reference it {rule.min_references} times within "
                    f"{rule.window_ticks} ticks, and tick()", tier=tier)
    policy = spec.behavior.write_policy.get(typology)  # type: ignore[call-overload]
    if policy is None:
        return
    if policy.mode == "promotion_only" and not promotion:
        raise GovernanceError(
            f"{typology} memory of agent '{spec.agent}' is written only by the promotion "
            "engine (behavior.write_policy: promotion_only); observe episodic memory and let "
            "behavior.promotion promote it", tier=tier, typology=typology,
        )
    if policy.mode == "governed" and not approved:
        kind = policy.governance.request_kind if policy.governance else "action request"
        raise GovernanceError(
            f"{typology} memory of agent '{spec.agent}' is governed: file a {kind} and write "
            "it once the request is approved", tier=tier, typology=typology,
        )


def check_limits(spec: AgentSpec, content: str, value: Mapping[str, Any],
                 envelope: Mapping[str, Any], *, value_json: str | None = None) -> None:
    """Refuse empty or oversized content, value and envelope (``value_json``: the value's
    :func:`canonical_json`, when the caller has it already)."""
    limits = spec.persistence.store.limits
    if not content.strip():
        raise PolicyViolation("memory content is empty")
    if len(content) > limits.content_chars:
        raise PolicyViolation(
            f"content is {len(content)} characters; agent '{spec.agent}' allows "
            f"{limits.content_chars} (persistence.store.limits.content_chars). Memory rows hold "
            "bounded notes, never canonical bodies: store a reference instead",
            limit=limits.content_chars,
        )
    for name, text, limit in (
            ("value", value_json if value_json is not None else canonical_json(value),
             limits.value_bytes),
            ("envelope", canonical_json(envelope) if envelope else "{}", limits.envelope_bytes)):
        size = len(text.encode("utf-8"))
        if size > limit:
            raise PolicyViolation(
                f"{name} is {size} bytes; agent '{spec.agent}' allows {limit} "
                f"(persistence.store.limits.{name}_bytes)", limit=limit,
            )


def embedding_text(spec: AgentSpec, content: str, envelope: Mapping[str, Any],
                   event_time: datetime | None) -> str:
    """The text a row's vector is made from (``retrieval.embedding``: ``text`` and
    ``envelope_keys``; then the row's own ``embed_context`` envelope mapping).

    ``content_with_context`` puts the event time in front of the content, as
    ``[1:56 pm on 8 May, 2023] <content>``: rows of one session share it and questions about
    when something happened land near them. Each of ``envelope_keys`` present in the
    envelope follows the content as `` (key: value)``; a conversation turn that carries the
    turn it answers is found by questions worded like either (LoCoMo recall@10 of MiniLM
    cosine: 0.466 content alone, 0.510 with date and time, 0.575 also with the previous turn;
    docs/retrieval.md).

    >>> embedding_text(spec, "Caroline: Adoption agencies.",  # doctest: +SKIP
    ...                {"previous": "Melanie: What did you research?"}, None)
    'Caroline: Adoption agencies. (previous: Melanie: What did you research?)'
    """
    config = spec.retrieval.embedding
    text = content
    if config.text == "content_with_context" and event_time is not None:
        hour = event_time.hour % 12 or 12
        meridiem = "am" if event_time.hour < 12 else "pm"
        text = (f"[{hour}:{event_time:%M} {meridiem} on {event_time.day} {event_time:%B}, "
                f"{event_time:%Y}] {content}")
    for key in config.envelope_keys:
        value = envelope.get(key)
        if value is None or value == "":
            continue
        text += f" ({key}: {value if isinstance(value, str) else canonical_json(value)})"
    # A row's own context (a store item's value ``embed_context``), after the spec's keys.
    own = envelope.get(EMBED_CONTEXT)
    if isinstance(own, Mapping):
        for key, value in own.items():
            if value is not None and value != "":
                text += f" ({key}: {value if isinstance(value, str) else canonical_json(value)})"
    return text


EMBED_CONTEXT = "embed_context"
"""The envelope key whose mapping a row adds to its embedded text (label: text, in order):
neither content nor searched lexically, stored with the row so re-embedding gives the same
vector. The store fills it from an item value's ``embed_context``."""


def check_model(ctx: Context, stored: str | None = None, *, fetch: bool = True) -> Op[None]:
    """Refuse to mix embedding models in the tenant's rows (``ModelMismatch``)."""
    embedder = ctx.embedder
    if embedder is None or embedder.model_id in ctx.checked_models:
        return
    if fetch:
        row = yield Step(retrieval.stored_model(ctx.tables), {"tenant": ctx.tenant}, "one")
        stored = row[0] if row else None
    if stored is not None and stored != embedder.model_id:
        raise ModelMismatch(
            f"tenant '{ctx.tenant}' of agent '{ctx.spec.agent}' holds vectors of {stored}; this "
            f"engine embeds with {embedder.model_id}, and cosine across models is meaningless. "
            f"Connect with an embedder for {stored}, or re-embed the tenant's rows with the new "
            "model: inside engine.tenant(...), call mem.reembed()",
            tenant=ctx.tenant, stored_model=stored, model=embedder.model_id)
    ctx.checked_models.add(embedder.model_id)


def _require(memory: Memory | None, memory_id: UUID) -> Memory:
    if memory is None:
        raise TenancyError(f"no memory {memory_id} in this tenant", memory_id=str(memory_id))
    return memory


# writes -----------------------------------------------------------------------------------------
class WriteInput(NamedTuple):
    """A write's fields as :func:`checked_write` checked and normalized them."""

    tier: str
    typology: str
    content: str
    value: dict[str, Any]
    envelope: dict[str, Any]
    value_json: str
    namespace: list[str]
    tags: list[str]
    key: str | None
    scope_id: str | None
    pii: PiiScan | None = None
    """What the spec's PII guard found and redacted (the fields above hold the redacted
    text); ``None`` when nothing was found or the tier is not scanned."""


def checked_write(spec: AgentSpec, tier: str, content: str, *, typology: str | None,
                  key: str | None, namespace: Sequence[str], value: Mapping[str, Any] | None,
                  envelope: Mapping[str, Any] | None, tags: Sequence[str],
                  scope_id: str | None, source: str | None = None,
                  promotion: bool = False, approved: bool = False) -> WriteInput:
    """Check a write against the spec (tier, typology, write policy, limits on every field)
    and turn its fields into what the row will hold: plain strings (the memory returned is
    built from them, :meth:`Memory.from_written`), lists of labels, the value's canonical
    JSON. A bad field is a PolicyViolation that names it, before anything is sent.

    Where the spec's PII policy scans the tier (:mod:`primitives.discipline._guard`), the
    content and the strings of value and envelope come back redacted (``pii`` says what was
    found), a blocked kind is refused with PrivacyBlocked, and so is a label holding
    personal data; the limits hold for what is stored."""
    limits = spec.persistence.store.limits
    tier, content = clean_text(tier, "tier"), clean_text(content, "content")
    typ = _text(_typology(spec, tier, typology), "typology")
    check_write_policy(spec, tier, typ, promotion=promotion, approved=approved)
    value, envelope = check_object(value, "value"), check_object(envelope, "envelope")
    # JSON checks before canonical_json, which would recurse into a deep value
    check_json(value, "value", depth=limits.json_depth)
    check_json(envelope, "envelope", depth=limits.json_depth)
    if source is not None:
        bounded_text(source, "source", limits.source_chars, "source_chars")
    labels = (
        bounded_labels(namespace, "namespace", count=limits.namespace_labels,
                       chars=limits.label_chars, count_setting="namespace_labels",
                       chars_setting="label_chars"),
        bounded_labels(tags, "tags", count=limits.tags, chars=limits.tag_chars,
                       count_setting="tags", chars_setting="tag_chars"),
        None if key is None else bounded_text(key, "key", limits.key_chars, "key_chars"),
        None if scope_id is None else bounded_text(scope_id, "scope_id", limits.scope_id_chars,
                                                   "scope_id_chars"))
    scan = None
    guard = pii_guard(spec)
    if guard is not None and guard.applies(tier):
        guard.check_labels({"key": labels[2], "namespace": labels[0], "tags": labels[1],
                            "source": source, "scope_id": labels[3]})
        scan = guard.scan(content, value, envelope)
        if scan is not None:
            content, value, envelope = scan.content, scan.value, scan.envelope
    value_json = canonical_json(value)
    check_limits(spec, content, value, envelope, value_json=value_json)
    return WriteInput(tier, typ, content, value, envelope, value_json, *labels, pii=scan)


_EMPTY_VALUE_SHA256 = content_hash("{}")


def observed_payload(w: WriteInput, row_key: str, via: str) -> dict[str, Any]:
    """The ``observed`` journal event's payload: where the row went, with hashes of its
    content and value instead of the text."""
    return {"tier": w.tier, "typology": w.typology, "key": row_key, "namespace": w.namespace,
            "scope_id": w.scope_id, "content_sha256": content_hash(w.content),
            "value_sha256": (_EMPTY_VALUE_SHA256 if w.value_json == "{}"
                             else content_hash(w.value_json)),
            "via": via}


_OBSERVE_FIELDS = ("typology", "key", "namespace", "value", "envelope", "tags", "scope_id",
                   "event_time", "source", "memory_id", "consent", "ttl_ticks", "references")
"""What a caller may give ``observe`` besides tier and content."""

KEY_RACE_ATTEMPTS = 16
"""Times a keyed write goes round when other writers of the same key keep winning the race
for the current-key slot; each lost round means another writer's version was written."""


def _refuse_unknown(spec: AgentSpec, tier: str, typology: str | None,
                    unknown: Mapping[str, Any]) -> None:
    """An argument ``observe`` does not take: ``via`` (the write path) is the engine's to
    choose, anything else is a mistake; neither is ever passed on."""
    if not unknown:
        return
    if "via" in unknown:
        # A governed typology: its own message says which path to take.
        check_write_policy(spec, tier, _typology(spec, tier, typology))
        raise GovernanceError(
            "'via' is not an argument of a write: the engine chooses the path. observe and "
            "supersede write directly under behavior.write_policy; promotion, the approval "
            "flow and sanitization write through their own operations", field="via")
    names = ", ".join(sorted(map(str, unknown)))
    raise PolicyViolation(f"observe takes no field {names}; its fields are tier, content, "
                          f"{', '.join(_OBSERVE_FIELDS)}", field=names)


def observe(
    ctx: Context, tier: str, content: str, *, typology: str | None = None,
    key: str | None = None, namespace: Sequence[str] = (),
    value: Mapping[str, Any] | None = None, envelope: Mapping[str, Any] | None = None,
    tags: Sequence[str] = (), scope_id: str | None = None, event_time: datetime | None = None,
    source: str | None = None, memory_id: UUID | str | None = None,
    embedding: Sequence[float] | None = None, final: bool = False,
    consent: UUID | str | None = None, ttl_ticks: int | None = None,
    references: Sequence[Any] = (), checked: WriteInput | None = None, **unknown: Any,
) -> Op[Memory]:
    """Write a memory. With ``key``, the write is an atomic supersession: an unchanged write
    returns the current row (no event), a changed one supersedes it (the old row stays,
    marked), and concurrent writers of one key each get a version in one linear history.
    ``memory_id`` is the write's idempotency key: a retry of a write that did commit
    returns the row written then (keyed: even once a later version superseded it), and
    writes and journals nothing. With an
    embedder, the row stores its vector and the model's id (``embedding`` when the caller
    already has it). ``final``: this operation is the whole transaction, so its last
    statement is marked ``last``. ``consent``: the id of a ``pii_consent`` event of this
    tenant (:func:`record_consent`): values the PII policy redacts are also kept raw, for the
    privacy admin's logged read (the row still holds the redacted text). ``ttl_ticks``: the
    row's time to live in ticks, on a tier that declares ``ttl_ticks`` (the tier's value
    when None; :mod:`primitives.engine._ticks`). ``references``: canonical rows the note
    refers to (``(category, key[, version])`` items, :func:`~primitives.engine._canonical.
    reference`), written with the row in its transaction: a reference refused (an unknown
    row, a note longer than the category's ``note_chars``) writes nothing. Under an ``auto``
    write policy with ``sampling`` below 1, an unkeyed observation the sampling leaves out is
    journalled ``sampled_out`` and not written (:func:`sampled_in`); the memory returned is
    marked :attr:`~Memory.sampled_out`. ``checked``: these same fields as
    :func:`checked_write` already returned them (the engines' one-message path hands its
    result over when the write must take this path), so the spec's checks and the PII scan
    do not run twice. Any other argument is refused (``via`` among them)."""
    w, rest = _checked_observe(ctx, tier, content, typology=typology, key=key,
                               namespace=namespace, value=value, envelope=envelope, tags=tags,
                               scope_id=scope_id, event_time=event_time, source=source,
                               memory_id=memory_id, consent=consent, ttl_ticks=ttl_ticks,
                               checked=checked, **unknown)
    from primitives.engine import _canonical
    refs = _canonical.checked_references(ctx, references) if references else []
    share = write_sampling(ctx.spec, w.typology)
    if share < 1.0 and w.key is None:
        rest["memory_id"] = new_id = _memory_id(rest["memory_id"])
        if not sampled_in(new_id, share):
            return (yield from _sampled_out(ctx, w, new_id, share, rest["event_time"], final))
    memory = yield from _write(ctx, w, embedding=embedding, final=final and not refs,
                               via="direct", **rest)
    for category, ref_key, version in refs:
        yield from _canonical.reference(ctx, memory.id, category, ref_key, version=version)
    return memory


SAMPLED_OUT_EVENT: Final = "sampled_out"
"""The journal event of an observation the write policy's ``sampling`` left unwritten."""


def write_sampling(spec: AgentSpec, typology: str) -> float:
    """The share of a typology's unkeyed observations that are written: its write policy's
    ``sampling`` under mode ``auto`` (seed 003 §8: auto-written episodes, their volume
    controlled by sampling), else 1 (every one)."""
    policy = spec.behavior.write_policy.get(typology)  # type: ignore[call-overload]
    return policy.sampling if policy is not None and policy.mode == "auto" else 1.0


def sampled_in(memory_id: UUID, share: float) -> bool:
    """Whether the observation with id ``memory_id`` is written under ``share``: the first
    eight bytes of the sha256 of the id, as a fraction of 2**64, fall below it. Seeded by
    the id, so a retry (the same ``memory_id``) decides the same way and a test passes ids
    whose outcome it knows."""
    digest = hashlib.sha256(memory_id.bytes).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64 < share


def _sampled_out(ctx: Context, w: WriteInput, new_id: UUID, share: float,
                 event_time: datetime | None, final: bool) -> Op[Memory]:
    """Journal an observation sampling leaves out (``sampled_out``: where it would have gone,
    the share, the content's sha256, never the text) and return the memory it would have
    been, marked :attr:`~Memory.sampled_out`; no row is written. A retry (the same
    ``memory_id``, so the same decision) journals nothing new: the event is appended only
    where the tenant's journal holds no ``sampled_out`` event of that id yet, as a retried
    write that did commit writes nothing again."""
    payload = {**observed_payload(w, str(new_id), "direct"), "sampling": share}
    step = _event(ctx, SAMPLED_OUT_EVENT, new_id, payload)
    yield Step(q.insert_event_once(ctx.tables), step.params, last=final)
    now = datetime.now(UTC)
    return Memory(id=new_id, tier=w.tier, typology=w.typology, scope_id=w.scope_id,
                  namespace=tuple(w.namespace), key=str(new_id), content=w.content,
                  value=dict(w.value), envelope=dict(w.envelope), tags=tuple(w.tags),
                  confidence=1.0, event_time=event_time or now, created_at=now,
                  updated_at=now, superseded_at=None, invalidated_at=None, archived_at=None,
                  tombstoned_at=None, persistent=False, sampled_out=True)


def _checked_observe(
    ctx: Context, tier: str, content: str, *, typology: str | None = None,
    key: str | None = None, namespace: Sequence[str] = (),
    value: Mapping[str, Any] | None = None, envelope: Mapping[str, Any] | None = None,
    tags: Sequence[str] = (), scope_id: str | None = None, event_time: datetime | None = None,
    source: str | None = None, memory_id: UUID | str | None = None,
    consent: UUID | str | None = None, ttl_ticks: int | None = None,
    checked: WriteInput | None = None, **unknown: Any,
) -> tuple[WriteInput, dict[str, Any]]:
    """:func:`observe`'s fields checked (and redacted where the PII policy says): the write
    input, and the rest of what :func:`_write` takes from them."""
    _refuse_unknown(ctx.spec, tier, typology, unknown)
    if event_time is not None and not isinstance(event_time, datetime):
        raise PolicyViolation(f"event_time must be a datetime, not {type(event_time).__name__}",
                              field="event_time")
    w = checked if checked is not None else checked_write(
        ctx.spec, tier, content, typology=typology, key=key, namespace=namespace,
        value=value, envelope=envelope, tags=tags, scope_id=scope_id, source=source)
    from primitives.engine import _ticks
    return w, {"event_time": event_time, "source": source, "memory_id": memory_id,
               "consent": consent, "ttl_ticks": _ticks.write_ttl(ctx.spec, w.tier, ttl_ticks)}


def _write(ctx: Context, w: WriteInput, *, event_time: datetime | None, source: str | None,
           memory_id: UUID | str | None, embedding: Sequence[float] | None, final: bool,
           via: str, consent: UUID | str | None = None,
           provenance: Mapping[str, Any] | None = None,
           ttl_ticks: int | None = None, confidence: float | None = None) -> Op[Memory]:
    """Write the checked ``w`` (see :func:`observe`); ``via`` is the engine's path, kept in
    the journal; ``provenance``: what the engine's own path records of where the row came
    from (consolidation: ``derived_from``), beside the PII guard's hashes. ``confidence``:
    the row's initial confidence; by default, for a caller's write (``direct``,
    ``supersede``), the one ``graph.confidence`` gives its source (:func:`source_confidence`)."""
    spec = ctx.spec
    if confidence is None and via in ("direct", "supersede"):
        confidence = source_confidence(spec, source)
    consent_id = (yield from _consent(ctx, consent)) if w.pii is not None else None
    tier, typ, content, value, envelope = w.tier, w.typology, w.content, w.value, w.envelope
    ns, tag_list, key, scope_id = w.namespace, w.tags, w.key, w.scope_id
    if ttl_ticks is None:  # every path's row of a ticked tier lives the tier's ticks
        ttl_ticks = spec.tier(tier).ttl_ticks
    new_id = _memory_id(memory_id)
    vector: dict[str, Any] = {}
    if ctx.embeds:
        assert ctx.embedder is not None
        yield from check_model(ctx)
        if embedding is None:
            text = embedding_text(spec, content, envelope, event_time)
            embedding = (yield Embed(ctx.embedder, (text,)))[0]
        vector = {"embedding": retrieval.vector_literal(embedding),
                  "embedding_model": ctx.embedder.model_id}
    row_key = key if key is not None else str(new_id)
    insert = q.insert_memory_observed(ctx.tables, ctx.tables.anchor_columns,
                                      embedding=bool(vector), scoped=scope_id is not None,
                                      confidence=confidence is not None, citus=ctx.citus)
    linked = links_to_previous(spec, scope_id)
    # an instant: the column is timestamptz; in a job on the tick clock, the clock's (the
    # memories trigger sets it)
    when: datetime | None = event_time or (
        None if ctx.job_seed is not None and spec.determinism.clock == "ticks" and not linked
        else datetime.now(UTC))
    params = {
        **ctx.anchor.as_dict(), **vector,
        "id": new_id, "tier": tier, "typology": typ, "scope_id": scope_id, "namespace": ns,
        "key": row_key, "content": content,
        "value": Jsonb(value), "envelope": Jsonb(envelope), "tags": tag_list,
        "provenance": Jsonb({**dict(ctx.anchor.provenance), **(provenance or {}),
                             **(w.pii.provenance() if w.pii is not None else {})}),
        "event_time": when,
        "source": source, "actor": ctx.actor, "tenant": ctx.tenant,
        "event_id": q.new_event_id(), "confidence": confidence,
        "payload": Jsonb({**observed_payload(w, row_key, via),
                          **({"provenance": dict(ctx.anchor.provenance)}
                             if ctx.anchor.provenance else {})}),
    }
    policy = None if append_only(spec, tier, typ) else _conflict_policy(spec, typ)
    candidate: UUID | None = None
    if key is None and policy is not None and policy.detect == "similarity":
        # a fresh key: the closest active row of the tier and typology, if it is close
        # enough and says something else, is what this write contradicts
        found = yield Step(q.similar_current(ctx.tables, similarity_kind(ctx, text=True)), {
            "tenant": ctx.tenant, "tier": tier, "typology": typ, "content": content,
            "threshold": policy.similarity}, "one")
        candidate = found[0] if found else None
        if candidate is not None:
            # superseded first, as a keyed write frees its slot before the insert
            freed = yield Step(q.supersede(ctx.tables), {
                "tenant": ctx.tenant, "id": candidate, "by": new_id}, "one")
            if freed is None:
                candidate = None
            else:
                yield _event(ctx, "superseded", candidate, {"by": str(new_id)})
    if ctx.citus and key is not None:
        # On a cluster the insert cannot write nothing on a taken slot (it raises): writers
        # of this key take turns from here on, on the coordinator, until this one commits.
        yield key_lock_step(ctx, tier, ns, key)
    for _ in range(KEY_RACE_ATTEMPTS):
        previous: Memory | None = None
        if key is not None:
            # The current version, locked: writers of this key take turns from here on.
            row = yield Step(q.current_by_key(ctx.tables), {
                "tenant": ctx.tenant, "tier": tier, "namespace": ns, "key": key}, "one")
            if row is not None:
                previous = Memory.from_row(row)
                if (previous.content, previous.value, previous.envelope, previous.typology,
                        list(previous.tags)) == (content, value, envelope, typ, tag_list):
                    return previous  # unchanged, or the retry of a write that committed
                if previous.id == new_id:
                    raise reused_id(new_id)
                refuse_append_only(spec, tier, typ, previous.id)
                # Free the current-key slot first; the new row takes it. The old row stays.
                freed = yield Step(q.supersede(ctx.tables), {
                    "tenant": ctx.tenant, "id": previous.id, "by": new_id}, "one")
                if freed is None:  # this id is written already; a later version followed it
                    return (yield from _written_before(ctx, w, new_id))
                yield _event(ctx, "superseded", previous.id, {"by": str(new_id)})
        # The row, its journal event and the scope mark: one statement, one round trip. It
        # writes nothing when the id or the current-key slot is taken; then it returns the
        # row of this id if that row is this write (a retry), else nothing. Only a new key
        # can lose a race and go round again, so only then is the COMMIT held back.
        may_retry = key is not None and previous is None and not ctx.citus
        resolves = policy is not None and (previous is not None or candidate is not None)
        if ctx.citus:
            written = yield Step(q.written_id(ctx.tables), {"tenant": ctx.tenant, "id": new_id},
                                 "one")
            if written is not None:
                if tuple(written[:3]) != (tier, row_key, content):
                    raise reused_id(new_id)
                row = tuple(written[3:])  # the retry of a write whose COMMIT did happen
                break
        row = yield Step(insert, params, "one",
                         last=final and not linked and not may_retry and not resolves
                         and w.pii is None and ttl_ticks is None)
        if row is not None:
            break
        if not may_retry:
            raise reused_id(new_id)
        # Another writer took the new key first; its version is now the one to supersede.
    else:
        raise StorageError(
            f"a keyed write of '{key}' lost the race for its key {KEY_RACE_ATTEMPTS} times to "
            "concurrent writers; retry it", tenant=ctx.tenant, key=key)
    if ttl_ticks is not None:
        from primitives.engine import _ticks
        yield _ticks.set_ttl_step(ctx, new_id, ttl_ticks)
    if w.pii is not None:
        yield from _redacted(ctx, w, w.pii, new_id, consent_id)
    if policy is not None and candidate is not None:
        yield from resolve_conflict(ctx, policy, candidate, new_id, detected="similarity")
    elif policy is not None and previous is not None:
        yield from resolve_conflict(ctx, policy, previous.id, new_id, detected="key")
    if linked and ctx.citus:
        yield from _temporal_edge_citus(ctx, tier, scope_id, new_id, when)
    elif linked:
        yield Step(q.temporal_edge(ctx.tables), {
            "tenant": ctx.tenant, "tier": tier, "scope_id": scope_id, "id": new_id,
            "event_time": when, "actor": ctx.actor}, last=final)
    if not vector and ctx.has_embedding and ctx.deferred:
        ctx.left_pending.append(new_id)  # the row waits for the embedding worker
    # The insert read back what the server set or normalized; the rest is what it wrote.
    return Memory.from_written({
        "id": new_id, "tier": tier, "typology": typ, "scope_id": scope_id, "namespace": ns,
        "key": row_key, "content": content, "tags": tag_list}, row)


PII_REDACTED_EVENT = "pii_redacted"
"""The journal event of a write whose personal data was redacted (seed 001's PII_REDACTED)."""
PII_CONSENT_EVENT = "pii_consent"
"""The journal event a caller records before a write that keeps raw values with consent."""


def _consent(ctx: Context, consent: UUID | str | None) -> Op[UUID | None]:
    """The consent event ``consent`` names, checked: the policy must allow raw values with
    consent, and the event must be a ``pii_consent`` event of this tenant."""
    if consent is None:
        return None
    guard = pii_guard(ctx.spec)
    assert guard is not None
    if not guard.policy.raw_with_consent or ctx.tables.pii_raw is None:
        raise PolicyViolation(
            f"PII policy '{guard.policy_name}' of agent '{ctx.spec.agent}' never keeps raw "
            "personal data, consent or not (raw_with_consent: false); write without consent "
            "and the values are redacted", field="consent", policy=guard.policy_name)
    try:
        event_id = consent if type(consent) is UUID else UUID(str(consent))
    except ValueError:
        raise PolicyViolation(f"consent must be the id of a consent event, not {consent!r}",
                              field="consent") from None
    found = yield Step(q.consent_event(ctx.tables), {"tenant": ctx.tenant, "id": event_id,
                                                     "kind": PII_CONSENT_EVENT}, "one")
    if found is None:
        raise PolicyViolation(
            f"no consent event {event_id} in this tenant: record one with "
            "mem.record_consent(...) and pass its id", field="consent",
            consent=str(event_id))
    return event_id


def _redacted(ctx: Context, w: WriteInput, scan: PiiScan, memory_id: UUID,
              consent: UUID | None) -> Op[None]:
    """Journal what was redacted in ``memory_id`` (kinds, fields and counts; never a value)
    and, with consent, keep the raw fields for the privacy admin's read."""
    guard = pii_guard(ctx.spec)
    assert guard is not None
    fields = sorted({str(f["field"]).split(".")[0].split("[")[0] for f in scan.findings})
    yield _event(ctx, PII_REDACTED_EVENT, memory_id, {
        "policy": guard.policy_name, "tier": w.tier, "typology": w.typology,
        "kinds": scan.kinds, "fields": fields,
        "action": "kept_with_consent" if consent is not None else "redacted",
        "consent_event": str(consent) if consent is not None else None,
        "hashes_kept": guard.policy.store_hash})
    if consent is not None:
        assert ctx.tables.pii_raw is not None
        content, value, envelope = scan.raw
        yield Step(q.insert_pii_raw(ctx.tables), {
            "tenant": ctx.tenant, "memory_id": memory_id, "content": content,
            "value": Jsonb(value), "envelope": Jsonb(envelope), "consent": consent})


def record_consent(ctx: Context, *, kinds: Sequence[str] = (),
                   reason: str | None = None) -> Op[UUID]:
    """Journal a ``pii_consent`` event (the kinds it covers, the reason's hash) and return
    its id, for ``observe(..., consent=<id>)``."""
    guard = pii_guard(ctx.spec)
    if guard is None:
        raise PolicyViolation(f"agent '{ctx.spec.agent}' has no PII policy "
                              "(discipline.pii): there is nothing to consent to")
    unknown = sorted(set(kinds) - set(guard.policy.detectors))
    if unknown:
        raise PolicyViolation(f"PII policy '{guard.policy_name}' detects "
                              f"{', '.join(guard.policy.detectors)}, not {', '.join(unknown)}",
                              field="kinds")
    step = _event(ctx, PII_CONSENT_EVENT, None, {
        **reason_payload(reason), "kinds": sorted(kinds) or list(guard.policy.detectors)})
    yield step
    event_id: UUID = step.params["event_id"]
    return event_id


def read_raw(ctx: Context, memory_id: UUID, *, reason: str) -> Op[dict[str, Any] | None]:
    """The raw fields kept with consent for ``memory_id`` (content, value, envelope and the
    consent event), through the privacy admin's function, which journals the read; ``None``
    when nothing raw is kept for it."""
    if ctx.tables.pii_raw is None:
        raise PolicyViolation(f"agent '{ctx.spec.agent}' keeps no raw personal data "
                              "(no PII policy with raw_with_consent)")
    if not isinstance(reason, str) or not reason.strip():
        raise PolicyViolation("a raw read needs a reason: it is journalled", field="reason")
    row = yield Step(q.read_pii_raw(ctx.tables), {
        "id": memory_id, "event_id": q.new_event_id(), "actor": ctx.actor,
        "payload": Jsonb(reason_payload(reason))}, "one")
    if row is None or row[0] is None:
        return None
    return {"content": row[0], "value": row[1], "envelope": row[2], "consent_event": row[3]}


CONTRADICTED_CONFIDENCE = 0.3
"""update_with_validity: the contradicted memory's confidence (seed 002 §12.3)."""
CONTRADICTED_DECAY_RATE = 0.5
"""update_with_validity: the contradicted memory's decay rate (seed 002 §12.3)."""


def similarity_detects(spec: AgentSpec, typology: str) -> bool:
    """A write of ``typology`` looks for the similar memory it contradicts (``detect:
    similarity`` with a strategy other than noop), so it cannot take a one-statement path."""
    policy = _conflict_policy(spec, typology)
    return policy is not None and policy.detect == "similarity"


def _conflict_policy(spec: AgentSpec, typology: str) -> Any:
    """The typology's conflict policy when it changes the older memory (None for noop)."""
    policy = spec.behavior.conflict.get(typology)  # type: ignore[call-overload]
    return None if policy is None or policy.strategy == "noop" else policy


def resolve_conflict(ctx: Context, policy: Any, old_id: UUID, new_id: UUID, *,
                     detected: str) -> Op[None]:
    """Apply the typology's conflict strategy to ``old_id``, which ``new_id`` superseded:
    ``update_with_validity`` ends its validity (``invalidated_at``) and lowers its confidence
    and decay rate (0.3 and 0.5 unless the spec says otherwise); ``update_with_supersession``
    archives it (confidence and decay rate only where the spec sets them). Graph specs with
    ``supersedes`` edges also get one, new -> old. A ``conflict_resolved`` event."""
    validity = policy.strategy == "update_with_validity"
    confidence = policy.contradicted_confidence
    decay_rate = policy.contradicted_decay_rate
    if validity:
        confidence = CONTRADICTED_CONFIDENCE if confidence is None else confidence
        decay_rate = CONTRADICTED_DECAY_RATE if decay_rate is None else decay_rate
    row = yield Step(q.resolve_conflict(ctx.tables, citus=ctx.citus), {
        "tenant": ctx.tenant, "id": old_id, "invalidate": validity, "archive": not validity,
        "confidence": confidence, "decay_rate": decay_rate}, "one")
    yield _event(ctx, "conflict_resolved", old_id, {
        "strategy": policy.strategy, "old": str(old_id), "new": str(new_id),
        "detected": detected, "previous_confidence": row[1] if row else None,
        "confidence": confidence, "decay_rate": decay_rate})
    graph = ctx.spec.graph
    if graph is not None and "supersedes" in graph.edges and ctx.tables.edges is not None:
        from primitives.engine import _graph
        yield from _graph.relate(ctx, new_id, old_id, "supersedes", evidence=[
            {"reason": "conflict", "strategy": policy.strategy, "detected": detected}])


def _written_before(ctx: Context, w: WriteInput, memory_id: UUID) -> Op[Memory]:
    """The row ``memory_id`` names, when it holds the write ``w`` (a retry of a keyed write
    whose COMMIT happened, superseded since by a later version); otherwise the id was reused
    for another write, which is refused."""
    found = Memory.from_row_or_none((yield get_step(ctx, memory_id)))
    if found is None or (found.tier, found.key, found.content) != (w.tier, w.key, w.content):
        raise reused_id(memory_id)
    return found


def key_lock_step(ctx: Context, tier: str, namespace: Sequence[str], key: str) -> Step:
    """On a cluster: the transaction lock that keyed writers of ``key`` take on the
    coordinator before they read its current version (held until commit, when the workers
    have committed too), so that no two insert the same current-key slot."""
    scope = canonical_json([ctx.tables.memories.qualified, tier, list(namespace), key])
    return Step(_KEY_LOCK, {"tenant": ctx.tenant, "scope": scope})


_KEY_LOCK = sql.SQL("SELECT primitives.tenant_xact_lock(%(tenant)s, %(scope)s)")
"""Runs on the coordinator (the function is not distributed); for the transaction's own
tenant only (migration 0004)."""


def with_idempotency_key(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` of a write its executor may retry, with a ``memory_id`` chosen once for
    every attempt, so a retry after a lost COMMIT acknowledgement finds the row it wrote,
    keyed or not (a keyed one may have been superseded by another writer in between)."""
    if fields.get("memory_id") is not None:
        return fields
    return {**fields, "memory_id": new_uuid()}


def reused_id(memory_id: UUID) -> PolicyViolation:
    return PolicyViolation(
        f"memory_id {memory_id} already names another memory of this tenant; a retry must "
        "repeat the same write, a new write needs a new id", memory_id=str(memory_id),
        field="memory_id")


CONFIDENCE_SOURCES = ("user", "extraction", "inference")
"""The ``graph.confidence`` sources a write can come from (seed 002 §12.1); ``confirmed``
and ``contradicted`` are what confirmation and contradiction set."""


def source_confidence(spec: AgentSpec, source: str | None) -> float | None:
    """The initial confidence of a caller's write under ``graph.confidence`` (seed 002
    §12.1): the value of ``source`` when it names a source (``observe(..., source=
    "inference")``), else the ``user`` value (a caller's write is what the user stated);
    None when the spec declares neither (the column's default, 1). Under
    agents/assistant_memory.yaml, ``source_confidence(spec, None)`` is 1.0 and
    ``source_confidence(spec, "inference")`` 0.6.
    """
    declared = dict(spec.graph.confidence) if spec.graph is not None else {}
    if source in CONFIDENCE_SOURCES and source in declared:
        return float(declared[source])
    return float(declared["user"]) if "user" in declared else None


def _temporal_edge_citus(ctx: Context, tier: str, scope_id: str | None, new_id: UUID,
                         when: Any) -> Op[None]:
    """:func:`q.temporal_edge` on a Citus coordinator, which runs an ``INSERT ... SELECT``
    through ``COPY`` (refused under row-level security): the previous row is read first,
    then the edge and its ``edge_recorded`` event are inserted with ``VALUES``."""
    row = yield Step(q.temporal_edge_source_citus(ctx.tables), {
        "tenant": ctx.tenant, "tier": tier, "scope_id": scope_id, "id": new_id,
        "event_time": when}, "one")
    if row is None:
        return None
    edge = yield Step(q.insert_temporal_edge_citus(ctx.tables), {
        "tenant": ctx.tenant, "source_id": row[0], "id": new_id}, "one")
    assert edge is not None
    yield _event(ctx, "edge_recorded", row[0], {
        "edge_id": str(edge[0]), "target_id": str(new_id), "relation_type": "temporal",
        "weight": 1, "confidence": 1, "automatic": True})
    return None


def links_to_previous(spec: AgentSpec, scope_id: str | None) -> bool:
    """A write in a scope links to the scope's previous row by a temporal edge when the spec
    asks (``graph.temporal_edges_on_write``, ``temporal`` among ``graph.edges``)."""
    graph = spec.graph
    return (scope_id is not None and graph is not None and graph.temporal_edges_on_write
            and "temporal" in graph.edges)


def supersede(ctx: Context, memory_id: UUID, content: str, *,
              value: Mapping[str, Any] | None = None,
              envelope: Mapping[str, Any] | None = None, reason: str | None = None) -> Op[Memory]:
    """Replace an active memory with a new version; the old row stays, linked to the new.

    The typology's write policy holds as for :func:`observe`. The old row is locked first:
    of two concurrent supersessions of one version, the second finds it superseded and is
    refused (a GovernanceError naming the current version), not written over the first."""
    old = _require(Memory.from_row_or_none(
        (yield Step(q.select_memory_for_update(ctx.tables),
                    {"tenant": ctx.tenant, "id": memory_id}, "one"))), memory_id)
    refuse_append_only(ctx.spec, old.tier, old.typology, memory_id)
    if not old.active:
        state = "superseded" if old.superseded_at is not None else old.state
        raise GovernanceError(f"memory {memory_id} is not active ({state}); only an "
                              "active memory can be superseded (read its key's current "
                              "version and supersede that)", memory_id=str(memory_id))
    w = checked_write(ctx.spec, old.tier, content, typology=old.typology, key=old.key,
                      namespace=old.namespace,
                      value=value if value is not None else old.value,
                      envelope=envelope if envelope is not None else old.envelope,
                      tags=old.tags, scope_id=old.scope_id)
    new = yield from _write(ctx, w, event_time=None, source=None, memory_id=None,
                            embedding=None, final=False, via="supersede")
    if reason:
        yield _event(ctx, "supersession_reason", old.id, reason_payload(reason))
    return new


_STATE_COLUMNS = {"invalidate": "invalidated_at", "archive": "archived_at",
                  "tombstone": "tombstoned_at"}
_STATE_EVENTS = {"invalidate": "invalidated", "archive": "archived", "tombstone": "tombstoned"}


def change_state(ctx: Context, action: str, memory_id: UUID, *, reason: str | None,
                 at: datetime | None = None, cause: str | None = None,
                 approved: bool = False) -> Op[Memory]:
    """Invalidate, archive or tombstone: a state column is set; the row is never removed.
    The caller's ``reason`` is journaled as a hash; ``cause``, a fixed label of the engine's
    own (``store: deleted``), in clear. A tombstone of governed memory is the approved
    deletion's alone (``approved``, :func:`primitives.engine._sem.approve`)."""
    memory = _require(Memory.from_row_or_none((yield get_step(ctx, memory_id))), memory_id)
    policy = ctx.spec.behavior.write_policy.get(memory.typology)  # type: ignore[call-overload]
    if (action == "tombstone" and not approved and policy is not None
            and policy.mode == "governed"):
        raise GovernanceError(
            f"{memory.typology} memory of agent '{ctx.spec.agent}' is governed: deleting it "
            f"needs a deletion request approved by {', '.join(_deletion_requires(ctx.spec)) or 'its approvers'} "
            "(request_deletion), never a direct tombstone", memory_id=str(memory_id),
            typology=memory.typology)
    column = _STATE_COLUMNS[action]
    if getattr(memory, column) is not None:
        return memory
    row = yield Step(q.set_state(ctx.tables, column), {
        "tenant": ctx.tenant, "id": memory_id, "at": at or datetime.now().astimezone()}, "one")
    payload: dict[str, Any] = {**reason_payload(reason), "column": column}
    if cause is not None:
        payload["cause"] = cause
    yield _event(ctx, _STATE_EVENTS[action], memory_id, payload)
    lifecycle = ctx.spec.behavior.lifecycle.get(memory.typology)  # type: ignore[call-overload]
    if (action == "invalidate" and lifecycle is not None
            and "explicit_invalidation" in lifecycle.archive_on and memory.archived_at is None):
        # the typology archives on explicit invalidation (procedural's default)
        row = yield Step(q.set_state(ctx.tables, "archived_at"), {
            "tenant": ctx.tenant, "id": memory_id, "at": at or datetime.now().astimezone()},
            "one")
        yield _event(ctx, "archived", memory_id, {"column": "archived_at",
                                                   "cause": "explicit_invalidation"})
    return Memory.from_row(row)


def link_action(ctx: Context, action_id: str, memory_ids: Sequence[UUID], kind: str) -> Op[int]:
    """Record that ``action_id`` relied on these memories; they can never be hard-deleted."""
    if not action_id or not memory_ids:
        raise PolicyViolation("link_action needs an action id and at least one memory id")
    linked = 0
    for memory_id in memory_ids:
        _require(Memory.from_row_or_none((yield get_step(ctx, memory_id))), memory_id)
        row = yield Step(q.insert_link(ctx.tables), {
            "tenant": ctx.tenant, "action_id": action_id, "memory_id": memory_id,
            "kind": kind}, "one")
        if row is not None:
            linked += 1
            yield _event(ctx, "action_linked", memory_id, {"action_id": action_id, "kind": kind})
    return linked


def end_scope(ctx: Context, tier: str, scope_id: str, *,
              into_scope: str | None = None, extractor: Any = None,
              reflective_log_id: str | None = None) -> Op[ScopeEnd]:
    """End one scope of a transient tier at its boundary (:mod:`primitives.lifecycle._boundary`):
    its rows compound into the next tier (corroborating near-duplicates there, promoting the
    rest), then leave as their typology's lifecycle declares (removed or archived);
    action-linked rows stay. Corroboration promotions then run for the tenant. Every change is
    a journal event. ``into_scope`` names the scope of the next tier that compounded rows land
    in, needed when that tier is transient. Returns a :class:`ScopeEnd`, a ``(removed, kept)``
    pair with the other counts as attributes. It first takes the tenant's maintain lock
    (:func:`~primitives.lifecycle._boundary.scope_end_lock_statement`), so it never runs
    beside a ``maintain`` batch of the same tenant.

    Where the spec's extraction rules (``behavior.promotion`` criteria ``extraction``) run
    at this tier's end, the scope's episodes are consolidated first, before any leave
    (:func:`primitives.engine._consolidate.consolidate_scope`), with ``extractor`` (an
    :class:`~primitives.extraction.Extractor`; the spec's default when None).

    Where a ``summary`` promotion runs at ``job_end`` and ``tier`` ends with the job, the
    summary of its source tier is appended first
    (:func:`primitives.engine._ticks.job_summaries`, with ``reflective_log_id``)."""
    spec = ctx.spec
    if tier not in spec.tier_names:
        raise TenancyError(f"unknown tier '{tier}'; tiers: {', '.join(spec.tier_names)}")
    if spec.tier(tier).persistent:
        raise GovernanceError(
            f"tier '{tier}' is persistent: its memory is never removed at scope end "
            "(archive or tombstone individual memories instead)", tier=tier)
    scope_id = _text(scope_id, "scope_id")
    upward = [rule for rule in boundary.boundary_rules(spec) if rule.from_tier == tier
              and not spec.tier(rule.to_tier).persistent]
    if upward and into_scope is None:
        raise PolicyViolation(
            f"tier '{tier}' compounds into tier '{upward[0].to_tier}' at its end "
            f"({upward[0].name}): name the {upward[0].to_tier} scope its rows land in, "
            f"end_scope('{tier}', scope_id, into_scope=<{upward[0].to_tier} scope id>)",
            tier=tier, field="into_scope")
    if into_scope is not None:
        into_scope = _text(into_scope, "into_scope")
    if reflective_log_id is not None:
        reflective_log_id = _text(reflective_log_id, "reflective_log_id")
    # one boundary at a time per tenant: a maintain batch closing the same scope as idle
    # commits first (or waits for this one), and each then reads what the other did
    yield Step(boundary.scope_end_lock_statement(ctx.tables), {"tenant": ctx.tenant}, "one")
    from primitives.engine import _ticks
    yield from _ticks.job_summaries(ctx, tier, scope_id, reflective_log_id=reflective_log_id)
    from primitives.engine import _consolidate
    for rule in _consolidate.extraction_rules(spec):
        if rule.runs_at_end_of(tier):
            yield from _consolidate.consolidate_scope(ctx, rule, scope_id, extractor)
    # Corroboration rules out of this tier run first (its rows are about to leave), the
    # boundary next, then the rules out of other tiers (the evidence it just moved up).
    rules = [r for r in boundary.corroboration_rules(spec) if r.at_end_of(tier)]
    promoted = yield from _corroboration(ctx, [r for r in rules if r.from_tier == tier])
    statement = boundary.end_scopes_statement(
        spec, ctx.tables, embedding=ctx.has_embedding, similarity=similarity_kind(ctx),
        citus=ctx.citus)
    params = {"tenants": [ctx.tenant], "tiers": [tier], "scope_ids": [scope_id],
              "into": [into_scope], "actor": ctx.actor}
    if ctx.citus:  # what the one statement inserts and removes follows it, routed whole
        params.update(tenant=ctx.tenant, nonce=str(q.new_event_id()))
    row = yield Step(statement, params, "one")
    assert row is not None
    if ctx.citus:
        for write, write_params in cluster_writes.end_scope_writes_citus(
                spec, ctx.tables, row, embedding=ctx.has_embedding, params=params,
                event_ids=q.new_event_id):
            yield Step(write, write_params)
        removed = row[-cluster_writes.CITUS_PARTS]
        if removed:
            yield Step(cluster_writes.remove_statement_citus(ctx.tables),
                       {"tenant": ctx.tenant, "ids": list(removed)}, "one")
    promoted += yield from _corroboration(ctx, [r for r in rules if r.from_tier != tier])
    return ScopeEnd(removed=row[3], kept=row[4], archived=row[5], compounded=row[6],
                    promoted=row[7], corroborated=row[8], corroboration_promoted=promoted)


def _corroboration(ctx: Context, rules: Sequence[boundary.CorroborationRule]) -> Op[int]:
    """Run corroboration promotion ``rules`` for the tenant; the rows promoted."""
    promoted = 0
    for rule in rules:
        params = {"tenants": [ctx.tenant], "actor": ctx.actor}
        if ctx.citus:  # routed whole; what it inserts follows (as end_scope's boundary)
            params.update(tenant=ctx.tenant, nonce=str(q.new_event_id()))
        count = yield Step(boundary.corroboration_statement(
            ctx.spec, ctx.tables, rule, embedding=ctx.has_embedding, citus=ctx.citus),
            params, "one")
        if ctx.citus and count is not None:
            for write, write_params in cluster_writes.corroboration_writes_citus(
                    ctx.tables, count, embedding=ctx.has_embedding, params=params,
                    event_ids=q.new_event_id):
                yield Step(write, write_params)
        promoted += int(count[0]) if count else 0
    return promoted


def similarity_kind(ctx: Context, *, text: bool = False) -> boundary.Similarity:
    """How this engine's database measures near-duplicates (``text``: of text alone)."""
    if ctx.has_embedding and not text:
        return "embedding" if ctx.trigram else "exact"
    return "trigram" if ctx.trigram else "exact"


def erase(ctx: Context, subject: str, *, approvals: Sequence[str], reason: str,
          memory_ids: Sequence[UUID] = (), thread_ids: Sequence[str] = ()) -> Op[int]:
    """Governed erasure of a subject's memories (``envelope.subject`` or listed ids), and of
    what was derived from them.

    Each row keeps only ``sha256:<hex>`` of its content: value, envelope, tags, source,
    provenance and embedding are cleared (the text index follows the content). Graph
    entities named or aliased ``subject`` keep only a hash of their name; edges touching an
    erased row lose their evidence; the checkpoints of ``thread_ids`` are deleted. The
    stored erasure reason has the subject's name and tokens masked, and the journal records
    only hashes of the subject, the reason and the thread ids. Needs the approvals the
    persistent tier's retention names (``deletion_requires``), or at least one. Returns the
    number of memory rows erased.
    """
    required = _deletion_requires(ctx.spec)
    missing = [r for r in required if r not in approvals]
    if not approvals or missing:
        raise GovernanceError(
            f"erasure needs approval from {', '.join(required) or 'at least one approver'}"
            + (f"; missing {', '.join(missing)}" if missing else ""), subject=subject)
    if not reason.strip():
        raise GovernanceError("erasure needs a reason", subject=subject)
    hashes = {"subject_sha256": subject_hash(subject), **reason_payload(reason),
              "approvals": list(approvals)}
    rows = yield Step(q.subject_rows(ctx.tables), {
        "tenant": ctx.tenant, "subject": Jsonb({"subject": subject}),
        "ids": list(memory_ids)}, "all")
    stored_reason = mask_subject(reason, subject)
    erased: list[UUID] = []
    for memory_id, _content in rows:
        # the function hashes the content and appends the row's ``erased`` event itself
        yield Step(q.erase_row(ctx.tables, citus=ctx.citus), {
            "tenant": ctx.tenant, "id": memory_id, "reason": stored_reason,
            "event_id": q.new_event_id(), "actor": ctx.actor, "payload": Jsonb(hashes)})
        erased.append(memory_id)
    derived: dict[str, Any] = {"memories": len(erased)}
    if ctx.tables.entities is not None and ctx.tables.edges is not None:
        entities = yield Step(q.erase_entities(ctx.tables, citus=ctx.citus), {
            "tenant": ctx.tenant, "subject": subject}, "all")
        edges = yield Step(q.erase_edge_evidence(ctx.tables), {
            "tenant": ctx.tenant, "ids": erased}, "all")
        derived |= {"entity_ids": [str(row[0]) for row in entities],
                    "edge_ids": [str(row[0]) for row in edges]}
    if thread_ids:
        if ctx.tables.checkpoints is None:
            raise PolicyViolation(f"agent '{ctx.spec.agent}' has no checkpointer; "
                                  "erase(thread_ids=...) has nothing to delete")
        threads = {"tenant": ctx.tenant, "thread_ids": list(thread_ids)}
        counts = yield Step(q.count_checkpoint_threads(ctx.tables), threads, "one")
        yield Step(q.delete_checkpoint_threads(ctx.tables, citus=ctx.citus), threads)
        derived |= {"threads_sha256": sorted(content_hash(t) for t in thread_ids),
                    "checkpoint_rows_deleted": sum(counts)}
    yield _event(ctx, "subject_erased", None, {**hashes, **derived})
    return len(erased)


def subject_hash(subject: str) -> str:
    """sha256 of the subject as erasure matches it (trimmed, lower-cased): what the journal
    and the erasures view compare instead of the name."""
    return content_hash(subject.strip().lower())


SUBJECT_MASK = "[erased subject]"
"""What the stored erasure reason shows where it named the subject."""


def mask_subject(text: str, subject: str) -> str:
    """``text`` with the subject, and each of its words of three or more letters, masked
    (any case): the reason is kept for the audit, the name is not."""
    words = sorted({w for w in re.split(r"\W+", subject) if len(w) >= 3}, key=len,
                   reverse=True)
    parts = [p for p in (re.escape(subject.strip()), *map(re.escape, words)) if p]
    if not parts:  # a blank subject: an empty pattern would match between every character
        return text
    return re.sub("|".join(parts), SUBJECT_MASK, text, flags=re.IGNORECASE)


def _deletion_requires(spec: AgentSpec) -> list[str]:
    retention = spec.persistent_tier.retention
    if retention is None:
        return []
    if retention.deletion_requires:
        return list(retention.deletion_requires)
    policy = spec.policies.get(retention.policy) if retention.policy else None
    return list(getattr(policy, "deletion_requires", []) or [])


# reads ------------------------------------------------------------------------------------------
def get_step(ctx: Context, memory_id: UUID) -> Step:
    return Step(q.select_memory(ctx.tables), {"tenant": ctx.tenant, "id": memory_id}, "one")


def get(ctx: Context, memory_id: UUID) -> Op[Memory | None]:
    row = yield get_step(ctx, memory_id)
    return Memory.from_row_or_none(row)


def history(ctx: Context, memory_id: UUID) -> Op[list[dict[str, Any]]]:
    """Journal events of a memory and of the versions it superseded or was superseded by."""
    rows = yield Step(q.history(ctx.tables), {"tenant": ctx.tenant, "id": memory_id}, "all")
    return [dict(zip(("seq", "kind", "memory_id", "actor", "payload", "occurred_at", "hash"),
                     row, strict=True)) for row in rows]


def search(ctx: Context, query: str = "", *, envelope: Mapping[str, Any] | None = None,
           tiers: Sequence[str] | None = None, limit: int | None = None,
           as_of: datetime | None = None,
           restrict: retrieval.Restriction | None = None,
           window: retrieval.Window | None = None) -> Op[SearchResult[Hit]]:
    """Hybrid search over this tenant's active rows (or, with ``as_of``, the rows valid at
    that time), fused by weighted reciprocal rank in one statement; with ``restrict``, over
    the rows its clause admits. A :class:`SearchResult`: the hits, and whether the search
    abstained (``retrieval.abstain``). With ``retrieval.lexical.ranking: token_overlap`` the
    ranking is seed 001's deterministic token overlap (:mod:`primitives.engine._episodic`)
    over every typology of the tiers, without fusion."""
    explanation = yield from explain_search(ctx, query, envelope=envelope, tiers=tiers,
                                            limit=limit, as_of=as_of, restrict=restrict,
                                            window=window)
    return explanation.hits


def explain_search(ctx: Context, query: str = "", *, envelope: Mapping[str, Any] | None = None,
                   tiers: Sequence[str] | None = None, limit: int | None = None,
                   as_of: datetime | None = None, final: bool = False,
                   restrict: retrieval.Restriction | None = None,
                   window: retrieval.Window | None = None) -> Op[Explanation]:
    """:func:`search`, returning per signal how many rows it gave and how semantic ran.
    ``final``: this operation is the whole transaction (its search statement is ``last``).
    ``window``: ``(since, until)`` event times the graph signal keeps to (either end None:
    open); by default a ``when`` question's own (:func:`primitives.retrieval.time_window`,
    at ``as_of`` or now), none for other questions.
    With ``retrieval.lexical.ranking: token_overlap`` and a query (no ``as_of``, envelope or
    restriction), the ranking is seed 001's deterministic token overlap
    (:mod:`primitives.engine._episodic`) over every typology of the tiers, without fusion."""
    config = ctx.spec.retrieval
    if (config.lexical.ranking == "token_overlap" and query.strip() and as_of is None
            and restrict is None and not envelope):
        from primitives.engine._episodic import episodic_query  # it imports this module
        ranked = yield from episodic_query(ctx, query, max_results=limit, tiers=tiers,
                                           typology=None, final=final)
        return Explanation(ranked, ("lexical",), {"lexical": len(ranked)}, None,
                           config.fusion.k, {"lexical": 1.0})
    scope = search_scope(ctx.spec)
    chosen = list(tiers) if tiers is not None else list(scope)
    for tier in chosen:
        if tier not in ctx.spec.tier_names:
            raise TenancyError(f"unknown tier '{tier}' for agent '{ctx.spec.agent}'; "
                               f"tiers: {', '.join(ctx.spec.tier_names)}")
    # Seed 002 §11.5: where the spec routes by intent, the query's complexity sets the
    # limit (when the caller names none) and the graph depth (capped by graph.max_depth).
    complexity = (retrieval.classify_query_complexity(query)
                  if config.intents is not None and query.strip() else None)
    if limit is None and complexity is not None:
        limit = retrieval.COMPLEXITY[complexity][0]
    limit = limit or config.default_limit
    if not 1 <= limit <= 1000:
        raise PolicyViolation(f"limit must be between 1 and 1000, got {limit}")
    # With a reranker, the statement returns the reranker's top_n (at least ``limit``) and
    # the list is cut to ``limit`` after reranking.
    top_n = 0
    if ctx.reranker is not None and query.strip():
        top_n = config.reranker.top_n if config.reranker is not None else DEFAULT_RERANK_TOP_N
    fetched = min(max(limit, top_n), 1000)
    signals = ctx.signals
    dropped: tuple[str, ...] = ()
    if "semantic" in signals and (ctx.embedder is None or not query.strip()):
        # Nothing to embed: a blank query has no meaning to compare.
        signals = tuple(s for s in signals if s != "semantic") or ("recency",)
        dropped = ("semantic",)
    cap = max(fetched * 5, 50)
    params: dict[str, Any] = {
        "tenant": ctx.tenant, "tiers": chosen,
        "tier_weights": [scope.get(t, 1.0) for t in chosen], "query": query,
        "config": config.text_search_config, "envelope": Jsonb(dict(envelope or {})),
        "cap": cap, "k": config.fusion.k, "limit": fetched, "as_of": as_of,
    }
    vector: list[float] | None = None
    pending: int | None = None
    if "semantic" in signals:
        assert ctx.embedder is not None
        vector = (yield Embed(ctx.embedder, (query,), query=True))[0]
        # ef_search bounds the candidate list; pgvector allows at most 1000.
        switch = config.semantic_exact_below
        ef_search = min(max(cap, 40), 1000)
        row = yield Step(retrieval.hnsw_settings(ctx.tables, pending=ctx.deferred,
                                                  citus=ctx.citus), {
            "tenant": ctx.tenant, "ef_search": str(ef_search), "tiers": chosen,
            "exact_below": -1 if switch == "auto" else switch, "cap": cap}, "one")
        if ctx.citus and (row is None or row[5] is None):  # the shards walk the HNSW index
            yield Step(retrieval.hnsw_settings_on_workers(ef_search), {})
        yield from check_model(ctx, row[2] if row else None, fetch=False)
        # The settings statement counted the tenant's rows up to the switch point and chose
        # the plan mode by it: the generic plan is the small-tenant (exact scan) path. Its
        # count (set only below the switch point) says which path; it is also BM25's N for
        # rows valid now.
        params.update(qvec=retrieval.vector_literal(vector), model=ctx.embedder.model_id,
                      small=row is not None and row[5] is not None,
                      scope_rows=row[5] if row is not None and as_of is None else None)
        if ctx.deferred and row is not None:
            pending = int(row[6])
    intent = None
    if ctx.classifier is not None and query.strip():
        intent = ctx.classifier.classify(query, vector)
    routed = retrieval.route(ctx.spec, signals, intent)
    weights = routed.weights
    params.update({f"w_{s}": w for s, w in weights.items()})
    if "graph" in signals:
        assert ctx.spec.graph is not None
        depth = ctx.spec.graph.max_depth
        if complexity is not None:
            depth = min(depth, retrieval.COMPLEXITY[complexity][1])
        direction = retrieval.temporal_direction(query) if intent == "when" else None
        if window is None and intent == "when":
            window = retrieval.time_window(query, as_of)
        since, until = window or (None, None)
        if since is not None and until is not None and since >= until:
            raise PolicyViolation(f"window: since ({since.isoformat()}) must be before "
                                  f"until ({until.isoformat()})", field="window")
        params.update(edge_types=list(routed.edge_types), max_depth=depth,
                      graph_seeds=ctx.spec.graph.walk_from, direction=direction or "both",
                      graph_since=since, graph_until=until)
    bm25 = config.lexical.ranking == "bm25"
    if bm25:
        params.update(bm25_k1=config.lexical.k1, bm25_b=config.lexical.b)
        params.setdefault("scope_rows", None)
    if restrict is not None:
        clash = set(restrict.params) & set(params)
        if clash:
            raise ValueError(f"restriction parameters clash with the search's: {sorted(clash)}")
        params.update(restrict.params)
    statement = retrieval.search_statement(ctx.tables, signals, MEMORY_COLUMNS,
                                           point_in_time=as_of is not None, bm25=bm25,
                                           restrict=restrict, indexed_match=ctx.text_match,
                                           decay=ctx.decay or decay_models(ctx.spec),
                                           fusion=config.fusion.method)
    rows = yield Step(statement, params, "all", last=final)
    n = len(MEMORY_COLUMNS)
    hits = [Hit(Memory.from_row(row[:n]), float(row[n]), dict(row[n + 1]),
                {s: float(v) for s, v in row[n + 2].items()}, float(row[n + 4]))
            for row in rows]
    counts: dict[str, Any] = dict(rows[0][n + 3]) if rows else {}
    mode = counts.pop("semantic_mode", None)
    # Abstention (retrieval.abstain): a query's hits below the cut-off are dropped; none
    # left is an answer of its own. A blank query lists rows and never abstains.
    abstain = config.abstain
    abstained = False
    if abstain is not None and query.strip():
        hits = [hit for hit in hits if hit.score >= abstain.min_fused_score]
        abstained = not hits
    reranked = 0
    if top_n and hits:
        assert ctx.reranker is not None
        hits = list((yield Rerank(ctx.reranker, query, tuple(hits), top_n)))
        reranked = min(top_n, len(hits))
    message = abstain.message if abstained and abstain is not None else None
    return Explanation(SearchResult(hits[:limit], abstained=abstained, message=message,
                                    pending_embeddings=pending),
                       signals, {s: int(counts.get(s, 0)) for s in signals},
                       mode, config.fusion.k, weights, dropped, intent,
                       routed.edge_types if "graph" in signals else (), reranked,
                       abstained, message, complexity,
                       direction if "graph" in signals else None,
                       window if "graph" in signals and window != (None, None) else None)


def observe_many(ctx: Context, items: Sequence[Mapping[str, Any]]) -> Op[list[Memory]]:
    """Write several memories in order; their vectors are computed in one embedding batch.

    Each item holds ``tier`` and ``content`` and any keyword :func:`observe` takes; an item
    that is not a mapping, lacks one of them, or fails :func:`observe`'s checks is refused
    before anything is written.
    """
    for k, item in enumerate(items):
        if not isinstance(item, Mapping) or "tier" not in item or "content" not in item:
            raise PolicyViolation(f"observe_many item {k} must be a mapping with 'tier' and "
                                  "'content'", field=f"items[{k}]")
    # every item checked (and redacted) before anything is embedded or written: a vector is
    # made from what the row stores
    checked = [_checked_observe(ctx, item["tier"], item["content"],
                                **{k: v for k, v in item.items() if k not in ("tier", "content")})
               for item in items]
    embeddings: list[list[float] | None] = [None] * len(items)
    if ctx.embeds and items:
        assert ctx.embedder is not None
        texts = tuple(embedding_text(ctx.spec, w.content, w.envelope, rest["event_time"])
                      for w, rest in checked)
        embeddings = list((yield Embed(ctx.embedder, texts)))
    written = []
    for (w, rest), vector in zip(checked, embeddings, strict=True):
        written.append((yield from _write(ctx, w, embedding=vector, final=False, via="direct",
                                          **rest)))
    return written


def reembed(ctx: Context, *, batch_size: int = 256) -> Op[int]:
    """Embed the tenant's rows that have no vector or another model's, with this engine's
    embedder; returns how many rows changed. One journal event per batch."""
    if ctx.embedder is None or not ctx.has_embedding:
        raise ModelMismatch("re-embedding needs an engine connected with an embedder, on a "
                            "server with pgvector", tenant=ctx.tenant)
    assert ctx.embedder is not None
    total = 0
    while True:
        rows = yield Step(q.rows_to_embed(ctx.tables), {
            "tenant": ctx.tenant, "model": ctx.embedder.model_id, "limit": batch_size}, "all")
        if not rows:
            break
        texts = tuple(embedding_text(ctx.spec, content, envelope or {}, event_time)
                      for _, content, envelope, event_time in rows)
        vectors = yield Embed(ctx.embedder, texts)
        yield Step(q.set_embeddings(ctx.tables), {
            "tenant": ctx.tenant, "model": ctx.embedder.model_id,
            "ids": [row[0] for row in rows],
            "vectors": [retrieval.vector_literal(v) for v in vectors]})
        yield _event(ctx, "reembedded", None, {"model": ctx.embedder.model_id,
                                               "rows": len(rows)})
        total += len(rows)
    ctx.checked_models.add(ctx.embedder.model_id)
    return total
