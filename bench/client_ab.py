"""``python -m bench.client_ab``: the client's CPU per ``Engine.observe``, as shipped against a
variant, write by write.

    python -m bench.client_ab                          # A/A: the noise floor
    python -m bench.client_ab --variant pool-context   # the pool's connection() context

The client's twin of ``python -m bench.server_ab``: two engines on one database, the second
with the variant, each write sent through one and then the other (the order alternating),
each call timed with the calling thread's CPU clock (``time.thread_time_ns``). Both see the
same machine at the same moment, and the same cold caches: the server runs between every
two calls, as it does under load, so each step costs what it costs in a real writer rather
than in a tight loop.

Variants:

- ``aa``: none; how far apart two identical engines come out.
- ``pool-context``: the variant engine takes its connections through the pool's
  ``connection()`` context (psycopg_pool), as ``Engine.observe`` did before it called
  ``getconn``/``putconn`` itself.
- ``no-limits``, ``no-memory``, ``no-content-hash``: upper bounds only, each a step a write
  needs, skipped for the variant engine's calls: the spec's size limits
  (``check_limits``), the returned ``Memory`` (``Memory.from_written``; the row's tuple comes
  back instead), the sha256 of the content and value in the journal event's payload (zeros
  instead; the rows are written, the chain is intact, the payload's hashes are wrong).

It measures only; nothing it finds changes a goal.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from bench._env import (
    RESULTS,
    bench_databases,
    log,
    machine_at_end,
    machine_info,
    result_header,
    write_result,
)
from bench._targets import BENCH_SPEC, BENCH_TIER, ROOT, payload
from bench.writes import tenant_ids
from primitives.engine import Engine
from primitives.spec import load_spec

__all__ = ["VARIANTS", "main", "measure", "render_table"]

VARIANTS = ("aa", "pool-context", "no-limits", "no-memory", "no-content-hash")
_ZEROS = "0" * 64


class _Skip:
    """A step of the write skipped while ``on`` (the variant engine's calls only)."""

    def __init__(self) -> None:
        self.on = False
        self._undo: list[tuple[Any, str, Any]] = []

    def patch(self, owner: Any, name: str, skipped: Callable[..., Any]) -> None:
        real = owner.__dict__[name]
        call = real.__get__(None, owner) if isinstance(real, classmethod) else real

        def either(*args: Any, **kwargs: Any) -> Any:
            return skipped(*args, **kwargs) if self.on else call(*args, **kwargs)

        setattr(owner, name, staticmethod(either) if isinstance(real, classmethod) else either)
        self._undo.append((owner, name, real))

    def undo(self) -> None:
        for owner, name, real in reversed(self._undo):
            setattr(owner, name, real)
        self._undo.clear()


def _install(variant: str, skip: _Skip) -> None:
    """Patch the step ``variant`` skips (module docstring); nothing for the others."""
    from primitives.engine import _core, _observe_message
    from primitives.engine._records import Memory

    if variant == "no-limits":
        skip.patch(_core, "check_limits", lambda *args, **kwargs: None)
    elif variant == "no-memory":
        skip.patch(Memory, "from_written", lambda written, row: row)
    elif variant == "no-content-hash":
        skip.patch(_observe_message, "observed_payload", unhashed_payload)


def unhashed_payload(w: Any, row_key: str, via: str) -> dict[str, Any]:
    """``observed_payload``'s keys, in its order, with zeros for its two hashes: nothing is
    hashed (``no-content-hash``)."""
    return {"tier": w.tier, "typology": w.typology, "key": row_key, "namespace": w.namespace,
            "scope_id": w.scope_id, "content_sha256": _ZEROS, "value_sha256": _ZEROS,
            "via": via}


class _ContextPool:
    """A pool whose ``getconn``/``putconn`` go through the real pool's ``connection()``
    context: the engine's code unchanged, the way it takes a connection as it was."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._open: dict[int, AbstractContextManager[Any]] = {}

    def getconn(self, timeout: float | None = None) -> Any:
        context = self._pool.connection(timeout)
        conn = context.__enter__()
        self._open[id(conn)] = context
        return conn

    def putconn(self, conn: Any) -> None:
        self._open.pop(id(conn)).__exit__(None, None, None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)


def _engine(app_dsn: str, variant: str) -> Engine:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # no embedder: expected
        engine = Engine.connect(load_spec(BENCH_SPEC), app_dsn, max_connections=1)
    if variant == "pool-context":
        engine._pool = _ContextPool(engine._pool)  # type: ignore[assignment]
    return engine


def _round(engines: dict[str, Engine], tenants: Sequence[str], first: int, writes: int,
           warmup: int, skip: _Skip) -> dict[str, float]:
    """``warmup`` then ``writes`` writes through each engine, interleaved; per engine the
    client's CPU microseconds per write."""
    names = tuple(engines)
    spent = dict.fromkeys(names, 0)
    clock = time.thread_time_ns
    for k in range(warmup + writes):
        content, envelope, tags = payload(first + k)
        anchor = {"workspace_id": tenants[k % len(tenants)]}
        for name in (names if k % 2 else names[::-1]):
            skip.on = name == "variant"
            start = clock()
            engines[name].observe(anchor, BENCH_TIER, content, envelope=envelope, tags=tags)
            if k >= warmup:
                spent[name] += clock() - start
            skip.on = False
    return {name: round(spent[name] / writes / 1000, 1) for name in names}


def measure(*, variant: str = "aa", writes: int = 4000, rounds: int = 3, warmup: int = 200,
            tenants: int = 100, out: Path | None = None,
            command: str = "python -m bench.client_ab",
            progress: Callable[[str], object] = log) -> dict[str, Any]:
    """Measure (module docstring); the result, also written to ``out``."""
    if variant not in VARIANTS:
        raise SystemExit(f"unknown variant {variant!r}; one of: {', '.join(VARIANTS)}")
    started = time.monotonic()
    names = tenant_ids(tenants)
    results: list[dict[str, float]] = []
    with bench_databases(progress=progress) as dbs:
        machine = machine_info(dbs.admin_dsn, embedded=dbs.embedded)
        engines: dict[str, Engine] = {}
        skip = _Skip()
        try:
            engines["engine"] = _engine(dbs.engine_app_dsn, "aa")
            engines["variant"] = _engine(dbs.engine_app_dsn, variant)
            _install(variant, skip)
            for n in range(rounds):
                row = _round(engines, names, n * (warmup + writes), writes, warmup, skip)
                results.append(row)
                progress(f"round {n + 1}/{rounds}: engine {row['engine']:.0f} us, variant "
                         f"{row['variant']:.0f} us of client CPU per write "
                         f"(variant/engine {_ratio(row):.3f})")
        finally:
            skip.undo()
            for engine in engines.values():
                engine.close()
    ratios = [_ratio(row) for row in results]
    result = {
        **result_header("client_ab", command, started, machine),
        "parameters": {"variant": variant, "writes_per_round": writes,
                       "warmup_per_round": warmup, "rounds": rounds, "tenants": tenants,
                       "spec": str(BENCH_SPEC.relative_to(ROOT)), "tier": BENCH_TIER},
        "rounds": results,
        "variant_over_engine": {"per_round": ratios,
                                "median": round(statistics.median(ratios), 3)},
    }
    machine_at_end(machine)
    if out is not None:
        progress(f"wrote {write_result(out, result)}")
    return result


def _ratio(row: dict[str, float]) -> float:
    return round(row["variant"] / row["engine"], 3) if row["engine"] else float("nan")


def render_table(result: dict[str, Any]) -> str:
    """The result as a markdown table: client CPU per write per engine and round."""
    params = result["parameters"]
    lines = [f"variant `{params['variant']}`; {params['rounds']} round(s) of "
             f"{params['writes_per_round']:,} interleaved writes per engine "
             f"(`{result['command']}`, {result['started_at']})", "",
             "| round | engine: client us/write | variant: client us/write | variant / engine |",
             "|---:|---:|---:|---:|"]
    for n, row in enumerate(result["rounds"], start=1):
        lines.append(f"| {n} | {row['engine']:.0f} | {row['variant']:.0f} | "
                     f"{_ratio(row):.3f} |")
    lines += ["", f"median variant / engine: {result['variant_over_engine']['median']:.3f}"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.client_ab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", choices=VARIANTS, default="aa",
                        help="the variant engine (default: aa, none)")
    parser.add_argument("--writes", type=int, default=4000, help="writes per engine and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds")
    parser.add_argument("--out", type=Path, default=None,
                        help="results file (default: bench/results/client_ab-<variant>.json)")
    args = parser.parse_args(argv)
    if args.writes < 1 or args.rounds < 1:
        parser.error("--writes and --rounds must be at least 1")
    out = args.out or RESULTS / f"client_ab-{args.variant}.json"
    argv_text = list(sys.argv[1:] if argv is None else argv)
    result = measure(variant=args.variant, writes=args.writes, rounds=args.rounds, out=out,
                     command=shlex.join(["python", "-m", "bench.client_ab", *argv_text]))
    print(render_table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
