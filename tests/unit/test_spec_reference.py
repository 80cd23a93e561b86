"""The reference specs say what their seeds say, and the JSON Schema accepts them.

DESIGN §9: the five specs in agents/ are the framework's acceptance tests. These tests pin
the choices each spec makes for its seed, so an edit that drifts from the seed fails here.
"""

from __future__ import annotations

import glob
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from primitives.spec import AgentSpec, load_spec, spec_json_schema

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted(glob.glob(str(ROOT / "agents" / "*.yaml")))


def spec(name: str) -> AgentSpec:
    return load_spec(ROOT / "agents" / f"{name}.yaml")


def deviated(agent: AgentSpec) -> set[tuple[str, str, str]]:
    return {(d.primitive, d.subject, d.field) for d in agent.deviations}


def promotions(agent: AgentSpec) -> list[tuple[str, str, str, str]]:
    return [(r.from_, r.to, r.criteria, r.at) for r in agent.behavior.promotion]


# World Agent (seed 003) --------------------------------------------------------------------------
def test_world_agent_is_anchored_on_the_world_with_version_as_provenance() -> None:
    world = spec("world_agent")
    assert world.anchor.keys == ["world_id"]
    assert world.anchor.provenance == ["world_version"]
    assert world.tier_names == ["interaction", "session", "world"]
    assert world.typology == {"interaction": ["episodic"], "session": ["episodic"],
                              "world": ["semantic", "procedural"]}
    assert world.persistence.store.schema_ == "worlds"


def test_world_agent_defends_rule_text_with_a_trigram_trigger() -> None:
    world = spec("world_agent")
    non_mirror = {item.category: item for item in world.discipline.non_mirror}
    rules = non_mirror["world_model_rule_content"]
    assert rules.defense == "trigram_trigger"
    assert rules.canonical_source == "worlds.rules.body_text"
    assert non_mirror["spectral_memory"].defense == "reference_only"


def test_world_agent_hedges_claims_and_can_say_i_dont_know() -> None:
    world = spec("world_agent")
    gates = world.discipline.sanitization
    assert {g.from_ for g in gates} == {"world.semantic", "world.procedural"}
    assert {(g.to, g.transform, g.policy) for g in gates} == {
        ("operator_chat", "hedge_map", "world_hedge_map")}
    hedges = world.policies["world_hedge_map"]
    assert hedges.kind == "sanitization" and "unknown" in hedges.hedges
    assert world.retrieval.abstain is not None
    assert "I don't know" in world.retrieval.abstain.message
    assert world.discipline.visibility.cross_context == "tool_mediated"
    assert world.discipline.visibility.tools == ["ask_world_agent"]


def test_world_agent_promotes_corroborated_session_observations() -> None:
    world = spec("world_agent")
    assert promotions(world) == [
        ("interaction.episodic", "session.episodic", "compounding", "tier_boundary"),
        ("session.episodic", "world.semantic", "corroboration", "continuous"),
        ("session.episodic", "world.procedural", "corroboration", "continuous"),
    ]
    # seed 003: the World Agent accepts the typology defaults; its one departure is that one
    # corroborated observation feeds both rules (keyed on source and target, not source alone)
    assert {(d.subject, d.field, d.value) for d in world.deviations} == {
        ("session.episodic -> world.semantic", "idempotency_key", "source_and_target"),
        ("session.episodic -> world.procedural", "idempotency_key", "source_and_target")}


# Operations Agent (seed 003) ---------------------------------------------------------------------
def test_operations_agent_is_operator_keyed_and_shares_the_platform_schema() -> None:
    ops = spec("operations_agent")
    spectral = spec("spectral_agent")
    assert ops.anchor.tenant_key == "operator_id"
    assert ops.persistence.store.schema_ == spectral.persistence.store.schema_ == "platform"
    assert ops.persistence.store.prefix != spectral.persistence.store.prefix
    assert ops.discipline.visibility.cross_context == "none"


def test_operations_agent_tiers_follow_adr_059() -> None:
    ops = spec("operations_agent")
    assert ops.tier("conversation").placement == "checkpointer"
    assert ops.tier("conversation").boundary.lifecycle == "thread_close"
    session = ops.tier("operator_session").boundary
    assert (session.lifecycle, session.idle_after) == ("session_end", timedelta(days=30))
    assert ops.typology["operator"][0] == "procedural"
    assert len(ops.typology["operator_session"]) > 1  # mixed typology
    assert "conversation" not in ops.retrieval.scope


