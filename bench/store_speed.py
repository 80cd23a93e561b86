"""``python -m bench.store_speed``: get and put latency of ``MemoryStore`` against LangGraph's
``PostgresStore``, on one server, single-threaded, in alternating blocks.

    python -m bench.store_speed            # about a minute: 2,000 timed ops per system and op
    python -m bench.store_speed --quick    # a few seconds, results under bench/results/quick/

What each call does, so the numbers compare like with like:

- ``MemoryStore``: a tenant transaction as the application role (``SET LOCAL`` tenant,
  forced RLS), the op through the engine; a ``put`` also checks the spec's write policy
  and limits, supersedes the previous version and appends a hash-chained journal event.
- ``PostgresStore``: the admin role, no tenancy, an upsert with no history.

Ops per system: ``get`` (an existing key), ``put_new`` (a new key), ``put_update`` (a
changed value for an existing key), all without embeddings; then ``put_embed`` (a new key
whose ``text`` is embedded) on a second pair of stores that share one embedding model
(the offline all-MiniLM-L6-v2 through FlagEmbedding): ours with it as the engine's
embedder, ``PostgresStore`` with an index config (384 dims, ``fields=["text"]``) whose
embed function is the same model's ``embed_documents``. Last, ``async_concurrent``: the
async stores (``AsyncMemoryStore``, ``AsyncPostgresStore``, each on its default pool) under
rounds of 1,000 concurrent small calls (half ``aput`` of a new key, half ``aget``), the
systems' rounds alternating; throughput is calls per second over all rounds. It runs after
the embedding model has loaded in the process, whose loader freezes the heap
(``FlagEmbedder(freeze_gc=True)``), so neither store's rounds pay for full collections that
walk the model's objects. Results: ``bench/results/store_speed.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

from langgraph.store.base import BaseStore
from langgraph.store.postgres import AsyncPostgresStore, PostgresStore

from bench._env import (
    RESULTS,
    bench_databases,
    machine_info,
    write_result,
)
from bench._targets import BENCH_SPEC
from primitives.embeddings import default_embedder
from primitives.langgraph import AsyncMemoryStore, MemoryStore
from primitives.spec import load_spec

__all__ = ["Settings", "main", "run"]

OPS = ("get", "put_new", "put_update")
EMBED_OPS = ("put_embed",)


@dataclass(frozen=True)
class Settings:
    ops: int = 2000
    block: int = 200
    tenants: int = 20
    preload: int = 100
    """Items per tenant written before timing (what ``get`` and ``put_update`` address)."""
    embed_ops: int = 400
    """Timed ``put_embed`` calls per system (each embeds one text on the CPU)."""
    embed_block: int = 50
    concurrent: int = 1000
    """Calls in flight at once in ``async_concurrent``."""
    rounds: int = 6
    """``async_concurrent`` rounds per system."""

    @classmethod
    def quick(cls) -> Settings:
        return cls(ops=200, block=50, tenants=5, preload=20, embed_ops=20, concurrent=100,
                   rounds=2)


def _namespace(system: str, tenant: str) -> tuple[str, ...]:
    if system == "MemoryStore":
        return (tenant, "workspace", "procedural", "bench")
    return (tenant, "bench")


def _value(i: int, version: int = 0) -> dict[str, Any]:
    return {"text": f"observation {i} v{version}: lowering temperature removed fabrication",
            "n": i, "version": version}


def _timed(stores: dict[str, BaseStore], settings: Settings) -> dict[str, dict[str, list[float]]]:
    """Alternate blocks of each op between the systems; return per-call latencies (ms)."""
    tenants = [f"ws-bench-{k:03d}" for k in range(settings.tenants)]
    rng = random.Random(7)
    samples: dict[str, dict[str, list[float]]] = {s: {op: [] for op in OPS} for s in stores}
    counters = dict.fromkeys(stores, settings.preload)
    versions: dict[tuple[str, str, int], int] = {}
    for op in OPS:
        done = 0
        while done < settings.ops:
            size = min(settings.block, settings.ops - done)
            plan = [(rng.choice(tenants), rng.randrange(settings.preload)) for _ in range(size)]
            for system, store in stores.items():
                for tenant, i in plan:
                    ns = _namespace(system, tenant)
                    call: Callable[[], object]
                    if op == "get":
                        call = partial(store.get, ns, f"k{i}")
                    elif op == "put_new":
                        counters[system] += 1
                        n = counters[system]
                        call = partial(store.put, ns, f"k{n}", _value(n))
                    else:
                        version = versions[(system, tenant, i)] = versions.get(
                            (system, tenant, i), 0) + 1
                        call = partial(store.put, ns, f"k{i}", _value(i, version))
                    start = time.perf_counter()
                    call()
                    samples[system][op].append((time.perf_counter() - start) * 1000)
            done += size
    return samples


def _timed_embed(stores: dict[str, BaseStore],
                 settings: Settings) -> dict[str, dict[str, list[float]]]:
    """``put_embed``: new keys whose text is embedded, alternating blocks between the systems."""
    tenants = [f"ws-embed-{k:03d}" for k in range(settings.tenants)]
    rng = random.Random(11)
    samples: dict[str, dict[str, list[float]]] = {s: {"put_embed": []} for s in stores}
    warm = 5  # the first calls load the model's kernels; not timed
    done, n = 0, 0
    while done < settings.embed_ops + warm:
        size = min(settings.embed_block, settings.embed_ops + warm - done)
        plan = [(rng.choice(tenants), n + k) for k in range(size)]
        n += size
        for system, store in stores.items():
            for j, (tenant, i) in enumerate(plan):
                ns = _namespace(system, tenant)
                start = time.perf_counter()
                store.put(ns, f"e{i}", _value(i))
                if done + j >= warm:
                    samples[system]["put_embed"].append((time.perf_counter() - start) * 1000)
        done += size
    return samples


async def _concurrent(dbs: Any, settings: Settings) -> dict[str, dict[str, float]]:
    """Rounds of ``settings.concurrent`` concurrent calls, alternating between the async
    stores; calls per second over each system's rounds."""
    ours = await AsyncMemoryStore.from_spec(load_spec(BENCH_SPEC), dbs.engine_app_dsn)
    tenants = [f"ws-conc-{k:03d}" for k in range(settings.tenants)]
    seconds = {"MemoryStore": 0.0, "PostgresStore": 0.0}
    calls = dict.fromkeys(seconds, 0)
    try:
        async with AsyncPostgresStore.from_conn_string(dbs.langgraph_dsn) as theirs:
            stores: dict[str, BaseStore] = {"MemoryStore": ours, "PostgresStore": theirs}
            for rnd in range(settings.rounds + 1):  # round 0 warms up, not timed
                for system, store in stores.items():
                    jobs = []
                    for i in range(settings.concurrent):
                        ns = _namespace(system, tenants[i % len(tenants)])
                        key = f"c{rnd}-{i // 2}"
                        jobs.append(store.aput(ns, key, _value(i)) if i % 2 == 0
                                    else store.aget(ns, f"c{max(rnd - 1, 0)}-{i // 2}"))
                    start = time.perf_counter()
                    await asyncio.gather(*jobs)
                    if rnd:
                        seconds[system] += time.perf_counter() - start
                        calls[system] += len(jobs)
    finally:
        await ours.aclose()
    return {system: {"calls": calls[system], "seconds": round(seconds[system], 3),
                     "calls_per_s": round(calls[system] / seconds[system], 1)}
            for system in seconds}


