"""``python -m bench.run``: the write benchmarks, their JSON results and ``docs/benchmarks.md``.

    python -m bench.run            # about 2 minutes: 2,000 timed single writes per system,
                                   # 8 writers for 10 s per system and mode
    python -m bench.run --quick    # about 20 s smoke run, results under bench/results/quick/
    python -m bench.run --report   # no measuring: docs/benchmarks.md from bench/results/*.json

Both systems are measured in the same run on the same server; single-writer blocks
and concurrent rounds alternate between them, so drift on a shared machine hits
both alike.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._breakdown import write_breakdown
from bench._env import (
    RESULTS,
    bench_databases,
    log,
    machine_at_end,
    machine_info,
    result_header,
    shown,
    write_result,
)
from bench._report import render_markdown
from bench._targets import BENCH_SPEC, BENCH_TIER, ROOT, TargetSpec
from bench.writes import (
    LatencyResult,
    Mode,
    ThroughputResult,
    concurrent_throughput,
    merge_latency,
    merge_throughput,
    single_writer_latency,
    tenant_ids,
)

__all__ = ["Settings", "main", "run"]

DOCS = ROOT / "docs" / "benchmarks.md"

TARGETS = {"single_p50_ms": 2.0, "single_p95_ms": 5.0, "writes_per_s_8": 1500.0}
"""The goals the engine's write path is held to on this project's 2-core machines."""


@dataclass(frozen=True)
class Settings:
    writes: int = 2000
    warmup: int = 200
    block: int = 250
    writers: int = 8
    seconds: float = 10.0
    rounds: int = 2
    tenants: int = 100
    modes: tuple[Mode, ...] = ("threads", "processes")
    shared_store: bool = True
    breakdown_writes: int = 1000

    @classmethod
    def quick(cls) -> Settings:
        return cls(writes=300, warmup=50, block=100, seconds=2.0, rounds=1,
                   modes=("threads",), shared_store=False, breakdown_writes=200)


def _single(specs: Sequence[TargetSpec], settings: Settings,
            tenants: list[str]) -> list[LatencyResult]:
    """Alternating blocks of ``settings.block`` timed writes per system."""
    blocks: dict[str, list[LatencyResult]] = {}
    done = 0
    first = True
    while done < settings.writes:
        size = min(settings.block, settings.writes - done)
        for spec in specs:
            result = single_writer_latency(spec, writes=size,
                                           warmup=settings.warmup if first else 20,
                                           tenants=tenants)
            blocks.setdefault(result.target, []).append(result)
        first = False
        done += size
        log(f"  single writer: {done}/{settings.writes} timed writes per system")
    return [merge_latency(results) for results in blocks.values()]


def _concurrent(specs: Sequence[TargetSpec], settings: Settings, tenants: list[str],
                mode: Mode) -> list[ThroughputResult]:
    rounds: dict[str, list[ThroughputResult]] = {}
    per_round = settings.seconds / settings.rounds
    for _ in range(settings.rounds):
        for spec in specs:
            result = concurrent_throughput(spec, writers=settings.writers, seconds=per_round,
                                           tenants=tenants, mode=mode, progress=log)
            rounds.setdefault(result.target, []).append(result)
    return [merge_throughput(results) for results in rounds.values()]


def _ratio(ours: float, theirs: float) -> float | None:
    return round(ours / theirs, 2) if theirs else None


def _comparisons(single: list[LatencyResult],
                 load: list[ThroughputResult]) -> dict[str, Any]:
    by_target = {r.target: r for r in single}
    out: dict[str, Any] = {}
    ours, theirs = by_target.get("engine"), by_target.get("langgraph")
    if ours and theirs:
        for key in ("p50_ms", "p95_ms", "p99_ms"):
            out[f"single_{key}_ours_over_theirs"] = _ratio(ours.latency[key], theirs.latency[key])
    for mode in ("threads", "processes"):
        rows = {r.target: r for r in load if r.mode == mode}
        if "engine" in rows and "langgraph" in rows:
            out[f"writes_per_s_{mode}_ours_over_theirs"] = _ratio(
                rows["engine"].writes_per_s, rows["langgraph"].writes_per_s)
    return out


def _targets_met(single: list[LatencyResult], load: list[ThroughputResult]) -> dict[str, Any]:
    """Each goal met or not. The writers goal is judged per mode: ``writes_per_s_8_by_mode``
    says it for threads and for processes, and ``writes_per_s_8`` is true only when every
    mode measured reached it (a single fast mode does not carry the other)."""
    engine = next((r for r in single if r.target == "engine"), None)
    met: dict[str, Any] = {"goals": TARGETS}
    if engine is not None:
        met["single_p50_ms"] = engine.latency["p50_ms"] <= TARGETS["single_p50_ms"]
        met["single_p95_ms"] = engine.latency["p95_ms"] <= TARGETS["single_p95_ms"]
    by_mode = {r.mode: r.writes_per_s >= TARGETS["writes_per_s_8"]
               for r in load if r.target == "engine"}
    met["writes_per_s_8_by_mode"] = by_mode
    met["writes_per_s_8"] = bool(by_mode) and all(by_mode.values())
    return met


def run(settings: Settings, *, out_dir: Path, docs: Path | None, command: str) -> dict[str, Any]:
    """Run every measurement; write ``<out_dir>/writes.json`` (and ``docs`` if given)."""
    started = time.monotonic()
    tenants = tenant_ids(settings.tenants)
    with bench_databases(progress=log) as dbs:
        machine = machine_info(dbs.admin_dsn, embedded=dbs.embedded)
        engine = TargetSpec("engine", dbs.engine_app_dsn)
        langgraph = TargetSpec("langgraph", dbs.langgraph_dsn)
        log(f"single writer: {settings.writes} timed writes per system "
             f"(after {settings.warmup} warm-up), blocks of {settings.block}, alternating")
        single = _single((engine, langgraph), settings, tenants)
        load: list[ThroughputResult] = []
        for mode in settings.modes:
            log(f"{settings.writers} writers as {mode}, {settings.seconds:g}s per system "
                 f"in {settings.rounds} alternating round(s)")
            load += _concurrent((engine, langgraph), settings, tenants, mode)
        if settings.shared_store:
            log("LangGraph with one PostgresStore shared by the threads (its batch lock)")
            load += _concurrent((TargetSpec("langgraph", dbs.langgraph_dsn, shared_store=True),),
                                settings, tenants, "threads")
        log(f"breakdown of one engine write over {settings.breakdown_writes} writes")
        breakdown = write_breakdown(dbs.engine_app_dsn, writes=settings.breakdown_writes,
                                    warmup=50, tenants=tenants)
    result = {
        **result_header("writes", command, started, machine),
        "parameters": {
            **{k: list(v) if isinstance(v, tuple) else v for k, v in vars(settings).items()},
            "spec": str(BENCH_SPEC.relative_to(ROOT)),
            "tier": BENCH_TIER,
            "write": "engine: `engine.observe({workspace_id}, tier, content, envelope=..., "
                     "tags=...)` as primitives_app (RLS forced): memory row + hash-chained "
                     "journal event, one transaction sent as one message. LangGraph: "
                     "`PostgresStore.put((tenant, tier), key, {content, envelope, tags}, "
                     "index=False)` on its own database, connected as the admin (it has no "
                     "tenancy)",
            "payload": "content of 200 characters, a 3-key envelope, 2 tags; same for both",
        },
        "single_writer": [r.as_dict() for r in single],
        "concurrent": [r.as_dict() for r in load],
        "breakdown": breakdown,
        "ratios": _comparisons(single, load),
        "targets_met": _targets_met(single, load),
    }
    machine_at_end(machine)
    log(f"wrote {write_result(out_dir / 'writes.json', result)}")
    if docs is not None:
        docs.write_text(render_markdown(result))
        log(f"wrote {shown(docs)}")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="20-second smoke run; results under bench/results/quick/, "
                             "docs/benchmarks.md untouched")
    parser.add_argument("--writes", type=int, help="timed single writes per system")
    parser.add_argument("--seconds", type=float, help="concurrent seconds per system and mode")
    parser.add_argument("--out", type=Path, help="results folder (default bench/results)")
    parser.add_argument("--report", action="store_true",
                        help="measure nothing: rewrite docs/benchmarks.md from the results "
                             "already in bench/results (after another benchmark ran)")
    args = parser.parse_args(argv)
    if args.report:
        result = json.loads((RESULTS / "writes.json").read_text(encoding="utf-8"))
        DOCS.write_text(render_markdown(result))
        log(f"wrote {DOCS.relative_to(ROOT)} from {RESULTS.relative_to(ROOT)}")
        return 0
    settings = Settings.quick() if args.quick else Settings()
    overrides = {k: v for k, v in (("writes", args.writes), ("seconds", args.seconds))
                 if v is not None}
    if overrides:
        settings = Settings(**{**vars(settings), **overrides})
    out_dir = args.out or (RESULTS / "quick" if args.quick else RESULTS)
    docs = None if args.quick or args.out else DOCS
    argv_text = list(sys.argv[1:] if argv is None else argv)
    command = shlex.join(["python", "-m", "bench.run", *argv_text])
    result = run(settings, out_dir=out_dir, docs=docs, command=command)
    print(render_markdown(result, table_only=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
