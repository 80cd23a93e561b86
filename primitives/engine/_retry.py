"""Write retries: exactly one retry, after a backoff derived from a seed (seed 001 §9).

A write that still fails after its retry raises :class:`MemoryWriteFail`, whose
``envelope()`` is the deterministic error envelope callers hand back to users.
"""

from __future__ import annotations

import hashlib
from typing import Final

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import PoolTimeout

from primitives.errors import MemoryWriteFail, PrimitivesError, StorageError, StorageFull

__all__ = ["BASE_BACKOFF_S", "backoff_seconds", "is_transient", "write_failed"]

BASE_BACKOFF_S: Final = 0.05
"""The shortest backoff; the seed adds up to the same again."""

_TRANSIENT: tuple[type[BaseException], ...] = (
    psycopg.OperationalError,
    PoolTimeout,
    pg_errors.SerializationFailure,
    pg_errors.DeadlockDetected,
)


def backoff_seconds(seed: str) -> float:
    """Deterministic backoff in [BASE, 2*BASE): the same seed always waits the same time.

    >>> backoff_seconds("job-7") == backoff_seconds("job-7")
    True
    """
    fraction = int(hashlib.sha256(seed.encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF
    return round(BASE_BACKOFF_S * (1 + fraction), 4)


def is_transient(err: BaseException) -> bool:
    """Worth one retry: a lost connection, a serialization failure, a deadlock."""
    if isinstance(err, StorageFull):
        return False
    if isinstance(err, StorageError) and isinstance(err.__cause__, _TRANSIENT):
        return True
    return isinstance(err, _TRANSIENT)


def write_failed(err: BaseException, *, attempts: int, seed: str) -> PrimitivesError:
    """The error raised once the retry is spent: StorageFull stays StorageFull."""
    if isinstance(err, StorageFull):
        return err
    return MemoryWriteFail(
        f"memory write failed after {attempts} attempts: {err}",
        attempts=attempts, backoff_s=backoff_seconds(seed),
        user_message=MemoryWriteFail.user_message,
    )
