"""Which behavioural and discipline fields of the spec language the engine enforces.

:data:`REGISTRY` maps each behavioural and discipline field, and each value an enumerated field
can take, to the pytest node ids of the tests that show the engine behaving differently for it.
An entry with no test is *declared but not enforced yet*; so is any field or value the models
gain later until someone registers it (``tests/unit/test_enforcement.py`` fails for a field that
is neither registered nor listed in :data:`STRUCTURAL`).

Paths name fields as a spec spells them: ``.`` between keys, ``[]`` for the items of a list and
``*`` for the values of a mapping (a typology, an intent), e.g. ``behavior.decay.*.model``.
A key ``path=value`` is one value of an enumerated field (a ``Literal``, or the members of a list
of them); a bare ``path`` is the field itself (numbers, durations, names, and the presence of an
optional block such as ``retrieval.abstain``).

This module lives with the spec models because it describes the spec language and must not
import the engine: ``primitives validate`` uses it without a database.

Adding an entry is one line::

    "behavior.decay.*.model=ebbinghaus": ("tests/integration/test_decay.py::test_x",),

(a parametrized test is named without its ``[...]`` id; ``_LB`` and the other prefixes below
abbreviate the test files named most often).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from primitives.spec._common import format_duration, split_ref
from primitives.spec._models import AgentSpec
from primitives.spec._yaml import LineMap, dotted

__all__ = [
    "CLAIMS",
    "REGISTRY",
    "STRUCTURAL",
    "TABLE_BEGIN",
    "TABLE_END",
    "VALUE_LABELS",
    "Unenforced",
    "enforced",
    "enforcement_markdown",
    "field_paths",
    "registry_keys",
    "registry_rows",
    "unenforced",
]

_LB = "tests/integration/test_lifecycle_boundaries.py::"
_EL = "tests/integration/test_engine_lifecycle.py::"
_EN = "tests/integration/test_engine.py::"
_GB = "tests/security/test_governance_bypass.py::"
_NM = "tests/integration/test_non_mirror.py::"
_PI = "tests/integration/test_pii.py::"
_TI = "tests/security/test_tenant_isolation.py::"
_MT = "tests/integration/test_maintain.py::"
_CX = "tests/unit/test_context.py::"
_GR = "tests/integration/test_graph.py::"
_MG = "tests/integration/test_mace_golden.py::"
_MC = "tests/integration/test_mace_capacity.py::"
_RR = "tests/integration/test_context_and_rerank.py::"
_IN = "tests/unit/test_intent.py::"
_CV = "tests/unit/test_compile_views.py::"
_RS = "tests/unit/test_retrieval_statement.py::"
_CF = "tests/integration/test_conflict.py::"
_DD = "tests/integration/test_decay_db.py::"
_DU = "tests/unit/test_decay.py::"
_AB = "tests/integration/test_abstain.py::"
_AT = "tests/integration/test_access_tracking.py::"
_MP = "tests/integration/test_maintain_passes.py::"
_RL = "tests/integration/test_reference_lifecycles.py::"
_CN = "tests/integration/test_consolidation.py::"
_EX = "tests/unit/test_extraction.py::"
_LV = "tests/integration/test_lifecycle_values.py::"
_ND = "tests/integration/test_non_mirror_defenses.py::"
_ED = "tests/integration/test_embed_deferred.py::"
_SG = "tests/integration/test_sanitization_gates.py::"
_OB = "tests/integration/test_outbox.py::"
_AW = "tests/integration/test_ask_world_agent.py::"
_MS = "tests/integration/test_mace_golden_sem.py::"
_MD = "tests/integration/test_mace_determinism.py::"
_RP = "tests/integration/test_mace_replay.py::"
_DT = "tests/unit/test_determinism.py::"
_AL = "tests/integration/test_assistant_life.py::"
_AI = "tests/integration/test_assistant_insight.py::"
_PM = "tests/integration/test_persistent_modes.py::"
_PX = "tests/integration/test_promotion_idempotency.py::"

REGISTRY: dict[str, tuple[str, ...]] = {
    # 6. lifecycle ------------------------------------------------------------------------------
    "behavior.lifecycle.*.transient=drop_unless_promoted": (
        _LB + "test_cycle_end_compounds_duplicates_upward_instead_of_deleting_them",
        _EL + "test_end_scope_removes_unlinked_rows_keeps_linked_and_journals_both"),
    "behavior.lifecycle.*.transient=archive_at_scope_end": (
        _LB + "test_operations_session_close_archives_with_compounding_into_the_operator_tier",),
    "behavior.lifecycle.*.transient=drop_at_scope_end": (
        _LB + "test_drop_at_scope_end_removes_the_rows_without_compounding_them_upward",),
    "behavior.lifecycle.*.persistent=forcing_function": (
        _PM + "test_forcing_function_rows_await_disposition_past_their_horizon_indefinite_ones_"
              "never",),
    "behavior.lifecycle.*.persistent=corroborated": (
        _PM + "test_a_corroborated_fact_is_archived_after_n_failed_corroborations_and_stays_"
              "below",
        _PM + "test_a_new_corroboration_restarts_the_count"),
    "behavior.lifecycle.*.persistent=indefinite": (
        _PM + "test_indefinite_rows_survive_maintain_runs_with_aggressive_decay",
        _MP + "test_indefinite_rows_are_never_tombstoned_as_orphans"),
    "behavior.lifecycle.*.persistent=append_only": (
        _CF + "test_an_append_only_typology_never_replaces_an_entry",),
    "behavior.lifecycle.*.archive_on=disposition": (
        _LB + "test_a_promoted_persistent_episode_is_archived_as_disposed_only_where_its_"
              "lifecycle_says",),
    "behavior.lifecycle.*.archive_on=canonical_change": (
        "tests/integration/test_non_mirror.py::test_maintain_archives_facts_whose_canonical_"
        "rows_changed_and_only_those",),
    "behavior.lifecycle.*.archive_on=failed_corroborations": (
        _PM + "test_a_corroborated_fact_is_archived_after_n_failed_corroborations_and_stays_"
              "below",
        _PM + "test_without_archive_on_failed_corroborations_failures_are_counted_not_"
              "archived"),
    "behavior.lifecycle.*.archive_on=explicit_invalidation": (
        _CF + "test_invalidating_a_procedural_memory_archives_it_an_episode_stays_unarchived",),
    "behavior.lifecycle.*.archive_on=decay_threshold": (
        _DU + "test_decay_archive_covers_ebbinghaus_typologies_archiving_on_decay_threshold", _DD + "test_decay_archive_archives_unprotected_ebbinghaus_rows_below_threshold"),
    "behavior.lifecycle.*.archive_on=idle": (
        _MP + "test_a_typology_that_archives_on_idle_is_archived_once_orphaned",),
    "behavior.lifecycle.*.failed_corroborations": (
        _PM + "test_a_corroborated_fact_is_archived_after_n_failed_corroborations_and_stays_"
              "below",),
    # 7. decay ----------------------------------------------------------------------------------
    "behavior.decay.*.model=forcing_function": (
        _DU + "test_forcing_function_weight_falls_linearly_to_zero_at_the_horizon", _DD + "test_forcing_function_rows_rank_by_remaining_weight_not_event_time"),
    "behavior.decay.*.model=validity_window": (
        _DU + "test_validity_window_keeps_full_confidence_then_halves_every_validity", _DD + "test_a_fact_past_its_validity_window_no_longer_ranks_first"),
    "behavior.decay.*.model=exempt": (
        _DU + "test_exempt_model_never_decays", _DU + "test_all_exempt_specs_rank_recency_by_event_time_and_keep_base_confidence"),
    "behavior.decay.*.model=ebbinghaus": (
        _DU + "test_ebbinghaus_confidence_falls_as_exp_of_minus_lambda_days_to_the_exponent", _DD + "test_decay_sql_agrees_with_the_python_formulas_on_real_rows"),
    "behavior.decay.*.horizon": (
        _DD + "test_dispositions_reports_forcing_function_rows_past_their_horizon",),
    "behavior.decay.*.validity": (
        _DU + "test_re_corroboration_extends_the_validity_window",),
    "behavior.decay.*.rate": (
        _DU + "test_ebbinghaus_confidence_falls_as_exp_of_minus_lambda_days_to_the_exponent",),
    "behavior.decay.*.exponent": (
        _DU + "test_ebbinghaus_confidence_falls_as_exp_of_minus_lambda_days_to_the_exponent",),
    "behavior.decay.*.threshold": (
        _DD + "test_decay_archive_archives_unprotected_ebbinghaus_rows_below_threshold",),
    "behavior.decay.*.protect=confirmed": (
        _DU + "test_ebbinghaus_protect_confirmed_keeps_a_zero_rate_row_at_full_confidence",),
    "behavior.decay.*.protect=entity_mentions": (
        _DU + "test_ebbinghaus_protection_rules_hold_only_when_listed",),
    "behavior.decay.*.protect=action_linked": (
        _DU + "test_ebbinghaus_protection_rules_hold_only_when_listed", _DD + "test_decay_archive_archives_unprotected_ebbinghaus_rows_below_threshold"),
    "behavior.decay.*.schedule": (
        "tests/integration/test_decay_schedule.py::test_a_scheduled_decay_pass_runs_only_when_"
        "due_and_force_runs_it",
        "tests/integration/test_decay_schedule.py::test_cli_maintain_json_names_the_passes_not_"
        "due_and_force_runs_them",
        "tests/unit/test_cron.py::test_a_spec_with_a_bad_schedule_is_refused_at_load"),
    # 8. write policy ---------------------------------------------------------------------------
    "behavior.write_policy.*.mode=auto": (
        _EN + "test_observe_writes_row_and_journal_event_in_one_transaction",),
    "behavior.write_policy.*.mode=promotion_only": (
        _EN + "test_direct_semantic_write_is_refused_naming_the_promotion_path",
        _GB + "test_a_store_put_cannot_write_promotion_only_memory"),
    "behavior.write_policy.*.mode=governed": (
        _GB + "test_governed_memory_is_refused_without_via_naming_the_path_to_take",
        _GB + "test_superseding_governed_memory_is_refused_naming_the_path"),
    "behavior.write_policy.*.mode=explicit": (
        _CF + "test_a_keyed_fact_update_ends_the_old_facts_validity",),
    "behavior.write_policy.*.mode=mixed": (
        _CN + "test_a_fake_model_run_creates_facts_entities_and_edges_once_and_a_rerun_changes_"
              "nothing",),
    "behavior.write_policy.*.sampling": (
        _LV + "test_auto_write_sampling_writes_the_share_seeded_by_row_id_and_journals_the_rest",
        _LV + "test_sampling_leaves_keyed_writes_alone"),
    "behavior.write_policy.*.extract_threshold": (
        _CN + "test_a_decision_below_the_extract_threshold_is_skipped",),
    "behavior.write_policy.*.governance": (
        _GB + "test_governed_memory_is_refused_without_via_naming_the_path_to_take",),
    "behavior.write_policy.*.governance.request_kind": (
        _MS + "test_m_t5_promotion_waits_for_council_approval_then_sem_put_runs_once",),
    "behavior.write_policy.*.governance.approvals_required": (
        _MS + "test_m_t5_promotion_waits_for_council_approval_then_sem_put_runs_once",),
    "behavior.write_policy.*.governance.approvers": (
        _MS + "test_only_named_approvers_decide_and_each_once",),
    "behavior.write_policy.*.governance.user_intent_allowed": (
        _MS + "test_user_intent_writes_sem_once_and_only_what_the_intent_names",),
    # 9. promotion ------------------------------------------------------------------------------
    "behavior.promotion[].from": (
        _LB + "test_spectral_rules_compound_each_transient_tier_into_the_next",),
    "behavior.promotion[].to": (
        _LB + "test_spectral_rules_compound_each_transient_tier_into_the_next",),
    "behavior.promotion[].criteria=compounding": (
        _LB + "test_cycle_end_compounds_duplicates_upward_instead_of_deleting_them",),
    "behavior.promotion[].criteria=corroboration": (
        _LB + "test_three_independent_observations_promote_a_semantic_row_stripped_of_the_workspace",),
    "behavior.promotion[].criteria=recurrence": (),
    "behavior.promotion[].criteria=references": (
        _MG + "test_m_t2_wm_item_referenced_twice_within_the_window_moves_to_cwm",
        _MG + "test_cwm_is_written_only_through_promotion"),
    "behavior.promotion[].criteria=summary": (
        _MG + "test_m_t3_ending_the_job_appends_an_episodic_summary_of_cwm",
        _MG + "test_a_job_without_cwm_rows_writes_no_summary"),
    "behavior.promotion[].criteria=governed": (
        _MS + "test_m_t5_promotion_waits_for_council_approval_then_sem_put_runs_once",
        _MS + "test_a_repeated_promotion_of_the_same_source_is_refused_with_promotion_loop"),
    "behavior.promotion[].criteria=extraction": (
        _CN + "test_a_fake_model_run_creates_facts_entities_and_edges_once_and_a_rerun_changes_"
              "nothing",
        _CN + "test_four_episodes_naming_companies_create_their_entities_with_the_default_"
              "extractor",
        _CN + "test_maintain_consolidates_a_missed_session_once_and_leaves_a_live_one",
        _CN + "test_consolidation_writes_promotion_only_memory_that_observe_refuses"),
    "behavior.promotion[].at=tier_boundary": (
        _LB + "test_cycle_end_compounds_duplicates_upward_instead_of_deleting_them",
        _RL + "test_a_corroboration_rule_at_the_tier_boundary_waits_for_its_scope_to_end"),
    "behavior.promotion[].at=continuous": (
        _RL + "test_world_sessions_corroborate_into_world_knowledge",
        _RL + "test_a_corroboration_rule_at_the_tier_boundary_waits_for_its_scope_to_end"),
    "behavior.promotion[].at=tick": (
        _MG + "test_m_t2_wm_item_referenced_twice_within_the_window_moves_to_cwm",),
    "behavior.promotion[].at=job_end": (
        _LB + "test_a_compounding_rule_at_each_boundary_value_runs_when_the_scope_ends",),
    "behavior.promotion[].at=session_end": (
        _LB + "test_a_compounding_rule_at_each_boundary_value_runs_when_the_scope_ends",
        _CN + "test_consolidation_writes_promotion_only_memory_that_observe_refuses"),
    "behavior.promotion[].at=on_approval": (
        _MS + "test_m_t5_promotion_waits_for_council_approval_then_sem_put_runs_once",),
    "behavior.promotion[].dedup_similarity": (
        _LB + "test_embedding_similarity_compounds_when_rows_have_vectors",),
    "behavior.promotion[].min_corroborations": (
        _LB + "test_two_observations_are_not_enough_for_promotion",),
    "behavior.promotion[].min_references": (
        _MG + "test_m_t2_wm_item_referenced_twice_within_the_window_moves_to_cwm",),
    "behavior.promotion[].window_ticks": (
        _MG + "test_references_outside_the_window_do_not_promote",),
    "behavior.promotion[].min_versions": (),
    "behavior.promotion[].sanitization": (
        _LB + "test_three_independent_observations_promote_a_semantic_row_stripped_of_the_workspace",),
    "behavior.promotion[].idempotency_key=source_id": (
        _LB + "test_ending_a_closed_archived_session_again_promotes_nothing_twice", _LB + "test_three_independent_observations_promote_a_semantic_row_stripped_of_the_workspace",
        _LV + "test_the_idempotency_key_decides_whether_one_source_reaches_two_targets",
        _PX + "test_ending_a_scope_again_never_compounds_an_action_linked_row_twice",
        _PX + "test_the_idempotency_key_decides_how_many_compounding_targets_a_row_reaches",
        _PX + "test_the_idempotency_key_decides_how_many_references_targets_a_row_reaches",
        _CN + "test_a_fake_model_run_creates_facts_entities_and_edges_once_and_a_rerun_changes_"
              "nothing"),
    "behavior.promotion[].idempotency_key=source_and_target": (
        _LV + "test_the_idempotency_key_decides_whether_one_source_reaches_two_targets",
        _PX + "test_the_idempotency_key_decides_how_many_compounding_targets_a_row_reaches",
        _PX + "test_the_idempotency_key_decides_how_many_references_targets_a_row_reaches",
        _PX + "test_an_extraction_rule_keyed_on_source_and_target_is_refused_at_load"),
    # 10. conflict ------------------------------------------------------------------------------
    "behavior.conflict.*.strategy=noop": (
        _CF + "test_an_episodic_rewrite_is_a_plain_new_version",),
    "behavior.conflict.*.strategy=update_with_validity": (
        _CF + "test_a_keyed_fact_update_ends_the_old_facts_validity", _CF + "test_supersede_follows_the_typologys_strategy"),
    "behavior.conflict.*.strategy=update_with_supersession": (
        _CF + "test_a_procedural_update_archives_the_prior_preference",),
    "behavior.conflict.*.contradicted_confidence": (
        _CF + "test_similarity_detection_finds_the_fact_a_new_one_contradicts",),
    "behavior.conflict.*.contradicted_decay_rate": (
        _CF + "test_similarity_detection_finds_the_fact_a_new_one_contradicts",),
    "behavior.conflict.*.detect=key": (_CF + "test_without_similarity_detection_a_fresh_key_contradicts_nothing",),
    "behavior.conflict.*.detect=similarity": (
        _CF + "test_similarity_detection_finds_the_fact_a_new_one_contradicts",),
    "behavior.conflict.*.similarity": (
        _CF + "test_similarity_detection_finds_the_fact_a_new_one_contradicts",),
    "behavior.conflict.*.min_confidence": (
        _AI + "test_an_extraction_weaker_than_the_conflict_minimum_leaves_the_fact",),
    # 11. consolidation -------------------------------------------------------------------------
    "behavior.consolidation.*.method=compounding": (
        _LB + "test_cycle_end_compounds_duplicates_upward_instead_of_deleting_them",),
    "behavior.consolidation.*.method=merge": (
        _CN + "test_a_merge_typology_folds_a_repeated_fact_into_the_one_it_repeats",),
    "behavior.consolidation.*.method=append_with_supersession": (
        _CN + "test_an_append_with_supersession_typology_replaces_the_row_an_add_nearly_"
              "repeats",),
    "behavior.consolidation.*.method=none": (
        _LB + "test_the_spec_threshold_and_method_decide_what_compounds",),
    "behavior.consolidation.*.trigger=tier_boundary": (
        _LB + "test_cycle_end_compounds_duplicates_upward_instead_of_deleting_them",
        _CN + "test_four_episodes_naming_companies_create_their_entities_with_the_default_"
              "extractor",
        _CN + "test_maintain_consolidates_a_missed_session_once_and_leaves_a_live_one"),
    "behavior.consolidation.*.trigger=session_end": (
        _CN + "test_a_fake_model_run_creates_facts_entities_and_edges_once_and_a_rerun_changes_"
              "nothing",
        _CN + "test_both_executors_consolidate_at_the_session_end_and_only_once",
        "tests/unit/test_consolidation_triggers.py::"
        "test_the_trigger_decides_which_scope_ends_consolidate"),
    "behavior.consolidation.*.trigger=job_end": (
        "tests/unit/test_consolidation_triggers.py::"
        "test_the_trigger_decides_which_scope_ends_consolidate",
        "tests/unit/test_consolidation_triggers.py::"
        "test_a_transient_source_consolidated_at_another_events_end_is_refused"),
    "behavior.consolidation.*.trigger=nightly": (
        _CN + "test_an_llm_spec_needs_an_extractor_and_a_nightly_trigger_waits_for_maintain",),
    "behavior.consolidation.*.dedup_similarity": (
        _LB + "test_the_spec_threshold_and_method_decide_what_compounds",),
    "behavior.consolidation.*.extractor=rule_based": (
        _CN + "test_four_episodes_naming_companies_create_their_entities_with_the_default_"
              "extractor",
        _EX + "test_fact_preference_and_procedure_patterns_become_keyed_additions"),
    "behavior.consolidation.*.extractor=llm": (
        _CN + "test_an_llm_spec_needs_an_extractor_and_a_nightly_trigger_waits_for_maintain",
        _EX + "test_a_json_reply_becomes_decisions"),
    "behavior.consolidation.*.idempotent": (
        _CN + "test_a_fake_model_run_creates_facts_entities_and_edges_once_and_a_rerun_changes_"
              "nothing",
        _CN + "test_an_interrupted_run_leaves_nothing_and_running_again_completes_it",
        "tests/unit/test_spec_loading.py::test_consolidation_that_is_not_idempotent_is_"
        "refused"),
    "behavior.consolidation.*.episodes_per_chunk": (
        _AI + "test_a_session_is_consolidated_in_chunks_of_episodes_per_chunk",),
    # 12. context budget ------------------------------------------------------------------------
    "behavior.context": (_CX + "test_spec_without_context_gives_an_empty_pack",),
    "behavior.context.total_tokens": (
        _CX + "test_eviction_takes_whole_items_from_the_highest_priority_number_first",),
    "behavior.context.complexity": (
        _CX + "test_share_budget_follows_query_complexity",
        _CX + "test_pack_never_exceeds_the_complexity_total",
        _AL + "test_the_context_budget_follows_the_inferred_complexity"),
    "behavior.context.blocks[].content=memories": (
        _CX + "test_always_rows_feed_always_blocks_and_on_demand_blocks_take_hits_only",),
    "behavior.context.blocks[].content=entity_profiles": (
        _CX + "test_entity_profile_blocks_take_entities_one_line_each_within_budget",),
    "behavior.context.blocks[].content=evidence": (
        _CX + "test_evidence_blocks_take_only_source_memories_they_accept_and_no_other_block_holds",),
    "behavior.context.blocks[].tiers": (
        _CX + "test_always_rows_feed_always_blocks_and_on_demand_blocks_take_hits_only",),
    "behavior.context.blocks[].typology": (
        _CX + "test_typology_filters_route_facts_and_episodes_apart",),
    "behavior.context.blocks[].tokens": (
        _CX + "test_block_budget_is_never_exceeded_and_a_too_big_item_lets_smaller_ones_in",),
    "behavior.context.blocks[].share": (_CX + "test_share_budget_follows_query_complexity",),
    "behavior.context.blocks[].priority": (
        _CX + "test_eviction_takes_whole_items_from_the_highest_priority_number_first",),
    "behavior.context.blocks[].presence=always": (
        _CX + "test_always_rows_feed_always_blocks_and_on_demand_blocks_take_hits_only",),
    "behavior.context.blocks[].presence=on_demand": (
        _CX + "test_on_demand_blocks_stay_empty_when_not_requested",),
    # 13. non-mirror ----------------------------------------------------------------------------
    # reference_only: the guard compares writes with a canonical source's text (a copy is
    # refused, a note takes a reference); reference_only and workshop_discipline bound the
    # notes that reference their rows (note_chars). What workshop discipline asks beyond
    # that (notes about the work, not the rule) is a practice the engine cannot read.
    "discipline.non_mirror[].canonical_source": (
        _NM + "test_verbatim_copy_is_refused_naming_category_source_and_key",
        _NM + "test_a_canonical_table_created_after_migrate_is_guarded_at_once",
        _NM + "test_references_carry_real_foreign_keys_raw_inserts_are_refused"),
    "discipline.non_mirror[].canonical_key": (
        _NM + "test_verbatim_copy_is_refused_naming_category_source_and_key",
        _NM + "test_references_carry_real_foreign_keys_raw_inserts_are_refused"),
    "discipline.non_mirror[].canonical_version": (
        _NM + "test_a_reference_pins_its_version_and_reads_stale_once_the_row_moves_on",),
    "discipline.non_mirror[].defense=reference_only": (
        _ND + "test_reference_only_refuses_a_copy_naming_the_source_and_takes_a_note_with_a_"
              "reference",
        _ND + "test_a_note_referencing_a_bounded_category_is_refused_past_note_chars",
        _ND + "test_workshop_discipline_alone_compares_no_copy_where_reference_only_does"),
    "discipline.non_mirror[].defense=trigram_trigger": (
        _NM + "test_verbatim_copy_is_refused_naming_category_source_and_key",
        _NM + "test_near_copy_is_refused_on_the_general_path",
        _NM + "test_near_copy_embedded_in_a_longer_note_is_refused_where_similarity_would_pass",
        _NM + "test_a_real_note_about_the_rule_is_accepted_and_references_it",
        _NM + "test_without_a_trigram_defense_nothing_is_compared",
        _NM + "test_a_copy_with_its_words_reordered_is_found_by_its_word_signature",
        "tests/security/test_non_mirror_bypass.py::"
        "test_raw_insert_of_a_copy_by_the_app_role_is_refused"),
    "discipline.non_mirror[].defense=workshop_discipline": (
        _ND + "test_a_note_referencing_a_bounded_category_is_refused_past_note_chars",
        _ND + "test_workshop_discipline_alone_compares_no_copy_where_reference_only_does"),
    "discipline.non_mirror[].backstop=reference_only": (
        _ND + "test_reference_only_as_a_backstop_compares_copies_too",
        _ND + "test_a_note_referencing_a_bounded_category_is_refused_past_note_chars"),
    "discipline.non_mirror[].backstop=trigram_trigger": (
        _NM + "test_a_backstop_trigram_trigger_guards_too",),
    "discipline.non_mirror[].backstop=workshop_discipline": (
        _ND + "test_a_note_referencing_a_bounded_category_is_refused_past_note_chars",),
    "discipline.non_mirror[].similarity_threshold": (
        _NM + "test_the_threshold_is_respected_on_both_sides",),
    "discipline.non_mirror[].note_chars": (
        _ND + "test_a_note_referencing_a_bounded_category_is_refused_past_note_chars",
        _ND + "test_a_trigram_only_category_compares_copies_but_does_not_bound_notes"),
    # 14. sanitization gates --------------------------------------------------------------------
    "discipline.sanitization[].from": (
        _SG + "test_a_crossing_carries_only_the_gates_from_rows_of_its_own_tenant",
        _OB + "test_a_write_of_the_gates_from_publishes_the_sanitized_payload"),
    "discipline.sanitization[].to": (
        _SG + "test_strip_identifiers_removes_keys_and_their_values_from_what_crosses",
        _OB + "test_spectral_promotion_publishes_a_world_signal_without_the_workspace"),
    "discipline.sanitization[].strip": (
        _LB + "test_three_independent_observations_promote_a_semantic_row_stripped_of_the_workspace",
        _SG + "test_strip_identifiers_removes_keys_and_their_values_from_what_crosses"),
    "discipline.sanitization[].transform=strip_identifiers": (
        _LB + "test_three_independent_observations_promote_a_semantic_row_stripped_of_the_workspace",
        _SG + "test_strip_identifiers_removes_keys_and_their_values_from_what_crosses",
        _SG + "test_strip_identifiers_replaces_the_policys_patterns",
        _SG + "test_strip_identifiers_replaces_what_the_pii_detector_finds"),
    "discipline.sanitization[].transform=hedge_map": (
        _SG + "test_hedge_map_phrases_each_provenance_tier",
        _AW + "test_ask_world_agent_answers_hedged_by_provenance_tier"),
    "discipline.sanitization[].transform=aggregate_only": (
        _SG + "test_aggregate_only_holds_a_fact_until_min_sources_corroborate_it",
        "tests/integration/test_aggregate_tenants.py::"
        "test_a_fact_held_by_min_tenants_tenants_is_published_in_each_once"),
    "discipline.sanitization[].transform=none": (
        _SG + "test_transform_none_crosses_unchanged_and_is_journalled",),
    "discipline.sanitization[].policy": (
        _SG + "test_strip_identifiers_replaces_the_policys_patterns",
        _SG + "test_strip_identifiers_replaces_what_the_pii_detector_finds",
        _SG + "test_hedge_map_phrases_each_provenance_tier"),
    "discipline.sanitization[].keep_if_specific": (
        _LB + "test_keep_if_specific_decides_whether_a_row_short_once_stripped_is_promoted",
        _SG + "test_keep_if_specific_keeps_a_row_that_means_nothing_once_stripped",
        _OB + "test_a_row_the_gate_keeps_behind_publishes_nothing"),
    "discipline.sanitization[].min_sources": (
        _SG + "test_aggregate_only_holds_a_fact_until_min_sources_corroborate_it",),
    "discipline.sanitization[].min_tenants": (
        "tests/integration/test_aggregate_tenants.py::"
        "test_a_fact_held_by_min_tenants_tenants_is_published_in_each_once",),
    # 15. visibility and PII --------------------------------------------------------------------
    "discipline.visibility.rls=session_var": (_TI + "test_cross_tenant_read_returns_nothing",),
    "discipline.visibility.cross_context=event_driven": (
        _OB + "test_a_write_of_the_gates_from_publishes_the_sanitized_payload",
        _OB + "test_spectral_promotion_publishes_a_world_signal_without_the_workspace"),
    "discipline.visibility.cross_context=tool_mediated": (
        _AW + "test_ask_world_agent_reads_only_the_world_it_is_bound_to",
        _AW + "test_ask_carries_only_memory_a_gate_lets_out"),
    "discipline.visibility.cross_context=none": (
        _OB + "test_a_spec_without_an_outbox_refuses_a_claim",),
    "discipline.visibility.events": (
        _OB + "test_the_publication_is_announced_on_the_events_channel_with_ids_only",),
    "discipline.visibility.tools": (
        _AW + "test_ask_carries_only_memory_a_gate_lets_out",),
    "discipline.visibility.policy": (
        _MC + "test_mace_access_keeps_payloads_and_unlisted_views_from_the_auditor",
        _MC + "test_without_an_access_policy_the_auditor_reads_payloads"),
    "discipline.pii": (
        _PI + "test_each_kind_is_redacted_and_no_non_admin_read_returns_the_value",
        _PI + "test_a_blocked_kind_refuses_the_write_and_writes_nothing",
        _PI + "test_with_consent_the_raw_value_is_kept_for_the_privacy_admin_only"),
    "discipline.pii.policy": (
        _PI + "test_on_detect_block_refuses_every_kind",
        _PI + "test_consent_is_refused_where_the_policy_never_keeps_raw_data"),
    "discipline.pii.before=persistent_write": (
        _PI + "test_the_checkpoints_decide_which_tiers_are_scanned",
        _PI + "test_a_transient_tier_whose_rows_promotion_carries_into_a_persistent_one_is_"
              "scanned"),
    "discipline.pii.before=promotion": (
        _PI + "test_the_checkpoints_decide_which_tiers_are_scanned",),
    "discipline.pii.before=any_write": (
        _PI + "test_the_checkpoints_decide_which_tiers_are_scanned",),
    # tiers: boundaries, retention, ticks -------------------------------------------------------
    "tiers[].boundary.lifecycle": (
        _EL + "test_end_scope_removes_unlinked_rows_keeps_linked_and_journals_both",),
    "tiers[].boundary.scope_change": (
        _TI + "test_engine_cross_tenant_writes_change_nothing",),
    "tiers[].boundary.anchor_escalation": (
        _LB + "test_an_anchor_escalation_boundary_clears_the_narrower_key_on_promotion",),
    "tiers[].boundary.anchor_escalation.from": (
        _LB + "test_an_anchor_escalation_boundary_clears_the_narrower_key_on_promotion",),
    "tiers[].boundary.anchor_escalation.to": (
        _LV + "test_an_anchor_escalation_promotes_into_the_anchor_named_by_to",),
    "tiers[].boundary.idle_after": (
        _LB + "test_thirty_days_idle_closes_an_operator_session_in_the_maintain_pass",
        _MT + "test_maintain_closes_idle_sessions_in_batches_and_a_second_run_changes_nothing"),
    "tiers[].retention": (
        _CV + "test_retention_state_orphans_idle_rows_after_the_policy_window",),
    "tiers[].retention.policy": (
        _CV + "test_retention_state_orphans_idle_rows_after_the_policy_window",),
    "tiers[].retention.orphan_after": (
        _AT + "test_retention_states_follow_real_access",),
    "tiers[].retention.tombstone_orphans_after": (
        _MP + "test_long_orphans_are_tombstoned_journalled_once_and_read_or_linked_rows_stay",),
    "tiers[].retention.audit_retention": (),
    "tiers[].retention.deletion_requires": (
        _MS + "test_deletion_needs_council_and_admin_and_is_a_deletion_event",),
    "tiers[].ttl_ticks": (
        _MG + "test_m_t1_wm_item_with_ttl_2_is_removed_after_two_ticks",
        _MG + "test_a_re_referenced_cwm_row_gets_its_ttl_back"),
    "tiers[].capacity": (
        _MC + "test_a_write_past_the_declared_rows_is_refused_with_storage_full_and_loses_nothing",
        _MC + "test_cwm_past_its_token_budget_evicts_the_row_with_fewest_ticks_left"),
    "tiers[].capacity.rows": (
        _MC + "test_a_write_past_the_declared_rows_is_refused_with_storage_full_and_loses_nothing",
        _MC + "test_two_concurrent_writers_at_the_edge_cannot_both_pass"),
    "tiers[].capacity.tokens": (
        _MC + "test_a_write_past_the_declared_tokens_is_refused",
        _MC + "test_cwm_past_its_token_budget_evicts_the_row_with_fewest_ticks_left"),
    "tiers[].capacity.per=tenant": (
        _MC + "test_a_write_past_the_declared_rows_is_refused_with_storage_full_and_loses_nothing",),
    "tiers[].capacity.per=scope": (
        _MC + "test_a_per_scope_capacity_counts_each_job_apart",
        _MC + "test_cwm_past_its_token_budget_evicts_the_row_with_fewest_ticks_left"),
    "tiers[].capacity.on_full=refuse": (
        _MC + "test_a_write_past_the_declared_rows_is_refused_with_storage_full_and_loses_nothing",
        _MC + "test_the_database_refuses_plain_sql_past_the_capacity_as_the_app_role"),
    "tiers[].capacity.on_full=evict": (
        _MC + "test_cwm_past_its_token_budget_evicts_the_row_with_fewest_ticks_left",
        _MC + "test_a_re_referenced_cwm_row_regains_its_ticks_and_is_kept_over_the_budget"),
    # retrieval: fusion, abstention, reranking, intents -----------------------------------------
    "retrieval.fusion.method=rrf": (_RS + "test_fusion_is_weighted_rrf_over_every_signal_once",),
    "retrieval.fusion.method=weighted": (
        "tests/integration/test_retrieval.py::test_fusion_method_decides_how_signal_scores_"
        "combine",),
    "retrieval.lexical.ranking=websearch": (
        "tests/integration/test_retrieval.py::test_bm25_finds_rows_matching_some_words_that_"
        "websearch_misses",),
    "retrieval.lexical.ranking=bm25": (
        "tests/integration/test_retrieval.py::test_bm25_finds_rows_matching_some_words_that_"
        "websearch_misses", _RS + "test_bm25_matches_any_word_and_weighs_rare_words_by_idf"),
    "retrieval.lexical.ranking=token_overlap": (
        _MS + "test_m_t4_episodic_query_ranks_by_token_overlap_then_time_then_id",),
    "retrieval.abstain": (
        _AB + "test_a_hit_scoring_about_0_016_makes_world_abstain",),
    "retrieval.abstain.min_fused_score": (
        _AB + "test_a_hit_scoring_about_0_016_makes_world_abstain", _AB + "test_a_hit_above_the_cut_off_is_returned_and_a_blank_query_never_abstains"),
    "retrieval.abstain.message": (
        _AB + "test_the_store_search_tool_and_context_pack_say_they_abstained",),
    "retrieval.reranker": (_RR + "test_a_reranker_reorders_the_top_n_and_the_limit_applies_after",),
    "retrieval.reranker.model": (_RR + "test_a_declared_top_n_bounds_the_reranked_head",),
    "retrieval.reranker.top_n": (_RR + "test_a_declared_top_n_bounds_the_reranked_head",),
    "retrieval.intents": (_IN + "test_the_spec_chooses_the_classifier",),
    "retrieval.intents.classifier=keyword": (_IN + "test_keyword_rules",),
    "retrieval.intents.classifier=embedding": (
        _IN + "test_embedding_classifier_picks_the_nearest_examples_above_the_threshold",),
    "retrieval.intents.threshold": (
        _IN + "test_embedding_classifier_picks_the_nearest_examples_above_the_threshold",),
    "retrieval.intents.routes": (
        _IN + "test_a_route_replaces_the_weights_it_names_and_picks_the_edges",),
    "retrieval.intents.traverse": (
        _IN + "test_a_route_replaces_the_weights_it_names_and_picks_the_edges",
        _GR + "test_a_why_query_walks_causal_edges_from_the_text_matches",
        _AL + "test_the_assistant_lives_through_sessions_correction_and_decay"),
    "retrieval.embedding.embed=inline": (
        _ED + "test_an_inline_spec_still_embeds_inside_the_write",),
    "retrieval.embedding.embed=deferred": (
        _ED + "test_a_deferred_write_stores_no_vector_and_a_query_finds_it_lexically_at_once",
        _ED + "test_embed_pending_makes_one_model_call_and_one_statement_per_batch_journalled_per_row",
        _ED + "test_maintain_embeds_every_tenants_waiting_rows_as_the_maintainer_once"),
    # determinism (seed 001) --------------------------------------------------------------------
    "determinism.clock=wall": (
        _MD + "test_a_transaction_without_the_job_seed_keeps_random_ids_and_the_wall_clock",
        _DT + "test_each_determinism_value_compiles_its_own_journal_and_clock"),
    "determinism.clock=ticks": (
        _MD + "test_a_job_writes_seeded_ids_and_times_from_its_seed",
        _RP + "test_a_200_event_job_replays_byte_for_byte_twice_and_after_a_server_restart",
        _DT + "test_each_determinism_value_compiles_its_own_journal_and_clock"),
    "determinism.ids=random": (
        _MD + "test_a_transaction_without_the_job_seed_keeps_random_ids_and_the_wall_clock",
        _DT + "test_each_determinism_value_compiles_its_own_journal_and_clock"),
    "determinism.ids=seeded": (
        _MD + "test_a_job_writes_seeded_ids_and_times_from_its_seed",
        _MD + "test_the_compiled_seeded_id_and_epoch_functions_agree_with_python",
        _MG + "test_m_t7_a_replay_with_the_same_seed_reproduces_promotions_and_episodic_writes",
        _DT + "test_each_determinism_value_compiles_its_own_journal_and_clock"),
    "determinism.snapshot_hash=none": (),
    "determinism.snapshot_hash=sha256_canonical_json": (
        _MG + "test_m_t7_a_replay_with_the_same_seed_reproduces_promotions_and_episodic_writes",
        _DT + "test_the_sem_snapshot_hash_is_sha256_of_the_sorted_key_value_time_lines"),
    "determinism.replay=none": (),
    "determinism.replay=exact": (
        _RP + "test_a_200_event_job_replays_byte_for_byte_twice_and_after_a_server_restart",
        _MG + "test_m_t7_a_replay_with_the_same_seed_reproduces_promotions_and_episodic_writes",
        "tests/unit/test_spec_loading.py::"
        "test_an_exact_replay_needs_the_tick_clock_and_seeded_ids"),
    "determinism.seed_key": (
        _DT + "test_the_job_seed_is_the_seed_keys_value_of_a_deterministic_spec_only",
        _MD + "test_a_transaction_without_the_job_seed_keeps_random_ids_and_the_wall_clock"),
    # graph (seed 002) --------------------------------------------------------------------------
    "graph": (_GR + "test_a_spec_without_graph_refuses_graph_writes",),
    "graph.edges=temporal": (_GR + "test_writes_in_a_scope_are_chained_by_temporal_edges",),
    "graph.edges=causal": (_GR + "test_a_why_query_walks_causal_edges_from_the_text_matches",
                           _AL + "test_the_assistant_lives_through_sessions_correction_and_decay"),
    "graph.edges=entity": (_GR + "test_a_named_entity_finds_the_memories_that_mention_it",),
    "graph.edges=derived_from": (
        _LB + "test_a_graph_spec_links_promoted_rows_to_their_evidence_by_derived_from_edges",
        _CN + "test_a_fake_model_run_creates_facts_entities_and_edges_once_and_a_rerun_changes_"
              "nothing"),
    "graph.edges=supersedes": (
        _CF + "test_correct_fact_in_a_graph_spec_links_new_to_old_by_a_supersedes_edge",
        _AL + "test_the_assistant_lives_through_sessions_correction_and_decay"),
    "graph.entity_types": (_GR + "test_bad_entities_and_edges_are_refused_with_the_reason",),
    "graph.protect_entity_mentions_over": (
        _DD + "test_decay_sql_agrees_with_the_python_formulas_on_real_rows",),
    "graph.max_depth": (
        _RS + "test_the_graph_walk_is_recursive_bounded_and_seeded_by_the_text_signals",
        _AL + "test_query_complexity_sets_the_limit_and_the_graph_depth"),
    "graph.walk_from": (),
    "graph.temporal_edges_on_write": (
        _GR + "test_writes_in_a_scope_are_chained_by_temporal_edges",),
    "graph.confidence": (_GR + "test_bad_entities_and_edges_are_refused_with_the_reason",
                         _AL + "test_the_assistant_lives_through_sessions_correction_and_decay",
                         _AI + "test_a_write_starts_at_its_sources_declared_confidence",
                         _AI + "test_an_llm_extractors_facts_are_capped_at_extraction_and_its_"
                               "causes_become_edges"),
    "graph.reinforcement": (
        _DU + "test_reinforcement_adds_its_share_of_ln_access_and_caps_at_one",),
}
"""``path`` or ``path=value`` -> pytest node ids showing the engine behave for it (empty:
declared but not enforced yet)."""

VALUE_LABELS: dict[str, str] = {
    "tiers[].boundary.lifecycle": "the event's name labels the caller's end_scope call",
    "graph.entity_types": "entity kinds are names the engine checks writes against",
    "retrieval.intents.traverse": "edge types, registered under graph.edges",
    "behavior.context.blocks[].typology": "typologies a block accepts",
}
"""Enumerated fields whose values are names, not behaviours: the field's entry covers them."""