def test_operations_agent_compounds_and_archives_at_session_close() -> None:
    ops = spec("operations_agent")
    assert ("operator_session.episodic", "operator.episodic", "compounding",
            "tier_boundary") in promotions(ops)
    assert not any(rule.from_.startswith("conversation.") for rule in ops.behavior.promotion)
    assert ops.behavior.lifecycle["episodic"].transient == "archive_at_scope_end"
    assert deviated(ops) == {("lifecycle", "episodic", "transient"),
                             ("lifecycle", "semantic", "transient"),
                             ("promotion", "operator.episodic -> operator.procedural",
                              "idempotency_key")}


def test_operations_agent_is_procedural_dominant_and_decay_exempt() -> None:
    ops = spec("operations_agent")
    assert ops.behavior.decay["procedural"].model == "exempt"
    weights = ops.retrieval.fusion.weights
    assert weights["recency"] > weights["semantic"]


def test_operations_agent_keeps_rules_scan_traces_and_customer_pii_out() -> None:
    ops = spec("operations_agent")
    non_mirror = {item.category: item for item in ops.discipline.non_mirror}
    assert set(non_mirror) == {"world_model_rule_content", "scan_trace_data", "customer_pii"}
    rules = non_mirror["world_model_rule_content"]
    assert rules.defenses == ["workshop_discipline", "trigram_trigger"]
    assert rules.canonical_source == "worlds.rules.body_text"
    assert ops.discipline.pii is not None and ops.discipline.pii.before == ["any_write"]
    pii = ops.policies["operations_pii"]
    assert pii.kind == "pii" and pii.on_detect == "redact" and not pii.raw_with_consent


# MACE (seed 001) ---------------------------------------------------------------------------------
def test_mace_is_deterministic() -> None:
    mace = spec("mace")
    determinism = mace.determinism
    assert (determinism.clock, determinism.ids, determinism.snapshot_hash, determinism.replay) == (
        "ticks", "seeded", "sha256_canonical_json", "exact")
    assert determinism.seed_key == "job_seed"
    assert [(t.name, t.ttl_ticks) for t in mace.tiers] == [
        ("wm", 3), ("cwm", 10), ("long_term", None)]
    assert mace.typology["long_term"] == ["episodic", "semantic"]
    assert mace.behavior.decay["episodic"].model == "exempt"
    assert mace.behavior.decay["semantic"].model == "exempt"


def test_mace_promotions_follow_seed_001_section_2() -> None:
    mace = spec("mace")
    assert promotions(mace) == [
        ("wm.episodic", "cwm.episodic", "references", "tick"),
        ("cwm.episodic", "long_term.episodic", "summary", "job_end"),
        ("long_term.episodic", "long_term.semantic", "governed", "on_approval"),
    ]
    first = mace.behavior.promotion[0]
    assert (first.min_references, first.window_ticks) == (2, 4)
    for source, target in (("wm.episodic", "cwm.episodic"),
                           ("cwm.episodic", "long_term.episodic"),
                           ("long_term.episodic", "long_term.semantic")):
        assert ("promotion", f"{source} -> {target}", "criteria") in deviated(mace)


def test_mace_semantic_writes_are_governed() -> None:
    mace = spec("mace")
    write = mace.behavior.write_policy["semantic"]
    assert write.mode == "governed" and write.governance is not None
    assert write.governance.request_kind == "memory_promote_request"
    assert set(write.governance.approvers) == {"council", "admin"}
    assert write.governance.user_intent_allowed


def test_mace_redacts_pii_with_consent_and_keeps_raw_reads_for_admins() -> None:
    mace = spec("mace")
    assert mace.discipline.pii is not None
    assert "persistent_write" in mace.discipline.pii.before
    pii = mace.policies["mace_pii"]
    assert pii.kind == "pii"
    assert (pii.on_detect, pii.raw_with_consent, pii.store_hash, pii.admin_raw_reads) == (
        "redact", True, True, True)
    access = mace.policies["mace_access"]
    assert access.kind == "access" and access.admin_raw_reads


def test_mace_retrieval_is_lexical_first_without_vectors() -> None:
    mace = spec("mace")
    assert mace.retrieval.signals == ["lexical", "envelope", "recency"]
    weights = mace.retrieval.fusion.weights
    assert weights["lexical"] > weights["envelope"] > weights["recency"]


def test_mace_keeps_audit_events_90_days_and_deletion_needs_council_and_admin() -> None:
    retention = spec("mace").policies["mace_retention"]
    assert retention.kind == "retention"
    assert retention.audit_retention == timedelta(days=90)
    assert retention.deletion_requires == ["council", "admin"]


