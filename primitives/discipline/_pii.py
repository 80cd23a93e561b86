"""PII detection: the maintained pattern recognizers of presidio-analyzer, run offline.

Each kind a policy can name (``PII_KINDS``) maps to one or more recognizers: regular
expressions with validation (the credit-card checksum, IBAN check digits, an email's
top-level domain checked against the public-suffix snapshot the ``tldextract`` package ships,
never fetched), plus this project's patterns for secrets (API keys and tokens by their
published prefixes, private-key blocks). No NLP model is loaded.

Two things keep a scan cheap enough for the write path:

- a *gate* per kind: a plain regular expression that any match of the kind must contain
  (``@`` for an email, seven digits for a phone number, ...); text without it is not handed
  to the kind's recognizers, so most text costs a few scans for characters;
- *windows*: a recognizer reads only the text around each gate hit, not the whole text.

Kinds whose pattern alone says little (a passport number is nine digits) count only with
one of their context words (``passport``) within ``CONTEXT_CHARS`` before the match.

>>> detector = pii_detector(("email", "credit_card"))
>>> [f.kind for f in detector.find("card 4111 1111 1111 1111, mail jo@example.com")]
['credit_card', 'email']
>>> detector.redact("mail jo@example.com").text
'mail [email redacted]'
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from primitives.errors import PrimitivesError

__all__ = ["CONTEXT_BOOST", "CONTEXT_CHARS", "PII_KINDS", "PiiDetector", "PiiFinding", "Redaction",
           "pii_detector", "placeholder"]

CONTEXT_CHARS = 48
"""How far before a match a context word counts, for kinds that need one."""

CONTEXT_BOOST = 0.4
"""Added to the score of a match of a kind that needs context, when its context is there."""

_WINDOW = 64
"""Characters a recognizer reads on each side of a gate hit (extended to whitespace)."""


@dataclass(frozen=True)
class PiiFinding:
    """One detected value: its kind, where it is in the text, the recognizer's score."""

    kind: str
    start: int
    end: int
    score: float


@dataclass(frozen=True)
class Redaction:
    """A text with every finding replaced by :func:`placeholder`, and the findings (their
    positions are in the original text)."""

    text: str
    findings: tuple[PiiFinding, ...]


def placeholder(kind: str) -> str:
    """What replaces a value of ``kind``: ``[email redacted]``."""
    return f"[{kind.replace('_', ' ')} redacted]"


_DIGIT_RUN = re.compile(r"\d[\d ().\-/]{5,}\d")
"""A run of seven characters or more of digits and the separators numbers are written with:
every number-shaped kind (phone, card, SSN, ITIN, NHS number) lies inside one, so their gates
read these runs instead of the whole text."""


@dataclass(frozen=True)
class _Kind:
    gate: re.Pattern[str] | None
    """Matched against the whole text (None: the kind has only a ``run_gate``)."""
    recognizers: Callable[[], list[Any]]
    context: tuple[str, ...] = ()
    """Context words one of which must precede a match (empty: the match stands alone)."""
    keep: Callable[[str], bool] | None = None
    """Which gate hits count (None: all)."""
    literals: tuple[str, ...] = ()
    """Substrings one of which any match contains (lower-cased text is searched when they
    are lower case): a plain substring search rules most text out before the gate runs."""
    run_gate: re.Pattern[str] | None = None
    """Matched against each digit run (:data:`_DIGIT_RUN`) only."""

    def hits(self, text: str, lowered: str,
             runs: list[tuple[int, str]]) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        if self.gate is not None:
            haystack = lowered if self.literals and self.literals[0].islower() else text
            if not self.literals or any(literal in haystack for literal in self.literals):
                found += [m.span() for m in self.gate.finditer(text)
                          if self.keep is None or self.keep(m.group())]
        if self.run_gate is not None:
            for at, run in runs:
                found += [(at + m.start(), at + m.end()) for m in self.run_gate.finditer(run)
                          if self.keep is None or self.keep(m.group())]
        return sorted(found)


_DATE = re.compile(r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}")


def _phone_like(run: str) -> bool:
    """Seven digits or more, and not a calendar date."""
    return sum(c.isdigit() for c in run) >= 7 and _DATE.fullmatch(run.strip()) is None


def _predefined(*names: str) -> Callable[[], list[Any]]:
    def build() -> list[Any]:
        from presidio_analyzer import predefined_recognizers as pr
        return [getattr(pr, name)() for name in names]
    return build