STRUCTURAL: dict[str, str] = {
    "version": "format version",
    "agent": "a name",
    "description": "documentation",
    "anchor": "foundational: compiled into the tables, tested by the compile and tenancy tests",
    "typology": "foundational: compiled into the tier and typology checks",
    "tiers[].name": "a name",
    "tiers[].persistent": "foundational: the delete guard and end_scope refusal",
    "tiers[].placement": "foundational: which store holds the tier",
    "tiers[].description": "documentation",
    "tiers[].renamed_from": "migration: `primitives migrate` moves the tier's rows and checks "
                            "(tests/integration/test_spec_evolution.py)",
    "persistence": "foundational: schema, prefix and row bounds compiled into the tables",
    "retrieval.signals": "foundational retrieval, tested by the retrieval tests",
    "retrieval.lexical": "foundational retrieval, tested by the retrieval tests",
    "retrieval.fusion.k": "foundational retrieval, tested by the retrieval tests",
    "retrieval.fusion.weights": "foundational retrieval, tested by the retrieval tests",
    "retrieval.embedding": "foundational retrieval, tested by the retrieval tests",
    "retrieval.scope": "foundational retrieval, tested by the retrieval tests",
    "retrieval.text_search_config": "foundational retrieval, tested by the retrieval tests",
    "retrieval.semantic_exact_below": "foundational retrieval, tested by the retrieval tests",
    "retrieval.default_limit": "foundational retrieval, tested by the retrieval tests",
    "behavior.lifecycle.*.justification": "documentation of a deviation",
    "behavior.decay.*.justification": "documentation of a deviation",
    "behavior.write_policy.*.justification": "documentation of a deviation",
    "behavior.conflict.*.justification": "documentation of a deviation",
    "behavior.consolidation.*.justification": "documentation of a deviation",
    "behavior.promotion[].justification": "documentation of a deviation",
    "behavior.context.justification": "documentation of a deviation",
    "behavior.context.blocks[].name": "a name",
    "discipline.non_mirror[].category": "a name",
    "discipline.sanitization[].name": "a name",
    "audit": "one universal posture, enforced by the database (audit tests)",
    "policies": "filled by the loader",
    "deviations": "filled by the loader",
    "source": "filled by the loader",
}
"""Fields (and whole sections) that are not behavioural or discipline primitives."""


