"""The timestamp output contract of the memory tools (seed 002 §13, ADR 009).

Each result carries the raw ``event_time`` (integer seconds since the epoch) and four
display-only strings:

=====================  ================================  ============================
field                  example                           notes
=====================  ================================  ============================
``event_time_iso``     ``2026-02-23T15:23:47+00:00``     RFC 3339, UTC, whole seconds
``event_time_local``   ``2026-02-23 18:23:47 UTC+3``     the host's local time zone
``event_time_tz``      ``UTC+3``                         ``UTC`` at offset zero
``event_time_relative`` ``3 hours ago``                  ``just now``, ``in 2 days``
=====================  ================================  ============================

All four are empty strings (and ``event_time`` is 0) when the time is missing or zero.
A naive datetime is read as UTC.

>>> from datetime import datetime, timedelta, timezone
>>> at = datetime(2026, 2, 23, 15, 23, 47, tzinfo=timezone.utc)
>>> fields = event_time_fields(at, now=at + timedelta(hours=3),
...                            local_tz=timezone(timedelta(hours=3)))
>>> fields["event_time_iso"], fields["event_time_local"], fields["event_time_relative"]
('2026-02-23T15:23:47+00:00', '2026-02-23 18:23:47 UTC+3', '3 hours ago')
>>> event_time_fields(None)["event_time_iso"]
''
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

__all__ = ["event_time_fields", "relative_time", "tz_label"]

_UNITS = (("year", 365 * 86400), ("month", 30 * 86400), ("day", 86400), ("hour", 3600),
          ("minute", 60), ("second", 1))


def tz_label(offset: timedelta | None) -> str:
    """``UTC``, ``UTC+3``, ``UTC-5:30`` for a UTC offset."""
    minutes = int((offset or timedelta()).total_seconds() // 60)
    if minutes == 0:
        return "UTC"
    sign = "+" if minutes > 0 else "-"
    hours, rest = divmod(abs(minutes), 60)
    return f"UTC{sign}{hours}" + (f":{rest:02d}" if rest else "")


def relative_time(moment: datetime, now: datetime) -> str:
    """``3 hours ago``, ``a minute ago``, ``in 2 days``, ``just now`` (within 10 seconds)."""
    seconds = (now - moment).total_seconds()
    if abs(seconds) < 10:
        return "just now"
    for unit, size in _UNITS:
        count = int(abs(seconds) // size)
        if count >= 1:
            amount = ("an" if unit == "hour" else "a") if count == 1 else str(count)
            text = f"{amount} {unit}{'' if count == 1 else 's'}"
            return f"{text} ago" if seconds > 0 else f"in {text}"
    return "just now"


def event_time_fields(moment: datetime | None, *, now: datetime | None = None,
                      local_tz: tzinfo | None = None) -> dict[str, Any]:
    """``event_time`` and the four display strings for ``moment`` (see the module docstring)."""
    if moment is not None and moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if moment is None or moment.timestamp() == 0:
        return {"event_time": 0, "event_time_iso": "", "event_time_local": "",
                "event_time_tz": "", "event_time_relative": ""}
    utc = moment.astimezone(UTC)
    local = moment.astimezone(local_tz) if local_tz is not None else moment.astimezone()
    label = tz_label(local.utcoffset())
    return {
        "event_time": int(utc.timestamp()),
        "event_time_iso": utc.isoformat(timespec="seconds"),
        "event_time_local": f"{local:%Y-%m-%d %H:%M:%S} {label}",
        "event_time_tz": label,
        "event_time_relative": relative_time(utc, now or datetime.now(UTC)),
    }
