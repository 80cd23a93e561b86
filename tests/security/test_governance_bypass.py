"""Issue 17, defect 1: a caller cannot choose the write path.

Governed and ``promotion_only`` memory is written by the engine's own paths (promotion, the
approval flow, sanitization), never because a caller said ``via="promotion"``. Every public
entry point is tried, as the application role, with every ``via`` value and the keyword
tricks around it; each is refused with a GovernanceError naming the path to take, and
nothing (row or journal event) is written.
"""

from __future__ import annotations

import asyncio
import uuid
import warnings
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from primitives.engine import AsyncEngine, Engine
from primitives.errors import GovernanceError, PolicyViolation
from primitives.langgraph import MemoryStore
from tests.conftest import PostgresHandle
from tests.security._support import SPECS, anchor_for, new_tenant

pytestmark = pytest.mark.db

GOVERNED = [
    pytest.param(spec.agent, tier.name, typology, policy.mode,
                 id=f"{spec.agent}-{tier.name}-{typology}-{policy.mode}")
    for spec in SPECS for tier in spec.tiers for typology in spec.typology[tier.name]
    if (policy := spec.behavior.write_policy.get(typology)) is not None  # type: ignore[call-overload]
    and policy.mode in ("governed", "promotion_only")
]
"""Every (agent, tier, typology) the reference specs route through a governed path."""

VIAS = ["promotion", "approval", "sanitization", "supersede", "direct", "", "PROMOTION", 3,
        None]
"""``via`` values a caller might try: the real internal paths, odd spellings, non-text."""

PATH_NAMED = r"promotion|governed|request|approved|engine"


def _counts(engine: Engine, anchor: dict[str, str]) -> tuple[int, int]:
    with engine.tenant(anchor) as mem:
        conn = mem.connection
        assert conn.info.user == "primitives_app"
        rows = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
            engine.tables.memories.ident)).fetchone()
        events = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
            engine.tables.events.ident)).fetchone()
    assert rows is not None and events is not None
    return rows[0], events[0]


def _refused(engine: Engine, anchor: dict[str, str], write: Any) -> GovernanceError:
    before = _counts(engine, anchor)
    with pytest.raises(GovernanceError, match=PATH_NAMED) as caught:
        write()
    assert _counts(engine, anchor) == before, "a refused write left a row or an event"
    return caught.value


@pytest.mark.parametrize(("agent", "tier", "typology", "mode"), GOVERNED)
@pytest.mark.parametrize("via", VIAS)
def test_any_via_cannot_write_governed_memory_through_engine_observe(
    engines: dict[str, Engine], agent: str, tier: str, typology: str, mode: str, via: Any,
) -> None:
    engine = engines[agent]
    anchor = anchor_for(engine.spec, new_tenant("gov"))
    error = _refused(engine, anchor, lambda: engine.observe(
        anchor, tier, "a fact the caller wants in", typology=typology, via=via))
    assert error.context.get("typology") == typology  # the policy's message: which path


@pytest.mark.parametrize(("agent", "tier", "typology", "mode"), GOVERNED)
def test_any_via_cannot_write_governed_memory_in_a_tenant_transaction(
    engines: dict[str, Engine], agent: str, tier: str, typology: str, mode: str,
) -> None:
    engine = engines[agent]
    anchor = anchor_for(engine.spec, new_tenant("gov"))
    for via in VIAS:
        def write(via: Any = via) -> None:
            with engine.tenant(anchor) as mem:
                mem.observe(tier, "a fact", typology=typology, via=via)
        _refused(engine, anchor, write)

        def write_many(via: Any = via) -> None:
            with engine.tenant(anchor) as mem:
                mem.observe_many([
                    {"tier": tier, "content": "a fact", "typology": typology, "via": via}])
        _refused(engine, anchor, write_many)

        def write_keyed(via: Any = via) -> None:  # the keyed path reads before it writes
            engine.observe(anchor, tier, "a keyed fact", typology=typology, key="k", via=via)
        _refused(engine, anchor, write_keyed)