# Walking the models -------------------------------------------------------------------------------
def _members(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        out: list[Any] = []
        for arg in typing.get_args(annotation):
            if arg is not type(None):
                out.extend(_members(arg))
        return out
    return [annotation]


def _literals(annotation: Any) -> tuple[list[str], bool]:
    """A scalar field's literal values, and whether it also takes non-literal values."""
    values: list[str] = []
    other = False
    for member in _members(annotation):
        if typing.get_origin(member) is typing.Literal:
            values.extend(str(v) for v in typing.get_args(member))
        else:
            other = True
    return values, other


def _is_model(member: Any) -> bool:
    return isinstance(member, type) and issubclass(member, BaseModel)


def _field_paths(model: type[BaseModel], prefix: str) -> Iterator[tuple[str, tuple[str, ...]]]:
    for name, info in model.model_fields.items():
        key = info.alias or name
        path = f"{prefix}.{key}" if prefix else key
        yield from _annotation_paths(info.annotation, path)


def _annotation_paths(annotation: Any, path: str) -> Iterator[tuple[str, tuple[str, ...]]]:
    members = _members(annotation)
    optional = type(None) in typing.get_args(annotation)
    models = [m for m in members if _is_model(m)]
    if models:
        if optional:
            yield path, ()
        for model in models:
            yield from _field_paths(model, path)
        return
    for member in members:
        origin = typing.get_origin(member)
        if origin is list:
            item = typing.get_args(member)[0]
            if any(_is_model(m) for m in _members(item)):
                yield from _annotation_paths(item, f"{path}[]")
            else:
                values, _other = _literals(item)
                yield path, tuple(values)
            return
        if origin is dict:
            value = typing.get_args(member)[1]
            if any(_is_model(m) for m in _members(value)):
                yield from _annotation_paths(value, f"{path}.*")
            else:
                yield path, ()  # a mapping of numbers or lists is one field
            return
    values, other = _literals(annotation)
    yield path, tuple(values)
    if values and other:
        yield path, ()  # e.g. a number or "auto": the number is the field itself


def field_paths() -> list[tuple[str, tuple[str, ...]]]:
    """Every field path of the spec language with its enumerated values (empty when none)."""
    return list(_field_paths(AgentSpec, ""))


def _structural(path: str) -> bool:
    parts = path.split(".")
    for end in range(1, len(parts) + 1):
        head = ".".join(parts[:end])
        if head in STRUCTURAL or head.removesuffix("[]") in STRUCTURAL:
            return True
    return False


def registry_keys(path: str, values: tuple[str, ...]) -> list[str]:
    """The registry keys a field needs: one per value, or the field itself."""
    if values and path not in VALUE_LABELS:
        return [f"{path}={value}" for value in values]
    return [path]


def enforced(key: str) -> bool:
    """Whether ``path`` or ``path=value`` names a test that shows the engine enforcing it."""
    return bool(REGISTRY.get(key))


def registry_rows() -> list[tuple[str, tuple[str, ...]]]:
    """Every behavioural and discipline key in model order with its tests."""
    rows: list[tuple[str, tuple[str, ...]]] = []
    for path, values in field_paths():
        if not _in_scope(path):
            continue
        for key in registry_keys(path, values):
            rows.append((key, REGISTRY.get(key, ())))
    return rows


# What a spec declares ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Unenforced:
    """A field or value a spec declares that no test shows the engine enforcing."""

    file: str
    line: int | None
    field: str
    """The field as the spec spells it, e.g. ``behavior.decay.opinion.model``."""
    value: str
    key: str
    """Its registry key, e.g. ``behavior.decay.*.model=ebbinghaus``."""
    implied_by: str | None = None
    """For a value the spec does not write: the default it comes from."""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        text = f"{where}: {self.field} = {self.value}: declared but not enforced yet"
        return text + (f" ({self.implied_by})" if self.implied_by else "")


@dataclass
class _Declared:
    """Where a loaded spec states each key (set by the loader on the spec)."""

    raw: Any
    lines: LineMap


def _show(value: Any) -> str:
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, BaseModel):
        return "{...}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_show(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


