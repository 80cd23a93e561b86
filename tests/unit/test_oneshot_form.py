"""The server-side form of a statement for one-round-trip reads (``primitives.db._oneshot``)."""

from __future__ import annotations

import json

from primitives.db._oneshot import _text_array, server_form
from primitives.engine._core import canonical_json


def test_named_placeholders_become_numbered_parameters_in_first_use_order() -> None:
    form = server_form("SELECT * FROM t WHERE b = %(b)s AND a = %(a)s OR b IS NULL AND %(b)s > 0")
    assert form is not None
    name, text, order = form
    assert text == "SELECT * FROM t WHERE b = $1 AND a = $2 OR b IS NULL AND $1 > 0"
    assert order == ("b", "a")
    assert name.startswith("primitives_once_") and name.isidentifier()


def test_escaped_percent_becomes_one_percent_and_is_not_a_parameter() -> None:
    form = server_form("SELECT 'x%%' || %(v)s, 10 %% 3")
    assert form is not None
    assert form[1] == "SELECT 'x%' || $1, 10 % 3"
    assert form[2] == ("v",)


def test_positional_placeholders_do_not_qualify() -> None:
    assert server_form("SELECT %s") is None
    assert server_form("SELECT %(a)s, %s") is None


def test_each_statement_text_has_its_own_name() -> None:
    one, two = server_form("SELECT %(a)s::int"), server_form("SELECT %(a)s::bigint")
    assert one is not None and two is not None
    assert one[0] != two[0]
    assert server_form("SELECT %(a)s::int") == one  # stable


def test_a_list_of_text_is_written_in_the_array_form_psycopg_writes() -> None:
    from psycopg.adapt import PyFormat, Transformer

    items = ["a b", "{brace}", "comma,", 'q"uote', "back\\slash", "", "NULL", "null", "\u3000"]
    dumped = bytes(Transformer().get_dumper(items, PyFormat.TEXT).dump(items))
    assert _text_array(items).encode() == dumped


def test_canonical_json_is_sorted_and_compact() -> None:
    assert canonical_json({}) == json.dumps({}, sort_keys=True, separators=(",", ":"))
    assert canonical_json({"b": 1, "a": None}) == '{"a":null,"b":1}'
