"""The startup options of runtime connections: pinned parameters last, so nothing overrides
them; the DSN's own options between the framework's defaults and those."""

from __future__ import annotations

import psycopg

from primitives.db._session import (
    DEFAULT_SETTINGS,
    PINNED_SETTINGS,
    _given,
    _unknown_option,
    session_options,
)


def _pairs(options: str) -> list[tuple[str, str]]:
    parts = options.replace("\\ ", "\x00").split(" -c ")
    parts[0] = parts[0].removeprefix("-c ")
    return [tuple(p.replace("\x00", " ").split("=", 1)) for p in parts]  # type: ignore[misc]


def test_pinned_settings_come_last_and_every_one_is_sent() -> None:
    pairs = _pairs(session_options(180000, given="-c default_transaction_read_only=on"))
    names = [name for name, _ in pairs]
    assert names[-len(PINNED_SETTINGS) - 1:] == [*PINNED_SETTINGS, "search_path"]
    assert pairs[-1] == ("search_path", "pg_catalog,public")
    # the DSN's attempt comes before the pinned value, which wins
    assert names.index("default_transaction_read_only") < len(names) - len(PINNED_SETTINGS) - 1
    assert ("default_transaction_isolation", "read committed") in pairs


def test_the_dsn_may_choose_other_timeouts() -> None:
    pairs = _pairs(session_options(150000, given="-c lock_timeout=5s"))
    timeouts = [value for name, value in pairs if name == "lock_timeout"]
    assert timeouts == [DEFAULT_SETTINGS["lock_timeout"], "5s"]  # the later one counts


def test_transaction_timeout_only_where_the_server_knows_it() -> None:
    assert "transaction_timeout" not in session_options(160000)
    assert "-c transaction_timeout=0" in session_options(170000)


def test_extension_schemas_are_quoted_and_escaped_for_libpq() -> None:
    options = session_options(180000, ["ext", "my ext"])
    assert options.endswith('-c search_path=pg_catalog,ext,"my\\ ext",public')


def test_the_settings_probe_pins_transaction_timeout_and_falls_back_on_older_servers() -> None:
    """A ``transaction_timeout`` persisted on the role ends the probe's own connection
    unless its startup outranks it; a server before 17 refuses the option at startup."""
    given, (newer, safe) = _given("host=db options='-c lock_timeout=5s'")
    assert given == "-c lock_timeout=5s"
    assert "-c transaction_timeout=0" in newer and "transaction_timeout" not in safe
    assert "-c lock_timeout=5s" in newer and "-c lock_timeout=5s" in safe
    refused = psycopg.OperationalError(
        'FATAL:  unrecognized configuration parameter "transaction_timeout"')
    assert _unknown_option(refused)
    assert not _unknown_option(psycopg.OperationalError(
        "FATAL:  terminating connection due to transaction timeout"))
