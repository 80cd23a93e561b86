"""The six memory tools of seed 002, on the sync and the async engine, as the application role."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql

from primitives._project import migrate
from primitives.db import APP_ROLE
from primitives.engine import AsyncEngine, Engine
from primitives.errors import TenancyError
from primitives.langgraph import GRAPH_TOOL_NAMES, TOOL_NAMES, event_time_fields, memory_tools
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore:.*(semantic|graph) signal")
RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$")


@pytest.fixture(scope="module")
def specs(pg: PostgresHandle) -> dict[str, AgentSpec]:
    loaded = {name: load_spec(ROOT / "agents" / f"{name}.yaml")
              for name in ("assistant_memory", "spectral_agent")}
    migrate(list(loaded.values()), dsn=pg.admin_dsn)
    return loaded


class Tools:
    """``await tools.call(name, **args)`` on either engine; ``tools.sql(...)`` to inspect."""

    def __init__(self, engine: Any, native_async: bool, anchor: dict[str, str]) -> None:
        self.engine, self.native_async, self.anchor = engine, native_async, anchor
        self.by_name = {t.name: t for t in memory_tools(engine, anchor)}

    def bind(self, anchor: dict[str, str]) -> Tools:
        return Tools(self.engine, self.native_async, anchor)

    async def call(self, tool_name: str, /, **args: Any) -> Any:
        tool = self.by_name[tool_name]
        return await tool.ainvoke(args) if self.native_async else tool.invoke(args)

    async def observe(self, tier: str, content: str, **fields: Any) -> Any:
        return await self.memory("observe", tier, content, **fields)

    async def memory(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """One TenantMemory method in a transaction of its own."""
        if self.native_async:
            async with self.engine.tenant(self.anchor) as amem:
                return await getattr(amem, method)(*args, **kwargs)
        with self.engine.tenant(self.anchor) as mem:
            return getattr(mem, method)(*args, **kwargs)

    async def sql(self, query: sql.Composable, *params: Any) -> list[Any]:
        if self.native_async:
            async with self.engine.tenant(self.anchor) as amem:
                assert amem.connection.info.user == APP_ROLE
                cursor = await amem.connection.execute(query, params)
                return await cursor.fetchall()
        with self.engine.tenant(self.anchor) as mem:
            assert mem.connection.info.user == APP_ROLE
            return mem.connection.execute(query, params).fetchall()


@pytest.fixture(params=["sync", "async"])
async def tools(request: pytest.FixtureRequest, pg: PostgresHandle,
                specs: dict[str, AgentSpec]) -> AsyncIterator[Callable[..., Tools]]:
    spec = specs["assistant_memory"]
    if request.param == "sync":
        engine = Engine.connect(spec, pg.app_dsn)
        yield lambda: Tools(engine, False, {"user_id": f"u-{uuid.uuid4().hex[:8]}"})
        engine.close()
    else:
        aengine = await AsyncEngine.connect(spec, pg.app_dsn)
        yield lambda: Tools(aengine, True, {"user_id": f"u-{uuid.uuid4().hex[:8]}"})
        await aengine.close()


def _timestamps_ok(result: dict[str, Any]) -> None:
    assert RFC3339_UTC.match(result["event_time_iso"]), result["event_time_iso"]
    assert result["event_time_tz"] and result["event_time_local"].endswith(
        result["event_time_tz"])
    assert result["event_time_relative"] == "just now"
    assert result["event_time"] == int(datetime.fromisoformat(
        result["event_time_iso"]).timestamp())


async def test_the_six_tools_are_bound_to_the_spec_and_tenant(tools: Callable[..., Tools]) -> None:
    bound = tools()
    assert tuple(bound.by_name) == TOOL_NAMES + GRAPH_TOOL_NAMES   # the assistant has a graph
    schema = bound.by_name["search_memory"].args
    assert set(schema) == {"query", "type", "entity_name", "after", "before", "limit"}
    with pytest.raises(TenancyError, match="user_id"):
        memory_tools(bound.engine, {"workspace_id": "x"})


async def test_remember_then_search_returns_the_fact_with_the_timestamp_contract(
    tools: Callable[..., Tools]
) -> None:
    t = tools()
    saved = await t.call("remember_fact", fact="Dana works at Acme on the billing team",
                         entities=["Dana", "Acme"])
    assert saved["status"] == "remembered" and saved["type"] == "semantic"
    _timestamps_ok(saved)
    found = await t.call("search_memory", query="billing team")
    assert [r["id"] for r in found] == [saved["id"]]
    assert found[0]["entities"] == ["Dana", "Acme"] and found[0]["score"] > 0
    _timestamps_ok(found[0])


async def test_search_leaves_out_raw_episodes_unless_asked_and_filters(
    tools: Callable[..., Tools]
) -> None:
    t = tools()
    await t.observe("long_term", "Dana said the billing launch slipped", typology="episodic",
                    event_time=datetime(2025, 1, 5, tzinfo=UTC))
    fact = await t.call("remember_fact", fact="The billing launch is in March",
                        entities=["billing"])
    assert [r["id"] for r in await t.call("search_memory", query="billing launch")] == [
        fact["id"]]
    episodes = await t.call("search_memory", query="billing launch", type="episodic")
    assert [r["type"] for r in episodes] == ["episodic"]
    assert episodes[0]["event_time_iso"] == "2025-01-05T00:00:00+00:00"
    assert await t.call("search_memory", query="billing launch", type="episodic",
                        after="2025-02-01") == []
    assert len(await t.call("search_memory", query="billing launch", type="episodic",
                            before="2025-02-01")) == 1
    assert await t.call("search_memory", query="billing launch", entity_name="Zed") == []
    error = await t.call("search_memory", query="x", after="last tuesday")
    assert isinstance(error, str) and "ISO 8601" in error


async def test_correct_fact_supersedes_and_keeps_the_old_version(
    tools: Callable[..., Tools]
) -> None:
    t = tools()
    old = await t.call("remember_fact", fact="Dana works at Acme")
    new = await t.call("correct_fact", fact_id=old["id"], corrected_fact="Dana works at Initech",
                       reason="she moved")
    assert new["status"] == "corrected" and new["supersedes"] == old["id"]
    assert [r["content"] for r in await t.call("search_memory", query="Dana works")] == [
        "Dana works at Initech"]
    rows = await t.sql(sql.SQL("SELECT content, superseded_by FROM {} ORDER BY created_at")
                       .format(sql.Identifier("memory", "assistant_memories")))
    assert rows == [("Dana works at Acme", uuid.UUID(new["id"])), ("Dana works at Initech", None)]
    assert "not active" in await t.call("correct_fact", fact_id=old["id"], corrected_fact="x")
    assert "not a memory id" in await t.call("confirm_fact", fact_id="nope")


async def test_confirm_fact_protects_from_decay_and_is_journalled(
    tools: Callable[..., Tools]
) -> None:
    t = tools()
    fact = await t.call("remember_fact", fact="Dana prefers email")
    confirmed = await t.call("confirm_fact", fact_id=fact["id"])
    assert confirmed["status"] == "confirmed" and confirmed["confidence"] == 1.0
    rows = await t.sql(sql.SQL("SELECT confidence, decay_rate FROM {} WHERE id = %s").format(
        sql.Identifier("memory", "assistant_memories")), uuid.UUID(fact["id"]))
    assert rows == [(1.0, 0.0)]
    kinds = await t.sql(sql.SQL("SELECT kind FROM {} ORDER BY seq").format(
        sql.Identifier("memory", "assistant_memory_events")))
    assert kinds == [("observed",), ("confirmed",)]


async def test_get_entity_info_and_memory_stats(tools: Callable[..., Tools]) -> None:
    t = tools()
    await t.call("remember_fact", fact="Acme is a billing company", entities=["Acme"])
    await t.call("remember_fact", fact="Acme's office is in Lyon", entities=["Acme"])
    await t.observe("long_term", "Met Acme's CFO today", typology="episodic",
                    envelope={"entities": ["Acme"]})
    await t.call("remember_fact", fact="Bob likes tea")
    info = await t.call("get_entity_info", name="Acme")
    assert info["entity"] == "Acme" and len(info["facts"]) == 2
    assert info["summary"] in {f["content"] for f in info["facts"]}
    assert [e["content"] for e in info["timeline"]] == ["Met Acme's CFO today"]
    stats = await t.call("memory_stats")
    assert stats["nodes"] == {"episodic": 1, "semantic": 3, "procedural": 0, "opinion": 0}
    assert stats["tiers"] == {"session": 0, "long_term": 4}
    assert stats["journal_events"] == 4 and RFC3339_UTC.match(stats["last_write"])


async def test_entity_tools_use_the_graph(tools: Callable[..., Tools]) -> None:
    t = tools()
    acme = await t.memory("entity", "Acme Corp", "organization", aliases=["Acme"],
                          summary="a billing company in Lyon")
    fact = await t.call("remember_fact", fact="their invoices go out on the 5th",
                        entities=["Acme", "Globex"])           # Globex is not recorded
    assert fact["linked_entities"] == ["Acme Corp"]
    episode = await t.observe("long_term", "call with the CFO went well", typology="episodic")
    await t.memory("mention", episode.id, [acme.id])
    info = await t.call("get_entity_info", name="acme")
    assert (info["entity"], info["type"], info["aliases"]) == ("Acme Corp", "organization",
                                                               ["Acme"])
    assert info["mentions"] == 2 and info["summary"] == "a billing company in Lyon"
    # neither text names the entity: the graph's mentions found them
    assert [f["content"] for f in info["facts"]] == ["their invoices go out on the 5th"]
    assert [e["content"] for e in info["timeline"]] == ["call with the CFO went well"]
    # a name with no recorded entity has no profile fields
    assert "type" not in await t.call("get_entity_info", name="Globex")


async def test_tools_of_one_tenant_never_see_or_touch_another(
    tools: Callable[..., Tools]
) -> None:
    a = tools()
    b = a.bind({"user_id": f"u-{uuid.uuid4().hex[:8]}"})
    fact = await a.call("remember_fact", fact="tenant a's private fact", entities=["A"])
    assert await b.call("search_memory", query="private fact") == []
    assert (await b.call("get_entity_info", name="A"))["facts"] == []
    assert "no memory" in await b.call("confirm_fact", fact_id=fact["id"])
    assert "no memory" in await b.call("correct_fact", fact_id=fact["id"], corrected_fact="x")
    assert (await b.call("memory_stats"))["journal_events"] == 0


def test_write_policy_refusals_reach_the_model_as_text(
    pg: PostgresHandle, specs: dict[str, AgentSpec]
) -> None:
    with Engine.connect(specs["spectral_agent"], pg.app_dsn) as engine:
        remember = next(t for t in memory_tools(engine, {"workspace_id": "ws-t"})
                        if t.name == "remember_fact")
        answer = remember.invoke({"fact": "the sky is green"})
    assert "promotion engine" in answer


def test_timestamp_fields_are_empty_when_missing_and_formatted_otherwise() -> None:
    empty = {"event_time": 0, "event_time_iso": "", "event_time_local": "",
             "event_time_tz": "", "event_time_relative": ""}
    assert event_time_fields(None) == empty
    assert event_time_fields(datetime.fromtimestamp(0, UTC)) == empty
    at = datetime(2026, 2, 23, 15, 23, 47, tzinfo=UTC)
    india = timezone(timedelta(hours=5, minutes=30))
    fields = event_time_fields(at, now=at - timedelta(days=2), local_tz=india)
    assert fields == {"event_time": int(at.timestamp()),
                      "event_time_iso": "2026-02-23T15:23:47+00:00",
                      "event_time_local": "2026-02-23 20:53:47 UTC+5:30",
                      "event_time_tz": "UTC+5:30", "event_time_relative": "in 2 days"}
    assert event_time_fields(at, now=at + timedelta(minutes=1, seconds=5),
                             local_tz=UTC)["event_time_relative"] == "a minute ago"
    assert event_time_fields(at.replace(tzinfo=None), now=at, local_tz=UTC)[
        "event_time_local"] == "2026-02-23 15:23:47 UTC"
