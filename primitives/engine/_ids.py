"""Random (version 4) UUIDs for new memories and journal events, drawn from the operating
system's random source 64 at a time.

``uuid.uuid4()`` asks the kernel for 16 bytes on every call, and Python lets go of the GIL
around that call: on a busy multi-threaded writer every write paid two system calls and two
chances to lose the GIL to another thread (each a wake-up and a context switch). Here one
``os.urandom`` call serves 64 ids, of the same quality: the bytes come from the same source,
with the version and variant bits set as ``uuid4()`` sets them.

Safe across threads (``list.pop`` hands each id out once) and across ``fork``: a child
process starts with an empty batch, so it never repeats an id its parent will use.

Example::

    memory_id = new_uuid()
"""

from __future__ import annotations

import os
from uuid import UUID

__all__ = ["new_uuid"]

BATCH = 64
"""Ids made per system call."""

_batch: list[UUID] = []


def new_uuid() -> UUID:
    """A fresh random UUID (version 4)."""
    try:
        return _batch.pop()
    except IndexError:
        raw = os.urandom(16 * BATCH)
        _batch.extend(UUID(bytes=raw[k:k + 16], version=4) for k in range(0, len(raw), 16))
        return _batch.pop()


os.register_at_fork(after_in_child=_batch.clear)
