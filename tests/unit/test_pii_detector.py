"""The PII detector: every kind a policy can name, offline, cheap on text without any."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from primitives.discipline import PII_KINDS, PiiDetector, pii_detector, placeholder
from primitives.spec import PII_KIND_NAMES


def test_the_policy_kinds_are_the_detector_kinds() -> None:
    assert sorted(PII_KIND_NAMES) == sorted(PII_KINDS)
    assert len(PII_KINDS) >= 8


def test_an_email_is_checked_without_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the detector reached for the network")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    detector = PiiDetector(("email",))
    assert [f.kind for f in detector.find("mail jo@example.com")] == ["email"]
    assert detector.find("mail jo@nowhere.invalidtld") == []


def test_text_without_personal_data_has_no_findings() -> None:
    detector = pii_detector(PII_KINDS)
    text = ("On 2023-05-08 the operator lowered the temperature by 12 degrees at 14:30; 4 of 5 "
            "cycles passed, version 3.2.1 shipped, ticket 58213 closed.")
    assert detector.find(text) == []


def test_a_card_number_failing_its_checksum_is_not_a_card() -> None:
    detector = pii_detector(("credit_card",))
    assert detector.find("card 4111 1111 1111 1112") == []
    assert [f.kind for f in detector.find("card 4111 1111 1111 1111")] == ["credit_card"]


def test_a_passport_number_needs_its_context_word() -> None:
    detector = pii_detector(("passport",))
    assert detector.find("order 912803456 shipped") == []
    assert [f.kind for f in detector.find("passport number 912803456")] == ["passport"]


def test_an_itin_is_named_itin_not_ssn_when_both_match() -> None:
    detector = pii_detector(("ssn", "us_itin"))
    assert [f.kind for f in detector.find("ITIN 912-78-1234")] == ["us_itin"]


def test_redaction_replaces_each_value_with_its_placeholder() -> None:
    detector = pii_detector(PII_KINDS)
    text = "mail jo@example.com, key AKIAIOSFODNN7EXAMPLE, ip 10.1.2.3 ok"
    redacted = detector.redact(text)
    assert redacted.text == (f"mail {placeholder('email')}, key {placeholder('secret')}, "
                             f"ip {placeholder('ip_address')} ok")
    assert [text[f.start:f.end] for f in redacted.findings] == [
        "jo@example.com", "AKIAIOSFODNN7EXAMPLE", "10.1.2.3"]


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown PII kind"):
        PiiDetector(("email", "shoe_size"))


def test_phone_numbers_are_matched_in_the_regions_named() -> None:
    text = "call 030 12345678 or +1 415-555-0132"
    everywhere = pii_detector(("phone",))
    us_only = pii_detector(("phone",), ("US",))
    assert [text[f.start:f.end] for f in everywhere.find(text)] == [
        "030 12345678", "+1 415-555-0132"]
    # a German landline written nationally is not a US number; the international one still is
    assert [text[f.start:f.end] for f in us_only.find(text)] == ["+1 415-555-0132"]
