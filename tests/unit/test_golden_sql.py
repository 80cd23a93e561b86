"""Golden SQL: the compiled plan of every spec in agents/ is reviewed and committed.

A change to the compiler or to a spec changes ``tests/golden/<agent>.sql``; run
``make golden`` (``PRIMITIVES_UPDATE_GOLDEN=1``) to rewrite the files, then review the diff.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from primitives.compile import compile_plan
from primitives.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
SPECS = sorted((ROOT / "agents").glob("*.yaml"))
UPDATE = os.environ.get("PRIMITIVES_UPDATE_GOLDEN") == "1"


@pytest.mark.parametrize("spec_path", SPECS, ids=[p.stem for p in SPECS])
def test_compiled_sql_matches_golden_file(spec_path: Path) -> None:
    spec = load_spec(spec_path)
    rendered = compile_plan(spec).render()
    golden = GOLDEN / f"{spec.agent}.sql"
    if UPDATE:
        golden.write_text(rendered, encoding="utf-8")
        return
    if not golden.exists():
        pytest.fail(f"no golden file {golden.relative_to(ROOT)} for {spec_path.name}: run "
                    "`make golden` and review the SQL it writes")
    assert rendered == golden.read_text(encoding="utf-8"), (
        f"compiled SQL of {spec_path.name} differs from {golden.relative_to(ROOT)}; if the "
        "change is intended, run `make golden` and review the diff"
    )


def test_every_golden_file_belongs_to_a_spec() -> None:
    agents = {load_spec(p).agent for p in SPECS}
    stale = sorted(p.name for p in GOLDEN.glob("*.sql") if p.stem not in agents)
    assert stale == [], f"golden files without a spec in agents/: {stale}"


def test_compilation_does_not_depend_on_hash_seed() -> None:
    # set iteration order changes with PYTHONHASHSEED; the SQL must not
    script = ("import sys; from primitives.compile import compile_plan; "
              "from primitives.spec import load_spec; "
              "sys.stdout.write(compile_plan(load_spec(sys.argv[1])).checksum)")
    checksums = {
        subprocess.run(
            [sys.executable, "-c", script, str(SPECS[0])], check=True, capture_output=True,
            text=True, cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(checksums) == 1
