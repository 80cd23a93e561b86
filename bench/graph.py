"""The assistant's graph memory at 100,000 nodes: hot-path writes and why / when questions
beside a plain hybrid search of the same data, in one run.

``python -m bench.graph`` (``--nodes`` for a smaller run; default 100,000) migrates
``agents/assistant_memory.yaml`` into a fresh database and loads one user's year of memory
set-based (one ``INSERT ... SELECT generate_series`` per table, as the admin): of the nodes,
one in twenty is an entity (six types, mentioned with a long-tailed popularity), the rest
memory rows: 70 % episodes in sessions of 20 turns, 20 % semantic facts, 5 % procedures and
5 % opinions. The edges follow the assistant's write paths: a ``temporal`` edge from each
turn to the next of its session (the hot path's), a ``causal`` edge into every 37th turn
from the turn before it (the "so ..." turns), two ``derived_from`` edges from each
fact, procedure and opinion to the episodes it was consolidated from, an ``entity`` edge
between consecutive facts about the same entity, and a ``supersedes`` edge from every 50th
fact to the one it corrected (that one superseded and invalidated, confidence 0.3); a third
of the episodes and every fact mention an entity (``node_entities``). Every row has a vector (the
deferred embedder has caught up: 32 topics with noise; the HNSW index is rebuilt after the
load with its own definition), and the planner's statistics are refreshed. Then
``--warm-writes`` hot-path writes go through the engine before anything is timed.

Interleaved over ``--rounds`` rounds, the order of the searches rotating from round to
round, each round makes ``--writes`` hot-path writes (``observe`` of an episodic turn into
the user's current session: the row, its journal event and the temporal edge to the
previous turn, as the assistant writes every message; the vector is left to the deferred
embedder) and asks three questions, each with ``limit`` 10 (``search_memory``'s default):

- ``why``: a why question through the assistant's spec (the keyword rules route it: causal
  edges, graph weight 1; its complexity, as the engine infers it, sets the depth: 2 for a
  simple question, 3 for a complex one);
- ``when``: a when question ("when did ...", "what happened before/after ..."): temporal
  edges, walked one way or both as its words say;
- ``plain``: the same question text through a plain hybrid search of the same tables
  (semantic, lexical and recency fused by RRF: the spec without its graph signal and intent
  routing), the baseline both are compared with.

A third of the questions name an entity (its mentions start the walk too); every fourth
adds a clause. Query vectors
come from a deterministic embedder (``TopicEmbedder``): the query's model inference is
kept out of the timings, the same for every search. Reported: p50/p95 of each, the ratios
why / plain and when / plain at p95 (target <= 2), the write p95 beside the plain search,
and per graph search how many rows the graph signal returned (that the walk found rows).

Writes ``bench/results/graph.json`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench._env import RESULTS, log, machine_info, scratch_database, write_result
from bench._targets import ROOT
from bench.writes import latency_summary
from primitives._project import migrate
from primitives.compile import Tables, agent_tables
from primitives.db import app_dsn
from primitives.engine import Engine
from primitives.spec import AgentSpec, load_spec

RESULT = "graph.json"
SPEC = ROOT / "agents" / "assistant_memory.yaml"
USER = "graph-bench-user"
TARGET = 2.0
LIMIT = 10
TOPICS = 32
MODEL = "bench/topic-384"

WORDS = (
    "release deploy payment tests build review budget meeting flight hotel garden tomatoes "
    "invoice contract client server database cache outage migration report slides dinner "
    "doctor dentist school homework piano guitar running marathon recipe pasta coffee tea "
    "train station airport visa passport insurance mortgage rent landlord plumber kitchen "
    "laptop phone battery backup password email calendar deadline launch roadmap hiring "
    "interview salary bonus vacation beach mountain hiking camping birthday wedding gift "
    "present movie concert ticket museum library book novel podcast newsletter blog article "
    "paper conference talk workshop course exam grade teacher project sprint ticket bug "
    "feature design mockup prototype customer support refund order delivery package parcel "
    "weather rain snow storm heating boiler car tyre garage repair insurance claim bank "
    "account transfer loan savings pension tax return receipt expense lunch breakfast gym "
    "yoga swim bike commute traffic parking neighbour party barbecue holiday family parents "
    "sister brother cousin friend colleague manager team office remote contractor vendor"
).split()
FIRST = ("Alice Bob Carol Dave Erin Frank Grace Heidi Ivan Judy Mallory Niaj Olivia Peggy "
         "Rupert Sybil Trent Victor Walter Yara").split()
LAST = ("Stone Rivers Hale Moss Park Quinn Reed Shaw Todd Vance Wolfe Young Zane Abbot "
        "Baird Cole Drake Ellis Frost Grant").split()
ENTITY_TYPES = ("person", "project", "organization", "place", "concept", "tool")


class TopicEmbedder:
    """Deterministic 384-dim query vectors: the topic a text hashes to, with noise, from the
    same 32 topic centroids as the loaded rows. Query model inference stays out of the
    timings (the same for every search)."""

    def __init__(self, centroids: Sequence[Sequence[float]]) -> None:
        self.centroids = centroids

    @property
    def model_id(self) -> str:
        return MODEL

    @property
    def dims(self) -> int:
        return 384

    def _embed(self, text: str) -> list[float]:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
        rng = random.Random(seed)
        centre = self.centroids[seed % len(self.centroids)]
        return [c + 0.3 * (rng.random() - 0.5) for c in centre]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)


def centroids() -> list[list[float]]:
    rng = random.Random(2024)
    return [[rng.random() - 0.5 for _ in range(384)] for _ in range(TOPICS)]


def entity_names(count: int) -> list[str]:
    """``count`` distinct names: first x last, then numbered."""
    names = [f"{f} {last}" for last in LAST for f in FIRST]
    return [names[j] if j < len(names) else f"{names[j % len(names)]} {j // len(names)}"
            for j in range(count)]


def shape(nodes: int) -> dict[str, int]:
    """How ``nodes`` splits: entities, episodes, facts (semantic, procedural, opinion)."""
    entities = max(nodes // 20, 1)
    rows = nodes - entities
    episodes = rows * 70 // 100
    return {"entities": entities, "memories": rows, "episodes": episodes,
            "facts": rows - episodes}


# The load: one statement per table, every value a function of the row number. ``%(…)s`` are
# bind parameters; ``{…}`` identifiers. Episode n (1..episodes) is turn (n - 1) % 20 of
# session (n - 1) / 20; fact n (1..facts) is memory row episodes + n.
_ENTITIES = """\
INSERT INTO {entities} (user_id, id, canonical_name, type, mention_count, first_seen,
                        last_updated)
