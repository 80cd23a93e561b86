"""``behavior.consolidation.<typology>.trigger``: which scope ends consolidate a typology.

``session_end`` / ``job_end`` restrict an extraction from a persistent source to the scopes of
tiers ending at that lifecycle event; ``tier_boundary`` (the default) keeps every transient
tier the rule's ``at`` names. A transient source consolidated at another event's end is
refused: its rows leave at its own scope end.
"""

from __future__ import annotations

import pytest

from primitives.engine._consolidate import extraction_rules
from primitives.errors import SpecError
from primitives.spec import load_spec_text

SPEC = """\
version: 1
agent: triggers
anchor: {{keys: [user_id], required_at_write: [user_id]}}
typology:
  chat: [episodic]
  batch: [episodic]
  long_term: [episodic, semantic]
tiers:
  - {{name: chat, boundary: {{lifecycle: session_end}}}}
  - {{name: batch, boundary: {{lifecycle: job_end}}}}
  - {{name: long_term, boundary: {{scope_change: user_id}}, persistent: true}}
persistence:
  checkpointer: {{enabled: false}}
  store: {{schema: triggers, prefix: tr}}
retrieval:
  signals: [lexical]
behavior:
  consolidation:
    semantic: {{method: merge{trigger}, justification: test}}
  promotion:
    - {{from: {source}, to: long_term.semantic, criteria: extraction, at: tier_boundary,
       justification: test}}
"""


@pytest.mark.parametrize(("trigger", "bounds"), [
    ("", ("chat", "batch")),
    (", trigger: tier_boundary", ("chat", "batch")),
    (", trigger: session_end", ("chat",)),
    (", trigger: job_end", ("batch",)),
])
def test_the_trigger_decides_which_scope_ends_consolidate(
        trigger: str, bounds: tuple[str, ...]) -> None:
    spec = load_spec_text(SPEC.format(trigger=trigger, source="long_term.episodic"))
    [rule] = extraction_rules(spec)
    assert rule.boundary_tiers == bounds
    assert [t for t in ("chat", "batch") if rule.runs_at_end_of(t)] == list(bounds)


def test_a_transient_source_consolidated_at_another_events_end_is_refused() -> None:
    spec = load_spec_text(SPEC.format(trigger=", trigger: job_end", source="batch.episodic"))
    [rule] = extraction_rules(spec)
    assert rule.boundary_tiers == ("batch",)
    with pytest.raises(SpecError, match=r"consolidated at session_end .* source tier 'batch' "
                                        r"ends at job_end"):
        load_spec_text(SPEC.format(trigger=", trigger: session_end", source="batch.episodic"))
