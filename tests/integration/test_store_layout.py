"""The pure parts of the store (no database): namespace layout, item content, filters."""

from __future__ import annotations

from pathlib import Path

import pytest

from primitives.engine._store_ops import filter_conditions
from primitives.errors import PolicyViolation, TenancyError
from primitives.langgraph import Address, NamespaceLayout, Scope, item_content
from primitives.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def spectral() -> NamespaceLayout:
    return NamespaceLayout(load_spec(ROOT / "agents" / "spectral_agent.yaml"))


@pytest.fixture(scope="module")
def assistant() -> NamespaceLayout:
    return NamespaceLayout(load_spec(ROOT / "agents" / "assistant_memory.yaml"))


def test_namespaces_map_onto_anchor_tier_typology_and_scope(spectral: NamespaceLayout) -> None:
    anchor = (("workspace_id", "ws-1"),)
    assert spectral.address(("ws-1", "workspace", "procedural", "style")) == Address(
        anchor, "workspace", "procedural", ("procedural", "style"), None)
    assert spectral.address(("ws-1", "run", "run-7", "notes")) == Address(
        anchor, "run", "episodic", ("run-7", "notes"), "run-7")
    assert spectral.scope(("ws-1",)) == Scope(anchor, None, ())
    assert spectral.scope(("ws-1", "workspace", "episodic")) == Scope(
        anchor, "workspace", ("episodic",))
    assert spectral.listing_scope(("ws-1", "*", "x")) == Scope(anchor, None, ())
    assert spectral.full(anchor, "run", ("run-7",)) == ("ws-1", "run", "run-7")


def test_shapes_say_what_each_tier_expects(spectral: NamespaceLayout) -> None:
    assert spectral.shape() == "(workspace_id, <tier: cycle | run | workspace>, ...)"
    assert spectral.shape("run") == "(workspace_id, 'run', <scope id>, ...)"
    assert spectral.shape("workspace") == (
        "(workspace_id, 'workspace', <typology: episodic | semantic | procedural>, ...)")


def test_a_tier_placed_in_the_checkpointer_is_not_a_store_namespace(
    assistant: NamespaceLayout
) -> None:
    assert assistant.store_tiers == ("long_term",)
    with pytest.raises(TenancyError, match="placed in the checkpointer"):
        assistant.address(("u-1", "session", "s-1"))
    with pytest.raises(TenancyError, match="user_id"):
        assistant.address(())


def test_item_content_follows_the_documented_rule() -> None:
    assert item_content({"content": "c", "text": "t"}, "k", None, 100) == "c"
    assert item_content({"content": " ", "text": "t"}, "k", None, 100) == "t"
    assert item_content({"b": 1, "a": "é"}, "k", None, 100) == '{"a":"é","b":1}'
    assert item_content({"xs": [{"t": "a"}, {"t": "b"}]}, "k", ["xs[*].t"], 100) == "a\nb"
    assert item_content({"text": "t"}, "k", ["missing"], 100) == "t"
    assert item_content({"text": "secret"}, "key-1", False, 100) == "key-1"
    assert item_content({"text": "x" * 50}, "k", None, 16) == "x" * 16


def test_filters_normalise_and_refuse_what_they_cannot_compare() -> None:
    assert filter_conditions({"a": 1, "b": {"$gt": 2, "$lte": 5.5}, "c": {"x": 1}}) == (
        ("a", "$eq", 1), ("b", "$gt", 2), ("b", "$lte", 5.5), ("c", "$eq", {"x": 1}))
    for bad, message in (({"a": {"$in": [1]}}, "unsupported operator"),
                         ({"a": {"$gt": True}}, "numbers or strings"),
                         ({"a": {"$lt": None}}, "numbers or strings"),
                         ({"a": {"$gt": float("nan")}}, "finite")):
        with pytest.raises(PolicyViolation, match=message):
            filter_conditions(bad)
