"""The ``primitives`` command: validate, schema, init, compile, migrate, server, demo,
audit, doctor, vacuum, maintain, reembed.

Exit status: 0 on success, 1 when the input is wrong (a spec error), 2 when the
database or server fails.
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.prompt import Prompt
from rich.table import Table

from primitives.errors import PrimitivesError, SpecChangeRefused, SpecError, StorageError

if TYPE_CHECKING:
    from primitives.spec import AgentSpec

__all__ = ["main"]

console = Console(highlight=False, soft_wrap=True)
errors = Console(stderr=True, highlight=False, soft_wrap=True)

DEFAULT_SPECS = "agents/*.yaml"


def _spec_paths(paths: Sequence[str]) -> list[str]:
    if paths:
        return list(paths)
    found = sorted(glob.glob(DEFAULT_SPECS))
    if not found:
        raise SpecError(f"no specs given and none found under {DEFAULT_SPECS}")
    return found


def _report_spec_error(err: SpecError) -> None:
    for problem in err.problems or [err]:
        errors.print(f"[red]error[/red] {escape(problem.location_message())}", markup=True,
                     soft_wrap=True)


def _warn_unenforced(spec: AgentSpec) -> int:
    """Print a warning per field or value ``spec`` declares that no test shows enforced."""
    from primitives.spec import unenforced

    found = unenforced(spec)
    for item in found:
        errors.print(f"[yellow]warning[/yellow] {escape(str(item))}", markup=True,
                     soft_wrap=True)
    return len(found)


# validate ---------------------------------------------------------------------------------------
def cmd_validate(args: argparse.Namespace) -> int:
    from primitives.spec import load_spec

    failed = 0
    warned = 0
    for path in _spec_paths(args.paths):
        try:
            spec = load_spec(path)
        except SpecError as err:
            _report_spec_error(err)
            failed += 1
            continue
        tiers = " -> ".join(t.name + ("*" if t.persistent else "") for t in spec.tiers)
        console.print(f"[green]ok[/green] {path}: agent [bold]{spec.agent}[/bold], tiers {tiers}, "
                      f"{len(spec.deviations)} justified deviation(s)")
        warned += _warn_unenforced(spec)
    if warned and args.strict and not failed:
        errors.print(f"[red]error[/red] --strict: {warned} declared field(s) or value(s) not "
                     "enforced yet", markup=True, soft_wrap=True)
    return 1 if failed or (warned and args.strict) else 0


# schema -----------------------------------------------------------------------------------------
def cmd_schema(args: argparse.Namespace) -> int:
    from primitives.spec import spec_json_schema, spec_reference_markdown

    if args.markdown:
        text = spec_reference_markdown()
    else:
        text = json.dumps(spec_json_schema(), indent=2, sort_keys=True) + "\n"
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        console.print(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return 0


# init -------------------------------------------------------------------------------------------
def cmd_init(args: argparse.Namespace) -> int:
    from primitives._scaffold import ScaffoldAnswers, parse_tier, render_spec, walk
    from primitives.spec import spec_json_schema
    from primitives.spec._schema import SCHEMA_FILE

    answers = ScaffoldAnswers(
        agent=args.name,
        anchor=[k for k in (args.anchor or "").split(",") if k],
        tiers=[parse_tier(t) for t in args.tier or []],
        store_schema=args.schema or "memory",
        prefix=args.prefix or "",
        signals=[s for s in (args.signals or "envelope,semantic,recency").split(",") if s],
        non_mirror=[m for m in (args.non_mirror or "").split(",") if m],
    )
    target = Path(args.output or f"agents/{args.name}.yaml")
    if target.exists() and not args.force:  # before any question, not after the last
        raise SpecError(f"{target} exists; pass --force to overwrite", file=str(target))
    interactive = not args.yes and sys.stdin.isatty()
    try:
        if interactive:
            console.print("Walking the primitives in order: anchor first, audit last.")
        walk(answers, (lambda q, d: Prompt.ask(escape(q), default=d)) if interactive else None,
             lambda problem: errors.print(f"  {problem}; try again", markup=False))
    except (KeyboardInterrupt, EOFError):
        errors.print("\ninit cancelled; nothing written", markup=False)
        return 130
    text = render_spec(answers)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    console.print(f"[green]wrote[/green] {escape(str(target))}; check it with "
                  f"`primitives validate {escape(str(target))}`")
    schema = target.parent / SCHEMA_FILE  # what the spec's editor line names
    if not schema.exists():
        schema.write_text(json.dumps(spec_json_schema(), indent=2, sort_keys=True) + "\n",
                          encoding="utf-8")
        console.print(f"[green]wrote[/green] {escape(str(schema))} (the JSON Schema, for editors)")
    return 0


# compile ----------------------------------------------------------------------------------------
def cmd_compile(args: argparse.Namespace) -> int:
    from primitives.compile import Capabilities, compile_citus, compile_plan
    from primitives.spec import load_spec

    spec = load_spec(args.spec)
    compiler = compile_citus if args.target == "citus" else compile_plan
    plan = compiler(spec, capabilities=Capabilities(vector=not args.no_vector))
    sys.stdout.write(plan.render())
    return 0


# migrate ----------------------------------------------------------------------------------------
def cmd_migrate(args: argparse.Namespace) -> int:
    from primitives._project import migrate
    from primitives.spec import load_specs

    specs = load_specs(list(_spec_paths(args.specs)))
    for spec in specs:
        _warn_unenforced(spec)
    report = migrate(specs, progress=console.print, target=args.target, allow=args.allow,
                     reason=args.reason, dry_run=args.dry_run)
    if args.dry_run:
        _print_spec_plans(report.specs, json_output=False, allowed=frozenset(args.allow))
        console.print("dry run: nothing applied")
        return 0
    console.print(f"[green]done[/green]: {report.summary()}")
    return 0


# plan -------------------------------------------------------------------------------------------
def _print_spec_plans(planned: Sequence[Any], *, json_output: bool,
                      allowed: frozenset[str] = frozenset()) -> int:
    from primitives._evolve import render_evolution

    refused = sum(len(p.evolution.refused(allowed)) for p in planned)
    if json_output:
        sys.stdout.write(json.dumps([{
            "agent": p.evolution.agent, "spec": p.evolution.source, "unchanged": p.unchanged,
            "changes": [] if p.unchanged else [c.as_json() for c in p.evolution.changes],
            "rebuild_statements": [s.statement.as_string(None) for s in p.evolution.before],
            "plan_statements": len(p.plan.steps),
        } for p in planned], indent=2) + "\n")
    else:
        for p in planned:
            sys.stdout.write(render_evolution(p.evolution, p.plan, unchanged=p.unchanged,
                                              allowed=allowed))
    return 1 if refused else 0


def cmd_plan(args: argparse.Namespace) -> int:
    from primitives._project import plan_specs
    from primitives.spec import load_specs

    specs = load_specs(list(_spec_paths(args.specs)))
    return _print_spec_plans(plan_specs(specs), json_output=args.json,
                             allowed=frozenset(args.allow))


# server -----------------------------------------------------------------------------------------
def _external_status(dsn: str) -> int:
    """``server status`` for the server ``PRIMITIVES_DSN`` names: where, and whether it
    answers (with its version), without the password."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as err:
        raise StorageError(f"PRIMITIVES_DSN is not a valid PostgreSQL DSN: {err}") from err
    shown = make_conninfo("", **{k: v for k, v in params.items() if k != "password"})
    table = Table(show_header=False)
    table.add_row("managed", "no (PRIMITIVES_DSN)")
    table.add_row("dsn", shown)
    try:
        with psycopg.connect(dsn, connect_timeout=3) as conn:
            row = conn.execute("SELECT current_setting('server_version')").fetchone()
        table.add_row("running", "True")
        table.add_row("version", str(row[0]) if row else "?")
        code = 0
    except psycopg.Error as err:
        table.add_row("running", "False")
        table.add_row("error", str(err).strip().splitlines()[-1] if str(err).strip() else "?")
        code = 1
    console.print(table)
    return code


