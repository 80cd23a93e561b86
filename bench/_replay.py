"""The engine's own write message, sent by a client that does nothing else.

:class:`ReplayTarget` asks the engine once for the message of one ``observe`` (exactly as
``Engine.observe`` builds it, :func:`~primitives.engine._observe_message.observe_call`:
``BEGIN; SET LOCAL`` tenant, ``EXECUTE`` of the prepared insert of row, journal event and
scope mark, ``COMMIT; RESET ALL``) and then sends that message
again and again, with the tenant, the memory id and the event id replaced for each write.
The server does all the work of a real write (row-level security, chain trigger, text
index, commit); the client spends a few microseconds per write instead of the engine's
Python. Writes per second of this replay are what the server can take of the engine's
writes on this machine: the ceiling that no client-side work can raise.

``relaxed=True`` adds ``SET LOCAL synchronous_commit = off`` to each transaction, which
measures what the durable commit (the WAL flush) costs. The engine never sends it; this
is a measurement only.

Diagnostic only (``python -m bench.ceiling``): the headline numbers come from the engine.
"""

from __future__ import annotations

import re
import warnings
from typing import Any
from uuid import uuid4

import psycopg

from primitives.db._oneshot import _begin, _exchange, _Prepared
from primitives.engine import Engine
from primitives.engine._anchor import resolve_anchor
from primitives.engine._observe_message import ObserveCall, observe_call
from primitives.spec import load_spec

__all__ = ["ReplayTarget", "one_message_call", "write_message"]

_MARK = "replay-tenant-mark"
"""The tenant the message is built for; each write puts its own tenant in its place."""

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_RELAX = "SET LOCAL synchronous_commit = off"


def one_message_call(engine: Engine, conn: psycopg.Connection[Any], tenant: str, tier: str,
                     content: str, fields: dict[str, Any]) -> ObserveCall:
    """``engine.observe({tenant key: tenant}, tier, content, **fields)`` as the one-message
    call it sends on ``conn`` (nothing is sent). An error when the engine would take its
    general path for it: a measurement built on the call would no longer be of the write."""
    anchor = resolve_anchor(engine.spec, {engine.spec.anchor.tenant_key: tenant})
    call = observe_call(engine, conn, anchor, tier, content, "agent", fields)
    if call is None:
        raise AssertionError("Engine.observe is expected to send this write in its one-message "
                             "form (no key, no embedder): the measurement cannot stand in for it")
    return call


def write_message(conn: psycopg.Connection[Any], engine: Engine, tier: str,
                  fields: dict[str, Any]) -> tuple[_Prepared, tuple[str, str]]:
    """The prepared call ``engine.observe({tenant: _MARK}, tier, **fields)`` sends on ``conn``
    (its ``PREPARE`` and its ``EXECUTE`` arguments) and the two ids in it (memory, event).
    Nothing is sent."""
    fields = dict(fields)
    content = fields.pop("content")
    call = one_message_call(engine, conn, _MARK, tier, content, fields)
    memory_id = str(call.written["id"])
    others = set(_UUID.findall(call.prepared.arguments)) - {memory_id}
    if len(others) != 1:
        raise AssertionError(f"expected one event id besides the memory id, found {others}")
    return call.prepared, (memory_id, others.pop())


class ReplayTarget:
    """Writes that replay the engine's message (see the module's docstring)."""

    def __init__(self, dsn: str, spec_path: Any, tier: str, fields: dict[str, Any], *,
                 relaxed: bool = False) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # no embedder: expected
            engine = Engine.connect(load_spec(spec_path), dsn, max_connections=1)
        try:
            self.conn = psycopg.connect(dsn, autocommit=True)
            prepared, self._ids = write_message(self.conn, engine, tier, fields)
        finally:
            engine.close()
        self.conn.execute(prepared.prepare)
        self._body = f"EXECUTE {prepared.name}{prepared.arguments}; COMMIT; RESET ALL"
        if self._body.count(f"'{_MARK}'") != self._body.count(_MARK):
            raise AssertionError("the tenant appears in the insert other than as a literal")
        self._relaxed = relaxed
        self._heads: dict[str, str] = {}

    def _head(self, tenant: str) -> str:
        head = self._heads.get(tenant)
        if head is None:
            head = _begin(tenant) + (f"; {_RELAX}; " if self._relaxed else "; ")
            self._heads[tenant] = head
        return head

    def writer(self) -> Any:
        conn, body, (memory_id, event_id) = self.conn, self._body, self._ids
        encoding = conn.info.encoding

        def write(tenant: str, i: int) -> None:
            text = body.replace(_MARK, tenant.replace("'", "''")).replace(
                memory_id, str(uuid4())).replace(event_id, str(uuid4()))
            _exchange(conn, (self._head(tenant) + text).encode(encoding))

        return write

    def close(self) -> None:
        self.conn.close()