SELECT %(user)s, md5('entity' || j)::uuid, (%(names)s::text[])[j],
       (%(types)s::text[])[1 + j %% 6], 0, now() - interval '365 days', now()
FROM generate_series(1, %(entities)s) AS j
"""

# Which entity a row mentions (or 0): a third of the episodes and every fact, the entity
# drawn with a long tail (entity 1 is the user's manager, mentioned most). A pure function
# of the row number, so the mentions table and the content agree.
_MENTION = ("CASE WHEN {n} > %(episodes)s OR {n} %% 3 = 0 THEN 1 + floor(%(entities)s * "
            "power(('x' || substr(md5('m' || {n}), 1, 8))::bit(32)::bigint::float8 "
            "/ 4294967296.0, 3))::int ELSE 0 END")


def _word(n: str, k: int) -> str:
    return (f"(%(words)s::text[])[1 + floor(%(nwords)s * power(('x' || substr(md5('{k}:' || "
            f"{n}), 1, 8))::bit(32)::bigint::float8 / 4294967296.0, 2))::int]")


_MEMORIES = """\
INSERT INTO {mem} (user_id, id, tier, typology, scope_id, key, content, provenance, embedding,
                   embedding_model, confidence, event_time, created_at, updated_at, valid_from,
                   source)
SELECT %(user)s, md5('node' || n)::uuid, 'long_term', r.typology,
       CASE WHEN n <= %(episodes)s THEN 's-' || ((n - 1) / 20) END,
       CASE WHEN n <= %(episodes)s THEN 'turn-' || n ELSE r.typology || ':' || n END,
       r.lead || {w1} || ' ' || {w2} || ' ' || {w3} || ' ' || {w4} || ' ' || {w5}
         || CASE WHEN r.mention > 0 THEN ' with ' || (%(names)s::text[])[r.mention] ELSE '' END
         || '.',
       CASE WHEN n <= %(episodes)s THEN jsonb_build_object('session_id', 's-' || ((n - 1) / 20))
            ELSE '{{}}'::jsonb END,
       (SELECT array_agg(c[(n %% %(topics)s) * 384 + d] + 0.3 * (random() - 0.5) ORDER BY d)
        FROM generate_series(1, 384) AS d)::vector(384)::halfvec(384),
       %(model)s, r.confidence, r.at, r.at, r.at, r.at, r.source
