"""The five-field cron parser behind ``behavior.decay.<typology>.schedule``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from primitives.errors import SpecError
from primitives.spec import load_spec_text
from primitives.spec._cron import due, next_after, parse

T = datetime(2026, 11, 27, 4, 10, tzinfo=UTC)  # a Friday


def test_nightly_fires_at_three_each_day() -> None:
    assert next_after("0 3 * * *", T) == datetime(2026, 11, 28, 3, 0, tzinfo=UTC)
    assert next_after("0 3 * * *", datetime(2026, 11, 28, 2, 59, 30, tzinfo=UTC)) == \
        datetime(2026, 11, 28, 3, 0, tzinfo=UTC)
    # strictly after: a run at 03:00 waits for the next night
    assert next_after("0 3 * * *", datetime(2026, 11, 28, 3, 0, tzinfo=UTC)) == \
        datetime(2026, 11, 29, 3, 0, tzinfo=UTC)


def test_steps_ranges_lists_and_names() -> None:
    assert next_after("*/15 * * * *", T) == T.replace(minute=15)
    assert next_after("5-10/5 9,17 * * *", T) == T.replace(hour=9, minute=5)
    assert next_after("0 0 1 jan *", T) == datetime(2027, 1, 1, tzinfo=UTC)
    assert next_after("30 6 * * mon-fri", T) == datetime(2026, 11, 27, 6, 30, tzinfo=UTC)
    assert next_after("30 6 * * mon-thu", T) == datetime(2026, 11, 30, 6, 30, tzinfo=UTC)
    assert next_after("0 12 * * 7", T) == datetime(2026, 11, 29, 12, 0, tzinfo=UTC)  # Sunday
    assert next_after("0 0 29 2 *", T) == datetime(2028, 2, 29, tzinfo=UTC)
    assert next_after("0 0 31 2 *", T) is None


def test_both_day_fields_restricted_match_either() -> None:
    # the 1st of the month or any Monday, whichever comes first
    assert next_after("0 0 1 * mon", T) == datetime(2026, 11, 30, tzinfo=UTC)
    assert next_after("0 0 1 * *", T) == datetime(2026, 12, 1, tzinfo=UTC)
    # a stepped star is not a restriction: every other day that is also a Monday
    assert next_after("0 0 */2 * mon", T) == datetime(2026, 12, 7, tzinfo=UTC)  # odd day


def test_due_only_once_the_schedule_fired_since_the_last_run() -> None:
    last = datetime(2026, 11, 27, 3, 0, tzinfo=UTC)
    assert not due("0 3 * * *", last, T)
    assert not due("0 3 * * *", last, datetime(2026, 11, 28, 2, 59, tzinfo=UTC))
    assert due("0 3 * * *", last, datetime(2026, 11, 28, 3, 0, tzinfo=UTC))
    assert due("0 3 * * *", None, T)                       # never ran
    assert due("0 3 * * *", last, last - timedelta(days=1))  # a clock set back


@pytest.mark.parametrize(("text", "message"), [
    ("0 3 * *", "has 4 field(s), not 5"),
    ("61 3 * * *", "minute: 61 is outside 0-59"),
    ("0 3 * * funday", "day of week: 'funday' is not a number"),
    ("0 3 10-2 * *", "day of month: range '10-2' runs backwards"),
    ("*/0 * * * *", "minute: step '0' is not a positive number"),
])
def test_a_bad_expression_is_refused_naming_the_field(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse(text)


def test_a_spec_with_a_bad_schedule_is_refused_at_load() -> None:
    text = """\
version: 1
agent: cron_probe
anchor: {keys: [user_id], required_at_write: [user_id]}
typology:
  memory: [procedural]
tiers:
  - {name: memory, boundary: {scope_change: user_id}, persistent: true}
persistence:
  checkpointer: {enabled: false}
  store: {schema: cronprobe, prefix: cp}
retrieval: {signals: [lexical]}
behavior:
  decay:
    procedural: {model: exempt, schedule: "0 25 * * *", justification: a bad hour}
"""
    with pytest.raises(SpecError, match=r"decay\.procedural\.schedule: cron hour: 25 is outside"):
        load_spec_text(text, policies={})
