"""Deferred embedding: the write without the model, and the worker against the model alone.

``python -m bench.embed_deferred`` migrates the assistant reference spec
(``agents/assistant_memory.yaml``, ``retrieval.embedding.embed: deferred``) into a fresh
database and measures, interleaved in one run:

- **writes**: ``engine.observe`` of an episode (about 200 characters) into ``long_term`` by
  three engines on the same spec and table, alternating blocks of ``--block`` writes over
  ``--rounds`` rounds: ``none`` (no embedder, the baseline), ``deferred`` (the default
  embedder, embedding deferred) and ``inline`` (the same embedder with the spec switched to
  ``embed: inline``, for scale: the model inside the write). Target: p50 deferred / none
  <= 1.2.
- **worker**: per round, ``--rows`` deferred rows of a fresh tenant, then (in alternating
  order) the embedder encoding the same texts in one ``embed_documents`` call, and
  ``engine.embed_pending(anchor, batch_size=--batch)`` embedding them: one transaction per
  batch (the locking select, the model call, the statement storing and journalling the
  vectors, the commit). Target: worker rows/s / one-call encoding rows/s >= 0.8.

The model is the real default embedder (``primitives.embeddings.default_embedder``; offline,
the packaged all-MiniLM-L6-v2 through FlagEmbedding), loaded and warmed before timing;
``--embedder hashing`` (the deterministic test embedder) is for the smoke test only.

Writes ``bench/results/embed_deferred.json`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench._env import RESULTS, bench_databases, log, machine_info, write_result
from bench.writes import latency_summary
from primitives._project import migrate
from primitives.embeddings import Embedder, HashingEmbedder, default_embedder
from primitives.engine import Engine
from primitives.engine._core import embedding_text
from primitives.spec import AgentSpec, load_spec

RESULT = "embed_deferred.json"
SPEC = Path(__file__).resolve().parents[1] / "agents" / "assistant_memory.yaml"
TIER, TYPOLOGY = "long_term", "episodic"
MODES = ("none", "deferred", "inline")

_TOPICS = ("the quarterly invoice reconciliation", "a flaky integration test on the build farm",
           "moving the team offsite to Lisbon", "the new onboarding checklist",
           "rotating the staging database credentials", "a customer asking for a refund")


def episode(i: int) -> str:
    """An episode of about 200 characters, different for every ``i``."""
    topic = _TOPICS[i % len(_TOPICS)]
    return (f"Turn {i}: the user brought up {topic} again and asked what had changed since "
            f"last week; the assistant summarised the open items, noted item {i % 37} as "
            "blocked, and proposed a follow-up on Thursday.")


def _inline(spec: AgentSpec) -> AgentSpec:
    retrieval = spec.retrieval
    embedding = retrieval.embedding.model_copy(update={"embed": "inline"})
    return spec.model_copy(update={"retrieval": retrieval.model_copy(
        update={"embedding": embedding})})


def _embedder(kind: str, spec: AgentSpec) -> Embedder:
    if kind == "hashing":
        return HashingEmbedder(spec.retrieval.embedding.dims)
    embedder = default_embedder(spec)
    embedder.load()
    embedder.embed_documents([episode(i) for i in range(64)])  # warm: first calls are slower
    return embedder


def _anchor(prefix: str, n: int) -> dict[str, str]:
    return {"user_id": f"{prefix}-{n:04d}"}


def measure_writes(engines: dict[str, Engine], *, rounds: int, block: int,
                   tenants: int) -> dict[str, Any]:
    """p50/p95 of ``observe`` per mode, blocks interleaved (the order rotates each round)."""
    samples: dict[str, list[float]] = {mode: [] for mode in engines}
    n = 0
    for r in range(rounds):
        order = list(engines)[r % len(engines):] + list(engines)[:r % len(engines)]
        for mode in order:
            engine = engines[mode]
            for _ in range(block):
                anchor = _anchor("w", n % tenants)
                started = time.perf_counter()
                engine.observe(anchor, TIER, episode(n), typology=TYPOLOGY)
                samples[mode].append(time.perf_counter() - started)
                n += 1
    summary: dict[str, Any] = {mode: latency_summary(v) for mode, v in samples.items()}
    base = summary["none"]["p50_ms"]
    summary["p50_ratio_deferred_over_none"] = round(summary["deferred"]["p50_ms"] / base, 3)
    if "inline" in summary:
        summary["p50_ratio_inline_over_none"] = round(summary["inline"]["p50_ms"] / base, 3)
    summary["target"] = 1.2
    return summary


def measure_worker(engine: Engine, embedder: Embedder, spec: AgentSpec, *, rounds: int,
                   rows: int, batch: int) -> dict[str, Any]:
    """Per round: ``rows`` deferred rows of a fresh tenant; the embedder encoding their texts
    in one call, and ``embed_pending`` embedding them (order alternating by round)."""
    results: list[dict[str, Any]] = []
    for r in range(rounds):
        anchor = _anchor(f"k{uuid.uuid4().hex[:6]}", r)
        written = [engine.observe(anchor, TIER, episode(r * rows + i), typology=TYPOLOGY)
                   for i in range(rows)]
        texts = [embedding_text(spec, m.content, m.envelope, m.event_time) for m in written]
        engine.pending.take()  # the bench runs the worker itself
        timed: dict[str, float] = {}
        for step in (("encode", "worker") if r % 2 == 0 else ("worker", "encode")):
            started = time.perf_counter()
            if step == "encode":
                vectors = embedder.embed_documents(texts)
                assert len(vectors) == rows
            else:
                embedded = engine.embed_pending(anchor, batch_size=batch)
                assert embedded == rows, (embedded, rows)
            timed[step] = time.perf_counter() - started
        results.append({
            "encode_rows_per_s": round(rows / timed["encode"], 1),
            "worker_rows_per_s": round(rows / timed["worker"], 1),
            "ratio": round(timed["encode"] / timed["worker"], 3)})
        log(f"  worker round {r + 1}: encode {rows / timed['encode']:,.0f} rows/s, "
            f"embed_pending {rows / timed['worker']:,.0f} rows/s "
            f"({timed['encode'] / timed['worker']:.2f}x)")
    return {"rows": rows, "batch": batch, "rounds": results,
            "median": statistics.median(r["ratio"] for r in results),
            "worst": min(r["ratio"] for r in results), "target": 0.8}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.embed_deferred", description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--block", type=int, default=100, help="writes per mode per round")
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--rows", type=int, default=512, help="rows per worker round")
    parser.add_argument("--batch", type=int, default=64, help="rows per model call")
    parser.add_argument("--embedder", choices=("default", "hashing"), default="default")
    parser.add_argument("--out", type=Path, default=RESULTS / RESULT)
    args = parser.parse_args(argv)
    spec = load_spec(SPEC)
    embedder = _embedder(args.embedder, spec)
    log(f"embedder {embedder.model_id}")
    with bench_databases(log) as dbs:
        migrate([spec], dsn=dbs.engine_admin_dsn, progress=lambda _: None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # no embedder: semantic stands down, with a warning
            plain = Engine.connect(spec, dbs.engine_app_dsn, max_connections=2)
        deferred = Engine.connect(spec, dbs.engine_app_dsn, embedder=embedder,
                                  max_connections=2)
        inline = Engine.connect(_inline(spec), dbs.engine_app_dsn, embedder=embedder,
                                max_connections=2)
        try:
            log("writes: no embedder, deferred, inline (interleaved)")
            writes = measure_writes({"none": plain, "deferred": deferred, "inline": inline},
                                    rounds=args.rounds, block=args.block,
                                    tenants=args.tenants)
            deferred.pending.take()
            log(f"  p50 none {writes['none']['p50_ms']} ms, deferred "
                f"{writes['deferred']['p50_ms']} ms ({writes['p50_ratio_deferred_over_none']}x),"
                f" inline {writes['inline']['p50_ms']} ms")
            log(f"worker: embed_pending of {args.rows} rows against one encoding call")
            worker = measure_worker(deferred, embedder, spec, rounds=args.rounds,
                                    rows=args.rows, batch=args.batch)
        finally:
            for engine in (plain, deferred, inline):
                engine.close()
        result = {
            "command": "python -m bench.embed_deferred " + " ".join(
                argv if argv is not None else sys.argv[1:]),
            "spec": "agents/assistant_memory.yaml", "embedder": embedder.model_id,
            "rounds": args.rounds, "block": args.block, "writes": writes, "worker": worker,
            "machine": machine_info(dbs.engine_admin_dsn, embedded=dbs.embedded),
        }
    log(f"wrote {write_result(args.out, result)}")
    log(json.dumps({"writes_p50_ratio": writes["p50_ratio_deferred_over_none"],
                    "worker_ratio_median": worker["median"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
