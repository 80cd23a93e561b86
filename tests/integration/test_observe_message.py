"""The common ``observe`` written straight into its message (``_observe_message``) sends byte
for byte what the general path (core operation + ``_prepared_call``) sends, returns the same
memory, and hands every other write to the general path."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from uuid import UUID

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.rows import dict_row

from primitives.db._oneshot import NOT_SENT, OnceTransaction, _Prepared, _prepared_call, _unfit
from primitives.engine import AsyncEngine, Engine
from primitives.engine import _core as core
from primitives.engine import _queries as q
from primitives.engine._anchor import resolve_anchor
from primitives.engine._base import render
from primitives.engine._observe_message import observe_call
from primitives.errors import PolicyViolation, TenancyError
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle

EVENT_ID = UUID("00000000-0000-4000-8000-0000000000e1")
MEMORY_ID = UUID("00000000-0000-4000-8000-0000000000a1")
WHEN = datetime(2026, 11, 26, 9, 30, 15, 123456, tzinfo=timezone(timedelta(hours=5, minutes=30)))


class Kind(enum.StrEnum):
    CYCLE = "cycle"


@pytest.fixture
def conn(pg: PostgresHandle, spectral: AgentSpec) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg.app_dsn, autocommit=True) as connection:
        yield connection


@pytest.fixture
def fixed_event_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(q, "new_event_id", lambda: EVENT_ID)


def _general(engine: Engine, conn: psycopg.Connection[Any], anchor: dict[str, str], tier: Any,
             content: Any, actor: str, fields: dict[str, Any]) -> _Prepared | None:
    """What the general path sends for the same write: the core operation's insert step in
    its prepared form."""
    ctx = engine.context(resolve_anchor(engine.spec, anchor), actor)
    op = core.observe(ctx, tier, content, final=True, **fields)
    step = next(op)
    assert isinstance(step, core.Step) and step.last
    op.close()
    return _prepared_call(conn, render(step.statement, conn), step.params)


CASES: list[tuple[str, Any, dict[str, Any]]] = [
    ("plain", "lowering temperature removed fabrication", {}),
    ("quotes and backslashes", "it's a \\path\\ with 'quotes' and \"double\" ones", {
        "tags": ["a b", "{brace}", "comma,", 'q"uote', "back\\slash", "", "NULL", "null"],
        "namespace": ["team's", "x y"]}),
    ("unicode", "café \u2013 naïve ✓ 日本語 \u2028 line", {
        "envelope": {"who": "Zoë", "n": 3, "nested": {"list": [1, 2.5, None, True]}},
        "tags": ["\u3000wide space", "ok"], "namespace": ["Zoë's \x01 \u2028", "\\"],
        "scope_id": "scope \u00e9 \"q\""}),
    ("value and source", "with a value", {
        "value": {"b": 1, "a": [1, 2, {"c": "d"}], "f": 1.5e300, "big": 10**20},
        "source": "scan-7", "typology": "episodic"}),
    ("scoped", "in a scope", {"scope_id": "cycle-42", "envelope": {"kind": "scan"}}),
    ("event time and id", "at a time", {"event_time": WHEN, "memory_id": str(MEMORY_ID)}),
    ("a string enum as tier", "enum tier", {"tags": [Kind.CYCLE]}),
]


@pytest.mark.parametrize(("label", "content", "fields"), CASES, ids=[c[0] for c in CASES])
def test_the_message_is_byte_for_byte_the_general_paths(
    engine: Engine, conn: psycopg.Connection[Any], fixed_event_id: None,
    label: str, content: Any, fields: dict[str, Any],
) -> None:
    anchor = {"workspace_id": "ws-o'brien"}
    tier = Kind.CYCLE if label == "a string enum as tier" else "cycle"
    fields = {"memory_id": MEMORY_ID, "event_time": WHEN, **fields}
    call = observe_call(engine, conn, resolve_anchor(engine.spec, anchor), tier, content,
                        "agent-7", fields)
    assert call is not None
    assert call.prepared == _general(engine, conn, anchor, tier, content, "agent-7", fields)
    assert call.tenant == "ws-o'brien"
    assert call.written["id"] == MEMORY_ID and call.written["key"] == str(MEMORY_ID)
    assert type(call.written["tier"]) is str and all(type(t) is str for t in call.written["tags"])


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.text(min_size=1, max_size=80).filter(str.strip),
       tags=st.lists(st.text(max_size=12), max_size=4),
       namespace=st.lists(st.text(max_size=10), max_size=3),
       scope_id=st.one_of(st.none(), st.text(min_size=1, max_size=10)),
       envelope=st.dictionaries(st.text(max_size=8),
                                st.one_of(st.text(max_size=12), st.integers(),
                                          st.booleans(), st.none()), max_size=3))
def test_any_text_gives_the_general_paths_message_or_the_general_path(
    engine: Engine, conn: psycopg.Connection[Any], fixed_event_id: None,
    content: str, tags: list[str], namespace: list[str], scope_id: str | None,
    envelope: dict[str, Any],
) -> None:
    anchor = {"workspace_id": "ws-prop"}
    fields = {"memory_id": MEMORY_ID, "event_time": WHEN, "tags": tags, "envelope": envelope,
              "namespace": namespace, "scope_id": scope_id}
    texts = (content, *tags, *namespace, scope_id or "", *envelope,
             *(v for v in envelope.values() if isinstance(v, str)))
    if any("\x00" in text for text in texts):
        # PostgreSQL text holds no NUL: both paths refuse it before sending anything
        with pytest.raises(PolicyViolation, match="NUL"):
            observe_call(engine, conn, resolve_anchor(engine.spec, anchor), "cycle", content,
                         "agent", fields)
        return
    call = observe_call(engine, conn, resolve_anchor(engine.spec, anchor), "cycle", content,
                        "agent", fields)
    assert call is not None
    assert call.prepared == _general(engine, conn, anchor, "cycle", content, "agent", fields)


@pytest.mark.parametrize(("fields", "why"), [
    ({"key": "k-1"}, "a keyed write reads the current row first"),
    ({"event_time": datetime(2026, 1, 1)}, "a naive time is psycopg's to type"),
    ({"source": 7}, "a source that is not text"),
    ({"via": "promotion"}, "not a field of a write: the general path refuses it"),
    ({"colour": "red"}, "an unknown field: the general path raises"),
])
def test_other_writes_take_the_general_path(
    engine: Engine, conn: psycopg.Connection[Any], fields: dict[str, Any], why: str,
) -> None:
    anchor = resolve_anchor(engine.spec, {"workspace_id": "ws-general"})
    assert observe_call(engine, conn, anchor, "cycle", "text", "agent", fields) is None, why


def test_a_connection_with_its_own_row_factory_takes_the_general_path(
    engine: Engine, pg: PostgresHandle, spectral: AgentSpec,
) -> None:
    anchor = resolve_anchor(engine.spec, {"workspace_id": "ws-general"})
    with psycopg.connect(pg.app_dsn, autocommit=True, row_factory=dict_row) as conn:
        assert observe_call(engine, conn, anchor, "cycle", "text", "agent", {}) is None


def test_the_spec_checks_raise_here_as_on_the_general_path(
    engine: Engine, conn: psycopg.Connection[Any],
) -> None:
    anchor = resolve_anchor(engine.spec, {"workspace_id": "ws-checks"})
    with pytest.raises(TenancyError, match="unknown tier 'nope'"):
        observe_call(engine, conn, anchor, "nope", "text", "agent", {})
    with pytest.raises(PolicyViolation, match="memory content is empty"):
        observe_call(engine, conn, anchor, "cycle", "  ", "agent", {})
    with pytest.raises(PolicyViolation, match="tags must be a list of strings"):
        observe_call(engine, conn, anchor, "cycle", "text", "agent", {"tags": "one"})
    with pytest.raises(PolicyViolation, match="envelope holds a datetime"):
        observe_call(engine, conn, anchor, "cycle", "text", "agent",
                     {"envelope": {"at": datetime(2026, 1, 1, tzinfo=UTC)}})
    with pytest.raises(PolicyViolation, match="memory_id must be a UUID"):
        observe_call(engine, conn, anchor, "cycle", "text", "agent", {"memory_id": "x"})


def test_engine_observe_takes_this_path_and_returns_what_a_fresh_read_gives(
    engine: Engine, monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the general path ran")

    anchor = {"workspace_id": "ws-direct"}
    with monkeypatch.context() as patch:
        patch.setattr(core, "observe", refuse)
        memory = engine.observe(anchor, "cycle", "direct 'write'", envelope={"n": 1.5e300},
                                tags=["a b"], scope_id="c-1", event_time=WHEN)
    with engine.tenant(anchor) as mem:
        assert mem.get(memory.id) == memory
        events = mem.history(memory.id)
    assert [e["kind"] for e in events] == ["observed"]
    assert memory.scope_id == "c-1" and memory.tags == ("a b",)


def test_engine_observe_still_writes_what_this_path_hands_on(engine: Engine) -> None:
    anchor = {"workspace_id": "ws-handed-on"}
    naive = datetime(2026, 3, 1, 12, 0)
    memory = engine.observe(anchor, "cycle", "naive time", event_time=naive)
    keyed = engine.observe(anchor, "cycle", "keyed", key="k-1")
    with engine.tenant(anchor) as mem:
        assert mem.get(memory.id) == memory and mem.get(keyed.id) == keyed
    assert keyed.key == "k-1"
    with pytest.raises(PolicyViolation, match="content holds a NUL"):  # refused before sending
        engine.observe(anchor, "cycle", "nul \x00 here")
    with engine.tenant(anchor) as mem:
        count = mem.connection.execute("SELECT count(*) FROM platform.spectral_memories")
        assert count.fetchone() == (2,)  # row-level security: this tenant's rows only


def test_a_statement_the_server_will_not_prepare_is_not_sent(
    conn: psycopg.Connection[Any],
) -> None:
    bad = _Prepared("primitives_once_test_unpreparable",
                    "PREPARE primitives_once_test_unpreparable AS SELECT FROM nowhere", "")
    tx = OnceTransaction(conn, "ws-unfit")
    try:
        assert tx.fetch_prepared(bad, last=True, fetch="one") is NOT_SENT
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert bad.name in _unfit
    finally:
        _unfit.discard(bad.name)


def test_async_engine_observe_takes_this_path_too(
    pg: PostgresHandle, spectral: AgentSpec, monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the general path ran")

    async def main() -> None:
        engine = await AsyncEngine.connect(spectral, pg.app_dsn, max_connections=2)
        try:
            with monkeypatch.context() as patch:
                patch.setattr(core, "observe", refuse)
                memory = await engine.observe({"workspace_id": "ws-async-direct"}, "cycle",
                                              "async write", tags=["x"], event_time=WHEN)
            async with engine.tenant({"workspace_id": "ws-async-direct"}) as mem:
                assert await mem.get(memory.id) == memory
        finally:
            await engine.close()

    asyncio.run(main())