def cmd_server(args: argparse.Namespace) -> int:
    import os

    from primitives.db import server_status, start_server, stop_server

    external = os.environ.get("PRIMITIVES_DSN")
    if external:
        # the framework does not manage that server: say so, and report on it
        if args.action == "dsn":
            sys.stdout.write(external + "\n")
            return 0
        if args.action == "status":
            return _external_status(external)
        errors.print(f"PRIMITIVES_DSN is set: the database is an external server, which "
                     f"`primitives server {args.action}` does not manage; unset it to use the "
                     "embedded one", markup=False)
        return 1
    if args.action == "start":
        dsn = start_server()
        console.print(f"running: {dsn}")
    elif args.action == "stop":
        stopped = stop_server()
        console.print("stopped" if stopped else "not running")
    elif args.action == "dsn":
        sys.stdout.write(start_server() + "\n")
    else:
        status = server_status()
        table = Table(show_header=False)
        for key, value in vars(status).items():
            table.add_row(key, str(value))
        console.print(table)
    return 0


# explain ----------------------------------------------------------------------------------------
def cmd_explain(args: argparse.Namespace) -> int:
    from primitives.retrieval import explain_query
    from primitives.spec import load_spec

    spec = load_spec(args.spec)
    sys.stdout.write(explain_query(spec, args.tenant, args.query, limit=args.limit,
                                   use_embedder=not args.no_embedder,
                                   progress=lambda line: errors.print(line, markup=False))
                     + "\n")
    return 0


