"""The common ``observe`` put straight into its prepared call.

``Engine.observe`` and ``AsyncEngine.observe`` send a write in one round trip: ``BEGIN``, the
bound tenant, the execution of the prepared insert (row, journal event, scope mark) with its
values bound in text form, ``COMMIT; RESET ALL``. The general path gets there through the
core operation: :func:`~primitives.engine._core.observe` yields a step with a parameter dict,
and :class:`~primitives.db._oneshot.OnceTransaction` works out each parameter's SQL type and
text form. For the common write (no key, no vector made inline, no temporal edge) every parameter's
type is known in advance, so :func:`observe_call` checks the fields with the same function as
the core operation (:func:`~primitives.engine._core.checked_write`) and writes the values
itself: the same prepared statement and the same values
(``tests/integration/test_observe_message.py`` compares the two), for less of the client's
CPU per write.

A deferred write (``retrieval.embedding.embed: deferred``) stores no vector, so it takes this
path with an embedder too. Anything else returns ``None`` and takes the general path, which
also raises what the write's errors are: a key, an embedder that embeds inline, a temporal
edge, a typology whose conflict strategy looks for a similar row it contradicts, a write policy
that samples, a Citus cluster, personal data
the PII policy redacted, an unknown field, a value written here
differently (text with a NUL, a naive event time, an envelope JSON cannot encode), a
connection with a row factory of its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from json.encoder import encode_basestring_ascii as _json_string
from operator import itemgetter
from typing import Any

from psycopg.rows import tuple_row

from primitives.db._oneshot import _Prepared, _prepared_form, _text_array, _unfit, server_form
from primitives.engine import _queries as q
from primitives.engine._anchor import Anchor
from primitives.engine._base import EngineBase, render
from primitives.engine._core import (
    WriteInput,
    _memory_id,
    checked_write,
    links_to_previous,
    observed_payload,
    similarity_detects,
    write_sampling,
)

__all__ = ["ObserveCall", "observe_call"]

_FIELDS = frozenset({"typology", "key", "namespace", "value", "envelope", "tags", "scope_id",
                     "event_time", "source", "memory_id"})
"""The fields of ``observe`` this path writes (``key`` only as ``None``)."""

_TYPES = {"id": "uuid", "event_id": "uuid", "value": "jsonb", "envelope": "jsonb",
          "provenance": "jsonb", "payload": "jsonb", "event_time": "timestamp with time zone"}
"""The SQL types the general path declares for these parameters; every other one (text,
NULL, a list of text) is ``unknown``, as psycopg sends it."""


class _Unfit(Exception):
    """A value this path does not write; the general path takes the call."""


@dataclass(frozen=True)
class ObserveCall:
    """One ``observe``, ready to send: its tenant, its prepared call and what it wrote (for
    :meth:`~primitives.engine.Memory.from_written`)."""

    tenant: str
    prepared: _Prepared
    written: dict[str, Any]


def _text(value: str, encoding: str) -> bytes:
    if "\x00" in value:
        raise _Unfit  # PostgreSQL text holds no NUL: the general path says so
    return value.encode(encoding)


_ENCODER = json.JSONEncoder()
"""``json.dumps`` with its defaults, without re-reading its options on every call."""
_EMPTY_OBJECT = b"{}"


def _jsonb(value: dict[str, Any], encoding: str) -> bytes:
    if not value:
        return _EMPTY_OBJECT
    return _text(_ENCODER.encode(value), encoding)


def _payload(payload: dict[str, Any], encoding: str) -> bytes:
    """The ``observed`` payload as ``json.dumps`` writes it (its keys and their order are
    :func:`~primitives.engine._core.observed_payload`'s; strings escaped to ASCII as
    ``json.dumps`` escapes them), as ``jsonb`` text."""
    scope = payload["scope_id"]
    text = (
        f'{{"tier": {_json_string(payload["tier"])}, '
        f'"typology": {_json_string(payload["typology"])}, '
        f'"key": {_json_string(payload["key"])}, '
        f'"namespace": [{", ".join(map(_json_string, payload["namespace"]))}], '
        f'"scope_id": {"null" if scope is None else _json_string(scope)}, '
        f'"content_sha256": "{payload["content_sha256"]}", '
        f'"value_sha256": "{payload["value_sha256"]}", '
        f'"via": {_json_string(payload["via"])}}}')
    return _text(text, encoding)


def _labels(items: list[str], encoding: str) -> bytes:
    for item in items:
        if "\x00" in item:
            raise _Unfit
    return _text_array(items).encode(encoding)


_GETTERS: dict[tuple[str, ...], Any] = {}
_BY_TEXT: dict[str, tuple[str, str]] = {}


def _getter(order: tuple[str, ...]) -> Any:
    """The values of ``order``'s parameters, in that order, as one C-level lookup."""
    getter = _GETTERS.get(order)
    if getter is None:
        getter = itemgetter(*order) if len(order) > 1 else (lambda d: (d[order[0]],))
        _GETTERS[order] = getter
    return getter


