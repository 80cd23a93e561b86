"""One contract, two executors: a sync ``TenantMemory`` whose calls are awaited like the
async engine's, so a test runs the same body on ``Engine`` and ``AsyncEngine``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Awaiting"]


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