@pytest.mark.parametrize(("agent", "tier", "typology", "mode"), GOVERNED)
def test_governed_memory_is_refused_without_via_naming_the_path_to_take(
    engines: dict[str, Engine], agent: str, tier: str, typology: str, mode: str,
) -> None:
    engine = engines[agent]
    anchor = anchor_for(engine.spec, new_tenant("gov"))
    error = _refused(engine, anchor, lambda: engine.observe(
        anchor, tier, "a fact", typology=typology))
    expected = "promotion engine" if mode == "promotion_only" else "request is approved"
    assert expected in error.message


def test_via_is_refused_even_where_the_typology_is_free_to_write(
    engines: dict[str, Engine],
) -> None:
    engine = engines["spectral"]
    anchor = anchor_for(engine.spec, new_tenant("gov"))
    error = _refused(engine, anchor, lambda: engine.observe(
        anchor, "cycle", "an episode", via="direct"))
    assert error.context.get("field") == "via"
    with pytest.raises(PolicyViolation, match="observe takes no field"):
        engine.observe(anchor, "cycle", "an episode", _path="promotion")
    assert _counts(engine, anchor) == (0, 0)


def test_via_cannot_write_governed_memory_through_the_async_engine(
    pg: PostgresHandle, engines: dict[str, Engine],
) -> None:
    spec = engines["mace"].spec
    anchor = anchor_for(spec, new_tenant("gov"))

    async def attempt() -> None:
        engine = await AsyncEngine.connect(spec, pg.app_dsn, max_connections=1)
        try:
            for via in ("promotion", "approval"):
                with pytest.raises(GovernanceError, match="governed"):
                    await engine.observe(anchor, "long_term", "a fact", typology="semantic",
                                         via=via)
                with pytest.raises(GovernanceError, match="governed"):
                    async with engine.tenant(anchor) as mem:
                        await mem.observe("long_term", "a fact", typology="semantic", via=via)
        finally:
            await engine.close()

    asyncio.run(attempt())
    assert _counts(engines["mace"], anchor) == (0, 0)


@pytest.mark.parametrize("typology", ["semantic"])
def test_a_store_put_cannot_write_promotion_only_memory(
    pg: PostgresHandle, engines: dict[str, Engine], typology: str,
) -> None:
    engine = engines["spectral"]
    tenant = new_tenant("gov")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # no embedder: lexical only
        store = MemoryStore.from_spec(engine.spec, pg.app_dsn)
    try:
        with pytest.raises(GovernanceError, match="promotion engine"):
            store.put((tenant, "workspace", typology), "fact",
                      {"text": "a fact", "via": "promotion"})
    finally:
        store.close()
    assert _counts(engine, {"workspace_id": tenant}) == (0, 0)


def _owner_inserted(admin_conn: psycopg.Connection[Any], engine: Engine, anchor: dict[str, str],
                    tier: str, typology: str) -> uuid.UUID:
    """A governed row as its own path would have written it (the owner stands in for the
    promotion engine or the approval flow, which later issues build)."""
    memory_id = uuid.uuid4()
    columns = [*anchor, "id", "tier", "typology", "key", "content", "value"]
    admin_conn.execute(sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
        engine.tables.memories.ident, sql.SQL(", ").join(map(sql.Identifier, columns)),
        sql.SQL(", ").join(sql.Placeholder() * len(columns))),
        [*anchor.values(), memory_id, tier, typology, str(memory_id), "an approved fact",
         Jsonb({})])
    return memory_id


@pytest.mark.parametrize(("agent", "tier", "typology", "mode"), GOVERNED)
def test_superseding_governed_memory_is_refused_naming_the_path(
    engines: dict[str, Engine], admin_conn: psycopg.Connection[Any], agent: str, tier: str,
    typology: str, mode: str,
) -> None:
    engine = engines[agent]
    anchor = anchor_for(engine.spec, new_tenant("gov"))
    memory_id = _owner_inserted(admin_conn, engine, anchor, tier, typology)

    def supersede() -> None:
        with engine.tenant(anchor) as mem:
            mem.supersede(memory_id, "the caller's rewrite of an approved fact")
    _refused(engine, anchor, supersede)
    with engine.tenant(anchor) as mem:
        kept = mem.get(memory_id)
    assert kept is not None and kept.active and kept.content == "an approved fact"
