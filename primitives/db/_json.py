"""Faster JSON loading for the framework's connections, with the standard library's results.

Every search row carries several jsonb columns (value, envelope, provenance, per-signal ranks
and scores): about 50 values for a search of 10, each about 3.3 us with ``json.loads`` and
1.5 us with orjson (a small envelope, timeit). :func:`loads` parses with orjson and falls back
to ``json.loads`` wherever the two could differ: a number of 19 digits or more (orjson turns
integers past 64 bits into floats) and anything orjson refuses (numbers past the float
range, which the standard library reads as infinity).

Example::

    use_fast_json(conn)      # jsonb and json columns of this connection load with loads()
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
from psycopg import abc
from psycopg.types.json import set_json_loads

__all__ = ["loads", "use_fast_json"]

_LONG_DIGITS = re.compile(rb"\d{19}")


def loads(data: bytes | str) -> Any:
    """``json.loads(data)``, computed by orjson when that gives the same value."""
    raw = data.encode() if isinstance(data, str) else data
    if _LONG_DIGITS.search(raw) is None:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw)


def use_fast_json(context: abc.AdaptContext) -> None:
    """Load json and jsonb values on ``context`` (a connection or cursor) with :func:`loads`."""
    set_json_loads(loads, context)