FROM (SELECT %(centroids)s::float8[] AS c) AS k, generate_series(1, %(rows)s) AS n,
     LATERAL (SELECT CASE WHEN n <= %(episodes)s THEN 'episodic'
                          WHEN n %% 10 < 8 THEN 'semantic'
                          WHEN n %% 10 = 8 THEN 'procedural' ELSE 'opinion' END AS typology,
                     CASE WHEN n > %(episodes)s THEN 'User noted the '
                          WHEN n %% 37 = 0 THEN 'turn ' || n || ': so the '
                          ELSE 'turn ' || n || ': the ' END AS lead,
                     CASE WHEN n <= %(episodes)s THEN 1.0 WHEN n %% 5 = 0 THEN 0.6
                          ELSE 0.8 END AS confidence,
                     CASE WHEN n <= %(episodes)s THEN 'user' WHEN n %% 5 = 0 THEN 'inference'
                          ELSE 'extraction' END AS source,
                     now() - interval '365 days' + (n - 1) * interval '365 days' / %(rows)s
                       AS at,
                     {mention} AS mention) AS r
"""

_NODE_ENTITIES = """\
INSERT INTO {node_entities} (user_id, memory_id, entity_id)
SELECT %(user)s, md5('node' || n)::uuid, md5('entity' || m.mention)::uuid
FROM generate_series(1, %(rows)s) AS n, LATERAL (SELECT {mention} AS mention) AS m
WHERE m.mention > 0
"""

_MENTION_COUNTS = """\
UPDATE {entities} AS e SET mention_count = c.n
FROM (SELECT entity_id, count(*) AS n FROM {node_entities} WHERE user_id = %(user)s
      GROUP BY entity_id) AS c
WHERE e.user_id = %(user)s AND e.id = c.entity_id
"""

# The edges: (source row number, target row number, type, confidence).
_EDGES = """\
INSERT INTO {edges} (user_id, source_id, target_id, relation_type, confidence, valid_from,
                     created_at)
SELECT %(user)s, md5('node' || x.s)::uuid, md5('node' || x.t)::uuid, x.kind, x.confidence,
       now() - interval '365 days' + (greatest(x.s, x.t) - 1) * interval '365 days' / %(rows)s,
       now() - interval '365 days' + (greatest(x.s, x.t) - 1) * interval '365 days' / %(rows)s
