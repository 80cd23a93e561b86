"""Decay models as pure formulas, and the SQL they compile to (no database).

tests/integration/test_decay.py holds the SQL to these formulas on real rows.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from primitives.compile import agent_tables
from primitives.engine import SearchResult
from primitives.engine._records import MEMORY_COLUMNS, Explanation, Hit
from primitives.lifecycle._decay import (
    DecayRow,
    decay_models,
    decay_passes,
    decay_weight,
    effective_confidence,
)
from primitives.retrieval import search_statement
from primitives.spec import AgentSpec, load_spec, load_spec_text

NOW = datetime(2026, 6, 1, tzinfo=UTC)

PROBE = """\
version: 1
agent: decay_probe
anchor: {keys: [user_id], required_at_write: [user_id]}
typology:
  session: [episodic]
  memory: [episodic, semantic, procedural, opinion]
tiers:
  - {name: session, boundary: {lifecycle: session_end}}
  - {name: memory, boundary: {scope_change: user_id}, persistent: true}
persistence:
  checkpointer: {enabled: false}
  store: {schema: decayprobe, prefix: probe}
retrieval:
  signals: [lexical, recency]
  fusion: {weights: {lexical: 1.0, recency: 0.5}}
  scope: {memory: 1.0}
graph:
  edges: [entity]
  entity_types: [person]
  protect_entity_mentions_over: 2
  reinforcement: %(reinforcement)s
behavior:
  write_policy:
    semantic: {mode: mixed, extract_threshold: 0.6, justification: tests write facts directly}
  lifecycle:
    procedural:
      archive_on: [%(procedural_archive_on)s]
      justification: the archive rule under test
  decay:
    opinion:
      model: ebbinghaus
      rate: 0.1
      exponent: 0.8
      threshold: 0.05
      protect: [%(protect)s]
      justification: the protection rules under test
    procedural:
      model: ebbinghaus
      rate: 0.1
      exponent: 0.8
      threshold: 0.05
      protect: []
      justification: an Ebbinghaus typology nothing protects
