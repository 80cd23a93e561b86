"""The time window of a "when" question (seed 002 §11.2: temporal queries follow the
timeline): the span of event time the question names, read from its words.

Rule-based and English only, like :func:`primitives.retrieval.temporal_direction`: the
phrases are ``today``, ``yesterday``, ``this/last week``, ``this/last month``, ``this/last
year``, ``in the last N days/weeks/months``, ``on 2026-02-23`` and ``in March [2026]``. A
question naming none of them has no window; a caller can always pass one.

>>> from datetime import datetime, UTC
>>> now = datetime(2026, 2, 25, 15, 0, tzinfo=UTC)
>>> [d.date().isoformat() for d in time_window("what happened yesterday?", now)]
['2026-02-24', '2026-02-25']
>>> [d.date().isoformat() for d in time_window("when did we meet in January?", now)]
['2026-01-01', '2026-02-01']
>>> time_window("when did we talk about it?", now) is None
True
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta

__all__ = ["Window", "time_window"]

Window = tuple[datetime | None, datetime | None]
"""``(since, until)``: event times ``since <= t < until``; either end may be open (None)."""

_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")
_UNITS = {"day": 1, "days": 1, "week": 7, "weeks": 7, "month": 30, "months": 30}
_LAST_N = re.compile(r"\b(?:in\s+)?(?:the\s+)?(?:last|past)\s+(\d{1,3})\s+(days?|weeks?|months?)\b")
_ISO_DAY = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTH = re.compile(r"\b(?:in|during)\s+(" + "|".join(_MONTHS) + r")(?:\s+(\d{4}))?\b")
_RELATIVE = re.compile(r"\b(today|yesterday|(?:this|last)\s+(?:week|month|year))\b")


def _day(d: date) -> datetime:
    return datetime.combine(d, time.min, tzinfo=UTC)


def _month_start(year: int, month: int) -> datetime:
    return _day(date(year + (month - 1) // 12, (month - 1) % 12 + 1, 1))


def _relative(phrase: str, today: date) -> tuple[datetime, datetime]:
    word = phrase.split()[-1]
    if phrase == "today":
        return _day(today), _day(today + timedelta(days=1))
    if phrase == "yesterday":
        return _day(today - timedelta(days=1)), _day(today)
    last = phrase.startswith("last")
    if word == "week":  # weeks start on Monday
        start = today - timedelta(days=today.weekday() + (7 if last else 0))
        return _day(start), _day(start + timedelta(days=7))
    if word == "month":
        index = today.year * 12 + today.month - 1 - (1 if last else 0)
        year, month = divmod(index, 12)
        return _month_start(year, month + 1), _month_start(year, month + 2)
    year = today.year - (1 if last else 0)
    return _day(date(year, 1, 1)), _day(date(year + 1, 1, 1))


def time_window(query: str, now: datetime | None = None) -> Window | None:
    """The ``(since, until)`` span of event time ``query`` names, in UTC, at clock ``now``
    (default: the current time); None when it names no span. The first phrase found wins,
    in the order: an ISO date, ``last N units``, a named month, a relative phrase."""
    text = query.strip().lower()
    now = now or datetime.now(UTC)
    today = now.astimezone(UTC).date()
    if (iso := _ISO_DAY.search(text)) is not None:
        try:
            day = date(int(iso[1]), int(iso[2]), int(iso[3]))
        except ValueError:
            return None
        return _day(day), _day(day + timedelta(days=1))
    if (last := _LAST_N.search(text)) is not None:
        return now - timedelta(days=int(last[1]) * _UNITS[last[2]]), None
    if (named := _MONTH.search(text)) is not None:
        month = _MONTHS.index(named[1]) + 1
        # without a year: the latest such month that has begun
        year = int(named[2]) if named[2] else today.year - (1 if month > today.month else 0)
        return _month_start(year, month), _month_start(year, month + 1)
    if (phrase := _RELATIVE.search(text)) is not None:
        return _relative(re.sub(r"\s+", " ", phrase[1]), today)
    return None