_BEHAVIOURAL = ("lifecycle", "decay", "write_policy", "conflict", "consolidation")


Loc = tuple[str | int, ...]


def _items(model: BaseModel, loc: Loc, path: str) -> Iterator[tuple[Loc, str, Any, Any, bool]]:
    """(location, field path, value, annotation, set explicitly) of every field under ``model``
    that holds a value; "set explicitly" is pydantic's record of the keys it was given."""
    for name, info in type(model).model_fields.items():
        key = info.alias or name
        value = getattr(model, name)
        if value is None or value == [] or value == {}:
            continue
        yield from _value_items(value, info.annotation, (*loc, key),
                                f"{path}.{key}" if path else key, name in model.model_fields_set)


def _value_items(value: Any, annotation: Any, loc: Loc, path: str, is_set: bool,
                 ) -> Iterator[tuple[Loc, str, Any, Any, bool]]:
    yield loc, path, value, annotation, is_set
    if isinstance(value, BaseModel):
        yield from _items(value, loc, path)
    elif isinstance(value, list) and isinstance(value[0], BaseModel):
        for index, item in enumerate(value):
            yield from _items(item, (*loc, index), f"{path}[]")
    elif isinstance(value, dict) and isinstance(next(iter(value.values())), BaseModel):
        for sub, item in value.items():
            yield from _items(item, (*loc, sub), f"{path}.*")


