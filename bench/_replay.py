"""The engine's own write message, sent by a client that does nothing else.

:class:`ReplayTarget` asks the engine once for the message of one ``observe`` (exactly as
``Engine.observe`` builds it, :func:`~primitives.engine._observe_message.observe_call`:
``BEGIN``, the bound tenant, the prepared insert of row, journal event and scope mark with
its bound values, ``COMMIT``, ``RESET ALL``, queued in one pipeline) and then sends those
commands again and again, with the tenant, the memory id and the event id replaced in the
values for each write.
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

import warnings
from typing import Any
from uuid import uuid4

import psycopg

from primitives.db._oneshot import _Prepared
from primitives.db._pipeline import Command, begin, exchange
from primitives.engine import Engine, _queries
from primitives.engine._anchor import resolve_anchor
from primitives.engine._observe_message import ObserveCall, observe_call
from primitives.spec import load_spec

__all__ = ["ReplayTarget", "one_message_call", "write_message"]

_MARK = "replay-tenant-mark"
"""The tenant the message is built for; each write puts its own tenant in its place."""

_RELAX = Command(b"SET LOCAL synchronous_commit = off")


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
    (its ``PREPARE`` and its bound values) and the two ids in it (memory, event).
    Nothing is sent."""
    fields = dict(fields)
    content = fields.pop("content")
    event_id = uuid4()
    fields["memory_id"] = memory_id = uuid4()
    made, _queries.new_event_id = _queries.new_event_id, lambda: event_id
    try:
        call = one_message_call(engine, conn, _MARK, tier, content, fields)
    finally:
        _queries.new_event_id = made
    if event_id.hex.encode() not in call.prepared.values:
        raise AssertionError("the event id is not among the insert's values")
    return call.prepared, (str(memory_id), str(event_id))


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
        self._name, self._values = prepared.name.encode(), prepared.values
        if not any(_MARK.encode() == value for value in self._values):
            raise AssertionError("the tenant is not one of the insert's values")
        self._relaxed = relaxed

    def _head(self, tenant: bytes) -> list[Command]:
        """``BEGIN``, the bound tenant and, relaxed, the unflushed commit."""
        head = begin(tenant)
        return [*head, _RELAX] if self._relaxed else head

    def writer(self) -> Any:
        conn, (memory_id, event_id) = self.conn, self._ids
        marks = ((_MARK.encode(), None), (memory_id.encode(), "id"),
                 (memory_id.replace("-", "").encode(), "hex"),
                 (event_id.replace("-", "").encode(), "event"))
        encoding = conn.info.encoding

        def write(tenant: str, i: int) -> None:
            new_id, new_event = uuid4(), uuid4()
            swap = {None: tenant.encode(encoding), "id": str(new_id).encode(),
                    "hex": new_id.hex.encode(), "event": new_event.hex.encode()}
            values = []
            for value in self._values:
                if value is not None:
                    for old, which in marks:
                        value = value.replace(old, swap[which])
                values.append(value)
            commands = [*self._head(swap[None]), Command(self._name, values, prepared=True),
                        Command(b"COMMIT"), Command(b"RESET ALL")]
            exchange(conn, commands)

        return write

    def close(self) -> None:
        self.conn.close()
