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
