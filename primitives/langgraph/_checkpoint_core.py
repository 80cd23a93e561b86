"""The checkpointer's one core, shared by the sync and async savers (STYLE habit 7).

Each operation is a generator of :class:`CStep` s, like the engine's core: the savers in
``_checkpointer.py`` run the steps in a tenant transaction and send the rows back. The
storage semantics are LangGraph's Postgres saver's: primitive channel values inline in the
checkpoint, others as versioned blobs, pending writes per task (special channels replaced,
others written once), newest checkpoint first. Serialization is LangGraph's own: the core
is mixed into ``BasePostgresSaver`` and uses its serializer helpers (``_dump_blobs``,
``_load_blobs``, ``_dump_writes``, ``_load_writes``, ``_migrate_pending_sends``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.postgres.base import BasePostgresSaver
from langgraph.checkpoint.serde.types import TASKS
from psycopg import sql
from psycopg.types.json import Jsonb

from primitives.compile._checkpointer import CheckpointerTables
from primitives.langgraph import _checkpoint_queries as q

__all__ = ["PRUNE_STRATEGIES", "COp", "CStep", "CheckpointCore"]

PRUNE_STRATEGIES = ("keep_latest", "delete")

R = TypeVar("R")


@dataclass(frozen=True)
class CStep:
    """One statement; ``many`` holds the rows of an ``executemany``."""

    statement: sql.Composed
    params: Mapping[str, Any] | None = None
    fetch: Literal["none", "all"] = "none"
    many: Sequence[Sequence[Any]] | None = None


COp = Generator[CStep, Any, R]


class CheckpointCore(BasePostgresSaver):
    """LangGraph's saver semantics over tenant-keyed tables, as step generators."""

    tables: CheckpointerTables
    citus: bool = False
    """On a Citus coordinator: the thread delete takes its cluster form (by tenant)."""
    tenant_key: str

    def _config(self, tenant: str, thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                                 "checkpoint_id": checkpoint_id, self.tenant_key: tenant}}

    # reads ---------------------------------------------------------------------------------
    def select_op(self, tenant: str, config: RunnableConfig | None, *,
                  filter: Mapping[str, Any] | None = None, before: RunnableConfig | None = None,
                  limit: int | None = None, latest: bool = False) -> COp[list[CheckpointTuple]]:
        """``get_tuple`` (``latest=True``: the given or newest checkpoint) and ``list``."""
        conf = dict((config or {}).get("configurable") or {})
        params: dict[str, Any] = {"tenant": tenant}
        thread = config is not None
        namespace = thread and (latest or conf.get("checkpoint_ns") is not None)
        checkpoint_id = get_checkpoint_id(config) if config is not None else None
        before_id = get_checkpoint_id(before) if before is not None else None
        if thread:
            params["thread_id"] = str(conf["thread_id"])
        if namespace:
            params["checkpoint_ns"] = conf.get("checkpoint_ns") or ""
        if checkpoint_id:
            params["checkpoint_id"] = checkpoint_id
        if filter:
            params["metadata"] = Jsonb(dict(filter))
        if before_id:
            params["before"] = before_id
        if latest:
            limit = 1
        if limit is not None:
            params["limit"] = int(limit)
        statement = q.select_checkpoints(
            self.tables, thread=thread, namespace=namespace, checkpoint_id=bool(checkpoint_id),
            metadata=bool(filter), before=bool(before_id), limit=limit is not None,
            citus=self.citus)
        rows = yield CStep(statement, params, "all")
        values = [dict(zip(q.CHECKPOINT_COLUMNS, row, strict=True)) for row in rows]
        yield from self._pending_sends(tenant, values)
        return [self._tuple(tenant, value) for value in values]

    def _pending_sends(self, tenant: str, values: list[dict[str, Any]]) -> COp[None]:
        """Checkpoints before v4 kept their sends in the parent's writes: move them in."""
        grouped: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = defaultdict(
            lambda: defaultdict(list))
        for value in values:
            if value["checkpoint"].get("v", 4) < 4 and value["parent_checkpoint_id"]:
                place = (value["thread_id"], value["checkpoint_ns"])
                grouped[place][value["parent_checkpoint_id"]].append(value)
        for (thread_id, ns), by_parent in grouped.items():
            rows = yield CStep(q.select_pending_sends(self.tables, TASKS), {
                "tenant": tenant, "thread_id": thread_id, "checkpoint_ns": ns,
                "ids": list(by_parent)}, "all")
            for parent_id, sends in rows:
                for value in by_parent[parent_id]:
                    if value["channel_values"] is None:
                        value["channel_values"] = []
                    self._migrate_pending_sends(sends, value["checkpoint"],
                                                value["channel_values"])

    def _tuple(self, tenant: str, value: dict[str, Any]) -> CheckpointTuple:
        stored = value["checkpoint"]
        checkpoint = cast(Checkpoint, {
            **stored, "channel_values": {**(stored.get("channel_values") or {}),
                                         **self._load_blobs(value["channel_values"])}})
        thread_id, ns, parent = value["thread_id"], value["checkpoint_ns"], \
            value["parent_checkpoint_id"]
        return CheckpointTuple(
            self._config(tenant, thread_id, ns, value["checkpoint_id"]), checkpoint,
            value["metadata"], self._config(tenant, thread_id, ns, parent) if parent else None,
            self._load_writes(value["pending_writes"]))

    # writes --------------------------------------------------------------------------------
    def put_op(self, tenant: str, config: RunnableConfig, checkpoint: Checkpoint,
               metadata: CheckpointMetadata, new_versions: ChannelVersions) -> COp[RunnableConfig]:
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), conf.get("checkpoint_ns") or ""
        stored = checkpoint.copy()
        inline = dict(stored["channel_values"])
        blobs = {k: inline.pop(k) for k, v in checkpoint["channel_values"].items()
                 if not (v is None or isinstance(v, str | int | float | bool))}
        stored["channel_values"] = inline
        versions = {k: v for k, v in new_versions.items() if k in blobs}
        if versions:
            rows = [(tenant, *row) for row in self._dump_blobs(thread_id, ns, blobs, versions)]
            yield CStep(q.upsert_blobs(self.tables), many=rows)
        yield CStep(q.upsert_checkpoint(self.tables), {
            "tenant": tenant, "thread_id": thread_id, "checkpoint_ns": ns,
            "checkpoint_id": checkpoint["id"], "parent_checkpoint_id": conf.get("checkpoint_id"),
            "checkpoint": Jsonb(stored),
            "metadata": Jsonb(get_serializable_checkpoint_metadata(config, metadata))})
        return self._config(tenant, thread_id, ns, checkpoint["id"])

    def put_writes_op(self, tenant: str, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                      task_id: str, task_path: str) -> COp[None]:
        conf = config["configurable"]
        rows = [(tenant, *row) for row in self._dump_writes(
            str(conf["thread_id"]), conf.get("checkpoint_ns") or "", conf["checkpoint_id"],
            task_id, task_path, writes)]
        if rows:
            replace = all(channel in WRITES_IDX_MAP for channel, _ in writes)
            yield CStep(q.insert_writes(self.tables, replace=replace), many=rows)

    # deletes and copies --------------------------------------------------------------------
    def delete_threads_op(self, tenant: str, thread_ids: Sequence[str]) -> COp[None]:
        if thread_ids:
            for statement in q.delete_threads(self.tables, citus=self.citus):
                yield CStep(statement, {"tenant": tenant, "thread_ids": list(thread_ids)})

    def delete_runs_op(self, tenant: str, run_ids: Sequence[str]) -> COp[None]:
        if not run_ids:
            return
        pairs = yield CStep(q.delete_runs(self.tables), {
            "tenant": tenant, "run_ids": [str(r) for r in run_ids]}, "all")
        yield from self._collect_blobs(tenant, pairs)

    def _collect_blobs(self, tenant: str, pairs: Sequence[Sequence[str]]) -> COp[None]:
        if pairs:
            yield CStep(q.delete_garbage_blobs(self.tables), {
                "tenant": tenant, "thread_ids": [p[0] for p in pairs],
                "namespaces": [p[1] for p in pairs]})

    def copy_thread_op(self, tenant: str, source: str, target: str) -> COp[None]:
        for statement in q.copy_thread(self.tables):
            yield CStep(statement, {"tenant": tenant, "source": str(source),
                                    "target": str(target)})

    def prune_op(self, tenant: str, thread_ids: Sequence[str], strategy: str) -> COp[None]:
        """``delete``: every row of the threads. ``keep_latest``: the newest checkpoint of each
        namespace (and its parent, when the head predates v4 and reads its sends there),
        with its writes and the blobs it refers to. Refuses (all threads, nothing pruned)
        a thread that uses a DeltaChannel, whose value is rebuilt from older checkpoints."""
        if isinstance(thread_ids, str):
            raise TypeError("thread_ids must be a sequence of thread IDs, not a str")
        if strategy not in PRUNE_STRATEGIES:
            raise ValueError(f"unknown prune strategy {strategy!r}; use one of "
                             f"{', '.join(PRUNE_STRATEGIES)}")
        threads = [str(t) for t in thread_ids]
        if strategy == "delete":
            yield from self.delete_threads_op(tenant, threads)
            return
        for thread_id in threads:
            heads = yield CStep(q.prune_heads(self.tables, TASKS),
                                {"tenant": tenant, "thread_id": thread_id}, "all")
            if any(head[3] for head in heads):
                raise NotImplementedError(
                    f"keep_latest can't prune thread {thread_id}: it uses a DeltaChannel")
            for ns, head, sends_parent, _ in heads:
                keep = [head, sends_parent] if sends_parent else [head]
                for statement in q.prune_namespace(self.tables):
                    yield CStep(statement, {"tenant": tenant, "thread_id": thread_id,
                                            "checkpoint_ns": ns, "head": head, "keep": keep})
            yield from self._collect_blobs(tenant, [(thread_id, head[0]) for head in heads])
