"""Chain reports and anchors without a database."""

from __future__ import annotations

import pytest

from primitives.audit import Anchor, ChainReport, anchors_from_reports
from primitives.errors import PrimitivesError


def _report(**changes: object) -> ChainReport:
    base: dict[str, object] = {
        "agent": "spectral", "journal": "platform.spectral_memory_events", "tenant": "ws-a",
        "events": 3, "last_seq": 3, "head_hash": "ab" * 32,
    }
    return ChainReport(**{**base, **changes})  # type: ignore[arg-type]


def test_intact_chain_reports_intact() -> None:
    report = _report()
    assert report.intact and report.status == "intact"
    assert report.as_json()["intact"] is True


def test_broken_chain_names_the_first_bad_seq() -> None:
    report = _report(broken_at=2)
    assert not report.intact and report.status == "broken at seq 2"


def test_lost_anchor_is_reported_as_not_intact() -> None:
    report = _report(anchor_broken_at=5)
    assert not report.intact
    assert report.status == "anchor at seq 5 missing or changed"


def test_verify_json_round_trips_into_anchors() -> None:
    rows = [_report().as_json(), _report(tenant="ws-b", events=0, last_seq=None,
                                         head_hash=None).as_json()]
    assert anchors_from_reports(rows) == [Anchor("spectral", "ws-a", 3, "ab" * 32)]


def test_malformed_anchor_row_is_refused_with_the_row() -> None:
    with pytest.raises(PrimitivesError, match="audit verify --json"):
        anchors_from_reports([{"last_seq": "x", "head_hash": "h"}])
