"""LangGraph's published checkpointer conformance suite, against both savers as the app role.

Each saver is bound to one tenant (``for_tenant``): the suite's configs carry only
``thread_id`` and ``checkpoint_ns``, and calls like ``delete_thread`` take no config.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from primitives.langgraph import AsyncCheckpointer, Checkpointer
from primitives.spec import AgentSpec
from tests.conftest import PostgresHandle

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore:.*(semantic|graph) signal")


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_checkpointer_passes_the_langgraph_conformance_suite_in_full(
    kind: str, pg: PostgresHandle, spectral: AgentSpec
) -> None:
    anchor = {"workspace_id": f"ws-conformance-{uuid.uuid4().hex[:8]}"}

    @checkpointer_test(name=f"primitives-{kind}")
    async def saver() -> AsyncIterator[Checkpointer | AsyncCheckpointer]:
        if kind == "sync":
            sync_saver = Checkpointer.from_spec(spectral, pg.app_dsn)
            yield sync_saver.for_tenant(anchor)
            sync_saver.close()
        else:
            async_saver = await AsyncCheckpointer.from_spec(spectral, pg.app_dsn)
            yield async_saver.for_tenant(anchor)
            await async_saver.aclose()

    report = await validate(saver)
    results = report.to_dict()["results"]
    failures = {name: r["failures"] for name, r in results.items() if r["failures"]}
    assert not failures, failures
    assert {name for name, r in results.items() if r["passed"]} == {
        c.value for c in ALL_CAPABILITIES}
    assert report.conformance_level() == "FULL"
