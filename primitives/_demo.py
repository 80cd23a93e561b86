"""``primitives demo`` (``make demo``): the main job, start to finish, on the embedded server.

1. start (or reuse) the embedded PostgreSQL server;
2. validate and migrate every reference spec;
3. write memories for two tenants of the Spectral spec through the engine;
4. retrieve for each tenant, and show that tenant B sees none of tenant A's rows,
   through the engine and through raw SQL as the application role;
5. verify both tenants' audit hash chains.

A second run applies nothing new and writes nothing new (keyed writes are idempotent).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from primitives._project import migrate
from primitives.db import app_dsn, primitives_home, resolve_dsn, tenant_transaction
from primitives.embeddings import Embedder
from primitives.engine import Engine
from primitives.spec import AgentSpec, load_specs

__all__ = ["run_demo"]

TENANT_A = "ws-acme"
TENANT_B = "ws-globex"

_MEMORIES: dict[str, list[dict[str, Any]]] = {
    TENANT_A: [
        {"tier": "cycle", "key": "scan-41-temperature", "scope_id": "cycle-41",
         "content": "Lowering temperature to 0.2 eliminated fabrication on the invoice "
                    "table case pattern.",
         "envelope": {"kind": "scan_observation", "pattern": "invoice_table"}},
        {"tier": "run", "key": "run-7-retries", "scope_id": "run-7",
         "content": "Retrying extraction twice recovered three of four truncated invoices.",
         "envelope": {"kind": "run_summary"}},
        {"tier": "workspace", "typology": "procedural", "key": "distillation-style",
         "content": "This workspace prefers concise distillation outputs over exhaustive ones.",
         "envelope": {"kind": "preference"}},
    ],
    TENANT_B: [
        {"tier": "cycle", "key": "scan-3-ocr", "scope_id": "cycle-3",
         "content": "OCR confidence below 0.6 on scanned contracts predicts field swaps.",
         "envelope": {"kind": "scan_observation", "pattern": "scanned_contract"}},
        {"tier": "workspace", "typology": "procedural", "key": "review-order",
         "content": "Globex reviewers want signature blocks checked before totals.",
         "envelope": {"kind": "preference"}},
    ],
}

_QUERY = "temperature fabrication or scanned contracts"


def run_demo(console: Console, specs: Sequence[str]) -> int:
    started = time.perf_counter()
    console.rule("[bold]agent memory primitives: demo")

    with console.status("starting the embedded PostgreSQL server..."):
        admin = resolve_dsn()
    console.print(f"[green]1.[/green] PostgreSQL ready (data under {primitives_home()})")

    loaded = load_specs(list(specs))
    console.print(f"[green]2.[/green] validated {len(loaded)} spec(s): "
                  + ", ".join(s.agent for s in loaded))
    report = migrate(loaded, dsn=admin, progress=lambda m: console.print(f"   {m}"))
    console.print(f"   {report.summary()}")

    spectral = _find(loaded, "spectral")
    embedder = _embedder(console, spectral)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        engine = Engine.connect(spectral, app_dsn(admin), embedder=embedder)
    for warning in caught:
        console.print(f"   [yellow]note[/yellow]: {escape(str(warning.message))}")

    with engine:
        console.print(f"[green]3.[/green] writing memories for tenants {TENANT_A} and "
                      f"{TENANT_B} as the application role")
        for tenant, memories in _MEMORIES.items():
            started_at = datetime.now(UTC)
            with engine.tenant({"workspace_id": tenant}, actor="demo") as mem:
                written = [mem.observe(**item) for item in memories]
                # rows an earlier run wrote without the model get their vectors now
                embedded = mem.reembed() if embedder is not None else 0
            new = sum(m.created_at >= started_at for m in written)
            console.print(f"   {tenant}: {len(memories)} memories "
                          f"({new} new, {len(memories) - new} already there)"
                          + (f"; {embedded} earlier row(s) embedded" if embedded else ""))

        console.print(f'[green]4.[/green] searching each tenant for "{_QUERY}"')
        for tenant in (TENANT_A, TENANT_B):
            with engine.tenant({"workspace_id": tenant}) as mem:
                hits = mem.search(_QUERY, limit=5)
            table = Table(title=f"tenant {tenant}", title_justify="left")
            for column in ("rank", "tier", "content", "signals"):
                table.add_column(column)
            for index, hit in enumerate(hits, 1):
                ranks = ", ".join(f"{k} #{v}" for k, v in sorted(hit.ranks.items()))
                table.add_row(str(index), hit.memory.tier, hit.memory.content[:60], ranks)
            console.print(table)
            leaked = [h for h in hits if tenant == TENANT_B and "Lowering temperature" in
                      h.memory.content]
            if leaked:
                console.print("[red]tenant B saw tenant A's memory: isolation is broken[/red]")
                return 1

        visible = _raw_counts(app_dsn(admin), engine.tables.memories.ident)
        console.print("   raw SQL as the application role, no WHERE clause:")
        for label, count in visible.items():
            console.print(f"     {label}: {count} row(s) visible")
        if visible["no tenant set"] != 0 or visible[f"tenant {TENANT_B}"] != len(
            _MEMORIES[TENANT_B]
        ):
            console.print("[red]row-level security did not isolate tenants[/red]")
            return 1

        console.print("[green]5.[/green] verifying the audit hash chains")
        for tenant in (TENANT_A, TENANT_B):
            broken = _verify(app_dsn(admin), engine, tenant)
            state = "[green]intact[/green]" if broken is None else f"[red]broken at {broken}[/red]"
            console.print(f"   {tenant}: {state}")
            if broken is not None:
                return 1

    console.rule(f"done in {time.perf_counter() - started:.1f}s: tenant {TENANT_B} saw none "
                 f"of tenant {TENANT_A}'s memories")
    return 0


def _embedder(console: Console, spec: AgentSpec) -> Embedder | None:
    """The spec's embedding model when the ``embeddings`` extra is installed (loaded now,
    with a status line, so the first write does not stall silently), else ``None``."""
    from primitives.embeddings import default_embedder
    from primitives.errors import EmbedderUnavailable

    try:
        with console.status("loading the embedding model..."):
            started = time.perf_counter()
            embedder = default_embedder(spec)
            embedder.embed_query("warm up")
    except EmbedderUnavailable as err:
        console.print(f"   [yellow]note[/yellow]: semantic search is off: {escape(str(err))}")
        return None
    console.print(f"   embedding model {embedder.model_id} loaded in "
                  f"{time.perf_counter() - started:.1f}s: semantic ranks beside the other signals")
    return embedder


def _find(specs: Sequence[AgentSpec], agent: str) -> AgentSpec:
    for spec in specs:
        if spec.agent == agent:
            return spec
    raise SystemExit(f"the demo needs the '{agent}' spec (agents/spectral_agent.yaml)")


def _raw_counts(dsn: str, table: sql.Identifier) -> dict[str, int]:
    """Row counts seen by a plain SELECT as the app role: RLS alone decides what is visible."""
    query = sql.SQL("SELECT count(*) FROM {}").format(table)
    with psycopg.connect(dsn, autocommit=True) as conn:
        unscoped = conn.execute(query).fetchone()
        with tenant_transaction(conn, TENANT_B):
            scoped = conn.execute(query).fetchone()
    return {"no tenant set": int(unscoped[0]) if unscoped else 0,
            f"tenant {TENANT_B}": int(scoped[0]) if scoped else 0}


def _verify(dsn: str, engine: Engine, tenant: str) -> int | None:
    with psycopg.connect(dsn, autocommit=True) as conn, tenant_transaction(conn, tenant):
        row = conn.execute(
            "SELECT primitives.verify_chain(%s::regclass, %s, %s)",
            (engine.tables.events.qualified, engine.tables.tenant_column, tenant),
        ).fetchone()
    return None if row is None or row[0] is None else int(row[0])
