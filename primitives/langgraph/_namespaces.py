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

__all__ = ["Address", "NamespaceLayout", "Scope"]


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


class NamespaceLayout:
    """Parses and formats namespaces for one spec; errors say what the spec expects."""

    def __init__(self, spec: AgentSpec) -> None:
        self.spec = spec
        self.keys: tuple[str, ...] = tuple(spec.anchor.keys)
        self.store_tiers = tuple(t.name for t in spec.tiers if t.placement == "store")

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
        """The full namespace of a get, put or delete."""
        anchor = self._anchor(namespace)
        n = len(self.keys)
        if len(namespace) == n:
            raise self._fail(namespace, "the tier follows the anchor")
        tier = self._tier(namespace)
        rest = tuple(namespace[n + 1:])
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
        """The namespace prefix of a search: the anchor, then optionally the tier and more."""
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
    @staticmethod
    def full(anchor: Sequence[tuple[str, str]], tier: str,
             namespace: Sequence[str]) -> tuple[str, ...]:
        return (*(value for _, value in anchor), tier, *namespace)
