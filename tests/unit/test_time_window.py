"""The time window a "when" question names (primitives.retrieval.time_window)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from primitives.retrieval import time_window

NOW = datetime(2026, 2, 25, 15, 30, tzinfo=UTC)   # a Wednesday


def _days(query: str) -> tuple[str | None, str | None] | None:
    window = time_window(query, NOW)
    if window is None:
        return None
    return tuple(d.date().isoformat() if d else None for d in window)  # type: ignore[return-value]


@pytest.mark.parametrize(("query", "expected"), [
    ("what happened today?", ("2026-02-25", "2026-02-26")),
    ("what did we discuss yesterday", ("2026-02-24", "2026-02-25")),
    ("when did we talk this week?", ("2026-02-23", "2026-03-02")),
    ("what happened last week", ("2026-02-16", "2026-02-23")),
    ("when did it break last month", ("2026-01-01", "2026-02-01")),
    ("what changed this month", ("2026-02-01", "2026-03-01")),
    ("what did we do last year", ("2025-01-01", "2026-01-01")),
    ("what happened on 2026-02-03?", ("2026-02-03", "2026-02-04")),
    ("when did we meet in January?", ("2026-01-01", "2026-02-01")),
    ("what did we plan in March?", ("2025-03-01", "2025-04-01")),   # March 2026 is ahead
    ("what happened in december 2024", ("2024-12-01", "2025-01-01")),
])
def test_a_question_names_its_window(query: str, expected: tuple[str, str]) -> None:
    assert _days(query) == expected


def test_the_last_n_days_is_open_ended_to_now() -> None:
    since, until = time_window("what happened in the last 3 days?", NOW) or (None, None)
    assert since == NOW - timedelta(days=3) and until is None


@pytest.mark.parametrize("query", ["when did we talk about the budget?",
                                   "what happened on 2026-02-30?", "may I ask something"])
def test_a_question_naming_no_span_has_no_window(query: str) -> None:
    assert time_window(query, NOW) is None
