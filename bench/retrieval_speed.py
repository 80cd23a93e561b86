"""Hybrid search latency against LangGraph's ``PostgresStore`` vector search, same data.

``python -m bench.retrieval_speed`` measures at 10,000 and 100,000 rows (``SCALE=1000000``,
or a comma-separated list, on request; scales not measured keep their last figures in the
JSON, each with the time it was measured): 1,000 tenants with Zipf sizes, one synthetic
384-dim vector and one synthetic text per row, bulk-loaded into both systems by the same
SQL expressions (each in its own fresh database; HNSW indexes rebuilt after the load, the
same m and ef_construction on both). Both databases are then read into shared buffers
(``pg_prewarm``, every table and index), so each system is timed on a warm cache, as a memory
service's working set would be, not on what the other's load happened to leave behind. Then,
per scale:

- our engine: ``engine.search(anchor, text, limit=10)``, a tenant transaction of its own
  (``BEGIN`` and the bound tenant with the search settings, then the search with ``COMMIT``: two
  messages), with the semantic and lexical (BM25) signals fused by RRF in one statement, as
  the application role, the exact/HNSW switch point ``auto``; the query vector comes from a lookup, so query embedding is
  excluded (the real model's ``embed_query`` is timed separately);
- ``langgraph.store.postgres.PostgresStore.search(namespace, query=text, limit=10)`` with an
  HNSW index config (halfvec, cosine), its embed function the same lookup;
- p50/p95/p99 latency and the share of queries that return the full limit
  (``min(limit, rows of the tenant)``), each query run on both systems in turn (the order
  alternating), so drift in the machine's load hits both alike;
- the exact-scan / HNSW switch point: semantic-only p50 of both paths for tenants from the
  largest down (``switch_point``: tenant rows -> exact and HNSW p50).

Writes ``bench/results/retrieval_speed.json``.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from bench._env import _server, machine_info, write_result
from primitives._project import migrate
from primitives.db import app_dsn
from primitives.engine import Engine
from primitives.spec import AgentSpec, load_spec

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "bench" / "locomo_agent.yaml"
OUT = ROOT / "bench" / "results" / "retrieval_speed.json"
TENANTS = 1000
DIMS = 384
LIMIT = 10
QUERIES = 400
WARMUP = 40
MODEL = "synthetic/hash-384"
WORDS = [f"{a}{b}" for a in ("lum", "kor", "vel", "tas", "mir", "dun", "sef", "rah", "pol",
                              "gin", "bex", "qua", "zor", "fen", "hul", "tri", "cam", "nod",
                              "wep", "yat")
         for b in ("an", "or", "ix", "el", "um", "ad", "ot", "ir", "es", "ak", "uy", "on",
                   "ep", "ul", "ab")]
# Row i of tenant t: 384 pseudo-random components and 8 words, from hashint8 (same on both).
VECTOR_SQL = sql.SQL("(SELECT array_agg(((hashint8(g.i * 384 + j) %% 20011) / 10005.5)::real "
                     "ORDER BY j) FROM generate_series(0, 383) AS j)")
TEXT_SQL = sql.SQL("(SELECT string_agg((%(words)s::text[])[1 + abs(hashint8(g.i * 16 + j)) "
                   "%% {}], ' ' ORDER BY j) FROM generate_series(0, 7) AS j)").format(
    sql.Literal(len(WORDS)))
ROWS_SQL = sql.SQL(
    "SELECT row_number() OVER () AS i, t.tenant FROM unnest(%(tenants)s::text[], "
    "%(sizes)s::int[]) AS t(tenant, n), generate_series(1, t.n)")


def zipf_sizes(total: int, tenants: int = TENANTS, s: float = 1.0) -> list[int]:
    """Rows per tenant, proportional to 1/rank^s, every tenant at least one row."""
    weights = [1 / (r ** s) for r in range(1, tenants + 1)]
    scale = (total - tenants) / sum(weights)
    sizes = [1 + int(w * scale) for w in weights]
    sizes[0] += total - sum(sizes)
    return sizes


class LookupEmbedder:
    """Query vectors prepared in advance: query embedding is kept out of the timings."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    @property
    def model_id(self) -> str:
        return MODEL

    @property
    def dims(self) -> int:
        return DIMS

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.vectors[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.vectors[text]


@contextmanager
def _fresh(admin: str, name: str) -> Iterator[str]:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            params = conninfo_to_dict(admin)
            params["dbname"] = name
            yield make_conninfo("", **params)
        finally:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))


