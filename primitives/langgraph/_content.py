"""The text an item gives the retrieval signals (its memory row's ``content``).

Rule, first match wins:

1. ``index=False``: the key alone; the value stays out of the text index (and out of any
   embedding), no signal ranks the item, and a query search lists it after its ranked hits
   (score None) when the page has room.
2. ``index=[paths]``: the text at those paths (LangGraph's path syntax, e.g.
   ``"facts[*].text"``), one per line.
3. the value's ``content`` field, else its ``text`` field, when it is a non-empty string;
4. otherwise the value as canonical JSON (sorted keys, no spaces).

The result is cut to the spec's ``persistence.store.limits.content_chars``.

>>> item_content({"text": "prefers short answers", "n": 1}, "style", None, 4000)
'prefers short answers'
>>> item_content({"n": 1, "a": "x"}, "k", None, 4000)
'{"a":"x","n":1}'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from langgraph.store.base import get_text_at_path, tokenize_path

from primitives.engine import canonical_json

__all__ = ["item_content", "item_texts"]

_TEXT_FIELDS = ("content", "text")


def item_content(value: Mapping[str, Any], key: str, index: Literal[False] | list[str] | None,
                 limit: int) -> str:
    """The content of an item's memory row (see the module docstring)."""
    if index is False:
        return (key if key.strip() else "(not indexed)")[:limit]
    if index:
        joined = "\n".join(item_texts(value, index))
        if joined:
            return joined[:limit]
    for name in _TEXT_FIELDS:
        field = value.get(name)
        if isinstance(field, str) and field.strip():
            return field[:limit]
    return canonical_json(dict(value))[:limit]


def item_texts(value: Mapping[str, Any], index: list[str]) -> list[str]:
    """The non-blank texts at ``index``'s paths, in path order: what the content joins, and,
    when there are several, what is embedded one by one.

    >>> item_texts({"a": "x", "b": ["y", " "], "c": "z"}, ["a", "b[*]", "missing"])
    ['x', 'y']
    """
    return [text for path in index
            for text in get_text_at_path(dict(value), tokenize_path(path)) if text.strip()]
