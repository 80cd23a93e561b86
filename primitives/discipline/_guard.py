"""The PII guard of a spec: which writes are scanned, and what a scan does to a write.

``discipline.pii.before`` names the checkpoints:

- ``persistent_write``: every write into a persistent tier, and every write into a tier
  whose rows a promotion rule carries (directly or up a chain) into a persistent tier:
  promotions are set-based statements, so what they will carry is scanned when it is
  written;
- ``promotion``: the tiers whose rows a promotion rule carries anywhere;
- ``any_write``: every write.

A scan reads the content, and every string inside value and envelope. What it finds is
redacted (a placeholder in the text, its sha256 in ``provenance.pii`` when the policy keeps
hashes) or, for a kind the policy blocks, refused with :class:`~primitives.errors.
PrivacyBlocked`. The labels of a write (key, namespace, tags, source, scope id) are names
the engine matches on: a label holding personal data is refused, whatever the action.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from primitives.discipline._pii import PiiDetector, PiiFinding, pii_detector, placeholder
from primitives.errors import PrivacyBlocked
from primitives.spec import AgentSpec, PiiPolicy

__all__ = ["PiiGuard", "PiiScan", "pii_guard"]


@dataclass(frozen=True)
class PiiScan:
    """What a scan found in one write, and the write's fields with it redacted."""

    content: str
    value: dict[str, Any]
    envelope: dict[str, Any]
    raw: tuple[str, dict[str, Any], dict[str, Any]]
    """The fields as the caller gave them (kept only with consent)."""
    findings: tuple[dict[str, Any], ...]
    """One entry per value found: ``field`` (``content``, ``value.<path>``,
    ``envelope.<path>``), ``kind``, ``start``, ``end`` and, when the policy keeps hashes,
    ``sha256`` of the value."""

    @property
    def kinds(self) -> dict[str, int]:
        """How many values of each kind were found."""
        counts: dict[str, int] = {}
        for finding in self.findings:
            counts[finding["kind"]] = counts.get(finding["kind"], 0) + 1
        return dict(sorted(counts.items()))

    def provenance(self) -> dict[str, Any]:
        """What the row's provenance records: ``{"pii": [...findings]}``."""
        return {"pii": list(self.findings)}


def _promotion_sources(spec: AgentSpec, *, into_persistent: bool) -> set[str]:
    """Tiers whose rows a promotion carries; with ``into_persistent``, the persistent tiers
    and those whose rows a chain of promotions carries into one."""
    edges = [(rule.from_.split(".")[0], rule.to.split(".")[0]) for rule in spec.behavior.promotion]
    if not into_persistent:
        return {source for source, _ in edges}
    reaching = {tier.name for tier in spec.tiers if tier.persistent}
    changed = True
    while changed:
        changed = False
        for source, target in edges:
            if target in reaching and source not in reaching:
                reaching.add(source)
                changed = True
    return reaching


class PiiGuard:
    """A spec's PII policy, ready to scan writes (build with :func:`pii_guard`)."""

    def __init__(self, spec: AgentSpec) -> None:
        assert spec.discipline.pii is not None
        self.agent = spec.agent
        self.policy_name = spec.discipline.pii.policy
        policy = spec.policies[self.policy_name]
        assert isinstance(policy, PiiPolicy)
        self.policy: PiiPolicy = policy
        checkpoints = set(spec.discipline.pii.before)
        if "any_write" in checkpoints:
            tiers = set(spec.tier_names)
        else:
            tiers = set()
            if "persistent_write" in checkpoints:
                tiers |= _promotion_sources(spec, into_persistent=True)
            if "promotion" in checkpoints:
                tiers |= _promotion_sources(spec, into_persistent=False)
        self.tiers = frozenset(tiers)
        self.detector: PiiDetector = pii_detector(tuple(policy.detectors),
                                                  tuple(policy.phone_regions))

    def applies(self, tier: str) -> bool:
        """Whether writes into ``tier`` are scanned."""
        return tier in self.tiers

    def _refuse(self, kinds: Sequence[str], field: str) -> PrivacyBlocked:
        return PrivacyBlocked(self.policy.refusal_message, kinds=sorted(set(kinds)), field=field,
                              policy=self.policy_name, agent=self.agent,
                              user_message=self.policy.refusal_message)

    def check_labels(self, labels: Mapping[str, str | Sequence[str] | None]) -> None:
        """Refuse a label (key, namespace, tags, source, scope id) holding personal data."""
        for field, label in labels.items():
            if label is None:
                continue
            for text in ([label] if isinstance(label, str) else label):
                found = self.detector.find(text)
                if found:
                    raise PrivacyBlocked(
                        f"{self.policy.refusal_message} (the write's {field} holds "
                        f"{', '.join(sorted({f.kind for f in found}))}: labels are matched "
                        "on and cannot be redacted; put the detail in the content)",
                        kinds=sorted({f.kind for f in found}), field=field,
                        policy=self.policy_name, agent=self.agent,
                        user_message=self.policy.refusal_message)

    def scan(self, content: str, value: dict[str, Any],
             envelope: dict[str, Any]) -> PiiScan | None:
        """Redact ``content`` and the strings of ``value`` and ``envelope``; ``None`` when
        nothing was found. A kind the policy blocks raises :class:`PrivacyBlocked`."""
        findings: list[dict[str, Any]] = []
        redacted_content = self._text(content, "content", findings)
        redacted_value = self._json(value, "value", findings)
        redacted_envelope = self._json(envelope, "envelope", findings)
        if not findings:
            return None
        return PiiScan(redacted_content, redacted_value, redacted_envelope,
                       (content, value, envelope), tuple(findings))

    def _text(self, text: str, field: str, findings: list[dict[str, Any]]) -> str:
        found = self.detector.find(text)
        if not found:
            return text
        blocked = [f.kind for f in found if self.policy.action(f.kind) == "block"]
        if blocked:
            raise self._refuse(blocked, field)
        findings.extend(self._entry(field, text, f) for f in found)
        parts, at = [], 0
        for finding in found:
            parts += [text[at:finding.start], placeholder(finding.kind)]
            at = finding.end
        parts.append(text[at:])
        return "".join(parts)

    def _entry(self, field: str, text: str, finding: PiiFinding) -> dict[str, Any]:
        entry: dict[str, Any] = {"field": field, "kind": finding.kind, "start": finding.start,
                                 "end": finding.end}
        if self.policy.store_hash:
            entry["sha256"] = hashlib.sha256(
                text[finding.start:finding.end].encode("utf-8")).hexdigest()
        return entry

    def _json(self, value: Any, path: str, findings: list[dict[str, Any]]) -> Any:
        if isinstance(value, str):
            return self._text(value, path, findings)
        if isinstance(value, dict):
            return {k: self._json(v, f"{path}.{k}", findings) for k, v in value.items()}
        if isinstance(value, list):
            return [self._json(v, f"{path}[{i}]", findings) for i, v in enumerate(value)]
        return value


def pii_guard(spec: AgentSpec) -> PiiGuard | None:
    """The spec's guard (built once per spec object), or ``None`` without a PII policy."""
    if spec.discipline.pii is None:
        return None
    guard = spec._pii_guard
    if guard is None:
        guard = spec._pii_guard = PiiGuard(spec)
    assert isinstance(guard, PiiGuard)
    return guard