def _rows_params(sizes: list[int]) -> dict[str, Any]:
    """Params of ``ROWS_SQL`` (``g(i, tenant)``, tenants t0000..t0999) and ``TEXT_SQL``."""
    return {"tenants": [f"t{r:04d}" for r in range(len(sizes))], "sizes": sizes,
            "words": WORDS}


def _rebuild(conn: psycopg.Connection[Any], table: str, load: Callable[[], None]) -> float:
    """Drop the table's HNSW index, load, rebuild it; returns the build seconds."""
    row = conn.execute("SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) "
                       "FROM pg_index WHERE indrelid = %s::regclass "
                       "AND pg_get_indexdef(indexrelid) LIKE '%%hnsw%%'", (table,)).fetchone()
    assert row is not None, f"{table} has an HNSW index"
    conn.execute(sql.SQL("DROP INDEX {}").format(sql.SQL(row[0])))
    load()
    conn.execute("SET maintenance_work_mem = '3GB'")
    start = time.perf_counter()
    conn.execute(row[1])
    conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.SQL(table)))
    return time.perf_counter() - start


def load_ours(admin: str, spec: AgentSpec, sizes: list[int]) -> float:
    migrate([spec], dsn=admin, progress=lambda _: None)
    table = Engine.tables_for(spec).memories
    params = _rows_params(sizes)
    with psycopg.connect(admin, autocommit=True) as conn:
        def load() -> None:
            conn.execute(sql.SQL(
                "INSERT INTO {} (conversation_id, tier, typology, key, content, embedding, "
                "embedding_model) SELECT g.tenant, 'conversation', 'episodic', g.i::text, "
                "{}, {}::halfvec, %(model)s FROM ({}) AS g").format(
                    table.ident, TEXT_SQL, VECTOR_SQL, ROWS_SQL), {**params, "model": MODEL})
        return _rebuild(conn, table.qualified, load)


def load_langgraph(dsn: str, sizes: list[int], embed: Callable[[Sequence[str]], Any]) -> float:
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(dsn, index=_index(embed)) as store:
        store.setup()
    params = _rows_params(sizes)
    with psycopg.connect(dsn, autocommit=True) as conn:
        def load() -> None:
            conn.execute(sql.SQL(
                "CREATE TEMP TABLE src AS SELECT g.tenant || '.memories' AS prefix, "
                "g.i::text AS key, {} AS text, {}::halfvec AS v FROM ({}) AS g").format(
                    TEXT_SQL, VECTOR_SQL, ROWS_SQL), params)
            conn.execute("INSERT INTO store (prefix, key, value) "
                         "SELECT prefix, key, jsonb_build_object('text', text) FROM src")
            conn.execute("INSERT INTO store_vectors (prefix, key, field_name, embedding) "
                         "SELECT prefix, key, 'text', v FROM src")
        return _rebuild(conn, "store_vectors", load)


