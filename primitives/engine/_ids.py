"""Ids for new memories and journal events: random, or seeded inside a deterministic job.

Random (version 4) UUIDs are drawn from the operating system's random source 64 at a time.
``uuid.uuid4()`` asks the kernel for 16 bytes on every call, and Python lets go of the GIL
around that call: on a busy multi-threaded writer every write paid two system calls and two
chances to lose the GIL to another thread (each a wake-up and a context switch). Here one
``os.urandom`` call serves 64 ids, of the same quality: the bytes come from the same source,
with the version and variant bits set as ``uuid4()`` sets them.

Safe across threads (``list.pop`` hands each id out once) and across ``fork``: a child
process starts with an empty batch, so it never repeats an id its parent will use.

A spec with ``determinism: {ids: seeded}`` runs each transaction of a job (an anchor that
carries the spec's ``seed_key``) inside :func:`seeded_ids`: while it is open, every
:func:`new_uuid` of that context is :func:`seeded_uuid` of the job seed, the journal position
the transaction started at and an ordered counter. Seeded ids are version-8 UUIDs (RFC 9562's
custom layout), so they are told apart from random ones at a glance.

Example::

    memory_id = new_uuid()
    with seeded_ids("seed-7", 12):
        new_uuid() == seeded_uuid("seed-7:12:0")   # True
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from uuid import UUID

__all__ = ["JobIds", "new_uuid", "new_uuid_text", "seeded_ids", "seeded_uuid"]

BATCH = 64
"""Ids made per system call."""

_batch: list[UUID] = []
_texts: list[str] = []


class JobIds:
    """The seeded ids of one transaction of a job: ``<seed>:<head>:<n>`` for n = 0, 1, ...
    (``head``: the last journal seq of the tenant when the transaction began, so ids of
    successive transactions never meet)."""

    __slots__ = ("count", "head", "seed")

    def __init__(self, seed: str, head: int) -> None:
        self.seed, self.head, self.count = seed, head, 0

    def next(self) -> UUID:
        name = f"{self.seed}:{self.head}:{self.count}"
        self.count += 1
        return seeded_uuid(name)


_job: ContextVar[JobIds | None] = ContextVar("primitives_job_ids", default=None)


def seeded_uuid(name: str) -> UUID:
    """The version-8 UUID of ``name``: the first 128 bits of its sha256 with the version
    and variant bits set (the journal's trigger computes the same in SQL)."""
    digest = bytearray(hashlib.sha256(name.encode("utf-8")).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x80
    digest[8] = (digest[8] & 0x3F) | 0x80
    return UUID(bytes=bytes(digest))


@contextmanager
def seeded_ids(seed: str | None, head: int = 0) -> Iterator[JobIds | None]:
    """Make :func:`new_uuid` seeded (``seed``) or random (None) until the block ends."""
    job = JobIds(seed, head) if seed is not None else None
    token = _job.set(job)
    try:
        yield job
    finally:
        _job.reset(token)


def new_uuid() -> UUID:
    """A fresh id: the open job's next seeded id, else a random UUID (version 4)."""
    job = _job.get()
    if job is not None:
        return job.next()
    try:
        return _batch.pop()
    except IndexError:
        raw = os.urandom(16 * BATCH)
        _batch.extend(UUID(bytes=raw[k:k + 16], version=4) for k in range(0, len(raw), 16))
        return _batch.pop()


def new_uuid_text() -> str:
    """``str(new_uuid())``, without the ``UUID`` object where the id is random: what a
    statement that takes its ids as text (a JSON array of items) needs, at a fraction of
    the cost. Seeded inside a job, as :func:`new_uuid` is (the same sequence)."""
    job = _job.get()
    if job is not None:
        return str(job.next())
    try:
        return _texts.pop()
    except IndexError:
        raw = bytearray(os.urandom(16 * BATCH))
        for k in range(0, len(raw), 16):  # the version and variant bits, as uuid4() sets
            raw[k + 6] = (raw[k + 6] & 0x0F) | 0x40
            raw[k + 8] = (raw[k + 8] & 0x3F) | 0x80
        digits = raw.hex()
        _texts.extend(f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
                      for h in (digits[k:k + 32] for k in range(0, len(digits), 32)))
        return _texts.pop()


def _clear() -> None:
    _batch.clear()
    _texts.clear()


os.register_at_fork(after_in_child=_clear)
