"""``primitives init``: scaffold a spec by walking the primitives in seed 003's order.

Anchor first, audit last. Every answer can come from a flag, so the same walk
runs non-interactively (``--yes``) in scripts and tests.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import yaml

from primitives.errors import SpecError
from primitives.spec import LIFECYCLE_EVENTS, SIGNALS, load_spec_text
from primitives.spec._schema import SCHEMA_FILE

__all__ = ["ScaffoldAnswers", "TierAnswer", "parse_tier", "render_spec", "walk"]

Ask = Callable[[str, str], str]


@dataclass(frozen=True)
class TierAnswer:
    name: str
    boundary: tuple[str, str]  # (kind, value): ("lifecycle", "run_end") or ("scope_change", key)
    typology: tuple[str, ...]
    persistent: bool = False


@dataclass
class ScaffoldAnswers:
    agent: str
    anchor: list[str] = field(default_factory=list)
    tiers: list[TierAnswer] = field(default_factory=list)
    checkpointer_schema: str = "langgraph"
    store_schema: str = "memory"
    prefix: str = ""
    signals: list[str] = field(default_factory=lambda: ["envelope", "semantic", "recency"])
    rrf_k: int = 60
    non_mirror: list[str] = field(default_factory=list)
    cross_context: str = "none"


def parse_tier(text: str) -> TierAnswer:
    """Parse ``name:boundary:typology[,typology][:persistent]``.

    >>> parse_tier("run:lifecycle=run_end:episodic").boundary
    ('lifecycle', 'run_end')
    """
    parts = text.split(":")
    if len(parts) not in (3, 4) or (len(parts) == 4 and parts[3] != "persistent"):
        raise SpecError(
            f"--tier {text!r}: expected NAME:BOUNDARY:TYPOLOGY[,TYPOLOGY][:persistent], e.g. "
            "run:lifecycle=run_end:episodic or workspace:scope_change=workspace_id:semantic:persistent"
        )
    name, boundary, kinds = parts[:3]
    kind, _, value = boundary.partition("=")
    if kind not in ("lifecycle", "scope_change") or not value:
        raise SpecError(
            f"--tier {text!r}: boundary is lifecycle=<event> or scope_change=<anchor key>; "
            f"lifecycle events: {', '.join(LIFECYCLE_EVENTS)}"
        )
    return TierAnswer(name, (kind, value), tuple(k for k in kinds.split(",") if k),
                      persistent=len(parts) == 4)


_NAME = re.compile(r"^[a-z][a-z0-9_]{0,47}$")
_KINDS = ("episodic", "semantic", "procedural", "opinion")
_CROSS_CONTEXT = ("none", "event_driven", "tool_mediated")
Check = Callable[[str], str | None]
"""An answer's check: ``None`` when it is acceptable, else what is wrong with it."""


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _names(what: str, *, empty: bool = False) -> Check:
    def check(text: str) -> str | None:
        items = _items(text)
        if not items and not empty:
            return f"give at least one {what}"
        bad = [i for i in items if not _NAME.match(i)]
        return (f"{', '.join(bad)}: a {what} is lower_snake_case (letters, digits, underscore; "
                "starts with a letter; at most 48)") if bad else None
    return check


def _one_of(what: str, allowed: tuple[str, ...], *, many: bool) -> Check:
    def check(text: str) -> str | None:
        items = _items(text) if many else [text.strip()]
        if not items:
            return f"give at least one {what}"
        bad = [i for i in items if i not in allowed]
        return f"{', '.join(bad)}: not a {what}; one of {', '.join(allowed)}" if bad else None
    return check


def _count(text: str) -> str | None:
    return None if text.strip().isdigit() and 1 <= int(text) <= 8 else "a number from 1 to 8"


def _boundary(anchor: list[str]) -> Check:
    def check(text: str) -> str | None:
        kind, _, value = text.strip().partition("=")
        if kind == "lifecycle" and value in LIFECYCLE_EVENTS:
            return None
        if kind == "scope_change" and value in anchor:
            return None
        return (f"lifecycle=<event> (one of {', '.join(LIFECYCLE_EVENTS)}) or "
                f"scope_change=<anchor key> (one of {', '.join(anchor)})")
    return check


