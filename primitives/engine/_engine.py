"""The engine: the one choke point for memory access (DESIGN §2).

``engine.tenant(anchor)`` opens a tenant-scoped transaction; every read and write
inside it runs as the application role with the tenant set by ``SET LOCAL``, and
every write appends its journal event in the same transaction.

Example::

    engine = Engine.connect(load_spec("agents/spectral_agent.yaml"))
    with engine.tenant({"workspace_id": "ws-acme"}) as mem:
        mem.observe("cycle", "lowering temperature removed fabrication", scope_id="c-1")
        hits = mem.search("temperature fabrication")
    engine.close()
"""

from __future__ import annotations

import hashlib
import json
import logging
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from primitives.compile import Tables, agent_tables
from primitives.db import app_dsn, resolve_dsn, tenant_transaction
from primitives.engine._anchor import Anchor, resolve_anchor
from primitives.engine._queries import (
    current_by_key,
    insert_event,
    insert_memory,
    search_statement,
    select_memory,
    supersede,
)
from primitives.engine._records import Hit, Memory
from primitives.errors import GovernanceError, PolicyViolation, StorageError, TenancyError
from primitives.spec import AgentSpec

__all__ = ["Engine", "TenantMemory", "content_hash"]

_log = logging.getLogger("primitives.engine")

_QUERY_SIGNALS = ("lexical", "envelope", "recency")
"""Signals this engine evaluates itself; ``semantic`` needs an embedder (DESIGN §7)."""


def content_hash(text: str) -> str:
    """sha256 hex of ``text``: what the journal records instead of the content itself."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _canonical(value: Mapping[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class Engine:
    """Spec-bound access to an agent's memory. Create with :meth:`connect`."""

    def __init__(self, spec: AgentSpec, pool: ConnectionPool[psycopg.Connection[Any]]) -> None:
        self.spec = spec
        self.tables: Tables = agent_tables(spec)
        self._pool = pool
        self.signals, self.warnings = _effective_signals(spec)
        for message in self.warnings:
            warnings.warn(message, RuntimeWarning, stacklevel=2)

    @classmethod
    def connect(
        cls, spec: AgentSpec, dsn: str | None = None, *, max_connections: int = 4
    ) -> Engine:
        """Open a pool of application-role connections (``dsn`` defaults to the resolved one)."""
        runtime = dsn or app_dsn(resolve_dsn())
        try:
            pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
                runtime, min_size=1, max_size=max_connections, open=True,
                kwargs={"autocommit": True}, name=f"primitives-{spec.agent}",
            )
            pool.wait(timeout=15)
        except psycopg.Error as err:
            raise StorageError(f"cannot connect as the application role: {err}") from err
        except Exception as err:  # psycopg_pool.PoolTimeout
            raise StorageError(f"cannot connect as the application role: {err}") from err
        return cls(spec, pool)

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def tenant(self, anchor: Mapping[str, object], *, actor: str = "agent") -> Iterator[
        TenantMemory
    ]:
        """One tenant-scoped transaction; commits on success, rolls back on error."""
        resolved = resolve_anchor(self.spec, anchor)
        with self._pool.connection() as conn, tenant_transaction(conn, resolved.tenant):
            yield TenantMemory(self, conn, resolved, actor)


def _effective_signals(spec: AgentSpec) -> tuple[tuple[str, ...], list[str]]:
    wanted = list(spec.retrieval.signals)
    notes: list[str] = []
    if "semantic" in wanted:
        wanted.remove("semantic")
        notes.append(
            f"agent '{spec.agent}': the semantic signal needs an embedder, which this engine "
            "does not have; retrieval uses lexical full-text search in its place"
        )
        if "lexical" not in wanted:
            wanted.insert(0, "lexical")
    if "graph" in wanted:
        wanted.remove("graph")
        notes.append(f"agent '{spec.agent}': the graph signal is not evaluated by this engine")
    return tuple(s for s in wanted if s in _QUERY_SIGNALS), notes