def _keys_of(path: str, value: Any, annotation: Any) -> list[tuple[str, str]]:
    """(registry key, value as shown) pairs a field holding ``value`` declares."""
    if isinstance(value, BaseModel):
        return [(path, "{...}")] if path in REGISTRY else []  # an optional block's presence
    if isinstance(value, list) and isinstance(value[0], BaseModel):
        return []  # each item's fields are declared on their own
    if isinstance(value, dict) and isinstance(next(iter(value.values())), BaseModel):
        return []
    if path in VALUE_LABELS:
        return [(path, _show(value))]
    list_member = next((m for m in _members(annotation) if typing.get_origin(m) is list), None)
    if list_member is not None and isinstance(value, list):
        literals, _ = _literals(typing.get_args(list_member)[0])
        if literals:
            return [(f"{path}={item}", str(item)) for item in value]
        return [(path, _show(value))]
    literals, _other = _literals(annotation)
    if literals and str(value) in literals:
        return [(f"{path}={value}", str(value))]
    return [(path, _show(value))]


def _in_scope(path: str) -> bool:
    """Whether ``path`` is a behavioural or discipline field (registered, or not structural)."""
    return (path in REGISTRY or any(k.startswith(path + "=") for k in REGISTRY)
            or not _structural(path))


def unenforced(spec: AgentSpec) -> list[Unenforced]:
    """Every field and value ``spec`` declares that the registry marks not enforced.

    Declared means written in the spec, or in effect through a default the typology implies
    (:data:`TYPOLOGY_DEFAULTS`, the default promotion rules of :data:`PROMOTION_DEFAULTS`,
    the default context budget) for a typology the spec uses; a model's own defaults are
    not declarations. A field neither registered nor structural counts as not enforced.
    Written fields carry their file and line (when the spec came from the loader)."""
    declared: _Declared | None = getattr(spec, "_declared", None)
    where = _Where(spec, declared)
    found: dict[tuple[str, str], Unenforced] = {}
    for loc, path, value, annotation, is_set in _items(spec, (), ""):
        if not _in_scope(path):
            continue
        keys = [(k, shown) for k, shown in _keys_of(path, value, annotation) if not enforced(k)]
        if not keys:
            continue
        place = where.of(loc, is_set)
        if place is None:
            continue  # a model default the spec does not declare
        line, implied = place
        field = dotted(loc)
        for key, shown in keys:
            found.setdefault((field, shown), Unenforced(
                file=spec.source or "<spec>", line=line, field=field, value=shown, key=key,
                implied_by=implied))
    return sorted(found.values(), key=lambda u: (u.line or 0, u.field, u.value))


