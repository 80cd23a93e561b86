"""``python -m bench.drift``: how our write and PostgresStore's put move together, burst by burst.

    python -m bench.drift                          # 120 s
    python -m bench.drift --seconds 600 --burst 200

On the project's shared machine the write benchmarks' figures move by half from one run to
the next, PostgresStore's as much as ours. This tool shows how the two move at the scale of
a second: for ``--seconds`` it writes, one after the other in one process, a burst of
``--burst`` writes through ``Engine.observe`` (the bench write, one writer) and a burst of
as many ``PostgresStore.put`` calls of the same payloads (one writer, its own database).

Per burst it records each system's wall time per write, its CPU per write (the client
thread's and its server backend's, from ``/proc/<pid>/schedstat``) and the ratio of the two
wall times. At the end: each figure's spread over the bursts, how closely the two systems'
figures go together (Pearson's correlation), and each figure in the quarter of the bursts in
which PostgresStore was fastest and the quarter in which it was slowest: PostgresStore,
written beside ours, stands for the machine's speed at that moment.

It measures only; nothing it finds changes a goal.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench._env import (
    RESULTS,
    backend_cpu_ns,
    bench_databases,
    log,
    machine_at_end,
    machine_info,
    result_header,
    write_result,
)
from bench._targets import BENCH_SPEC, BENCH_TIER, ROOT, EngineTarget, LangGraphTarget, Write
from bench.writes import tenant_ids

__all__ = ["FIGURES", "main", "measure", "render_table"]

SYSTEMS = ("engine", "store")
"""Our engine and LangGraph's PostgresStore, in the order each burst writes them."""

FIGURES = ("engine_ms", "engine_cpu_us", "store_ms", "store_cpu_us", "engine_over_store")
"""What each burst records."""


def _burst(write: Write, pid: int, tenants: Sequence[str], first: int,
           count: int) -> tuple[float, float]:
    """``count`` writes; wall milliseconds and CPU microseconds (client and server) per write."""
    cpu0, server0, wall0 = time.thread_time_ns(), backend_cpu_ns(pid), time.perf_counter()
    for i in range(first, first + count):
        write(tenants[i % len(tenants)], i)
    wall = time.perf_counter() - wall0
    cpu = time.thread_time_ns() - cpu0 + backend_cpu_ns(pid) - server0
    return round(wall / count * 1000, 3), round(cpu / count / 1000, 1)


def _pid(pool: Any) -> int:
    """The backend pid of a one-connection pool's connection; refused when that backend's CPU
    time cannot be read here."""
    conn = pool.getconn()
    try:
        pid = int(conn.info.backend_pid)
    finally:
        pool.putconn(conn)
    try:
        backend_cpu_ns(pid)
    except OSError:
        raise SystemExit("bench.drift reads each backend's CPU time from /proc/<pid>/schedstat: "
                         "the server must run on this machine (unset PRIMITIVES_DSN to use the "
                         "embedded one)") from None
    return pid


