"""The engine against real Postgres, as the application role."""

from __future__ import annotations

import io
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from rich.console import Console

from primitives._demo import run_demo
from primitives.engine import Engine
from primitives.errors import GovernanceError, PolicyViolation, TenancyError
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle

ROOT = Path(__file__).resolve().parents[2]


def _tenant() -> dict[str, str]:
    return {"workspace_id": f"ws-{uuid.uuid4().hex[:8]}"}


def _events(engine: Engine, anchor: dict[str, str]) -> list[tuple[Any, ...]]:
    with engine.tenant(anchor) as mem:
        query = sql.SQL("SELECT seq, kind, memory_id FROM {} ORDER BY seq").format(
            engine.tables.events.ident)
        return list(mem.connection.execute(query).fetchall())


def test_engine_connects_as_the_application_role(engine: Engine) -> None:
    with engine.tenant(_tenant()) as mem:
        row = mem.connection.execute("SELECT current_user, current_setting('primitives.tenant')")
        user, tenant = row.fetchone() or (None, None)
    assert user == "primitives_app"
    assert tenant and tenant.startswith("ws-")


def test_observe_writes_row_and_journal_event_in_one_transaction(engine: Engine) -> None:
    anchor = _tenant()
    with engine.tenant(anchor) as mem:
        created = mem.observe("cycle", "lowering temperature removed fabrication",
                              scope_id="c-1", envelope={"kind": "scan"})
    assert created.tier == "cycle" and created.typology == "episodic"
    assert created.key == str(created.id)
    events = _events(engine, anchor)
    assert [(e[1], e[2]) for e in events] == [("observed", created.id)]


def test_failed_transaction_leaves_no_memory_and_no_event(engine: Engine) -> None:
    anchor = _tenant()
    with pytest.raises(RuntimeError, match="boom"), engine.tenant(anchor) as mem:
        mem.observe("cycle", "this write is rolled back")
        raise RuntimeError("boom")
    with engine.tenant(anchor) as mem:
        assert mem.search("rolled back") == []
    assert _events(engine, anchor) == []


def test_keyed_write_is_idempotent_and_a_change_supersedes(engine: Engine) -> None:
    anchor = _tenant()
    with engine.tenant(anchor) as mem:
        first = mem.observe("workspace", "prefers concise outputs", typology="procedural",
                            key="style")
        again = mem.observe("workspace", "prefers concise outputs", typology="procedural",
                            key="style")
        changed = mem.observe("workspace", "prefers exhaustive outputs", typology="procedural",
                              key="style")
        old = mem.get(first.id)
    assert again.id == first.id
    assert changed.id != first.id
    assert old is not None and old.superseded_at is not None and not old.active
    kinds = [e[1] for e in _events(engine, anchor)]
    # procedural: update_with_supersession also archives the prior preference
    assert kinds == ["observed", "superseded", "observed", "conflict_resolved"]
    assert old.archived_at is not None


def test_direct_semantic_write_is_refused_naming_the_promotion_path(engine: Engine) -> None:
    with pytest.raises(GovernanceError, match="promotion engine"), \
            engine.tenant(_tenant()) as mem:
        mem.observe("workspace", "the gate needs three corroborations", typology="semantic")


def test_oversized_content_is_refused_and_nothing_is_written(engine: Engine) -> None:
    anchor = _tenant()
    limit = engine.spec.persistence.store.limits.content_chars
    with pytest.raises(PolicyViolation, match=f"allows {limit}"), engine.tenant(anchor) as mem:
        mem.observe("cycle", "x" * (limit + 1))
    assert _events(engine, anchor) == []


@pytest.mark.parametrize("anchor, message", [
    ({}, "anchor key 'workspace_id' is required"),
    ({"workspace_id": ""}, "anchor key 'workspace_id' is required"),
    ({"workspace_id": "a", "operator_id": "b"}, "unknown anchor key"),
    ({"workspace_id": 7}, "must be a string"),
])
def test_bad_anchor_is_refused_with_what_was_expected(
    engine: Engine, anchor: dict[str, Any], message: str
) -> None:
    with pytest.raises(TenancyError, match=message), engine.tenant(anchor):
        pass


def test_unknown_tier_and_typology_are_refused(engine: Engine) -> None:
    with engine.tenant(_tenant()) as mem:
        with pytest.raises(TenancyError, match="unknown tier 'sesion'"):
            mem.observe("sesion", "x")
        with pytest.raises(TenancyError, match="say which typology"):
            mem.observe("workspace", "x")


def test_cross_tenant_search_returns_nothing(engine: Engine) -> None:
    a, b = _tenant(), _tenant()
    with engine.tenant(a) as mem:
        mem.observe("cycle", "quarterly invoice reconciliation drifted")
    with engine.tenant(b) as mem:
        assert mem.search("invoice reconciliation") == []
    with engine.tenant(a) as mem:
        hits = mem.search("invoice reconciliation")
    assert len(hits) == 1 and hits[0].ranks["lexical"] == 1


