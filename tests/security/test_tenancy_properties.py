"""Property tests: random interleavings across tenants never leak rows and never lose events.

A Python model of each tenant predicts its rows (and which are active) and its journal,
event by event. Hypothesis generates batches of operations (each batch one tenant
transaction, some rolled back) over three tenants; afterwards every tenant's search, raw
row set and journal must equal the model's, with ``seq`` 1..n and an intact hash chain.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from primitives.db import tenant_transaction
from primitives.engine import Engine, TenantMemory
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle
from tests.security._support import (
    SPEC_BY_AGENT,
    TABLES_BY_AGENT,
    anchor_for,
    connect_engine,
    new_tenant,
    verify_chain,
)

pytestmark = pytest.mark.db

# Spectral with its episodic rows dropped at scope end (no compounding upward): this model
# follows isolation and the journal, not the lifecycle engine (tests/integration/
# test_lifecycle_boundaries.py covers compounding). Same tables: lifecycle changes no DDL.
_EPISODIC = SPEC_BY_AGENT["spectral"].behavior.lifecycle["episodic"]
SPEC = SPEC_BY_AGENT["spectral"].model_copy(update={
    "behavior": SPEC_BY_AGENT["spectral"].behavior.model_copy(update={
        "lifecycle": {**SPEC_BY_AGENT["spectral"].behavior.lifecycle,
                      "episodic": _EPISODIC.model_copy(
                          update={"transient": "drop_at_scope_end"})}})})
TABLES = TABLES_BY_AGENT["spectral"]
TRANSIENT = ("cycle", "run")
PERSISTENT = "workspace"
ALL_TIERS = list(SPEC.tier_names)
PROPERTY_SETTINGS = settings(
    max_examples=25, deadline=None, database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


# -- the model ----------------------------------------------------------------------------------


@dataclass
class Row:
    id: UUID
    tier: str
    scope_id: str | None
    key: str | None
    content: str
    created_at: datetime
    superseded: bool = False
    tombstoned: bool = False
    actions: set[str] = field(default_factory=set)

    @property
    def active(self) -> bool:
        return not (self.superseded or self.tombstoned)


@dataclass
class TenantModel:
    tenant: str
    marker: str
    rows: dict[UUID, Row] = field(default_factory=dict)
    events: list[tuple[str, UUID | None]] = field(default_factory=list)

    def current(self, key: str) -> Row | None:
        return next((r for r in self.rows.values()
                     if r.key == key and not r.superseded and not r.tombstoned), None)

    def pick(self, index: int) -> Row | None:
        rows = list(self.rows.values())
        return rows[index % len(rows)] if rows else None


def _observe(mem: TenantMemory, model: TenantModel, tier: str, scope: str, word: str) -> None:
    scope_id = scope if tier in TRANSIENT else None
    created = mem.observe(tier, f"{model.marker} {word} observation", typology="episodic",
                          scope_id=scope_id)
    model.rows[created.id] = Row(created.id, tier, scope_id, None, created.content,
                                 created.created_at)
    model.events.append(("observed", created.id))


def _keyed(mem: TenantMemory, model: TenantModel, key: str, word: str) -> None:
    content = f"{model.marker} {word} preference"
    previous = model.current(key)
    written = mem.observe(PERSISTENT, content, typology="procedural", key=key)
    if previous is not None and previous.content == content:
        assert written.id == previous.id
        return
    if previous is not None:
        previous.superseded = True
        model.events.append(("superseded", previous.id))
    model.rows[written.id] = Row(written.id, PERSISTENT, None, key, content, written.created_at)
    model.events.append(("observed", written.id))
    if previous is not None:  # procedural: update_with_supersession archives the prior
        model.events.append(("conflict_resolved", previous.id))


def _end_scope(mem: TenantMemory, model: TenantModel, tier: str, scope: str) -> None:
    in_scope = sorted((r for r in model.rows.values()
                       if r.tier == tier and r.scope_id == scope),
                      key=lambda r: (r.created_at, r.id))
    removed = kept = 0
    for row in in_scope:
        if row.actions:
            kept += 1
            model.events.append(("retained_at_scope_end", row.id))
        else:
            removed += 1
            model.events.append(("removed_at_scope_end", row.id))
            del model.rows[row.id]
    model.events.append(("scope_ended", None))
    assert mem.end_scope(tier, scope) == (removed, kept)


def _tombstone(mem: TenantMemory, model: TenantModel, index: int) -> None:
    row = model.pick(index)
    if row is None:
        return
    result = mem.tombstone(row.id)
    assert result.tombstoned_at is not None
    if not row.tombstoned:
        row.tombstoned = True
        model.events.append(("tombstoned", row.id))


def _link(mem: TenantMemory, model: TenantModel, index: int, action: str) -> None:
    row = model.pick(index)
    if row is None:
        return
    linked = mem.link_action(action, [row.id], "basis")
    assert linked == (0 if action in row.actions else 1)
    if action not in row.actions:
        row.actions.add(action)
        model.events.append(("action_linked", row.id))


_scope = st.sampled_from(["s1", "s2"])
_word = st.sampled_from(["alpha", "beta"])
_operation = st.one_of(
    st.tuples(st.just("observe"), st.sampled_from([*TRANSIENT, PERSISTENT]), _scope, _word),
    st.tuples(st.just("keyed"), st.sampled_from(["k1", "k2"]), _word),
    st.tuples(st.just("end_scope"), st.sampled_from(TRANSIENT), _scope),
    st.tuples(st.just("tombstone"), st.integers(0, 50)),
    st.tuples(st.just("link"), st.integers(0, 50), st.sampled_from(["a1", "a2"])),
)
_batch = st.tuples(st.integers(0, 2), st.lists(_operation, min_size=1, max_size=4),
                   st.sampled_from([False, False, False, True]))
"""(tenant index, operations run in one transaction, whether the transaction is rolled back)."""


class _Rollback(Exception):
    pass


def _run(mem: TenantMemory, model: TenantModel, operation: tuple[Any, ...]) -> None:
    kind, *args = operation
    {"observe": _observe, "keyed": _keyed, "end_scope": _end_scope, "tombstone": _tombstone,
     "link": _link}[kind](mem, model, *args)


# -- checks -------------------------------------------------------------------------------------


def _check_tenant(engine: Engine, conn: psycopg.Connection[Any], model: TenantModel,
                  others: list[TenantModel]) -> None:
    with engine.tenant(anchor_for(SPEC, model.tenant)) as mem:
        hits = mem.search("", tiers=ALL_TIERS, limit=1000)
        assert {h.memory.id for h in hits} == {r.id for r in model.rows.values() if r.active}
        for other in others:
            assert mem.search(other.marker, tiers=ALL_TIERS) == []
    with tenant_transaction(conn, model.tenant):
        ids = {row[0] for row in conn.execute(
            sql.SQL("SELECT id FROM {}").format(TABLES.memories.ident))}
        journal = conn.execute(sql.SQL("SELECT seq, kind, memory_id FROM {} ORDER BY seq")
                               .format(TABLES.events.ident)).fetchall()
        broken = verify_chain(conn, TABLES, model.tenant)
    assert ids == set(model.rows)
    assert [s for s, _, _ in journal] == list(range(1, len(journal) + 1))
    assert [(k, m) for _, k, m in journal] == model.events
    assert broken is None


# -- properties ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine(pg: PostgresHandle, specs: tuple[AgentSpec, ...]) -> Iterator[Engine]:
    with connect_engine(SPEC, pg.app_dsn, max_connections=2) as eng:
        yield eng


@pytest.fixture(scope="module")
def app(pg: PostgresHandle) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg.app_dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="module")
def auditor(pg: PostgresHandle) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg.auditor_dsn, autocommit=True) as conn:
        yield conn


@PROPERTY_SETTINGS
@given(batches=st.lists(_batch, min_size=1, max_size=12))
def test_interleaved_writes_across_tenants_never_leak_rows_or_lose_events(
    engine: Engine, app: psycopg.Connection[Any], auditor: psycopg.Connection[Any],
    batches: list[tuple[int, list[tuple[Any, ...]], bool]],
) -> None:
    models = [TenantModel(new_tenant(f"p{i}"), f"mk{new_tenant('')[1:]}") for i in range(3)]
    for index, operations, rolled_back in batches:
        model = models[index]
        draft = copy.deepcopy(model)
        try:
            with engine.tenant(anchor_for(SPEC, model.tenant)) as mem:
                for operation in operations:
                    _run(mem, draft, operation)
                if rolled_back:
                    raise _Rollback
        except _Rollback:
            continue
        models[index] = draft
    for model in models:
        _check_tenant(engine, app, model, [m for m in models if m is not model])
    # seen across tenants by the auditor: each event sits under the tenant that wrote it
    per_tenant = dict(auditor.execute(
        sql.SQL("SELECT {}, count(*) FROM {} WHERE {} = ANY(%s) GROUP BY 1").format(
            TABLES.tenant, TABLES.events.ident, TABLES.tenant),
        ([m.tenant for m in models],)).fetchall())
    assert per_tenant == {m.tenant: len(m.events) for m in models if m.events}


_TENANT_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                       min_size=1, max_size=40).filter(lambda s: s.strip() != "")


@PROPERTY_SETTINGS
@given(first=_TENANT_TEXT, second=_TENANT_TEXT)
def test_arbitrary_tenant_ids_never_see_each_other(
    engine: Engine, app: psycopg.Connection[Any], first: str, second: str,
) -> None:
    if first == second:
        second += "'"
    run = new_tenant("")
    tenants = [first + run, second + run]  # unique per example, still the generated text
    written = {}
    for tenant in tenants:
        with engine.tenant(anchor_for(SPEC, tenant)) as mem:
            written[tenant] = mem.observe("cycle", "a note only its tenant may see").id
    for tenant in tenants:
        with tenant_transaction(app, tenant):
            rows = app.execute(sql.SQL("SELECT {}, id FROM {}").format(
                TABLES.tenant, TABLES.memories.ident)).fetchall()
            assert app.execute("SELECT primitives.current_tenant()").fetchone() == (tenant,)
        assert rows == [(tenant, written[tenant])]