class _Where:
    """Where a spec declares a field: its line, or the default that implies it."""

    def __init__(self, spec: AgentSpec, declared: _Declared | None) -> None:
        self.spec = spec
        self.lines: dict[Loc, int] | None = declared.lines.lines if declared else None
        raw = declared.raw if declared is not None else None
        behavior = raw.get("behavior") if isinstance(raw, dict) else None
        rules = behavior.get("promotion") if isinstance(behavior, dict) else None
        self.rule_index: dict[tuple[str, str], int] = {
            (str(r.get("from")), str(r.get("to"))): i
            for i, r in enumerate(rules if isinstance(rules, list) else [])
            if isinstance(r, dict)}

    def _written(self, loc: Loc) -> tuple[int, None] | None:
        assert self.lines is not None
        return (self.lines[loc], None) if loc in self.lines else None

    def of(self, loc: Loc, is_set: bool) -> tuple[int | None, str | None] | None:
        """``(line, None)`` when written, ``(None, default)`` when a default the typology
        implies, None for a model's own default. ``is_set`` is pydantic's record of the keys
        a model was given: the loader gives a behavioural entry its typology default's keys
        (unless the spec changes its kind) and the spec's."""
        if self.lines is None:  # not from the loader: no lines, only what pydantic was given
            return (None, None) if is_set else None
        if len(loc) >= 3 and loc[:2] == ("behavior", "promotion"):
            rule = self.spec.behavior.promotion[int(loc[2])]
            index = self.rule_index.get((rule.from_, rule.to))
            if index is not None and (written := self._written(
                    ("behavior", "promotion", index, *loc[3:]))) is not None:
                return written
            if not is_set:
                return None
            src, dst = split_ref(rule.from_)[1], split_ref(rule.to)[1]
            return None, f"default promotion rule for {src} -> {dst}"
        written = self._written(loc)
        if written is not None or not is_set:
            return written
        if len(loc) >= 3 and loc[0] == "behavior" and loc[1] in _BEHAVIOURAL:
            return None, f"typology default for {loc[2]}"
        if loc[:2] == ("behavior", "context"):
            return None, "default context budget"
        return None


