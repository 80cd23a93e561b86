"""The compiled views without a database: security_invoker, columns, retention and erasure rules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from primitives.compile import (
    ERASED_CONTENT_PATTERN,
    VIEW_COLUMNS,
    Capabilities,
    Plan,
    active_predicate,
    compile_plan,
)
from primitives.compile._views import orphan_after
from primitives.spec import AgentSpec, load_spec, load_spec_text

ROOT = Path(__file__).resolve().parents[2]
SPECTRAL = ROOT / "agents" / "spectral_agent.yaml"


@pytest.fixture(scope="module")
def spectral() -> AgentSpec:
    return load_spec(SPECTRAL)


@pytest.fixture(scope="module")
def plan(spectral: AgentSpec) -> Plan:
    return compile_plan(spectral)


def view_statements(plan: Plan) -> dict[str, str]:
    out: dict[str, str] = {}
    for step in plan.steps:
        text = step.statement.as_string(None)
        match = re.match(r'CREATE OR REPLACE VIEW "[^"]+"\."([^"]+)"', text)
        if match:
            out[match.group(1)] = text
    return out


def select_names(statement: str) -> list[str]:
    """Output column names of the view's outermost SELECT (last quoted name of each item)."""
    body = statement[statement.rindex("\nSELECT ") + len("\nSELECT "):]
    body = body[: body.index("\nFROM")]
    return [re.findall(r'"(\w+)"', item)[-1] for item in body.split(",\n       ")]


def test_every_view_is_security_invoker_and_replaceable(plan: Plan) -> None:
    views = view_statements(plan)
    assert set(views) == {v.name for v in plan.tables.views}
    for text in views.values():
        assert re.match(
            r'CREATE OR REPLACE VIEW "\w+"\."\w+" WITH \(security_invoker = true\) AS\n', text
        )


def test_views_return_the_documented_columns(plan: Plan) -> None:
    views = view_statements(plan)
    tenant = plan.tables.tenant_column
    for suffix, columns in VIEW_COLUMNS.items():
        names = select_names(views[f"spectral_{suffix}"])
        expected = list(columns) if suffix == "audit_policy_coverage" else [tenant, *columns]
        assert names == expected, suffix


def test_active_memories_is_every_memory_column_of_active_unexpired_rows(plan: Plan) -> None:
    text = view_statements(plan)["spectral_active_memories"]
    assert select_names(text) == list(plan.definitions[0].column_names)
    assert active_predicate("m").as_string(None) in text
    assert "m.erased_at IS NULL" in text
    assert "(m.expires_at IS NULL OR m.expires_at > now())" in text


def test_retention_state_orphans_idle_rows_after_the_policy_window(spectral: AgentSpec) -> None:
    text = view_statements(compile_plan(spectral))["spectral_audit_retention_state"]
    assert orphan_after(spectral) is not None
    assert "now() - '180 days'::interval" in text  # workspace_retention: orphan_after 180d
    order = [text.index(f"'{state}'") for state in ("TOMBSTONED", "REFERENCED", "ORPHANED",
                                                     "ACTIVE")]
    assert order == sorted(order)

    no_policy = load_spec_text(
        SPECTRAL.read_text().replace("    retention: {policy: workspace_retention}\n", ""),
        policies_dir=ROOT / "policies",
    )
    text = view_statements(compile_plan(no_policy))["spectral_audit_retention_state"]
    assert orphan_after(no_policy) is None
    assert "interval" not in text


def test_erasure_residue_checks_content_value_and_embedding_when_present(
    spectral: AgentSpec,
) -> None:
    with_vector = view_statements(compile_plan(spectral))["spectral_audit_erasures"]
    assert f"m.content !~ '{ERASED_CONTENT_PATTERN}'" in with_vector
    assert "m.value <> '{}'::jsonb" in with_vector
    assert "m.embedding IS NOT NULL" in with_vector
    plain = compile_plan(spectral, capabilities=Capabilities(vector=False))
    assert "embedding" not in view_statements(plain)["spectral_audit_erasures"]


def test_policy_coverage_lists_every_table_of_the_agent(plan: Plan) -> None:
    text = view_statements(plan)["spectral_audit_policy_coverage"]
    for table in plan.tables.tables:
        assert f"('{table.schema}', '{table.name}')" in text
    for view in plan.tables.views:
        assert f"'{view.name}')" not in text
    assert "'spectral_tenant_isolation'" in text and "'spectral_auditor_read'" in text


def test_supersession_follows_superseded_by_from_the_oldest_version(plan: Plan) -> None:
    text = view_statements(plan)["spectral_audit_supersession"]
    assert text.count("WITH RECURSIVE") == 1
    assert "NOT EXISTS" in text  # roots supersede nothing
    assert "n.id <> ALL (c.path)" in text  # cycles are cut


def test_lineage_and_sanitization_read_the_journal(plan: Plan) -> None:
    views = view_statements(plan)
    assert "ORDER BY e.seq" in views["spectral_audit_lineage"]
    assert "WHERE e.kind = 'sanitized'" in views["spectral_audit_sanitization"]
    assert "e.kind = 'erased'" in views["spectral_audit_erasures"]


def test_every_view_has_a_comment_for_auditors(plan: Plan) -> None:
    comments = [s.statement.as_string(None) for s in plan.steps
                if s.statement.as_string(None).startswith("COMMENT ON VIEW")]
    assert len(comments) == len(plan.tables.views)
