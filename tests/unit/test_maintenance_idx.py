"""The maintain indexes compiled from a spec (``primitives.compile._maintenance_idx``): which
specs get which, and names that follow their definitions."""

from __future__ import annotations

from pathlib import Path

from primitives.compile import agent_tables
from primitives.compile._maintenance_idx import maintenance_indexes
from primitives.spec import AgentSpec, load_spec, load_spec_text

ROOT = Path(__file__).resolve().parents[2]

SPEC = """\
version: 1
agent: mi_unit
anchor: {keys: [user_id], required_at_write: [user_id]}
typology:
  memory: [episodic, semantic]
tiers:
  - {name: memory, boundary: {scope_change: user_id}, persistent: true}
persistence:
  checkpointer: {enabled: false}
  store: {schema: munit, prefix: mi_unit}
retrieval: {signals: [lexical]}
behavior:
  lifecycle:
    episodic: {persistent: %(episodic)s, justification: under test}
    semantic: {persistent: %(semantic)s, archive_on: [failed_corroborations],
               justification: under test}
  decay:
    episodic: {model: forcing_function, horizon: 1d, justification: under test}
    semantic: {model: validity_window, validity: %(validity)s, justification: under test}
"""


def _spec(episodic: str = "forcing_function", semantic: str = "corroborated",
          validity: str = "1d") -> AgentSpec:
    return load_spec_text(SPEC % {"episodic": episodic, "semantic": semantic,
                                  "validity": validity}, policies={})


def _names(spec: AgentSpec) -> list[str]:
    return [index.name for index in maintenance_indexes(spec, agent_tables(spec))]


def test_each_index_exists_only_for_the_pass_its_spec_declares() -> None:
    stems = [n.rsplit("_", 1)[0] for n in _names(_spec())]
    # the typology defaults promote episodic rows to semantic on corroboration
    assert stems == ["mi_unit_memories_corroboration_due", "mi_unit_memories_dispositions",
                     "mi_unit_memories_evidence"]
    kept = [n.rsplit("_", 1)[0] for n in _names(_spec(episodic="indefinite",
                                                        semantic="indefinite"))]
    assert kept == ["mi_unit_memories_evidence"]
    spectral = load_spec(ROOT / "agents" / "spectral_agent.yaml")
    assert len(_names(spectral)) == 3


def test_a_changed_window_changes_the_name_and_the_earlier_name_shares_its_prefix() -> None:
    daily, weekly = _spec(), _spec(validity="7d")
    [due_daily, disp_daily, _] = maintenance_indexes(daily, agent_tables(daily))
    [due_weekly, disp_weekly, _] = maintenance_indexes(weekly, agent_tables(weekly))
    assert due_daily.name != due_weekly.name and disp_daily.name == disp_weekly.name
    assert due_daily.supersedes_prefix == due_weekly.supersedes_prefix
    assert due_daily.supersedes_prefix is not None
    assert due_daily.name.startswith(due_daily.supersedes_prefix)
    assert _names(_spec()) == _names(daily)                          # stable for one spec
