"""Loading specs: the reference specs load, bad specs fail with located errors, defaults fill in.

No database needed. Bad specs are small edits of ``BASE``; each test asserts the exact line,
the field and that the message says what is allowed.
"""

from __future__ import annotations

import glob
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from primitives.errors import PolicyNotFound, SpecError
from primitives.spec import (
    TYPOLOGY_DEFAULTS,
    AgentSpec,
    RetentionPolicy,
    Tier,
    format_duration,
    load_spec,
    load_spec_text,
    load_specs,
    parse_duration,
)

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted(glob.glob(str(ROOT / "agents" / "*.yaml")))

# Line numbers of BASE, for the tests that assert where an error points:
#   1 version      6 typology        10 tiers[0] (run)        15 persistence
#   2 agent        7 typology.run    11 tiers[0].boundary     16 persistence.store
#   3 anchor       8 typology.tenant 12 tiers[1] (tenant)     17 retrieval
#   4 anchor.keys  9 tiers           13 tiers[1].boundary     18 retrieval.signals
#   5 anchor.required_at_write       14 tiers[1].persistent
BASE = """\
version: 1
agent: demo
anchor:
  keys: [tenant_id]
  required_at_write: [tenant_id]
typology:
  run: [episodic]
  tenant: [episodic, semantic, procedural]
tiers:
  - name: run
    boundary: {lifecycle: run_end}
  - name: tenant
    boundary: {scope_change: tenant_id}
    persistent: true
persistence:
  store: {schema: demo, prefix: demo}
retrieval:
  signals: [lexical, recency]
"""


def edit(text: str, old: str, new: str) -> str:
    """``text`` with ``old`` replaced; fails loudly if ``old`` is not there exactly once."""
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


def load(text: str, **kwargs: Any) -> AgentSpec:
    kwargs.setdefault("policies", {})
    return load_spec_text(text, file="demo.yaml", **kwargs)


def fail(text: str, **kwargs: Any) -> SpecError:
    with pytest.raises(SpecError) as info:
        load(text, **kwargs)
    assert info.value.file == "demo.yaml"
    return info.value


# The reference specs -----------------------------------------------------------------------------
def test_all_five_reference_specs_are_present() -> None:
    names = sorted(Path(p).name for p in SPECS)
    assert names == ["assistant_memory.yaml", "mace.yaml", "operations_agent.yaml",
                     "spectral_agent.yaml", "world_agent.yaml"]


@pytest.mark.parametrize("path", SPECS, ids=lambda p: Path(p).stem)
def test_reference_spec_loads(path: str) -> None:
    spec = load_spec(path)
    assert spec.source == path
    assert spec.persistent_tier is spec.tiers[-1]
    for deviation in spec.deviations:
        assert deviation.justification.strip()


def test_reference_specs_load_together_with_unique_names_and_prefixes() -> None:
    specs = load_specs(list(SPECS))
    assert len({s.agent for s in specs}) == 5
    pairs = {(s.persistence.store.schema_, s.persistence.store.prefix) for s in specs}
    assert len(pairs) == 5


def test_load_specs_refuses_a_reused_schema_and_prefix(tmp_path: Path) -> None:
    first = tmp_path / "one.yaml"
    second = tmp_path / "two.yaml"
    first.write_text(BASE)
    second.write_text(edit(BASE, "agent: demo", "agent: other"))
    with pytest.raises(SpecError) as info:
        load_specs([first, second])
    assert info.value.field == "persistence.store.prefix"
    assert "demo.demo" in info.value.message and str(first) in info.value.message


def test_load_specs_refuses_a_reused_agent_name(tmp_path: Path) -> None:
    first = tmp_path / "one.yaml"
    second = tmp_path / "two.yaml"
    first.write_text(BASE)
    second.write_text(edit(BASE, "prefix: demo", "prefix: other"))
    with pytest.raises(SpecError) as info:
        load_specs([first, second])
    assert info.value.field == "agent"


