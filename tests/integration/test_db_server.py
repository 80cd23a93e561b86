"""The embedded server: started on demand, reused across calls and processes, stopped cleanly,
and recovered after a kill -9 left its postmaster.pid behind.

These tests use their own PRIMITIVES_HOME, never the session's server.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import psycopg
import pytest

from primitives.db import SETTINGS_FILE, server_settings, server_status, start_server, stop_server

pytestmark = pytest.mark.db


@pytest.fixture(scope="module")
def home(make_home: Callable[[], Path]) -> Path:
    return make_home()


def _wait_dead(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.02)
    raise AssertionError(f"process {pid} still alive after {timeout}s")


def test_second_start_reuses_the_running_server_in_this_and_another_process(home: Path) -> None:
    dsn = start_server(home)
    first = server_status(home)
    assert first.running and first.pid is not None

    assert start_server(home) == dsn
    other_process = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from primitives.db import start_server, server_status; "
            "start_server(sys.argv[1]); print(server_status(sys.argv[1]).pid)",
            str(home),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert int(other_process.stdout.strip()) == first.pid
    assert server_status(home).pid == first.pid

    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_status_reports_a_running_server_and_stop_is_clean(home: Path) -> None:
    dsn = start_server(home)
    status = server_status(home)
    assert status.running
    assert status.dsn == dsn
    assert status.pgdata == home / "pgdata"
    assert status.version and status.version[0].isdigit()

    assert stop_server(home) is True
    stopped = server_status(home)
    assert not stopped.running and stopped.pid is None and stopped.dsn is None
    assert not (home / "pgdata" / "postmaster.pid").exists()  # a clean shutdown removes it
    assert stop_server(home) is False  # nothing left to stop


def test_stale_postmaster_pid_after_kill_9_is_removed_and_server_restarts(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    start_server(home)
    killed = server_status(home).pid
    assert killed is not None
    os.kill(killed, signal.SIGKILL)
    _wait_dead(killed)
    assert (home / "pgdata" / "postmaster.pid").exists()
    assert not server_status(home).running

    with caplog.at_level(logging.WARNING, logger="primitives.db"):
        dsn = start_server(home)

    assert "stale" in caplog.text and str(killed) in caplog.text
    restarted = server_status(home)
    assert restarted.running and restarted.pid != killed
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_postmaster_pid_naming_a_reused_pid_is_treated_as_stale(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    start_server(home)
    stop_server(home)
    # After a reboot the recorded pid may belong to an unrelated live process.
    unrelated = os.getpid()
    (home / "pgdata" / "postmaster.pid").write_text(
        f"{unrelated}\n{home / 'pgdata'}\n0\n5432\n{home / 'pgdata'}\n\n  0 0\nready   \n"
    )
    assert not server_status(home).running

    with caplog.at_level(logging.WARNING, logger="primitives.db"):
        dsn = start_server(home)

    assert "stale" in caplog.text
    assert server_status(home).pid != unrelated
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_the_server_starts_with_our_settings_and_alter_system_overrides_them(home: Path) -> None:
    dsn = start_server(home)
    expected = server_settings()
    with psycopg.connect(dsn, autocommit=True) as conn:
        def setting(name: str) -> str:
            row = conn.execute("SELECT setting, unit FROM pg_settings WHERE name = %s",
                               (name,)).fetchone()
            assert row is not None
            return str(row[0])

        # shared_buffers is counted in 8 kB pages, the others as written
        assert int(setting("shared_buffers")) * 8 // 1024 == int(
            expected["shared_buffers"].removesuffix("MB"))
        assert int(setting("maintenance_work_mem")) // 1024 == int(
            expected["maintenance_work_mem"].removesuffix("MB"))
        assert setting("random_page_cost") == expected["random_page_cost"]
        conn.execute("ALTER SYSTEM SET random_page_cost = 3")
    conf = (home / "pgdata" / "postgresql.conf").read_text()
    assert conf.count(f"include_if_exists = '{SETTINGS_FILE}'") == 1
    stop_server(home)
    dsn = start_server(home)  # our file is rewritten; ALTER SYSTEM still wins
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert conn.execute("SHOW random_page_cost").fetchone() == ("3",)
            conn.execute("ALTER SYSTEM RESET random_page_cost")
    finally:
        stop_server(home)
    assert (home / "pgdata" / "postgresql.conf").read_text().count(SETTINGS_FILE) == 1