"""


def probe(protect: str = "confirmed, action_linked, entity_mentions",
          reinforcement: float = 0.05,
          procedural_archive_on: str = "decay_threshold, explicit_invalidation") -> AgentSpec:
    return load_spec_text(PROBE % {"protect": protect, "reinforcement": reinforcement,
                                   "procedural_archive_on": procedural_archive_on},
                          policies={})


def row(days: float = 0, **fields: object) -> DecayRow:
    """A row written ``days`` before NOW, at confidence 1, default decay rate."""
    then = NOW - timedelta(days=days)
    values: dict[str, object] = {"confidence": 1.0, "decay_rate": None, "event_time": then,
                                 "valid_from": then}
    values.update(fields)
    return DecayRow(**values)  # type: ignore[arg-type]


# ebbinghaus ------------------------------------------------------------------------------------
def test_ebbinghaus_confidence_falls_as_exp_of_minus_lambda_days_to_the_exponent() -> None:
    spec = probe(reinforcement=0)
    assert effective_confidence(spec, "procedural", row(0), NOW) == pytest.approx(1.0)
    assert effective_confidence(spec, "procedural", row(30), NOW) == pytest.approx(
        math.exp(-0.1 * 30 ** 0.8))
    assert effective_confidence(spec, "procedural", row(30, confidence=0.6), NOW) == \
        pytest.approx(0.6 * math.exp(-0.1 * 30 ** 0.8))
    # the row's own rate (a contradicted fact: 0.5) replaces the spec's
    assert effective_confidence(spec, "procedural", row(30, decay_rate=0.5), NOW) == \
        pytest.approx(math.exp(-0.5 * 30 ** 0.8))


def test_ebbinghaus_clock_is_the_last_access_then_corroboration_then_valid_from() -> None:
    spec = probe(reinforcement=0)
    old = NOW - timedelta(days=200)
    recent = NOW - timedelta(days=2)
    accessed = row(200, last_accessed_at=recent, corroborated_at=old)
    corroborated = row(200, corroborated_at=recent)
    expected = math.exp(-0.1 * 2 ** 0.8)
    assert effective_confidence(spec, "procedural", accessed, NOW) == pytest.approx(expected)
    assert effective_confidence(spec, "procedural", corroborated, NOW) == pytest.approx(expected)


def test_ebbinghaus_protect_confirmed_keeps_a_zero_rate_row_at_full_confidence() -> None:
    confirmed = row(300, decay_rate=0.0)
    assert effective_confidence(probe(reinforcement=0), "opinion", confirmed, NOW) == 1.0
    # without `confirmed` in protect, a rate of 0 counts as unset: the spec's rate applies
    unprotected = probe(protect="action_linked", reinforcement=0)
    assert effective_confidence(unprotected, "opinion", confirmed, NOW) == pytest.approx(
        math.exp(-0.1 * 300 ** 0.8))


@pytest.mark.parametrize(("protection", "flag"), [
    ("action_linked", {"action_linked": True}),
    ("entity_mentions", {"mentions_frequent_entity": True}),
])
def test_ebbinghaus_protection_rules_hold_only_when_listed(protection: str,
                                                           flag: dict[str, bool]) -> None:
    protected = row(300, **flag)
    decayed = math.exp(-0.1 * 300 ** 0.8)
    assert effective_confidence(probe(protect=protection, reinforcement=0), "opinion",
                                protected, NOW) == 1.0
    assert effective_confidence(probe(protect="confirmed", reinforcement=0), "opinion",
                                protected, NOW) == pytest.approx(decayed)


def test_reinforcement_adds_its_share_of_ln_access_and_caps_at_one() -> None:
    spec = probe(reinforcement=0.05)
    decayed = math.exp(-0.1 * 30 ** 0.8)
    assert effective_confidence(spec, "procedural", row(30, access_count=20), NOW) == \
        pytest.approx(decayed + 0.05 * math.log(2))
    assert effective_confidence(spec, "procedural", row(0, access_count=1000), NOW) == 1.0
    # reinforcement is an Ebbinghaus rule: other models ignore access counts
    assert effective_confidence(spec, "semantic", row(0, confidence=0.5, access_count=1000),
                                NOW) == 0.5


# validity window, forcing function, exempt ---------------------------------------------------
def test_validity_window_keeps_full_confidence_then_halves_every_validity() -> None:
    spec = probe()  # semantic: the default validity_window of 90 days
    assert effective_confidence(spec, "semantic", row(89), NOW) == 1.0
    assert effective_confidence(spec, "semantic", row(180), NOW) == pytest.approx(0.5)
    assert effective_confidence(spec, "semantic", row(270, confidence=0.8), NOW) == \
        pytest.approx(0.2)
    assert effective_confidence(spec, "semantic", row(300), NOW) == pytest.approx(
        0.5 ** (210 / 90))


def test_re_corroboration_extends_the_validity_window() -> None:
    spec = probe()
    stale = row(300)
    again = row(300, corroborated_at=NOW - timedelta(days=10))
    assert effective_confidence(spec, "semantic", stale, NOW) < 0.25
    assert effective_confidence(spec, "semantic", again, NOW) == 1.0


def test_forcing_function_weight_falls_linearly_to_zero_at_the_horizon() -> None:
    spec = probe()  # episodic: the default forcing_function, horizon 30 days
    assert decay_weight(spec, "episodic", row(0), NOW) == pytest.approx(1.0)
    assert decay_weight(spec, "episodic", row(15), NOW) == pytest.approx(0.5)
    assert decay_weight(spec, "episodic", row(45), NOW) == 0.0
    # confidence itself is unchanged; a row marked exempt (rate 0) keeps weight 1
    assert effective_confidence(spec, "episodic", row(45), NOW) == 1.0
    assert decay_weight(spec, "episodic", row(45, decay_rate=0.0), NOW) == 1.0


def test_exempt_model_never_decays() -> None:
    spec = load_spec("agents/mace.yaml")
    assert {p.model for p in spec.behavior.decay.values()} == {"exempt"}
    for typology in spec.behavior.decay:
        assert effective_confidence(spec, typology, row(3000, confidence=0.7), NOW) == 0.7
        assert decay_weight(spec, typology, row(3000), NOW) == 1.0


# SQL ------------------------------------------------------------------------------------------
def test_all_exempt_specs_rank_recency_by_event_time_and_keep_base_confidence() -> None:
    spec = load_spec("agents/mace.yaml")
    tables = agent_tables(spec)
    models = decay_models(spec)
    assert models.weight_sql(tables) is None
    assert models.confidence_sql(tables).as_string(None) == "m.confidence::float8"
    assert decay_passes(spec, tables) == []


def test_search_statement_ranks_recency_by_decay_weight_and_multiplies_confidence() -> None:
    spec = load_spec("agents/world_agent.yaml")
    tables = agent_tables(spec)
    models = decay_models(spec)
    text = search_statement(tables, ("lexical", "recency"), MEMORY_COLUMNS,
                            decay=models).as_string(None)
    assert "ORDER BY w.weight DESC, m.event_time DESC, m.id" in text
    assert "f.score * tw.weight * c.confidence AS score" in text
    assert "c.confidence FROM fused" in text
    plain = search_statement(tables, ("lexical", "recency"), MEMORY_COLUMNS).as_string(None)
    assert "c.confidence" not in plain and "ORDER BY m.event_time DESC, m.id" in plain
    # a point-in-time search takes decay at as_of
    then = search_statement(tables, ("lexical", "recency"), MEMORY_COLUMNS, decay=models,
                            point_in_time=True).as_string(None)
    assert "%(as_of)s::timestamptz - coalesce(m.corroborated_at, m.valid_from)" in then
    # one statement per decay settings: the same object back
    assert search_statement(tables, ("lexical", "recency"), MEMORY_COLUMNS,
                            decay=decay_models(load_spec("agents/world_agent.yaml"))) is \
        search_statement(tables, ("lexical", "recency"), MEMORY_COLUMNS, decay=models)


def test_typologies_with_one_formula_share_a_case_branch() -> None:
    spec = load_spec("agents/assistant_memory.yaml")
    text = decay_models(spec).confidence_sql(agent_tables(spec)).as_string(None)
    assert text.count("exp(") == 1
    assert "m.typology = ANY('{opinion,procedural,semantic}'::text[])" in text
    assert "e.mention_count > 5" in text  # graph.protect_entity_mentions_over


def test_decay_archive_covers_ebbinghaus_typologies_archiving_on_decay_threshold() -> None:
    spec = probe()
    names = [p.name for p in decay_passes(spec, agent_tables(spec))]
    assert names == ["decay_archive", "corroboration", "dispositions"]
    # an Ebbinghaus typology archives only when its lifecycle archives on decay_threshold
    both = decay_passes(spec, agent_tables(spec))[0].statement.as_string(None)
    assert "'{opinion,procedural}'::text[]" in both
    kept = probe(procedural_archive_on="explicit_invalidation")
    only = decay_passes(kept, agent_tables(kept))[0].statement.as_string(None)
    assert "'{opinion}'::text[]" in only and "'{opinion,procedural}'" not in only
    world = load_spec("agents/world_agent.yaml")  # no Ebbinghaus typology
    assert [p.name for p in decay_passes(world, agent_tables(world))] == [
        "corroboration", "dispositions"]  # its facts live `corroborated`


# abstention result ----------------------------------------------------------------------------
def test_search_result_is_a_list_that_says_whether_it_abstained() -> None:
    empty = SearchResult([], abstained=True, message="I don't know.")
    assert empty == [] and not empty and empty.abstained and empty.message == "I don't know."
    found = SearchResult([1, 2])
    assert found == [1, 2] and not found.abstained and found.message is None
    explanation = Explanation([], (), {}, None, 60, {}, abstained=True, message="no")
    assert isinstance(explanation.hits, SearchResult) and explanation.hits.abstained
    assert Hit.__dataclass_fields__["confidence"].default == 1.0


def test_decay_passes_carry_their_typologies_schedule() -> None:
    assistant = load_spec("agents/assistant_memory.yaml")   # nightly "0 3 * * *" decay
    passes = decay_passes(assistant, agent_tables(assistant))
    assert [(p.name, p.schedule, p.typologies) for p in passes] == [
        ("decay_archive", "0 3 * * *", ("opinion", "procedural", "semantic"))]
    # typologies with different schedules get a pass each, unscheduled ones none
    mixed = probe().model_copy(deep=True)
    mixed.behavior.decay["opinion"] = mixed.behavior.decay["opinion"].model_copy(
        update={"schedule": "*/30 * * * *"})
    archive = [(p.schedule, p.typologies) for p in decay_passes(mixed, agent_tables(mixed))
               if p.name == "decay_archive"]
    assert archive == [(None, ("episodic", "procedural", "semantic")),
                       ("*/30 * * * *", ("opinion",))]