FROM (
  SELECT n AS s, n + 1 AS t, 'temporal' AS kind, 1.0 AS confidence
  FROM generate_series(1, %(episodes)s - 1) AS n WHERE n %% 20 <> 0
  UNION ALL
  SELECT n - 1, n, 'causal', 0.6 FROM generate_series(2, %(episodes)s) AS n
  WHERE n %% 37 = 0 AND n %% 20 <> 1
  UNION ALL
  SELECT f, 1 + (f::bigint * 7919) %% %(episodes)s, 'derived_from', 0.8
  FROM generate_series(%(episodes)s + 1, %(rows)s) AS f
  UNION ALL
  SELECT f, 1 + (1 + (f::bigint * 7919) %% %(episodes)s) %% %(episodes)s, 'derived_from', 0.8
  FROM generate_series(%(episodes)s + 1, %(rows)s) AS f
  UNION ALL
  SELECT f, p, 'entity', 0.8 FROM (
    SELECT f, lag(f) OVER (PARTITION BY m.mention ORDER BY f) AS p
    FROM generate_series(%(episodes)s + 1, %(rows)s) AS f,
         LATERAL (SELECT {mention_f} AS mention) AS m) AS q
  WHERE p IS NOT NULL
  UNION ALL
  SELECT f, f - 1, 'supersedes', 1.0 FROM generate_series(%(episodes)s + 2, %(rows)s) AS f
  WHERE f %% 50 = 1
) AS x
"""

_CORRECTED = """\
UPDATE {mem} AS m SET superseded_at = n.event_time, superseded_by = n.id,
       invalidated_at = n.event_time, confidence = 0.3, decay_rate = 0.5
FROM {edges} AS e JOIN {mem} AS n ON n.user_id = e.user_id AND n.id = e.source_id
WHERE e.user_id = %(user)s AND e.relation_type = 'supersedes'
  AND m.user_id = e.user_id AND m.id = e.target_id
"""


def _statement(template: str, tables: Tables) -> sql.Composed:
    assert tables.edges is not None and tables.entities is not None
    assert tables.node_entities is not None
    words = {f"w{k}": sql.SQL(_word("n", k)) for k in range(1, 6)}
    return sql.SQL(template).format(
        mem=tables.memories.ident, edges=tables.edges.ident, entities=tables.entities.ident,
        node_entities=tables.node_entities.ident, mention=sql.SQL(_MENTION.format(n="n")),
        mention_f=sql.SQL(_MENTION.format(n="f")),
        **words)


def load(dsn: str, spec: AgentSpec, nodes: int) -> dict[str, Any]:
    """Load one user's graph of ``nodes`` nodes; the seconds each part took and the counts."""
    tables = agent_tables(spec)
    edges, entities, node_entities = tables.edges, tables.entities, tables.node_entities
    assert edges is not None and entities is not None and node_entities is not None
    sizes = shape(nodes)
    params = {"user": USER, "names": entity_names(sizes["entities"]),
              "types": list(ENTITY_TYPES), "words": list(WORDS), "nwords": len(WORDS),
              "entities": sizes["entities"], "episodes": sizes["episodes"],
              "rows": sizes["memories"], "topics": TOPICS, "model": MODEL,
              "centroids": [x for c in centroids() for x in c]}
    took: dict[str, float] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '512MB'")
        conn.execute("SELECT setseed(0.42)")  # the vectors' noise: the same load every run
        # The HNSW index is built once over the loaded rows (its own definition), not row
        # by row during the load.
        hnsw = conn.execute(
            "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) "
            "FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid "
            "JOIN pg_am AS a ON a.oid = c.relam WHERE i.indrelid = %s::regclass "
            "AND a.amname = 'hnsw'", (tables.memories.qualified,)).fetchall()
        for name, _ in hnsw:
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.SQL(name)))
        for part, template in (("entities", _ENTITIES), ("memories", _MEMORIES),
                               ("node_entities", _NODE_ENTITIES),
                               ("mention_counts", _MENTION_COUNTS), ("edges", _EDGES),
                               ("corrected", _CORRECTED)):
            started = time.perf_counter()
            conn.execute(_statement(template, tables), params)
            took[part] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        for _, definition in hnsw:
            conn.execute(definition)
        took["hnsw_index"] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        for table in (tables.memories, edges, entities, node_entities):
            conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table.ident))
        took["vacuum_analyze"] = round(time.perf_counter() - started, 1)
        counts: dict[str, Any] = {"entities": sizes["entities"],
                                  "memories": sizes["memories"]}
        for label, query in (
                ("by_typology", sql.SQL("SELECT typology, count(*) FROM {} GROUP BY 1 ORDER BY 1"
                                        ).format(tables.memories.ident)),
                ("edges_by_type", sql.SQL("SELECT relation_type, count(*) FROM {} "
                                          "GROUP BY 1 ORDER BY 1").format(edges.ident)),
        ):
            counts[label] = dict(conn.execute(query).fetchall())
        mentions = conn.execute(sql.SQL("SELECT count(*), max(mention_count) FROM {}").format(
            entities.ident)).fetchone()
        ne = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
            node_entities.ident)).fetchone()
        assert mentions is not None and ne is not None
        counts["mentions"] = int(ne[0])
        counts["most_mentioned_entity"] = int(mentions[1])
    return {"seconds": took, "counts": counts}


