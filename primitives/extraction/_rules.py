"""The deterministic default extractor: alias dictionary, proper-noun spans, a few patterns.

No model, no network: the same episodes always give the same decisions, so replay and CI
need nothing but Python. What it recognises (each sentence on its own):

==============================================  ===========  ==============================
pattern                                         typology     key
==============================================  ===========  ==============================
``X works at Y`` / ``I work for Y``             semantic     ``<x>:works_at``
``X no longer works at Y``                      (DELETE)     ``<x>:works_at`` if it names Y
``my N is V``                                   semantic     ``user:<n>``
``I prefer / like / love / enjoy Z``            opinion      ``preference:<z>``
``I hate / dislike / can't stand Z``            opinion      ``preference:<z>``
``always / never <do something>``               procedural   ``procedure:<text>``
==============================================  ===========  ==============================

Causes: an episode that opens with a consequence connective (``so``, ``therefore``, ``as a
result``, ``because of that``, ``that's why``, ``hence``, ``consequently``) is inferred to be
the effect of the episode before it in the scope (``Extraction.causes``).

A key that an existing memory holds turns an ``ADD`` into ``UPDATE`` of it (or ``NOOP`` when
the text is the same); a typology the request does not allow is skipped (preferences fall
back to ``semantic``). Entity mentions come from the tenant's known names and aliases first,
then from runs of capitalised words, typed by their surroundings (``at Acme`` is an
organisation, ``in Lisbon`` a place, two capitalised words a person).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from uuid import UUID

from primitives.extraction._model import (
    Decision,
    EntityMention,
    Episode,
    ExistingMemory,
    Extraction,
    ExtractionRequest,
    KnownEntity,
)

__all__ = ["RuleBasedExtractor"]

_CONSEQUENCE = re.compile(
    r"\s*(?:so|therefore|as a result|because of (?:that|this)|that(?:'s| is) why|hence|"
    r"consequently)\b", re.IGNORECASE)
"""An episode opening like this is the effect of the one before it."""
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = r"[A-Z][\w'&.-]*[\w&]|[A-Z]"
_PROPER = re.compile(rf"\b(?:{_WORD})(?:\s+(?:of\s+|&\s+)?(?:{_WORD}))*")
_SUBJECT = r"(?P<who>I|[A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)?)"
_OBJECT = r"(?P<what>[^,.;!?]+?)"
_END = r"\s*(?:now|anymore|any more|these days)?\s*(?:[,.;!?]|$)"
_WORKS = re.compile(rf"\b{_SUBJECT}\s+(?:now\s+)?(?:work|works|worked|is working|am working)"
                    rf"\s+(?:at|for)\s+{_OBJECT}{_END}")
_LEFT = re.compile(rf"\b{_SUBJECT}\s+(?:no longer|(?:do|does)\s*(?:not|n't))\s+works?"
                   rf"\s+(?:at|for)\s+{_OBJECT}{_END}")
_MY = re.compile(rf"\bmy\s+(?P<name>[a-z][\w' -]{{0,40}}?)\s+is\s+{_OBJECT}{_END}",
                 re.IGNORECASE)
_LIKES = re.compile(rf"\bI\s+(?:really\s+)?(?P<verb>prefer|like|love|enjoy)\s+{_OBJECT}{_END}")
_HATES = re.compile(rf"\bI\s+(?:really\s+)?(?P<verb>hate|dislike|can't stand|cannot stand)"
                    rf"\s+{_OBJECT}{_END}")
_RULE = re.compile(r"\b(?P<verb>always|never)\s+(?P<what>[a-z][^.;!?]{3,}?)\s*(?:[.;!?]|$)",
                   re.IGNORECASE)

_STARTERS = frozenset("""
a an the i i'm i've i'd we you he she it they my our your his her their this that these
those there here what when where why who how if so but and or then yes no ok okay please
thanks also always never usually sometimes today tomorrow yesterday monday tuesday wednesday thursday friday saturday sunday
january february march april may june july august september october november december
""".split())
_ORG_SUFFIX = frozenset(("inc", "inc.", "corp", "corp.", "corporation", "ltd", "ltd.", "llc",
                         "gmbh", "labs", "systems", "technologies", "group", "bank", "company",
                         "co", "co.", "university", "institute", "foundation", "partners"))
_ORG_BEFORE = re.compile(r"\b(?:at|for|joined|join|with|hired by|acquired|client|customer)\s*$",
                         re.IGNORECASE)
_PLACE_BEFORE = re.compile(r"\b(?:in|from|to|visited|visit|near|moved to)\s*$", re.IGNORECASE)
_PERSON_BEFORE = re.compile(r"\b(?:met|meet|told|asked|called|emailed|and|with)\s*$",
                            re.IGNORECASE)


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().lower())


def _who(name: str) -> str:
    """A pattern's subject without a capitalised sentence opener ("Then Bob" is Bob)."""
    words = name.split()
    while len(words) > 1 and words[0].lower() in _STARTERS:
        words = words[1:]
    return " ".join(words)


