"""What consolidating a session costs, beside writing it.

``python -m bench.consolidation`` (``--sessions``, ``--episodes``, ``--rounds``) migrates the
assistant spec (seed 002) into a fresh database and, interleaved over ``--rounds`` rounds,
each round on ``--sessions`` new users with one session of ``--episodes`` episodes each
(statements of employers, preferences, habits and company names among small talk):

- ``write``: the session's episodes through ``Engine.observe``, the hot path (episode row,
  journal event, temporal edge); the baseline;
- ``consolidate``: ``consolidate(id)`` with the rule-based extractor (the ledger claim,
  extraction, facts, entity mentions and ``derived_from`` edges, all journalled), then
  ``end_scope('session', id)``, which finds nothing left to claim: a session's end;
- ``rerun``: ending the session again: nothing left to claim, so nothing is extracted.

Reported per session: milliseconds of each, and consolidate / write and rerun / write
ratios (each round's own pair; the median and worst round). Extraction runs at the session's
end, not inside ``observe``, so the write path's cost is the baseline itself. No target: this
says what a session end costs.

Writes ``bench/results/consolidation.json`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench._env import RESULTS, bench_databases, log, machine_info, write_result
from bench._targets import ROOT
from primitives._project import migrate
from primitives.engine import Engine
from primitives.spec import AgentSpec, load_spec

RESULT = "consolidation.json"
SPEC = ROOT / "agents" / "assistant_memory.yaml"

_LINES = (
    "I work at {org}.",
    "We had a long call about the quarterly roadmap.",
    "I prefer short async standups.",
    "Always write the runbook before the rollout.",
    "Then I met {person} from {org2} about the migration.",
    "The weather was grey all morning, nothing much happened.",
    "My favorite editor is Helix.",
    "I hate long meetings without an agenda.",
    "{person} works for {org2}.",
    "Lunch ran late, we talked about holidays.",
)
_ORGS = ("Acme Corp", "Globex", "Initech Labs", "Umbrella Group", "Hooli", "Stark Industries")
_PEOPLE = ("Dana Reyes", "Sam Okafor", "Lena Park", "Ravi Menon")


def _episodes(n: int, seed: int) -> list[str]:
    return [_LINES[i % len(_LINES)].format(
        org=_ORGS[(seed + i) % len(_ORGS)], org2=_ORGS[(seed + i + 1) % len(_ORGS)],
        person=_PEOPLE[(seed + i) % len(_PEOPLE)]) for i in range(n)]


def _round(engine: Engine, sessions: int, episodes: int, n: int) -> dict[str, Any]:
    users = [{"user_id": f"bc-{n}-{uuid.uuid4().hex[:8]}"} for _ in range(sessions)]
    started = time.perf_counter()
    for k, user in enumerate(users):
        for text in _episodes(episodes, k):
            engine.observe(user, "long_term", text, typology="episodic", scope_id="s-1")
    write = time.perf_counter() - started
    started = time.perf_counter()
    counts = {"episodes": 0, "added": 0, "mentions": 0, "edges": 0}
    for user in users:
        with engine.tenant(user) as mem:
            [done] = mem.consolidate("s-1")
            mem.end_scope("session", "s-1")  # the session closes; nothing left to claim
        for name in counts:
            counts[name] += getattr(done, name)
    consolidate = time.perf_counter() - started
    started = time.perf_counter()
    for user in users:
        with engine.tenant(user) as mem:
            mem.end_scope("session", "s-1")
    rerun = time.perf_counter() - started
    per = 1000 / sessions
    return {"write_ms": round(write * per, 2), "consolidate_ms": round(consolidate * per, 2),
            "rerun_ms": round(rerun * per, 2),
            "consolidate_vs_write": round(consolidate / write, 2),
            "rerun_vs_write": round(rerun / write, 3), "done": counts}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.consolidation", description=__doc__)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / RESULT)
    args = parser.parse_args(argv)
    spec: AgentSpec = load_spec(SPEC)
    with bench_databases(log) as dbs:
        migrate([spec], dsn=dbs.engine_admin_dsn, progress=lambda _: None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # no embedder: lexical search
            engine = Engine.connect(spec, dbs.engine_app_dsn, max_connections=2)
        rounds: list[dict[str, Any]] = []
        with engine:
            for n in range(args.rounds):
                row = _round(engine, args.sessions, args.episodes, n)
                rounds.append(row)
                log(f"  round {n + 1}: write {row['write_ms']} ms, consolidate "
                    f"{row['consolidate_ms']} ms ({row['consolidate_vs_write']}x), rerun "
                    f"{row['rerun_ms']} ms per session")
        result = {
            "command": "python -m bench.consolidation " + " ".join(
                argv if argv is not None else sys.argv[1:]),
            "sessions": args.sessions, "episodes": args.episodes, "rounds": rounds,
            "consolidate_vs_write": {
                "median": statistics.median(r["consolidate_vs_write"] for r in rounds),
                "worst": max(r["consolidate_vs_write"] for r in rounds)},
            "rerun_vs_write": {
                "median": statistics.median(r["rerun_vs_write"] for r in rounds),
                "worst": max(r["rerun_vs_write"] for r in rounds)},
            "machine": machine_info(dbs.engine_admin_dsn, embedded=dbs.embedded),
        }
    log(f"wrote {write_result(args.out, result)}")
    log(json.dumps({k: result[k] for k in ("consolidate_vs_write", "rerun_vs_write")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
