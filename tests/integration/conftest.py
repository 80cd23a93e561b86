"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from primitives._project import migrate
from primitives.engine import Engine
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def spectral(pg: PostgresHandle) -> AgentSpec:
    """The Spectral reference spec, migrated into the session's database."""
    spec = load_spec(ROOT / "agents" / "spectral_agent.yaml")
    migrate([spec], dsn=pg.admin_dsn)
    return spec


@pytest.fixture
def engine(pg: PostgresHandle, spectral: AgentSpec) -> Iterator[Engine]:
    """A sync engine on the Spectral spec as the application role, without an embedder (the
    semantic signal stands down with its warning, checked here). Modules that need another
    engine define their own ``engine``."""
    with pytest.warns(RuntimeWarning, match="semantic signal needs an embedder"):
        eng = Engine.connect(spectral, pg.app_dsn, max_connections=8)
    with eng:
        yield eng
