"""A write of an event-driven agent (with an outbox) against the same write of one without.

``python -m bench.outbox`` (``--writes``, ``--rounds`` for a smaller run) migrates two agents
that differ only in ``discipline.visibility.cross_context`` (``event_driven`` with one event and
one gate on ``profile.semantic``, against ``none``) into a fresh database, then times
``Engine.observe`` (the one-statement write) on each, write by write in turn (which agent goes
first alternates), over ``--rounds`` rounds of ``--writes`` writes:

- ``unpublished``: an episodic write, outside the gate's ``from``: the publish trigger's
  ``WHEN`` does not match, so the agent with an outbox should pay (almost) nothing;
- ``published``: a semantic write, which the agent with an outbox carries across the gate in
  the same statement (an outbox entry, a ``sanitized`` journal event, a NOTIFY).

Target: p50 with the outbox / without <= 1.1 for the unpublished write. The published write's
ratio is reported beside it. Writes ``bench/results/outbox.json``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg

from bench._env import RESULTS, log, machine_info, p50_ratio, scratch_database, write_result
from primitives._project import migrate
from primitives.db import app_dsn
from primitives.engine import Engine
from primitives.spec import AgentSpec, load_spec

RESULT = "outbox.json"
TARGET = 1.1

_SPEC = """\
version: 1
agent: {agent}
anchor: {{keys: [user_id], required_at_write: [user_id]}}
typology:
  profile: [episodic, semantic]
tiers:
  - {{name: profile, boundary: {{scope_change: user_id}}, persistent: true}}
persistence:
  store: {{schema: bench_outbox, prefix: {agent}}}
retrieval:
  signals: [lexical, recency]
behavior:
  write_policy:
    semantic: {{mode: auto, justification: the benchmark writes facts directly}}
discipline:
  sanitization:
    - {{name: strip_user, from: profile.semantic, to: shared, strip: [user_id],
       policy: bench_strip}}
  visibility: {visibility}
"""

_POLICY = """\
version: 1
kind: sanitization
name: bench_strip
strip_keys: [host]
strip_patterns: ['\\bu-[0-9]+\\b']
replacement: '[user]'
"""

_TEXT = ("the nightly build on the shared runner stalls when the cache is cold and the "
         "artifact store is slow; warming the cache first takes the stall away ")


def _specs(folder: Path) -> tuple[AgentSpec, AgentSpec]:
    (folder / "agents").mkdir()
    (folder / "policies").mkdir()
    (folder / "policies" / "bench_strip.yaml").write_text(_POLICY, encoding="utf-8")
    specs = []
    for agent, visibility in (
            ("bench_private", "{cross_context: none}"),
            ("bench_published", "{cross_context: event_driven, events: [bench.written]}")):
        path = folder / "agents" / f"{agent}.yaml"
        path.write_text(_SPEC.format(agent=agent, visibility=visibility), encoding="utf-8")
        specs.append(load_spec(path))
    return specs[0], specs[1]


def _time_writes(engine: Engine, tenant: str, typology: str, count: int,
                 start: int) -> list[float]:
    times = []
    for n in range(start, start + count):
        started = time.perf_counter()
        engine.observe({"user_id": tenant}, "profile", f"[{n}] {_TEXT}", typology=typology,
                       envelope={"host": "runner-3"})
        times.append((time.perf_counter() - started) * 1000)
    return times


def run(*, writes: int, rounds: int, out: Path, command: str) -> dict[str, Any]:
    with scratch_database("outbox") as (dsn, embedded), tempfile.TemporaryDirectory() as tmp:
        private, published = _specs(Path(tmp))
        migrate([private, published], dsn=dsn)
        samples: dict[str, dict[str, list[float]]] = {
            variant: {"private": [], "published": []}
            for variant in ("unpublished", "published")}
        with Engine.connect(private, app_dsn(dsn), max_connections=1) as a, \
                Engine.connect(published, app_dsn(dsn), max_connections=1) as b:
            for engine in (a, b):  # warm: pools, prepared statements, plans
                for typology in ("episodic", "semantic"):
                    _time_writes(engine, "warm", typology, 20, 0)
            for r in range(rounds):
                for variant, typology in (("unpublished", "episodic"),
                                          ("published", "semantic")):
                    # write by write, alternating which agent goes first, so the
                    # shared machine's drift falls on both alike
                    for i in range(writes):
                        n = r * writes + i
                        order = ((a, "private"), (b, "published")) if n % 2 == 0 else (
                            (b, "published"), (a, "private"))
                        for engine, label in order:
                            samples[variant][label] += _time_writes(
                                engine, f"u-{r % 7}", typology, 1, n)
                log(f"round {r + 1}/{rounds}")
        info = machine_info(dsn, embedded=embedded)
        with psycopg.connect(dsn) as conn:
            row = conn.execute("SELECT count(*) FROM bench_outbox.bench_published_outbox"
                               ).fetchone()
        published_entries = int(row[0]) if row else 0
    result: dict[str, Any] = {"command": command, "writes_per_round": writes, "rounds": rounds,
                              "target": TARGET, "outbox_entries": published_entries,
                              "machine": info}
    for variant, by in samples.items():
        result[variant] = p50_ratio(by, "private", "published")
    result["target_met"] = result["unpublished"]["ratio"] <= TARGET
    log(f"unpublished: {result['unpublished']}; published: {result['published']}; wrote "
        f"{write_result(out, result)}")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=300, help="writes per engine per round")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--out", type=Path, default=RESULTS / RESULT)
    args = parser.parse_args(argv)
    given = list(argv) if argv is not None else sys.argv[1:]
    run(writes=args.writes, rounds=args.rounds, out=args.out,
        command=" ".join(["python -m bench.outbox", *given]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
