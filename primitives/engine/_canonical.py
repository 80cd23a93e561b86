"""Canonical references: a note points to a canonical row instead of copying its text.

A reference names one of the spec's ``discipline.non_mirror`` categories, the canonical
row's key and the version it was written against. For a category with a
``canonical_source`` the row must exist, and the version defaults to its current one (the
version column's value, or the sha256 of the canonical text): read back, a reference says
whether the row has moved on since (``stale``). Each reference is a
``canonical_referenced`` journal event.

>>> with engine.tenant({"world_id": "w-1"}) as mem:                  # doctest: +SKIP
...     note = mem.observe("world", "operators ask about R-12 when combat stalls")
...     mem.reference(note.id, "world_model_rule_content", "12")
...     [ref.stale for ref in mem.references(note.id)]
[False]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, Final
from uuid import UUID

from psycopg import sql

from primitives.compile import Tables
from primitives.compile._non_mirror import canonical_version_function
from primitives.engine._core import Context, Op, Step, _event, _memory_id, _require, get_step
from primitives.engine._input import bounded_text
from primitives.engine._records import Memory
from primitives.errors import PolicyViolation

__all__ = ["CANONICAL_REFERENCED_EVENT", "CanonicalRef", "reference", "references"]

CANONICAL_REFERENCED_EVENT: Final = "canonical_referenced"
"""The journal event of a new canonical reference."""


@dataclass(frozen=True)
class CanonicalRef:
    """One reference of a memory row to a canonical row, as written and as it stands now."""

    memory_id: UUID
    category: str
    key: str
    version: str
    """The version the reference was written against (pinned)."""
    current_version: str | None
    """The canonical row's version now; ``None`` for a category without a canonical source,
    or a row the server no longer holds."""
    created_at: datetime

    @property
    def stale(self) -> bool:
        """The canonical row has moved on since the reference was written."""
        return self.current_version is not None and self.current_version != self.version


def _refs(tables: Tables) -> sql.Identifier:
    assert tables.canonical_refs is not None
    return tables.canonical_refs.ident


@lru_cache(maxsize=64)
def current_versions(tables: Tables) -> sql.Composed:
    return sql.SQL("SELECT canonical_key, canonical_version FROM {}(%(category)s, %(keys)s)"
                   ).format(canonical_version_function(tables))


@lru_cache(maxsize=64)
def insert_reference(tables: Tables) -> sql.Composed:
    """A reference; an existing one (same memory, category and key) is kept: no row back."""
    return sql.SQL(
        "INSERT INTO {} ({}, memory_id, category, canonical_key, canonical_version, actor) "
        "VALUES (%(tenant)s, %(memory_id)s, %(category)s, %(key)s, %(version)s, %(actor)s) "
        "ON CONFLICT DO NOTHING RETURNING created_at"
    ).format(_refs(tables), tables.tenant)


@lru_cache(maxsize=64)
def select_references(tables: Tables, *, citus: bool = False) -> sql.Composed:
    """A memory's references with each canonical row's current version (one statement).
    ``citus``: without the current version (NULL), which :func:`references` reads on the
    coordinator: Citus sends the statement to the tenant's worker, where the version
    function's query of the canonical (reference) table would be a distributed query from
    a shard, which it refuses."""
    if citus:
        return sql.SQL(
            "SELECT r.memory_id, r.category, r.canonical_key, r.canonical_version, "
            "NULL::text, r.created_at FROM {} AS r "
            "WHERE r.{} = %(tenant)s AND r.memory_id = %(memory_id)s "
            "ORDER BY r.created_at, r.category, r.canonical_key"
        ).format(_refs(tables), tables.tenant)
    return sql.SQL(
        "SELECT r.memory_id, r.category, r.canonical_key, r.canonical_version, "
        "v.canonical_version, r.created_at FROM {} AS r "
        "LEFT JOIN LATERAL {}(r.category, ARRAY[r.canonical_key]) AS v ON true "
        "WHERE r.{} = %(tenant)s AND r.memory_id = %(memory_id)s "
        "ORDER BY r.created_at, r.category, r.canonical_key"
    ).format(_refs(tables), canonical_version_function(tables), tables.tenant)


def _category(ctx: Context, category: str) -> Any:
    for item in ctx.spec.discipline.non_mirror:
        if item.category == category:
            return item
    known = ", ".join(item.category for item in ctx.spec.discipline.non_mirror) or "none"
    raise PolicyViolation(
        f"'{category}' is not a non-mirror category of agent '{ctx.spec.agent}' "
        f"(discipline.non_mirror: {known})", field="category")


def reference(ctx: Context, memory_id: UUID | str, category: str, key: str, *,
              version: str | None = None) -> Op[CanonicalRef]:
    """Record that memory ``memory_id`` refers to the canonical row ``key`` of ``category``,
    pinned to ``version`` (default: the row's current version). A category with a canonical
    source needs an existing row; one without needs ``version``. Writing the same reference
    again returns it unchanged, with no event."""
    if ctx.tables.canonical_refs is None:
        raise PolicyViolation(f"agent '{ctx.spec.agent}' declares no non-mirror category: "
                              "there is nothing to reference", field="category")
    item = _category(ctx, category)
    limit = ctx.spec.persistence.store.limits.key_chars
    key = bounded_text(key, "key", limit, "key_chars")
    if version is not None:
        version = bounded_text(version, "version", limit, "key_chars")
    memory_id = _memory_id(memory_id)
    memory = _require(Memory.from_row_or_none((yield get_step(ctx, memory_id))), memory_id)
    if item.bounded_notes and len(memory.content) > item.note_chars:
        raise PolicyViolation(
            f"non-mirror: memory {memory_id} holds {len(memory.content)} characters and "
            f"references category {category} ({item.defense}), whose notes hold at most "
            f"{item.note_chars} (discipline.non_mirror[].note_chars): keep a short note about "
            "the canonical row and let the reference carry the rest", field="content",
            category=category, note_chars=item.note_chars, chars=len(memory.content))
    if item.canonical_source is not None:
        found = yield Step(current_versions(ctx.tables),
                           {"category": category, "keys": [key]}, "one")
        if found is None:
            raise PolicyViolation(
                f"no canonical row '{key}' in {item.canonical_source} (category {category}): "
                "a reference points to a row that exists", field="key",
                category=category, canonical_source=item.canonical_source, canonical_key=key)
        version = version if version is not None else found[1]
    elif version is None:
        raise PolicyViolation(
            f"category {category} has no canonical_source to read a version from: pass "
            "version= (what the note was written against)", field="version")
    assert version is not None
    row = yield Step(insert_reference(ctx.tables), {
        "tenant": ctx.tenant, "memory_id": memory_id, "category": category, "key": key,
        "version": version, "actor": ctx.actor}, "one")
    if row is not None:
        yield _event(ctx, CANONICAL_REFERENCED_EVENT, memory_id,
                     {"category": category, "key": key, "version": version})
    for ref in (yield from references(ctx, memory_id)):
        if (ref.category, ref.key) == (category, key):
            return ref
    raise AssertionError("a reference just written is not read back")


def checked_references(ctx: Context, given: Any) -> list[tuple[str, str, str | None]]:
    """``observe(references=...)`` as (category, key, version) triples: each item a
    ``(category, key)`` or ``(category, key, version)`` sequence, or a mapping with those
    keys; anything else is refused naming the item."""
    if isinstance(given, str | bytes | Mapping) or not isinstance(given, Sequence):
        raise PolicyViolation("references must be a list of (category, key[, version]) items",
                              field="references")
    refs: list[tuple[str, str, str | None]] = []
    for n, item in enumerate(given):
        if isinstance(item, Mapping):
            parts = (item.get("category"), item.get("key"), item.get("version"))
        elif isinstance(item, Sequence) and not isinstance(item, str | bytes) \
                and len(item) in (2, 3):
            parts = (item[0], item[1], item[2] if len(item) == 3 else None)
        else:
            parts = (None, None, None)
        category, key, version = parts
        if not isinstance(category, str) or not isinstance(key, str) or not (
                version is None or isinstance(version, str)):
            raise PolicyViolation(
                f"references[{n}] must be (category, key) or (category, key, version) "
                f"strings, not {item!r}", field="references")
        _category(ctx, category)
        refs.append((category, key, version))
    return refs


def references(ctx: Context, memory_id: UUID | str) -> Op[list[CanonicalRef]]:
    """The canonical references of ``memory_id``, each with its row's current version."""
    if ctx.tables.canonical_refs is None:
        return []
    rows = yield Step(select_references(ctx.tables, citus=ctx.citus),
                      {"tenant": ctx.tenant, "memory_id": _memory_id(memory_id)}, "all")
    if not ctx.citus:
        return [CanonicalRef(*row) for row in rows]
    # on a cluster: the current versions read on the coordinator, one statement a category
    current: dict[tuple[str, str], str] = {}
    for category in dict.fromkeys(row[1] for row in rows):
        found = yield Step(current_versions(ctx.tables), {
            "category": category, "keys": [row[2] for row in rows if row[1] == category]},
            "all")
        current |= {(category, key): version for key, version in found}
    return [CanonicalRef(memory_id, category, key, version, current.get((category, key)), at)
            for memory_id, category, key, version, _, at in rows]
