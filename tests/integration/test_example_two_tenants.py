"""``examples/two_tenants_graph.py`` runs end to end, as the application role, and keeps the
two tenants' memory and thread state apart."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from tests.conftest import PostgresHandle

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "two_tenants_graph.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("two_tenants_graph", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # LangGraph resolves the state's type hints through it
    spec.loader.exec_module(module)
    return module


def test_two_tenants_graph_keeps_memory_and_thread_state_apart(pg: PostgresHandle) -> None:
    outcome = _load().run(pg.admin_dsn, pg.app_dsn)
    assert outcome["replies"] == [
        "[ws-acme/t-1] noted",
        "[ws-acme/t-1] I remember: lowering temperature removed fabrication",
        "[ws-globex/t-1] noted",
        "[ws-globex/t-1] I remember: nothing yet",
        "[ws-acme/t-2] I remember: lowering temperature removed fabrication",
    ]
    assert outcome["states"] == {
        ("ws-acme", "t-1"): outcome["replies"][0:2],
        ("ws-acme", "t-2"): outcome["replies"][4:5],
        ("ws-globex", "t-1"): outcome["replies"][2:4],
    }
    assert "promotion engine" in outcome["refused"]
