"""The peer suite's fixtures: LangGraph's own store tests, run against this project's stores.

LangGraph's tests address a store that holds any namespace. Ours holds the namespaces of a
spec's layout, ``(tenant_id, tier, *rest)`` (docs/langgraph.md). The one thing these fixtures
change is that mapping: :class:`Rooted` gives a test one fresh tenant of
``tests/peer/peer_agent.yaml`` and puts ``(tenant, "items")`` in front of every namespace it
sends, and takes it off every namespace it returns. Everything else (puts, reads, searches,
listings, TTLs, errors) is the store's own, connecting as the application role.

:class:`LetterEmbeddings` is the suite's embedding model: a text's vector is the
frequency-weighted sum of one fixed random direction per character, scaled to unit length, so
texts that share characters lie close and equal texts embed equally.
"""

from __future__ import annotations

import hashlib
import math
import random
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchOp,
    TTLConfig,
)
from psycopg import sql

from primitives._project import migrate
from primitives.db import APP_ROLE
from primitives.langgraph import AsyncMemoryStore, MemoryStore
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

SPEC = Path(__file__).with_name("peer_agent.yaml")
TIER = "items"
DIMS = 500  # peer_agent.yaml retrieval.embedding.dims, LangGraph's tests' embedding width
TTL_SECONDS = 6
TTL_MINUTES = TTL_SECONDS / 60
STORE_TTL: TTLConfig = {"default_ttl": TTL_MINUTES, "refresh_on_read": True,
                        "sweep_interval_minutes": 1}
MEMORIES = sql.Identifier("peer_store", "peer_memories")
DISTANCES = ["cosine", "inner_product", "l2"]

pytestmark = pytest.mark.filterwarnings("ignore:.*(semantic|graph) signal")


class LetterEmbeddings(Embeddings):
    """Deterministic character-frequency embeddings (see the module docstring)."""

    def __init__(self, dims: int = DIMS) -> None:
        self.dims = dims
        self._directions: dict[str, list[float]] = {}

    def _direction(self, char: str) -> list[float]:
        if char not in self._directions:
            seed = int.from_bytes(hashlib.sha256(char.encode()).digest()[:8], "big")
            draw = random.Random(seed)
            self._directions[char] = [draw.gauss(0.0, 1.0) for _ in range(self.dims)]
        return self._directions[char]

    def _vector(self, text: str) -> list[float]:
        counts = Counter(text)
        total = sum(counts.values())
        vector = [0.0] * self.dims
        for char, count in counts.items():
            weight = count / total
            for i, x in enumerate(self._direction(char)):
                vector[i] += weight * x
        norm = math.sqrt(sum(x * x for x in vector))
        return [x / norm for x in vector] if norm > 0 else vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LetterEmbeddings) and other.dims == self.dims

    def __hash__(self) -> int:
        return hash(self.dims)


class Rooted(BaseStore):
    """One tenant's part of a spec store, addressed by LangGraph's namespaces: ``ns`` is the
    layout's ``(tenant, "items", *ns)``. Only namespaces are translated; ``put``/``get`` and
    the other methods are BaseStore's, so they validate and default exactly as for any store."""

    supports_ttl = True

    def __init__(self, inner: MemoryStore | AsyncMemoryStore, tenant: str) -> None:
        self.inner = inner
        self.tenant = tenant
        self.root = (tenant, TIER)

    @property
    def ttl_config(self) -> TTLConfig | None:  # type: ignore[override]
        return self.inner.ttl_config

    @ttl_config.setter
    def ttl_config(self, value: TTLConfig | None) -> None:
        self.inner.ttl_config = value

    @property
    def index_config(self) -> IndexConfig | None:
        return self.inner.index_config

    def _in(self, op: Op) -> Op:
        if isinstance(op, GetOp):
            return op._replace(namespace=self.root + op.namespace)
        if isinstance(op, PutOp):
            return op._replace(namespace=self.root + op.namespace)
        if isinstance(op, SearchOp):
            return op._replace(namespace_prefix=self.root + tuple(op.namespace_prefix))
        if isinstance(op, ListNamespacesOp):
            conditions = [MatchCondition(c.match_type, self.root + tuple(c.path))
                          if c.match_type == "prefix" else c for c in op.match_conditions or ()]
            if not any(c.match_type == "prefix" for c in conditions):
                conditions.insert(0, MatchCondition("prefix", self.root))
            depth = None if op.max_depth is None else op.max_depth + len(self.root)
            return op._replace(match_conditions=tuple(conditions), max_depth=depth)
        raise TypeError(type(op).__name__)

    def _out(self, result: Result) -> Result:
        if isinstance(result, Item):
            assert result.namespace[:len(self.root)] == self.root
            result.namespace = result.namespace[len(self.root):]
        elif isinstance(result, list):
            for found in result:
                if isinstance(found, Item):
                    self._out(found)
            return [ns[len(self.root):] if isinstance(ns, tuple) else ns for ns in result]
        return result

    def _back(self, results: list[Result]) -> list[Result]:
        out: list[Result] = []
        for result in results:
            mapped = self._out(result)
            if isinstance(result, list) and type(result) is not list:
                result[:] = mapped  # keep a SearchResult a SearchResult
                mapped = result
            out.append(mapped)
        return out

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return self._back(self.inner.batch([self._in(op) for op in ops]))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return self._back(await self.inner.abatch([self._in(op) for op in ops]))

    def setup(self) -> Any:
        return self.inner.setup()

    def start_ttl_sweeper(self, sweep_interval_minutes: int | None = None) -> Any:
        return self.inner.start_ttl_sweeper(sweep_interval_minutes)

    def stop_ttl_sweeper(self, timeout: float | None = None) -> Any:
        return self.inner.stop_ttl_sweeper(timeout)


