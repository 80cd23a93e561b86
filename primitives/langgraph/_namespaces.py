"""Store namespaces checked against the spec: ``(*anchor values, tier, [typology,] [scope id,] ...)``.

The layout, segment by segment:

1. one segment per anchor key, in the spec's order (``anchor.keys``): the tenant first;
2. the tier, one of the spec's tiers placed in the store (a tier with
   ``placement: checkpointer`` is LangGraph thread state, not store items);
3. the typology, only when the tier holds several (``typology:`` lists more than one);
4. the scope id, only for a transient tier: the run, cycle or session the item belongs to,
   which ``end_scope`` removes;
5. anything else, free.

Everything after the tier is the memory row's ``namespace``; the item key is its ``key``.

Beside the layout, a spec may declare namespace templates (``persistence.store.namespaces``),
such as LangMem's ``("memories", "{langgraph_user_id}")``: a namespace that starts with a
template's segments (literals equal, each ``{name}`` a value of the anchor key it names,
directly or through ``anchor.aliases``) addresses the template's tier and typology, and the
row keeps the whole namespace. Templates are tried first, in order; a layout namespace
whose segments after the tier fit a template of that tier is refused (it would read back as
the template's).

>>> layout = NamespaceLayout(load_spec("agents/spectral_agent.yaml"))  # doctest: +SKIP
>>> layout.address(("ws-1", "workspace", "procedural", "style"))     # doctest: +SKIP
Address(anchor={'workspace_id': 'ws-1'}, tier='workspace', typology='procedural', ...)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from primitives.engine import resolve_anchor
from primitives.errors import TenancyError
from primitives.spec import AgentSpec

__all__ = ["Address", "NamespaceLayout", "Scope", "Template"]


@dataclass(frozen=True)
class Address:
    """Where a full namespace puts an item."""

    anchor: tuple[tuple[str, str], ...]
    tier: str
    typology: str
    namespace: tuple[str, ...]
    scope_id: str | None


@dataclass(frozen=True)
class Scope:
    """What a namespace prefix selects: one anchor, maybe one tier, maybe a deeper prefix."""

    anchor: tuple[tuple[str, str], ...]
    tier: str | None
    prefix: tuple[str, ...]


@dataclass(frozen=True)
class Template:
    """One ``persistence.store.namespaces`` entry: per segment its literal, or the anchor
    key its ``{name}`` stands for."""

    segments: tuple[str, ...]
    keys: tuple[str | None, ...]
    tier: str
    typology: str

    def values(self, namespace: Sequence[str]) -> dict[str, str] | None:
        """The anchor values a namespace gives when it starts with this template, else None."""
        if len(namespace) < len(self.segments):
            return None
        found: dict[str, str] = {}
        for segment, key, given in zip(self.segments, self.keys, namespace, strict=False):
            if key is None:
                if given != segment:
                    return None
            elif not given or given == "*":
                return None
            else:
                found[key] = given
        return found


_PARSED = 4096
"""Namespaces a layout keeps parsed (all forgotten at once when full)."""


class NamespaceLayout:
    """Parses and formats namespaces for one spec; errors say what the spec expects."""

    def __init__(self, spec: AgentSpec) -> None:
        self.spec = spec
        self._addresses: dict[tuple[str, ...], Address] = {}
        """Namespaces parsed already (:meth:`address` is a function of the namespace alone):
        a store's calls address a few namespaces again and again."""
        self.keys: tuple[str, ...] = tuple(spec.anchor.keys)
        self.store_tiers = tuple(t.name for t in spec.tiers if t.placement == "store")
        self.templates = tuple(
            Template(tuple(entry.template),
                     tuple(spec.anchor.canonical(seg[1:-1])
                           if seg.startswith("{") and seg.endswith("}") else None
                           for seg in entry.template),
                     entry.tier, entry.typology or spec.typology[entry.tier][0])
            for entry in spec.persistence.store.namespaces)

    def template(self, namespace: Sequence[str]) -> tuple[Template, dict[str, str]] | None:
        """The first template ``namespace`` starts with, and the anchor values it gives."""
        for template in self.templates:
            values = template.values(namespace)
            if values is not None:
                return template, values
        return None

    def _templated(self, namespace: Sequence[str]) -> tuple[Template, tuple[tuple[str, str], ...]] | None:
        """A template match with its anchor resolved; a namespace that starts like a template
        but stops short of its anchor segments is refused."""
        matched = self.template(namespace)
        if matched is not None:
            template, values = matched
            resolved = resolve_anchor(self.spec, values)
            return template, tuple((k, v) for k, v in resolved.values if v is not None)
        for template in self.templates:
            if namespace and namespace[0] == template.segments[0]:
                raise TenancyError(
                    f"namespace {tuple(namespace)!r} starts like the template "
                    f"{template.segments!r} of agent '{self.spec.agent}' but does not fit it: "
                    "its segments stop before the anchor's, or give an empty or wildcard "
                    "value where the anchor selects the tenant",
                    agent=self.spec.agent, namespace=list(namespace))
        return None

    # shapes --------------------------------------------------------------------------------
    def shape(self, tier: str | None = None) -> str:
        """The expected namespace, e.g. ``(workspace_id, 'run', <scope id>, ...)``."""
        head = ", ".join(self.keys)
        if tier is None:
            return f"({head}, <tier: {' | '.join(self.store_tiers)}>, ...)"
        parts = [head, repr(tier)]
        kinds = self.spec.typology.get(tier, [])
        if len(kinds) > 1:
            parts.append(f"<typology: {' | '.join(kinds)}>")
        if not self.spec.tier(tier).persistent:
            parts.append("<scope id>")
        return f"({', '.join(parts)}, ...)"

    def _fail(self, namespace: Sequence[str], problem: str, tier: str | None = None) -> TenancyError:
        return TenancyError(
            f"namespace {tuple(namespace)!r} does not fit agent '{self.spec.agent}': {problem}; "
            f"expected {self.shape(tier)}", agent=self.spec.agent, namespace=list(namespace))

    # parsing -------------------------------------------------------------------------------
    def _anchor(self, namespace: Sequence[str]) -> tuple[tuple[str, str], ...]:
        n = len(self.keys)
        if len(namespace) < n:
            raise self._fail(namespace, f"it starts with the anchor ({', '.join(self.keys)}), "
                                        f"{n} segment(s)")
        values = dict(zip(self.keys, namespace[:n], strict=True))
        wildcard = [k for k, v in values.items() if v == "*"]
        if wildcard:
            raise self._fail(namespace, f"the anchor ({', '.join(wildcard)}) selects the tenant "
                                        "and cannot be a wildcard")
        resolved = resolve_anchor(self.spec, values)
        return tuple((k, v) for k, v in resolved.values if v is not None)

    def _tier(self, namespace: Sequence[str]) -> str:
        tier = namespace[len(self.keys)]
        if tier in self.store_tiers:
            return tier
        if tier in self.spec.tier_names:
            raise self._fail(namespace, f"tier '{tier}' is placed in the checkpointer "
                                        "(placement: checkpointer): its state is LangGraph "
                                        "thread state, not store items")
        raise self._fail(namespace, f"unknown tier '{tier}'")

    def address(self, namespace: Sequence[str]) -> Address:
        """The full namespace of a get, put or delete (parsed once per namespace; a
        namespace that does not fit is refused each time, never kept)."""
        key = tuple(namespace)
        try:
            known = self._addresses.get(key)
        except TypeError:  # an unhashable segment: parsed, and refused, below
            return self._address(namespace)
        if known is not None:
            return known
        address = self._address(key)
        if len(self._addresses) >= _PARSED:
            self._addresses.clear()
        self._addresses[key] = address
        return address

    def _address(self, namespace: Sequence[str]) -> Address:
        templated = self._templated(namespace)
        if templated is not None:
            template, found = templated
            return Address(found, template.tier, template.typology, tuple(namespace), None)
        anchor = self._anchor(namespace)
        n = len(self.keys)
        if len(namespace) == n:
            raise self._fail(namespace, "the tier follows the anchor")
        tier = self._tier(namespace)
        rest = tuple(namespace[n + 1:])
        if any(t.tier == tier and t.values(rest) is not None for t in self.templates):
            raise self._fail(namespace, f"what follows the tier fits a namespace template of "
                                        f"tier '{tier}': address it by the template", tier)
        kinds = self.spec.typology[tier]
        position = 0
        if len(kinds) == 1:
            typology = kinds[0]
        else:
            if not rest or rest[0] not in kinds:
                got = f"'{rest[0]}'" if rest else "nothing"
                raise self._fail(namespace, f"tier '{tier}' holds {', '.join(kinds)}, so the "
                                            f"segment after the tier names the typology (got "
                                            f"{got})", tier)
            typology, position = rest[0], 1
        scope_id: str | None = None
        if not self.spec.tier(tier).persistent:
            if len(rest) <= position:
                boundary = self.spec.tier(tier).boundary
                event = boundary.lifecycle or boundary.kind
                raise self._fail(namespace, f"tier '{tier}' is transient (it ends at {event}), so "
                                            "a segment names the scope its items belong to",
                                 tier)
            scope_id = rest[position]
        return Address(anchor, tier, typology, rest, scope_id)

    def scope(self, prefix: Sequence[str]) -> Scope:
        """The namespace prefix of a search: the anchor, then optionally the tier and more;
        or a namespace template's segments, then more."""
        templated = self._templated(prefix)
        if templated is not None:
            template, found = templated
            return Scope(found, template.tier, tuple(prefix))
        anchor = self._anchor(prefix)
        n = len(self.keys)
        if len(prefix) == n:
            return Scope(anchor, None, ())
        return Scope(anchor, self._tier(prefix), tuple(prefix[n + 1:]))

    def listing_scope(self, prefix: Sequence[str]) -> Scope:
        """Like :meth:`scope` for ``list_namespaces``, where ``*`` may stand for the tier."""
        n = len(self.keys)
        if len(prefix) > n and prefix[n] == "*":
            return Scope(self._anchor(prefix), None, ())
        return self.scope(prefix)

    # formatting ----------------------------------------------------------------------------
    def full(self, anchor: Sequence[tuple[str, str]], tier: str,
             namespace: Sequence[str]) -> tuple[str, ...]:
        """The namespace a caller sees for a row: a templated row's own, else the layout's."""
        if any(t.tier == tier and t.values(namespace) is not None for t in self.templates):
            return tuple(namespace)
        return (*(value for _, value in anchor), tier, *namespace)
