"""The maintain job's pass contract and the registry of pass builders.

A pass is one compiled statement over a batch of tenants: parameters ``%(tenants)s``
(text[]), ``%(now)s`` (timestamptz) and ``%(actor)s`` (text); it returns one row,
``(changed bigint)``; a report-only pass (``dispositions``) returns ``(0, counted)``. A pass journals every change it makes in the same statement
(data-modifying CTEs inserting the events), is idempotent (a second run changes nothing)
and touches only rows of ``%(tenants)s``.

``pass_builders`` lists the functions that compile a spec's passes, in the order their
passes run; a module with passes appends its builder here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, NamedTuple

from psycopg import sql

from primitives.compile import Tables
from primitives.spec import AgentSpec

__all__ = ["MaintenancePass", "PassBuilder", "Similarity", "pass_builders", "passes_for"]

Similarity = Literal["embedding", "trigram", "exact"]
"""How near-duplicates are measured: ``embedding`` (cosine where both rows have vectors,
trigram otherwise), ``trigram`` (pg_trgm on content) or ``exact`` (same lower-cased text)."""


class MaintenancePass(NamedTuple):
    """One step of ``primitives maintain``: a statement over ``%(tenants)s`` (text[]),
    ``%(now)s`` (timestamptz) and ``%(actor)s`` (text) that journals its own changes and
    returns one row, ``(changed bigint)``."""

    name: str
    statement: sql.Composed


PassBuilder = Callable[[AgentSpec, Tables, bool, Similarity], list[MaintenancePass]]
"""Builds a spec's passes from its tables, whether rows have vectors, and the similarity
measure the database offers."""


def _boundary(spec: AgentSpec, tables: Tables, embedding: bool,
              similarity: Similarity) -> list[MaintenancePass]:
    from primitives.lifecycle._boundary import boundary_passes
    return boundary_passes(spec, tables, embedding=embedding, similarity=similarity)


def _decay(spec: AgentSpec, tables: Tables, embedding: bool,
           similarity: Similarity) -> list[MaintenancePass]:
    from primitives.lifecycle._decay import decay_passes
    return decay_passes(spec, tables)


def _retention(spec: AgentSpec, tables: Tables, embedding: bool,
               similarity: Similarity) -> list[MaintenancePass]:
    from primitives.lifecycle._retention import retention_passes
    return retention_passes(spec, tables)


pass_builders: list[PassBuilder] = [_boundary, _decay, _retention]
"""The pass builders, in the order their passes run: idle closes and promotion first (so
that what they compound upward is promoted and decayed in the same run), retention last."""


def passes_for(spec: AgentSpec, tables: Tables, *, embedding: bool,
               similarity: Similarity) -> list[MaintenancePass]:
    """Every registered pass of ``spec``, in run order."""
    return [p for build in pass_builders for p in build(spec, tables, embedding, similarity)]
