"""Where one engine write spends its time: each round trip and the Python between them.

It drives the engine's own core operation (``primitives.engine._core.observe``) on one
application-role connection, exactly as ``Engine.tenant`` + ``TenantMemory.observe``
do (``BEGIN; SET LOCAL`` tenant in one round trip, the operation's one statement, then
``COMMIT; RESET ALL``), with a clock around each part. Diagnostic only: the headline numbers come from the real engine.
"""

from __future__ import annotations

import itertools
import time
import warnings
from collections.abc import Sequence
from typing import Any

import psycopg

from bench._targets import BENCH_SPEC, BENCH_TIER, payload
from bench.writes import latency_summary
from primitives.db import begin_statement
from primitives.engine import Engine
from primitives.engine import _core as core
from primitives.engine._anchor import resolve_anchor
from primitives.spec import load_spec

__all__ = ["PARTS", "write_breakdown"]

PARTS = (
    ("begin", "BEGIN; SET LOCAL primitives.tenant (one round trip)"),
    ("python_checks", "Python: policy and limit checks, statement and event built"),
    ("insert", "INSERT memory row + journal event (chain trigger) + scope mark (one round trip)"),
    ("commit", "COMMIT; RESET ALL: WAL flush (round trip)"),
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
                _one(conn, engine, spec, tenants[n % len(tenants)], 10_000_000 + n,
                     parts if n >= warmup else None)
    finally:
        engine.close()
    return {key: {"label": label, **latency_summary(parts[key])} for key, label in PARTS}


def _one(conn: psycopg.Connection[Any], engine: Engine, spec: Any, tenant: str, i: int,
         parts: dict[str, list[float]] | None) -> None:
    content, envelope, tags = payload(i)
    ctx = engine.context(resolve_anchor(spec, {"workspace_id": tenant}), "agent")
    marks = [time.perf_counter()]
    conn.execute(begin_statement(tenant))
    marks.append(time.perf_counter())
    op = core.observe(ctx, BENCH_TIER, content, envelope=envelope, tags=tags)
    statements = 0
    try:
        step = next(op)
        while True:
            if isinstance(step, core.Embed):  # not with this engine (no embedder)
                step = op.send(step.compute())
                continue
            marks.append(time.perf_counter())
            row = conn.execute(step.statement, step.params).fetchone()
            marks.append(time.perf_counter())
            statements += 1
            step = op.send(row)
    except StopIteration:
        pass
    if statements != 1:
        raise AssertionError(f"observe ran {statements} statements; the breakdown expects 1 "
                             "(row, event and scope in one statement): update bench/_breakdown.py")
    conn.execute("COMMIT; RESET ALL")
    marks.append(time.perf_counter())
    if parts is not None:
        keys = [key for key, _ in PARTS if key != "total"]
        for key, (a, b) in zip(keys, itertools.pairwise(marks), strict=True):
            parts[key].append(b - a)
        parts["total"].append(marks[-1] - marks[0])