class TenantMemory:
    """The operations available inside one tenant transaction."""

    def __init__(self, engine: Engine, conn: psycopg.Connection[Any], anchor: Anchor,
                 actor: str) -> None:
        self._engine = engine
        self._conn = conn
        self.anchor = anchor
        self.actor = actor

    @property
    def spec(self) -> AgentSpec:
        return self._engine.spec

    # writes -------------------------------------------------------------------------------------
    def observe(
        self,
        tier: str,
        content: str,
        *,
        typology: str | None = None,
        key: str | None = None,
        namespace: Sequence[str] = (),
        value: Mapping[str, Any] | None = None,
        envelope: Mapping[str, Any] | None = None,
        tags: Sequence[str] = (),
        scope_id: str | None = None,
        event_time: datetime | None = None,
        source: str | None = None,
    ) -> Memory:
        """Write a memory. With ``key``: the current row of that key is superseded, or, when
        the content and value are unchanged, returned as is (no new row, no event)."""
        typ = self._typology(tier, typology)
        self._check_write_policy(tier, typ)
        value = dict(value or {})
        envelope = dict(envelope or {})
        self._check_limits(content, value, envelope)
        tables = self._engine.tables
        ns = list(namespace)
        previous: Memory | None = None
        if key is not None:
            row = self._conn.execute(current_by_key(tables), {
                "tenant": self.anchor.tenant, "tier": tier, "namespace": ns, "key": key,
            }).fetchone()
            if row is not None:
                previous = Memory.from_row(row)
                if previous.content == content and previous.value == value and \
                        previous.envelope == envelope and previous.typology == typ:
                    return previous
        new_id = uuid4()
        params: dict[str, Any] = {
            **self.anchor.as_dict(),
            "id": new_id, "tier": tier, "typology": typ, "scope_id": scope_id, "namespace": ns,
            "key": key if key is not None else str(new_id), "content": content,
            "value": Jsonb(value), "envelope": Jsonb(envelope), "tags": list(tags),
            "provenance": Jsonb({}), "event_time": event_time or datetime.now().astimezone(),
            "source": source, "actor": self.actor,
        }
        if previous is not None:
            # Free the current-key slot first; the new row takes it. The old row stays.
            self._conn.execute(supersede(tables), {
                "tenant": self.anchor.tenant, "id": previous.id, "by": new_id,
            })
        created = Memory.from_row(self._fetch(insert_memory(tables, tables.anchor_columns),
                                              params))
        if previous is not None:
            self._event("superseded", previous.id, {"by": str(created.id)})
        self._event("observed", created.id, {
            "tier": tier, "typology": typ, "key": created.key, "namespace": ns,
            "scope_id": scope_id, "content_sha256": content_hash(content),
            "value_sha256": content_hash(_canonical(value)),
        })
        return created

    # reads --------------------------------------------------------------------------------------
    def get(self, memory_id: UUID) -> Memory | None:
        row = self._conn.execute(select_memory(self._engine.tables), {
            "tenant": self.anchor.tenant, "id": memory_id,
        }).fetchone()
        return Memory.from_row(row) if row else None

    def search(
        self,
        query: str = "",
        *,
        envelope: Mapping[str, Any] | None = None,
        tiers: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[Hit]:
        """Hybrid search over active rows of this tenant, fused by reciprocal rank."""
        retrieval = self.spec.retrieval
        scope = dict(retrieval.scope) or {name: 1.0 for name in self.spec.tier_names}
        chosen = list(tiers) if tiers is not None else list(scope)
        for tier in chosen:
            if tier not in self.spec.tier_names:
                raise TenancyError(f"unknown tier '{tier}' for agent '{self.spec.agent}'; "
                                   f"tiers: {', '.join(self.spec.tier_names)}")
        limit = limit or retrieval.default_limit
        signals = self._engine.signals
        params: dict[str, Any] = {
            "tenant": self.anchor.tenant, "tiers": chosen,
            "tier_weights": [scope.get(t, 1.0) for t in chosen], "query": query,
            "config": retrieval.text_search_config, "envelope": Jsonb(dict(envelope or {})),
            "cap": max(limit * 5, 50), "k": retrieval.fusion.k, "limit": limit,
        }
        for signal in signals:
            params[f"w_{signal}"] = retrieval.fusion.weights.get(signal, 1.0)  # type: ignore[call-overload]
        rows = self._conn.execute(search_statement(self._engine.tables, signals),
                                  params).fetchall()
        return [Hit(Memory.from_row(row[:-2]), float(row[-2]), dict(row[-1])) for row in rows]

    # internals ----------------------------------------------------------------------------------
    def _typology(self, tier: str, typology: str | None) -> str:
        kinds = self.spec.typology.get(tier)
        if kinds is None:
            raise TenancyError(f"unknown tier '{tier}' for agent '{self.spec.agent}'; tiers: "
                               f"{', '.join(self.spec.tier_names)}")
        if typology is None:
            if len(kinds) != 1:
                raise TenancyError(f"tier '{tier}' holds {', '.join(kinds)}: say which typology")
            return kinds[0]
        if typology not in kinds:
            raise TenancyError(f"tier '{tier}' holds {', '.join(kinds)}, not '{typology}'")
        return typology

    def _check_write_policy(self, tier: str, typology: str) -> None:
        policy = self.spec.behavior.write_policy.get(typology)  # type: ignore[call-overload]
        if policy is None:
            return
        if policy.mode == "promotion_only":
            raise GovernanceError(
                f"{typology} memory of agent '{self.spec.agent}' is written only by the "
                "promotion engine (behavior.write_policy: promotion_only); observe episodic "
                "memory and let behavior.promotion promote it", tier=tier, typology=typology,
            )
        if policy.mode == "governed":
            raise GovernanceError(
                f"{typology} memory of agent '{self.spec.agent}' needs an approved "
                f"{policy.governance.request_kind if policy.governance else 'action request'} "
                "before it is written", tier=tier, typology=typology,
            )

    def _check_limits(self, content: str, value: dict[str, Any], envelope: dict[str, Any]) -> None:
        limits = self.spec.persistence.store.limits
        if not content.strip():
            raise PolicyViolation("memory content is empty")
        if len(content) > limits.content_chars:
            raise PolicyViolation(
                f"content is {len(content)} characters; agent '{self.spec.agent}' allows "
                f"{limits.content_chars} (persistence.store.limits.content_chars). Memory rows "
                "hold bounded notes, never canonical bodies: store a reference instead",
                limit=limits.content_chars,
            )
        for name, data, limit in (("value", value, limits.value_bytes),
                                  ("envelope", envelope, limits.envelope_bytes)):
            size = len(_canonical(data).encode("utf-8"))
            if size > limit:
                raise PolicyViolation(
                    f"{name} is {size} bytes; agent '{self.spec.agent}' allows {limit} "
                    f"(persistence.store.limits.{name}_bytes)", limit=limit,
                )

    def _event(self, kind: str, memory_id: UUID | None, payload: Mapping[str, Any]) -> None:
        self._conn.execute(insert_event(self._engine.tables), {
            "tenant": self.anchor.tenant, "kind": kind, "memory_id": memory_id,
            "actor": self.actor, "payload": Jsonb(dict(payload)),
        })

    def _fetch(self, statement: Any, params: Mapping[str, Any]) -> tuple[Any, ...]:
        row = self._conn.execute(statement, params).fetchone()
        if row is None:
            raise StorageError("the database returned no row for a write")
        return tuple(row)


