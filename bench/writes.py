"""The two write measurements, for any target: single-writer latency, N-writer throughput.

Example (tiny counts, as the smoke test runs them)::

    spec = TargetSpec("engine", app_dsn)
    latency = single_writer_latency(spec, writes=30, warmup=5, tenants=tenant_ids(10))
    load = concurrent_throughput(spec, writers=2, seconds=0.5, tenants=tenant_ids(10))
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from bench._targets import TargetSpec, open_target

__all__ = [
    "LatencyResult",
    "ThroughputResult",
    "concurrent_throughput",
    "latency_summary",
    "merge_latency",
    "merge_throughput",
    "single_writer_latency",
    "tenant_ids",
]

Progress = Callable[[str], object]
Mode = Literal["threads", "processes"]

_WORKER_STRIDE = 1_000_000  # payload index = writer * stride + n: keys never collide


def tenant_ids(count: int, prefix: str = "bench") -> list[str]:
    """``count`` tenant ids: ``bench-000``, ``bench-001``, ..."""
    return [f"{prefix}-{k:03d}" for k in range(count)]


def _percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an ascending sequence (q in 0..100)."""
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def latency_summary(seconds: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99/mean/min/max in milliseconds."""
    ordered = sorted(seconds)
    ms = 1000.0
    return {
        "p50_ms": round(_percentile(ordered, 50) * ms, 3),
        "p95_ms": round(_percentile(ordered, 95) * ms, 3),
        "p99_ms": round(_percentile(ordered, 99) * ms, 3),
        "mean_ms": round(sum(ordered) / len(ordered) * ms, 3) if ordered else float("nan"),
        "min_ms": round(ordered[0] * ms, 3) if ordered else float("nan"),
        "max_ms": round(ordered[-1] * ms, 3) if ordered else float("nan"),
    }


@dataclass(frozen=True)
class LatencyResult:
    target: str
    writes: int
    warmup: int
    tenants: int
    latency: dict[str, float]
    writes_per_s: float
    samples: list[float] = field(default_factory=list, repr=False)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["samples"]
        return data


@dataclass(frozen=True)
class ThroughputResult:
    target: str
    mode: Mode
    writers: int
    seconds: float
    tenants: int
    writes: int
    errors: int
    writes_per_s: float
    latency: dict[str, float]
    per_writer: list[int] = field(default_factory=list)
    samples: list[float] = field(default_factory=list, repr=False)
    elapsed: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["samples"], data["elapsed"]
        return data


def _label(spec: TargetSpec) -> str:
    return spec.kind + ("-shared-store" if spec.shared_store else "")


def single_writer_latency(
    spec: TargetSpec, *, writes: int, warmup: int, tenants: Sequence[str],
    progress: Progress = lambda _: None,
) -> LatencyResult:
    """One writer, one connection: each write is its own transaction, timed end to end."""
    target = open_target(spec, connections=1)
    try:
        write = target.writer()
        for n in range(warmup):
            write(tenants[n % len(tenants)], n)
        samples: list[float] = []
        step = max(1, writes // 4)
        for n in range(writes):
            t0 = time.perf_counter()
            write(tenants[n % len(tenants)], warmup + n)
            samples.append(time.perf_counter() - t0)
            if (n + 1) % step == 0:
                progress(f"  {_label(spec)} single writer: {n + 1}/{writes}")
    finally:
        target.close()
    return LatencyResult(_label(spec), writes, warmup, len(tenants), latency_summary(samples),
                         round(writes / sum(samples), 1) if samples else 0.0, samples)


def merge_latency(results: Sequence[LatencyResult]) -> LatencyResult:
    """One result from blocks of the same target (run interleaved with another target)."""
    samples = [s for r in results for s in r.samples]
    seconds = sum(sum(r.samples) for r in results)
    first = results[0]
    return LatencyResult(first.target, len(samples), sum(r.warmup for r in results),
                         first.tenants, latency_summary(samples),
                         round(len(samples) / seconds, 1) if seconds else 0.0, samples)


def merge_throughput(results: Sequence[ThroughputResult]) -> ThroughputResult:
    """One result from rounds of the same target and mode: total writes over total time."""
    first = results[0]
    samples = [s for r in results for s in r.samples]
    writes = sum(r.writes for r in results)
    elapsed = sum(r.elapsed for r in results)
    per_writer = [sum(col) for col in zip(*(r.per_writer for r in results), strict=True)]
    return ThroughputResult(
        target=first.target, mode=first.mode, writers=first.writers,
        seconds=round(sum(r.seconds for r in results), 3), tenants=first.tenants,
        writes=writes, errors=sum(r.errors for r in results),
        writes_per_s=round(writes / elapsed, 1) if elapsed else 0.0,
        latency=latency_summary(samples), per_writer=per_writer, samples=samples,
        elapsed=elapsed,
    )


# concurrent ---------------------------------------------------------------------------------
@dataclass
class _WorkerResult:
    writes: int = 0
    errors: int = 0
    end: float = 0.0
    samples: list[float] = field(default_factory=list)


def _run_writer(write: Callable[[str, int], None], worker: int, writers: int,
                tenants: Sequence[str], warmup: int, ready: Callable[[], None],
                wait_start: Callable[[], float], seconds: float) -> _WorkerResult:
    base = worker * _WORKER_STRIDE
    offset = worker * len(tenants) // writers  # writers start spread over the tenants
    for n in range(warmup):
        write(tenants[(offset + n) % len(tenants)], base + n)
    ready()
    start = wait_start()
    deadline = start + seconds
    while time.monotonic() < start:
        time.sleep(0.0005)
    result = _WorkerResult()
    n = warmup
    while True:
        t0 = time.monotonic()
        if t0 >= deadline:
            break
        try:
            write(tenants[(offset + n) % len(tenants)], base + n)
            result.writes += 1
        except Exception:  # counted, not fatal: the run reports its error count
            result.errors += 1
        t1 = time.monotonic()
        result.samples.append(t1 - t0)
        result.end = t1
        n += 1
    return result


def _process_main(spec: TargetSpec, worker: int, writers: int, tenants: list[str], warmup: int,
                  seconds: float, ready: Any, start_event: Any, start_at: Any,
                  results: Any) -> None:
    target = open_target(spec, connections=1)
    try:
        def wait_start() -> float:
            start_event.wait()
            return float(start_at.value)

        outcome = _run_writer(target.writer(), worker, writers, tenants, warmup,
                              lambda: ready.put(worker), wait_start, seconds)
        results.put((worker, outcome.writes, outcome.errors, outcome.end, outcome.samples))
    finally:
        target.close()


def concurrent_throughput(
    spec: TargetSpec, *, writers: int, seconds: float, tenants: Sequence[str],
    mode: Mode = "threads", warmup: int = 20, progress: Progress = lambda _: None,
) -> ThroughputResult:
    """``writers`` writers for ``seconds`` over ``tenants``: writes/s and per-write latency.

    ``threads``: one process, one pool of ``writers`` connections. ``processes``: one
    process per writer, each with its own connection (no shared GIL).
    """
    tenant_list = list(tenants)
    if mode == "threads":
        outcomes, start = _threads(spec, writers, seconds, tenant_list, warmup)
    else:
        outcomes, start = _processes(spec, writers, seconds, tenant_list, warmup)
    total = sum(o.writes for o in outcomes)
    end = max((o.end for o in outcomes), default=start + seconds)
    elapsed = max(end - start, 1e-9)
    samples = [s for o in outcomes for s in o.samples]
    result = ThroughputResult(
        target=_label(spec), mode=mode, writers=writers, seconds=seconds,
        tenants=len(tenant_list), writes=total, errors=sum(o.errors for o in outcomes),
        writes_per_s=round(total / elapsed, 1), latency=latency_summary(samples),
        per_writer=[o.writes for o in outcomes], samples=samples, elapsed=elapsed,
    )
    progress(f"  {result.target} {writers} writers ({mode}): {result.writes_per_s:,.0f} writes/s "
             f"over {elapsed:.1f}s, {result.errors} errors")
    return result


def _threads(spec: TargetSpec, writers: int, seconds: float, tenants: list[str],
             warmup: int) -> tuple[list[_WorkerResult], float]:
    target = open_target(spec, connections=writers)
    try:
        barrier = threading.Barrier(writers + 1)
        go = threading.Event()
        start_at = [0.0]
        outcomes: list[_WorkerResult | None] = [None] * writers
        failures: list[BaseException] = []

        def wait_start() -> float:
            go.wait()
            return start_at[0]

        def ready() -> None:
            barrier.wait()

        def run(worker: int) -> None:
            try:
                outcomes[worker] = _run_writer(target.writer(), worker, writers, tenants, warmup,
                                               ready, wait_start, seconds)
            except BaseException as err:  # surfaced below; a broken barrier frees the others
                failures.append(err)
                barrier.abort()

        threads = [threading.Thread(target=run, args=(w,), daemon=True) for w in range(writers)]
        for thread in threads:
            thread.start()
        try:
            barrier.wait(timeout=120)
        except threading.BrokenBarrierError:
            pass
        start_at[0] = time.monotonic() + 0.05
        go.set()
        for thread in threads:
            thread.join(timeout=seconds + 120)
        if failures:
            raise failures[0]
        return [o for o in outcomes if o is not None], start_at[0]
    finally:
        target.close()


def _wait_ready(ready: Any, procs: Sequence[Any], writers: int, timeout: float = 120) -> None:
    """Wait for every writer process to be warmed up; fail fast when one died instead."""
    deadline = time.monotonic() + timeout
    got = 0
    while got < writers:
        try:
            ready.get(timeout=0.5)
            got += 1
        except queue.Empty:
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead:
                raise RuntimeError(f"a writer process exited with code {dead[0].exitcode} "
                                   "before it was ready (see its traceback above)") from None
            if time.monotonic() > deadline:
                raise RuntimeError(f"writer processes not ready after {timeout:.0f} s") from None


def _processes(spec: TargetSpec, writers: int, seconds: float, tenants: list[str],
               warmup: int) -> tuple[list[_WorkerResult], float]:
    ctx = mp.get_context("spawn")  # no inherited connections, pools or threads
    ready, results = ctx.Queue(), ctx.Queue()
    start_event = ctx.Event()
    start_at = ctx.Value("d", 0.0)
    procs = [
        ctx.Process(target=_process_main, daemon=True,
                    args=(spec, w, writers, tenants, warmup, seconds, ready, start_event,
                          start_at, results))
        for w in range(writers)
    ]
    for proc in procs:
        proc.start()
    try:
        _wait_ready(ready, procs, writers)
        start_at.value = time.monotonic() + 0.05
        start_event.set()
        outcomes = []
        for _ in range(writers):
            _worker, writes, errors, end, samples = results.get(timeout=seconds + 120)
            outcomes.append(_WorkerResult(writes, errors, end, samples))
        return outcomes, float(start_at.value)
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.terminate()