def _prewarm(dsn: str) -> str:
    """Read every table and index of the database into shared buffers (``pg_prewarm``), so
    both systems are timed on a warm cache rather than on whatever the loads left there."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        if conn.execute("SELECT count(*) FROM pg_available_extensions "
                        "WHERE name = 'pg_prewarm'").fetchone() == (0,):
            return f"{conn.info.dbname}: pg_prewarm not available, not prewarmed"
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        row = conn.execute(
            "SELECT count(*), coalesce(sum(pg_prewarm(c.oid)), 0) FROM pg_class AS c "
            "JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'i', 't') "
            "AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') "
            "AND pg_relation_size(c.oid) > 0").fetchone()
        assert row is not None
        return f"{conn.info.dbname}: {row[0]} relations, {row[1] * 8 // 1024} MB prewarmed"


def _index(embed: Callable[[Sequence[str]], Any]) -> Any:
    return {"dims": DIMS, "embed": embed, "fields": ["text"],
            "ann_index_config": {"kind": "hnsw", "vector_type": "halfvec"},
            "distance_type": "cosine"}


def _queries(app: str, spec: AgentSpec, sizes: list[int], rng: random.Random,
             ) -> list[tuple[str, str, list[float]]]:
    """(tenant, text, vector): a uniformly chosen tenant, three words, a stored vector of
    that tenant with noise."""
    table = Engine.tables_for(spec).memories
    out = []
    engine = Engine.connect(spec, app, embedder=LookupEmbedder({}))
    with engine:
        for n in range(QUERIES + WARMUP):
            t = rng.randrange(len(sizes))
            tenant = f"t{t:04d}"
            with engine.tenant({"conversation_id": tenant}) as mem:
                row = mem.connection.execute(sql.SQL(
                    "SELECT embedding::text FROM {} WHERE conversation_id = %s "
                    "OFFSET %s LIMIT 1").format(table.ident),
                    (tenant, rng.randrange(sizes[t]))).fetchone()
            assert row is not None
            vector = [float(x) + rng.gauss(0, 0.3) for x in row[0].strip("[]").split(",")]
            out.append((tenant, f"{' '.join(rng.sample(WORDS, 3))} q{n}", vector))
    return out


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def at(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000, 2)

    return {"p50_ms": at(0.50), "p95_ms": at(0.95), "p99_ms": at(0.99),
            "mean_ms": round(statistics.fmean(ordered) * 1000, 2)}


def measure(systems: Mapping[str, Callable[[str, str], int]],
            queries: Sequence[tuple[str, str, Any]],
            sizes: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Each query on every system in turn (the order alternating from query to query), so
    drift in the machine's load hits all of them alike; per system its percentiles and the
    share of queries that returned ``min(limit, tenant rows)``."""
    names = list(systems)
    times: dict[str, list[float]] = {name: [] for name in names}
    full = dict.fromkeys(names, 0)
    for n, (tenant, text, _) in enumerate(queries):
        for name in (names if n % 2 == 0 else names[::-1]):
            start = time.perf_counter()
            got = systems[name](tenant, text)
            elapsed = time.perf_counter() - start
            if n < WARMUP:
                continue
            times[name].append(elapsed)
            full[name] += got == min(LIMIT, sizes[tenant])
    return {name: {**_percentiles(times[name]),
                   "full_limit_share": round(full[name] / len(times[name]), 4),
                   "queries": len(times[name])} for name in names}


def run_scale(admin: str, total: int, progress: Callable[[str], object]) -> dict[str, Any]:
    from langgraph.store.postgres import PostgresStore

    sizes = zipf_sizes(total)
    by_tenant = {f"t{r:04d}": n for r, n in enumerate(sizes)}
    spec = load_spec(SPEC)
    suffix = uuid.uuid4().hex[:8]
    result: dict[str, Any] = {"rows": total, "tenants": TENANTS, "largest_tenant": sizes[0],
                              "smallest_tenant": min(sizes), "limit": LIMIT}
    with _fresh(admin, f"bench_speed_ours_{suffix}") as ours, \
            _fresh(admin, f"bench_speed_lg_{suffix}") as theirs:
        start = time.perf_counter()
        result["ours_index_build_s"] = round(load_ours(ours, spec, sizes), 1)
        progress(f"  {total} rows loaded into ours in {time.perf_counter() - start:.0f}s")
        queries = _queries(app_dsn(ours), spec, sizes, random.Random(total))
        lookup = {text: vector for _, text, vector in queries}
        embed = LookupEmbedder(lookup).embed_documents
        start = time.perf_counter()
        result["langgraph_index_build_s"] = round(load_langgraph(theirs, sizes, embed), 1)
        progress(f"  {total} rows loaded into PostgresStore in "
                 f"{time.perf_counter() - start:.0f}s")

        progress(f"  cache: {_prewarm(ours)}; {_prewarm(theirs)}")
        with Engine.connect(spec, app_dsn(ours), embedder=LookupEmbedder(lookup)) as engine, \
                PostgresStore.from_conn_string(theirs, index=_index(embed)) as store:
            def hybrid(tenant: str, text: str) -> int:
                return len(engine.search({"conversation_id": tenant}, text, limit=LIMIT))

            def vector(tenant: str, text: str) -> int:
                return len(store.search((tenant, "memories"), query=text, limit=LIMIT))

            both = measure({"ours_hybrid": hybrid, "langgraph_vector": vector}, queries,
                           by_tenant)
        result.update(both)
        progress(f"  ours (semantic + BM25, RRF, one statement): {result['ours_hybrid']}")
        progress(f"  PostgresStore vector search: {result['langgraph_vector']}")
        result["switch_point"] = _switch_point(app_dsn(ours), spec, queries, by_tenant, lookup)
        progress(f"  semantic alone, exact scan vs HNSW by tenant rows: {result['switch_point']}")
    return result


