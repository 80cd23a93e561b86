"""The engine's statements that Citus cannot run in their single-node form, in their cluster
form on the coordinator: the graph's entity upsert, the store's put (the general path),
``end_scope``'s tier boundary and ``primitives maintain``. Each runs as the application
role (the maintenance as the maintainer), its result and its journal checked on the cluster.
"""

from __future__ import annotations

import asyncio
import uuid
import warnings
from typing import Any

import psycopg
from psycopg import sql

from primitives.db import APP_ROLE
from primitives.engine import Engine
from primitives.langgraph import MemoryStore
from tests.citus._cluster import Cluster
from tests.security._support import (
    SPEC_BY_AGENT,
    anchor_for,
    connect_engine,
    verify_chain,
)


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
    assert len(kinds) > 5  # the delete is journalled too


def _rows(admin: psycopg.Connection[Any], engine: Engine, tenant: str) -> list[Any]:
    return admin.execute(sql.SQL(
        "SELECT tier, scope_id, content FROM {} WHERE {} = %s ORDER BY content").format(
        engine.tables.memories.ident, engine.tables.tenant), (tenant,)).fetchall()
