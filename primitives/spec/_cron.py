"""Five-field cron expressions for ``behavior.decay.<typology>.schedule``.

``minute hour day-of-month month day-of-week``, each field ``*``, a number, a range ``a-b``,
a list ``a,b,c`` or any of them with a step ``/n`` (``*/15``, ``1-30/2``); months and weekdays
also by their three-letter English names (``jan``, ``mon``), Sunday as 0 or 7. As in classic
cron, when both day fields are restricted (neither starts with ``*``) a day matches either of
them; otherwise it must match both.

:func:`parse` checks an expression (a :class:`ValueError` naming the bad field otherwise);
:func:`next_after` is the first minute after a time the schedule fires; :func:`due` says
whether it fired between the last run and now.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = ["Cron", "due", "next_after", "parse"]

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_FIELDS = (("minute", 0, 59, ()), ("hour", 0, 23, ()), ("day of month", 1, 31, ()),
           ("month", 1, 12, _MONTHS), ("day of week", 0, 7, _DAYS))
_SEARCH_YEARS = 8
"""A schedule that fires at all fires within this many years (29 February: every 4 or 8)."""


@dataclass(frozen=True)
class Cron:
    """A parsed schedule: the minutes, hours, days, months and weekdays (0 = Sunday) it fires
    at, and whether each day field was restricted (not ``*``)."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_restricted: bool
    weekdays_restricted: bool

    def day_matches(self, when: datetime) -> bool:
        weekday = (when.weekday() + 1) % 7
        in_days, in_weekdays = when.day in self.days, weekday in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return in_days or in_weekdays
        return in_days and in_weekdays


def _value(token: str, name: str, low: int, high: int, names: tuple[str, ...]) -> int:
    lowered = token.lower()
    if lowered in names:
        return names.index(lowered) + (1 if name == "month" else 0)
    if not token.isdigit():
        raise ValueError(f"cron {name}: '{token}' is not a number"
                         + (f" or one of {', '.join(names)}" if names else ""))
    number = int(token)
    if not low <= number <= high:
        raise ValueError(f"cron {name}: {number} is outside {low}-{high}")
    return number


def _field(text: str, name: str, low: int, high: int, names: tuple[str, ...]) -> set[int]:
    values: set[int] = set()
    for part in text.split(","):
        span, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) < 1:
                raise ValueError(f"cron {name}: step '{step_text}' is not a positive number")
            step = int(step_text)
        if span == "*":
            first, last = low, high
        elif "-" in span:
            a, _, b = span.partition("-")
            first, last = (_value(a, name, low, high, names), _value(b, name, low, high, names))
            if first > last:
                raise ValueError(f"cron {name}: range '{span}' runs backwards")
        elif span:
            first = _value(span, name, low, high, names)
            last = high if step_text else first
        else:
            raise ValueError(f"cron {name}: empty item in '{text}'")
        values.update(range(first, last + 1, step))
    return values


def parse(text: str) -> Cron:
    """The schedule of a five-field cron expression, e.g. ``"0 3 * * *"`` (03:00 daily)."""
    fields = text.split()
    if len(fields) != 5:
        raise ValueError(f"cron expression '{text}' has {len(fields)} field(s), not 5 "
                         "(minute hour day-of-month month day-of-week)")
    sets = [_field(f, *spec) for f, spec in zip(fields, _FIELDS, strict=True)]
    weekdays = {0 if d == 7 else d for d in sets[4]}
    return Cron(text, frozenset(sets[0]), frozenset(sets[1]), frozenset(sets[2]),
                frozenset(sets[3]), frozenset(weekdays), not fields[2].startswith("*"),
                not fields[4].startswith("*"))


def next_after(schedule: Cron | str, after: datetime) -> datetime | None:
    """The first minute strictly after ``after`` at which ``schedule`` fires (in the time zone
    of ``after``), or None if it never does (e.g. ``0 0 31 2 *``)."""
    cron = parse(schedule) if isinstance(schedule, str) else schedule
    when = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    limit = after + timedelta(days=366 * _SEARCH_YEARS)
    while when <= limit:
        if when.month not in cron.months:
            year, month = (when.year + 1, 1) if when.month == 12 else (when.year, when.month + 1)
            when = when.replace(year=year, month=month, day=1, hour=0, minute=0)
        elif not cron.day_matches(when):
            when = when.replace(hour=0, minute=0) + timedelta(days=1)
        elif when.hour not in cron.hours:
            when = when.replace(minute=0) + timedelta(hours=1)
        elif when.minute not in cron.minutes:
            when += timedelta(minutes=1)
        else:
            return when
    return None


def due(schedule: Cron | str, last_run: datetime | None, now: datetime) -> bool:
    """Whether ``schedule`` fired after ``last_run`` and at or before ``now``; always for a
    schedule that never ran, and for a ``now`` before ``last_run`` (a clock set back: the
    record cannot tell, and running again is safe)."""
    if last_run is None or now < last_run:
        return True
    upcoming = next_after(schedule, last_run)
    return upcoming is not None and upcoming <= now
