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
    on_cluster,
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
_CHECKPOINT_DELETE = (
    "erasure with thread_ids: the checkpointer's delete function (SECURITY DEFINER, run on "
    "the coordinator as its owner) reaches shards the transaction wrote as the application "
    "role ('cannot perform query on placements that were modified in this transaction by a "
    "different user'); the graph's entity insert, refused before, has its cluster form")
ON_CLUSTER_XFAIL: dict[str, str] = {  # by test function; the exact tests: _on_cluster_failing
    "test_leaky_function_in_where_sees_only_the_tenants_rows": _VIEW_CTE,
    "test_erasure_leaves_no_trace_of_the_subject_in_a_full_pg_dump": _CHECKPOINT_DELETE,
    "test_erasures_view_reports_residue_when_erased_text_is_put_back": _CHECKPOINT_DELETE,
    "test_old_row_versions_leave_the_disk_only_with_primitives_vacuum": (
        "the erasure before the disk check: <prefix>_checkpoints_delete_threads, run as its "
        "owner, reaches placements the transaction wrote as the application role ('cannot "
        "perform query on placements that were modified in this transaction by a different "
        "user'); on a cluster the disk check itself reads the shards' files on the workers"),
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
