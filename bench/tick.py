"""A tick of working memory against one UPDATE of the same rows' TTL column.

``python -m bench.tick`` (``--rows``, ``--jobs`` for a smaller run; default 10,000 WM items in
100 jobs of one user) migrates agents/mace.yaml into a fresh database, bulk-loads the WM rows
(``ttl_ticks`` large enough that none expires during the run, none referenced), then, over
``--rounds`` rounds in alternating order, each as the application role in a tenant
transaction of its own:

- ``update``: ``UPDATE <memories> SET ttl_ticks = ttl_ticks - 1`` over the user's WM rows,
  the least a tick must do;
- ``tick``: ``TenantMemory.tick()``, the engine's tick (the references promotion statement,
  one aging statement per ticked tier, the ``ticked`` event).

Target: tick / update <= 2 (the median and the worst round are reported).

Writes ``bench/results/tick.json`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench._env import RESULTS, bench_databases, log, machine_info, write_result
from primitives._project import migrate
from primitives.compile import agent_tables
from primitives.db import tenant_transaction
from primitives.engine import Engine
from primitives.spec import load_spec

RESULT = "tick.json"
MACE = Path(__file__).resolve().parents[1] / "agents" / "mace.yaml"
USER = "tick-user"

_LOAD = """\
INSERT INTO {mem} (user_id, id, tier, typology, scope_id, key, content, ttl_ticks,
                   age_ticks, reference_ticks, source)
SELECT %(user)s, u, 'wm', 'episodic', 'job-' || (i %% %(jobs)s), u::text,
       'working item ' || i || ': ' || md5(i::text), 1000000, 0, '{{}}', 'bench'
FROM generate_series(1, %(rows)s) AS i, CAST(md5('tick' || i) AS uuid) AS u
"""


def _load(dsn: str, rows: int, jobs: int) -> float:
    tables = agent_tables(load_spec(MACE))
    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL(_LOAD).format(mem=tables.memories.ident),
                     {"user": USER, "rows": rows, "jobs": jobs})
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(tables.memories.ident))
    return time.perf_counter() - started


def _update(app_dsn: str) -> tuple[float, int]:
    tables = agent_tables(load_spec(MACE))
    statement = sql.SQL("UPDATE {} SET ttl_ticks = ttl_ticks - 1 WHERE {} = %s "
                        "AND tier = 'wm'").format(tables.memories.ident, tables.tenant)
    with psycopg.connect(app_dsn, autocommit=True) as conn:
        started = time.perf_counter()
        with tenant_transaction(conn, USER):
            cur = conn.execute(statement, (USER,))
        return time.perf_counter() - started, cur.rowcount


def _tick(engine: Engine) -> tuple[float, int]:
    started = time.perf_counter()
    with engine.tenant({"user_id": USER}) as mem:
        result = mem.tick()
    return time.perf_counter() - started, result.aged


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tick", description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--out", type=Path, default=RESULTS / RESULT)
    args = parser.parse_args(argv)
    spec = load_spec(MACE)
    with bench_databases(log) as dbs:
        dsn = dbs.engine_admin_dsn
        migrate([spec], dsn=dsn, progress=lambda _: None)
        log(f"loading {args.rows:,} WM items in {args.jobs} jobs")
        load_s = _load(dsn, args.rows, args.jobs)
        rounds: list[dict[str, Any]] = []
        with Engine.connect(spec, dbs.engine_app_dsn, max_connections=1) as engine:
            _tick(engine)  # warm: the statements' first plans, the pool's connection
            _update(dbs.engine_app_dsn)
            for n in range(args.rounds):
                if n % 2 == 0:
                    update_s, updated = _update(dbs.engine_app_dsn)
                    tick_s, aged = _tick(engine)
                else:
                    tick_s, aged = _tick(engine)
                    update_s, updated = _update(dbs.engine_app_dsn)
                assert updated == aged == args.rows, (updated, aged)
                rounds.append({"update_ms": round(update_s * 1000, 2),
                               "tick_ms": round(tick_s * 1000, 2),
                               "ratio": round(tick_s / update_s, 2)})
                log(f"  round {n + 1}: update {update_s * 1000:.1f} ms, tick "
                    f"{tick_s * 1000:.1f} ms ({tick_s / update_s:.2f}x)")
        result = {
            "command": "python -m bench.tick " + " ".join(argv if argv is not None
                                                          else sys.argv[1:]),
            "rows": args.rows, "jobs": args.jobs, "load_s": round(load_s, 2),
            "rounds": rounds,
            "tick_vs_update": {
                "median": statistics.median(r["ratio"] for r in rounds),
                "worst": max(r["ratio"] for r in rounds), "target": 2.0},
            "machine": machine_info(dsn, embedded=dbs.embedded),
        }
    log(f"wrote {write_result(args.out, result)}")
    log(json.dumps(result["tick_vs_update"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