def cmd_weak_facts(args: argparse.Namespace) -> int:
    """One tenant's weak facts report (seed 002), as the app role: one JSON line per fact,
    weakest first, each with its reasons; a count on stderr."""
    from datetime import timedelta

    from primitives.engine import Engine
    from primitives.spec import load_spec

    spec = load_spec(args.spec)
    tenant_key = spec.anchor.keys[0]
    with Engine.connect(spec, max_connections=1) as engine, \
            engine.tenant({tenant_key: args.tenant}) as mem:
        weak = mem.weak_facts(below=args.below, horizon=timedelta(days=args.horizon_days),
                              limit=args.limit)
    for fact in weak:
        sys.stdout.write(json.dumps(fact.as_dict(), sort_keys=True) + "\n")
    errors.print(f"{len(weak)} weak fact{'' if len(weak) == 1 else 's'} for {args.tenant}")
    return 0


# demo -------------------------------------------------------------------------------------------
def cmd_demo(args: argparse.Namespace) -> int:
    from primitives._demo import run_demo

    return run_demo(console, specs=_spec_paths(args.specs))


# audit ------------------------------------------------------------------------------------------
AUDIT_VIEWS = ("lineage", "supersession", "actions", "retention", "erasures", "sanitization",
               "redactions", "coverage")
"""``primitives audit show`` view names (primitives.audit.SHORT_NAMES; no SQLAlchemy import here)."""


def _cell(value: object, full: bool) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        text = json.dumps(value, sort_keys=True, default=str)
    elif hasattr(value, "isoformat"):
        text = value.isoformat()
    else:
        text = str(value)
    return text if full or len(text) <= 40 else text[:39] + "…"


