"""The engine's hybrid search on the Citus cluster: the same hits as on one node for the same
rows, and no tenant sees another's.

The rows are written once on a single node beside the cluster through the engine,
with the hashing embedder, entities, mentions and edges, then copied row for row onto the
cluster as the application role with plain ``INSERT ... VALUES`` statements (each routed to
the tenant's shard). Both engines then run the same searches; the hits must agree in order,
score, ranks and per-signal scores.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from primitives._project import migrate
from primitives.db import APP_ROLE
from primitives.embeddings import HashingEmbedder
from primitives.engine import Engine, Explanation
from primitives.spec import load_spec
from tests.citus._cluster import Cluster
from tests.conftest import PostgresHandle, single_node

ROOT = Path(__file__).resolve().parents[2]
ASSISTANT = load_spec(ROOT / "agents" / "assistant_memory.yaml")
SPECTRAL = load_spec(ROOT / "agents" / "spectral_agent.yaml")


@pytest.fixture(scope="module")
def single(make_home: Callable[[], Path]) -> Iterator[PostgresHandle]:
    """One node beside the cluster (in this suite ``pg`` is the coordinator)."""
    for handle in single_node(make_home):
        migrate([ASSISTANT, SPECTRAL], dsn=handle.admin_dsn, progress=lambda _: None)
        yield handle


@pytest.fixture(scope="module")
def engines(single: PostgresHandle, cluster: Cluster,
            coordinator: str) -> Iterator[dict[tuple[str, str], Engine]]:
    """(agent, "one"|"cluster") -> engine, each with the same hashing embedder."""
    made: dict[tuple[str, str], Engine] = {}
    try:
        for spec in (ASSISTANT, SPECTRAL):
            for where, dsn in (("one", single.app_dsn),
                               ("cluster", cluster.coordinator.dsn(APP_ROLE))):
                made[spec.agent, where] = Engine.connect(spec, dsn, embedder=HashingEmbedder(
                    spec.retrieval.embedding.dims))
        assert made["assistant", "cluster"].citus
        assert not made["assistant", "one"].citus
        yield made
    finally:
        for eng in made.values():
            eng.close()


def _writable(conn: psycopg.Connection[Any], table: str) -> list[str]:
    """The table's columns a row can be written with (not generated)."""
    return [name for (name,) in conn.execute(
        "SELECT attname FROM pg_catalog.pg_attribute WHERE attrelid = %s::regclass "
        "AND attnum > 0 AND NOT attisdropped AND attgenerated = '' ORDER BY attnum",
        (table,))]


def _copy(single: PostgresHandle, cluster: Cluster, engine: Engine, tenant: str) -> int:
    """Copy the tenant's memories and graph rows from the single node onto the cluster,
    one ``INSERT ... VALUES`` per row, as the application role on both; the rows copied."""
    tables = engine.tables
    relations = [tables.memories] + [t for t in (tables.entities, tables.node_entities,
                                                 tables.edges) if t is not None]
    copied = 0
    with psycopg.connect(single.app_dsn, autocommit=True) as source, \
            psycopg.connect(cluster.coordinator.dsn(APP_ROLE), autocommit=True) as target:
        with source.transaction(), target.transaction():
            source.execute("SELECT pg_catalog.set_config('primitives.tenant', %s, true)",
                           (tenant,))
            target.execute("SELECT primitives.set_tenant(%s)", (tenant,))
            for relation in relations:
                columns = _writable(source, relation.qualified)
                read = sql.SQL("SELECT {} FROM {}").format(
                    sql.SQL(", ").join(map(sql.Identifier, columns)), relation.ident)
                write = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
                    relation.ident, sql.SQL(", ").join(map(sql.Identifier, columns)),
                    sql.SQL(", ").join(sql.Placeholder() * len(columns)))
                for row in source.execute(read).fetchall():
                    target.execute(write, [Jsonb(v) if isinstance(v, dict) else v for v in row])
                    copied += 1
    return copied


def _same(first: Explanation, second: Explanation) -> list[uuid.UUID]:
    """Assert two explained searches found the same hits, in the same order, with the same
    scores and ranks, by the same route; the hit ids."""
    one, other = first.hits, second.hits
    assert [h.memory.id for h in one] == [h.memory.id for h in other]
    for a, b in zip(one, other, strict=True):
        assert a.memory.content == b.memory.content
        assert a.ranks == b.ranks, a.memory.content
        assert a.score == pytest.approx(b.score, rel=1e-6)
        assert a.scores.keys() == b.scores.keys()
        for signal, value in a.scores.items():
            assert value == pytest.approx(b.scores[signal], rel=1e-4, abs=1e-6), signal
    assert first.signal_rows == second.signal_rows
    assert (first.intent, first.weights, first.edge_types, first.semantic_mode) == (
        second.intent, second.weights, second.edge_types, second.semantic_mode)
    return [h.memory.id for h in one]


