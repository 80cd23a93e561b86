"""Seed 001 §6 without a database: seeded ids, the seed's epoch, canonical JSON, the SEM
snapshot hash, and what each ``determinism`` value compiles into."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

from primitives.compile import compile_plan
from primitives.engine._anchor import Anchor
from primitives.engine._core import canonical_json
from primitives.engine._determinism import job_seed, seeded_epoch, sem_snapshot_hash
from primitives.engine._ids import new_uuid, seeded_ids, seeded_uuid
from primitives.spec import AgentSpec, load_spec

ROOT = Path(__file__).resolve().parents[2]


def _mace(**determinism: str) -> AgentSpec:
    spec = load_spec(ROOT / "agents" / "mace.yaml")
    return spec.model_copy(update={"determinism": spec.determinism.model_copy(
        update=determinism)})


def test_a_seeded_id_is_the_version_8_uuid_of_the_sha256_of_its_name() -> None:
    digest = hashlib.sha256(b"seed-7:0:0").digest()[:16]
    made = seeded_uuid("seed-7:0:0")
    assert made.version == 8 and made.variant == "specified in RFC 4122"
    # the first 128 bits of the digest, only the version and variant bits changed
    assert int.from_bytes(made.bytes, "big") & ~((0xF << 76) | (0x3 << 62)) == (
        int.from_bytes(digest, "big") & ~((0xF << 76) | (0x3 << 62)))
    assert seeded_uuid("seed-7:0:0") == made != seeded_uuid("seed-8:0:0")


def test_inside_a_job_new_ids_count_up_from_the_seed_and_the_journal_head() -> None:
    assert new_uuid().version == 4
    with seeded_ids("seed-7", 12):
        assert [new_uuid() for _ in range(3)] == [seeded_uuid(f"seed-7:12:{n}")
                                                  for n in range(3)]
        with seeded_ids(None):  # another tenant's transaction inside the block: random ids
            assert new_uuid().version == 4
        assert new_uuid() == seeded_uuid("seed-7:12:3")
    assert new_uuid().version == 4


def test_a_seeds_epoch_is_a_whole_second_of_the_decade_from_2000() -> None:
    epoch = seeded_epoch("seed-7")
    offset = int.from_bytes(hashlib.sha256(b"seed-7").digest()[:4], "big") % 315_360_000
    assert epoch == datetime.fromtimestamp(946_684_800 + offset, UTC)
    assert epoch.microsecond == 0 and seeded_epoch("seed-7") == epoch != seeded_epoch("seed-8")


def test_canonical_json_sorts_keys_drops_spaces_and_keeps_utf8() -> None:
    value = {"b": [1, 2.5, {"z": None, "a": True}], "a": "café", "n": 0.1}
    assert canonical_json(value) == '{"a":"café","b":[1,2.5,{"a":true,"z":null}],"n":0.1}'
    assert canonical_json(json.loads(canonical_json(value))) == canonical_json(value)


def test_the_sem_snapshot_hash_is_sha256_of_the_sorted_key_value_time_lines() -> None:
    rows = [("user/b", {"day": "Friday"}, "2003-01-01T00:00:01.000000Z"),
            ("user/a", "cerulean", "2003-01-01T00:00:00.000000Z")]
    lines = ['user/a"cerulean"2003-01-01T00:00:00.000000Z',
             'user/b{"day":"Friday"}2003-01-01T00:00:01.000000Z']
    assert sem_snapshot_hash(rows) == hashlib.sha256("\n".join(lines).encode()).hexdigest()
    assert sem_snapshot_hash(list(reversed(rows))) == sem_snapshot_hash(rows)
    assert sem_snapshot_hash([]) == hashlib.sha256(b"").hexdigest()


def test_the_job_seed_is_the_seed_keys_value_of_a_deterministic_spec_only() -> None:
    anchor = Anchor(tenant="u-1", values=(("user_id", "u-1"),),
                    provenance=(("job_seed", "seed-7"),))
    assert job_seed(_mace(), anchor) == "seed-7"
    assert job_seed(_mace(), Anchor(tenant="u-1", values=(("user_id", "u-1"),))) is None
    assert job_seed(_mace(clock="wall", ids="random", replay="none"), anchor) is None


def test_each_determinism_value_compiles_its_own_journal_and_clock() -> None:
    both = compile_plan(_mace()).render()
    assert "mace_seeded_clock" in both and ":event:" in both
    ticks = compile_plan(_mace(ids="random", replay="none")).render()
    assert "mace_seeded_clock" in ticks and ":event:" not in ticks
    seeded = compile_plan(_mace(clock="wall", replay="none")).render()
    assert "mace_seeded_clock" not in seeded and ":event:" in seeded
    assert "NEW.occurred_at := coalesce(NEW.occurred_at, now());" in seeded
    wall = compile_plan(_mace(clock="wall", ids="random", replay="none")).render()
    assert "seeded" not in wall and "primitives.job_seed" not in wall
