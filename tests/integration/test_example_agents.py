"""The LangMem-style and ``create_react_agent`` examples run end to end with scripted fake
models, as the application role."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from tests.conftest import PostgresHandle

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_langmem_agent_writes_under_its_template_and_the_model_sees_the_refusal(
    pg: PostgresHandle
) -> None:
    outcome = _load("langmem_agent").run(pg.admin_dsn, pg.app_dsn)
    created, refused, found = outcome["tool_messages"]
    assert created.startswith("created memory ")
    # the fact tool's write is refused by the write policy; the run goes on
    assert refused.startswith("Error:") and "promotion engine" in refused
    assert "dark roast coffee" in found
    assert outcome["reply"] == "You prefer dark roast coffee."
    user = outcome["user"]
    [(namespace, value, score)] = outcome["stored"]
    assert namespace == ("memories", user)
    assert value == {"content": "The user prefers dark roast coffee"}
    assert score is not None and 0 < score <= 1  # cosine similarity (the default embedder)
    # the checkpointer found the tenant under the alias langgraph_user_id
    assert outcome["thread_messages"] == 8


def test_react_agent_uses_the_memory_tools_and_a_tool_error_reaches_the_model(
    pg: PostgresHandle
) -> None:
    outcome = _load("react_agent").run(pg.admin_dsn, pg.app_dsn)
    remembered, confirmed, searched = outcome["tool_messages"]
    assert remembered[0] == "remember_fact" and remembered[1] == "success"
    assert '"status": "remembered"' in remembered[2] or "'status': 'remembered'" in remembered[2]
    assert confirmed[:2] == ("confirm_fact", "error") and "is not a memory id" in confirmed[2]
    assert searched[0] == "search_memory" and "Marta lives in Porto" in searched[2]
    assert outcome["reply"] == "Marta, Ana's sister, lives in Porto."
