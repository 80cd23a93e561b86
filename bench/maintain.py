"""The maintain job against a sequential scan of the same table, and beside live writers.

``python -m bench.maintain`` (``--rows``, ``--tenants`` for a smaller run; default 1,000,000
memories in 1,000 tenants) bulk-loads the Spectral spec's memories table of a fresh database
(a mix of workspace episodic, semantic and procedural rows, transient rows in open run
scopes, every 500th row a workspace observation with three independent evidence keys; each
typology's event and validity times spread evenly over the last 400 days: the age is
``i / 10 % 400`` days, independent of the typology, which ``i % 10`` picks), then times, each
against a sequential scan of the table just before it:

- ``seq_scan``: ``SELECT count(*)`` over every row of the table with a predicate that reads
  each row's content (parallel workers off, as the maintain statements run without them:
  PostgreSQL never plans a data-modifying statement in parallel);
- ``catch_up``: the first ``primitives maintain`` pass over the loaded history
  (``maintain()``, batches of 100 tenants as ``primitives_maintainer``, every registered
  pass). The loaded rows were never maintained, so it does 400 days of a periodic job's work
  at once: it promotes the evidence-carrying rows and journals a failed corroboration for
  every semantic row whose 90-day validity window lapsed (archiving those at three). It is
  reported, not held to the target: a deployment meets it once, on its first run or after
  an import of old rows;
- ``rounds`` (``--rounds``): the passes of a daily job after that, each run with its clock
  one day later than the last (``maintain(now=...)``), so each finds what a day brings: the
  semantic rows whose window lapsed that day (about one in ninety), the episodes that crossed
  their horizon. Target: pass / scan <= 3 (each round's pair; the worst round is reported).

Then 8 writer threads (the engine's observe into the cycle tier, as bench.writes measures
them) write for ``--seconds`` alone and with maintain passes running back to back beside
them, alternating; target: writes/s with / without >= 0.8. The passes beside the writers run
with ``--duty`` (the share of wall time a pass may be busy: after a batch it sleeps in
proportion), the knob ``maintain(..., duty=...)`` gives a platform that runs the job beside
live traffic.

Last, search latency with access tracking on and off (``--searches``, alternating blocks on
one engine, the lexical, envelope and recency signals over the loaded tenants); target: p95
tracked / untracked <= 1.1.

Writes ``bench/results/maintain.json`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench._env import RESULTS, bench_databases, log, machine_info, write_result
from bench._targets import BENCH_SPEC, TargetSpec
from bench.writes import concurrent_throughput, latency_summary, tenant_ids
from primitives.compile import agent_tables
from primitives.engine import Engine
from primitives.lifecycle import maintain
from primitives.lifecycle._access import AccessLog
from primitives.spec import load_spec

RESULT = "maintain.json"

_LOAD = """\
INSERT INTO {mem} (workspace_id, id, tier, typology, scope_id, key, content, envelope,
                   provenance, event_time, created_at, updated_at, valid_from, source)
SELECT 'mt-' || lpad((i %% %(tenants)s)::text, 4, '0'), u, t.tier, t.typology,
       CASE WHEN t.tier = 'run' THEN 'run-' || (i %% 3) END, u::text,
       'observation ' || i || ': ' || md5(i::text) || ' route ' || (i %% 97)
         || ' returned stale context after retrieval',
       jsonb_build_object('kind', 'scan', 'n', i),
       CASE WHEN i %% 500 = 1 THEN
         '{{"corroborated_by": ["source:a", "source:b", "source:c"]}}'::jsonb
       ELSE '{{}}'::jsonb END,
       now() - make_interval(days => i / 10 %% 400), now() - make_interval(days => i / 10 %% 400),
       now(), now() - make_interval(days => i / 10 %% 400), 'bench'
FROM generate_series(1, %(rows)s) AS i, CAST(md5('mt' || i) AS uuid) AS u,
     LATERAL (SELECT CASE WHEN i %% 20 = 0 THEN 'run' ELSE 'workspace' END AS tier,
                     CASE WHEN i %% 20 = 0 OR i %% 10 < 7 THEN 'episodic'
                          WHEN i %% 10 < 9 THEN 'semantic' ELSE 'procedural' END AS typology) t
