"""The checkpointer's statement builders: the cluster forms differ from the single-node ones
only where Citus needs it, and the single-node ones are unchanged by the flag's default."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from primitives.compile import agent_tables
from primitives.compile._checkpointer import CheckpointerTables, checkpointer_tables
from primitives.langgraph import _checkpoint_queries as q
from primitives.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
FLAGS = ("thread", "namespace", "checkpoint_id", "metadata", "before", "limit")


@pytest.fixture(scope="module")
def tables() -> CheckpointerTables:
    names = checkpointer_tables(agent_tables(load_spec(ROOT / "agents" / "spectral_agent.yaml")))
    assert names is not None
    return names


@pytest.mark.parametrize("flags", list(itertools.product([False, True], repeat=len(FLAGS))))
def test_the_cluster_read_matches_blobs_without_a_set_function(
    tables: CheckpointerTables, flags: tuple[bool, ...]
) -> None:
    kwargs = dict(zip(FLAGS, flags, strict=True))
    single = q.select_checkpoints(tables, **kwargs).as_string(None)
    cluster = q.select_checkpoints(tables, **kwargs, citus=True).as_string(None)
    assert "jsonb_each_text(c.checkpoint -> 'channel_versions') AS v" in single
    assert "jsonb_each_text" not in cluster
    assert "c.checkpoint -> 'channel_versions' ->> b.channel = b.version" in cluster
    # everything but the blobs' subquery is the same statement
    head, tail = single.split("FROM jsonb_each_text", 1)[0], single.split("), (SELECT", 1)[1]
    assert cluster.startswith(head) and cluster.endswith(tail)
    assert ("%(limit)s" in cluster) == kwargs["limit"]


def test_the_cluster_thread_delete_passes_the_tenant_first(tables: CheckpointerTables) -> None:
    [single] = (s.as_string(None) for s in q.delete_threads(tables))
    [cluster] = (s.as_string(None) for s in q.delete_threads(tables, citus=True))
    assert single.endswith("_delete_threads\"(%(thread_ids)s::text[])")
    assert cluster.endswith("_delete_threads\"(%(tenant)s::text, %(thread_ids)s::text[])")
