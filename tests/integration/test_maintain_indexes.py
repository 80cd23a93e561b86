"""The maintain passes find their work through the memories table's maintain indexes
(:mod:`primitives.compile._maintenance_idx`), not by reading every row of a tenant.

- ``corroboration`` reads only rows whose next failed corroboration is due: a fact counted
  once is not read again until its next window lapses, and then it is;
- ``dispositions`` counts the rows past their horizon from its index alone;
- corroboration promotion reads only rows carrying enough evidence.

Each statement is EXPLAINed (ANALYZE, rolled back) as the maintainer, the role maintain
runs as. Odd provenance (a scalar ``corroborated_by``, a non-numeric count) is written and
read without error: the indexes read it as no evidence and no count.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives._project import migrate
from primitives.compile import agent_tables
from primitives.db._names import MAINTAINER_ROLE
from primitives.engine import Engine
from primitives.lifecycle import maintain
from primitives.lifecycle._passes import passes_for
from primitives.spec import AgentSpec, load_spec_text
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")

SPEC = """\
version: 1
agent: mx_indexed
anchor: {keys: [user_id], required_at_write: [user_id]}
typology:
  memory: [episodic, semantic]
tiers:
  - {name: memory, boundary: {scope_change: user_id}, persistent: true}
persistence:
  checkpointer: {enabled: false}
  store: {schema: mindexes, prefix: mx_indexed}
retrieval: {signals: [lexical]}
behavior:
  write_policy:
    semantic: {mode: mixed, extract_threshold: 0.6, justification: tests write facts directly}
  lifecycle:
    episodic:
      persistent: forcing_function
      archive_on: [disposition]
      justification: episodes await disposition
    semantic:
      persistent: corroborated
      archive_on: [failed_corroborations]
      failed_corroborations: 3
      justification: facts stay while corroborated
  decay:
    episodic: {model: forcing_function, horizon: 1d, justification: aggressive decay}
    semantic: {model: validity_window, validity: 1d, justification: aggressive decay}
  promotion:
    - {from: memory.episodic, to: memory.semantic, criteria: corroboration,
       min_corroborations: 3, at: continuous}
"""

DAY = timedelta(days=1)


@pytest.fixture(scope="module")
def spec(pg: PostgresHandle) -> AgentSpec:
    spec = load_spec_text(SPEC, policies={})
    migrate([spec], dsn=pg.admin_dsn)
    return spec


@pytest.fixture()
def user() -> dict[str, str]:
    return {"user_id": f"u-{uuid.uuid4().hex[:10]}"}


@pytest.fixture()
def engine(pg: PostgresHandle, spec: AgentSpec) -> Iterator[Engine]:
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine:
        yield engine


def _statement(spec: AgentSpec, name: str) -> sql.Composed:
    tables = agent_tables(spec)
    [step] = [p for p in passes_for(spec, tables, embedding=False, similarity="exact")
              if p.name == name]
    return step.statement


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _explain(pg: PostgresHandle, spec: AgentSpec, name: str, tenant: str,
             now: datetime) -> list[dict[str, Any]]:
    """The plan nodes of pass ``name`` over ``tenant`` at ``now`` (run, then rolled back), as
    the maintainer; sequential scans off, so that the small table is read the way a large
    one is, and the table's statistics fresh (as autovacuum keeps them)."""
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(agent_tables(spec).memories.ident))
    with psycopg.connect(pg.admin_dsn) as conn:
        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(MAINTAINER_ROLE)))
        conn.execute("SET LOCAL enable_seqscan = off")
        statement = sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) {}").format(
            _statement(spec, name))
        row = conn.execute(statement, {"tenants": [tenant], "now": now, "actor": "test"},
                           prepare=False).fetchone()
        conn.rollback()
    assert row is not None
    plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
    return list(_nodes(plan[0]["Plan"]))


def _reads(nodes: list[dict[str, Any]], index_part: str) -> int:
    """The rows the plan read through the index whose name holds ``index_part``; fails
    when no node reads it."""
    found = [n for n in nodes if index_part in n.get("Index Name", "")]
    assert found, f"no node reads an index named *{index_part}*: " + ", ".join(
        f"{n['Node Type']} {n.get('Index Name', n.get('Relation Name', ''))}" for n in nodes)
    return sum(int(n["Actual Rows"]) for n in found)


def _heap_reads(nodes: list[dict[str, Any]]) -> list[str]:
    return [n["Node Type"] for n in nodes if n["Node Type"] in ("Seq Scan", "Bitmap Heap Scan")]


def _corroboration(admin_conn: psycopg.Connection[Any], spec: AgentSpec,
                   memory_id: uuid.UUID) -> dict[str, Any]:
    row = admin_conn.execute(sql.SQL(
        "SELECT provenance -> 'corroboration' FROM {} WHERE id = %s").format(
        agent_tables(spec).memories.ident), (memory_id,)).fetchone()
    assert row is not None and row[0] is not None
    return row[0]  # type: ignore[no-any-return]


