"""``primitives reembed``: a change of embedding dims (or model) carried through, every vector
made again, the agent searching on the old vectors until one switch (issue 21).

Rows are written and searched as the application role through the engine; the hashing
embedder stands in for the two models (8 dims, then 16). The CLI case uses the packaged
offline model.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives._project import migrate, plan_specs
from primitives._reembed import reembed
from primitives.cli import main
from primitives.compile import agent_tables
from primitives.embeddings import MINILM, HashingEmbedder
from primitives.engine import Engine
from primitives.errors import ModelMismatch, SpecChangeRefused
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.db

_SPEC = """\
version: 1
agent: {agent}
anchor:
  keys: [user_id]
  required_at_write: [user_id]
typology:
  notes: [episodic]
tiers:
  - name: notes
    boundary: {{scope_change: user_id}}
    persistent: true
persistence:
  store: {{schema: {agent}, prefix: re}}
retrieval:
  signals: [semantic, lexical]
  embedding: {{dims: {dims}}}
"""

_TEXTS = ("the invoice reconciliation drifted in March", "the build went green on Friday",
          "Alice asked about her parcel", "the boiler needs a new valve",
          "quarterly taxes are due in April")


class Counting(HashingEmbedder):
    """The hashing embedder, counting the texts it embeds; ``fail_after`` calls it raises."""

    def __init__(self, dims: int, *, fail_after: int | None = None) -> None:
        super().__init__(dims)
        self.texts = 0
        self.calls = 0
        self.fail_after = fail_after

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise RuntimeError("the model server went away")
        self.calls += 1
        self.texts += len(texts)
        return super().embed_documents(texts)


class Agent:
    def __init__(self, folder: Path, pg: PostgresHandle) -> None:
        self.name = f"re_{uuid.uuid4().hex[:8]}"
        self.folder = folder
        self.pg = pg

    def spec(self, dims: int) -> AgentSpec:
        path = self.folder / f"{self.name}.yaml"
        path.write_text(_SPEC.format(agent=self.name, dims=dims), encoding="utf-8")
        return load_spec(path)

    def write(self, spec: AgentSpec, embedder: HashingEmbedder) -> dict[str, list[str]]:
        """Two tenants' rows; tenant a's Alice row erased. Contents per tenant."""
        written: dict[str, list[str]] = {}
        with Engine.connect(spec, self.pg.app_dsn, embedder=embedder) as engine:
            for tenant, texts in (("a", _TEXTS), ("b", _TEXTS[:2])):
                with engine.tenant({"user_id": tenant}) as mem:
                    for text in texts:
                        subject = {"subject": "Alice"} if "Alice" in text else {}
                        mem.observe("notes", text, envelope=subject)
                    if tenant == "a":
                        assert mem.erase("Alice", approvals=["dpo"], reason="request 9") == 1
                written[tenant] = list(texts)
        return written


@pytest.fixture
def agent(tmp_path: Path, pg: PostgresHandle,
          admin_conn: psycopg.Connection[Any]) -> Iterator[Agent]:
    made = Agent(tmp_path, pg)
    yield made
    admin_conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
        sql.Identifier(made.name)))
    admin_conn.execute("DELETE FROM primitives.agent_plans WHERE agent = %s", (made.name,))


def _column(admin: psycopg.Connection[Any], spec: AgentSpec, name: str) -> str | None:
    row = admin.execute(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
        "%s::regclass AND attname = %s AND NOT attisdropped",
        (agent_tables(spec).memories.qualified, name)).fetchone()
    return None if row is None else str(row[0])


def _rows(admin: psycopg.Connection[Any], spec: AgentSpec) -> list[tuple[Any, ...]]:
    """(tenant, erased, dims of the vector or None, model) per row."""
    tables = agent_tables(spec)
    return [tuple(r) for r in admin.execute(sql.SQL(
        "SELECT {t}, erased_at IS NOT NULL, vector_dims(embedding), embedding_model FROM {m} "
        "ORDER BY {t}, created_at").format(t=tables.tenant, m=tables.memories.ident)).fetchall()]


def test_a_dims_change_is_carried_through_and_searched_on_the_new_vectors(
        agent: Agent, pg: PostgresHandle, admin_conn: psycopg.Connection[Any]) -> None:
    old = agent.spec(8)
    migrate([old], dsn=pg.admin_dsn, progress=lambda _: None)
    agent.write(old, HashingEmbedder(8))
    new = agent.spec(16)
    with pytest.raises(SpecChangeRefused, match=r"run `primitives reembed SPEC`"):
        migrate([new], dsn=pg.admin_dsn, progress=lambda _: None)

    seen: list[tuple[int, int]] = []
    report = reembed(new, Counting(16), dsn=pg.admin_dsn, batch=2,
                     progress=lambda done, total: seen.append((done, total)))

    assert (report.dims_before, report.dims, report.rows, report.tenants) == (8, 16, 6, 2)
    assert seen[-1] == (6, 6) and len(seen) >= 3  # batches of two, then the switch
    assert _column(admin_conn, new, "embedding") == "halfvec(16)"
    assert _column(admin_conn, new, "embedding_next") is None
    rows = _rows(admin_conn, new)
    model = "primitives/hashing-v1-16"
    assert [r for r in rows if not r[1]] == [(t, False, 16, model) for t in "aaaabb"]
    assert [r for r in rows if r[1]] == [("a", True, None, None)]  # the erased row stays bare
    events = admin_conn.execute(sql.SQL(
        "SELECT {t}, payload FROM {e} WHERE kind = 'reembedded' ORDER BY {t}").format(
        t=agent_tables(new).tenant, e=agent_tables(new).events.ident)).fetchall()
    assert [(t, p["rows"], p["dims"], p["dims_before"], p["model"]) for t, p in events] == [
        ("a", 4, 16, 8, model), ("b", 2, 16, 8, model)]
    history = admin_conn.execute(
        "SELECT reason, changes FROM primitives.plan_history WHERE agent = %s "
        "ORDER BY id DESC LIMIT 1", (agent.name,)).fetchone()
    assert history is not None and "primitives reembed" in history[0]
    assert history[1][0]["summary"].startswith("embedding dims 8 -> 16")
    # the plan was applied after the switch: nothing left to change, the vector index is back
    planned = plan_specs([new], dsn=pg.admin_dsn)[0]
    assert planned.unchanged and planned.evolution.refused(frozenset()) == ()
    assert admin_conn.execute(
        "SELECT count(*) FROM pg_indexes WHERE schemaname = %s AND indexdef LIKE '%%hnsw%%'",
        (agent.name,)).fetchone() == (1,)
    with Engine.connect(new, pg.app_dsn, embedder=HashingEmbedder(16)) as engine:
        found = engine.search({"user_id": "a"}, "boiler valve", explain=True)
        assert found.hits[0].memory.content == "the boiler needs a new valve"
        assert "semantic" in found.hits[0].ranks
        written = engine.observe({"user_id": "a"}, "notes", "a row after the switch")
    assert written.content == "a row after the switch"


def test_an_engine_with_the_old_model_is_refused_after_the_switch(
        agent: Agent, pg: PostgresHandle) -> None:
    spec = agent.spec(8)
    migrate([spec], dsn=pg.admin_dsn, progress=lambda _: None)
    agent.write(spec, HashingEmbedder(8, model_id="old-model"))
    reembed(spec, HashingEmbedder(8, model_id="new-model"), dsn=pg.admin_dsn)
    with Engine.connect(spec, pg.app_dsn, embedder=HashingEmbedder(8, model_id="old-model")
                        ) as engine, pytest.raises(ModelMismatch, match="new-model"):
        engine.observe({"user_id": "b"}, "notes", "written with the retired model")


def test_rows_written_during_the_backfill_get_a_new_vector_at_the_switch(
        agent: Agent, pg: PostgresHandle, admin_conn: psycopg.Connection[Any]) -> None:
    old = agent.spec(8)
    migrate([old], dsn=pg.admin_dsn, progress=lambda _: None)
    agent.write(old, HashingEmbedder(8))
    live = Engine.connect(old, pg.app_dsn, embedder=HashingEmbedder(8))
    written: list[str] = []

    def write_while_running(done: int, total: int) -> None:
        if not written:  # the agent goes on writing with its old model during the backfill
            written.append(str(live.observe({"user_id": "b"}, "notes", "late arrival").id))

    try:
        report = reembed(agent.spec(16), Counting(16), dsn=pg.admin_dsn, batch=2,
                         progress=write_while_running)
    finally:
        live.close()
    assert report.rows == 7
    rows = _rows(admin_conn, agent.spec(16))
    assert sorted(r[2] for r in rows if not r[1]) == [16] * 7


def test_a_stopped_run_keeps_its_batches_and_a_rerun_finishes(
        agent: Agent, pg: PostgresHandle, admin_conn: psycopg.Connection[Any]) -> None:
    old = agent.spec(8)
    migrate([old], dsn=pg.admin_dsn, progress=lambda _: None)
    agent.write(old, HashingEmbedder(8))
    new = agent.spec(16)
    with pytest.raises(RuntimeError, match="went away"):
        reembed(new, Counting(16, fail_after=2), dsn=pg.admin_dsn, batch=2)
    # nothing switched: the agent still searches its 8-dim vectors
    assert _column(admin_conn, new, "embedding") == "halfvec(8)"
    assert _column(admin_conn, new, "embedding_next") == "halfvec(16)"
    with Engine.connect(old, pg.app_dsn, embedder=HashingEmbedder(8)) as engine:
        assert engine.search({"user_id": "a"}, "boiler")[0].memory.content == (
            "the boiler needs a new valve")
    rerun = Counting(16)
    report = reembed(new, rerun, dsn=pg.admin_dsn, batch=2)
    assert rerun.texts == 2 and report.rows == 2  # the four staged rows were not made again
    assert _column(admin_conn, new, "embedding") == "halfvec(16)"


def test_an_embedder_of_other_dims_is_refused_before_anything_changes(
        agent: Agent, pg: PostgresHandle, admin_conn: psycopg.Connection[Any]) -> None:
    spec = agent.spec(8)
    migrate([spec], dsn=pg.admin_dsn, progress=lambda _: None)
    with pytest.raises(ModelMismatch, match=r"makes 16-dim vectors.*dims: 8"):
        reembed(spec, HashingEmbedder(16), dsn=pg.admin_dsn)
    assert _column(admin_conn, spec, "embedding_next") is None


def test_the_cli_re_embeds_with_the_default_model_and_prints_a_summary(
        agent: Agent, pg: PostgresHandle, admin_conn: psycopg.Connection[Any],
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    spec = agent.spec(384)
    migrate([spec], dsn=pg.admin_dsn, progress=lambda _: None)
    agent.write(spec, HashingEmbedder(384))
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    assert main(["reembed", str(agent.folder / f"{agent.name}.yaml"), "--json"]) == 0
    out = capsys.readouterr()
    summary = json.loads(out.out)
    assert (summary["model"], summary["rows"], summary["dims"]) == (MINILM, 6, 384)
    assert "reembed" in out.err and "6/6 rows" in out.err
    assert {r[3] for r in _rows(admin_conn, spec) if not r[1]} == {MINILM}
