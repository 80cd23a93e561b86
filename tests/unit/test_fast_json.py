"""primitives.db._json.loads gives exactly what json.loads gives, faster where it can."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from primitives.db._json import loads

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(_JSON)
@settings(max_examples=300)
def test_any_json_value_loads_as_the_standard_library_loads_it(value: object) -> None:
    text = json.dumps(value)
    assert repr(loads(text.encode())) == repr(json.loads(text))


def test_numbers_orjson_would_change_fall_back_to_the_standard_library() -> None:
    # past 64 bits orjson gives a float; past the float range it refuses
    for text in ("123456789012345678901234567890", "18446744073709551616",
                 '{"n": [1, -99999999999999999999]}', "1e400", "-1e400"):
        assert repr(loads(text.encode())) == repr(json.loads(text)), text
    assert loads(b"18446744073709551616") == 18446744073709551616
    assert isinstance(loads(b"123456789012345678901234567890"), int)
    assert loads("[1, 2]") == [1, 2]  # text as well as bytes
