"""Namespace templates (``persistence.store.namespaces``) and anchor aliases: parsing,
formatting and the spec's checks (no database)."""

from __future__ import annotations

from pathlib import Path

import pytest

from primitives.engine import resolve_anchor
from primitives.errors import SpecError, TenancyError
from primitives.langgraph import Address, NamespaceLayout, Scope
from primitives.spec import AgentSpec, load_spec, load_spec_text

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def spec() -> AgentSpec:
    return load_spec(ROOT / "examples" / "langmem_agent.yaml")


def test_langmem_default_template_maps_onto_anchor_tier_and_typology(spec: AgentSpec) -> None:
    layout = NamespaceLayout(spec)
    anchor = (("user_id", "u-1"),)
    assert layout.address(("memories", "u-1")) == Address(
        anchor, "memories", "episodic", ("memories", "u-1"), None)
    assert layout.address(("facts", "u-1", "home")) == Address(
        anchor, "memories", "semantic", ("facts", "u-1", "home"), None)
    assert layout.scope(("memories", "u-1")) == Scope(anchor, "memories", ("memories", "u-1"))
    assert layout.full(anchor, "memories", ("memories", "u-1")) == ("memories", "u-1")
    # the layout still works beside the templates
    assert layout.address(("u-1", "memories", "episodic", "x")).namespace == ("episodic", "x")
    assert layout.full(anchor, "memories", ("episodic", "x")) == (
        "u-1", "memories", "episodic", "x")


def test_a_template_namespace_without_its_anchor_or_hidden_in_the_layout_is_refused(
    spec: AgentSpec
) -> None:
    layout = NamespaceLayout(spec)
    with pytest.raises(TenancyError, match="does not fit it"):
        layout.scope(("memories",))
    with pytest.raises(TenancyError, match="address it by the template"):
        layout.address(("u-1", "memories", "memories", "u-2"))
    with pytest.raises(TenancyError, match="wildcard value"):
        layout.address(("memories", "*"))


def test_anchor_aliases_name_anchor_keys(spec: AgentSpec) -> None:
    assert resolve_anchor(spec, {"langgraph_user_id": "u-1"}).tenant == "u-1"
    assert resolve_anchor(spec, {"langgraph_user_id": "u-1", "user_id": "u-1"}).tenant == "u-1"
    with pytest.raises(TenancyError, match="given twice with different values"):
        resolve_anchor(spec, {"langgraph_user_id": "u-1", "user_id": "u-2"})
    with pytest.raises(TenancyError, match="unknown anchor key"):
        resolve_anchor(spec, {"uid": "u-1"})


BASE = """
version: 1
agent: t
anchor: {keys: [user_id], required_at_write: [user_id], aliases: ALIASES}
typology: {notes: [episodic, semantic], run: [episodic]}
tiers:
  - {name: notes, boundary: {scope_change: user_id}, persistent: true}
  - {name: run, boundary: {lifecycle: run_end}, persistent: false}
persistence:
  store: {schema: s, prefix: p, namespaces: [TEMPLATE]}
retrieval: {signals: [lexical]}
"""


@pytest.mark.parametrize(("aliases", "template", "message"), [
    ("{uid: nobody}", "{template: [m, '{user_id}'], tier: notes, typology: episodic}",
     "not an anchor key"),
    ("{user_id: user_id}", "{template: [m, '{user_id}'], tier: notes, typology: episodic}",
     "itself an anchor key"),
    ("{}", "{template: [m, '{user_id}'], tier: run, typology: episodic}",
     "not a persistent, store-placed tier"),
    ("{}", "{template: [m, '{user_id}'], tier: notes}", "name the typology"),
    ("{}", "{template: [m, '{user_id}'], tier: notes, typology: procedural}",
     "not procedural"),
    ("{}", "{template: ['{user_id}', m], tier: notes, typology: episodic}",
     "first segment is a literal"),
    ("{}", "{template: [m, '{other}'], tier: notes, typology: episodic}",
     "tenant key 'user_id' is one of them"),
    ("{}", "{template: [m], tier: notes, typology: episodic}",
     "tenant key 'user_id' is one of them"),
])
def test_the_spec_refuses_templates_and_aliases_that_do_not_fit(
    aliases: str, template: str, message: str
) -> None:
    with pytest.raises(SpecError, match=message):
        load_spec_text(BASE.replace("ALIASES", aliases).replace("TEMPLATE", template))