def test_the_corroboration_pass_reads_only_the_facts_whose_next_failure_is_due(
        pg: PostgresHandle, spec: AgentSpec, engine: Engine, user: dict[str, str],
        admin_conn: psycopg.Connection[Any]) -> None:
    tenant = user["user_id"]
    with engine.tenant(user) as mem:
        fact = mem.observe("memory", "the gate needs three corroborations",
                           typology="semantic").id
        for n in range(5):
            mem.observe("memory", f"fresh fact {n}", typology="semantic")
    start = datetime.now(UTC)
    fresh = _explain(pg, spec, "corroboration", tenant, start + DAY / 2)
    assert _reads(fresh, "corroboration_due") == 0 and not _heap_reads(fresh)

    lapsed = start + DAY * 1.5                       # every fact's first window has lapsed
    assert _reads(_explain(pg, spec, "corroboration", tenant, lapsed),
                  "corroboration_due") == 6
    assert maintain([spec], pg.admin_dsn, now=lapsed).agents["mx_indexed"][
        "corroboration"] >= 6
    counted = _corroboration(admin_conn, spec, fact)
    assert counted["failed"] == 1 and "epoch" in counted

    # counted: not read again within the same window, read once the next one lapses
    assert _reads(_explain(pg, spec, "corroboration", tenant, lapsed + DAY / 4),
                  "corroboration_due") == 0
    assert _reads(_explain(pg, spec, "corroboration", tenant, lapsed + DAY),
                  "corroboration_due") == 6


def test_a_count_kept_before_the_epoch_was_stored_is_not_counted_again(
        pg: PostgresHandle, spec: AgentSpec, engine: Engine, user: dict[str, str],
        admin_conn: psycopg.Connection[Any]) -> None:
    # provenance.corroboration as an earlier maintain wrote it: {since, failed}, no epoch
    with engine.tenant(user) as mem:
        fact = mem.observe("memory", "a fact counted long ago", typology="semantic").id
    tables = agent_tables(spec)
    admin_conn.execute(sql.SQL(
        "UPDATE {} SET provenance = jsonb_build_object('corroboration', jsonb_build_object("
        "'since', coalesce(corroborated_at, valid_from), 'failed', 1)) WHERE id = %s").format(
        tables.memories.ident), (fact,))
    lapsed = datetime.now(UTC) + DAY * 1.5
    maintain([spec], pg.admin_dsn, now=lapsed)
    with engine.tenant(user) as mem:
        assert [e for e in mem.history(fact) if e["kind"] == "corroboration_failed"] == []
    maintain([spec], pg.admin_dsn, now=lapsed + DAY)           # the second window lapses
    with engine.tenant(user) as mem:
        [failed] = [e["payload"] for e in mem.history(fact)
                    if e["kind"] == "corroboration_failed"]
    assert (failed["previous"], failed["failed"]) == (1, 2)


def test_the_dispositions_count_reads_its_index_alone(
        pg: PostgresHandle, spec: AgentSpec, engine: Engine, user: dict[str, str]) -> None:
    tenant = user["user_id"]
    with engine.tenant(user) as mem:
        for n in range(3):
            mem.observe("memory", f"scan {n} lowered temperature", typology="episodic")
    nodes = _explain(pg, spec, "dispositions", tenant, datetime.now(UTC) + 2 * DAY)
    assert _reads(nodes, "dispositions") == 3 and not _heap_reads(nodes)
    report = maintain([spec], pg.admin_dsn, now=datetime.now(UTC) + 2 * DAY)
    assert report.reported["mx_indexed"]["dispositions"] >= 3


def test_promotion_reads_only_rows_with_enough_evidence_and_odd_provenance_is_no_error(
        pg: PostgresHandle, spec: AgentSpec, engine: Engine, user: dict[str, str],
        admin_conn: psycopg.Connection[Any]) -> None:
    tenant = user["user_id"]
    with engine.tenant(user) as mem:
        ids = [mem.observe("memory", f"scan {n} lowered temperature", typology="episodic").id
               for n in range(4)]
        fact = mem.observe("memory", "a fact with an odd count", typology="semantic").id
    tables = agent_tables(spec)
    update = sql.SQL("UPDATE {} SET provenance = %s::jsonb WHERE id = %s").format(
        tables.memories.ident)
    admin_conn.execute(update, ('{"corroborated_by": ["a", "b", "c"]}', ids[0]))
    admin_conn.execute(update, ('{"corroborated_by": ["a", "b"]}', ids[1]))
    admin_conn.execute(update, ('{"corroborated_by": "a"}', ids[2]))   # not a list
    admin_conn.execute(update, ('{"corroboration": {"epoch": "x", "failed": "y"}}', fact))
    nodes = _explain(pg, spec, "promote memory.episodic->memory.semantic", tenant,
                     datetime.now(UTC))
    assert _reads(nodes, "evidence") == 1 and not _heap_reads(nodes)
    report = maintain([spec], pg.admin_dsn, now=datetime.now(UTC) + DAY * 1.5)
    assert report.agents["mx_indexed"]["promote memory.episodic->memory.semantic"] >= 1
    # the odd count read as none: the first lapse is counted, and the count replaced
    assert _corroboration(admin_conn, spec, fact)["failed"] == 1


def test_a_changed_validity_window_rebuilds_the_index_and_drops_the_earlier_one(
        pg: PostgresHandle, admin_conn: psycopg.Connection[Any]) -> None:
    def indexes() -> list[str]:
        return [r[0] for r in admin_conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = 'mindexes' "
            "AND tablename = 'mx_changed_memories' AND indexname LIKE %s ORDER BY 1",
            ("mx_changed_memories_corroboration_due_%",)).fetchall()]

    text = SPEC.replace("mx_indexed", "mx_changed")
    daily = load_spec_text(text, policies={})
    migrate([daily], dsn=pg.admin_dsn)
    [first] = indexes()
    weekly = load_spec_text(text.replace("validity: 1d", "validity: 7d"), policies={})
    migrate([weekly], dsn=pg.admin_dsn)
    [second] = indexes()
    assert second != first
    tenant = f"u-{uuid.uuid4().hex[:10]}"
    assert _reads(_explain(pg, weekly, "corroboration", tenant, datetime.now(UTC)),
                  "corroboration_due") == 0