def cmd_audit_verify(args: argparse.Namespace) -> int:
    from primitives.audit import anchors_from_reports, connect_auditor, verify_chains
    from primitives.spec import load_specs

    specs = load_specs(list(_spec_paths(args.specs)))
    anchors = []
    if args.anchor:
        try:
            recorded = json.loads(Path(args.anchor).read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise PrimitivesError(f"cannot read the anchor file {args.anchor}: {err}") from err
        anchors = anchors_from_reports(recorded if isinstance(recorded, list) else [recorded])
    tenants = args.tenant or None
    with connect_auditor() as conn:
        reports = [r for spec in specs
                   for r in verify_chains(conn, spec, tenants=tenants, anchors=anchors)]
    broken = [r for r in reports if not r.intact]
    if args.json:
        sys.stdout.write(json.dumps([r.as_json() for r in reports], indent=2) + "\n")
        return 1 if broken else 0
    table = Table(title="journal hash chains (as primitives_auditor)")
    for name in ("agent", "tenant", "events", "last seq", "head hash", "status"):
        table.add_column(name, justify="right" if name in ("events", "last seq") else "left")
    for r in reports:
        status = "[green]intact[/green]" if r.intact else f"[red]{r.status}[/red]"
        table.add_row(r.agent, r.tenant, str(r.events), _cell(r.last_seq, False),
                      (r.head_hash or "")[:16], status)
    console.print(table)
    if broken:
        errors.print(f"[red]{len(broken)} of {len(reports)} chain(s) broken[/red]: "
                     + "; ".join(f"{r.agent}/{r.tenant} {r.status}" for r in broken))
        return 1
    if not reports:
        console.print(f"no journal events yet in {len(specs)} agent(s); nothing to verify")
        return 0
    console.print(f"[green]ok[/green]: {len(reports)} chain(s) of {len(specs)} agent(s) intact")
    return 0


def _plain(value: object) -> object:
    """``value`` as JSON holds it: text for ids, times and anything else JSON has no form
    for; dicts, lists, numbers, booleans and ``None`` as they are."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def _csv_cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list | tuple):
        return json.dumps(_plain(value), sort_keys=True)
    plain = _plain(value)
    return json.dumps(plain) if isinstance(plain, bool) else str(plain)


def _write_rows(fmt: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Every row of a view, whole, on standard output: a JSON array of objects (one per row,
    keyed by column) or CSV with a header line."""
    if fmt == "json":
        records = [{c: _plain(v) for c, v in zip(columns, row, strict=True)} for row in rows]
        sys.stdout.write(json.dumps(records, indent=2) + "\n")
        return
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([_csv_cell(v) for v in row] for row in rows)


def cmd_audit_show(args: argparse.Namespace) -> int:
    import sqlalchemy as sa

    from primitives.audit import audit_tables, create_audit_engine, show_query
    from primitives.spec import load_spec

    views = audit_tables(load_spec(args.spec))
    try:
        query = show_query(views, args.view, tenant=args.tenant, limit=args.limit)
    except ValueError as err:
        raise PrimitivesError(str(err)) from err
    engine = create_audit_engine()
    try:
        with engine.connect() as conn:
            rows = conn.execute(query).all()
    except sa.exc.SQLAlchemyError as err:
        raise StorageError(f"cannot read {views.view(args.view).fullname}: {err}") from err
    finally:
        engine.dispose()
    view = views.view(args.view)
    fmt = "json" if args.json else args.format
    if fmt != "table":
        _write_rows(fmt, [c.name for c in view.columns], rows)
        return 0
    names = [c.name for c in view.columns]
    title = f"{view.fullname} ({len(rows)} row(s))"
    if len(names) * _AUDIT_COLUMN_MIN > console.width:
        _print_records(title, names, [[_cell(v, args.full) for v in row] for row in rows])
        return 0
    table = Table(title=title)
    for name in names:
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(*(_cell(v, args.full) for v in row))
    console.print(table)
    return 0


_AUDIT_COLUMN_MIN = 16
"""Below this many terminal columns per view column, ``audit show`` prints one block per row."""


def _print_records(title: str, names: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Rows too wide for the terminal as blocks, one ``name  value`` line per column (long
    values wrapped under their value column, never folded into a narrow table cell)."""
    console.print(title, markup=False)
    width = max(map(len, names))
    for number, row in enumerate(rows, 1):
        console.print(f"-- row {number} --", markup=False)
        grid = Table.grid(padding=(0, 2))
        grid.add_column(min_width=width, no_wrap=True)
        grid.add_column(overflow="fold")
        for name, value in zip(names, row, strict=True):
            grid.add_row(escape(name), escape(value))
        console.print(grid)


# outbox -----------------------------------------------------------------------------------------
_OUTBOX_STATUS = (
    "SELECT event, count(*) FILTER (WHERE delivered_at IS NULL), "
    "count(*) FILTER (WHERE delivered_at IS NOT NULL), "
    "min(created_at) FILTER (WHERE delivered_at IS NULL), "
    "count(DISTINCT {t}) FILTER (WHERE delivered_at IS NULL) "
    "FROM {outbox} GROUP BY event ORDER BY event"
)


def cmd_outbox_status(args: argparse.Namespace) -> int:
    """Per agent and event: entries waiting, delivered, the oldest waiting, tenants waiting;
    read as the auditor (every tenant, nothing written)."""
    from psycopg import sql

    from primitives.audit import connect_auditor
    from primitives.compile import agent_tables
    from primitives.spec import load_specs

    specs = load_specs(list(_spec_paths(args.specs)))
    rows: list[dict[str, object]] = []
    with connect_auditor() as conn:
        for spec in specs:
            tables = agent_tables(spec)
            if tables.outbox is None:
                continue
            statement = sql.SQL(_OUTBOX_STATUS).format(t=tables.tenant,
                                                       outbox=tables.outbox.ident)
            try:
                found = conn.execute(statement).fetchall()
            except Exception as err:
                raise StorageError(f"cannot read {tables.outbox.qualified}: {err}") from err
            rows += [{"agent": spec.agent, "event": e, "waiting": w, "delivered": d,
                      "oldest_waiting": o, "tenants_waiting": n} for e, w, d, o, n in found]
    if args.json:
        sys.stdout.write(json.dumps([{k: _plain(v) for k, v in r.items()} for r in rows],
                                    indent=2) + "\n")
        return 0
    if not rows:
        console.print(f"no outbox entries in {len(specs)} agent(s)")
        return 0
    table = Table(title="outbox (as primitives_auditor)")
    for name in ("agent", "event", "waiting", "delivered", "oldest waiting", "tenants waiting"):
        table.add_column(name, justify="right" if name in (
            "waiting", "delivered", "tenants waiting") else "left")
    for r in rows:
        table.add_row(*(_cell(r[k], True) for k in (
            "agent", "event", "waiting", "delivered", "oldest_waiting", "tenants_waiting")))
    console.print(table)
    return 0


def cmd_outbox_claim(args: argparse.Namespace) -> int:
    """Claim one tenant's undelivered entries as the app role and print each as one JSON
    line: a consumer for scripts (the claim is journalled; an entry is handed out once)."""
    from primitives.engine import Engine
    from primitives.spec import load_spec

    spec = load_spec(args.spec)
    tenant_key = spec.anchor.keys[0]
    with Engine.connect(spec, max_connections=1) as engine, \
            engine.tenant({tenant_key: args.tenant}) as mem:
        entries = mem.claim_outbox(consumer=args.consumer, event=args.event, limit=args.limit)
    for entry in entries:
        sys.stdout.write(json.dumps({
            "id": str(entry.id), "event": entry.event, "gate": entry.gate, "to": entry.to,
            "memory_id": str(entry.memory_id) if entry.memory_id else None,
            "payload": _plain(entry.payload), "created_at": _plain(entry.created_at)},
            sort_keys=True) + "\n")
    errors.print(f"claimed {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} "
                 f"for {args.consumer}")
    return 0


def cmd_outbox_retry(args: argparse.Namespace) -> int:
    """Hand one tenant's delivered entries back to the queue (as the app role, journalled);
    print the ids retried, one a line."""
    from primitives.engine import Engine
    from primitives.spec import load_spec

    spec = load_spec(args.spec)
    tenant_key = spec.anchor.keys[0]
    with Engine.connect(spec, max_connections=1) as engine, \
            engine.tenant({tenant_key: args.tenant}) as mem:
        retried = mem.retry_outbox(args.ids)
    for entry in retried:
        sys.stdout.write(f"{entry}\n")
    errors.print(f"retried {len(retried)} of {len(args.ids)} entr"
                 f"{'y' if len(args.ids) == 1 else 'ies'} (the others were not delivered, "
                 "or are not this tenant's)" if len(retried) < len(args.ids) else
                 f"retried {len(retried)} entr{'y' if len(retried) == 1 else 'ies'}")
    return 0 if len(retried) == len(args.ids) else 1


# doctor -----------------------------------------------------------------------------------------
def cmd_doctor(args: argparse.Namespace) -> int:
    from primitives._doctor import CHECKS, run_doctor
    from primitives.audit import connect_auditor
    from primitives.spec import load_specs

    specs = load_specs(list(_spec_paths(args.specs)))
    with connect_auditor() as conn:
        report = run_doctor(conn, specs)
    if args.json:
        sys.stdout.write(json.dumps({
            "ok": report.ok, "agents": list(report.agents), "relations": report.relations,
            "checks": list(CHECKS),
            "findings": [{"check": f.check, "object": f.object, "problem": f.problem}
                         for f in report.findings],
            "warnings": list(report.warnings),
        }, indent=2) + "\n")
        return 0 if report.ok else 1
    for note in report.warnings:
        errors.print(f"[yellow]warning[/yellow]: {note}")
    if report.ok:
        console.print(f"[green]ok[/green]: {report.relations} relation(s) of "
                      f"{len(report.agents)} agent(s) pass all {len(CHECKS)} checks "
                      f"({', '.join(CHECKS)})")
        return 0
    table = Table(title=f"primitives doctor: {len(report.findings)} finding(s)")
    for name in ("check", "object", "problem"):
        table.add_column(name, overflow="fold")
    for finding in report.findings:
        table.add_row(finding.check, finding.object, finding.problem)
    console.print(table)
    errors.print(f"[red]{len(report.findings)} finding(s)[/red] in "
                 f"{len({f.object for f in report.findings})} object(s)")
    return 1


# vacuum -----------------------------------------------------------------------------------------
def cmd_vacuum(args: argparse.Namespace) -> int:
    import psycopg

    from primitives.compile import agent_tables
    from primitives.compile._erasure import erasure_vacuum
    from primitives.db import resolve_dsn
    from primitives.spec import load_specs

    specs = load_specs(list(_spec_paths(args.specs)))
    statements = [s for spec in specs for s in erasure_vacuum(agent_tables(spec))]
    if args.sql:
        for statement in statements:
            sys.stdout.write(statement.as_string(None) + ";\n")
        return 0
    try:
        with psycopg.connect(resolve_dsn(), autocommit=True) as conn:
            for statement in statements:
                console.print(statement.as_string(conn))
                conn.execute(statement)
    except psycopg.Error as err:
        raise StorageError(f"vacuum failed: {err}") from err
    console.print(f"[green]done[/green]: {len(statements)} table(s) rewritten")
    return 0


# maintain ---------------------------------------------------------------------------------------
def _extractor(name: str | None) -> Any:
    """The consolidation extractor ``--extractor`` names (None: each spec's own default)."""
    if name is None:
        return None
    from primitives.extraction import RuleBasedExtractor

    return RuleBasedExtractor()


def _maintain_embedder(specs: Sequence[AgentSpec]) -> object:
    """``maintain --embed``: the default embedder of the specs, which must agree on their
    embedding model and dimensions (one embedder serves the run)."""
    from primitives.embeddings import default_embedder

    configs = {(s.retrieval.embedding.model, s.retrieval.embedding.dims) for s in specs}
    if len(configs) > 1:
        raise SpecError("maintain --embed: these specs embed with different models or "
                        f"dimensions ({', '.join(sorted(f'{m} {d}' for m, d in configs))}); "
                        "run maintain --embed once per model")
    return default_embedder(specs[0])


def cmd_maintain(args: argparse.Namespace) -> int:
    import psycopg

    from primitives.db import resolve_dsn
    from primitives.lifecycle import maintain
    from primitives.spec import load_specs

    specs = load_specs(list(_spec_paths(args.specs)))
    tty = sys.stderr.isatty() and not args.json

    def progress(agent: str, done: int, total: int) -> None:
        line = f"maintain {agent}: {done}/{total} tenants"
        if tty:
            width = 30
            filled = width * done // max(total, 1)
            errors.print(f"\r{line} [{'#' * filled}{'.' * (width - filled)}]", end="",
                         markup=False)
            if done == total:
                errors.print()
        else:
            errors.print(line, markup=False)

    embedder = _maintain_embedder(specs) if args.embed else None
    try:
        report = maintain(specs, resolve_dsn(), batch_tenants=args.batch_tenants,
                          progress=progress, duty=args.duty,
                          list_dispositions=args.list_dispositions, embedder=embedder,
                          extractor=_extractor(args.extractor), force=args.force)
    except psycopg.Error as err:
        raise StorageError(f"maintain failed: {err}") from err
    if args.json:
        sys.stdout.write(json.dumps(report.as_dict(), indent=2) + "\n")
        return 0
    for agent, passes in report.agents.items():
        console.print(f"[bold]{agent}[/bold]: {report.tenants[agent]} tenant(s)")
        for name, changed in passes.items():
            console.print(f"  {name}: {changed}")
        for name, count in report.reported.get(agent, {}).items():
            console.print(f"  {name} (awaiting disposition): {count}")
        for skip in report.skipped.get(agent, []):
            console.print(f"  {skip['pass']} ({', '.join(skip['typologies'])}): not due "
                          f"(schedule {skip['schedule']}, next {skip['next_due']}; --force "
                          "runs it)", markup=False)
        listed = report.awaiting.get(agent, [])
        not_due = [skip for skip in report.skipped.get(agent, [])
                   if skip["pass"] == "dispositions"]
        if args.list_dispositions > 0 and not_due:
            console.print("  --list-dispositions: nothing listed for "
                          f"{', '.join(t for skip in not_due for t in skip['typologies'])}: "
                          "its dispositions pass is not due (--force runs and lists it)",
                          markup=False)
        if listed:
            console.print("  awaiting a decision (promote, mem.mark_exempt or mem.archive), "
                          f"oldest {len(listed)}:")
            for row in listed:
                console.print(f"    {row['tenant']} {row['id']} {row['tier']}.{row['typology']} "
                              f"since {row['event_time']}", markup=False)
    console.print(f"[green]done[/green]: {report.batches} batch(es) in {report.seconds:.2f} s")
    return 0


# reembed ----------------------------------------------------------------------------------------
def cmd_reembed(args: argparse.Namespace) -> int:
    from primitives._reembed import reembed
    from primitives.embeddings import default_embedder
    from primitives.spec import load_spec

    spec = load_spec(args.spec)
    _warn_unenforced(spec)
    tty = sys.stderr.isatty() and not args.json
    errors.print(f"reembed {spec.agent}: loading the embedding model", markup=False)
    embedder = default_embedder(spec)
    shown = {"step": -1}

    def progress(done: int, total: int) -> None:
        line = f"reembed {spec.agent}: {done}/{total} rows"
        if tty:
            errors.print(f"\r{line}", end="" if done < total else "\n", markup=False)
            return
        step = 10 * done // max(total, 1)
        if step != shown["step"]:
            shown["step"] = step
            errors.print(line, markup=False)

    report = reembed(spec, embedder, batch=args.batch, progress=progress)
    if args.json:
        sys.stdout.write(json.dumps(report.as_dict(), indent=2) + "\n")
        return 0
    console.print(f"[green]done[/green]: agent {report.agent}: {report.rows} vector(s) made "
                  f"with {report.model} ({report.dims_before} -> {report.dims} dims) for "
                  f"{report.tenants} tenant(s) in {report.seconds:.1f} s; plan applied")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="primitives",
        description="Declare an agent's memory in YAML; get a tenant-isolated, auditable store.",
    )
    from primitives import __version__
    parser.add_argument("--version", action="version", version=f"primitives {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("validate", help="check specs; report every problem with file and line")
    p.add_argument("paths", nargs="*", help=f"spec files (default: {DEFAULT_SPECS})")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 when a spec declares a field or value not enforced yet")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("schema", help="print the JSON Schema of the spec language")
    p.add_argument("-o", "--output", help="write to this file instead of stdout")
    p.add_argument("--markdown", action="store_true",
                   help="print the spec reference as Markdown (docs/reference/spec.md)")
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser("init", help="scaffold a spec, walking the primitives in order")
    p.add_argument("name", help="agent name (lower_snake_case)")
    p.add_argument("--anchor", help="anchor keys, tenant key first: workspace_id[,run_id]")
    p.add_argument("--tier", action="append",
                   help="NAME:BOUNDARY:TYPOLOGY[,..][:persistent], lowest tier first; repeatable")
    p.add_argument("--schema", help="store schema (default: memory)")
    p.add_argument("--prefix", help="table prefix (default: the agent name)")
    p.add_argument("--signals", help="retrieval signals (default: envelope,semantic,recency)")
    p.add_argument("--non-mirror", help="non-mirror categories, comma-separated")
    p.add_argument("-o", "--output", help="where to write (default: agents/NAME.yaml)")
    p.add_argument("--yes", action="store_true", help="do not ask; take flags and defaults")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("compile", help="print the SQL a spec implies (nothing is executed)")
    p.add_argument("spec")
    p.add_argument("--no-vector", action="store_true",
                   help="compile for a server without pgvector")
    p.add_argument("--target", choices=["postgres", "citus"], default="postgres",
                   help="postgres (one node, default) or citus (tables distributed by tenant)")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("migrate", help="apply framework migrations and specs' plans")
    p.add_argument("specs", nargs="*", help=f"spec files (default: {DEFAULT_SPECS})")
    p.add_argument("--target", choices=("auto", "single", "citus"), default="auto",
                   help="single server, Citus coordinator (migrations on every node, "
                        "distributed plans), or auto: citus when the server is a coordinator")
    p.add_argument("--dry-run", action="store_true",
                   help="show each spec's classified changes; apply nothing")
    p.add_argument("--allow", action="append", default=[], choices=("destructive", "weakening"),
                   help="apply changes of this kind (journalled with --reason)")
    p.add_argument("--reason", help="why the allowed changes are applied (for the auditor)")
    p.set_defaults(func=cmd_migrate)

    p = sub.add_parser("plan", help="the changes between each spec and the live database")
    p.add_argument("specs", nargs="*", help=f"spec files (default: {DEFAULT_SPECS})")
    p.add_argument("--allow", action="append", default=[], choices=("destructive", "weakening"),
                   help="show changes of this kind as applied rather than refused")
    p.add_argument("--json", action="store_true", help="one JSON object per spec")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("server", help="manage the embedded PostgreSQL server")
    p.add_argument("action", choices=["start", "stop", "status", "dsn"])
    p.set_defaults(func=cmd_server)

    p = sub.add_parser("explain", help="run one search as the app role and show each signal's "
                       "rank and score for every hit")
    p.add_argument("spec")
    p.add_argument("tenant", help="the tenant key's value")
    p.add_argument("query")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--no-embedder", action="store_true",
                   help="do not load an embedding model (the semantic signal is dropped)")
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("weak-facts", help="one tenant's weak facts (low confidence, a single "
                       "source, fading below the decay threshold), one JSON line each")
    p.add_argument("spec")
    p.add_argument("--tenant", required=True, metavar="T", help="the tenant key's value")
    p.add_argument("--below", type=float, default=0.5, metavar="C",
                   help="a confidence under C is low (0.5)")
    p.add_argument("--horizon-days", type=float, default=7.0, metavar="D",
                   help="name facts that decay below their threshold within D days (7)")
    p.add_argument("--limit", type=int, default=50, metavar="N", help="at most N facts (50)")
    p.set_defaults(func=cmd_weak_facts)

    p = sub.add_parser("demo", help="migrate the reference specs and show tenant isolation")
    p.add_argument("specs", nargs="*", help=f"spec files (default: {DEFAULT_SPECS})")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("audit", help="read-only audit as the auditor role: verify chains, show views")
    audit = p.add_subparsers(dest="audit_command", required=True, metavar="ACTION")
    a = audit.add_parser("verify", help="re-walk every tenant's journal hash chain; exit 1 if broken")
    a.add_argument("specs", nargs="*", metavar="SPEC", help=f"spec files (default: {DEFAULT_SPECS})")
    a.add_argument("--tenant", action="append", metavar="T",
                   help="verify this tenant only (repeatable; default: every tenant in the journal)")
    a.add_argument("--json", action="store_true",
                   help="print the report as JSON; keep it outside the database as an anchor")
    a.add_argument("--anchor", metavar="FILE",
                   help="an earlier --json report: each head it lists must still be in the chain")
    a.set_defaults(func=cmd_audit_verify)

    a = audit.add_parser("show", help="print one compliance view of an agent")
    a.add_argument("view", choices=AUDIT_VIEWS, metavar="VIEW",
                   help=f"one of: {', '.join(AUDIT_VIEWS)}")
    a.add_argument("spec", metavar="SPEC")
    a.add_argument("--tenant", metavar="T", help="only this tenant's rows")
    a.add_argument("--limit", type=int, default=100, metavar="N", help="at most N rows (100)")
    a.add_argument("--full", action="store_true", help="do not shorten long values")
    a.add_argument("--format", choices=("table", "json", "csv"), default="table",
                   help="table (default; one block per row when the terminal is too narrow), "
                        "or every value whole as JSON (an array of objects) or CSV with a "
                        "header line, for other tools")
    a.add_argument("--json", action="store_true", help="the same as --format json")
    a.set_defaults(func=cmd_audit_show)

    p = sub.add_parser("outbox", help="the cross-context outbox: what waits, and a consumer "
                                      "for scripts")
    outbox = p.add_subparsers(dest="outbox_command", required=True, metavar="ACTION")
    o = outbox.add_parser("status", help="per agent and event: entries waiting and delivered, "
                                         "the oldest waiting (as the auditor)")
    o.add_argument("specs", nargs="*", metavar="SPEC", help=f"spec files (default: {DEFAULT_SPECS})")
    o.add_argument("--json", action="store_true", help="print the rows as JSON")
    o.set_defaults(func=cmd_outbox_status)
    o = outbox.add_parser("claim", help="claim one tenant's undelivered entries (as the app "
                                        "role) and print one JSON line per entry")
    o.add_argument("spec", metavar="SPEC")
    o.add_argument("--tenant", required=True, metavar="T", help="the tenant whose entries to claim")
    o.add_argument("--consumer", required=True, metavar="NAME",
                   help="who claims them (recorded in the entries and the journal)")
    o.add_argument("--event", metavar="EVENT", help="only this event (default: any)")
    o.add_argument("--limit", type=int, default=100, metavar="N", help="at most N entries (100)")
    o.set_defaults(func=cmd_outbox_claim)
    o = outbox.add_parser("retry", help="hand one tenant's delivered entries back to the "
                                        "queue (as the app role, journalled)")
    o.add_argument("spec", metavar="SPEC")
    o.add_argument("--tenant", required=True, metavar="T", help="the tenant whose entries")
    o.add_argument("ids", nargs="+", metavar="ID", help="outbox entry ids (from claim)")
    o.set_defaults(func=cmd_outbox_retry)

    p = sub.add_parser("doctor", help="check the catalog: forced RLS, policies, roles, keys, "
                                      "grants, views, triggers")
    p.add_argument("specs", nargs="*", metavar="SPEC", help=f"spec files (default: {DEFAULT_SPECS})")
    p.add_argument("--json", action="store_true",
                   help="print the report as JSON (the exit status is the same: 1 on findings)")
    p.set_defaults(func=cmd_doctor)
    p = sub.add_parser("vacuum", help="after an erasure: rewrite the tables it changed so no "
                                      "old row version stays on disk (locks them meanwhile)")
    p.add_argument("specs", nargs="*", metavar="SPEC", help=f"spec files (default: {DEFAULT_SPECS})")
    p.add_argument("--sql", action="store_true", help="print the statements, run nothing")
    p.set_defaults(func=cmd_vacuum)
    p = sub.add_parser("maintain", help="the periodic lifecycle job: close idle scopes, promote "
                                        "corroborated rows, archive decayed ones (journalled)")
    p.add_argument("specs", nargs="*", metavar="SPEC", help=f"spec files (default: {DEFAULT_SPECS})")
    p.add_argument("--batch-tenants", type=int, default=100, metavar="N",
                   help="tenants per transaction (default 100)")
    p.add_argument("--duty", type=float, default=1.0, metavar="F",
                   help="share of wall time the job may be busy, 0 < F <= 1 (default 1): "
                        "beside live traffic, 0.5 sleeps as long as each batch took")
    p.add_argument("--list-dispositions", type=int, default=0, metavar="N",
                   help="also name up to N rows per agent that await disposition (promote, "
                        "mark exempt or archive), oldest first; the count is always reported")
    p.add_argument("--extractor", choices=["rule_based"], default=None,
                   help="consolidate missed sessions with this extractor, whatever the spec "
                        "says (default: the spec's; a spec that asks for an LLM is skipped: "
                        "an LLM extractor is passed from Python, maintain(..., "
                        "extractor=LLMExtractor(model)))")
    p.add_argument("--embed", action="store_true",
                   help="also embed rows waiting for a vector (retrieval.embedding.embed: "
                        "deferred, or written without an embedder) with the default embedder, "
                        "in batches, journalled")
    p.add_argument("--force", action="store_true",
                   help="run the decay passes whose behavior.decay schedule is not due yet "
                        "(by default they run only when their cron schedule fired since "
                        "their last run; --json names the skipped ones)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_maintain)

    p = sub.add_parser("reembed", help="make every stored vector of an agent again with the "
                                       "spec's model and dims, then switch to them (journalled)")
    p.add_argument("spec", metavar="SPEC", help="the agent's spec, with the new model or dims")
    p.add_argument("--batch", type=int, default=256, metavar="N",
                   help="rows per model call and per transaction (default 256)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_reembed)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except SpecError as err:
        _report_spec_error(err)
        return 1
    except SpecChangeRefused as err:
        errors.print(f"[red]{err.code}[/red] {escape(str(err))}", soft_wrap=True)
        return 1
    except StorageError as err:
        errors.print(f"[red]{err.code}[/red] {err}", soft_wrap=True)
        return 2
    except PrimitivesError as err:
        errors.print(f"[red]{err.code}[/red] {err}", soft_wrap=True)
        return 1
    return code


if __name__ == "__main__":
    raise SystemExit(main())
