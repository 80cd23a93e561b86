"""A write under the non-mirror trigram guard against the same write without it.

``python -m bench.non_mirror`` (``--canonical``, ``--writes``, ``--rounds`` for a smaller run)
creates a platform table of canonical rule texts (about 300 characters each; the guard keeps
its own index of them, a GIN ``gin_trgm_ops`` index on the text is there but unused) in a fresh database and
migrates two agents that differ only in the defense of their non-mirror category
on it: ``trigram_trigger`` (every insert is compared with the canonical rows sharing a word
shingle with it or whose word signature its words nearly cover) and ``workshop_discipline``
(nothing is compared). For each canonical table
size, interleaved over ``--rounds`` rounds, it times ``Engine.observe`` of a 300-character note
that copies nothing (so every write is accepted) on each. It then times the guard's two
candidate lookups on their own for that note (the word 3-shingle postings, the word
signatures): the server's execution time, least of 50 runs.

No target: the figures say what the guard costs a write as the canonical table grows
(docs/non-mirror.md, "Cost"). Writes ``bench/results/non_mirror.json``.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench._env import RESULTS, log, machine_info, p50_ratio, scratch_database, write_result
from primitives._project import migrate
from primitives.db import app_dsn
from primitives.engine import Engine
from primitives.spec import AgentSpec, load_spec

RESULT = "non_mirror.json"

_SPEC = """\
version: 1
agent: {agent}
anchor: {{keys: [world_id], required_at_write: [world_id]}}
typology:
  world: [procedural]
tiers:
  - {{name: world, boundary: {{scope_change: world_id}}, persistent: true}}
persistence:
  store: {{schema: bench_nm, prefix: {agent}}}
retrieval:
  signals: [lexical, recency]
discipline:
  non_mirror:
    - category: rules
      canonical_source: {source}
      defense: {defense}
"""

_WORDS = ("unit", "melee", "defender", "attacker", "dice", "armour", "wound", "retreat", "hex",
          "edge", "scout", "woods", "hedge", "objective", "marker", "turn", "cavalry", "charge",
          "artillery", "deployment", "zone", "scenario", "morale", "rally", "flank", "range",
          "cover", "volley", "reserve", "command", "order", "phase", "roll", "modifier")
_NOTE = ("Operators of world {n} keep asking how the end of a round is scored when both sides "
         "claim the same ground; answer through the rules tool instead of from memory, mention "
         "that ties go to whoever moved last, and link the scoring sheet the team shares.")


def _vocabulary() -> list[str]:
    """Words of this project's concepts page, as often as they occur there: English text's
    trigram statistics, without a corpus to download."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "concepts.md").read_text("utf-8")
    return [*re.findall(r"[a-z]{2,}", text.lower()), *_WORDS]


def _rule(rng: random.Random, words: Sequence[str], n: int) -> str:
    return f"Rule {n}: " + " ".join(rng.choice(words) for _ in range(60))[:290] + "."


def _specs(folder: Path, source: str, size: int) -> tuple[AgentSpec, AgentSpec]:
    specs = []
    for defense in ("workshop_discipline", "trigram_trigger"):
        agent = f"nm_{defense.split('_')[0]}_{size}"
        path = folder / f"{agent}.yaml"
        path.write_text(_SPEC.format(agent=agent, source=source, defense=defense),
                        encoding="utf-8")
        specs.append(load_spec(path))
    return specs[0], specs[1]


def _time_writes(engine: Engine, tenant: str, start: int, count: int) -> list[float]:
    times = []
    for n in range(start, start + count):
        content = _NOTE.format(n=n)
        began = time.perf_counter()
        engine.observe({"world_id": tenant}, "world", content)
        times.append((time.perf_counter() - began) * 1000)
    return times