def questions(count: int, nodes: int, seed: int = 7) -> list[dict[str, str]]:
    """``count`` pairs of a why and a when question over the loaded vocabulary; a third name
    an entity, a quarter add a clause (the engine infers each one's complexity)."""
    rng = random.Random(seed)
    names = entity_names(shape(nodes)["entities"])
    out = []
    for n in range(count):
        a, b, c = rng.sample(WORDS, 3)
        who = f" with {names[min(int(len(names) * rng.random() ** 3), len(names) - 1)]}" if (
            n % 3 == 0) else ""
        more = f" and the {rng.choice(WORDS)}" if n % 4 == 0 else ""
        why = f"Why did the {a} {b} slip{who}{more}?"
        when = rng.choice((f"When did the {a} {b} {c} happen{who}{more}?",
                           f"What happened before the {a} {b} {c}{who}{more}?",
                           f"What came after the {a} {b} {c}{who}{more}?"))
        out.append({"why": why, "when": when})
    return out


def plain_variant(spec: AgentSpec) -> AgentSpec:
    """The same tables searched without the graph signal and intent routing: semantic,
    lexical and recency fused by RRF (the spec's weights)."""
    retrieval = spec.retrieval.model_copy(update={
        "signals": [s for s in spec.retrieval.signals if s != "graph"], "intents": None})
    return spec.model_copy(update={"retrieval": retrieval})


