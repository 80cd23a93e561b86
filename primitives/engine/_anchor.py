"""Anchors: the scope tuple a caller hands the engine, checked against the spec."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from primitives.errors import TenancyError
from primitives.spec import AgentSpec

__all__ = ["Anchor", "resolve_anchor"]

MAX_ANCHOR_VALUE = 256


@dataclass(frozen=True)
class Anchor:
    """A validated anchor: the tenant (first key) and every anchor column's value;
    ``provenance``: the values of the spec's ``anchor.provenance`` keys the caller gave
    (recorded with each write, not part of the scope)."""

    tenant: str
    values: tuple[tuple[str, str | None], ...]
    provenance: tuple[tuple[str, str], ...] = ()

    def as_dict(self) -> dict[str, str | None]:
        return dict(self.values)


def resolve_anchor(spec: AgentSpec, anchor: Mapping[str, object]) -> Anchor:
    """Check ``anchor`` against ``spec.anchor``; raise TenancyError saying what was expected.

    >>> resolve_anchor(spec, {"workspace_id": "ws-1"}).tenant  # doctest: +SKIP
    'ws-1'
    """
    if not isinstance(anchor, Mapping):
        raise TenancyError(
            f"an anchor is a mapping of {', '.join(spec.anchor.keys)} to values, "
            f"got {type(anchor).__name__}", agent=spec.agent,
        )
    keys = spec.anchor.keys
    if spec.anchor.aliases and any(k in spec.anchor.aliases for k in anchor):
        anchor = _canonical(spec, anchor)
    unknown = [k for k in anchor if k not in keys and k not in spec.anchor.provenance]
    if unknown:
        extra = (f"; provenance keys: {', '.join(spec.anchor.provenance)}"
                 if spec.anchor.provenance else "")
        raise TenancyError(
            f"unknown anchor key(s) {', '.join(map(repr, unknown))} for agent '{spec.agent}'; "
            f"its anchor is ({', '.join(keys)}){extra}", agent=spec.agent,
        )
    provenance: list[tuple[str, str]] = []
    for key in spec.anchor.provenance:
        value = anchor.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or len(value) > MAX_ANCHOR_VALUE or "\x00" in value:
            raise TenancyError(f"provenance key '{key}' must be a string of at most "
                               f"{MAX_ANCHOR_VALUE} characters without NUL bytes",
                               agent=spec.agent)
        provenance.append((key, value))
    values: list[tuple[str, str | None]] = []
    for key in keys:
        value = anchor.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            if key in spec.anchor.required_at_write:
                raise TenancyError(
                    f"anchor key '{key}' is required for agent '{spec.agent}' "
                    f"(anchor: {', '.join(keys)}; required: "
                    f"{', '.join(spec.anchor.required_at_write)})", agent=spec.agent,
                )
            values.append((key, None))
            continue
        if not isinstance(value, str):
            raise TenancyError(f"anchor key '{key}' must be a string, got "
                               f"{type(value).__name__}", agent=spec.agent)
        if len(value) > MAX_ANCHOR_VALUE or "\x00" in value:
            raise TenancyError(f"anchor key '{key}' must be at most {MAX_ANCHOR_VALUE} "
                               "characters without NUL bytes", agent=spec.agent)
        values.append((key, value))
    tenant = values[0][1]
    assert tenant is not None  # the tenant key is always required (checked by the loader)
    return Anchor(tenant=tenant, values=tuple(values), provenance=tuple(provenance))


def _canonical(spec: AgentSpec, anchor: Mapping[str, object]) -> dict[str, object]:
    """``anchor`` with each alias (``anchor.aliases``) renamed to its key; an alias and its
    key given with different values is refused."""
    out: dict[str, object] = {}
    for name, value in anchor.items():
        key = spec.anchor.canonical(name)
        if key in out and out[key] != value:
            raise TenancyError(f"anchor key '{key}' is given twice with different values "
                               f"(alias '{name}': {value!r}, and {out[key]!r})",
                               agent=spec.agent)
        out[key] = value
    return out