FACTS = (
    "the friday deploy failed halfway through the release",
    "a schema migration locked the orders table for ten minutes",
    "nobody reviewed the migration script before the deploy",
    "lunch was tacos with the platform team",
    "Alice Moreau owns the deploy pipeline",
    "the orders service retries payments three times",
    "Bob Stone prefers written standups over calls",
    "the release train leaves every tuesday morning",
    "rollback of the orders migration took an hour",
    "the pipeline caches docker layers between builds",
)


def _assistant_rows(engine: Engine, user: str, facts: Sequence[str]) -> list[Any]:
    anchor = {"user_id": user}
    with engine.tenant(anchor) as mem:
        notes = [mem.observe("long_term", text, typology="episodic") for text in facts]
        if len(notes) >= 5:
            mem.mention(notes[4].id, [("Alice Moreau", "person")])
            mem.mention(notes[0].id, ["Alice Moreau"])
            mem.mention(notes[6].id, [("Bob Stone", "person")])
            mem.relate(notes[1].id, notes[0].id, "causal")
            mem.relate(notes[2].id, notes[1].id, "causal", weight=0.5)
            mem.relate(notes[8].id, notes[1].id, "causal", weight=0.8)
    engine.embed_pending(anchor)
    return notes


QUESTIONS = (
    "why did the deploy fail",
    "orders migration",
    "who is Alice Moreau",
    "when did the release go out",
    "docker pipeline builds",
    "",
)


def test_hybrid_search_returns_the_same_hits_on_the_cluster_as_on_one_node(
    single: PostgresHandle, cluster: Cluster, engines: dict[tuple[str, str], Engine]
) -> None:
    one, dist = engines["assistant", "one"], engines["assistant", "cluster"]
    user, other = f"u-{uuid.uuid4().hex[:8]}", f"o-{uuid.uuid4().hex[:8]}"
    _assistant_rows(one, user, FACTS)
    _assistant_rows(one, other, ("the deploy of another user failed",
                                 "another orders migration, not yours"))
    assert _copy(single, cluster, one, user) > len(FACTS) + 5  # rows, entities, mentions, edges
    _copy(single, cluster, one, other)
    seen: set[str] = set()
    for question in QUESTIONS:
        a = one.search({"user_id": user}, question, explain=True)
        b = dist.search({"user_id": user}, question, explain=True)
        assert _same(a, b), question
        seen.update(signal for hit in b.hits for signal in hit.ranks)
    # every signal of the spec ranked something on the cluster
    assert seen == {"semantic", "lexical", "graph", "recency"}


def test_envelope_and_semantic_search_agree_on_the_cluster(
    single: PostgresHandle, cluster: Cluster, engines: dict[tuple[str, str], Engine]
) -> None:
    one, dist = engines["spectral", "one"], engines["spectral", "cluster"]
    tenant = f"ws-{uuid.uuid4().hex[:8]}"
    anchor = {"workspace_id": tenant}
    with one.tenant(anchor) as mem:
        for i, (text, kind) in enumerate((
                ("OCR swaps fields on scanned contracts", "scan"),
                ("the contract parser skipped page two", "scan"),
                ("summary of the week's invoices", "summary"),
                ("lowering temperature removed fabrication", "tuning"),
                ("scanned invoices come out rotated", "scan"))):
            mem.observe("cycle", text, envelope={"kind": kind, "n": i})
    _copy(single, cluster, one, tenant)
    for question, envelope in (("scanned contracts", {"kind": "scan"}),
                               ("invoices", {}), ("", {"kind": "summary"}),
                               ("temperature", {"kind": "tuning"})):
        a = one.search(anchor, question, envelope=envelope, explain=True)
        b = dist.search(anchor, question, envelope=envelope, explain=True)
        assert _same(a, b), (question, envelope)
    scans = dist.search(anchor, "scanned contracts", envelope={"kind": "scan"})
    assert "envelope" in scans[0].ranks and "semantic" in scans[0].ranks


def test_search_on_the_cluster_never_returns_another_tenants_rows(
    single: PostgresHandle, cluster: Cluster, engines: dict[tuple[str, str], Engine]
) -> None:
    one, dist = engines["assistant", "one"], engines["assistant", "cluster"]
    mine, theirs = f"m-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    _assistant_rows(one, mine, ("my deploy pipeline notes",))
    _assistant_rows(one, theirs, FACTS)
    _copy(single, cluster, one, mine)
    _copy(single, cluster, one, theirs)
    for question in ("deploy pipeline", "who is Alice Moreau", "why did the deploy fail", ""):
        found = dist.search({"user_id": mine}, question)
        assert [h.memory.content for h in found] in ([], ["my deploy pipeline notes"]), question
    assert [h.memory.content for h in dist.search({"user_id": mine}, "")] == [
        "my deploy pipeline notes"]
    assert dist.search({"user_id": f"n-{uuid.uuid4().hex[:8]}"}, "deploy pipeline") == []