# Located errors ----------------------------------------------------------------------------------
def test_malformed_yaml_names_the_line_and_what_was_expected() -> None:
    err = fail(edit(BASE, "keys: [tenant_id]", "keys: [tenant_id"))
    assert err.line == 5  # the parser notices the unclosed list on the next key
    assert err.field is None
    assert err.message.startswith("malformed YAML")
    assert "expected ',' or ']'" in err.message


def test_unknown_key_suggests_the_closest_and_lists_allowed_keys() -> None:
    err = fail(edit(BASE, "    persistent: true", "    persistant: true"))
    assert (err.line, err.field) == (14, "tiers[1].persistant")
    assert "unknown key 'persistant' (did you mean 'persistent'?)" in err.message
    assert "Allowed keys: name, boundary, persistent" in err.message


def test_unknown_enum_value_lists_the_allowed_values() -> None:
    err = fail(edit(BASE, "lifecycle: run_end", "lifecycle: rn_end"))
    assert (err.line, err.field) == (11, "tiers[0].boundary.lifecycle")
    assert "unknown value 'rn_end' (did you mean 'run_end'?)" in err.message
    assert "Expected one of: interaction_end, conversation_end, thread_close" in err.message
    assert "session_end, job_end" in err.message


def test_missing_foundational_primitive_is_named() -> None:
    err = fail(edit(BASE, "retrieval:\n  signals: [lexical, recency]\n", ""))
    assert (err.line, err.field) == (1, "retrieval")
    assert "missing foundational primitive 'retrieval'" in err.message
    assert "primitives init" in err.message


def test_deviation_without_justification_is_refused() -> None:
    text = BASE + "behavior:\n  decay:\n    procedural: {model: forcing_function, horizon: 30d}\n"
    err = fail(text)
    assert (err.line, err.field) == (21, "behavior.decay.procedural")
    assert ("deviates from the typology default (model: exempt -> forcing_function, "
            "horizon: None -> 30d) without a justification") in err.message
    assert "add `justification: <why>`" in err.message


def test_typology_naming_an_undeclared_tier_lists_declared_tiers() -> None:
    err = fail(edit(BASE, "  run: [episodic]\n", "  run: [episodic]\n  rnu: [episodic]\n"))
    assert (err.line, err.field) == (8, "typology.rnu")
    assert "typology names tier 'rnu', which is not declared in tiers" in err.message
    assert "(did you mean 'run'?)" in err.message
    assert "Declared tiers: run, tenant." in err.message


def test_spec_without_a_persistent_tier_is_refused() -> None:
    err = fail(edit(BASE, "    persistent: true\n", ""))
    assert (err.line, err.field) == (9, "tiers")
    assert "no persistent tier: mark the top tier `persistent: true`" in err.message


def test_duplicate_tier_names_are_refused() -> None:
    text = edit(BASE, "  - name: tenant\n",
                "  - name: run\n    boundary: {lifecycle: session_end}\n  - name: tenant\n")
    err = fail(text)
    assert (err.line, err.field) == (12, "tiers[1].name")
    assert "duplicate tier name 'run' (also tiers[0])" in err.message


def test_anchor_key_missing_from_required_at_write_is_refused() -> None:
    text = edit(BASE, "  keys: [tenant_id]\n  required_at_write: [tenant_id]\n",
                "  keys: [tenant_id, user_id]\n  required_at_write: [user_id]\n")
    err = fail(text)
    assert (err.line, err.field) == (5, "anchor.required_at_write")
    assert "anchor key 'tenant_id' is missing from required_at_write" in err.message
    assert "tenant key" in err.message


def test_embedding_envelope_keys_load_in_order() -> None:
    text = edit(BASE, "  signals: [lexical, recency]\n", "  signals: [lexical, recency]\n"
                "  embedding: {text: content_with_context, envelope_keys: [previous, topic]}\n")
    assert load(text).retrieval.embedding.envelope_keys == ["previous", "topic"]
    assert load(BASE).retrieval.embedding.envelope_keys == []


