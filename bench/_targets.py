"""Systems under test: something that opens connections and returns per-writer write calls.

A :class:`TargetSpec` is plain, picklable data, so a writer process can open its
own target from it. Both targets write the same payload for the same ``(tenant, i)``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from primitives.engine import Engine
from primitives.spec import load_spec

__all__ = [
    "BENCH_SPEC",
    "BENCH_TIER",
    "Target",
    "TargetSpec",
    "Write",
    "open_target",
    "payload",
]

ROOT = Path(__file__).resolve().parents[1]
BENCH_SPEC = ROOT / "agents" / "spectral_agent.yaml"
"""The spec the engine writes through (tenant key ``workspace_id``)."""
BENCH_TIER = "cycle"
"""A transient episodic tier: a direct write, no promotion or governance involved."""

Write = Callable[[str, int], None]
"""``write(tenant, i)``: one write of payload ``i`` for ``tenant``, in its own transaction."""

_WORDS = ("lowering", "temperature", "removed", "fabrication", "in", "the", "summary", "step",
          "after", "retrieval", "returned", "stale", "context", "for", "workspace", "scan")


def payload(i: int) -> tuple[str, dict[str, Any], list[str]]:
    """Content (about 200 characters), envelope and tags of write ``i``: deterministic."""
    words = [_WORDS[(i * 7 + k * 3) % len(_WORDS)] for k in range(28)]
    content = f"observation {i}: " + " ".join(words)
    return content[:200], {"kind": "scan", "n": i, "source": "bench"}, ["bench", f"t{i % 10}"]


@dataclass(frozen=True)
class TargetSpec:
    """Which system, on which database. ``shared_store``: LangGraph threads share one store."""

    kind: Literal["engine", "langgraph", "replay", "replay-relaxed"]
    dsn: str
    shared_store: bool = False


class Target(Protocol):
    def writer(self) -> Write: ...

    def close(self) -> None: ...


class EngineTarget:
    """Our engine: ``engine.observe(anchor, ...)``, one write in its own transaction, as the app
    role (one message: BEGIN, SET LOCAL, the insert, COMMIT)."""

    def __init__(self, dsn: str, connections: int) -> None:
        with warnings.catch_warnings():
            # the spec declares a semantic signal and the bench has no embedder: expected
            warnings.simplefilter("ignore", RuntimeWarning)
            self.engine = Engine.connect(load_spec(BENCH_SPEC), dsn, max_connections=connections)

    def writer(self) -> Write:
        engine = self.engine

        def write(tenant: str, i: int) -> None:
            content, envelope, tags = payload(i)
            engine.observe({"workspace_id": tenant}, BENCH_TIER, content, envelope=envelope,
                           tags=tags)

        return write

    def close(self) -> None:
        self.engine.close()


class LangGraphTarget:
    """LangGraph's ``PostgresStore.put`` (no index), connected as the admin of its own database.

    With a pool, each writer gets its own store instance: one shared instance holds a
    lock around every ``batch`` and would serialize the writers (``shared_store=True``
    measures exactly that).
    """

    def __init__(self, dsn: str, connections: int, *, shared_store: bool = False) -> None:
        from langgraph.store.postgres import PostgresStore

        self._store_cls = PostgresStore
        self.pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            dsn, min_size=connections, max_size=connections, open=True,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        )
        self.pool.wait(timeout=30)
        self.shared = PostgresStore(conn=self.pool) if shared_store else None

    def writer(self) -> Write:
        store = self.shared or self._store_cls(conn=self.pool)

        def write(tenant: str, i: int) -> None:
            content, envelope, tags = payload(i)
            store.put((tenant, BENCH_TIER), f"m{i}",
                      {"content": content, "envelope": envelope, "tags": tags}, index=False)

        return write

    def close(self) -> None:
        self.pool.close()


def open_target(spec: TargetSpec, connections: int) -> Target:
    if spec.kind == "engine":
        return EngineTarget(spec.dsn, connections)
    if spec.kind in ("replay", "replay-relaxed"):
        # the engine's own message from a client that does nothing else (bench/_replay.py);
        # one connection per target: each writer process opens its own
        from bench._replay import ReplayTarget

        if connections != 1:
            raise ValueError("a replay target writes on one connection: measure it in "
                             "processes mode (one writer per process)")
        content, envelope, tags = payload(0)
        return ReplayTarget(spec.dsn, BENCH_SPEC, BENCH_TIER,
                            {"content": content, "envelope": envelope, "tags": tags},
                            relaxed=spec.kind == "replay-relaxed")
    return LangGraphTarget(spec.dsn, connections, shared_store=spec.shared_store)
