"""A write under a PII policy against the same write without one.

``python -m bench.pii`` (``--writes``, ``--rounds`` for a smaller run) migrates two agents that
differ only in ``discipline.pii`` (a policy with all twelve kinds, ``before: [any_write]``) into
a fresh database, then, interleaved over ``--rounds`` rounds, times ``Engine.observe`` of
500-character contents on each:

- ``clean``: text without personal data (dates, counts, versions: the gates' near misses);
- ``with_pii``: the same length with an email address and a phone number in it (redacted,
  journalled, so the write takes the general path with its ``pii_redacted`` event).

Target: p50 with the policy / without <= 1.5 on the clean text (the common write). The ratio for
text with personal data is reported beside it. Writes ``bench/results/pii.json``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench._env import RESULTS, log, machine_info, p50_ratio, scratch_database, write_result
from primitives._project import migrate
from primitives.db import app_dsn
from primitives.engine import Engine
from primitives.spec import AgentSpec, load_spec

RESULT = "pii.json"
TARGET = 1.5

_SPEC = """\
version: 1
agent: {agent}
anchor: {{keys: [user_id], required_at_write: [user_id]}}
typology:
  profile: [episodic]
tiers:
  - {{name: profile, boundary: {{scope_change: user_id}}, persistent: true}}
persistence:
  store: {{schema: bench_pii, prefix: {agent}}}
retrieval:
  signals: [lexical, recency]
{discipline}"""

_POLICY = """\
version: 1
kind: pii
name: bench_pii
detectors: [email, phone, credit_card, iban, ssn, ip_address, us_itin, passport, national_id,
            driver_license, crypto_wallet, secret]
on_detect: redact
raw_with_consent: false
admin_raw_reads: false
"""

_CLEAN = ("Run 58213 on 2023-05-08 at 14:30: the operator lowered the chamber temperature by 12 "
          "degrees and the fabrication defect cleared in 4 of 5 cycles; version 3.2.1 of the "
          "recipe keeps the new setting, and the review on 2023-05-11 confirmed it held across "
          "two more lots. ")
_PII = " Contact jane.doe@example.com or +1 415-555-0132 for the lot report."


def _content(base: str, n: int, extra: str = "") -> str:
    text = (f"[{n}] " + base * 4)[:500 - len(extra)]
    return text + extra


def _specs(folder: Path) -> tuple[AgentSpec, AgentSpec]:
    (folder / "agents").mkdir()
    (folder / "policies").mkdir()
    (folder / "policies" / "bench_pii.yaml").write_text(_POLICY, encoding="utf-8")
    specs = []
    for agent, discipline in (("bench_plain", ""),
                              ("bench_guarded", "discipline:\n  pii:\n    policy: bench_pii\n"
                               "    before: [any_write]\n")):
        path = folder / "agents" / f"{agent}.yaml"
        path.write_text(_SPEC.format(agent=agent, discipline=discipline), encoding="utf-8")
        specs.append(load_spec(path))
    return specs[0], specs[1]


def _time_writes(engine: Engine, tenant: str, contents: Sequence[str]) -> list[float]:
    times = []
    for content in contents:
        started = time.perf_counter()
        engine.observe({"user_id": tenant}, "profile", content)
        times.append((time.perf_counter() - started) * 1000)
    return times


def run(*, writes: int, rounds: int, out: Path, command: str) -> dict[str, Any]:
    with scratch_database("pii") as (dsn, embedded), tempfile.TemporaryDirectory() as tmp:
        plain, guarded = _specs(Path(tmp))
        migrate([plain, guarded], dsn=dsn)
        samples: dict[str, dict[str, list[float]]] = {
            variant: {"plain": [], "guarded": []} for variant in ("clean", "with_pii")}
        with Engine.connect(plain, app_dsn(dsn), max_connections=1) as a, \
                Engine.connect(guarded, app_dsn(dsn), max_connections=1) as b:
            for engine in (a, b):  # warm: pools, prepared statements, recognizers
                _time_writes(engine, "warm", [_content(_CLEAN, i, _PII) for i in range(20)])
            for r in range(rounds):
                for variant, extra in (("clean", ""), ("with_pii", _PII)):
                    contents = [_content(_CLEAN, r * writes + i, extra)
                                for i in range(writes)]
                    order = ((a, "plain"), (b, "guarded")) if r % 2 == 0 else (
                        (b, "guarded"), (a, "plain"))
                    for engine, label in order:
                        samples[variant][label] += _time_writes(engine, f"t{r % 7}",
                                                                contents)
                log(f"round {r + 1}/{rounds}")
        info = machine_info(dsn, embedded=embedded)
    result: dict[str, Any] = {"command": command, "writes_per_round": writes, "rounds": rounds,
                              "content_chars": 500, "target": TARGET, "machine": info}
    for variant, by in samples.items():
        result[variant] = p50_ratio(by, "plain", "guarded")
    result["target_met"] = result["clean"]["ratio"] <= TARGET
    log(f"clean: {result['clean']}; with personal data: {result['with_pii']}; wrote "
        f"{write_result(out, result)}")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=300, help="writes per engine per round")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--out", type=Path, default=RESULTS / RESULT)
    args = parser.parse_args(argv)
    given = list(argv) if argv is not None else sys.argv[1:]
    run(writes=args.writes, rounds=args.rounds, out=args.out,
        command=" ".join(["python -m bench.pii", *given]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