def test_embedding_envelope_key_listed_twice_is_refused() -> None:
    err = fail(edit(BASE, "  signals: [lexical, recency]\n", "  signals: [lexical, recency]\n"
                    "  embedding: {envelope_keys: [previous, topic, previous]}\n"))
    assert err.field == "retrieval.embedding.envelope_keys"
    assert "envelope key(s) listed more than once: previous" in err.message


def test_duplicate_yaml_key_points_at_the_second_occurrence() -> None:
    err = fail(edit(BASE, "agent: demo\n", "agent: demo\nagent: other\n"))
    assert (err.line, err.field) == (3, "agent")
    assert "duplicate key 'agent' (first given at line 2)" in err.message


def test_missing_policy_file_raises_policy_not_found() -> None:
    text = edit(BASE, "    persistent: true\n",
                "    persistent: true\n    retention: {policy: tenant_retention}\n")
    policy = RetentionPolicy(kind="retention", name="tenant_retentoin")
    with pytest.raises(PolicyNotFound) as info:
        load(text, policies={"tenant_retentoin": policy})
    err = info.value
    assert (err.line, err.field) == (15, "tiers[1].retention.policy")
    assert "no policy named 'tenant_retention'" in err.message
    assert "(did you mean 'tenant_retentoin'?)" in err.message
    assert "Available: tenant_retentoin." in err.message


def test_missing_policy_is_found_in_a_policies_directory(tmp_path: Path) -> None:
    (tmp_path / "keep.yaml").write_text(
        "version: 1\nkind: retention\nname: tenant_retention\norphan_after: 30d\n"
    )
    text = edit(BASE, "    persistent: true\n",
                "    persistent: true\n    retention: {policy: tenant_retention}\n")
    spec = load_spec_text(text, file="demo.yaml", policies_dir=tmp_path)
    assert spec.policies["tenant_retention"].kind == "retention"
    with pytest.raises(PolicyNotFound):
        load_spec_text(text, file="demo.yaml", policies_dir=tmp_path / "empty")


def test_policy_of_the_wrong_kind_is_refused() -> None:
    text = edit(BASE, "    persistent: true\n",
                "    persistent: true\n    retention: {policy: tenant_retention}\n")
    policy = RetentionPolicy(kind="retention", name="tenant_retention")
    err = fail(text.replace("retention: {policy: tenant_retention}", "retention: {}")
               + "discipline:\n  visibility: {policy: tenant_retention}\n",
               policies={"tenant_retention": policy})
    assert (err.line, err.field) == (21, "discipline.visibility.policy")
    assert "policy 'tenant_retention' is of kind 'retention', expected 'access'" in err.message


def test_promotion_from_procedural_memory_is_refused() -> None:
    text = BASE + ("behavior:\n  promotion:\n"
                   "    - {from: tenant.procedural, to: tenant.semantic}\n")
    err = fail(text)
    assert (err.line, err.field) == (21, "behavior.promotion[0]")
    assert "procedural memory is never promoted" in err.message


def test_ttl_ticks_without_a_tick_clock_is_refused() -> None:
    err = fail(edit(BASE, "    boundary: {lifecycle: run_end}\n",
                    "    boundary: {lifecycle: run_end}\n    ttl_ticks: 3\n"))
    assert (err.line, err.field) == (12, "tiers[0].ttl_ticks")
    assert "ttl_ticks needs `determinism: {clock: ticks}`" in err.message
    assert "idle_after" in err.message


def test_ttl_ticks_with_a_tick_clock_loads() -> None:
    text = edit(BASE, "    boundary: {lifecycle: run_end}\n",
                "    boundary: {lifecycle: run_end}\n    ttl_ticks: 3\n")
    spec = load(text + "determinism: {clock: ticks}\n")
    assert spec.tier("run").ttl_ticks == 3