def new_tenant() -> str:
    return f"peer-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def peer_spec(pg: PostgresHandle) -> AgentSpec:
    spec = load_spec(SPEC)
    migrate([spec], dsn=pg.admin_dsn)
    return spec


@pytest.fixture
def fake_embeddings() -> LetterEmbeddings:
    return LetterEmbeddings()


def vector_index(embeddings: LetterEmbeddings, distance: str = "cosine",
                 fields: list[str] | None = None) -> IndexConfig:
    config: dict[str, Any] = {"dims": embeddings.dims, "embed": embeddings,
                              "distance_type": distance}
    if fields is not None:
        config["fields"] = fields
    return config  # type: ignore[return-value]


@contextmanager
def sync_store(pg: PostgresHandle, spec: AgentSpec, *, index: IndexConfig | None = None,
               ttl: TTLConfig | None = None, max_connections: int = 4) -> Iterator[Rooted]:
    with MemoryStore.from_spec(spec, pg.app_dsn, index=index, ttl=ttl,
                               max_connections=max_connections) as inner:
        inner.setup()
        yield Rooted(inner, new_tenant())


@asynccontextmanager
async def async_store(pg: PostgresHandle, spec: AgentSpec, *, index: IndexConfig | None = None,
                      ttl: TTLConfig | None = None,
                      max_connections: int = 4) -> AsyncIterator[Rooted]:
    inner = await AsyncMemoryStore.from_spec(spec, pg.app_dsn, index=index, ttl=ttl,
                                             max_connections=max_connections)
    async with inner:
        await inner.setup()
        yield Rooted(inner, new_tenant())


def expire_now(pg: PostgresHandle, store: Rooted, ns: tuple[str, ...], key: str) -> None:
    """Move an item's expiry a minute into the past, as the application role in the
    item's tenant (the row stays, as LangGraph's tests leave it unswept)."""
    _as_app(pg, store, "UPDATE {} SET expires_at = now() - interval '1 minute' "
            "WHERE tier = %s AND namespace = %s AND key = %s AND superseded_at IS NULL "
            "AND tombstoned_at IS NULL", (TIER, list(ns), key))


def backdate(pg: PostgresHandle, store: Rooted, ns: tuple[str, ...], key: str,
             seconds: int) -> None:
    """Set an item's ``updated_at`` ``seconds`` into the past."""
    _as_app(pg, store, "UPDATE {} SET updated_at = now() - %s * interval '1 second' "
            "WHERE tier = %s AND namespace = %s AND key = %s AND superseded_at IS NULL "
            "AND tombstoned_at IS NULL", (seconds, TIER, list(ns), key))


def stored_expiry(pg: PostgresHandle, store: Rooted, ns: tuple[str, ...], key: str) -> Any:
    rows = _as_app(pg, store, "SELECT expires_at FROM {} WHERE tier = %s AND namespace = %s "
                   "AND key = %s AND superseded_at IS NULL AND tombstoned_at IS NULL",
                   (TIER, list(ns), key))
    assert len(rows) == 1
    return rows[0][0]


def row_count(pg: PostgresHandle, store: Rooted, ns: tuple[str, ...], key: str) -> int:
    """Rows of the key still holding its slot (expired or not)."""
    rows = _as_app(pg, store, "SELECT count(*) FROM {} WHERE tier = %s AND namespace = %s "
                   "AND key = %s AND superseded_at IS NULL AND tombstoned_at IS NULL",
                   (TIER, list(ns), key))
    return int(rows[0][0])


def _as_app(pg: PostgresHandle, store: Rooted, statement: str,
            params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    import psycopg

    from primitives.db import tenant_transaction
    with psycopg.connect(pg.app_dsn) as conn:
        assert conn.info.user == APP_ROLE
        with tenant_transaction(conn, store.tenant):
            cur = conn.execute(sql.SQL(statement).format(MEMORIES), params)
            return cur.fetchall() if cur.description else []
