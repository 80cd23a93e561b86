"""Issue 17, defect 9: every field of a write is bounded and every bad value refused.

A 5 MB tag or source, a lone surrogate, a set or bytes inside JSON, a 10,000-deep envelope:
each is a PolicyViolation naming the field (not a UnicodeEncodeError, TypeError or
RecursionError from the driver), through every write entry point, and nothing is written.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from psycopg import sql

from primitives.engine import Engine
from primitives.errors import PolicyViolation
from primitives.langgraph import MemoryStore
from primitives.spec._models import StoreLimits
from tests.conftest import PostgresHandle
from tests.security._support import new_tenant

pytestmark = pytest.mark.db

LIMITS = StoreLimits()  # the reference specs keep the defaults
BIG = 5_000_000


def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"d": value}
    return value


BAD: list[Any] = [
    # field, bad value
    ("content", "x" * (LIMITS.content_chars + 1)),
    ("content", "lone \ud800 surrogate"),
    ("content", "nul \x00 byte"),
    ("content", b"bytes"),
    ("key", "k" * (LIMITS.key_chars + 1)),
    ("key", "\udfff"),
    ("key", 7),
    ("namespace", ["n"] * (LIMITS.namespace_labels + 1)),
    ("namespace", ["n" * (LIMITS.label_chars + 1)]),
    ("namespace", ["\ud800"]),
    ("namespace", "one-string"),
    ("namespace", {"a", "b"}),
    ("tags", ["t"] * (LIMITS.tags + 1)),
    ("tags", ["t" * BIG]),
    ("tags", ["\ud800"]),
    ("tags", {"a", "b"}),
    ("tags", [b"bytes"]),
    ("source", "s" * BIG),
    ("source", "\ud800"),
    ("source", 7),
    ("scope_id", "s" * (LIMITS.scope_id_chars + 1)),
    ("scope_id", "\ud800"),
    ("value", {"set": {1, 2}}),
    ("value", {"bytes": b"x"}),
    ("value", {"text": "\ud800"}),
    ("value", {"\ud800": 1}),
    ("value", {1: "int key"}),
    ("value", {"nan": float("nan")}),
    ("value", {"when": datetime(2026, 1, 1, tzinfo=UTC)}),
    ("value", _deep(10_000)),
    ("value", _deep(LIMITS.json_depth + 1)),
    ("value", "not a mapping"),
    ("value", {"big": "v" * BIG}),
    ("envelope", _deep(10_000)),
    ("envelope", {"set": {1}}),
    ("envelope", {"bytes": b"x"}),
    ("envelope", {"nul": "a\x00b"}),
    ("envelope", [1, 2]),
    ("event_time", "2026-01-01T00:00:00Z"),
    ("event_time", 1_700_000_000),
    ("memory_id", "not-a-uuid"),
    ("memory_id", 12),
    ("memory_id", b"0123456789abcdef"),
]
IDS = [f"{field}-{k}" for k, (field, _) in enumerate(BAD)]


def _counts(engine: Engine, tenant: str) -> tuple[int, int]:
    with engine.tenant({"workspace_id": tenant}) as mem:
        conn = mem.connection
        assert conn.info.user == "primitives_app"
        rows = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
            engine.tables.memories.ident)).fetchone()
        events = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
            engine.tables.events.ident)).fetchone()
    assert rows is not None and events is not None
    return rows[0], events[0]


def _write_fields(field: str, bad: Any) -> tuple[str, dict[str, Any]]:
    """(content, other fields) of a cycle write with ``field`` bad and the rest good."""
    if field == "content":
        return bad, {}
    return "a good observation", {field: bad}


def _engine_observe(engine: Engine, tenant: str, field: str, bad: Any) -> None:
    content, fields = _write_fields(field, bad)
    engine.observe({"workspace_id": tenant}, "cycle", content, **fields)


def _tenant_observe(engine: Engine, tenant: str, field: str, bad: Any) -> None:
    content, fields = _write_fields(field, bad)
    with engine.tenant({"workspace_id": tenant}) as mem:
        mem.observe("cycle", "a good row written first, rolled back with the bad one")
        mem.observe("cycle", content, **fields)


def _observe_many(engine: Engine, tenant: str, field: str, bad: Any) -> None:
    content, fields = _write_fields(field, bad)
    with engine.tenant({"workspace_id": tenant}) as mem:
        mem.observe_many([{"tier": "cycle", "content": "a good item"},
                          {"tier": "cycle", "content": content, **fields}])


ENTRY_POINTS: list[Callable[[Engine, str, str, Any], None]] = [
    _engine_observe, _tenant_observe, _observe_many]


@pytest.mark.parametrize("write", ENTRY_POINTS, ids=lambda f: f.__name__.lstrip("_"))
@pytest.mark.parametrize(("field", "bad"), BAD, ids=IDS)
def test_bad_field_is_a_policy_violation_naming_it_and_nothing_is_written(
    engines: dict[str, Engine], write: Callable[[Engine, str, str, Any], None], field: str,
    bad: Any,
) -> None:
    engine = engines["spectral"]
    tenant = new_tenant("bad")
    with pytest.raises(PolicyViolation) as caught:
        write(engine, tenant, field, bad)
    error = caught.value
    assert field in error.message or str(error.context.get("field", "")).startswith(field), (
        error.message)
    assert _counts(engine, tenant) == (0, 0)


def test_bad_items_of_observe_many_are_refused_before_any_is_written(
    engines: dict[str, Engine],
) -> None:
    engine = engines["spectral"]
    tenant = new_tenant("bad")
    for items in ([{"tier": "cycle"}], [{"content": "no tier"}], ["not a mapping"]):
        with pytest.raises(PolicyViolation, match="observe_many item"), \
                engine.tenant({"workspace_id": tenant}) as mem:
            mem.observe_many([{"tier": "cycle", "content": "good"}, *items])  # type: ignore[list-item]
    assert _counts(engine, tenant) == (0, 0)


@pytest.fixture(scope="module")
def store(pg: PostgresHandle, engines: dict[str, Engine]) -> Iterator[MemoryStore]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # no embedder: lexical only
        made = MemoryStore.from_spec(engines["spectral"].spec, pg.app_dsn)
    yield made
    made.close()


STORE_BAD: list[Any] = [
    ("value", {"set": {1, 2}}),
    ("value", {"bytes": b"x"}),
    ("value", {"text": "lone \ud800"}),
    ("value", {"text": "ok", "deep": _deep(10_000)}),
    ("value", {"text": "ok", "big": "v" * BIG}),
    ("key", "k" * (LIMITS.key_chars + 1)),
    ("key", "\ud800"),
    ("namespace", "n" * (LIMITS.label_chars + 1)),
    ("namespace", "\ud800"),
    ("scope_id", "s" * (LIMITS.scope_id_chars + 1)),
]


@pytest.mark.parametrize(("field", "bad"), STORE_BAD,
                         ids=[f"{f}-{k}" for k, (f, _) in enumerate(STORE_BAD)])
def test_bad_store_put_is_a_policy_violation_and_nothing_is_written(
    engines: dict[str, Engine], store: MemoryStore, field: str, bad: Any,
) -> None:
    tenant = new_tenant("bad")
    namespace: tuple[str, ...] = (tenant, "cycle", "c-1")
    key, value = "item", {"text": "a good item"}
    if field == "value":
        value = bad
    elif field == "key":
        key = bad
    elif field == "namespace":
        namespace = (*namespace, bad)
    else:
        namespace = (tenant, "cycle", bad)
    with pytest.raises(PolicyViolation) as caught:
        store.put(namespace, key, value)
    # the store's scope segment is a namespace label of the row as well
    named = ("scope_id", "namespace") if field == "scope_id" else (field,)
    assert any(name in caught.value.message for name in named), caught.value.message
    assert _counts(engines["spectral"], tenant) == (0, 0)
