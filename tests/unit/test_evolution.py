"""The pure half of `primitives plan`: a recorded shape against a new spec, no database."""

from __future__ import annotations

from pathlib import Path

from primitives.compile import compile_plan
from primitives.compile._evolution import Facts, evolve, spec_shape
from primitives.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPECTRAL = ROOT / "agents" / "spectral_agent.yaml"


def test_the_same_spec_has_no_changes_and_a_first_apply_is_one_additive_change() -> None:
    spec = load_spec(SPECTRAL)
    plan = compile_plan(spec)
    assert evolve(spec_shape(spec, plan), spec, plan, Facts()).changes == ()
    first = evolve(None, spec, plan, Facts())
    assert first.new_store and [c.kind for c in first.changes] == ["additive"]


def test_a_recorded_store_elsewhere_is_a_destructive_move_naming_the_prefix_line() -> None:
    spec = load_spec(SPECTRAL)
    plan = compile_plan(spec)
    old = {**spec_shape(spec, plan), "prefix": "earlier"}
    (change,) = evolve(old, spec, plan, Facts()).changes
    assert change.kind == "destructive" and change.field == "persistence.store.prefix"
    assert change.line == next(n for n, line in enumerate(
        SPECTRAL.read_text(encoding="utf-8").splitlines(), 1) if "prefix:" in line)
    assert change.refused(frozenset()) and not change.refused(frozenset({"destructive"}))


def test_a_tier_gone_without_rows_is_additive_and_with_rows_cannot_be_allowed() -> None:
    spec = load_spec(SPECTRAL)
    plan = compile_plan(spec)
    old = {**spec_shape(spec, plan)}
    old["tiers"] = [*old["tiers"], "scratch"]
    (empty,) = evolve(old, spec, plan, Facts()).changes
    assert empty.kind == "additive"
    (held,) = evolve(old, spec, plan, Facts(rows_by_tier={"scratch": 3})).changes
    assert held.kind == "destructive" and not held.allowable
    assert held.refused(frozenset({"destructive"}))
