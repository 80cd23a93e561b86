"""Re-walk every tenant's hash chain as the auditor role (``primitives audit verify``).

The database function ``primitives.verify_chain(journal, tenant_column, tenant)`` recomputes
each event's hash from its fields and the previous hash and returns the first ``seq`` that
does not verify (edited, inserted, removed or reordered events), or NULL. It is SECURITY
INVOKER: the auditor role's read policy lets it see every tenant, so one read-only
transaction checks them all against one snapshot.

What a chain cannot show by itself is the removal of its newest events: the shortened chain
is still valid. An *anchor* (the ``last_seq`` and ``head_hash`` of an earlier report, kept
outside the database) closes that gap: :func:`verify_chains` reports an anchored event that
is gone or changed.

Example::

    with psycopg.connect(auditor_dsn(resolve_dsn()), autocommit=True) as conn:
        for report in verify_chains(conn, spec):
            print(report.tenant, report.events, report.status)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Final

import psycopg
from psycopg import sql

from primitives.compile import agent_tables
from primitives.errors import PrimitivesError, StorageError
from primitives.spec import AgentSpec

__all__ = ["Anchor", "ChainReport", "anchors_from_reports", "connect_auditor", "verify_chains"]

_SNAPSHOT: Final = sql.SQL("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")

# {tenant} and {journal} are identifiers; values are bind parameters.
_CHAINS: Final = sql.SQL(
    "SELECT t.tenant, t.events, t.last_seq, h.hash,\n"
    "       primitives.verify_chain(%(journal)s::regclass, %(tenant_column)s, t.tenant)\n"
    "FROM (SELECT {tenant}::text AS tenant, count(*) AS events, max(seq) AS last_seq\n"
    "      FROM {journal} GROUP BY 1) AS t\n"
    "LEFT JOIN {journal} AS h ON h.{tenant}::text = t.tenant AND h.seq = t.last_seq\n"
    "WHERE %(tenants)s::text[] IS NULL OR t.tenant = ANY (%(tenants)s::text[])\n"
    "ORDER BY t.tenant"
)

_CHAINS_CITUS: Final = sql.SQL(
    "SELECT t.tenant, t.events, t.last_seq, h.hash\n"
    "FROM (SELECT {tenant}::text AS tenant, count(*) AS events, max(seq) AS last_seq\n"
    "      FROM {journal} GROUP BY 1) AS t\n"
    "LEFT JOIN {journal} AS h ON h.{tenant}::text = t.tenant AND h.seq = t.last_seq\n"
    "WHERE %(tenants)s::text[] IS NULL OR t.tenant = ANY (%(tenants)s::text[])\n"
    "ORDER BY t.tenant"
)
""":data:`_CHAINS` on a Citus coordinator, without the check: called from a row of a
distributed query, ``verify_chain`` would run on a shard and query the distributed journal
from there, which Citus refuses; so each tenant's chain is verified in a statement of its own
(:data:`_CHAIN_OF`), which the coordinator routes to the tenant's shard."""

_CHAIN_OF: Final = sql.SQL(
    "SELECT primitives.verify_chain(%(journal)s::regclass, %(tenant_column)s, %(tenant)s)")

_IS_CITUS: Final = sql.SQL(
    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')")

_HASH_AT: Final = sql.SQL("SELECT hash FROM {journal} WHERE {tenant}::text = %s AND seq = %s")


def connect_auditor(dsn: str | None = None) -> psycopg.Connection[Any]:
    """An autocommit connection as the auditor role.

    ``dsn`` defaults to the auditor DSN of the resolved server (``$PRIMITIVES_AUDITOR_DSN``,
    else ``$PRIMITIVES_DSN`` or the embedded server as ``primitives_auditor``).
    """
    from primitives.db import auditor_dsn, resolve_dsn
    from primitives.db._session import runtime_conninfo

    target = dsn or auditor_dsn(resolve_dsn())
    try:
        # the auditor role's own settings (ALTER ROLE ... SET) must not change what it reads
        return psycopg.connect(runtime_conninfo(target, "the auditor role"), autocommit=True)
    except psycopg.Error as err:
        raise StorageError(f"cannot connect as the auditor role: {err}") from err


@dataclass(frozen=True)
class Anchor:
    """The head of one chain at some earlier time, kept outside the database."""

    agent: str
    tenant: str
    seq: int
    hash: str


@dataclass(frozen=True)
class ChainReport:
    """One (agent, tenant) chain as verified now.

    ``broken_at`` is the first seq that does not verify; ``anchor_broken_at`` the anchored
    seq whose event is missing or has another hash (the newest events were removed or
    rewritten since the anchor was taken).
    """

    agent: str
    journal: str
    tenant: str
    events: int
    last_seq: int | None
    head_hash: str | None
    broken_at: int | None = None
    anchor_broken_at: int | None = None

    @property
    def intact(self) -> bool:
        return self.broken_at is None and self.anchor_broken_at is None

    @property
    def status(self) -> str:
        if self.broken_at is not None:
            return f"broken at seq {self.broken_at}"
        if self.anchor_broken_at is not None:
            return f"anchor at seq {self.anchor_broken_at} missing or changed"
        return "intact"

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "intact": self.intact}


