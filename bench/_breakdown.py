"""Where one engine write spends its time: the Python before it is sent, and its one message.

It takes the steps ``Engine.observe`` takes for this write on one application-role
connection, with a clock around each part: the checks and the message built
(``primitives.engine._observe_message.observe_call``), then ``BEGIN`` and the bound tenant,
``EXECUTE`` of the prepared insert (row, journal event with its chain trigger, scope mark)
and ``COMMIT; RESET ALL`` as one message, and the returned memory made from what was sent
and read back. Diagnostic only: the headline numbers come from the
real engine.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from typing import Any

import psycopg

from bench._replay import one_message_call
from bench._targets import BENCH_SPEC, BENCH_TIER, payload
from bench.writes import latency_summary
from primitives.db._oneshot import OnceTransaction
from primitives.engine import Engine, Memory
from primitives.spec import load_spec

__all__ = ["PARTS", "write_breakdown"]

PARTS = (
    ("python_checks", "Python: policy and limit checks, the message written"),
    ("message", "one round trip: BEGIN; tenant; insert (row + journal event with chain "
                "trigger + scope mark); COMMIT (WAL flush); RESET ALL"),
    ("total", "total"),
)


def write_breakdown(dsn: str, *, writes: int, warmup: int,
                    tenants: Sequence[str]) -> dict[str, Any]:
    """Per-part latency summaries (ms) over ``writes`` writes after ``warmup``."""
    spec = load_spec(BENCH_SPEC)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # no embedder: expected
        engine = Engine.connect(spec, dsn, max_connections=1)
    parts: dict[str, list[float]] = {key: [] for key, _ in PARTS}
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for n in range(warmup + writes):
                _one(conn, engine, tenants[n % len(tenants)], 10_000_000 + n,
                     parts if n >= warmup else None)
    finally:
        engine.close()
    return {key: {"label": label, **latency_summary(parts[key])} for key, label in PARTS}


def _one(conn: psycopg.Connection[Any], engine: Engine, tenant: str, i: int,
         parts: dict[str, list[float]] | None) -> None:
    content, envelope, tags = payload(i)
    marks = [time.perf_counter()]
    call = one_message_call(engine, conn, tenant, BENCH_TIER, content,
                            {"envelope": envelope, "tags": tags})
    marks.append(time.perf_counter())
    row = OnceTransaction(conn, call.tenant).fetch_prepared(call.prepared, last=True,
                                                             fetch="one")
    marks.append(time.perf_counter())
    Memory.from_written(call.written, row)
    marks.append(time.perf_counter())
    if parts is not None:
        parts["python_checks"].append(marks[1] - marks[0])
        parts["message"].append(marks[2] - marks[1])
        parts["total"].append(marks[-1] - marks[0])