"""

_SCOPES = """\
INSERT INTO {scopes} (workspace_id, tier, scope_id, opened_at, last_activity_at)
SELECT DISTINCT workspace_id, 'run', scope_id, now(), now() FROM {mem} WHERE tier = 'run'
ON CONFLICT DO NOTHING
"""


def _load(dsn: str, rows: int, tenants: int) -> float:
    tables = agent_tables(load_spec(BENCH_SPEC))
    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL(_LOAD).format(mem=tables.memories.ident),
                     {"rows": rows, "tenants": tenants})
        conn.execute(sql.SQL(_SCOPES).format(mem=tables.memories.ident,
                                             scopes=tables.scopes.ident))
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(tables.memories.ident))
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(tables.scopes.ident))
    return time.perf_counter() - started


def _seq_scan(dsn: str) -> float:
    tables = agent_tables(load_spec(BENCH_SPEC))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET max_parallel_workers_per_gather = 0")
        started = time.perf_counter()
        conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE length(content) > 0").format(
            tables.memories.ident)).fetchone()
        return time.perf_counter() - started


def _pass(dsn: str, *, duty: float = 1.0, now: datetime | None = None
          ) -> tuple[float, dict[str, Any]]:
    spec = load_spec(BENCH_SPEC)
    started = time.perf_counter()
    report = maintain([spec], dsn, batch_tenants=100, duty=duty, now=now)
    return time.perf_counter() - started, report.as_dict()


def _writers(app_dsn: str, seconds: float) -> float:
    result = concurrent_throughput(TargetSpec("engine", app_dsn), writers=8, seconds=seconds,
                                   tenants=tenant_ids(50, "mw"), mode="threads")
    return result.writes_per_s


def _writers_beside_maintain(app_dsn: str, admin_dsn: str, seconds: float,
                             duty: float) -> tuple[float, int]:
    stop = threading.Event()
    passes = [0]

    def loop() -> None:
        while not stop.is_set():
            _pass(admin_dsn, duty=duty)
            passes[0] += 1

    worker = threading.Thread(target=loop, daemon=True)
    worker.start()
    time.sleep(0.5)  # the pass is under way when the writers start
    try:
        rate = _writers(app_dsn, seconds)
    finally:
        stop.set()
        worker.join()
    return rate, passes[0]


class _NoAccess(AccessLog):
    """Access tracking off: the baseline of the search measurement."""

    def record(self, tenant: str, ids: Any) -> bool:
        return False


def _search_p95(app_dsn: str, tenants: int, *, searches: int, block: int = 25
                ) -> dict[str, Any]:
    """Search latency with and without access tracking, alternating blocks of ``block``
    searches on one engine (the buffer flushes as it would in service: every 512 ids or 2 s,
    on the read that trips it)."""
    spec = load_spec(BENCH_SPEC)
    samples: dict[str, list[float]] = {"tracked": [], "untracked": []}
    with Engine.connect(spec, app_dsn, max_connections=2) as engine:
        tracked, untracked = AccessLog(), _NoAccess()
        n = 0
        while n < searches:
            for mode in ("tracked", "untracked") if (n // block) % 2 == 0 else (
                    "untracked", "tracked"):
                engine.access = tracked if mode == "tracked" else untracked
                for k in range(block):
                    tenant = f"mt-{(n + k) * 7 % tenants:04d}"
                    started = time.perf_counter()
                    engine.search({"workspace_id": tenant}, f"route {(n + k) % 97} stale",
                                  limit=10)
                    samples[mode].append(time.perf_counter() - started)
            n += block
        engine.access = tracked
    summary = {mode: latency_summary(values) for mode, values in samples.items()}
    summary["p95_ratio"] = round(summary["tracked"]["p95_ms"]
                                 / summary["untracked"]["p95_ms"], 3)
    summary["target"] = 1.1
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.maintain", description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--tenants", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--duty", type=float, default=0.25)
    parser.add_argument("--searches", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=RESULTS / RESULT)
    args = parser.parse_args(argv)
    with bench_databases(log) as dbs:
        dsn = dbs.engine_admin_dsn
        log(f"loading {args.rows:,} memories in {args.tenants:,} tenants")
        load_s = _load(dsn, args.rows, args.tenants)
        log(f"  loaded in {load_s:.1f} s")
        start = datetime.now(UTC)
        scan = _seq_scan(dsn)
        took, report = _pass(dsn, now=start)
        catch_up = {"seq_scan_s": round(scan, 3), "maintain_s": round(took, 3),
                    "ratio": round(took / scan, 2), "changed": report["agents"]}
        log(f"  catch-up pass over the loaded history: scan {scan:.2f} s, maintain "
            f"{took:.2f} s ({took / scan:.2f}x)")
        rounds: list[dict[str, Any]] = []
        for n in range(args.rounds):
            scan = _seq_scan(dsn)
            took, report = _pass(dsn, now=start + timedelta(days=n + 1))
            rounds.append({"day": n + 1, "seq_scan_s": round(scan, 3),
                           "maintain_s": round(took, 3), "ratio": round(took / scan, 2),
                           "changed": report["agents"]})
            log(f"  day {n + 1}: scan {scan:.2f} s, maintain {took:.2f} s "
                f"({took / scan:.2f}x)")
        writes: list[dict[str, Any]] = []
        for n in range(args.rounds):
            alone = _writers(dbs.engine_app_dsn, args.seconds)
            beside, passes = _writers_beside_maintain(dbs.engine_app_dsn, dsn, args.seconds,
                                                      args.duty)
            writes.append({"alone_writes_per_s": alone, "beside_writes_per_s": beside,
                           "passes_during": passes, "ratio": round(beside / alone, 2)})
            log(f"  writers round {n + 1}: alone {alone:,.0f}/s, beside maintain "
                f"{beside:,.0f}/s ({beside / alone:.2f}x, {passes} pass(es))")
        log("search with and without access tracking")
        search = _search_p95(dbs.engine_app_dsn, args.tenants, searches=args.searches)
        log(f"  p95 tracked {search['tracked']['p95_ms']} ms, untracked "
            f"{search['untracked']['p95_ms']} ms ({search['p95_ratio']}x)")
        result = {
            "command": "python -m bench.maintain " + " ".join(argv if argv is not None
                                                             else sys.argv[1:]),
            "rows": args.rows, "tenants": args.tenants, "load_s": round(load_s, 1),
            "catch_up": catch_up, "rounds": rounds,
            "maintain_vs_scan": {
                "worst": max(r["ratio"] for r in rounds),
                "median": statistics.median(r["ratio"] for r in rounds),
                "target": 3.0},
            "writers": {
                "writers": 8, "seconds": args.seconds, "duty": args.duty, "rounds": writes,
                "worst": min(w["ratio"] for w in writes),
                "median": statistics.median(w["ratio"] for w in writes), "target": 0.8},
            "search_access_tracking": search,
            "machine": machine_info(dsn, embedded=dbs.embedded),
        }
    log(f"wrote {write_result(args.out, result)}")
    log(json.dumps({k: result[k] for k in ("maintain_vs_scan", "writers")}, default=str)[:600])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