def test_search_fuses_lexical_and_envelope_and_honours_tier_scope(engine: Engine) -> None:
    anchor = _tenant()
    with engine.tenant(anchor) as mem:
        mem.observe("cycle", "OCR swaps fields on scanned contracts",
                    envelope={"kind": "scan", "pattern": "contract"})
        mem.observe("run", "contracts run finished without OCR issues",
                    envelope={"kind": "summary"})
        hits = mem.search("OCR contracts", envelope={"pattern": "contract"})
        run_only = mem.search("OCR contracts", tiers=["run"])
    assert hits[0].memory.tier == "cycle"
    assert set(hits[0].ranks) == {"lexical", "envelope", "recency"}
    assert [h.memory.tier for h in run_only] == ["run"]


def test_engine_search_in_one_round_trip_matches_search_in_a_transaction(
    engine: Engine, pg: PostgresHandle, spectral: AgentSpec
) -> None:
    anchor, other = _tenant(), _tenant()
    with engine.tenant(anchor) as mem:
        mem.observe("cycle", "OCR swaps fields on scanned contracts", envelope={"kind": "scan"})
        mem.observe("run", "contracts run finished without OCR issues")
        inside = mem.search("OCR contracts", explain=True)
    alone = engine.search(anchor, "OCR contracts", explain=True)
    assert [h.memory.id for h in alone.hits] == [h.memory.id for h in inside.hits]
    assert [h.ranks for h in alone.hits] == [h.ranks for h in inside.hits]
    assert alone.signal_rows == inside.signal_rows
    assert engine.search(other, "OCR contracts") == []  # another tenant: nothing
    # the one-round-trip statement ran (prepared on the session), not the fallback
    with engine._pool.connection() as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM pg_prepared_statements")]
    assert any(n.startswith("primitives_once_") for n in names)


def test_raw_sql_as_app_role_sees_no_rows_without_a_tenant(
    engine: Engine, app_conn: psycopg.Connection[Any]
) -> None:
    with engine.tenant(_tenant()) as mem:
        mem.observe("cycle", "visible only inside its tenant")
    count = app_conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
        engine.tables.memories.ident)).fetchone()
    assert count == (0,)


def test_demo_runs_and_a_second_run_writes_nothing_new(pg: PostgresHandle,
                                                       spectral: AgentSpec) -> None:
    specs = sorted(str(p) for p in (ROOT / "agents").glob("*.yaml"))
    first, second = io.StringIO(), io.StringIO()
    assert run_demo(Console(file=first, width=120), specs) == 0
    assert run_demo(Console(file=second, width=120), specs) == 0
    out = second.getvalue()
    assert "0 agent plan(s) applied, 5 unchanged" in out
    assert "ws-acme: 3 memories (0 new, 3 already there)" in out
    assert "no tenant set: 0 row(s) visible" in out
    assert out.count("intact") == 2
    # the dev install has the embeddings extra: the main job ranks by meaning (the spec's
    # semantic signal) on rows the engine embedded as it wrote them; without the model the
    # lexical signal stands in (the next test but one)
    assert "embedding model sentence-transformers/all-MiniLM-L6-v2 loaded" in first.getvalue()
    assert "semantic #1" in out and "lexical #" not in out


def test_explain_reports_the_model_loading_and_ranks_the_demo_rows_semantically(
    pg: PostgresHandle, spectral: AgentSpec, capsys: pytest.CaptureFixture[str]
) -> None:
    from primitives.cli import main

    specs = sorted(str(p) for p in (ROOT / "agents").glob("*.yaml"))
    assert run_demo(Console(file=io.StringIO(), width=120), specs) == 0
    capsys.readouterr()
    assert main(["explain", str(ROOT / "agents" / "spectral_agent.yaml"), "ws-acme",
                 "lower temperature stops made-up answers"]) == 0
    captured = capsys.readouterr()
    progress = captured.err.splitlines()
    assert progress[0] == "loading the embedding model..."
    assert progress[1].startswith("model sentence-transformers/all-MiniLM-L6-v2 loaded in ")
    assert progress[2] == "searching..."
    assert "Lowering temperature" in captured.out and "semantic #1" in captured.out


def test_demo_without_the_embedding_model_says_so_and_runs_lexically(
    pg: PostgresHandle, spectral: AgentSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    import primitives.embeddings as embeddings
    from primitives.errors import EmbedderUnavailable

    def unavailable(spec: AgentSpec) -> object:
        raise EmbedderUnavailable("no model here (test)")

    monkeypatch.setattr(embeddings, "default_embedder", unavailable)
    out = io.StringIO()
    specs = sorted(str(p) for p in (ROOT / "agents").glob("*.yaml"))
    assert run_demo(Console(file=out, width=120), specs) == 0
    text = out.getvalue()
    assert "semantic search is off: no model here (test)" in text
    assert "semantic #" not in text and "lexical #1" in text