# What the docs may claim -------------------------------------------------------------------------
TABLE_BEGIN = "<!-- enforcement table: generated from primitives/spec/_enforcement.py -->"
TABLE_END = "<!-- end of enforcement table -->"


def enforcement_markdown() -> str:
    """The table docs/concepts.md carries between :data:`TABLE_BEGIN` and :data:`TABLE_END`:
    one row per field, its values split into enforced and declared but not enforced yet."""
    rows: dict[str, tuple[list[str], list[str]]] = {}
    for key, tests in registry_rows():
        path, _, value = key.partition("=")
        done, todo = rows.setdefault(path, ([], []))
        (done if tests else todo).append(f"`{value}`" if value else "yes")
    lines = [TABLE_BEGIN, "", "| field | enforced | declared but not enforced yet |", "|---|---|---|"]
    for path, (done, todo) in rows.items():
        lines.append(f"| `{path}` | {', '.join(done)} | {', '.join(todo)} |")
    lines += ["", TABLE_END]
    return "\n".join(lines)


CLAIMS: dict[str, tuple[str, ...]] = {
    r"compound": ("behavior.promotion[].criteria=compounding",),
    r"corroborat": ("behavior.promotion[].criteria=corroboration",),
    r"sanitization gate": ("behavior.promotion[].sanitization",),
    r"\bidle\b": ("tiers[].boundary.idle_after",),
    r"\barchive": ("behavior.lifecycle.*.transient=archive_at_scope_end",),
    r"dropped at scope end": ("behavior.lifecycle.*.transient=drop_unless_promoted",),
    r"trigram": ("discipline.non_mirror[].defense=trigram_trigger",),
    r"i don't know|abstain": ("retrieval.abstain",),
    r"hedge": ("discipline.sanitization[].transform=hedge_map",),
    r"ebbinghaus|soft-delete": ("behavior.decay.*.model=ebbinghaus",),
    r"decay-exempt|decay exempt": ("behavior.decay.*.model=exempt",),
    r"validity window": ("behavior.decay.*.model=validity_window",),
    r"\bpii\b": ("discipline.pii",),
    r"supersed": ("behavior.conflict.*.strategy=update_with_supersession",),
    r"consolidat": ("behavior.promotion[].criteria=extraction",),
    r"governed|approv": ("behavior.write_policy.*.mode=governed",),
    r"replay": ("determinism.replay=exact",),
    r"intent-routed|intent routing": ("retrieval.intents",),
    r"derived_from": ("graph.edges=derived_from",),
    r"failed corroboration|failure archives|windows without a new corroboration": (
        "behavior.lifecycle.*.archive_on=failed_corroborations",
        "behavior.lifecycle.*.persistent=corroborated"),
    r"await(s)? disposition": ("behavior.lifecycle.*.persistent=forcing_function",),
    r"\bcron\b": ("behavior.decay.*.schedule",),
}
"""Phrases a reference spec's header may use only while their registry keys are enforced
(a line saying "not enforced yet" is exempt)."""