def _form(conn: Any, text: str, base: str, order: tuple[str, ...]) -> tuple[str, str]:
    """``(name, PREPARE)`` of the insert: its types are this module's for every call."""
    form = _BY_TEXT.get(text)
    if form is None:
        form = _prepared_form(conn, text, base, [_TYPES.get(n, "unknown") for n in order])
        _BY_TEXT[text] = form
    return form


def observe_call(engine: EngineBase, conn: Any, anchor: Anchor, tier: str, content: str,
                 actor: str, fields: Mapping[str, Any]) -> ObserveCall | WriteInput | None:
    """``engine.observe(anchor, tier, content, actor=actor, **fields)`` as its prepared call
    on ``conn``, or, when the general path must take it (module docstring), the fields as the
    spec's checks left them (hand them to ``core.observe(..., checked=)``: the checks and the
    PII scan then run once), or ``None`` when they did not run yet. The spec's checks run
    here and raise as they do on the general path."""
    if (not _FIELDS.issuperset(fields) or fields.get("key") is not None
            or (engine.embedder is not None and engine.has_embedding
                and engine.spec.retrieval.embedding.embed == "inline")
            or type(actor) is not str or conn.row_factory is not tuple_row):
        return None
    source, event_time = fields.get("source"), fields.get("event_time")
    if ((source is not None and type(source) is not str)
            or (event_time is not None
                and (type(event_time) is not datetime or event_time.tzinfo is None))):
        return None
    spec = engine.spec
    w = checked_write(spec, tier, content, typology=fields.get("typology"), key=None,
                      namespace=fields.get("namespace", ()), value=fields.get("value"),
                      envelope=fields.get("envelope"), tags=fields.get("tags", ()),
                      scope_id=fields.get("scope_id"), source=source)
    if (links_to_previous(spec, w.scope_id) or similarity_detects(spec, w.typology)
            or w.pii is not None or spec.tier(w.tier).ttl_ticks is not None
            or anchor.provenance or write_sampling(spec, w.typology) < 1.0 or engine.citus):
        return w  # a temporal edge, the conflict lookup of detect: similarity, or redacted
        # personal data (its pii_redacted event), a ticked tier (its ttl_ticks), or the
        # anchor's provenance keys (recorded in the row's provenance), or a write policy
        # that samples (its sampled_out event instead of the row), or a Citus cluster (the
        # write's id is read first: the cluster's insert raises on a taken id)
    tables = engine.tables
    statement = q.insert_memory_observed(tables, tables.anchor_columns, embedding=False,
                                         scoped=w.scope_id is not None)
    form = server_form(render(statement, conn))
    if form is None:
        return None
    base, text, order = form
    new_id = _memory_id(fields.get("memory_id"))
    row_key = str(new_id)
    when = event_time or datetime.now(UTC)  # an instant: the column is timestamptz
    encoding = conn.info.encoding
    try:
        values = {column: None if value is None else _text(value, encoding)
                  for column, value in anchor.values}
        values.update({
            "id": new_id.hex.encode(), "tier": _text(w.tier, encoding),
            "typology": _text(w.typology, encoding),
            "scope_id": None if w.scope_id is None else _text(w.scope_id, encoding),
            "namespace": _labels(w.namespace, encoding), "key": row_key.encode(),
            "content": _text(w.content, encoding), "value": _jsonb(w.value, encoding),
            "envelope": _jsonb(w.envelope, encoding), "tags": _labels(w.tags, encoding),
            "provenance": _EMPTY_OBJECT, "event_time": str(when).encode(),
            "source": None if source is None else _text(source, encoding),
            "actor": _text(actor, encoding), "tenant": _text(anchor.tenant, encoding),
            "event_id": q.new_event_id().hex.encode(),
            "payload": _payload(observed_payload(w, row_key, "direct"), encoding),
        })
        arguments = tuple(_getter(order)(values))
    except (_Unfit, TypeError, ValueError, KeyError, UnicodeEncodeError):
        return None  # JSON cannot encode a value, or the statement has a parameter not here
    name, prepare = _form(conn, text, base, order)
    if name in _unfit:
        return None
    return ObserveCall(anchor.tenant, _Prepared(name, prepare, arguments), {
        "id": new_id, "tier": w.tier, "typology": w.typology, "scope_id": w.scope_id,
        "namespace": w.namespace, "key": row_key, "content": w.content, "tags": w.tags})
