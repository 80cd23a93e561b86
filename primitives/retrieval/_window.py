"""The time window of a "when" question (seed 002 §11.2: temporal queries follow the
timeline): the span of event time the question names, read from its words.

Rule-based, in the languages of the labelled intent set (``tests/data/intent_questions.tsv``:
English, French, German, Spanish, Italian, Portuguese). In each language it reads:

- a day: ``today``, ``yesterday``, ``the day before yesterday``, ``last Monday``, an ISO date
  (``2026-02-23``); ``N days ago``;
- a calendar week, month or year: ``this/last week|month|year``, ``N weeks|months|years
  ago`` (weeks start on Monday);
- a month: ``in March [2026]`` (without a year, the latest March that has begun);
- an open span up to now: ``in the last N days|weeks|months``, and ``since`` before any of
  the above or before a weekday or month name (``since Monday``: from the latest Monday
  before today; ``since March``).

Numbers are digits or the words for one to ten. A bare weekday (``on Monday``) names no
window: it may be the last one or the next one. The language is chosen from the question's
common words; a phrase of another language is not read (``hier`` is French "yesterday" but
German "here"), and a question whose readings disagree has no window. A question naming no
phrase has none; a caller can always pass one.

>>> from datetime import datetime, UTC
>>> now = datetime(2026, 2, 25, 15, 0, tzinfo=UTC)
>>> [d.date().isoformat() for d in time_window("what happened yesterday?", now)]
['2026-02-24', '2026-02-25']
>>> [d.date().isoformat() for d in time_window("¿qué pasó la semana pasada?", now)]
['2026-02-16', '2026-02-23']
>>> time_window("when did we talk about it?", now) is None
True
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

__all__ = ["LANGUAGES", "Window", "time_window"]

Window = tuple[datetime | None, datetime | None]
"""``(since, until)``: event times ``since <= t < until``; either end may be open (None)."""

Unit = str  # "day" | "week" | "month" | "year"
_LAST_N_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}


@dataclass(frozen=True)
class _Language:
    """One language's phrases, written lower-case without accents (the question is folded
    the same way). Patterns with ``{n}`` / ``{unit}`` / ``{day}`` / ``{month}`` take the
    language's numbers, units, weekdays and months."""

    common: frozenset[str]
    """Frequent words that tell the question's language."""
    numbers: dict[str, int]
    units: dict[str, Unit]
    """Unit word (any inflection) to unit."""
    months: tuple[str, ...]
    """Twelve patterns, January first."""
    weekdays: tuple[str, ...]
    """Seven patterns, Monday first."""
    today: str
    yesterday: str
    day_before: str
    this: str
    """``this <unit>``: group ``unit``."""
    last: str
    """``last <unit>``: group ``unit``."""
    ago: str
    """``N units ago``: groups ``n``, ``unit``."""
    last_n: str
    """``in the last N units``: groups ``n``, ``unit``."""
    month_lead: str
    """What comes before a month name that names the month (``in``)."""
    last_day: str
    """``last <weekday>``: group ``day``."""
    since: str
    """The word(s) for ``since`` (before a point in time)."""


def _alt(words: object) -> str:
    return "|".join(sorted(words, key=lambda w: -len(str(w))))  # type: ignore[call-overload]