def _switch_point(app: str, spec: AgentSpec, queries: Sequence[tuple[str, str, Any]],
                  sizes: dict[str, int], lookup: dict[str, list[float]],
                  per_tenant: int = 20) -> dict[str, Any]:
    """Semantic-only p50 of the exact scan and of the HNSW walk for tenants of many sizes
    (the largest ones included): where an exact scan stops being the cheaper path."""
    semantic = spec.retrieval.model_copy(update={"signals": ["semantic"]})
    ranked = sorted(sizes, key=lambda t: -sizes[t])
    tenants = [ranked[i] for i in (0, 1, 2, 4, 9, 19, 49, 99, 299) if i < len(ranked)]
    texts = [text for _, text, _ in queries[:per_tenant + 2]]
    out: dict[str, Any] = {}
    for mode, below in (("exact", 10**9), ("hnsw", 0)):
        variant = spec.model_copy(update={"retrieval": semantic.model_copy(
            update={"semantic_exact_below": below})})
        with Engine.connect(variant, app, embedder=LookupEmbedder(lookup)) as engine:
            for tenant in tenants:
                times = []
                for n, text in enumerate(texts):
                    start = time.perf_counter()
                    engine.search({"conversation_id": tenant}, text, limit=LIMIT)
                    if n >= 2:
                        times.append(time.perf_counter() - start)
                out.setdefault(str(sizes[tenant]), {})[f"{mode}_p50_ms"] = round(
                    statistics.median(times) * 1000, 2)
    return out


def _embed_query_ms() -> dict[str, Any] | None:
    from primitives.embeddings import MINILM, FlagEmbedder, minilm_path

    path = minilm_path()
    if path is None:
        return None
    embedder = FlagEmbedder(path, model_id=MINILM, dims=384, pooling="mean")
    embedder.embed_query("warm up")
    times = []
    for n in range(100):
        start = time.perf_counter()
        embedder.embed_query(f"what did Caroline say about the support group {n}?")
        times.append(time.perf_counter() - start)
    return {"model": MINILM, **_percentiles(times)}


def main(argv: Sequence[str] | None = None) -> int:
    scales = [int(s) for s in os.environ.get("SCALE", "10000,100000").split(",") if s]

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    results: dict[str, Any] = {"scales": {}, "notes": __doc__}
    try:  # scales not measured in this run keep their last figures (each says when)
        results["scales"].update(json.loads(OUT.read_text(encoding="utf-8"))["scales"])
    except (OSError, ValueError, KeyError):
        pass
    with _server(progress) as (admin, embedded):
        for total in scales:
            progress(f"scale {total}")
            started = time.time()
            measured = run_scale(admin, total, progress)
            measured["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
            measured["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
            results["scales"][str(total)] = measured
        results["query_embedding"] = _embed_query_ms()
        results["machine"] = machine_info(admin, embedded=embedded)
    results["scales"] = dict(sorted(results["scales"].items(), key=lambda kv: int(kv[0])))
    print(f"wrote {write_result(OUT, results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
