"""Shared building blocks of the spec models: base config, names, durations, references."""

from __future__ import annotations

import difflib
import re
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, WithJsonSchema

__all__ = [
    "Duration",
    "Name",
    "SpecModel",
    "TierTypologyRef",
    "Typology",
    "format_duration",
    "parse_duration",
]


class SpecModel(BaseModel):
    """Base of every spec model: immutable, unknown keys are errors."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


Name = Annotated[
    str,
    Field(
        pattern=r"^[a-z][a-z0-9_]{0,47}$",
        description="lower_snake_case identifier (letters, digits, underscore; max 48)",
    ),
]
"""Identifiers that end up in SQL names: schemas, prefixes, tiers, anchor keys."""

Typology = Literal["episodic", "semantic", "procedural", "opinion"]
"""Memory typology (seed 003), plus ``opinion`` (seed 002: preferences with dynamic confidence)."""

_DURATION = re.compile(r"^\s*(\d+)\s*(s|m|h|d|w)\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(value: Any) -> timedelta:
    """Parse ``"30d"``, ``"12h"``, ``"1800s"`` (or a number of seconds) into a timedelta.

    >>> parse_duration("30d").days
    30
    """
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise ValueError("a duration is a number with a unit, e.g. 30d, 12h, 90m, 1800s")
    if isinstance(value, int | float):
        return timedelta(seconds=float(value))
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            return timedelta(seconds=int(match.group(1)) * _UNIT_SECONDS[match.group(2)])
    raise ValueError(
        f"invalid duration {value!r}; write a number with a unit: s, m, h, d or w (e.g. 30d, 1800s)"
    )


def format_duration(value: timedelta) -> str:
    """Inverse of :func:`parse_duration`, using the largest exact unit."""
    seconds = int(value.total_seconds())
    for unit in ("w", "d", "h", "m"):
        size = _UNIT_SECONDS[unit]
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


Duration = Annotated[
    timedelta,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema({"type": "string", "pattern": r"^\d+(s|m|h|d|w)$", "examples": ["30d", "1800s"]}),
]


def _check_ref(value: Any) -> Any:
    if isinstance(value, str) and not re.match(r"^[a-z][a-z0-9_]*\.[a-z]+$", value):
        raise ValueError(f"expected '<tier>.<typology>' (e.g. 'run.episodic'), got {value!r}")
    return value


TierTypologyRef = Annotated[
    str,
    BeforeValidator(_check_ref),
    WithJsonSchema({"type": "string", "pattern": r"^[a-z][a-z0-9_]*\.[a-z]+$"}),
]
"""``"<tier>.<typology>"``, e.g. ``"workspace.semantic"``."""


def split_ref(ref: str) -> tuple[str, str]:
    tier, typology = ref.split(".", 1)
    return tier, typology


def suggest(word: str, options: list[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest option, or an empty string."""
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.5)
    return f" (did you mean '{close[0]}'?)" if close else ""