def test_graph_signal_without_a_graph_section_is_refused() -> None:
    err = fail(edit(BASE, "signals: [lexical, recency]", "signals: [lexical, graph]"))
    assert (err.line, err.field) == (18, "retrieval.signals")
    assert "the graph signal needs a `graph:` section declaring edge types" in err.message


def test_all_problems_of_a_file_are_collected() -> None:
    text = edit(BASE, "lifecycle: run_end", "lifecycle: rn_end")
    text = edit(text, "    persistent: true", "    persistant: true")
    text = edit(text, "signals: [lexical, recency]", "signals: [lexical, recncy]")
    err = fail(text)
    located = sorted((p.line, p.field) for p in err.problems)
    assert located == [(11, "tiers[0].boundary.lifecycle"), (14, "tiers[1].persistant"),
                       (18, "retrieval.signals[1]")]
    assert (err.line, err.field) == (err.problems[0].line, err.problems[0].field)
    rendered = str(err)
    assert "demo.yaml:11: tiers[0].boundary.lifecycle:" in rendered
    assert "demo.yaml:18: retrieval.signals[1]:" in rendered


def test_cross_field_problems_are_collected_too() -> None:
    text = edit(BASE, "  run: [episodic]\n", "  run: [episodic]\n  rnu: [episodic]\n")
    text = edit(text, "signals: [lexical, recency]", "signals: [lexical, graph]")
    err = fail(text)
    assert [p.field for p in err.problems] == ["typology.rnu", "retrieval.signals"]
    assert [p.line for p in err.problems] == [8, 19]


# Behavioural defaults and deviations -------------------------------------------------------------
def test_justified_deviation_is_recorded_with_default_and_value() -> None:
    text = BASE + ("behavior:\n  decay:\n    procedural:\n      model: forcing_function\n"
                   "      horizon: 60d\n      justification: preferences here go stale fast\n")
    spec = load(text)
    assert spec.behavior.decay["procedural"].model == "forcing_function"
    recorded = {(d.primitive, d.subject, d.field): d for d in spec.deviations}
    model = recorded[("decay", "procedural", "model")]
    assert (model.default, model.value) == ("exempt", "forcing_function")
    assert model.justification == "preferences here go stale fast"
    horizon = recorded[("decay", "procedural", "horizon")]
    assert (horizon.default, horizon.value) == (None, "60d")


def test_stating_a_default_explicitly_needs_no_justification() -> None:
    text = BASE + ("behavior:\n  decay:\n    procedural: {model: exempt}\n"
                   "    episodic: {model: forcing_function, horizon: 30d}\n"
                   "  conflict:\n    semantic: {strategy: update_with_validity}\n")
    spec = load(text)
    assert spec.deviations == []
    assert spec.behavior.decay["episodic"].horizon == timedelta(days=30)


def test_typology_defaults_fill_every_typology_in_use() -> None:
    spec = load(BASE)
    behavior = spec.behavior
    for primitive in ("lifecycle", "decay", "write_policy", "conflict", "consolidation"):
        assert sorted(getattr(behavior, primitive)) == ["episodic", "procedural", "semantic"]
    assert behavior.decay["procedural"].model == "exempt"
    assert behavior.decay["semantic"].model == "validity_window"
    assert behavior.decay["episodic"].model == "forcing_function"
    assert behavior.write_policy["semantic"].mode == "promotion_only"
    assert behavior.conflict["procedural"].strategy == "update_with_supersession"
    assert behavior.lifecycle["procedural"].persistent == "indefinite"
    assert "opinion" not in behavior.decay
    assert set(TYPOLOGY_DEFAULTS["decay"]) >= {"episodic", "semantic", "procedural", "opinion"}