def _summary(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {"n": len(ordered), "p50_ms": round(statistics.median(ordered), 3),
            "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1], 3),
            "mean_ms": round(statistics.fmean(ordered), 3)}


def run(settings: Settings, progress: Callable[[str], object] = print) -> dict[str, Any]:
    with bench_databases(progress) as dbs, warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # no embedder in the bench
        ours = MemoryStore.from_spec(load_spec(BENCH_SPEC), dbs.engine_app_dsn)
        with ours, PostgresStore.from_conn_string(dbs.langgraph_dsn) as theirs:
            stores: dict[str, BaseStore] = {"MemoryStore": ours, "PostgresStore": theirs}
            for system, store in stores.items():
                for k in range(settings.tenants):
                    tenant = f"ws-bench-{k:03d}"
                    for i in range(settings.preload):
                        store.put(_namespace(system, tenant), f"k{i}", _value(i))
                progress(f"{system}: {settings.tenants * settings.preload} items preloaded")
            samples = _timed(stores, settings)
        progress("put with embedding: loading the offline model")
        embedder = default_embedder(load_spec(BENCH_SPEC))
        index = {"dims": embedder.dims, "embed": embedder.embed_documents, "fields": ["text"]}
        ours_embed = MemoryStore.from_spec(load_spec(BENCH_SPEC), dbs.engine_app_dsn,
                                           embedder=embedder)
        with ours_embed, PostgresStore.from_conn_string(dbs.langgraph_dsn,
                                                        index=index) as theirs_embed:  # type: ignore[arg-type]
            theirs_embed.setup()  # the vector table and index
            embedded = _timed_embed({"MemoryStore": ours_embed, "PostgresStore": theirs_embed},
                                    settings)
        for system, ops in embedded.items():
            samples[system].update(ops)
        model = embedder.model_id
        progress(f"async_concurrent: {settings.rounds} rounds of {settings.concurrent} calls")
        concurrent = asyncio.run(_concurrent(dbs, settings))
        machine = machine_info(dbs.admin_dsn, embedded=dbs.embedded)
    return {
        "benchmark": "store_speed",
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": settings.__dict__,
        "machine": machine,
        "embedding_model": model,
        "results": {system: {op: _summary(values) for op, values in ops.items()}
                    for system, ops in samples.items()},
        "async_concurrent": concurrent,
    }


def markdown(result: dict[str, Any]) -> str:
    lines = ["| op | MemoryStore p50 / p95 (ms) | PostgresStore p50 / p95 (ms) |",
             "|---|---|---|"]
    ours, theirs = result["results"]["MemoryStore"], result["results"]["PostgresStore"]
    lines[0] += " ours / theirs at p50 |"
    lines[1] += "---:|"
    for op in (*OPS, *EMBED_OPS):
        if op not in ours:
            continue
        ratio = ours[op]["p50_ms"] / theirs[op]["p50_ms"]
        lines.append(f"| {op} | {ours[op]['p50_ms']} / {ours[op]['p95_ms']} | "
                     f"{theirs[op]['p50_ms']} / {theirs[op]['p95_ms']} | {ratio:.2f}x |")
    concurrent = result.get("async_concurrent")
    if concurrent:
        a, b = concurrent["MemoryStore"], concurrent["PostgresStore"]
        lines.append(f"| async_concurrent (calls/s, {result['settings']['concurrent']} in "
                     f"flight) | {a['calls_per_s']} | {b['calls_per_s']} | "
                     f"{a['calls_per_s'] / b['calls_per_s']:.2f}x throughput |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.store_speed")
    parser.add_argument("--quick", action="store_true", help="a few seconds; not committed")
    args = parser.parse_args(argv)
    settings = Settings.quick() if args.quick else Settings()
    result = run(settings)
    folder = RESULTS / "quick" if args.quick else RESULTS
    shown = write_result(folder / "store_speed.json", result)
    print(markdown(result))
    print(f"results: {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