def verify_chains(
    conn: psycopg.Connection[Any],
    spec: AgentSpec,
    *,
    tenants: Sequence[str] | None = None,
    anchors: Iterable[Anchor] = (),
) -> list[ChainReport]:
    """Verify the journal chain of every tenant of ``spec`` (or of ``tenants`` only).

    ``conn`` must be idle (``autocommit=True``); the check runs in its own read-only
    REPEATABLE READ transaction. A requested or anchored tenant without events is
    reported with ``events == 0``.
    """
    tables = agent_tables(spec)
    journal = tables.events
    mine = [a for a in anchors if a.agent == spec.agent
            and (tenants is None or a.tenant in tenants)]
    params = {
        "journal": journal.ident.as_string(conn),
        "tenant_column": tables.tenant_column,
        "tenants": list(tenants) if tenants is not None else None,
    }
    query = _CHAINS.format(tenant=tables.tenant, journal=journal.ident)
    hash_at = _HASH_AT.format(tenant=tables.tenant, journal=journal.ident)
    try:
        with conn.transaction():
            conn.execute(_SNAPSHOT)
            citus = conn.execute(_IS_CITUS).fetchone()
            if citus is not None and citus[0]:
                rows = [(*row, *_one_chain(conn, params, row[0])) for row in conn.execute(
                    _CHAINS_CITUS.format(tenant=tables.tenant, journal=journal.ident),
                    params).fetchall()]
            else:
                rows = conn.execute(query, params).fetchall()
            found = {
                row[0]: ChainReport(spec.agent, journal.qualified, row[0], int(row[1]),
                                    row[2], row[3], row[4])
                for row in rows
            }
            wanted = [*(tenants or ()), *(a.tenant for a in mine)]
            for tenant in wanted:
                found.setdefault(tenant, ChainReport(spec.agent, journal.qualified, tenant,
                                                     0, None, None))
            for anchor in mine:
                row = conn.execute(hash_at, (anchor.tenant, anchor.seq)).fetchone()
                if row is None or row[0] != anchor.hash:
                    found[anchor.tenant] = replace(found[anchor.tenant],
                                                   anchor_broken_at=anchor.seq)
    except psycopg.Error as err:
        raise StorageError(
            f"cannot verify the journal {journal.qualified}: {err}", sqlstate=err.sqlstate
        ) from err
    return [found[t] for t in sorted(found)]


def _one_chain(conn: psycopg.Connection[Any], params: Mapping[str, Any],
               tenant: str) -> tuple[Any]:
    row = conn.execute(_CHAIN_OF, {**params, "tenant": tenant}).fetchone()
    assert row is not None
    return (row[0],)


def anchors_from_reports(reports: Iterable[Mapping[str, Any]]) -> list[Anchor]:
    """Anchors from an earlier ``primitives audit verify --json`` output (its list of rows).

    Rows without events (no head) anchor nothing.
    """
    anchors = []
    for row in reports:
        try:
            if row.get("last_seq") is None or row.get("head_hash") is None:
                continue
            anchors.append(Anchor(str(row["agent"]), str(row["tenant"]), int(row["last_seq"]),
                                  str(row["head_hash"])))
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise PrimitivesError(
                f"not a row of `primitives audit verify --json` output: {row!r}"
            ) from err
    return anchors
