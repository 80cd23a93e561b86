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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, NamedTuple

from psycopg import sql

from primitives.compile import Tables
from primitives.spec import AgentSpec

__all__ = ["ClusterForm", "JobBuilder", "JobContext", "MaintenanceJob", "MaintenancePass",
           "PassBuilder",
           "Similarity", "job_builders", "jobs_for", "pass_builders", "passes_for"]

Similarity = Literal["embedding", "trigram", "exact"]
"""How near-duplicates are measured: ``embedding`` (cosine where both rows have vectors,
trigram otherwise), ``trigram`` (pg_trgm on content) or ``exact`` (same lower-cased text)."""


class ClusterForm(NamedTuple):
    """A pass in the form a Citus coordinator runs (``maintain`` gives every batch one tenant
    there): ``statement`` also takes ``%(tenant)s`` (that tenant) and ``%(nonce)s`` (a fresh
    text per run of the statement) and is routed whole to the tenant's shards; what it
    returns is handed to ``writes(row, params)``, the statements that then write what the
    single-node statement inserts in its own common table expressions (Citus runs such an
    insert through ``COPY``, which row-level security refuses)."""

    statement: sql.Composed
    writes: Callable[[Sequence[Any], Mapping[str, Any]],
                     list[tuple[sql.Composed, dict[str, Any]]]]


class MaintenancePass(NamedTuple):
    """One step of ``primitives maintain``: a statement over ``%(tenants)s`` (text[]),
    ``%(now)s`` (timestamptz) and ``%(actor)s`` (text) that journals its own changes and
    returns one row, ``(changed bigint)``.

    ``schedule`` (a five-field cron expression, ``behavior.decay.<typology>.schedule``) makes
    the pass run only when the schedule fired since it last ran for ``typologies`` (the
    typologies the statement covers); ``maintain(force=True)`` runs it anyway. Several passes
    may share a name (one per schedule): their counts add up."""

    name: str
    statement: sql.Composed
    schedule: str | None = None
    typologies: tuple[str, ...] = ()
    cluster: ClusterForm | None = None
    """The pass on a Citus coordinator; None: the statement above runs there as it is."""


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


def _aggregate(spec: AgentSpec, tables: Tables, embedding: bool,
               similarity: Similarity) -> list[MaintenancePass]:
    from primitives.lifecycle._aggregate import aggregate_passes
    return aggregate_passes(spec, tables)


pass_builders: list[PassBuilder] = [_boundary, _decay, _retention, _aggregate]
"""The pass builders, in the order their passes run: idle closes and promotion first (so
that what they compound upward is promoted and decayed in the same run), retention, then
the cross-tenant aggregation of held rows (what is still active after the others)."""


def passes_for(spec: AgentSpec, tables: Tables, *, embedding: bool,
               similarity: Similarity) -> list[MaintenancePass]:
    """Every registered pass of ``spec``, in run order."""
    return [p for build in pass_builders for p in build(spec, tables, embedding, similarity)]


# Python jobs -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JobContext:
    """What a maintenance job is given for one batch of tenants.

    ``dsn`` is the admin connection ``maintain`` was given (``primitives.db.app_dsn(dsn)``
    reaches the application role, for work that goes through the engine under each tenant's
    row-level security). ``embedder`` and ``extractor`` are what the caller of ``maintain``
    passed (None: a job that needs one does nothing and says so in its count of 0)."""

    spec: AgentSpec
    tables: Tables
    dsn: str
    tenants: Sequence[str]
    now: datetime
    actor: str
    embedding: bool
    similarity: Similarity
    embedder: Any = None
    extractor: Any = None
    citus: bool = False
    """On a Citus coordinator: ``tenants`` is one tenant, whose statements Citus routes
    whole to its worker when every table in them is filtered by it."""


class MaintenanceJob(NamedTuple):
    """A step of ``primitives maintain`` that needs Python (a model, an extractor) rather than
    one statement: ``run(ctx)`` does its work for ``ctx.tenants`` in transactions of its own,
    each short, idempotent and journalled as a pass is, and returns how many rows it changed.
    Jobs run after a batch's passes have committed."""

    name: str
    run: Callable[[JobContext], int]


JobBuilder = Callable[[AgentSpec, Tables], list[MaintenanceJob]]
"""Builds a spec's jobs (an empty list when the spec declares nothing they do)."""


def _consolidation(spec: AgentSpec, tables: Tables) -> list[MaintenanceJob]:
    from primitives.lifecycle._consolidation import consolidation_jobs
    return consolidation_jobs(spec, tables)


def _embedding(spec: AgentSpec, tables: Tables) -> list[MaintenanceJob]:
    from primitives.lifecycle._embed import embed_jobs
    return embed_jobs(spec, tables)


job_builders: list[JobBuilder] = [_consolidation, _embedding]
"""The job builders, in the order their jobs run after each batch's passes; a module with
jobs appends its builder here. Embedding stays last, so rows the other jobs write in a run
are embedded in that run."""


def jobs_for(spec: AgentSpec, tables: Tables) -> list[MaintenanceJob]:
    """Every registered job of ``spec``, in run order."""
    return [job for build in job_builders for job in build(spec, tables)]
