"""Writes and hybrid search on a three-node Citus cluster against one PostgreSQL node.

``python -m bench.citus`` (``--tenants``, ``--seconds``, ``--rounds``, ``--searches`` for a
smaller or larger run) starts a Citus coordinator with two workers on loopback (built from the
vendored source on first use, ``tests/citus/_cluster.py``) and a fresh database on the bench
server (``PRIMITIVES_DSN``, or an embedded PostgreSQL), migrates the Spectral spec onto both
(the distributed plan on the coordinator, the single-node plan on the other), then, over
``--rounds`` rounds with the order of the two alternating:

- ``writes``: ``--writers`` threads, each its own engine (application role, the hashing
  embedder), write for ``--seconds``: ``engine.observe`` of one memory with its envelope,
  vector and journal event, in a transaction of its own (on the coordinator the engine's
  cluster form: every part an ``INSERT ... VALUES`` routed to the tenant's shard).
  Writes/s, cluster over one node.
- ``search``: the engine's hybrid search (envelope, semantic with the hashing embedder,
  recency) over the tenants the writes filled, in alternating blocks of 25; p95 latency,
  cluster over one node.

Every node of the cluster and the single server share this machine's cores: the ratios say
what the coordinator's extra hop costs here, not what a cluster of machines gains.

Writes ``bench/results/citus.json`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench._env import RESULTS, log, machine_info, scratch_database, write_result
from bench._targets import BENCH_SPEC, BENCH_TIER, payload
from bench.writes import latency_summary, tenant_ids
from primitives._project import migrate
from primitives.compile import agent_tables
from primitives.db import APP_ROLE, app_dsn
from primitives.embeddings import HashingEmbedder
from primitives.engine import Engine
from primitives.spec import load_spec
from tests.citus._cluster import Cluster, running_cluster

RESULT = "citus.json"
SPEC = load_spec(BENCH_SPEC)
TABLES = agent_tables(SPEC)
EMBEDDER = HashingEmbedder(SPEC.retrieval.embedding.dims)
QUERIES = ("stale context after retrieval", "lowering temperature", "summary step",
           "fabrication in the workspace scan")

def _writes(where: str, dsn: str, tenants: Sequence[str], *, writers: int, seconds: float,
            start: int) -> dict[str, Any]:
    """``writers`` threads writing for ``seconds``; writes/s and latency."""
    lock = threading.Lock()
    latencies: list[float] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(writers + 1)

    def run(k: int) -> None:
        mine: list[float] = []
        try:
            with _engine(dsn) as engine:
                barrier.wait()
                deadline = time.perf_counter() + seconds
                i = start + k
                while time.perf_counter() < deadline:
                    tenant = tenants[i % len(tenants)]
                    content, envelope, _ = payload(i)
                    began = time.perf_counter()
                    engine.observe({"workspace_id": tenant}, BENCH_TIER, content,
                                   envelope=envelope)
                    mine.append(time.perf_counter() - began)
                    i += writers
        except BaseException as err:  # reported after the join
            errors.append(err)
            barrier.abort()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(writers)]
    for thread in threads:
        thread.start()
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    if errors:
        raise errors[0]
    return {"writes": len(latencies), "seconds": round(elapsed, 3),
            "writes_per_s": round(len(latencies) / elapsed, 1), **latency_summary(latencies)}


def _search_samples(engines: dict[str, Engine], tenants: Sequence[str], *, searches: int,
                    block: int = 25) -> dict[str, list[float]]:
    """Alternating blocks of searches on each engine; seconds per search."""
    samples: dict[str, list[float]] = {where: [] for where in engines}
    order = list(engines)
    n = 0
    while n < searches:
        for where in order:
            engine = engines[where]
            for j in range(block):
                tenant, query = tenants[(n + j) % len(tenants)], QUERIES[(n + j) % len(QUERIES)]
                began = time.perf_counter()
                engine.search({"workspace_id": tenant}, query, envelope={"kind": "scan"})
                samples[where].append(time.perf_counter() - began)
        order.reverse()
        n += block
    return samples


def _engine(dsn: str) -> Engine:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Engine.connect(SPEC, dsn, embedder=EMBEDDER)


def main(argv: Sequence[str] | None = None, *, cluster: Cluster | None = None) -> int:
    """The bench; ``cluster``: a running cluster to use (the smoke test's), else one is
    started for the run and stopped at the end."""

    parser = argparse.ArgumentParser(prog="python -m bench.citus", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--searches", type=int, default=300)
    parser.add_argument("--out", type=Path, default=RESULTS / RESULT)
    args = parser.parse_args(argv)
    command = "python -m bench.citus " + " ".join(
        argv if argv is not None else sys.argv[1:])
    tenants = tenant_ids(args.tenants, "citus")
    with scratch_database("citus") as (admin, embedded), ExitStack() as stack:
        if cluster is None:
            cluster = stack.enter_context(running_cluster())  # builds Citus on first use
        coordinator = cluster.coordinator.dsn()
        quiet: Callable[[str], object] = lambda _: None  # noqa: E731
        for dsn in (admin, coordinator):
            migrate([SPEC], dsn=dsn, progress=quiet)
        dsns = {"one": app_dsn(admin), "cluster": cluster.coordinator.dsn(APP_ROLE)}
        log(f"migrated; writes for {args.rounds} x {args.seconds}s on each")
        rounds: list[dict[str, Any]] = []
        written = 0
        for r in range(args.rounds):
            order = ["one", "cluster"] if r % 2 == 0 else ["cluster", "one"]
            got: dict[str, Any] = {}
            for where in order:
                got[where] = _writes(where, dsns[where], tenants, writers=args.writers,
                                     seconds=args.seconds, start=written)
                written += got[where]["writes"] + args.writers
            got["ratio"] = round(got["cluster"]["writes_per_s"] / got["one"]["writes_per_s"], 3)
            log(f"round {r + 1}: one node {got['one']['writes_per_s']:,.0f} writes/s, "
                f"cluster {got['cluster']['writes_per_s']:,.0f} ({got['ratio']:.2f}x)")
            rounds.append(got)
        engines = {where: _engine(dsn) for where, dsn in dsns.items()}
        try:
            for engine in engines.values():  # warm: pools, plans, the embedder's cache
                for tenant in tenants[:2]:
                    engine.search({"workspace_id": tenant}, QUERIES[0], envelope={"kind": "scan"})
            samples = _search_samples(engines, tenants, searches=args.searches)
        finally:
            for engine in engines.values():
                engine.close()
        search = {where: latency_summary(values) for where, values in samples.items()}
        search["p95_ratio"] = round(search["cluster"]["p95_ms"] / search["one"]["p95_ms"], 3)
        log(f"search p95: one node {search['one']['p95_ms']:.1f} ms, cluster "
            f"{search['cluster']['p95_ms']:.1f} ms ({search['p95_ratio']:.2f}x)")
        ratios = sorted(r["ratio"] for r in rounds)
        result = {
            "command": command.strip(),
            "tenants": args.tenants, "writers": args.writers, "seconds": args.seconds,
            "rows_written": sum(r[w]["writes"] for r in rounds for w in ("one", "cluster")),
            "writes": {"rounds": rounds, "median_ratio": ratios[len(ratios) // 2],
                       "path": "engine.observe (the cluster form on the coordinator)"},
            "search": {**search, "signals": ["envelope", "semantic", "recency"],
                       "searches_each": len(samples["one"])},
            "nodes": "a coordinator and two workers, and the single node, on one machine",
            "load_average_1m": round(os.getloadavg()[0], 2),
            "machine": machine_info(admin, embedded=embedded),
        }
    log(f"wrote {write_result(args.out, result)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