class _Writer:
    """The hot path: one episodic turn per call into the user's current session (20 turns
    each, then the next session), through ``Engine.observe``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.n = 0
        self.rng = random.Random(11)

    def write(self) -> float:
        words = " ".join(self.rng.sample(WORDS, 6))
        session = f"hot-{self.n // 20}"
        started = time.perf_counter()
        self.engine.observe({"user_id": USER}, "long_term", f"hot turn {self.n}: {words}.",
                            typology="episodic", scope_id=session)
        took = time.perf_counter() - started
        self.n += 1
        return took


def measure(app: str, spec: AgentSpec, *, rounds: int, writes: int, warm_writes: int,
            nodes: int) -> dict[str, Any]:
    embedder = TopicEmbedder(centroids())
    asked = questions(rounds + 10, nodes)
    times: dict[str, list[float]] = {"why": [], "when": [], "plain": [], "write": []}
    graph_rows: dict[str, list[int]] = {"why": [], "when": []}
    routed: dict[str, dict[str, int]] = {"why": {}, "when": {}}
    assistant = Engine.connect(spec, app, embedder=embedder, max_connections=2)
    plain = Engine.connect(plain_variant(spec), app, embedder=embedder, max_connections=2)
    with assistant, plain:
        writer = _Writer(assistant)
        for _ in range(warm_writes):
            writer.write()
        anchor = {"user_id": USER}

        def ask(kind: str, text: str) -> tuple[float, Any]:
            engine = plain if kind == "plain" else assistant
            started = time.perf_counter()
            found = engine.search(anchor, text, limit=LIMIT, explain=True)
            return time.perf_counter() - started, found

        for n, pair in enumerate(asked):
            warm = n < 10
            for _ in range(writes):
                took = writer.write()
                if not warm:
                    times["write"].append(took)
            kinds = ("why", "when", "plain")
            order = kinds[n % 3:] + kinds[:n % 3]
            for kind in order:
                text = pair["why"] if kind == "why" else pair["when"] if kind == "when" else (
                    pair["why"] if n % 2 == 0 else pair["when"])
                took, found = ask(kind, text)
                if kind != "plain":
                    if found.intent != kind:
                        raise AssertionError(f"{text!r} routed to {found.intent}, not {kind}")
                    key = f"{found.complexity}/{found.direction}"
                    routed[kind][key] = routed[kind].get(key, 0) + 1
                    if not warm:
                        graph_rows[kind].append(int(found.signal_rows.get("graph", 0)))
                if not warm:
                    times[kind].append(took)
    summary: dict[str, Any] = {k: latency_summary(v) for k, v in times.items()}
    for kind in ("why", "when"):
        summary[kind]["graph_rows_mean"] = round(sum(graph_rows[kind]) / len(graph_rows[kind]), 1)
        summary[kind]["graph_rows_nonzero_share"] = round(
            sum(1 for r in graph_rows[kind] if r) / len(graph_rows[kind]), 3)
        summary[kind]["routed"] = routed[kind]
        summary[f"{kind}_vs_plain_p95"] = round(summary[kind]["p95_ms"]
                                                / summary["plain"]["p95_ms"], 3)
    summary["write_vs_plain_p95"] = round(summary["write"]["p95_ms"]
                                          / summary["plain"]["p95_ms"], 3)
    summary["hot_path_writes"] = writer.n
    return summary


def run(*, nodes: int, rounds: int, writes: int, warm_writes: int, out: Path,
        command: str) -> dict[str, Any]:
    spec = load_spec(SPEC)
    with scratch_database("graph") as (dsn, embedded):
        migrate([spec], dsn=dsn, progress=lambda _: None)
        log(f"loading {nodes:,} nodes (one user)")
        started = time.perf_counter()
        loaded = load(dsn, spec, nodes)
        load_s = time.perf_counter() - started
        log(f"  loaded in {load_s:.1f} s: {loaded['seconds']}")
        log(f"  {loaded['counts']}")
        log(f"{warm_writes} hot-path writes, then {rounds} rounds of {writes} writes, "
            "a why, a when and a plain search")
        measured = measure(app_dsn(dsn), spec, rounds=rounds, writes=writes,
                           warm_writes=warm_writes, nodes=nodes)
        info = machine_info(dsn, embedded=embedded)
    result: dict[str, Any] = {
        "command": command, "nodes": nodes, "rounds": rounds, "writes_per_round": writes,
        "warm_writes": warm_writes, "limit": LIMIT, "load_s": round(load_s, 1), **loaded,
        **measured, "target": TARGET,
        "target_met": max(measured["why_vs_plain_p95"], measured["when_vs_plain_p95"])
        <= TARGET,
        "machine": info}
    log(f"why p95 {measured['why']['p95_ms']} ms, when p95 {measured['when']['p95_ms']} ms, "
        f"plain p95 {measured['plain']['p95_ms']} ms (why {measured['why_vs_plain_p95']}x, "
        f"when {measured['when_vs_plain_p95']}x); hot-path write p95 "
        f"{measured['write']['p95_ms']} ms; wrote {write_result(out, result)}")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.graph",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--writes", type=int, default=3, help="hot-path writes per round")
    parser.add_argument("--warm-writes", type=int, default=500,
                        help="hot-path writes through the engine after the load, untimed")
    parser.add_argument("--out", type=Path, default=RESULTS / RESULT)
    args = parser.parse_args(argv)
    given = list(argv) if argv is not None else sys.argv[1:]
    run(nodes=args.nodes, rounds=args.rounds, writes=args.writes,
        warm_writes=args.warm_writes, out=args.out,
        command=" ".join(["python -m bench.graph", *given]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