def _email() -> list[Any]:
    from presidio_analyzer.predefined_recognizers import EmailRecognizer

    class OfflineEmail(EmailRecognizer):
        """The top-level domain checked against the bundled public-suffix snapshot."""

        def validate_result(self, pattern_text: str) -> bool:
            return bool(_suffixes()(pattern_text).fqdn)

    return [OfflineEmail()]


@cache
def _suffixes() -> Any:
    import tldextract
    # no URL to fetch, no cache folder: the snapshot inside the package, read once
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


_SECRET_PATTERNS = (
    ("aws access key id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("github token", r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b"),
    ("gitlab token", r"\bglpat-[A-Za-z0-9_\-]{20,}\b"),
    ("slack token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}\b"),
    ("stripe key", r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}\b"),
    ("google api key", r"\bAIza[0-9A-Za-z_\-]{35}\b"),
    ("sk- api key", r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_\-]{20,}\b"),
    ("json web token", r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    ("private key block", r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----"),
)


def _secret() -> list[Any]:
    from presidio_analyzer import Pattern, PatternRecognizer
    return [PatternRecognizer(
        supported_entity="SECRET", name="SecretRecognizer",
        patterns=[Pattern(name, regex, 0.9) for name, regex in _SECRET_PATTERNS])]



_KINDS: dict[str, _Kind] = {
    "email": _Kind(re.compile("@"), _email, literals=("@",)),
    "phone": _Kind(None, _predefined("PhoneRecognizer"), keep=_phone_like,
                   run_gate=re.compile(r".+", re.DOTALL)),
    "credit_card": _Kind(None, _predefined("CreditCardRecognizer"),
                         keep=lambda run: sum(c.isdigit() for c in run) >= 13,
                         run_gate=re.compile(r"\d[\d -]{11,}\d")),
    "iban": _Kind(re.compile(r"[A-Z]{2}\d{2}"), _predefined("IbanRecognizer")),
    "us_itin": _Kind(None, _predefined("UsItinRecognizer"),
                     run_gate=re.compile(r"9\d{2}[- ]?[5-9]\d[- ]?\d{4}")),
    "ssn": _Kind(None, _predefined("UsSsnRecognizer"),
                 run_gate=re.compile(r"\d{3}[- .]?\d{2}[- .]?\d{4}")),
    "ip_address": _Kind(re.compile(r"[.:](?:(?<=\.)\d{1,3}\.\d{1,3}\.\d"
                                   r"|(?<=:)(?:[0-9A-Fa-f]{0,4}:){2}|(?<=:):)"),
                        _predefined("IpRecognizer")),
    "passport": _Kind(re.compile(r"(?i:passport)"),
                      _predefined("UsPassportRecognizer", "UkPassportRecognizer"),
                      context=("passport",), literals=("passport",)),
    "national_id": _Kind(re.compile(r"[A-Z]{2}\s?\d{2}\s?\d{2}\s?\d{2}\s?[A-D]"),
                         _predefined("NhsRecognizer", "UkNinoRecognizer"),
                         run_gate=re.compile(r"\d{3}\s?\d{3}\s?\d{4}")),
    "driver_license": _Kind(re.compile(r"(?i:licen[cs]e)"),
                            _predefined("UsLicenseRecognizer", "UkDrivingLicenceRecognizer"),
                            context=("license", "licence", "driver", "driving"),
                            literals=("licen",)),
    "crypto_wallet": _Kind(re.compile(r"[13][a-km-zA-HJ-NP-Z1-9]{25}|bc1[a-z0-9]{20}"),
                           _predefined("CryptoRecognizer")),
    "secret": _Kind(re.compile(r"AKIA|ASIA|gh[pousr]_|glpat-|xox[abposr]-|[rs]k_(?:live|test)_"
                               r"|AIza|sk-|eyJ|PRIVATE KEY"), _secret,
                    literals=("AKIA", "ASIA", "gh", "glpat-", "xox", "k_live_", "k_test_",
                              "AIza", "sk-", "eyJ", "PRIVATE KEY")),
}

PII_KINDS: tuple[str, ...] = tuple(_KINDS)
"""Every kind a PII policy can name in ``detectors``."""


def _silence() -> None:
    # presidio logs each recognizer it builds; a write path logs nothing of the text
    logging.getLogger("presidio-analyzer").setLevel(logging.ERROR)


def _windows(text: str, hits: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Merged spans of ``text`` around each gate hit, extended to whitespace."""
    spans: list[tuple[int, int]] = []
    for hit_start, hit_end in hits:
        start, end = max(0, hit_start - _WINDOW), min(len(text), hit_end + _WINDOW)
        while start > 0 and not text[start - 1].isspace():
            start -= 1
        while end < len(text) and not text[end].isspace():
            end += 1
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
        else:
            spans.append((start, end))
    return spans


class PiiDetector:
    """Finds the values of ``kinds`` in text (see the module docstring). Build it with
    :func:`pii_detector`, which shares one detector per set of kinds."""

    def __init__(self, kinds: Sequence[str], min_score: float = 0.3,
                 phone_regions: Sequence[str] = ()) -> None:
        unknown = sorted(set(kinds) - set(_KINDS))
        if unknown:
            raise ValueError(f"unknown PII kind(s) {', '.join(unknown)}; known: "
                             f"{', '.join(PII_KINDS)}")
        try:
            import presidio_analyzer  # noqa: F401
        except ImportError as err:
            raise PrimitivesError(
                "a PII policy needs presidio-analyzer: pip install "
                "'agent-memory-primitives[pii]'") from err
        _silence()
        self.kinds = tuple(dict.fromkeys(kinds))
        self.min_score = min_score
        self.phone_regions = tuple(phone_regions)
        self._kinds = [(name, _KINDS[name], _KINDS[name].recognizers())
                       for name in self.kinds]
        if self.phone_regions:
            # each region is a pass of the phone-number matcher: fewer, faster scans
            from presidio_analyzer.predefined_recognizers import PhoneRecognizer
            self._kinds = [
                (name, kind, [PhoneRecognizer(supported_regions=self.phone_regions)]
                 if name == "phone" else recognizers)
                for name, kind, recognizers in self._kinds]

    def find(self, text: str) -> list[PiiFinding]:
        """Every value of the detector's kinds in ``text``, in order of position; where two
        overlap, the longer (then the higher-scoring) one."""
        found: list[PiiFinding] = []
        lowered = text.lower()
        runs = [(m.start(), m.group()) for m in _DIGIT_RUN.finditer(text)]
        for name, kind, recognizers in self._kinds:
            hits = kind.hits(text, lowered, runs)
            if not hits:
                continue
            for start, end in _windows(text, hits):
                window = text[start:end]
                for recognizer in recognizers:
                    results = recognizer.analyze(window, recognizer.supported_entities, None)
                    for result in results or ():
                        at, to = start + result.start, start + result.end
                        score = float(result.score)
                        if kind.context:
                            if not _has_context(text, at, kind.context):
                                continue
                            score = min(1.0, score + CONTEXT_BOOST)
                        if score >= self.min_score:
                            found.append(PiiFinding(name, at, to, round(score, 2)))
        return _without_overlaps(found)

    def redact(self, text: str) -> Redaction:
        """``text`` with each finding replaced by its :func:`placeholder`."""
        findings = self.find(text)
        if not findings:
            return Redaction(text, ())
        parts, at = [], 0
        for finding in findings:
            parts.append(text[at:finding.start])
            parts.append(placeholder(finding.kind))
            at = finding.end
        parts.append(text[at:])
        return Redaction("".join(parts), tuple(findings))


def _has_context(text: str, at: int, words: Iterable[str]) -> bool:
    before = text[max(0, at - CONTEXT_CHARS):at].lower()
    return any(word in before for word in words)


def _without_overlaps(found: list[PiiFinding]) -> list[PiiFinding]:
    """The longest, then the highest-scoring, then the most specific kind (the order of
    ``_KINDS``: an ITIN before an SSN of the same digits) of each overlapping group."""
    order = {name: i for i, name in enumerate(_KINDS)}
    ranked = sorted(found, key=lambda f: (-(f.end - f.start), -f.score, order[f.kind],
                                          f.start))
    kept: list[PiiFinding] = []
    for finding in ranked:
        if all(finding.end <= k.start or finding.start >= k.end for k in kept):
            kept.append(finding)
    return sorted(kept, key=lambda f: f.start)


@cache
def pii_detector(kinds: tuple[str, ...], phone_regions: tuple[str, ...] = ()) -> PiiDetector:
    """The shared detector of ``kinds`` (built once: building loads the recognizers); phone
    numbers are matched in ``phone_regions`` (default: the recognizer's eight)."""
    return PiiDetector(kinds, phone_regions=phone_regions)
