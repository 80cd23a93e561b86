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

from primitives.db import translate_error
from primitives.errors import MemoryWriteFail, PrimitivesError, StorageError, StorageFull

__all__ = [
    "BASE_BACKOFF_S",
    "RETRYABLE",
    "backoff_seconds",
    "before_retry",
    "is_transient",
    "write_failed",
]

RETRYABLE: Final = (psycopg.Error, PoolTimeout, StorageError)
"""What the engine's retry loops catch; :func:`before_retry` decides what happens next."""

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


def before_retry(err: BaseException, *, attempt: int, seed: str, tenant: str | None = None,
                 write: bool = True) -> float:
    """After ``attempt`` (1 or 2) failed with ``err``: the backoff to wait before the retry,
    or raise what the caller surfaces: a non-transient error as it is (a psycopg error as
    :func:`~primitives.db.translate_error` makes it, naming ``tenant``); after the retry,
    ``MemoryWriteFail`` for a write (``StorageFull`` stays itself), the error itself for a
    read. Call it from the ``except`` clause."""
    if not is_transient(err) or (attempt == 2 and not write):
        if isinstance(err, psycopg.Error):
            raise translate_error(err, tenant=tenant) from err
        raise err
    if attempt == 2:
        raise write_failed(err, attempts=attempt, seed=seed) from err
    return backoff_seconds(seed)