def test_opinion_defaults_to_ebbinghaus_decay() -> None:
    spec = load(edit(BASE, "[episodic, semantic, procedural]", "[episodic, opinion]"))
    decay = spec.behavior.decay["opinion"]
    assert (decay.model, decay.rate, decay.exponent, decay.threshold) == (
        "ebbinghaus", 0.1, 0.8, 0.05)


def test_default_promotions_compound_and_corroborate() -> None:
    text = edit(BASE, "  run: [episodic]\n", "  cycle: [episodic]\n  run: [episodic]\n")
    text = edit(text, "tiers:\n", "tiers:\n  - name: cycle\n    boundary: {lifecycle: cycle_end}\n")
    spec = load(text)
    rules = [(r.from_, r.to, r.criteria, r.at) for r in spec.behavior.promotion]
    assert rules == [
        ("cycle.episodic", "run.episodic", "compounding", "tier_boundary"),
        ("run.episodic", "tenant.episodic", "compounding", "tier_boundary"),
        ("tenant.episodic", "tenant.semantic", "corroboration", "continuous"),
    ]
    assert spec.behavior.promotion[0].dedup_similarity == 0.92
    assert spec.behavior.promotion[2].min_corroborations == 3
    assert spec.deviations == []


def test_checkpointer_tier_gets_no_default_compounding() -> None:
    spec = load(edit(BASE, "    boundary: {lifecycle: run_end}\n",
                     "    boundary: {lifecycle: run_end}\n    placement: checkpointer\n"))
    assert [(r.from_, r.to) for r in spec.behavior.promotion] == [
        ("tenant.episodic", "tenant.semantic")]


def test_promotion_out_of_a_checkpointer_tier_is_refused() -> None:
    text = edit(BASE, "    boundary: {lifecycle: run_end}\n",
                "    boundary: {lifecycle: run_end}\n    placement: checkpointer\n")
    err = fail(text + "behavior:\n  promotion:\n    - {from: run.episodic, to: tenant.episodic}\n")
    assert (err.line, err.field) == (22, "behavior.promotion[0].from")
    assert "checkpointer-placed" in err.message


def test_retrieval_scope_cannot_name_a_checkpointer_tier() -> None:
    text = edit(BASE, "    boundary: {lifecycle: run_end}\n",
                "    boundary: {lifecycle: run_end}\n    placement: checkpointer\n")
    err = fail(text + "  scope: {run: 0.5, tenant: 1.0}\n")
    assert (err.line, err.field) == (20, "retrieval.scope.run")
    assert "checkpointer-placed" in err.message


def test_explicit_promotion_overrides_the_generated_one() -> None:
    text = BASE + ("behavior:\n  promotion:\n    - from: tenant.episodic\n      to: tenant.semantic\n"
                   "      min_corroborations: 5\n      justification: a noisy domain\n")
    spec = load(text)
    semantic = [r for r in spec.behavior.promotion if r.to == "tenant.semantic"]
    assert len(semantic) == 1 and semantic[0].min_corroborations == 5
    assert [(d.field, d.default, d.value) for d in spec.deviations] == [
        ("min_corroborations", 3, 5)]


def test_context_budget_deviation_records_each_changed_field() -> None:
    text = BASE + (
        "behavior:\n  context:\n    total_tokens: 2000\n"
        "    complexity: {simple: 1000, complex: 3000}\n    blocks:\n"
        "      - {name: all, tiers: [run, tenant], share: 1.0, priority: 1, presence: always}\n"
        "    justification: one block is enough here\n")
    spec = load(text)
    assert sorted(d.field for d in spec.deviations) == ["blocks", "complexity", "total_tokens"]
    with pytest.raises(SpecError, match="without a justification"):
        load(text.replace("    justification: one block is enough here\n", ""))


