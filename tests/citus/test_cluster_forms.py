"""The engine's statements that Citus cannot run in their single-node form, in their cluster
form on the coordinator: the graph's entity upsert, the store's put (the general path),
``end_scope``'s tier boundary and ``primitives maintain``. Each runs as the application
role (the maintenance as the maintainer), its result and its journal checked on the cluster.
"""

from __future__ import annotations

import asyncio
import uuid
import warnings
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from psycopg import sql

from primitives._project import migrate
from primitives.compile._definer import transient_delete_function
from primitives.db import APP_ROLE
from primitives.engine import Engine
from primitives.langgraph import MemoryStore
from primitives.lifecycle._boundary import boundary_rules
from primitives.lifecycle._maintain import maintain
from primitives.spec import AgentSpec, load_spec_text
from tests.citus._cluster import Cluster
from tests.conftest import PostgresHandle, single_node
from tests.security._support import (
    SPEC_BY_AGENT,
    anchor_for,
    connect_engine,
    verify_chain,
)

ROOT = Path(__file__).resolve().parents[2]
BOUNDARY_AGENTS = ("assistant", "spectral", "world")
"""Agents whose transient tiers end with promotion, corroboration or temporal edges."""


@pytest.fixture(scope="module")
def single(make_home: Callable[[], Path]) -> Iterator[PostgresHandle]:
    """One node beside the cluster (in this suite ``pg`` is the coordinator)."""
    for handle in single_node(make_home):
        migrate([SPEC_BY_AGENT[a] for a in BOUNDARY_AGENTS], dsn=handle.admin_dsn,
                progress=lambda _: None)
        yield handle


def _engine(cluster: Cluster, agent: str) -> Engine:
    return connect_engine(SPEC_BY_AGENT[agent], cluster.coordinator.dsn(APP_ROLE))


