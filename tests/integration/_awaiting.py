"""One contract, two executors: a sync ``TenantMemory`` whose calls are awaited like the
async engine's, so a test runs the same body on ``Engine`` and ``AsyncEngine``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from primitives.engine import AsyncEngine, Engine
from primitives.spec import AgentSpec

__all__ = ["Awaiting", "engine_sessions"]


class Awaiting:
    """Wraps a sync TenantMemory: every method becomes a coroutine function."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    @property
    def connection(self) -> Any:
        return self._inner.connection

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._inner, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return method(*args, **kwargs)

        return call


Session = Callable[[dict[str, str]], Any]
"""``session(anchor)``: an async context manager giving one tenant transaction's memory."""


@asynccontextmanager
async def engine_sessions(mode: str, spec: AgentSpec, dsn: str, *,
                          max_connections: int = 4) -> AsyncIterator[Session]:
    """An engine of ``mode`` (``sync`` or ``async``) on ``spec``, as a session factory whose
    memories are awaited alike; the engine closes on exit."""
    if mode == "sync":
        engine = Engine.connect(spec, dsn, max_connections=max_connections)

        @asynccontextmanager
        async def sync_session(anchor: dict[str, str]) -> AsyncIterator[Any]:
            with engine.tenant(anchor) as mem:
                yield Awaiting(mem)

        try:
            yield sync_session
        finally:
            engine.close()
        return
    aengine = await AsyncEngine.connect(spec, dsn, max_connections=max_connections)

    @asynccontextmanager
    async def async_session(anchor: dict[str, str]) -> AsyncIterator[Any]:
        async with aengine.tenant(anchor) as mem:
            yield mem

    try:
        yield async_session
    finally:
        await aengine.close()