@pytest.mark.parametrize(("block", "field", "message"), [
    ("{name: who, content: entity_profiles, tokens: 100, priority: 1, presence: always}",
     "behavior.context.blocks[0].content", "need a `graph:` section"),
    ("{name: facts, tiers: [run], typology: [semantic], tokens: 100, priority: 1, "
     "presence: always}", "behavior.context.blocks[0].typology", "holds 'semantic'"),
    ("{name: facts, tiers: [tenant], share: 0.5, priority: 1, presence: always}",
     "behavior.context.blocks[0].share", "a share of what?"),
])
def test_incoherent_context_block_is_refused(block: str, field: str, message: str) -> None:
    err = fail(BASE + f"behavior:\n  context:\n    justification: x\n    blocks:\n      - {block}\n")
    assert (err.line, err.field) == (23, field)
    assert message in err.message


def test_context_shares_cannot_exceed_the_whole() -> None:
    text = BASE + ("behavior:\n  context:\n    total_tokens: 1000\n    justification: x\n"
                   "    blocks:\n"
                   "      - {name: a, tiers: [run], share: 0.6, priority: 1, presence: always}\n"
                   "      - {name: b, tiers: [tenant], share: 0.6, priority: 2, presence: always}\n")
    err = fail(text)
    assert (err.line, err.field) == (23, "behavior.context.blocks")
    assert "add up to 1.2" in err.message


# Discipline and determinism extensions -----------------------------------------------------------
def test_trigram_backstop_needs_a_canonical_source() -> None:
    text = BASE + ("discipline:\n  non_mirror:\n    - category: rule_content\n"
                   "      defense: workshop_discipline\n      backstop: [trigram_trigger]\n")
    err = fail(text)
    assert (err.line, err.field) == (21, "discipline.non_mirror[0].canonical_source")
    assert "needs canonical_source" in err.message
    spec = load(text + "      canonical_source: worlds.rules.body_text\n")
    assert spec.discipline.non_mirror[0].defenses == ["workshop_discipline", "trigram_trigger"]


def test_seed_key_must_be_an_anchor_or_provenance_key() -> None:
    err = fail(BASE + "determinism: {ids: seeded, seed_key: job_sed}\n")
    assert (err.line, err.field) == (19, "determinism.seed_key")
    assert "seed_key 'job_sed' is not an anchor or provenance key" in err.message
    err = fail(BASE + "determinism: {ids: seeded}\n")
    assert "set determinism.seed_key" in err.message
    text = edit(BASE, "  required_at_write: [tenant_id]\n",
                "  required_at_write: [tenant_id]\n  provenance: [job_seed]\n")
    assert load(text + "determinism: {ids: seeded, seed_key: job_seed}\n").determinism.ids == "seeded"


def test_intent_traversal_must_use_declared_edges() -> None:
    text = edit(BASE, "signals: [lexical, recency]", "signals: [lexical, graph]")
    text += ("  intents:\n    routes: {why: {graph: 1.0}}\n"
             "graph: {edges: [temporal, entity]}\n")
    err = fail(text)
    assert (err.line, err.field) == (19, "retrieval.intents.traverse.why")
    assert "intent 'why' traverses 'causal' edges, which graph.edges does not declare" in (
        err.message)
    fixed = text.replace("routes: {why: {graph: 1.0}}",
                         "routes: {why: {graph: 1.0}}\n    traverse: {why: [temporal], "
                         "when: [temporal], who: [entity], what: [entity], general: [entity]}")
    assert load(fixed).retrieval.intents is not None


def test_extraction_promotion_at_session_end_is_a_justified_deviation() -> None:
    text = BASE + ("behavior:\n  promotion:\n    - from: tenant.episodic\n      to: tenant.semantic\n"
                   "      criteria: extraction\n      at: session_end\n"
                   "      justification: the write path extracts facts per session\n")
    spec = load(text)
    rule = spec.behavior.promotion[-1]
    assert (rule.criteria, rule.at, rule.min_corroborations) == ("extraction", "session_end", None)
    assert sorted(d.field for d in spec.deviations) == ["at", "criteria"]


