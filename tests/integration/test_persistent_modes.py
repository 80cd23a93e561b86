"""What ``behavior.lifecycle.<typology>.persistent`` makes the maintain job do, per value.

The same agent is declared three ways, differing only in its typologies' ``persistent``
value, with aggressive decay (a one-day horizon and validity window) and the same rows:

- ``forcing_function``: episodes past their horizon await disposition (the dispositions
  report counts them and names them);
- ``corroborated``: a fact whose validity window lapses without a new corroboration fails
  one corroboration per window, each journalled ``corroboration_failed``; at the lifecycle's
  ``failed_corroborations`` (``archive_on: [failed_corroborations]``) it is archived, soft,
  journalled with the cause; below it stays, and a new corroboration starts the count again;
- ``indefinite``: neither; the rows stay active through any number of runs.

Rows are written through the engine as the application role; ``maintain`` runs as the
maintainer with a clock set days ahead.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives._project import migrate
from primitives.compile import agent_tables
from primitives.engine import Engine
from primitives.lifecycle import maintain
from primitives.lifecycle._decay import corroboration_windows, forcing_horizons
from primitives.spec import AgentSpec, load_spec_text
from tests.conftest import PostgresHandle
from tests.security._support import verify_chain

pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")

SPEC = """\
version: 1
agent: pm_%(name)s
anchor: {keys: [user_id], required_at_write: [user_id]}
typology:
  memory: [episodic, semantic]
tiers:
  - {name: memory, boundary: {scope_change: user_id}, persistent: true}
persistence:
  checkpointer: {enabled: false}
  store: {schema: pmodes, prefix: pm_%(name)s}
retrieval: {signals: [lexical]}
behavior:
  write_policy:
    semantic: {mode: mixed, extract_threshold: 0.6, justification: tests write facts directly}
  lifecycle:
    episodic:
      persistent: %(episodic)s
      archive_on: [disposition]
      justification: the persistent mode under test
    semantic:
      persistent: %(semantic)s
      archive_on: [failed_corroborations]
      failed_corroborations: 2
      justification: the persistent mode under test
  decay:
    episodic: {model: forcing_function, horizon: 1d, justification: aggressive decay}
    semantic: {model: validity_window, validity: 1d, justification: aggressive decay}
