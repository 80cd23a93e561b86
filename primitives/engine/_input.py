"""Checks on what a caller hands a write, before anything is sent.

Every field of a write is bounded by the spec (``persistence.store.limits``) and must be a
value the database can store as it is: text without NUL or lone surrogates, JSON made of
dicts with string keys, lists, strings, finite numbers, booleans and null, no deeper than
``json_depth``. A bad value is a :class:`~primitives.errors.PolicyViolation` naming the field,
raised before the transaction writes anything: not a ``UnicodeEncodeError``, ``TypeError`` or
``RecursionError`` from the driver.

>>> clean_text("ok", "tag 0")
'ok'
>>> check_json({"a": [1, {"b": None}]}, "value", depth=32)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from primitives.errors import PolicyViolation

__all__ = ["bounded_labels", "bounded_text", "check_json", "check_object", "clean_text"]


def clean_text(value: object, field: str) -> str:
    """``value`` as a plain ``str`` the database can hold; otherwise a PolicyViolation that
    names ``field``. A ``str`` subclass (a string enum member) becomes the text it holds."""
    if type(value) is not str:
        if not isinstance(value, str):
            raise PolicyViolation(f"{field} must be a string, not {type(value).__name__}",
                                  field=field)
        value = str.__str__(value)
    if "\x00" in value:
        raise PolicyViolation(f"{field} holds a NUL character, which PostgreSQL text cannot "
                              "store", field=field)
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            raise PolicyViolation(f"{field} is not valid Unicode text (a lone surrogate at "
                                  f"position {err.start})", field=field) from None
    return value


def bounded_text(value: object, field: str, limit: int, setting: str) -> str:
    """:func:`clean_text`, at most ``limit`` characters (``setting``: the spec field)."""
    text = clean_text(value, field)
    if len(text) > limit:
        raise PolicyViolation(f"{field} is {len(text)} characters; at most {limit} are allowed "
                              f"(persistence.store.limits.{setting})", field=field, limit=limit)
    return text


def bounded_labels(items: object, field: str, *, count: int, chars: int, count_setting: str,
                   chars_setting: str) -> list[str]:
    """A list of at most ``count`` labels, each :func:`bounded_text` of ``chars``."""
    if type(items) is list or type(items) is tuple:
        # the common case, checked without naming each label (the names are for errors)
        if len(items) <= count and all(type(item) is str and len(item) <= chars
                                       and item.isascii() and "\x00" not in item
                                       for item in items):
            return list(items)
    if isinstance(items, str | bytes) or not isinstance(items, Sequence | set | frozenset):
        raise PolicyViolation(f"{field} must be a list of strings, not "
                              f"{type(items).__name__}", field=field)
    if isinstance(items, set | frozenset):
        raise PolicyViolation(f"{field} must be a list of strings in order, not a set",
                              field=field)
    labels = list(items)
    if len(labels) > count:
        raise PolicyViolation(f"{field} has {len(labels)} entries; at most {count} are allowed "
                              f"(persistence.store.limits.{count_setting})", field=field,
                              limit=count)
    return [bounded_text(item, f"{field}[{k}]", chars, chars_setting)
            for k, item in enumerate(labels)]


def check_json(value: object, field: str, *, depth: int) -> None:
    """Refuse what ``jsonb`` cannot hold exactly, or nests deeper than ``depth``.

    Walked with an explicit stack, so a 10,000-deep value is refused, not a RecursionError.
    """
    if _plain_json(value, depth):
        return
    # something to refuse, or a type the quick walk does not take (a subclass, a tuple):
    # the walk that names where
    stack: list[tuple[object, int, str]] = [(value, 1, field)]
    while stack:
        item, level, where = stack.pop()
        if isinstance(item, dict | list | tuple):
            if level > depth:
                raise PolicyViolation(
                    f"{field} nests deeper than {depth} levels (at {where}; "
                    "persistence.store.limits.json_depth)", field=field, limit=depth)
            if isinstance(item, dict):
                for key, child in item.items():
                    if type(key) is not str:
                        raise PolicyViolation(f"{field} has a key that is not a string at "
                                              f"{where} ({type(key).__name__})", field=field)
                    clean_text(key, f"{field} key at {where}")
                    stack.append((child, level + 1, f"{where}.{key}"))
            else:
                stack.extend((child, level + 1, f"{where}[{k}]")
                             for k, child in enumerate(item))
        elif isinstance(item, str):
            clean_text(item, f"{field} at {where}")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise PolicyViolation(f"{field} holds {item} at {where}; JSON numbers are "
                                      "finite", field=field)
        elif item is not None and not isinstance(item, bool | int):
            raise PolicyViolation(f"{field} holds a {type(item).__name__} at {where}; JSON "
                                  "holds objects, arrays, strings, numbers, booleans and null",
                                  field=field)


def _plain_json(value: object, depth: int) -> bool:
    """True when ``value`` is made only of plain ``dict`` (string keys), ``list``, ASCII
    ``str`` without NUL, ``int``, ``bool``, finite ``float`` and None, no deeper than
    ``depth``: what :func:`check_json` accepts, walked without naming each place (a value
    not shown plain here is walked again by :func:`check_json`, which decides)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        item, level = pop()
        if type(item) is str:
            if not item.isascii() or "\x00" in item:
                return False
        elif type(item) is dict:
            if level > depth:
                return False
            for key, child in item.items():
                if type(key) is not str or not key.isascii() or "\x00" in key:
                    return False
                push((child, level + 1))
        elif type(item) is list:
            if level > depth:
                return False
            for child in item:
                push((child, level + 1))
        elif type(item) is float:
            if not math.isfinite(item):
                return False
        elif item is not None and type(item) is not int and type(item) is not bool:
            return False
    return True


def check_object(value: object, field: str) -> dict[str, Any]:
    """``value`` (a mapping, or None for empty) as a dict."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PolicyViolation(f"{field} must be a mapping, not {type(value).__name__}",
                              field=field)
    return dict(value)