class RuleBasedExtractor:
    """The default :class:`~primitives.extraction.Extractor`: deterministic patterns.

    ``confidence`` is what its decisions carry (seed 002 §12.1 gives extraction 0.8).

    >>> from uuid import uuid4
    >>> from primitives.extraction import Episode, ExtractionRequest
    >>> out = RuleBasedExtractor().extract(ExtractionRequest(
    ...     (Episode(uuid4(), "I work at Acme Corp."),), ("semantic", "opinion")))
    >>> [(d.action, d.key, d.content) for d in out.decisions]
    [('ADD', 'user:works_at', 'User works at Acme Corp.')]
    """

    name = "rule_based"

    def __init__(self, *, confidence: float = 0.8) -> None:
        if not 0 <= confidence <= 1:
            raise ValueError(f"confidence is between 0 and 1, got {confidence}")
        self.confidence = confidence

    # mentions -----------------------------------------------------------------------------------
    def mentions(self, text: str, entities: Iterable[KnownEntity],
                 types: tuple[str, ...]) -> list[EntityMention]:
        """The entities ``text`` names: known names and aliases (whole words, any case),
        then capitalised spans typed by their context (only ``types``; none when empty)."""
        if not types:
            return []
        found: list[EntityMention] = []
        taken: list[tuple[int, int]] = []
        names = sorted(((alias, e) for e in entities for alias in (e.name, *e.aliases)),
                       key=lambda pair: -len(pair[0]))
        for alias, known in names:
            for match in re.finditer(rf"(?<!\w){re.escape(alias)}(?!\w)", text, re.IGNORECASE):
                if any(a < match.end() and match.start() < b for a, b in taken):
                    continue
                taken.append(match.span())
                mention = EntityMention(known.name, known.type)
                if mention not in found:
                    found.append(mention)
        for match in _PROPER.finditer(text):
            start, end = match.span()
            if any(a < end and start < b for a, b in taken):
                continue
            words = match.group(0).split()
            while words and words[0].lower().rstrip(".,") in _STARTERS:
                start += len(words[0]) + 1
                words = words[1:]
            if not words:
                continue
            name = " ".join(words).rstrip(".")
            kind = self._kind(name, text[:start], types)
            if kind is None:
                continue
            mention = EntityMention(name, kind)
            if all(_norm(m.name) != _norm(name) for m in found):
                found.append(mention)
        return found

    @staticmethod
    def _kind(name: str, before: str, types: tuple[str, ...]) -> str | None:
        words = name.split()
        if words[-1].lower() in _ORG_SUFFIX or _ORG_BEFORE.search(before):
            kind = "organization"
        elif _PLACE_BEFORE.search(before):
            kind = "place"
        elif len(words) >= 2 or _PERSON_BEFORE.search(before):
            kind = "person"
        else:
            kind = "concept"
        if kind in types:
            return kind
        return "concept" if "concept" in types else None

    # decisions ----------------------------------------------------------------------------------
    def extract(self, request: ExtractionRequest) -> Extraction:
        """Decisions for the patterns the episodes hold, and each episode's mentions."""
        allowed = set(request.typologies)
        existing = {m.key: m for m in request.existing}
        types = request.entity_types
        decisions: dict[str, Decision] = {}  # by key: a later statement wins
        mentions: list[tuple[UUID, EntityMention]] = []
        for episode in request.episodes:
            typed: dict[str, EntityMention] = {}  # what a pattern says an entity is wins
            for sentence in _SENTENCE.split(episode.content):
                for key, decision in self._sentence(sentence.strip(), episode, allowed,
                                                    request.entities, types):
                    decisions.pop(key, None)
                    decisions[key] = decision
                    typed.update((_norm(e.name), e) for e in decision.entities)
            seen: list[EntityMention] = []
            for mention in self.mentions(episode.content, request.entities, types):
                mention = typed.get(_norm(mention.name), mention)
                if mention not in seen:
                    seen.append(mention)
                    mentions.append((episode.id, mention))
        # one name, one entity: the first type other than the catch-all wins everywhere
        kinds: dict[str, str] = {}
        for _, mention in mentions:
            if kinds.get(_norm(mention.name), "concept") == "concept":
                kinds[_norm(mention.name)] = mention.type
        unified: list[tuple[UUID, EntityMention]] = []
        for episode_id, mention in mentions:
            one = (episode_id, EntityMention(mention.name, kinds[_norm(mention.name)]))
            if one not in unified:
                unified.append(one)
        resolved = [self._against(d, existing.get(key)) for key, d in decisions.items()]
        causes = tuple((before.id, after.id) for before, after
                       in itertools.pairwise(request.episodes)
                       if _CONSEQUENCE.match(after.content))
        return Extraction(tuple(d for d in resolved if d is not None), tuple(unified), causes)

    def _sentence(self, text: str, episode: Episode, allowed: set[str],
                  known: tuple[KnownEntity, ...], types: tuple[str, ...],
                  ) -> Iterable[tuple[str, Decision]]:
        def entities(*spans: tuple[str, str]) -> tuple[EntityMention, ...]:
            if not types:
                return ()
            out: list[EntityMention] = []
            for name, kind in spans:
                same = [e for e in known if _norm(name) in map(_norm, (e.name, *e.aliases))]
                if same:
                    out.append(EntityMention(same[0].name, same[0].type))
                elif kind in types or "concept" in types:
                    out.append(EntityMention(name, kind if kind in types else "concept"))
            return tuple(out)

        def decision(typology: str, key: str, content: str,
                     ents: tuple[EntityMention, ...] = ()) -> tuple[str, Decision]:
            return key, Decision("ADD", typology, content, key, confidence=self.confidence,
                                 entities=ents, evidence=(episode.id,))

        semantic = "semantic" in allowed
        left = _LEFT.search(text)
        if left and semantic:
            who, what = _who(left["who"]), left["what"].strip()
            subject = "user" if who == "I" else _norm(who)
            yield f"{subject}:works_at", Decision(
                "DELETE", "semantic", what, f"{subject}:works_at",
                confidence=self.confidence, evidence=(episode.id,))
        elif (works := _WORKS.search(text)) and semantic:
            who, what = _who(works["who"]), works["what"].strip()
            person = () if who == "I" else ((who, "person"),)
            yield decision("semantic", f"{'user' if who == 'I' else _norm(who)}:works_at",
                           f"{'User' if who == 'I' else who} works at {what}.",
                           entities(*person, (what, "organization")))
        for mine in _MY.finditer(text):
            if semantic:
                name, value = _norm(mine["name"]), mine["what"].strip()
                yield decision("semantic", f"user:{name}", f"User's {name} is {value}.")
        for pattern, verb in ((_LIKES, "likes"), (_HATES, "dislikes")):
            for liked in pattern.finditer(text):
                what = liked["what"].strip()
                typology = "opinion" if "opinion" in allowed else (
                    "semantic" if semantic else None)
                if typology is not None:
                    said = "prefers" if liked["verb"] == "prefer" else verb
                    yield decision(typology, f"preference:{_norm(what)}",
                                   f"User {said} {what}.")
        if "procedural" in allowed:
            for rule in _RULE.finditer(text):
                what = rule["what"].strip()
                yield decision("procedural", f"procedure:{_norm(rule['verb'] + ' ' + what)}",
                               f"{rule['verb'].capitalize()} {what}.")

    @staticmethod
    def _against(decision: Decision, current: ExistingMemory | None) -> Decision | None:
        """The decision once compared with the memory holding its key, if any."""
        if decision.action == "DELETE":
            if current is None or _norm(decision.content) not in _norm(current.content):
                return None  # nothing to retract, or it names another employer
            return Decision("DELETE", current.typology, "", current.key, current.id,
                            decision.confidence, evidence=decision.evidence)
        if current is None:
            return decision
        if _norm(current.content) == _norm(decision.content):
            return Decision("NOOP", current.typology, decision.content, current.key,
                            current.id, decision.confidence, evidence=decision.evidence)
        return Decision("UPDATE", current.typology, decision.content, current.key, current.id,
                        decision.confidence, decision.entities, decision.evidence)