"""

DAY = timedelta(days=1)


def _spec(pg: PostgresHandle, name: str, episodic: str, semantic: str) -> AgentSpec:
    spec = load_spec_text(SPEC % {"name": name, "episodic": episodic, "semantic": semantic},
                          policies={})
    migrate([spec], dsn=pg.admin_dsn)
    return spec


@pytest.fixture(scope="module")
def pressured(pg: PostgresHandle) -> AgentSpec:
    return _spec(pg, "pressured", "forcing_function", "corroborated")


@pytest.fixture(scope="module")
def kept(pg: PostgresHandle) -> AgentSpec:
    return _spec(pg, "kept", "indefinite", "indefinite")


@pytest.fixture()
def user() -> dict[str, str]:
    return {"user_id": f"u-{uuid.uuid4().hex[:10]}"}


@pytest.fixture()
def engine_for(pg: PostgresHandle) -> Iterator[Any]:
    opened: list[Engine] = []

    def make(spec: AgentSpec) -> Engine:
        engine = Engine.connect(spec, pg.app_dsn, max_connections=2)
        opened.append(engine)
        return engine
    yield make
    for engine in opened:
        engine.close()


def _write(engine: Engine, user: dict[str, str]) -> tuple[list[uuid.UUID], uuid.UUID]:
    with engine.tenant(user) as mem:
        episodes = [mem.observe("memory", f"scan {n} lowered temperature", typology="episodic").id
                    for n in range(2)]
        fact = mem.observe("memory", "the gate needs three corroborations",
                           typology="semantic").id
    return episodes, fact


def _kinds(engine: Engine, user: dict[str, str], memory_id: uuid.UUID) -> list[tuple[str, Any]]:
    with engine.tenant(user) as mem:
        return [(e["kind"], e["payload"]) for e in mem.history(memory_id)]


def _run(spec: AgentSpec, pg: PostgresHandle, user: dict[str, str], days: float,
         **kwargs: Any) -> Any:
    return maintain([spec], pg.admin_dsn, now=datetime.now(UTC) + days * DAY, **kwargs)


def test_the_modes_select_what_maintain_does(pressured: AgentSpec, kept: AgentSpec) -> None:
    assert forcing_horizons(pressured) == {"episodic": 86400.0}
    assert corroboration_windows(pressured) == {"semantic": (86400.0, 2)}
    assert forcing_horizons(kept) == {} and corroboration_windows(kept) == {}


def test_forcing_function_rows_await_disposition_past_their_horizon_indefinite_ones_never(
        pg: PostgresHandle, pressured: AgentSpec, kept: AgentSpec, engine_for: Any,
        user: dict[str, str]) -> None:
    episodes, _ = _write(engine_for(pressured), user)
    other = {"user_id": user["user_id"] + "-k"}
    _write(engine_for(kept), other)
    early = _run(pressured, pg, user, 0.5)
    assert early.reported["pm_pressured"]["dispositions"] == 0       # inside the horizon
    late = _run(pressured, pg, user, 2, list_dispositions=10)
    assert late.reported["pm_pressured"]["dispositions"] >= 2
    listed = {row["id"] for row in late.awaiting["pm_pressured"] if row["tenant"] ==
              user["user_id"]}
    assert listed == {str(e) for e in episodes}
    # the same rows, the same one-day horizon, `persistent: indefinite`: nothing awaits
    never = _run(kept, pg, other, 400, list_dispositions=10)
    assert "dispositions" not in never.agents["pm_kept"]
    assert never.reported.get("pm_kept", {}).get("dispositions", 0) == 0
    assert never.awaiting.get("pm_kept", []) == []


def test_a_corroborated_fact_is_archived_after_n_failed_corroborations_and_stays_below(
        pg: PostgresHandle, pressured: AgentSpec, engine_for: Any,
        user: dict[str, str]) -> None:
    engine = engine_for(pressured)
    _, fact = _write(engine, user)
    tables = agent_tables(pressured)
    first = _run(pressured, pg, user, 1.5)            # one window lapsed: one failure
    assert first.agents["pm_pressured"]["corroboration"] >= 1
    with engine.tenant(user) as mem:
        row = mem.get(fact)
        assert row is not None and row.archived_at is None          # below N it stays
        assert [h.memory.id for h in mem.search("corroborations")] == [fact]
    failed = [p for k, p in _kinds(engine, user, fact) if k == "corroboration_failed"]
    assert [(p["failed"], p["previous"], p["archive_at"]) for p in failed] == [(1, 0, 2)]
    _run(pressured, pg, user, 1.6)                    # same count: nothing to do
    assert len([k for k, _ in _kinds(engine, user, fact) if k == "corroboration_failed"]) == 1
    _run(pressured, pg, user, 2.5)                    # the second failure reaches N = 2
    with engine.tenant(user) as mem:
        row = mem.get(fact)
        assert row is not None and row.archived_at is not None       # archived, not deleted
        assert fact not in [h.memory.id for h in mem.search("corroborations")]
    kinds = _kinds(engine, user, fact)
    assert [p["failed"] for k, p in kinds if k == "corroboration_failed"] == [1, 2]
    assert [(p["cause"], p["failed"]) for k, p in kinds if k == "archived"] == [
        ("failed_corroborations", 2)]
    with psycopg.connect(pg.admin_dsn) as admin:
        assert verify_chain(admin, tables, user["user_id"]) is None
    _run(pressured, pg, user, 9)                      # archived: no longer counted
    assert [k for k, _ in _kinds(engine, user, fact)] == [
        "observed", "corroboration_failed", "corroboration_failed", "archived"]


def test_a_new_corroboration_restarts_the_count(
        pg: PostgresHandle, pressured: AgentSpec, engine_for: Any, user: dict[str, str],
        admin_conn: psycopg.Connection[Any]) -> None:
    engine = engine_for(pressured)
    _, fact = _write(engine, user)
    tables = agent_tables(pressured)
    _run(pressured, pg, user, 1.5)                    # failure 1 of 2
    # corroborated again a day on (as a corroboration at a tier boundary sets the clock)
    admin_conn.execute(sql.SQL(
        "UPDATE {} SET corroborated_at = now() + interval '1 day 12 hours' "
        "WHERE {} = %s AND id = %s").format(tables.memories.ident, tables.tenant),
        (user["user_id"], fact))
    _run(pressured, pg, user, 2.6)                    # 1.1 days since: one failure, not two
    with engine.tenant(user) as mem:
        row = mem.get(fact)
        assert row is not None and row.archived_at is None
    failed = [p for k, p in _kinds(engine, user, fact) if k == "corroboration_failed"]
    assert [(p["failed"], p["previous"]) for p in failed] == [(1, 0), (1, 0)]
    _run(pressured, pg, user, 3.7)                    # two windows since the corroboration
    with engine.tenant(user) as mem:
        row = mem.get(fact)
        assert row is not None and row.archived_at is not None


def test_without_archive_on_failed_corroborations_failures_are_counted_not_archived(
        pg: PostgresHandle, engine_for: Any, user: dict[str, str]) -> None:
    counted = load_spec_text(
        (SPEC % {"name": "counted", "episodic": "forcing_function", "semantic": "corroborated"})
        .replace("archive_on: [failed_corroborations]", "archive_on: [canonical_change]"),
        policies={})
    migrate([counted], dsn=pg.admin_dsn)
    assert corroboration_windows(counted) == {"semantic": (86400.0, None)}
    engine = engine_for(counted)
    _, fact = _write(engine, user)
    _run(counted, pg, user, 5.5)
    with engine.tenant(user) as mem:
        row = mem.get(fact)
        assert row is not None and row.archived_at is None
    kinds = _kinds(engine, user, fact)
    assert [(p["failed"], p["archive_at"]) for k, p in kinds if k == "corroboration_failed"] == [
        (5, None)]
    assert "archived" not in [k for k, _ in kinds]


def test_confirmed_facts_fail_no_corroboration(
        pg: PostgresHandle, pressured: AgentSpec, engine_for: Any,
        user: dict[str, str]) -> None:
    engine = engine_for(pressured)
    _, fact = _write(engine, user)
    with engine.tenant(user) as mem:
        mem.confirm(fact, reason="the operator checked it")
    _run(pressured, pg, user, 30)
    with engine.tenant(user) as mem:
        row = mem.get(fact)
        assert row is not None and row.archived_at is None
    assert "corroboration_failed" not in [k for k, _ in _kinds(engine, user, fact)]


def test_indefinite_rows_survive_maintain_runs_with_aggressive_decay(
        pg: PostgresHandle, kept: AgentSpec, engine_for: Any, user: dict[str, str]) -> None:
    engine = engine_for(kept)
    episodes, fact = _write(engine, user)
    for days in (2, 30, 400):
        report = _run(kept, pg, user, days)
        assert sum(report.agents["pm_kept"].values()) == 0
    with engine.tenant(user) as mem:
        for memory_id in [*episodes, fact]:
            row = mem.get(memory_id)
            assert row is not None and row.archived_at is None and row.tombstoned_at is None
            assert {k for k, _ in _kinds(engine, user, memory_id)} == {"observed"}
