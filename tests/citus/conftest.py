"""Fixtures of the Citus suite: one three-node cluster per session, the reference specs
migrated onto it with their distributed plans.

- ``cluster``: the running :class:`~tests.citus._cluster.Cluster` (built on first use).
- ``coordinator``: the coordinator's admin DSN, framework migrated, five agents distributed.
- ``app``, ``auditor``: autocommit connections to the coordinator as those roles.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from primitives._project import MigrateReport, migrate
from primitives.db import APP_ROLE, AUDITOR_ROLE
from tests.citus._cluster import Cluster, running_cluster
from tests.citus._on_cluster_failing import ON_CLUSTER_FAILING
from tests.conftest import PostgresHandle
from tests.security._support import SPECS


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    with running_cluster() as running:
        yield running


@pytest.fixture(scope="session")
def migrated(cluster: Cluster) -> MigrateReport:
    return migrate(list(SPECS), dsn=cluster.coordinator.dsn(), progress=lambda _: None)


@pytest.fixture(scope="session")
def coordinator(cluster: Cluster, migrated: MigrateReport) -> str:
    return cluster.coordinator.dsn()


@pytest.fixture
def app(cluster: Cluster, coordinator: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(cluster.coordinator.dsn(APP_ROLE), autocommit=True) as conn:
        yield conn


@pytest.fixture
def auditor(cluster: Cluster, coordinator: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(cluster.coordinator.dsn(AUDITOR_ROLE), autocommit=True) as conn:
        yield conn


# The security suite on the cluster ----------------------------------------------------------
# tests/citus/test_on_cluster_<name>.py imports the test functions of
# tests/security/test_<name>.py; here ``pg`` is the coordinator (reached as the same three
# roles), so those tests and the security suite's fixtures below run against the cluster.
from tests.security.conftest import (  # noqa: E402,F401  (fixtures, registered by import)
    app_session,
    auditor_session,
    engines,
    specs,
    world,
)


@pytest.fixture(scope="session")
def pg(cluster: Cluster, migrated: MigrateReport) -> PostgresHandle:
    """The coordinator as the root conftest's ``pg``: the framework and the five reference
    agents are migrated, distributed (``migrated``)."""
    admin = cluster.coordinator.dsn()
    return PostgresHandle(admin, cluster.coordinator.dsn(APP_ROLE),
                          cluster.coordinator.dsn(AUDITOR_ROLE), None)


_VIEW_CTE = ("the audit supersession view's recursive CTE: Citus runs a recursive CTE over a "
             "distributed table only when it filters on the distribution column (0A000)")
_BOUNDARY = ("end_scope: the tier-boundary statement (one set-based statement over the closing "
             "scopes, INSERT ... SELECT into the next tier) is not routable on Citus: 'could not "
             "run distributed query with FOR UPDATE/SHARE commands'")
_VIEW_WRITE = ("a write through a view over distributed tables is refused by Citus before "
               "privileges are checked (0A000 'cannot modify views when the query contains "
               "citus tables'), not 42501/55000: refused all the same")
_REKEY = ("Citus refuses to change a distribution column before row-level security is "
          "checked (0A000 'modifying the partition value of rows is not allowed'), not 42501: "
          "the row stays with its tenant all the same")
_PG_TEMP = ("a function created in pg_temp cannot be used in a query on distributed tables "
            "(the workers have no pg_temp schema of this session: 3F000)")
_NON_MIRROR = ("the non-mirror test agent's plan keeps its canonical 'rules' table local, and "
               "Citus refuses a foreign key from a distributed table to it (42P16)")
_PLACEMENTS = ("erasure after writes of this module's tenants: the erase function ran on the "
               "coordinator instead of the tenant's worker ('cannot perform query on placements "
               "that were modified in this transaction by a different user'); cause not pinned "
               "down: tests/citus/test_cluster.py erases after writes in one transaction")
ON_CLUSTER_XFAIL: dict[str, str] = {  # by test function; the exact tests: _on_cluster_failing
    "test_app_role_cannot_alter_drop_or_write_through_agent_view": _VIEW_WRITE,
    "test_auditor_cannot_insert_update_or_delete": _VIEW_WRITE,
    "test_auditor_reads_audit_views_across_tenants": _VIEW_CTE,
    "test_cross_tenant_read_returns_nothing": _VIEW_CTE,
    "test_no_tenant_set_sees_nothing": _VIEW_CTE,
    "test_tenant_without_rows_sees_an_empty_relation": _VIEW_CTE,
    "test_engine_cross_tenant_writes_change_nothing": _BOUNDARY,
    "test_scope_id_with_sql_is_stored_and_ended_literally": _BOUNDARY,
    "test_leaky_function_in_where_sees_only_the_tenants_rows": _PG_TEMP,
    "test_moving_own_rows_to_another_tenant_is_refused": _REKEY,
    "test_moving_an_event_to_another_tenant_breaks_the_chains_docs_compliance_names": _REKEY,
    "test_app_role_cannot_read_the_canonical_table_or_call_the_guard": _NON_MIRROR,
    "test_app_role_cannot_reference_another_tenants_memory": _NON_MIRROR,
    "test_app_role_cannot_switch_the_guard_off": _NON_MIRROR,
    "test_raw_insert_of_a_copy_by_the_app_role_is_refused": _NON_MIRROR,
    "test_erase_subject_with_sql_matches_literally": _PLACEMENTS,
    "test_planner_statistics_do_not_reveal_other_tenants_values": (
        "planner statistics of a distributed table live on the shards; the coordinator's "
        "pg_stats for the table are empty, so the test's precondition (the statistics hold "
        "values) does not hold"),
    "test_runtime_session_cannot_kill_or_cancel_another_tenants_backend": (
        "Citus adds pg_cancel_backend/pg_terminate_backend(bigint), so the test's smallint "
        "call is ambiguous (42725)"),
    "test_erase_function_called_directly_writes_no_text_and_always_journals": (
        "calls the single-node erase_row(uuid, text, uuid, text, jsonb); the cluster's takes "
        "the tenant first"),
    "test_erasure_leaves_no_trace_of_the_subject_in_a_full_pg_dump": (
        "writes graph entities: the entity insert holds a subquery, which Citus refuses in "
        "an INSERT (0A000)"),
    "test_erasures_view_reports_residue_when_erased_text_is_put_back": (
        "writes graph entities: the entity insert holds a subquery, which Citus refuses in "
        "an INSERT (0A000)"),
    "test_old_row_versions_leave_the_disk_only_with_primitives_vacuum": (
        "reads dead tuples of the coordinator's shell table; the rows live on the workers"),
    "test_concurrent_store_puts_of_one_key_keep_one_linear_history": (
        "the store's put path (primitives.store) has no cluster form yet: its prepared "
        "statement's parameter types are not known to Citus (42P18)"),
    "test_explain_analyze_of_a_vector_search_still_tells_whether_another_tenant_holds_a_guess": (
        "EXPLAIN ANALYZE of a distributed query shows the coordinator's custom scan, not the "
        "shard's index scan: the rows removed by the policy that the test counts are not in "
        "it"),
    "test_arbitrary_strings_round_trip_literally_in_every_field": (
        "writes graph entities or ends scopes: statements without a cluster form yet"),
    "test_interleaved_writes_across_tenants_never_leak_rows_or_lose_events": (
        "ends scopes: the tier-boundary statement has no cluster form yet"),
    "test_no_tenant_value_ever_appears_in_a_statement_text": (
        "its workload writes through the LangGraph store and checkpointer, whose put path has "
        "no cluster form yet (42P18); the coordinator's texts hold no value (set_tenant's SET "
        "LOCAL runs inside the function), the workers' are covered by test_cluster.py's "
        "test_no_runtime_role_reads_the_values_in_the_workers_statement_texts"),
    "test_role_settings_of_each_class_do_not_reach_the_engines_statements": (
        "idle_session_timeout persisted on the application role ends the coordinator's "
        "cached connections to the workers between two transactions, where no SET LOCAL "
        "holds; only startup options outrank a role setting, and Citus sends none to the "
        "workers (docs/scaling.md: PGOPTIONS in the coordinator's environment)"),
}
"""Test ids (of tests/citus/test_on_cluster_*.py, without the file) that cannot pass on the
cluster, with the reason; they run as ``xfail(strict=True)``, so one that starts passing
fails the run until it is taken off this list."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not item.path.name.startswith("test_on_cluster_"):
            continue
        name = item.nodeid.split("::", 1)[1]
        if name not in ON_CLUSTER_FAILING:
            continue
        reason = ON_CLUSTER_XFAIL.get(name.split("[", 1)[0])
        assert reason is not None, f"{name}: listed as failing on the cluster without a reason"
        if reason is not None:
            item.add_marker(pytest.mark.xfail(strict=True, reason=reason))