def _tenant(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _kinds(engine: Engine, tenant: str) -> list[str]:
    """The tenant's journal, oldest first; its chain verified."""
    with engine.tenant(anchor_for(engine.spec, tenant)) as mem:
        kinds = [k for (k,) in mem.connection.execute(sql.SQL(
            "SELECT kind FROM {} ORDER BY seq").format(engine.tables.events.ident))]
        assert verify_chain(mem.connection, engine.tables, tenant) is None
    return kinds


def test_an_entity_is_recorded_merged_and_left_unchanged_on_the_cluster(
    cluster: Cluster, coordinator: str
) -> None:
    engine = _engine(cluster, "assistant")
    tenant = _tenant("ent")
    try:
        with engine.tenant(anchor_for(engine.spec, tenant)) as mem:
            made = mem.entity("Jane Doe", "person", aliases=["JD"])
            merged = mem.entity("jane doe", "person", aliases=["Janie", "JD"],
                                summary="a colleague")
            same = mem.entity("JANE DOE", "person", aliases=["JD"])
            found = mem.find_entities("Janie")
        kinds = _kinds(engine, tenant)
    finally:
        engine.close()
    assert made.aliases == ("JD",) and made.summary is None
    assert merged.id == made.id == same.id
    assert merged.aliases == same.aliases == ("JD", "Janie")
    assert same.summary == "a colleague"
    assert [e.id for e in found] == [made.id]
    assert kinds.count("entity_recorded") == 2  # created, then merged; unchanged: none


def test_a_store_puts_gets_searches_and_deletes_on_the_cluster(
    cluster: Cluster, coordinator: str
) -> None:
    tenant = _tenant("st")
    namespace = (tenant, "workspace", "procedural")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # no embedder: lexical only
        store = MemoryStore.from_spec(SPEC_BY_AGENT["spectral"],
                                      cluster.coordinator.dsn(APP_ROLE))
    try:
        store.put(namespace, "style", {"text": "terse answers please"})
        store.put(namespace, "style", {"text": "long answers please"})
        store.put(namespace, "tone", {"text": "a friendly tone"})
        store.put(namespace, "tone", {"text": "a friendly tone"})  # unchanged: no write
        style = store.get(namespace, "style")
        hits = [(item.key, item.value) for item in store.search(namespace, query="answers")]
        store.delete(namespace, "tone")
        gone = store.get(namespace, "tone")
        asyncio.run(store.aput(namespace, "later", {"text": "written by aput"}))
        later = asyncio.run(store.aget(namespace, "later"))
        kinds = _kinds(store.engine, tenant)
    finally:
        store.close()
    assert style is not None and style.value == {"text": "long answers please"}
    assert hits == [("style", {"text": "long answers please"})]
    assert gone is None
    assert later is not None and later.value == {"text": "written by aput"}
    assert kinds.count("observed") == 4 and kinds.count("superseded") == 1
    assert kinds.count("tombstoned") == 1  # the delete




def _scope_chain(engine: Engine, tenant: str) -> list[Any]:
    """Rows in the first transient tier's scope, then every scope end up to the persistent
    tier (each tier's rows compounding into the next): what each end returned."""
    spec = engine.spec
    tier = next(t.name for t in spec.tiers if not t.persistent)
    ends: list[Any] = []
    with engine.tenant(anchor_for(spec, tenant)) as mem:
        for text in ("the deploy failed on friday night", "the deploy failed on friday night!",
                     "the deploy failed on friday night", "lunch is at noon on mondays"):
            mem.observe(tier, text, scope_id="s1")
    scope = "s1"
    while True:
        upward = [r for r in boundary_rules(spec)
                  if r.from_tier == tier and not spec.tier(r.to_tier).persistent]
        into = f"{scope}:up" if upward else None
        with engine.tenant(anchor_for(spec, tenant)) as mem:
            ends.append(tuple(mem.end_scope(tier, scope, into_scope=into)))
            ends.append(mem.end_scope(tier, scope, into_scope=into).removed)  # again: nothing
        if not upward:
            return ends
        tier, scope = upward[0].to_tier, into


def _state(engine: Engine, tenant: str) -> tuple[list[Any], list[Any], list[Any]]:
    """The tenant's journal (kind, payload without ids) in order, its rows and its ledger,
    ids left out; the chain verified."""
    t = engine.tables
    with engine.tenant(anchor_for(engine.spec, tenant)) as mem:
        conn = mem.connection
        assert verify_chain(conn, t, tenant) is None
        journal = [(kind, sorted(k for k in payload))
                   for kind, payload in conn.execute(sql.SQL(
                       "SELECT kind, payload FROM {} ORDER BY seq").format(t.events.ident))]
        rows = conn.execute(sql.SQL(
            "SELECT tier, typology, scope_id, content, archived_at IS NOT NULL, "
            "provenance ->> 'rule', jsonb_array_length(coalesce(provenance -> 'derived_from', "
            "'[]')), provenance -> 'corroborated_by' FROM {} ORDER BY 1, 2, 3, 4, 5, 6, 7"
        ).format(t.memories.ident)).fetchall()
        ledger = conn.execute(sql.SQL(
            "SELECT rule, target_id IS NULL, count(*) FROM {} GROUP BY 1, 2 ORDER BY 1, 2"
        ).format(t.promotions.ident)).fetchall()
    return journal, rows, ledger


@pytest.mark.parametrize("agent", BOUNDARY_AGENTS)
def test_scope_ends_on_the_cluster_as_on_one_node(
    cluster: Cluster, coordinator: str, single: PostgresHandle, agent: str
) -> None:
    """The same rows and scope ends on one node and on the cluster (``end_scope``'s
    boundary, the corroboration rules that run with it, the write path's temporal edges):
    the same counts, the same journal in the same order, the same rows and ledger."""
    spec = SPEC_BY_AGENT[agent]
    tenant = _tenant("end")
    results = []
    for dsn in (single.app_dsn, cluster.coordinator.dsn(APP_ROLE)):
        engine = connect_engine(spec, dsn)
        try:
            results.append((_scope_chain(engine, tenant), _state(engine, tenant)))
        finally:
            engine.close()
    (one_ends, one_state), (cluster_ends, cluster_state) = results
    assert cluster_ends == one_ends
    assert any(end[0] for end in one_ends if isinstance(end, tuple))  # rows were removed
    assert cluster_state == one_state


def _maintained_spectral(name: str = "spectral_maint") -> AgentSpec:
    """The Spectral spec under an agent name of its own: ``maintain`` visits every tenant of
    an agent, so its tables hold only the rows of the test below."""
    data = yaml.safe_load((ROOT / "agents" / "spectral_agent.yaml").read_text(encoding="utf-8"))
    data["agent"] = name
    data["persistence"]["store"]["prefix"] = name
    data["persistence"]["checkpointer"]["enabled"] = False
    # without the event-driven crossing of facts to world signals: its outbox trigger has
    # no cluster form yet (docs/scaling.md)
    data["discipline"].pop("sanitization")
    data["discipline"]["visibility"] = {"rls": "session_var"}
    for rule in data["behavior"].get("promotion", []):
        rule.pop("sanitization", None)
    # runs closed by maintain when idle (their rows compound into the workspace)
    for tier in data["tiers"]:
        if tier["name"] == "run":
            tier["boundary"]["idle_after"] = "2d"
    # facts written directly (the reference spec promotes them), so that they can lapse
    data["behavior"].setdefault("write_policy", {})["semantic"] = {
        "mode": "auto", "justification": "the test writes the facts whose windows lapse"}
    return load_spec_text(yaml.safe_dump(data), policies_dir=ROOT / "policies")


def test_maintain_runs_on_the_cluster_as_on_one_node(
    cluster: Cluster, coordinator: str, single: PostgresHandle
) -> None:
    """``primitives maintain`` over an agent whose facts' corroboration windows lapse and
    whose run scopes close when idle (one tenant, no other on its tables): at each of three
    runs, 100, 200 and 300 days on, the same failed corroborations are counted on one node
    and on the cluster, the first closes the idle run (its rows compound into the
    workspace), the third archives the facts, and both journals hold the same events in the
    same order."""
    spec = _maintained_spectral()
    tenant = _tenant("mnt")
    seen = []
    for admin, app in ((single.admin_dsn, single.app_dsn),
                       (cluster.coordinator.dsn(), cluster.coordinator.dsn(APP_ROLE))):
        migrate([spec], dsn=admin, progress=lambda _: None)
        engine = connect_engine(spec, app)
        try:
            with engine.tenant(anchor_for(spec, tenant)) as mem:
                for fact in ("the scanner runs nightly", "the mirror is read only"):
                    mem.observe("workspace", fact, typology="semantic")
                mem.observe("workspace", "rotate the keys monthly", typology="procedural")
                for text in ("the scan found two hosts", "the scan found two hosts!",
                             "the scan took an hour"):
                    mem.observe("run", text, scope_id="r1")
                start = mem.connection.execute("SELECT now()").fetchone()
            assert start is not None
            counts = []
            for days in (100, 200, 300):
                report = maintain([spec], admin, now=start[0] + timedelta(days=days),
                                  force=True)
                counts.append((report.tenants, report.agents[spec.agent]))
            journal, rows, _ = _state(engine, tenant)
        finally:
            engine.close()
        seen.append((counts, journal, rows))
    assert seen[0] == seen[1]
    counts, journal, rows = seen[1]
    assert [c[1]["corroboration"] for c in counts] == [2, 2, 2]
    assert [c[1]["idle_scopes"] for c in counts] == [1, 0, 0]
    kinds = [kind for kind, _ in journal]
    assert kinds.count("scope_idle_closed") == 1 and kinds.count("removed_at_scope_end") == 3
    assert kinds.count("promoted") >= 1
    assert [kind for kind, _ in journal].count("corroboration_failed") == 6
    assert [kind for kind, _ in journal].count("archived") == 2
    facts = [r for r in rows if r[1] == "semantic"]
    assert [r[4] for r in facts] == [True, True]  # the facts archived
    assert not [r for r in rows if r[0] == "run"]  # the idle run's rows left


def test_the_set_delete_function_refuses_another_tenant_and_persistent_rows(
    cluster: Cluster, coordinator: str
) -> None:
    """``<prefix>_delete_transient(tenant, ids)``, the cluster's set form of the delete
    function (SECURITY DEFINER, run on the tenant's worker): called by the application role
    for another tenant than the transaction's, or over a persistent row, it is refused and
    nothing is deleted; for the transaction's tenant it deletes that tenant's transient
    rows."""
    engine = _engine(cluster, "spectral")
    victim, attacker = _tenant("victim"), _tenant("attacker")
    delete = sql.SQL("SELECT {}(%s::text, %s::uuid[])").format(
        transient_delete_function(engine.tables))
    try:
        note = engine.observe(anchor_for(engine.spec, victim), "cycle", "a note", scope_id="s")
        kept = engine.observe(anchor_for(engine.spec, victim), "workspace", "a procedure",
                              typology="procedural")
        with psycopg.connect(cluster.coordinator.dsn(APP_ROLE)) as app:
            app.execute("SELECT primitives.set_tenant(%s)", (attacker,))
            with pytest.raises(psycopg.errors.InsufficientPrivilege,
                               match="tenant of the current transaction"):
                app.execute(delete, (victim, [note.id]))
        with psycopg.connect(cluster.coordinator.dsn(APP_ROLE)) as app:
            app.execute("SELECT primitives.set_tenant(%s)", (victim,))
            with pytest.raises(psycopg.Error, match="persistent"):
                app.execute(delete, (victim, [kept.id]))
        with engine.tenant(anchor_for(engine.spec, victim)) as mem:
            assert mem.get(note.id) is not None and mem.get(kept.id) is not None
            deleted = mem.connection.execute(delete, (victim, [note.id])).fetchone()
            assert deleted == (1,)
            assert mem.get(note.id) is None
    finally:
        engine.close()


def _maintained_assistant(name: str = "assistant_maint") -> AgentSpec:
    """The assistant spec under an agent name and table prefix of its own, as
    :func:`_maintained_spectral`."""
    data = yaml.safe_load((ROOT / "agents" / "assistant_memory.yaml").read_text(
        encoding="utf-8"))
    data["agent"] = name
    data["persistence"]["store"]["prefix"] = name
    return load_spec_text(yaml.safe_dump(data), policies_dir=ROOT / "policies")


def test_maintain_archives_decayed_rows_on_the_cluster_as_on_one_node(
    cluster: Cluster, coordinator: str, single: PostgresHandle
) -> None:
    """The assistant spec's ``decay_archive`` pass (Ebbinghaus decay below the threshold,
    protections read from the entity tables) through ``maintain``, 400 days on: the same
    rows archived (the opinion and the fact; the episode is exempt), with the same
    ``decay_archived`` events, on one node and on the cluster; a second run archives
    nothing. The run includes the spec's jobs (consolidation, embedding: nothing for
    them to do here)."""
    spec = _maintained_assistant()
    tenant = _tenant("dec")
    seen = []
    for admin, app in ((single.admin_dsn, single.app_dsn),
                       (cluster.coordinator.dsn(), cluster.coordinator.dsn(APP_ROLE))):
        migrate([spec], dsn=admin, progress=lambda _: None)
        engine = connect_engine(spec, app)
        try:
            with engine.tenant(anchor_for(spec, tenant)) as mem:
                mem.observe("long_term", "the user likes jazz", typology="opinion")
                mem.observe("long_term", "the user lives in Lyon", typology="semantic")
                mem.observe("long_term", "met the user at a concert", typology="episodic")
                start = mem.connection.execute("SELECT now()").fetchone()
            assert start is not None
            report = maintain([spec], admin, now=start[0] + timedelta(days=400), force=True)
            again = maintain([spec], admin, now=start[0] + timedelta(days=400), force=True)
            journal, rows, _ = _state(engine, tenant)
        finally:
            engine.close()
        seen.append((report.agents, again.agents, journal, rows))
    assert seen[0] == seen[1]
    counts, repeated, journal, rows = seen[1]
    assert counts[spec.agent] == {"decay_archive": 2, "consolidation": 0, "embed_pending": 0}
    assert repeated[spec.agent]["decay_archive"] == 0
    assert [kind for kind, _ in journal].count("decay_archived") == 2
    assert sorted((r[1], r[4]) for r in rows) == [
        ("episodic", False), ("opinion", True), ("semantic", True)]


def test_maintain_embeds_the_waiting_rows_of_every_tenant_on_the_cluster(
    cluster: Cluster, coordinator: str
) -> None:
    """The assistant defers its vectors; ``maintain`` with an embedder runs the embedding
    job, which on a coordinator takes one tenant at a time with statements routed to its
    shard: every waiting row of both tenants gets its vector and one ``embedded`` event,
    the chains verify, and a second run finds nothing."""
    from primitives.embeddings import HashingEmbedder
    from tests.security._support import verify_chain

    spec = _maintained_assistant("assistant_embed")
    migrate([spec], dsn=coordinator, progress=lambda _: None)
    engine = connect_engine(spec, cluster.coordinator.dsn(APP_ROLE))
    tenants = [_tenant("emb"), _tenant("emb")]
    embedder = HashingEmbedder(spec.retrieval.embedding.dims)
    try:
        for n, tenant in enumerate(tenants):
            with engine.tenant(anchor_for(spec, tenant)) as mem:
                for i in range(3 + n):
                    mem.observe("long_term", f"note {i} of tenant {n}", typology="episodic")
        report = maintain([spec], coordinator, embedder=embedder, force=True)
        again = maintain([spec], coordinator, embedder=embedder, force=True)
        seen = []
        for tenant in tenants:
            with engine.tenant(anchor_for(spec, tenant)) as mem:
                conn, tables = mem.connection, engine.tables
                seen.append((
                    conn.execute(sql.SQL(
                        "SELECT count(*) FILTER (WHERE embedding IS NULL), count(*), "
                        "count(DISTINCT embedding_model) FROM {}").format(
                            tables.memories.ident)).fetchone(),
                    conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE kind = 'embedded'"
                                         ).format(tables.events.ident)).fetchone(),
                    verify_chain(conn, tables, tenant)))
    finally:
        engine.close()
    assert report.agents[spec.agent]["embed_pending"] == 3 + 4
    assert again.agents[spec.agent]["embed_pending"] == 0
    assert seen == [((0, 3, 1), (3,), None), ((0, 4, 1), (4,), None)]
