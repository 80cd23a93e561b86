"""Fixtures shared by the integration tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from primitives._project import migrate
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def spectral(pg: PostgresHandle) -> AgentSpec:
    """The Spectral reference spec, migrated into the session's database."""
    spec = load_spec(ROOT / "agents" / "spectral_agent.yaml")
    migrate([spec], dsn=pg.admin_dsn)
    return spec
