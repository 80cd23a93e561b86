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


ON_CLUSTER_XFAIL: dict[str, str] = {  # by test function; the exact tests: _on_cluster_failing
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