def _measure(dsn: str, folder: Path, size: int, *, writes: int, rounds: int
             ) -> dict[str, float]:
    table = sql.Identifier("bench_canon", f"rules_{size}")
    rng, words = random.Random(size), _vocabulary()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (id integer PRIMARY KEY, body_text text NOT NULL)"
                             ).format(table))
        with conn.cursor() as cur, cur.copy(sql.SQL("COPY {} (id, body_text) FROM STDIN").format(
                table)) as copy:
            for n in range(size):
                copy.write_row((n, _rule(rng, words, n)))
        conn.execute(sql.SQL("CREATE INDEX ON {} USING gin (body_text gin_trgm_ops)").format(
            table))
        conn.execute(sql.SQL("GRANT SELECT, REFERENCES ON {} TO primitives_owner").format(table))
    plain, guarded = _specs(folder, f"bench_canon.rules_{size}.body_text", size)
    migrate([plain, guarded], dsn=dsn, progress=lambda _: None)
    samples: dict[str, list[float]] = {"plain": [], "guarded": []}
    with Engine.connect(plain, app_dsn(dsn), max_connections=1) as a, \
            Engine.connect(guarded, app_dsn(dsn), max_connections=1) as b:
        for engine in (a, b):  # warm: pools, prepared statements, the trigger's plan
            _time_writes(engine, "warm", 0, 20)
        for r in range(rounds):
            order = ((a, "plain"), (b, "guarded")) if r % 2 == 0 else (
                (b, "guarded"), (a, "plain"))
            for engine, label in order:
                samples[label] += _time_writes(engine, f"t{r % 7}", r * writes, writes)
            log(f"{size} canonical rows: round {r + 1}/{rounds}")
    lookups = _lookups(dsn, guarded)
    return {"canonical_rows": size, **p50_ratio(samples, "plain", "guarded"), **lookups}


_LOOKUPS = {
    "shingle_lookup_ms": (
        "SELECT p.canonical_key FROM {postings} AS p WHERE p.category = 'rules' "
        "AND p.shingle = ANY({shingles}(%(note)s))"),
    "signature_lookup_ms": (
        "SELECT g.canonical_key FROM {signatures} AS g WHERE g.category = 'rules' "
        "AND g.word = ANY({words}(%(note)s)) GROUP BY g.canonical_key, g.size "
        "HAVING count(*) >= g.size - g.size / 4"),
}


def _lookups(dsn: str, spec: AgentSpec, repeat: int = 50) -> dict[str, float | int]:
    """The guard's two candidate lookups for the bench's note, each on its own: the server's
    execution time (``EXPLAIN ANALYZE``), the least of ``repeat`` runs (the least is what the
    work costs; the rest is the machine's other load), and how many signature entries the
    note's words reach."""
    schema, prefix = spec.persistence.store.schema_, spec.persistence.store.prefix
    names = {k: sql.Identifier(schema, f"{prefix}_{v}") for k, v in (
        ("postings", "canonical_postings"), ("signatures", "canonical_signatures"),
        ("shingles", "shingles"), ("words", "words"))}
    note = {"note": _NOTE.format(n=0)}
    result: dict[str, float | int] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for key, text in _LOOKUPS.items():
            statement = sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) " + text).format(**names)
            result[key] = round(min(
                float(conn.execute(statement, note).fetchone()[0][0]["Execution Time"])
                for _ in range(repeat)), 3)
        entries = conn.execute(sql.SQL(
            "SELECT count(*) FROM {signatures} WHERE category = 'rules' "
            "AND word = ANY({words}(%(note)s))").format(**names), note).fetchone()
        result["signature_entries"] = int(entries[0])
    return result


def run(*, sizes: Sequence[int], writes: int, rounds: int, out: Path,
        command: str) -> dict[str, Any]:
    with scratch_database("nm") as (dsn, embedded), tempfile.TemporaryDirectory() as tmp:
        migrate([], dsn=dsn, progress=lambda _: None)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE SCHEMA bench_canon; "
                         "GRANT USAGE ON SCHEMA bench_canon TO primitives_owner")
        by_size = [_measure(dsn, Path(tmp), size, writes=writes, rounds=rounds)
                   for size in sizes]
        info = machine_info(dsn, embedded=embedded)
    result: dict[str, Any] = {"command": command, "writes_per_round": writes, "rounds": rounds,
                              "note_chars": len(_NOTE.format(n=0)), "sizes": by_size,
                              "machine": info}
    log(f"{by_size}; wrote {write_result(out, result)}")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--canonical", default="100,1000",
                        help="canonical table sizes, comma-separated")
    parser.add_argument("--writes", type=int, default=100, help="writes per engine per round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--out", type=Path, default=RESULTS / RESULT)
    args = parser.parse_args(argv)
    given = list(argv) if argv is not None else sys.argv[1:]
    run(sizes=[int(s) for s in args.canonical.split(",")], writes=args.writes,
        rounds=args.rounds, out=args.out,
        command=" ".join(["python -m bench.non_mirror", *given]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