# Durations ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "seconds", "canonical"), [
    ("30d", 30 * 86400, "30d"),
    ("1800s", 1800, "30m"),
    ("12h", 12 * 3600, "12h"),
    ("90m", 90 * 60, "90m"),
    ("2w", 14 * 86400, "2w"),
    ("45s", 45, "45s"),
])
def test_durations_parse_and_serialise_back(text: str, seconds: int, canonical: str) -> None:
    value = parse_duration(text)
    assert value == timedelta(seconds=seconds)
    assert format_duration(value) == canonical
    assert parse_duration(format_duration(value)) == value


def test_duration_fields_round_trip_through_the_models() -> None:
    tier = Tier.model_validate({"name": "session", "boundary": {
        "lifecycle": "session_end", "idle_after": "30d"}})
    assert tier.boundary.idle_after == timedelta(days=30)
    dumped = tier.model_dump(mode="json", by_alias=True)
    assert dumped["boundary"]["idle_after"] == "30d"
    assert Tier.model_validate(dumped) == tier


@pytest.mark.parametrize("bad", ["30", "30 days", "-1d", "1y", True])
def test_invalid_durations_say_how_to_write_one(bad: object) -> None:
    with pytest.raises(ValueError, match=r"s, m, h, d or w|number with a unit"):
        parse_duration(bad)


def test_invalid_duration_in_a_spec_is_located() -> None:
    err = fail(edit(BASE, "{lifecycle: run_end}", "{lifecycle: run_end, idle_after: 30 days}"))
    assert (err.line, err.field) == (11, "tiers[0].boundary.idle_after")
    assert "e.g. 30d, 1800s" in err.message


@pytest.mark.parametrize(("visibility", "wanted"), [
    ("{cross_context: event_driven}", "declare at least one event and one sanitization gate"),
    ("{cross_context: tool_mediated}", "declare at least one tool and one gate"),
])
def test_cross_context_needs_what_it_publishes_or_answers_through(
        visibility: str, wanted: str) -> None:
    err = fail(BASE + f"discipline:\n  visibility: {visibility}\n")
    assert wanted in str(err)
    gated = BASE + ("discipline:\n  sanitization:\n"
                    "    - {name: out, from: tenant.semantic, to: elsewhere, transform: none}\n"
                    "  visibility: {cross_context: event_driven, events: [demo.written]}\n")
    assert load(gated).discipline.visibility.events == ["demo.written"]


def test_consolidation_that_is_not_idempotent_is_refused() -> None:
    text = BASE + ("behavior:\n  consolidation:\n    semantic: {method: merge, idempotent: false,"
                   " justification: re-extract every run}\n")
    err = fail(text)
    assert err.field is not None and err.field.startswith("behavior.consolidation.semantic")
    assert "idempotent: false cannot be honoured" in err.message
    spec = load(BASE + "behavior:\n  consolidation:\n    semantic: {method: merge, idempotent: "
                       "true, justification: merge repeated facts}\n")
    assert spec.behavior.consolidation["semantic"].idempotent is True


def test_an_exact_replay_needs_the_tick_clock_and_seeded_ids() -> None:
    text = edit(BASE, "  required_at_write: [tenant_id]\n",
                "  required_at_write: [tenant_id]\n  provenance: [job_seed]\n")
    err = fail(text + "determinism: {ids: seeded, seed_key: job_seed, replay: exact}\n")
    assert err.field == "determinism.replay"
    assert "needs the tick clock and seeded ids" in err.message
    err = fail(text + "determinism: {clock: ticks, seed_key: job_seed, replay: exact}\n")
    assert err.field == "determinism.replay"
    spec = load(text + "determinism: {clock: ticks, ids: seeded, seed_key: job_seed, "
                "replay: exact}\n")
    assert spec.determinism.replay == "exact"