# Assistant memory (seed 002) ---------------------------------------------------------------------
def test_assistant_memory_declares_the_seed_002_graph() -> None:
    assistant = spec("assistant_memory")
    graph = assistant.graph
    assert graph is not None
    assert graph.edges == ["temporal", "causal", "entity", "derived_from", "supersedes"]
    assert graph.entity_types == ["person", "project", "organization", "place", "concept",
                                  "tool"]
    assert graph.max_depth == 3
    assert graph.protect_entity_mentions_over is not None
    assert graph.confidence == {"user": 1.0, "extraction": 0.8, "inference": 0.6,
                                "confirmed": 1.0, "contradicted": 0.3}
    assert assistant.typology["long_term"] == ["episodic", "semantic", "procedural", "opinion"]
    session = assistant.tier("session").boundary
    assert session.idle_after == timedelta(seconds=1800)


def test_assistant_memory_routes_by_intent_over_rrf() -> None:
    retrieval = spec("assistant_memory").retrieval
    assert set(retrieval.signals) == {"semantic", "lexical", "graph", "recency"}
    assert (retrieval.fusion.method, retrieval.fusion.k) == ("rrf", 60)
    assert retrieval.intents is not None
    assert set(retrieval.intents.routes) == {"why", "when", "who", "what", "general"}
    assert retrieval.intents.traverse["why"] == ["causal"]
    assert retrieval.intents.traverse["when"] == ["temporal"]
    assert retrieval.intents.routes["why"]["graph"] > retrieval.intents.routes["why"]["semantic"]


def test_assistant_memory_decays_by_ebbinghaus_except_episodes() -> None:
    behavior = spec("assistant_memory").behavior
    assert behavior.decay["episodic"].model == "exempt"
    for typology in ("semantic", "procedural", "opinion"):
        decay = behavior.decay[typology]
        assert (decay.model, decay.rate, decay.exponent, decay.threshold) == (
            "ebbinghaus", 0.1, 0.8, 0.05)
        assert set(decay.protect) == {"confirmed", "entity_mentions"}
        assert decay.schedule == "0 3 * * *"


def test_assistant_memory_invalidates_contradicted_facts() -> None:
    # seed 002 §12.3: the old fact's validity ends, confidence 0.3, decay rate 0.5
    conflict = spec("assistant_memory").behavior.conflict["semantic"]
    assert conflict.strategy == "update_with_validity"
    assert (conflict.contradicted_confidence, conflict.contradicted_decay_rate) == (0.3, 0.5)


def test_assistant_memory_consolidates_idempotently_at_session_end() -> None:
    assistant = spec("assistant_memory")
    for typology, policy in assistant.behavior.consolidation.items():
        assert policy.trigger == "session_end", typology
        assert policy.idempotent
    assert promotions(assistant) == [
        ("long_term.episodic", f"long_term.{target}", "extraction", "session_end")
        for target in ("semantic", "procedural", "opinion")
    ]


def test_assistant_memory_context_budget_follows_seed_002_section_11() -> None:
    assistant = spec("assistant_memory")
    context = assistant.behavior.context
    assert context is not None
    assert [(b.name, b.share, b.priority) for b in context.blocks] == [
        ("facts", 0.40, 1), ("entity_profiles", 0.25, 2), ("temporal_context", 0.25, 3),
        ("evidence", 0.10, 4)]
    assert context.complexity == {"simple": 1000, "complex": 3000}
    assert {("context", "budget", "complexity"), ("context", "budget", "blocks")} <= deviated(
        assistant)


# JSON Schema -------------------------------------------------------------------------------------
def _validator() -> Any:
    jsonschema = pytest.importorskip("jsonschema")
    schema = spec_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_spec_json_schema_is_a_valid_json_schema() -> None:
    _validator()


@pytest.mark.parametrize("path", SPECS, ids=lambda p: Path(p).stem)
def test_reference_spec_validates_against_the_json_schema(path: str) -> None:
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in _validator().iter_errors(data)]
    assert errors == []


@pytest.mark.parametrize(("edit", "where"), [
    (lambda d: d["tiers"][0].update(persistant=True), ["tiers", 0]),
    (lambda d: d["tiers"][0]["boundary"].update(lifecycle="rn_end"),
     ["tiers", 0, "boundary", "lifecycle"]),
    (lambda d: d["behavior"]["decay"].update(episodc={"model": "exempt"}), ["behavior", "decay"]),
])
def test_json_schema_refuses_what_the_loader_refuses(edit: Any, where: list[Any]) -> None:
    data = yaml.safe_load((ROOT / "agents" / "mace.yaml").read_text(encoding="utf-8"))
    edit(data)
    errors = list(_validator().iter_errors(data))
    assert errors, "the schema accepted an invalid spec"
    assert any(list(e.absolute_path)[: len(where)] == where for e in errors)