def _spread(bursts: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Each figure's 10th percentile, median and 90th percentile over the bursts."""
    out = {}
    for key in FIGURES:
        values = sorted(b[key] for b in bursts)
        n = len(values)
        out[key] = {"p10": values[n // 10], "median": round(statistics.median(values), 3),
                    "p90": values[(9 * n) // 10]}
    return out


def _quarters(bursts: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Each figure's median in the quarter of bursts in which PostgresStore was fastest and
    in the quarter in which it was slowest."""
    ordered = sorted(bursts, key=lambda b: b["store_ms"])
    size = max(1, len(ordered) // 4)
    parts = {"store_fastest_quarter": ordered[:size], "store_slowest_quarter": ordered[-size:]}
    return {name: {key: round(statistics.median(b[key] for b in part), 3) for key in FIGURES}
            for name, part in parts.items()}


def _correlation(bursts: list[dict[str, float]], a: str, b: str) -> float | None:
    """Pearson's correlation of two figures over the bursts (``None``: too few bursts, or a
    figure that did not move)."""
    try:
        return round(statistics.correlation([x[a] for x in bursts], [x[b] for x in bursts]), 3)
    except statistics.StatisticsError:
        return None


def measure(*, seconds: float = 120.0, burst: int = 200, tenants: int = 100,
            out: Path | None = None, command: str = "python -m bench.drift",
            progress: Callable[[str], object] = log) -> dict[str, Any]:
    """Measure (module docstring); the result, also written to ``out``."""
    if seconds <= 0 or burst < 1:
        raise ValueError("seconds must be positive and burst at least 1")
    started = time.monotonic()
    names = tenant_ids(tenants)
    bursts: list[dict[str, float]] = []
    with bench_databases(progress=progress) as dbs:
        machine = machine_info(dbs.admin_dsn, embedded=dbs.embedded)
        engine = EngineTarget(dbs.engine_app_dsn, 1)
        store = LangGraphTarget(dbs.langgraph_dsn, 1)
        try:
            writers = {"engine": (engine.writer(), _pid(engine.engine._pool)),
                       "store": (store.writer(), _pid(store.pool))}
            for name in SYSTEMS:  # warm-up: statements prepared, caches filled
                write, pid = writers[name]
                _burst(write, pid, names, 0, min(burst, 50))
            first = burst
            end = time.monotonic() + seconds
            while time.monotonic() < end or not bursts:
                row: dict[str, float] = {"at_s": round(time.monotonic() - started, 1)}
                for name in SYSTEMS:
                    write, pid = writers[name]
                    row[f"{name}_ms"], row[f"{name}_cpu_us"] = _burst(write, pid, names, first,
                                                                      burst)
                row["engine_over_store"] = round(row["engine_ms"] / row["store_ms"], 3)
                first += burst
                bursts.append(row)
                if len(bursts) % 10 == 0:
                    progress(f"{len(bursts)} bursts: engine {row['engine_ms']:.2f} ms, store "
                             f"{row['store_ms']:.2f} ms a write")
        finally:
            engine.close()
            store.close()
    result = {
        **result_header("drift", command, started, machine),
        "parameters": {"seconds": seconds, "burst": burst, "tenants": tenants,
                       "spec": str(BENCH_SPEC.relative_to(ROOT)), "tier": BENCH_TIER},
        "bursts": bursts,
        "spread": _spread(bursts),
        "correlation": {
            "engine_ms_with_store_ms": _correlation(bursts, "engine_ms", "store_ms"),
            "engine_cpu_us_with_store_cpu_us": _correlation(bursts, "engine_cpu_us",
                                                            "store_cpu_us")},
        **_quarters(bursts),
    }
    machine_at_end(machine)
    if out is not None:
        progress(f"wrote {write_result(out, result)}")
    return result


def render_table(result: dict[str, Any]) -> str:
    """The summary as markdown: each figure's spread, and its median where PostgresStore was
    fastest and where it was slowest."""
    params, spread, corr = result["parameters"], result["spread"], result["correlation"]
    fast, slow = result["store_fastest_quarter"], result["store_slowest_quarter"]
    lines = [f"{len(result['bursts'])} bursts of {params['burst']} writes per system over "
             f"{params['seconds']:.0f} s (`{result['command']}`, {result['started_at']})",
             "",
             "| figure | p10 | median | p90 | PostgresStore fastest quarter | "
             "PostgresStore slowest quarter |",
             "|---|---:|---:|---:|---:|---:|"]
    for key in FIGURES:
        row = spread[key]
        lines.append(f"| {key} | {row['p10']:,.2f} | {row['median']:,.2f} | {row['p90']:,.2f} "
                     f"| {fast[key]:,.2f} | {slow[key]:,.2f} |")
    lines += ["", "correlation over the bursts: wall time "
              f"{_shown(corr['engine_ms_with_store_ms'])}, CPU "
              f"{_shown(corr['engine_cpu_us_with_store_cpu_us'])}"]
    return "\n".join(lines)


def _shown(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.drift", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=120.0, help="how long (default 120)")
    parser.add_argument("--burst", type=int, default=200, help="writes per system and burst")
    parser.add_argument("--out", type=Path, default=RESULTS / "drift.json",
                        help="results file (default: bench/results/drift.json)")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.burst < 1:
        parser.error("--seconds must be positive and --burst at least 1")
    argv_text = list(sys.argv[1:] if argv is None else argv)
    result = measure(seconds=args.seconds, burst=args.burst, out=args.out,
                     command=shlex.join(["python", "-m", "bench.drift", *argv_text]))
    print(render_table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