LANGUAGES: dict[str, _Language] = {
    "en": _Language(
        common=frozenset("the a an what when did do does we i you is was were it about of to my "
                         "our how who why with have has happened since ago last this in on and"
                         .split()),
        numbers={"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
                 "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10},
        units={"days?": "day", "weeks?": "week", "months?": "month", "years?": "year"},
        months=("january", "february", "march", "april", "may", "june", "july", "august",
                "september", "october", "november", "december"),
        weekdays=("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"),
        today=r"today", yesterday=r"yesterday", day_before=r"the day before yesterday",
        this=r"this (?P<unit>week|month|year)", last=r"last (?P<unit>week|month|year)",
        ago=r"(?P<n>{n}) (?P<unit>{unit}) ago",
        last_n=r"(?:the )?(?:last|past) (?P<n>{n}) (?P<unit>{unit})",
        month_lead=r"in|during", last_day=r"last (?P<day>{day})", since=r"(?:ever )?since"),
    "fr": _Language(
        common=frozenset("le la les l de des du un une et est que qu quoi quand qui nous vous je "
                         "j avons ai a il y s ce cette depuis dernier derniere en avec pour "
                         "pourquoi comment ou se passe".split()),
        numbers={"un": 1, "une": 1, "deux": 2, "trois": 3, "quatre": 4, "cinq": 5, "six": 6,
                 "sept": 7, "huit": 8, "neuf": 9, "dix": 10},
        units={"jours?": "day", "semaines?": "week", "mois": "month", "ans?": "year",
               "annees?": "year"},
        months=("janvier", "fevrier", "mars", "avril", "mai", "juin", "juillet", "aout",
                "septembre", "octobre", "novembre", "decembre"),
        weekdays=("lundi", "mardi", "mercredi", "jeudi", "vendredi", "samedi", "dimanche"),
        today=r"aujourd'hui", yesterday=r"hier", day_before=r"avant-hier|avant hier",
        this=r"(?:cette (?P<unit>semaine|annee)|ce (?P<unit2>mois)(?:-ci)?)",
        last=r"(?:(?:la |l')?(?P<unit>semaine|annee) (?:derniere|passee)"
             r"|(?:le |l')?(?P<unit2>mois|an) (?:dernier|passe))",
        ago=r"il y a (?P<n>{n}) (?P<unit>{unit})",
        last_n=r"(?:les|ces|des) (?P<n>{n}) (?:derniers|dernieres) (?P<unit>{unit})"
               r"|depuis (?P<n2>{n}) (?P<unit2>{unit})",
        month_lead=r"en|au mois de|durant|pendant", last_day=r"(?P<day>{day}) dernier",
        since=r"depuis(?: le)?"),
    "de": _Language(
        common=frozenset("der die das den dem des und ist was wann wer wir ich haben hat habe "
                         "im am seit letzte letzten letztes vor mit warum wie uber zuletzt "
                         "es ein eine passiert".split()),
        numbers={"ein": 1, "eine": 1, "einem": 1, "einer": 1, "einen": 1, "zwei": 2,
                 "drei": 3, "vier": 4, "funf": 5, "sechs": 6, "sieben": 7, "acht": 8,
                 "neun": 9, "zehn": 10},
        units={"tag(?:e|en)?": "day", "wochen?": "week", "monat(?:e|en)?": "month",
               "jahr(?:e|en)?": "year"},
        months=("januar", "februar", "marz", "april", "mai", "juni", "juli", "august",
                "september", "oktober", "november", "dezember"),
        weekdays=("montag", "dienstag", "mittwoch", "donnerstag", "freitag",
                  "samstag|sonnabend", "sonntag"),
        today=r"heute", yesterday=r"gestern", day_before=r"vorgestern",
        this=r"(?:in )?(?:diese|diesen|dieses|dieser|diesem) (?P<unit>woche|monat|jahr)",
        last=r"(?:letzte|letzten|letztes|letzter|letztem|vergangene|vergangenen|vergangenes"
             r"|vergangenem|vorige|vorigen|voriges) (?P<unit>woche|monat|jahr)",
        ago=r"vor (?P<n>{n}) (?P<unit>{unit})",
        last_n=r"(?:letzten|vergangenen) (?P<n>{n}) (?P<unit>{unit})"
               r"|seit (?P<n2>{n}) (?P<unit2>{unit})",
        month_lead=r"im|in|wahrend des", last_day=r"(?:letzten|letzter|vergangenen) (?P<day>{day})",
        since=r"seit(?: dem| letztem)?"),
    "es": _Language(
        common=frozenset("el la los las de del que cuando quien por para hace desde en con y "
                         "es fue hemos he ha pasado pasada mi nos un una lo se paso".split()),
        numbers={"un": 1, "una": 1, "uno": 1, "dos": 2, "tres": 3, "cuatro": 4, "cinco": 5,
                 "seis": 6, "siete": 7, "ocho": 8, "nueve": 9, "diez": 10},
        units={"dias?": "day", "semanas?": "week", "mes(?:es)?": "month", "anos?": "year"},
        months=("enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto",
                "septiembre|setiembre", "octubre", "noviembre", "diciembre"),
        weekdays=("lunes", "martes", "miercoles", "jueves", "viernes", "sabado", "domingo"),
        today=r"hoy", yesterday=r"ayer", day_before=r"anteayer|antier|antes de ayer",
        this=r"(?:esta (?P<unit>semana)|este (?P<unit2>mes|ano))",
        last=r"(?:(?P<unit>semana) pasada|(?P<unit2>mes|ano) pasado)",
        ago=r"hace (?P<n>{n}) (?P<unit>{unit})",
        last_n=r"(?:ultimos|ultimas) (?P<n>{n}) (?P<unit>{unit})"
               r"|desde hace (?P<n2>{n}) (?P<unit2>{unit})",
        month_lead=r"en|durante|en el mes de", last_day=r"(?:el )?(?P<day>{day}) pasado",
        since=r"desde(?: el)?"),
    "it": _Language(
        common=frozenset("il lo la i gli le l di del della che cosa quando chi perche ho "
                         "abbiamo e da dal con per scorso scorsa fa mi un una ci si "
                         "successo".split()),
        numbers={"un": 1, "una": 1, "uno": 1, "due": 2, "tre": 3, "quattro": 4, "cinque": 5,
                 "sei": 6, "sette": 7, "otto": 8, "nove": 9, "dieci": 10},
        units={"giorn[oi]": "day", "settiman[ae]": "week", "mes[ei]": "month",
               "ann[oi]": "year"},
        months=("gennaio", "febbraio", "marzo", "aprile", "maggio", "giugno", "luglio",
                "agosto", "settembre", "ottobre", "novembre", "dicembre"),
        weekdays=("lunedi", "martedi", "mercoledi", "giovedi", "venerdi", "sabato", "domenica"),
        today=r"oggi", yesterday=r"ieri", day_before=r"l'altro ieri|l'altroieri|altroieri",
        this=r"(?:questa (?P<unit>settimana)|questo (?P<unit2>mese|anno)|quest'(?P<unit3>anno))",
        last=r"(?:(?P<unit>settimana) scorsa|(?P<unit2>mese|anno) scorso)",
        ago=r"(?P<n>{n}) (?P<unit>{unit}) fa",
        last_n=r"(?:ultimi|ultime) (?P<n>{n}) (?P<unit>{unit})"
               r"|da (?P<n2>{n}) (?P<unit2>{unit})",
        month_lead=r"a|in|nel mese di|durante", last_day=r"(?P<day>{day}) scors[oa]",
        since=r"da|dal|dalla|a partire da"),
    "pt": _Language(
        common=frozenset("o a os as de do da que quando quem por para ha desde em no na com "
                         "foi eu nos passado passada voce um uma se fiz aconteceu".split()),
        numbers={"um": 1, "uma": 1, "dois": 2, "duas": 2, "tres": 3, "quatro": 4, "cinco": 5,
                 "seis": 6, "sete": 7, "oito": 8, "nove": 9, "dez": 10},
        units={"dias?": "day", "semanas?": "week", "mes(?:es)?": "month", "anos?": "year"},
        months=("janeiro", "fevereiro", "marco", "abril", "maio", "junho", "julho", "agosto",
                "setembro", "outubro", "novembro", "dezembro"),
        weekdays=(r"segunda(?:-feira)?", r"terca(?:-feira)?", r"quarta(?:-feira)?",
                  r"quinta(?:-feira)?", r"sexta(?:-feira)?", "sabado", "domingo"),
        today=r"hoje", yesterday=r"ontem", day_before=r"anteontem|antes de ontem",
        this=r"(?:n?esta (?P<unit>semana)|n?este (?P<unit2>mes|ano))",
        last=r"(?:(?P<unit>semana) passada|(?P<unit2>mes|ano) passado)",
        ago=r"ha (?P<n>{n}) (?P<unit>{unit})|(?P<n2>{n}) (?P<unit2>{unit}) atras",
        last_n=r"(?:ultimos|ultimas) (?P<n>{n}) (?P<unit>{unit})",
        month_lead=r"em|durante|no mes de", last_day=r"(?P<day>{day}) passad[oa]",
        since=r"desde(?: a| o)?"),
}


def _fold(text: str) -> str:
    """Lower case, no accents, one kind of apostrophe, single spaces."""
    text = unicodedata.normalize("NFKD", text.casefold().replace("\u2019", "'"))
    text = "".join(c for c in text if not unicodedata.combining(c))
    return re.sub(r"\s+", " ", text).strip()


def _day(d: date) -> datetime:
    return datetime.combine(d, time.min, tzinfo=UTC)


def _month_start(year: int, month: int) -> datetime:
    return _day(date(year + (month - 1) // 12, (month - 1) % 12 + 1, 1))


def _calendar(unit: Unit, back: int, today: date) -> tuple[datetime, datetime]:
    """The calendar ``unit`` ``back`` units before the one holding ``today``."""
    if unit == "day":
        start = today - timedelta(days=back)
        return _day(start), _day(start + timedelta(days=1))
    if unit == "week":  # weeks start on Monday
        start = today - timedelta(days=today.weekday() + 7 * back)
        return _day(start), _day(start + timedelta(days=7))
    if unit == "month":
        year, month = divmod(today.year * 12 + today.month - 1 - back, 12)
        return _month_start(year, month + 1), _month_start(year, month + 2)
    return _day(date(today.year - back, 1, 1)), _day(date(today.year - back + 1, 1, 1))


def _named_month(month: int, year: int | None, today: date) -> tuple[datetime, datetime]:
    # without a year: the latest such month that has begun
    year = year if year is not None else today.year - (1 if month > today.month else 0)
    return _month_start(year, month), _month_start(year, month + 1)


def _last_weekday(weekday: int, today: date) -> tuple[datetime, datetime]:
    """The latest such weekday before today."""
    return _calendar("day", (today.weekday() - weekday - 1) % 7 + 1, today)


Span = tuple[datetime, datetime | None]
_Read = Callable[[re.Match[str], datetime], Span | None]


class _Reader:
    """One language's compiled phrases, tried in order: the first that reads wins."""

    def __init__(self, lang: _Language) -> None:
        self.lang = lang
        n = _alt([r"\d{1,3}", *lang.numbers])
        unit = _alt(lang.units)
        day = _alt(lang.weekdays)
        month = _alt(lang.months)

        def rx(pattern: str) -> re.Pattern[str]:
            body = pattern.format(n=n, unit=unit, day=f"(?:{day})", month=month)
            return re.compile(rf"(?<![\w-])(?:{body})(?![\w-])")

        self.since = re.compile(rf"(?<![\w'])(?:{lang.since}) $")
        self.month_lead = re.compile(rf"(?<![\w'])(?:{lang.month_lead}) $")
        self.day_re = [re.compile(rf"^(?:{d})$") for d in lang.weekdays]
        self.month_re = [re.compile(rf"^(?:{m})$") for m in lang.months]
        self.unit_re = [(re.compile(rf"^(?:{u})$"), v) for u, v in lang.units.items()]
        # (pattern, reader, may follow "since"): the order in which phrases are tried
        self.phrases: list[tuple[re.Pattern[str], _Read, bool]] = [
            (re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)"), self._iso, True),
            (rx(lang.last_n), self._last_n, False),
            (rx(lang.ago), self._ago, True),
            (rx(r"(?P<month>{month})(?: (?P<year>\d{{4}}))?"), self._month, True),
            (rx(lang.day_before), lambda m, now: _calendar("day", 2, now.date()), True),
            (rx(lang.yesterday), lambda m, now: _calendar("day", 1, now.date()), True),
            (rx(lang.today), lambda m, now: _calendar("day", 0, now.date()), True),
            (rx(lang.this), lambda m, now: self._unit_span(m, 0, now), True),
            (rx(lang.last), lambda m, now: self._unit_span(m, 1, now), True),
            (rx(lang.last_day), self._last_day, True),
            (rx("(?P<day>{day})"), self._bare_day, True),
        ]

    def _group(self, m: re.Match[str], name: str) -> str | None:
        for key in (name, f"{name}2", f"{name}3"):
            value = m.groupdict().get(key)
            if value:
                return value
        return None

    def _unit(self, word: str) -> Unit:
        return next(v for pattern, v in self.unit_re if pattern.match(word))

    def _number(self, word: str) -> int:
        return int(word) if word.isdigit() else self.lang.numbers[word]

    def _unit_span(self, m: re.Match[str], back: int, now: datetime) -> Span:
        return _calendar(self._unit(self._group(m, "unit") or ""), back, now.date())

    def _iso(self, m: re.Match[str], now: datetime) -> Span | None:
        try:
            day = date(int(m[1]), int(m[2]), int(m[3]))
        except ValueError:
            return None
        return _day(day), _day(day + timedelta(days=1))

    def _last_n(self, m: re.Match[str], now: datetime) -> Span:
        n = self._number(self._group(m, "n") or "")
        return now - timedelta(days=n * _LAST_N_DAYS[self._unit(self._group(m, "unit") or "")]), None

    def _ago(self, m: re.Match[str], now: datetime) -> Span:
        n = self._number(self._group(m, "n") or "")
        return _calendar(self._unit(self._group(m, "unit") or ""), n, now.date())

    def _month(self, m: re.Match[str], now: datetime) -> Span | None:
        before = m.string[:m.start()]
        if not (self.month_lead.search(before) or self.since.search(before)):
            return None  # a month name alone may be a word ("may") or a date ("March 3")
        month = next(i for i, r in enumerate(self.month_re) if r.match(m["month"])) + 1
        return _named_month(month, int(m["year"]) if m["year"] else None, now.date())

    def _last_day(self, m: re.Match[str], now: datetime) -> Span:
        weekday = next(i for i, r in enumerate(self.day_re) if r.match(m["day"]))
        return _last_weekday(weekday, now.date())

    def _bare_day(self, m: re.Match[str], now: datetime) -> Span | None:
        if not self.since.search(m.string[:m.start()]):
            return None  # "on Monday" may be the last Monday or the next one
        return self._last_day(m, now)

    def read(self, text: str, now: datetime) -> Span | None:
        for pattern, reader, sinceable in self.phrases:
            for m in pattern.finditer(text):
                span = reader(m, now)
                if span is None:
                    continue
                if sinceable and self.since.search(text[:m.start()]):
                    return span[0], None
                return span
        return None

    def score(self, words: list[str]) -> int:
        return sum(w in self.lang.common for w in words)


_READERS = {code: _Reader(lang) for code, lang in LANGUAGES.items()}


def time_window(query: str, now: datetime | None = None) -> Window | None:
    """The ``(since, until)`` span of event time ``query`` names, in UTC, at clock ``now``
    (default: the current time); None when it names no span, or when the languages the
    question may be in read different spans. Within a language the first phrase found
    wins, in the order: an ISO date, ``last N units``, ``N units ago``, a named month,
    ``the day before yesterday``, ``yesterday``, ``today``, ``this/last unit``, ``last
    <weekday>``, ``since <weekday>``."""
    text = _fold(query)
    now = (now or datetime.now(UTC)).astimezone(UTC)
    words = re.findall(r"[a-z]+", text)
    scores = {code: reader.score(words) for code, reader in _READERS.items()}
    best = max(scores.values())
    spans = {span for code, reader in _READERS.items()
             if scores[code] == best and (span := reader.read(text, now)) is not None}
    return spans.pop() if len(spans) == 1 else None
