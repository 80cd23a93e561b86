"""The write checks' quick walks accept exactly what the walks that name each place accept.

``check_json`` and ``bounded_labels`` first try a walk that builds no field names (most
values a write carries are plain); anything it does not show plain is walked again by the
full check, which refuses with the place named. These tests hold the two to the same verdict
and the refusals to their messages.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import pytest

from primitives.engine import _input
from primitives.engine._input import bounded_labels, check_json
from primitives.errors import PolicyViolation

ACCEPTED: list[Any] = [
    None, 0, -3, 2.5, True, "", "plain", "café ☕", [], {}, (1, "two"),
    {"text": "observation 1 v0", "n": 1, "version": 0},
    {"a": [1, {"b": None, "c": [True, 1.5, "x"]}], "ü": "ok"},
    OrderedDict(a=1), {"nested": (1, [2, {"t": ("x",)}])},
]
REFUSED: list[tuple[Any, str]] = [
    ({"a": "nul\x00"}, "NUL"),
    ({"nul\x00key": 1}, "NUL"),
    ({"a": "\ud800"}, "lone surrogate"),
    ({"\udfff": 1}, "lone surrogate"),
    ({1: "x"}, "key that is not a string"),
    ({"a": float("nan")}, "finite"),
    ([float("inf")], "finite"),
    ({"a": {1, 2}}, "holds a set"),
    ({"a": b"bytes"}, "holds a bytes"),
    ({"a": object()}, "holds a object"),
]


def _deep(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = {"d": value}
    return value


@pytest.mark.parametrize("value", ACCEPTED)
def test_check_json_accepts_what_jsonb_holds(value: Any) -> None:
    check_json(value, "value", depth=32)


@pytest.mark.parametrize(("value", "says"), REFUSED)
def test_check_json_refuses_with_the_place_named(value: Any, says: str) -> None:
    assert not _input._plain_json(value, 32)
    with pytest.raises(PolicyViolation, match=says) as err:
        check_json(value, "value", depth=32)
    assert str(err.value.context.get("field")).startswith("value")


def test_the_quick_walk_takes_only_plain_values() -> None:
    """What the quick walk passes, the full walk passes too (it never decides a refusal)."""
    for value in ACCEPTED:
        if _input._plain_json(value, 32):
            check_json(value, "value", depth=32)
    assert _input._plain_json({"a": [1, "x", None, 2.0, False]}, 32)
    assert not _input._plain_json((1, 2), 32)  # a tuple: the full walk decides (accepts)
    assert not _input._plain_json({"a": "é"}, 32)  # not ASCII: the full walk checks it


def test_depth_is_counted_the_same_by_both_walks() -> None:
    check_json(_deep(31), "value", depth=32)  # 31 dicts: within 32 levels
    assert _input._plain_json(_deep(32), 32)
    assert not _input._plain_json(_deep(33), 32)
    with pytest.raises(PolicyViolation, match="nests deeper than 32 levels"):
        check_json(_deep(33), "value", depth=32)
    with pytest.raises(PolicyViolation, match="nests deeper than 3 levels"):
        check_json([[[[1]]]], "value", depth=3)


def _labels(items: Any) -> list[str]:
    return bounded_labels(items, "namespace", count=3, chars=5, count_setting="namespace_labels",
                          chars_setting="label_chars")


def test_bounded_labels_returns_a_list_of_the_labels() -> None:
    assert _labels(("a", "bb")) == ["a", "bb"]
    assert _labels(["a", "ccccc"]) == ["a", "ccccc"]
    assert _labels(["é"]) == ["é"]  # not ASCII: the full check, same result
    assert _labels([]) == []


@pytest.mark.parametrize(("items", "says"), [
    (["a", "b", "c", "d"], "has 4 entries; at most 3"),
    (["a", "toolong"], r"namespace\[1\] is 7 characters"),
    (["a", "n\x00"], r"namespace\[1\] holds a NUL"),
    (["\ud800"], r"namespace\[0\] is not valid Unicode"),
    (["a", 3], r"namespace\[1\] must be a string"),
    ("abc", "must be a list of strings, not str"),
    ({"a"}, "not a set"),
])
def test_bounded_labels_refuses_with_the_label_named(items: Any, says: str) -> None:
    with pytest.raises(PolicyViolation, match=says):
        _labels(items)