def test_a_tenant_on_the_index_path_walks_its_shard_with_the_engines_hnsw_settings(
    cluster: Cluster, coordinator: str
) -> None:
    """``set_config`` is not forwarded to the workers: on a coordinator the engine sends the
    HNSW walk's settings to the tenant's shard with ``SET LOCAL`` when the tenant takes the
    index path (here always: ``semantic_exact_below: 0``); the worker's session then holds
    them for the rest of the transaction, and not after it."""
    spec = SPECTRAL.model_copy(update={"retrieval": SPECTRAL.retrieval.model_copy(
        update={"semantic_exact_below": 0})})
    engine = Engine.connect(spec, cluster.coordinator.dsn(APP_ROLE),
                            embedder=HashingEmbedder(spec.retrieval.embedding.dims))
    tenant = f"hnsw-{uuid.uuid4().hex[:8]}"
    anchor = {"workspace_id": tenant}
    on_worker = sql.SQL(
        "SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan'), "
        "count(*) FROM {} WHERE {} = %s").format(engine.tables.memories.ident,
                                                 engine.tables.tenant)
    try:
        with engine.tenant(anchor) as mem:
            for text in FACTS:
                mem.observe("cycle", text, envelope={"kind": "scan"})
        with engine.tenant(anchor) as mem:
            found = mem.search("orders migration", limit=3, explain=True)
            during = mem.connection.execute(on_worker, (tenant,)).fetchone()
        with engine.tenant(anchor) as mem:
            after = mem.connection.execute(on_worker, (tenant,)).fetchone()
    finally:
        engine.close()
    assert found.hits and found.semantic_mode != "exact"
    cap = max(3 * 5, 50)  # the engine's candidate cap for this limit; ef_search follows it
    assert during == (str(min(max(cap, 40), 1000)), "relaxed_order", len(FACTS))
    assert after is not None and after[:2] == ("40", "off")  # the workers' own defaults


def test_the_deferred_embedding_worker_embeds_a_tenants_rows_on_the_cluster(
    engines: dict[tuple[str, str], Engine]
) -> None:
    """The assistant defers its vectors: on a coordinator ``embed_pending`` finds the
    tenant's waiting rows and stores their vectors with statements routed to its shard, and
    journals one ``embedded`` event per row with ``VALUES``; another tenant's waiting rows
    are left waiting; the rows are then found by meaning, as on one node."""
    from tests.security._support import verify_chain

    dist, one = engines["assistant", "cluster"], engines["assistant", "one"]
    user, other = f"emb-{uuid.uuid4().hex[:8]}", f"emb-{uuid.uuid4().hex[:8]}"
    for engine in (dist, one):
        for who in (user, other):
            with engine.tenant({"user_id": who}) as mem:
                for text in FACTS:
                    mem.observe("long_term", text, typology="episodic")
    assert dist.embed_pending({"user_id": user}) == len(FACTS)
    assert dist.embed_pending({"user_id": user}) == 0  # nothing waits any more
    assert one.embed_pending({"user_id": user}) == len(FACTS)
    tables = dist.tables
    waiting = sql.SQL("SELECT count(*) FILTER (WHERE embedding IS NULL), count(*) FROM {}"
                      ).format(tables.memories.ident)
    embedded = sql.SQL("SELECT count(*) FROM {} WHERE kind = 'embedded'").format(
        tables.events.ident)
    with dist.tenant({"user_id": user}) as mem:
        assert mem.connection.execute(waiting).fetchone() == (0, len(FACTS))
        assert mem.connection.execute(embedded).fetchone() == (len(FACTS),)
        assert verify_chain(mem.connection, tables, user) is None
    with dist.tenant({"user_id": other}) as mem:
        assert mem.connection.execute(waiting).fetchone() == (len(FACTS), len(FACTS))
        assert mem.connection.execute(embedded).fetchone() == (0,)
    for question in ("orders migration", "docker pipeline builds"):
        a = one.search({"user_id": user}, question, explain=True)
        b = dist.search({"user_id": user}, question, explain=True)
        assert [h.memory.content for h in a.hits] == [h.memory.content for h in b.hits]
        assert [h.scores.get("semantic") for h in a.hits] == pytest.approx(
            [h.scores.get("semantic") for h in b.hits], rel=1e-4)
        assert all("semantic" in h.ranks for h in b.hits[:3])
