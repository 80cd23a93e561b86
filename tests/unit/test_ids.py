"""New memory and event ids: random version-4 UUIDs, never repeated across threads or fork."""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from collections.abc import Callable
from uuid import UUID

import pytest

from primitives.engine import _ids
from primitives.engine._ids import BATCH, new_uuid, new_uuid_text, seeded_ids, seeded_uuid


def test_ids_are_version_4_with_the_rfc_variant_and_all_different() -> None:
    ids = [new_uuid() for _ in range(BATCH * 5 + 3)]
    assert len(set(ids)) == len(ids)
    assert all(type(i) is UUID and i.version == 4 and i.variant == "specified in RFC 4122"
               for i in ids)


def test_one_system_call_serves_a_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real: Callable[[int], bytes] = os.urandom

    def counting(n: int) -> bytes:
        calls.append(n)
        return real(n)

    monkeypatch.setattr(_ids.os, "urandom", counting)
    _ids._batch.clear()
    ids = [new_uuid() for _ in range(BATCH * 2)]
    assert calls == [16 * BATCH, 16 * BATCH]
    assert len(set(ids)) == BATCH * 2


def test_threads_never_share_an_id() -> None:
    got: list[list[UUID]] = [[] for _ in range(8)]

    def draw(k: int) -> None:
        got[k].extend(new_uuid() for _ in range(5_000))

    threads = [threading.Thread(target=draw, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for ids in got for i in ids]
    assert len(every) == 40_000 == len(set(every))


def _child(out: mp.Queue) -> None:  # type: ignore[type-arg]
    out.put([new_uuid() for _ in range(BATCH)])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is a POSIX call")
def test_a_forked_child_does_not_repeat_the_ids_its_parent_has_left() -> None:
    _ids._batch.clear()
    new_uuid()  # the parent now holds BATCH - 1 unused ids
    left = list(_ids._batch)
    assert len(left) == BATCH - 1
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_child, args=(out,))
    child.start()
    from_child = out.get(timeout=30)
    child.join(timeout=30)
    assert child.exitcode == 0
    assert not set(from_child) & set(left)
    assert [new_uuid() for _ in range(BATCH - 1)] == left[::-1]  # the parent's own, in order


def test_id_texts_are_version_4_uuids_all_different() -> None:
    texts = [new_uuid_text() for _ in range(BATCH * 5 + 3)]
    assert len(set(texts)) == len(texts)
    for text in texts:
        parsed = UUID(text)
        assert str(parsed) == text  # the canonical lower-case form
        assert parsed.version == 4 and parsed.variant == "specified in RFC 4122"


def test_id_texts_are_seeded_inside_a_job_as_ids_are() -> None:
    with seeded_ids("seed-7", 12):
        texts = [new_uuid_text(), str(new_uuid()), new_uuid_text()]
    assert texts == [str(seeded_uuid(f"seed-7:12:{n}")) for n in range(3)]


def test_id_texts_never_shared_between_threads() -> None:
    got: list[list[str]] = [[] for _ in range(8)]

    def draw(k: int) -> None:
        got[k].extend(new_uuid_text() for _ in range(5_000))

    threads = [threading.Thread(target=draw, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for ids in got for i in ids]
    assert len(every) == 40_000 == len(set(every))
