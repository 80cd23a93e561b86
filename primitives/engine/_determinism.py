"""Deterministic jobs (seed 001 §6): seeded ids, the tick clock, the SEM snapshot hash.

A spec with ``determinism: {ids: seeded}`` or ``{clock: ticks}`` and a ``seed_key`` runs every
transaction whose anchor carries that key (``{"user_id": "u-1", "job_seed": "seed-7"}``) as a
transaction of the job ``seed-7``. The executors open it with :func:`open_job`, one
statement: it sets ``primitives.job_seed`` for the transaction (the journal and memories
triggers read it: :mod:`primitives.compile._seeded`) and reads the tenant's journal head.
From then on, until the transaction ends,

* every id the engine makes in Python (memory rows, journal events, action requests) is the
  seeded id of ``<seed>:<head>:<n>``, n counting up (:func:`primitives.engine._ids.seeded_ids`);
  ids made in SQL are seeded there (a promotion's new row: ``<seed>:<rule>:<source id>``; an
  event: ``<seed>:event:<seq>``);
* every timestamp of the journal and the memory rows is the tick clock: the seed's epoch,
  one second per ``tick()``, one microsecond per event within a tick.

So a job run again with the same seed on the same history (the SEM snapshot and the events
before it) writes the same rows, ids, events and chain hashes, byte for byte (the replay test
in tests/integration/test_mace_replay.py). A job's transactions run one at a time, as seed
001's executor does: two concurrent transactions of one job would start from the same
journal head and make the same ids.

>>> with engine.tenant({"user_id": "u-1", "job_seed": "seed-7"}) as mem:   # doctest: +SKIP
...     mem.observe("wm", "budget meeting moved to Friday", scope_id="job-7").id
UUID('...-8...')
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, Final, NamedTuple

from psycopg import sql

from primitives.compile import Tables
from primitives.compile._expr import active_predicate
from primitives.compile._seeded import SEED_SETTING
from primitives.engine._anchor import Anchor
from primitives.engine._core import Context, Op, Step, canonical_json, content_hash
from primitives.spec import AgentSpec

__all__ = [
    "SemSnapshot",
    "job_seed",
    "open_job",
    "seeded_epoch",
    "sem_snapshot",
    "sem_snapshot_hash",
]

EPOCH_BASE: Final = datetime(2000, 1, 1, tzinfo=UTC)
EPOCH_SPAN_S: Final = 315_360_000
"""Ten years of seconds: a seed's epoch lies in [2000-01-01, 2010-01-01)."""


def seeded_epoch(seed: str) -> datetime:
    """The tick clock's time 0 for ``seed``: the first 4 bytes of its sha256, as seconds
    after 2000-01-01 UTC, modulo ten years (the compiled ``<prefix>_seeded_epoch``)."""
    offset = int.from_bytes(hashlib.sha256(seed.encode("utf-8")).digest()[:4], "big")
    return EPOCH_BASE + timedelta(seconds=offset % EPOCH_SPAN_S)


def job_seed(spec: AgentSpec, anchor: Anchor) -> str | None:
    """The job seed the anchor carries (the spec's ``determinism.seed_key``, a provenance or
    anchor key), when the spec is deterministic; else None."""
    d = spec.determinism
    if d.seed_key is None or (d.ids != "seeded" and d.clock != "ticks"):
        return None
    seed = dict(anchor.provenance).get(d.seed_key)
    if seed is None:
        seed = anchor.as_dict().get(d.seed_key)
    return seed or None


@lru_cache(maxsize=64)
def _open_statement(tables: Tables) -> sql.Composed:
    return sql.SQL(
        "SELECT set_config({}, %(seed)s, true), "
        "coalesce((SELECT max(e.seq) FROM {} AS e WHERE e.{} = %(tenant)s), 0)"
    ).format(sql.Literal(SEED_SETTING), tables.events.ident, tables.tenant)


def open_job(ctx: Context, seed: str) -> Op[int]:
    """Open this transaction as one of job ``seed`` (module docstring); returns the tenant's
    journal head (the last seq), the base of the transaction's seeded ids."""
    row = yield Step(_open_statement(ctx.tables), {"seed": seed, "tenant": ctx.tenant}, "one")
    assert row is not None
    return int(row[1])


# the SEM snapshot hash (seed 001 §6) -------------------------------------------------------------
class SemSnapshot(NamedTuple):
    """The tenant's SEM as a snapshot: its rows (key, value, seeded timestamp) in key order,
    and their hash."""

    rows: list[tuple[str, Any, str]]
    hash: str


def sem_snapshot_hash(rows: Sequence[tuple[str, Any, str]]) -> str:
    """sha256 (hex) of the SEM rows as seed 001 §6 defines it: one line per row, the key,
    the canonical JSON of the value (sorted keys, no spaces, UTF-8) and the row's seeded
    timestamp, concatenated; the lines sorted and joined with newlines."""
    return content_hash("\n".join(sorted(f"{k}{canonical_json(v)}{ts}" for k, v, ts in rows)))


@lru_cache(maxsize=64)
def _sem_rows(tables: Tables) -> sql.Composed:
    # the timestamp as fixed-width UTC text, so the hash does not depend on the session's
    # time zone or on how a driver prints a timestamptz
    return sql.SQL(
        "SELECT m.key, m.value, "
        "to_char(m.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') "
        "FROM {} AS m WHERE m.{} = %(tenant)s AND m.tier = %(tier)s "
        "AND m.typology = 'semantic' AND {} ORDER BY m.key, m.id").format(
            tables.memories.ident, tables.tenant, active_predicate("m"))


def sem_snapshot(ctx: Context) -> Op[SemSnapshot]:
    """The tenant's current SEM rows (persistent tier, semantic) and their snapshot hash."""
    rows = yield Step(_sem_rows(ctx.tables),
                      {"tenant": ctx.tenant, "tier": ctx.spec.persistent_tier.name}, "all")
    found = [(r[0], r[1], r[2]) for r in rows]
    return SemSnapshot(found, sem_snapshot_hash(found))
