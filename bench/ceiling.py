"""``python -m bench.ceiling``: how many of the engine's writes the server itself can take here.

    python -m bench.ceiling                        # about 1 minute
    python -m bench.ceiling --seconds 2 --rounds 1 # a quick look

Three targets, each written by 8 writer processes over 100 tenants, in rounds that
alternate between them (drift on a shared machine hits all three alike):

- ``engine``: ``Engine.observe``, as in ``python -m bench.run`` (processes mode);
- ``replay``: the very message the engine sends for that write, from a client that does
  nothing else (``bench/_replay.py``). The server does all of a real write's work; the
  client almost none. Its rate is the ceiling no client-side saving can pass;
- ``replay-relaxed``: the same with ``synchronous_commit = off`` in each transaction: the
  difference to ``replay`` is what the durable commit (the WAL flush) costs. The engine
  never sends this setting.

It writes ``bench/results/ceiling.json`` and prints a table with the ratios. It measures
only: the goals are judged by ``python -m bench.run``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from bench._env import (
    RESULTS,
    bench_databases,
    log,
    machine_at_end,
    machine_info,
    result_header,
    write_result,
)
from bench._targets import BENCH_SPEC, BENCH_TIER, ROOT, TargetSpec
from bench.writes import ThroughputResult, concurrent_throughput, merge_throughput, tenant_ids

__all__ = ["KINDS", "main", "measure", "render_table"]

Kind = Literal["engine", "replay", "replay-relaxed"]
KINDS: tuple[Kind, ...] = ("engine", "replay", "replay-relaxed")


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 2) if b else None


def measure(*, writers: int = 8, seconds: float = 5.0, rounds: int = 3, tenants: int = 100,
            out: Path | None = RESULTS / "ceiling.json", command: str = "python -m bench.ceiling",
            progress: Any = log) -> dict[str, Any]:
    """Measure the three targets (module docstring); the result, also written to ``out``."""
    started = time.monotonic()
    names = tenant_ids(tenants)
    by_kind: dict[str, list[ThroughputResult]] = {kind: [] for kind in KINDS}
    with bench_databases(progress=progress) as dbs:
        machine = machine_info(dbs.admin_dsn, embedded=dbs.embedded)
        for n in range(rounds):
            order = KINDS if n % 2 == 0 else tuple(reversed(KINDS))
            for kind in order:
                by_kind[kind].append(concurrent_throughput(
                    TargetSpec(kind, dbs.engine_app_dsn), writers=writers, seconds=seconds,
                    tenants=names, mode="processes", progress=progress))
    merged = {kind: merge_throughput(results) for kind, results in by_kind.items()}
    rate = {kind: merged[kind].writes_per_s for kind in KINDS}
    result = {
        **result_header("ceiling", command, started, machine),
        "parameters": {"writers": writers, "seconds_per_round": seconds, "rounds": rounds,
                       "tenants": tenants, "mode": "processes",
                       "spec": str(BENCH_SPEC.relative_to(ROOT)), "tier": BENCH_TIER},
        "targets": {
            kind: {"writes_per_s": rate[kind], "writes": merged[kind].writes,
                   "errors": merged[kind].errors,
                   "rounds_writes_per_s": [r.writes_per_s for r in by_kind[kind]],
                   "latency": merged[kind].latency}
            for kind in KINDS
        },
        "ratios": {
            "engine_over_replay": _ratio(rate["engine"], rate["replay"]),
            "replay_over_replay_relaxed": _ratio(rate["replay"], rate["replay-relaxed"]),
        },
    }
    machine_at_end(machine)
    if out is not None:
        progress(f"wrote {write_result(out, result)}")
    return result


_LABELS = {
    "engine": "`engine.observe` (the engine)",
    "replay": "the engine's message, replayed by an idle client (server ceiling)",
    "replay-relaxed": "the same, `synchronous_commit = off` (measurement only)",
}


def render_table(result: dict[str, Any]) -> str:
    """The result as a markdown table: writes/s per target, each round, the ratios."""
    params = result["parameters"]
    lines = [f"{params['writers']} writer processes, {params['tenants']} tenants, "
             f"{params['rounds']} alternating round(s) of {params['seconds_per_round']:g} s "
             f"(`{result['command']}`, {result['started_at']})", "",
             "| target | writes/s | rounds | errors |", "|---|---:|---|---:|"]
    for kind in KINDS:
        row = result["targets"][kind]
        rounds = ", ".join(f"{x:,.0f}" for x in row["rounds_writes_per_s"])
        lines.append(f"| {_LABELS[kind]} | {row['writes_per_s']:,.0f} | {rounds} | "
                     f"{row['errors']} |")
    ratios = result["ratios"]
    lines += ["", f"engine / ceiling: {ratios['engine_over_replay']}; "
                  f"durable / relaxed commit: {ratios['replay_over_replay_relaxed']}"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ceiling", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds per target and round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    parser.add_argument("--writers", type=int, default=8, help="writer processes")
    parser.add_argument("--out", type=Path, default=RESULTS / "ceiling.json",
                        help="results file (default bench/results/ceiling.json)")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.rounds < 1 or args.writers < 1:
        parser.error("--seconds must be positive, --rounds and --writers at least 1")
    argv_text = list(sys.argv[1:] if argv is None else argv)
    result = measure(writers=args.writers, seconds=args.seconds, rounds=args.rounds,
                     out=args.out, command=shlex.join(["python", "-m", "bench.ceiling",
                                                       *argv_text]))
    print(render_table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