def walk(answers: ScaffoldAnswers, ask: Ask | None,
         tell: Callable[[str], None] | None = None) -> ScaffoldAnswers:
    """Fill what the flags left open by asking, in seed 003's order. ``ask=None``: defaults.

    Each answer is checked as it is given; a wrong one is explained through ``tell`` and
    the question asked again."""

    def get(question: str, default: str, check: Check | None = None) -> str:
        if ask is None:
            return default
        while True:
            answer = ask(question, default)
            problem = check(answer) if check else None
            if problem is None:
                return answer
            if tell is not None:
                tell(f"{answer!r}: {problem}")

    if not answers.anchor:  # 1. anchor
        keys = get("1. Anchor: scope keys, tenant key first (comma-separated)", "tenant_id",
                   _names("scope key"))
        answers.anchor = _items(keys)
    if not answers.tiers:  # 2-3. typology and tiers
        tenant = answers.anchor[0]
        count = int(get("2-3. How many tiers (the last one persists)?", "2", _count))
        for index in range(count):
            top = index == count - 1
            name = get(f"   tier {index + 1} name", "long_term" if top else f"session{index or ''}",
                       _names("tier name")).strip()
            boundary = get(f"   tier '{name}' boundary (lifecycle=<event> or scope_change=<key>)",
                           f"scope_change={tenant}" if top else "lifecycle=session_end",
                           _boundary(answers.anchor)).strip()
            kinds = get(f"   tier '{name}' typology (episodic, semantic, procedural, opinion)",
                        "episodic,semantic,procedural" if top else "episodic",
                        _one_of("typology", _KINDS, many=True))
            answers.tiers.append(parse_tier(f"{name}:{boundary}:{','.join(_items(kinds))}"
                                            + (":persistent" if top else "")))
    if not answers.prefix:  # 4. persistence
        answers.store_schema = get("4. Store schema for memory tables", answers.store_schema,
                                   _names("schema name")).strip()
        answers.prefix = get("   Table prefix", answers.agent, _names("table prefix")).strip()
    if ask:  # 5. retrieval
        signals = get(f"5. Retrieval signals ({', '.join(SIGNALS)})", ",".join(answers.signals),
                      _one_of("signal", tuple(SIGNALS), many=True))
        answers.signals = _items(signals)
        # 6. behavioural primitives: the scaffold accepts every typology default.
        get("6. Behavioural primitives follow the typology defaults; deviations are added later "
            "with a justification. Press enter", "ok")
        mirrors = get("7. Non-mirror list: canonical state the memory must never copy", "",
                      _names("category", empty=True))
        answers.non_mirror = _items(mirrors)
        answers.cross_context = get("   Cross-context reads (none, event_driven, tool_mediated)",
                                    answers.cross_context,
                                    _one_of("cross-context mode", _CROSS_CONTEXT,
                                            many=False)).strip()
        get("8. Audit posture: universal default (no hard delete of persistent or action-linked "
            "memory). Press enter", "ok")
    return answers


def render_spec(answers: ScaffoldAnswers, schema: str = SCHEMA_FILE) -> str:
    """YAML text of the scaffolded spec; validated by the loader before it is returned. Its
    first line points editors (yaml-language-server) at the JSON Schema file ``schema``."""
    doc = {
        "version": 1,
        "agent": answers.agent,
        "anchor": {"keys": answers.anchor, "required_at_write": answers.anchor[:1],
                   "nullable_for_cross_scope": answers.anchor[1:]},
        "typology": {t.name: list(t.typology) for t in answers.tiers},
        "tiers": [
            {"name": t.name, "boundary": {t.boundary[0]: t.boundary[1]},
             **({"persistent": True} if t.persistent else {})}
            for t in answers.tiers
        ],
        "persistence": {"checkpointer": {"schema": answers.checkpointer_schema},
                        "store": {"schema": answers.store_schema,
                                  "prefix": answers.prefix or answers.agent}},
        "retrieval": {"signals": answers.signals, "fusion": {"method": "rrf", "k": answers.rrf_k}},
        "behavior": {},
        "discipline": {"non_mirror": answers.non_mirror,
                       "visibility": {"rls": "session_var",
                                      "cross_context": answers.cross_context}},
        "audit": "default",
    }
    headers = {
        "anchor": "1. anchor: the scope tuple; the first key is the tenant (RLS) key",
        "typology": "2. typology mix per tier",
        "tiers": "3. tiers: count, names, boundaries; the last one persists",
        "persistence": "4. checkpointer / store split",
        "retrieval": "5. signals fused by reciprocal rank fusion",
        "behavior": "6-12. typology defaults apply; a deviation needs `justification:`",
        "discipline": "13-15. non-mirror list, sanitization gates, visibility",
        "audit": "16. universal audit posture",
    }
    lines = [f"# yaml-language-server: $schema={schema}",
             f"# Agent memory spec for '{answers.agent}', scaffolded by `primitives init`."]
    for key, value in doc.items():
        if key in headers:
            lines.append(f"\n# {headers[key]}")
        block = yaml.safe_dump({key: value}, sort_keys=False, default_flow_style=False)
        lines.append(block.rstrip())
    text = "\n".join(lines) + "\n"
    load_spec_text(text, file=f"agents/{answers.agent}.yaml", policies={})
    return text
