"""The server-side form of a statement for one-round-trip reads (``primitives.db._oneshot``)."""

from __future__ import annotations

import json

from psycopg.types.json import Jsonb

from primitives.db._oneshot import _literal, server_form
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


def test_an_empty_object_is_written_as_the_general_path_writes_it() -> None:
    assert _literal(None, Jsonb({}), True) == "'" + json.dumps({}) + "'::jsonb"
    assert canonical_json({}) == json.dumps({}, sort_keys=True, separators=(",", ":"))
    # only a plain empty dict takes the short way: the rest goes through json.dumps
    assert _literal(None, Jsonb({"a": 1}), True) == """'{"a": 1}'::jsonb"""
    assert _literal(None, Jsonb([]), True) == "'[]'::jsonb"
    assert _literal(None, Jsonb({}, dumps=lambda _: '{ }'), True) == "'{ }'::jsonb"
    assert canonical_json({"b": 1, "a": None}) == '{"a":null,"b":1}'
