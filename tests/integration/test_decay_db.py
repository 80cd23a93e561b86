"""Decay models on real rows: the SQL agrees with the Python formulas, ranking and confidence
follow the spec's models, the maintain passes archive decayed rows and report dispositions.

Rows are written as the application role (the engine); clocks are back-dated and relation
facts set through the admin connection, and the maintain statements run as the admin
(tests/integration/test_maintain.py runs maintain passes as the maintainer role).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg import sql

from primitives._project import migrate
from primitives.compile import Tables, agent_tables
from primitives.engine import Engine, Memory
from primitives.lifecycle._decay import (
    DecayRow,
    decay_models,
    decay_passes,
    decay_weight,
    dispositions_statement,
    effective_confidence,
)
from primitives.retrieval import render_explanation
from primitives.spec import AgentSpec
from tests.conftest import APP_ROLE, PostgresHandle
from tests.unit.test_decay import probe

pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")

DAY = timedelta(days=1)


@pytest.fixture(scope="module")
def probe_spec(pg: PostgresHandle) -> AgentSpec:
    spec = probe()
    migrate([spec], dsn=pg.admin_dsn)
    return spec


@pytest.fixture
def probe_engine(pg: PostgresHandle, probe_spec: AgentSpec) -> Iterator[Engine]:
    with Engine.connect(probe_spec, pg.app_dsn, max_connections=2) as engine:
        yield engine


def _user() -> dict[str, str]:
    return {"user_id": f"u-{uuid.uuid4().hex[:10]}"}


def _set(conn: psycopg.Connection[Any], tables: Tables, memory_id: UUID, **values: Any) -> None:
    """Back-date or adjust a row as the admin (the app role cannot rewrite clocks)."""
    conn.execute(sql.SQL("UPDATE {} SET {} WHERE id = %(id)s").format(
        tables.memories.ident, sql.SQL(", ").join(
            sql.SQL("{} = {}").format(sql.Identifier(k), sql.Placeholder(k)) for k in values)),
        {**values, "id": memory_id})


def _events(conn: psycopg.Connection[Any], tables: Tables, tenant: str) -> list[tuple[Any, ...]]:
    return conn.execute(sql.SQL(
        "SELECT kind, memory_id, payload FROM {} WHERE {} = %s ORDER BY seq").format(
        tables.events.ident, tables.tenant), (tenant,)).fetchall()


# SQL == Python on real rows ---------------------------------------------------------------------
def test_decay_sql_agrees_with_the_python_formulas_on_real_rows(
        probe_engine: Engine, probe_spec: AgentSpec, admin_conn: psycopg.Connection[Any]) -> None:
    tables = agent_tables(probe_spec)
    user = _user()
    now = datetime.now(UTC)
    with probe_engine.tenant(user) as mem:
        rows = {
            "fresh fact": mem.observe("memory", "fresh fact", typology="semantic"),
            "stale fact": mem.observe("memory", "stale fact", typology="semantic"),
            "re-corroborated fact": mem.observe("memory", "re-corroborated fact",
                                                typology="semantic"),
            "young episode": mem.observe("memory", "young episode", typology="episodic"),
            "old episode": mem.observe("memory", "old episode", typology="episodic"),
            "exempted episode": mem.observe("memory", "exempted episode", typology="episodic"),
            "old procedure": mem.observe("memory", "old procedure", typology="procedural"),
            "accessed procedure": mem.observe("memory", "accessed procedure",
                                              typology="procedural"),
            "confirmed opinion": mem.observe("memory", "confirmed opinion", typology="opinion"),
            "linked opinion": mem.observe("memory", "linked opinion", typology="opinion"),
            "mentioning opinion": mem.observe("memory", "mentioning opinion",
                                              typology="opinion"),
            "plain opinion": mem.observe("memory", "plain opinion", typology="opinion"),
            "rarely mentioning opinion": mem.observe("memory", "rarely mentioning opinion",
                                                     typology="opinion"),
        }
        mem.link_action("act-1", [rows["linked opinion"].id], "justified")
        dana = mem.entity("Dana", "person")
        eli = mem.entity("Eli", "person")
        mem.mention(rows["mentioning opinion"].id, [dana.id])
        mem.mention(rows["rarely mentioning opinion"].id, [eli.id])
        mem.confirm(rows["confirmed opinion"].id)
    assert tables.entities is not None
    # graph.protect_entity_mentions_over is 2: Dana (3 mentions) protects, Eli (2) does not
    for entity, count in ((dana, 3), (eli, 2)):
        admin_conn.execute(sql.SQL("UPDATE {} SET mention_count = %s WHERE id = %s").format(
            tables.entities.ident), (count, entity.id))
    back = {  # name: (days back, other columns)
        "stale fact": (300, {"confidence": 0.8}),
        "re-corroborated fact": (300, {"corroborated_at": now - 10 * DAY}),
        "young episode": (10, {}),
        "old episode": (45, {}),
        "exempted episode": (45, {"decay_rate": 0.0}),
        "old procedure": (60, {"decay_rate": 0.5}),
        "accessed procedure": (60, {"last_accessed_at": now - 3 * DAY, "access_count": 40}),
        "confirmed opinion": (400, {}),
        "linked opinion": (400, {}),
        "mentioning opinion": (400, {}),
        "plain opinion": (40, {"confidence": 0.6}),
        "rarely mentioning opinion": (400, {}),
    }
    for name, (days, extra) in back.items():
        then = now - days * DAY
        _set(admin_conn, tables, rows[name].id, valid_from=then, event_time=then, **extra)

    models = decay_models(probe_spec)
    at = sql.SQL("%(now)s")
    with probe_engine.tenant(user) as mem:
        conn = mem.connection
        assert conn.info.user == APP_ROLE
        found = conn.execute(sql.SQL(
            "SELECT m.content, m.typology, m.confidence, m.decay_rate, m.event_time, "
            "m.valid_from, m.last_accessed_at, m.corroborated_at, m.access_count, "
            "EXISTS (SELECT 1 FROM {links} AS a WHERE a.memory_id = m.id), "
            "EXISTS (SELECT 1 FROM {ne} AS n JOIN {ent} AS e ON e.id = n.entity_id "
            "WHERE n.memory_id = m.id AND e.mention_count > 2), {conf}, {weight}, "
            "{tenant_conf}, {tenant_weight} "
            "FROM {mem} AS m WHERE m.{t} = %(tenant)s").format(
            links=tables.action_links.ident, ne=tables.node_entities.ident,  # type: ignore[union-attr]
            ent=tables.entities.ident, conf=models.confidence_sql(tables, at),  # type: ignore[union-attr]
            weight=models.weight_sql(tables, at), mem=tables.memories.ident, t=tables.tenant,
            # the form the search statement uses: protections read once for the tenant
            tenant_conf=models.confidence_sql(tables, at, sql.SQL("= %(tenant)s")),
            tenant_weight=models.weight_sql(tables, at, sql.SQL("= %(tenant)s"))),
            {"now": now, "tenant": user["user_id"]}).fetchall()
    assert len(found) == len(rows)
    results: dict[str, tuple[float, float]] = {}
    for content, typology, *columns, conf, weight, tenant_conf, tenant_weight in found:
        assert (tenant_conf, tenant_weight) == (conf, weight), content
        row = DecayRow(*columns)
        assert conf == pytest.approx(effective_confidence(probe_spec, typology, row, now),
                                     rel=1e-6), content
        assert weight == pytest.approx(decay_weight(probe_spec, typology, row, now),
                                       rel=1e-6, abs=1e-12), content
        results[content] = (conf, weight)
    # and the formulas did what the models say on these rows
    assert results["fresh fact"][0] == pytest.approx(1.0)
    assert results["stale fact"][0] == pytest.approx(0.8 * 0.5 ** (210 / 90), rel=1e-4)
    assert results["re-corroborated fact"][0] == pytest.approx(1.0)
    assert results["young episode"][1] == pytest.approx(2 / 3, rel=1e-4)
    assert results["old episode"][1] == 0.0 and results["old episode"][0] == 1.0
    assert results["exempted episode"][1] == 1.0
    assert results["old procedure"][0] < 1e-3
    assert 0.7 < results["accessed procedure"][0] < 1
    for protected in ("confirmed opinion", "linked opinion", "mentioning opinion"):
        assert results[protected][0] == pytest.approx(1.0), protected
    assert results["plain opinion"][0] == pytest.approx(0.6 * 0.1477, rel=1e-3)
    assert results["rarely mentioning opinion"][0] < 0.01


# ranking ---------------------------------------------------------------------------------------
def test_a_fact_past_its_validity_window_no_longer_ranks_first(
        probe_engine: Engine, probe_spec: AgentSpec,
        admin_conn: psycopg.Connection[Any]) -> None:
    tables = agent_tables(probe_spec)
    user = _user()
    with probe_engine.tenant(user) as mem:
        old = mem.observe("memory", "Atlantis capital: the capital of Atlantis is Poseidonia",
                          typology="semantic")
        new = mem.observe("memory", "the Atlantis capital moved to Thera", typology="semantic")
    then = datetime.now(UTC) - 300 * DAY
    _set(admin_conn, tables, old.id, valid_from=then, event_time=then)
    found = probe_engine.search(user, "Atlantis capital", explain=True)
    first, second = found.hits
    assert first.memory.id == new.id and second.memory.id == old.id
    # on its fused score alone the old fact led (the better lexical match) ...
    assert second.ranks["lexical"] == 1 and first.ranks["lexical"] == 2
    # ... but 210 days past its 90-day window it is worth 0.5 ** (210 / 90) of itself
    assert second.confidence == pytest.approx(0.5 ** (210 / 90), rel=1e-3)
    assert second.score / second.confidence > first.score / first.confidence
    assert first.confidence == pytest.approx(1.0)
    # recency ranks by the decay weight, which the hit reports as its recency score
    assert second.scores["recency"] == pytest.approx(0.5 ** (210 / 90), rel=1e-3)
    text = render_explanation(found, query="Atlantis capital")
    assert "confidence x0.198" in text and "confidence x1" in text


def test_forcing_function_rows_rank_by_remaining_weight_not_event_time(
        probe_engine: Engine, probe_spec: AgentSpec,
        admin_conn: psycopg.Connection[Any]) -> None:
    tables = agent_tables(probe_spec)
    user = _user()
    with probe_engine.tenant(user) as mem:
        exempted = mem.observe("memory", "launch checklist reviewed", typology="episodic")
        recent = mem.observe("memory", "launch checklist drafted", typology="episodic")
        mem.mark_exempt(exempted.id, reason="kept as the reference review")
    _set(admin_conn, tables, exempted.id, event_time=datetime.now(UTC) - 40 * DAY)
    _set(admin_conn, tables, recent.id, event_time=datetime.now(UTC) - 5 * DAY)
    hits = probe_engine.search(user, "", limit=5)  # recency alone
    # past the 30-day horizon, but exempt: weight 1 beats the newer row's 25/30
    assert [h.memory.id for h in hits] == [exempted.id, recent.id]
    assert hits[0].scores["recency"] == 1.0
    assert hits[1].scores["recency"] == pytest.approx(25 / 30, rel=1e-3)


# mark_exempt and the maintain passes ------------------------------------------------------------
def _run_pass(conn: psycopg.Connection[Any], spec: AgentSpec, name: str, tenants: list[str],
              now: datetime | None = None) -> tuple[Any, ...]:
    [statement] = [p.statement for p in decay_passes(spec, agent_tables(spec)) if p.name == name]
    row = conn.execute(statement, {"tenants": tenants, "now": now or datetime.now(UTC),
                                   "actor": "primitives.maintain"}).fetchone()
    assert row is not None
    return tuple(row)


def test_decay_archive_archives_unprotected_ebbinghaus_rows_below_threshold(
        probe_engine: Engine, probe_spec: AgentSpec,
        admin_conn: psycopg.Connection[Any]) -> None:
    tables = agent_tables(probe_spec)
    user, other = _user(), _user()
    with probe_engine.tenant(user) as mem:
        forgotten = mem.observe("memory", "old deploy routine", typology="procedural")
        recent = mem.observe("memory", "new deploy routine", typology="procedural")
        confirmed = mem.observe("memory", "prefers tea", typology="opinion")
        linked = mem.observe("memory", "likes the blue theme", typology="opinion")
        fact = mem.observe("memory", "an ancient fact", typology="semantic")
        mem.confirm(confirmed.id)
        mem.link_action("act-7", [linked.id], "justified")
    with probe_engine.tenant(other) as mem:
        elsewhere = mem.observe("memory", "old routine elsewhere", typology="procedural")
    then = datetime.now(UTC) - 400 * DAY
    for memory in (forgotten, confirmed, linked, fact, elsewhere):
        _set(admin_conn, tables, memory.id, valid_from=then, event_time=then)

    assert _run_pass(admin_conn, probe_spec, "decay_archive", [user["user_id"]]) == (1,)
    with probe_engine.tenant(user) as mem:
        states = {m.id: m.state for m in (mem.get(x.id) for x in
                                          (forgotten, recent, confirmed, linked, fact))
                  if isinstance(m, Memory)}
    assert states == {forgotten.id: "archived", recent.id: "active", confirmed.id: "active",
                      linked.id: "active", fact.id: "active"}  # validity_window: not pruned
    [event] = [e for e in _events(admin_conn, tables, user["user_id"])
               if e[0] == "decay_archived"]
    assert event[1] == forgotten.id
    assert event[2]["confidence"] < 0.05 and event[2]["threshold"] == 0.05
    # idempotent; other tenants untouched; never deleted
    assert _run_pass(admin_conn, probe_spec, "decay_archive", [user["user_id"]]) == (0,)
    with probe_engine.tenant(other) as mem:
        assert mem.get(elsewhere.id).state == "active"  # type: ignore[union-attr]


def test_dispositions_reports_forcing_function_rows_past_their_horizon(
        probe_engine: Engine, probe_spec: AgentSpec,
        admin_conn: psycopg.Connection[Any]) -> None:
    tables = agent_tables(probe_spec)
    user = _user()
    with probe_engine.tenant(user) as mem:
        due = [mem.observe("memory", f"episode {n}", typology="episodic") for n in range(3)]
        mem.observe("memory", "a recent episode", typology="episodic")
    for memory in due:
        _set(admin_conn, tables, memory.id, event_time=datetime.now(UTC) - 31 * DAY)
    assert _run_pass(admin_conn, probe_spec, "dispositions", [user["user_id"]]) == (0, 3)
    listing = dispositions_statement(probe_spec, tables, listed=2)
    assert listing is not None
    row = admin_conn.execute(listing, {"tenants": [user["user_id"]],
                                       "now": datetime.now(UTC)}).fetchone()
    assert row is not None and row[:2] == (0, 3) and len(row[2]) == 2  # the oldest two
    assert {r["id"] for r in row[2]} <= {str(m.id) for m in due}
    with probe_engine.tenant(user) as mem:
        mem.mark_exempt(due[0].id, reason="keep")
        mem.archive(due[1].id, reason="disposed")
    assert _run_pass(admin_conn, probe_spec, "dispositions", [user["user_id"]]) == (0, 1)
    kinds = [e[0] for e in _events(admin_conn, tables, user["user_id"])]
    assert "exempted" in kinds and "archived" in kinds
