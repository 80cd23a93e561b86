"""A deterministic MACE job for the replay tests: WM writes, uses, ticks (promotions and
expiries), a governed SEM write through an approved request, a user-intent sem_put and the
job-end summary, over several transactions; and the readers that compare two runs."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from primitives.compile import agent_tables
from primitives.db import tenant_transaction
from primitives.engine import Engine
from primitives.spec import AgentSpec

JOURNAL_COLUMNS = ("seq", "event_id", "kind", "memory_id", "actor", "payload", "occurred_at",
                   "prev_hash", "hash")
MEMORY_COLUMNS = ("id", "tier", "typology", "scope_id", "key", "content", "value",
                  "provenance", "event_time", "created_at", "updated_at", "superseded_at",
                  "ttl_ticks", "age_ticks", "reference_ticks")


def run_job(engine: Engine, anchor: dict[str, str], *, rounds: int) -> None:
    """The job: ``rounds`` rounds of four WM items (two used twice and promoted to CWM, two
    left to expire), each round its own transactions; then an episode promoted to SEM by an
    approved request, a fact written on the user's intent, and the job's end (its summary
    of CWM appended to the episodic store)."""
    for r in range(rounds):
        with engine.tenant(anchor) as mem:
            items = [mem.observe("wm", f"round {r} item {i}", scope_id="job-1",
                                 value={"round": r, "item": i, "weight": 0.25 * i})
                     for i in range(4)]
            mem.use([items[0].id, items[1].id])
        with engine.tenant(anchor) as mem:
            mem.use([items[0].id, items[1].id])
            mem.tick(into_scope="session-1")
        with engine.tenant(anchor) as mem:
            mem.tick()
    with engine.tenant(anchor) as mem:
        episode = mem.observe("long_term", "the user said the budget meeting moved to Friday",
                              typology="episodic")
        request = mem.request_promotion(
            episode.id, "user/calendar/budget_meeting", value={"day": "Friday"},
            justification="stated by the user", evidence=[{"episodic_id": str(episode.id)}])
    with engine.tenant(anchor, actor="council") as mem:
        mem.approve(request.id, approver="council")
    with engine.tenant(anchor) as mem:
        intent = mem.record_intent("user/profile/favorite_color", "cerulean")
        mem.sem_put("user/profile/favorite_color", "cerulean", intent=intent)
        mem.end_scope("wm", "job-1", reflective_log_id="rl-1")


def journal(dsn: str, spec: AgentSpec, tenant: str) -> list[tuple[Any, ...]]:
    """The tenant's journal, every column that the chain or a replay compares, in seq order,
    read as the app role (``dsn``)."""
    tables = agent_tables(spec)
    with psycopg.connect(dsn, autocommit=True) as conn, tenant_transaction(conn, tenant):
        return conn.execute(sql.SQL("SELECT {} FROM {} ORDER BY seq").format(
            sql.SQL(", ").join(map(sql.Identifier, JOURNAL_COLUMNS)),
            tables.events.ident)).fetchall()


def memory_rows(dsn: str, spec: AgentSpec, tenant: str) -> list[tuple[Any, ...]]:
    """The tenant's memory rows (every state, removed WM rows excepted), by id."""
    tables = agent_tables(spec)
    with psycopg.connect(dsn, autocommit=True) as conn, tenant_transaction(conn, tenant):
        return conn.execute(sql.SQL("SELECT {} FROM {} ORDER BY id").format(
            sql.SQL(", ").join(map(sql.Identifier, MEMORY_COLUMNS)),
            tables.memories.ident)).fetchall()


def table_rows(dsn: str, spec: AgentSpec, tenant: str) -> dict[str, list[str]]:
    """Every row of the tenant in each table the seeded clock stamps (memories, scopes,
    promotion ledger, action requests, approvals, action links; the raw PII table is the
    privacy admin's), as JSON text without the tenant column, sorted: what two runs of one
    job must share."""
    from primitives.compile._seeded import clock_columns
    tables = agent_tables(spec)
    found: dict[str, list[str]] = {}
    with psycopg.connect(dsn, autocommit=True) as conn, tenant_transaction(conn, tenant):
        for name in clock_columns(tables):
            if tables.pii_raw is not None and name == tables.pii_raw.name:
                continue
            rows = conn.execute(sql.SQL(
                "SELECT (to_jsonb(t) - %s)::text FROM {} AS t ORDER BY 1").format(
                    sql.Identifier(tables.schema, name)), (tables.tenant_column,)).fetchall()
            found[name] = [r[0] for r in rows]
    return found
