"""``python -m bench.server_ab``: the server's CPU per engine write, one schema against a variant.

    python -m bench.server_ab                                   # A/A: the noise floor
    python -m bench.server_ab --variant bench/variants/eight_checks.sql
    python -m bench.server_ab --variant FILE --writes 2000 --rounds 3
    python -m bench.server_ab --message implicit                # the message sent otherwise

On a shared machine the CPU's speed drifts by a factor of two within minutes, so two runs
of anything, even one after the other, differ by more than most server-side changes save.
This tool takes the drift out: it migrates the bench spec twice into one database, as two
agents with their own tables (``base`` and ``variant``), runs ``--variant``'s SQL as the
owner on the second, and then sends the same write to each, one after the other, write by
write, the order alternating, each on a backend of its own. Both backends see the same
machine at the same moment; each one's CPU time comes from the kernel
(``/proc/<pid>/schedstat``, nanoseconds), so the server must run on this machine (the
embedded server does).

The writes are ``Engine.observe``'s own message for the bench write (as
``python -m bench.ceiling``'s replay sends it), sent from one client. The result is the
server's microseconds per write for each copy and their ratio, per round and as the
median. A/A (no variant) shows how far apart two identical copies come out: about 1%.

A variant file is SQL run as the owner, with ``{variant}`` standing for the variant
agent's table prefix and ``{schema}`` for its schema, e.g.::

    DROP INDEX {schema}.{variant}_memories_tsv_match_idx;

``--message`` sends the variant copy's writes in another form (:data:`MESSAGES`), to weigh
the message rather than the schema.

``--write put_new`` or ``--write put_update`` weighs the LangGraph store's ``put``
(``MemoryStore.put`` on each copy, one connection each) instead: a new key per write, or a
changed value for one of the keys the warm-up wrote (:data:`WRITES`)::

    python -m bench.server_ab --write put_update --variant bench/variants/no_event_hash.sql

It measures only; nothing it finds changes a goal.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
from langgraph.store.base import PutOp
from psycopg import sql

from bench._env import (
    RESULTS,
    backend_cpu_ns,
    bench_databases,
    log,
    machine_at_end,
    machine_info,
    result_header,
    shown,
    write_result,
)
from bench._replay import one_message_call
from bench._targets import BENCH_SPEC, BENCH_TIER, ROOT, payload
from bench.writes import tenant_ids
from primitives._project import migrate
from primitives.db._oneshot import _TENANT, OnceTransaction, _commands
from primitives.db._pipeline import SET_TENANT, Command, exchange
from primitives.engine import Engine
from primitives.engine import _store_ops as store_ops
from primitives.langgraph import MemoryStore
from primitives.spec import AgentSpec, load_spec_text

__all__ = ["COPIES", "MESSAGES", "WRITES", "copy_spec", "main", "measure", "render_table"]

COPIES = ("base", "variant")
SCHEMA = "platform"


def copy_spec(name: str) -> AgentSpec:
    """The bench spec as agent ``name`` with tables ``platform.<name>_*`` and its
    checkpointer in schema ``<name>_graph``: a second copy in the same database."""
    text = BENCH_SPEC.read_text(encoding="utf-8")
    spec = load_spec_text(text, file=str(BENCH_SPEC))
    store, graph = spec.persistence.store, spec.persistence.checkpointer
    swaps = {f"agent: {spec.agent}\n": f"agent: {name}\n",
             f"prefix: {store.prefix}}}": f"prefix: {name}}}",
             f"{{schema: {graph.schema_}}}": f"{{schema: {name}_graph}}"}
    for old, new in swaps.items():
        if text.count(old) != 1:
            raise RuntimeError(f"{BENCH_SPEC}: expected '{old.strip()}' once, to copy the spec "
                               "under another name; update bench/server_ab.py")
        text = text.replace(old, new)
    copy = load_spec_text(text, file=f"{BENCH_SPEC} (as {name})")
    if copy.persistence.store.schema_ != SCHEMA:
        raise RuntimeError(f"the bench spec's store schema is {copy.persistence.store.schema_}, "
                           f"not {SCHEMA}; update bench/server_ab.py")
    return copy


def variant_sql(path: Path) -> str:
    """``path``'s SQL with ``{variant}`` and ``{schema}`` filled in; a clear error otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise SystemExit(f"cannot read the variant {path}: {err.strerror}") from None
    filled = text.replace("{variant}", "variant").replace("{schema}", SCHEMA)
    if not filled.strip():
        raise SystemExit(f"the variant {path} holds no SQL")
    return filled


MESSAGES = ("engine", "implicit", "no-reset", "unnamed-tenant", "items-array")
"""How the variant copy's writes are sent: ``engine``, as ``Engine.observe`` sends them
(``BEGIN``; the bound tenant; the prepared insert; ``COMMIT``; ``RESET ALL``, in one
pipeline); ``implicit``, without ``BEGIN`` and ``COMMIT`` (PostgreSQL runs a pipeline's
commands up to its sync as one implicit transaction); ``no-reset``, the engine's without
``RESET ALL``; ``unnamed-tenant``, the engine's with the tenant statement sent unnamed (parsed
and planned again in every transaction) instead of prepared on the session, as it was before;
``items-array`` (with a store ``--write`` only), the store's one-item put as
the JSON array of items a group of puts sends (``store_ops.put_items(..., one=False)``).
Measurement only: the base copy always sends the engine's."""


WRITES = ("observe", "put_new", "put_update")
"""What each copy is sent: ``observe``, ``Engine.observe``'s message for the bench write;
``put_new``, ``MemoryStore.put`` of a new key; ``put_update``, ``MemoryStore.put`` of a
changed value for a key the round's warm-up wrote (a superseded version and its events).
The store writes go to the bench spec's workspace tier (the procedural typology), as
``python -m bench.store_speed`` sends them."""


def _form(commands: list[Command], form: str) -> list[Command]:
    """The engine's one-round-trip write (``_commands``) in ``form`` (:data:`MESSAGES`)."""
    if form == "engine":
        return commands
    if form not in ("implicit", "no-reset", "unnamed-tenant"):
        raise AssertionError(f"'{form}' is not a form of the observe write's message")
    texts = [c.text for c in commands]
    if texts[0] != b"BEGIN" or texts[1] not in (SET_TENANT, _TENANT.name.encode()) \
            or texts[-2:] != [b"COMMIT", b"RESET ALL"]:
        raise AssertionError(f"the engine's commands no longer have the shape the '{form}' "
                             "form rewrites: update bench/server_ab.py")
    if form == "no-reset":
        return commands[:-1]
    if form == "unnamed-tenant":
        return [commands[0], Command(SET_TENANT, commands[1].values), *commands[2:]]
    return commands[1:-2] + commands[-1:]


class _Copy:
    """One copy's engine (for its messages) and the backend that runs them."""

    def __init__(self, name: str, spec: AgentSpec, app_dsn: str, form: str = "engine") -> None:
        self.name, self.form = name, form
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # no embedder: expected
            self.engine = Engine.connect(spec, app_dsn, max_connections=1)
        self.conn = psycopg.connect(app_dsn, autocommit=True)
        row = self.conn.execute("SELECT pg_backend_pid()").fetchone()
        self.pid = int(row[0]) if row else 0
        try:
            backend_cpu_ns(self.pid)
        except OSError:
            self.close()
            raise SystemExit("bench.server_ab reads each backend's CPU time from "
                             "/proc/<pid>/schedstat: the server must run on this machine "
                             "(unset PRIMITIVES_DSN to use the embedded one)") from None

    def message(self, tenant: str, i: int) -> list[Command]:
        """``Engine.observe``'s commands for bench write ``i`` of ``tenant`` (its statement
        prepared on this copy's backend)."""
        content, envelope, tags = payload(i)
        call = one_message_call(self.engine, self.conn, tenant, BENCH_TIER, content,
                                {"envelope": envelope, "tags": tags})
        tx = OnceTransaction(self.conn, tenant)
        if not (tx._ensure(call.prepared) and tx._ensure(_TENANT)):
            raise AssertionError("the server would not prepare the engine's insert")
        return _form(_commands(tx.tenant_value, call.prepared, True, tenant_prepared=True),
                     self.form)

    def send(self, message: list[Command]) -> None:
        exchange(self.conn, message)

    def close(self) -> None:
        self.conn.close()
        self.engine.close()


class _StoreCopy:
    """One copy's LangGraph store on one connection, and that connection's backend."""

    def __init__(self, name: str, spec: AgentSpec, app_dsn: str, form: str = "engine") -> None:
        self.name, self.form = name, form
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # no embedder: expected
            self.store = MemoryStore.from_spec(spec, app_dsn, max_connections=1)
        pool = self.store.engine._pool
        conn = pool.getconn()
        try:
            row = conn.execute("SELECT pg_backend_pid()").fetchone()
        finally:
            pool.putconn(conn)
        self.pid = int(row[0]) if row else 0
        try:
            backend_cpu_ns(self.pid)
        except OSError:
            self.close()
            raise SystemExit("bench.server_ab reads each backend's CPU time from "
                             "/proc/<pid>/schedstat: the server must run on this machine "
                             "(unset PRIMITIVES_DSN to use the embedded one)") from None

    def put(self, tenant: str, key: str, version: int) -> None:
        namespace = (tenant, "workspace", "procedural", "bench")
        value = {"text": f"observation {key} v{version}: lowering temperature removed "
                         "fabrication", "version": version}
        if self.form == "engine":
            self.store.put(namespace, key, value)
            return
        # items-array: the same put, the statement as a group of puts sends it
        [group], _ = self.store._translator.plan([PutOp(namespace, key, value)])
        outcomes = self.store.engine.write_once(
            dict(group.anchor), partial(store_ops.put_items, ops=group.ops, one=False),
            actor=self.store.actor)
        if outcomes is None or outcomes[0] not in ("written", "unchanged"):
            raise AssertionError(f"the items-array put of {key} went {outcomes}")

    def close(self) -> None:
        self.store.close()


def _store_round(copies: Sequence[_StoreCopy], tenants: Sequence[str], first: int,
                 writes: int, warmup: int, write: str) -> dict[str, dict[str, float]]:
    """:func:`_round` for the store's put (:data:`WRITES`): ``warmup`` new keys, then
    ``writes`` puts to each copy, interleaved, each timed alone on the server."""
    for k in range(warmup):
        for c in copies:
            c.put(tenants[k % len(tenants)], f"w{first + k}", 0)
    spent = {c.name: 0 for c in copies}
    wall = {c.name: 0.0 for c in copies}
    for k in range(writes):
        if write == "put_new":
            tenant, key, version = tenants[k % len(tenants)], f"n{first + k}", 0
        else:  # a changed value for a key of this round's warm-up (with its tenant)
            j = k % warmup
            tenant, key, version = tenants[j % len(tenants)], f"w{first + j}", k + 1
        for c in (copies if k % 2 else tuple(reversed(copies))):
            cpu, t0 = backend_cpu_ns(c.pid), time.perf_counter()
            c.put(tenant, key, version)
            wall[c.name] += time.perf_counter() - t0
            spent[c.name] += backend_cpu_ns(c.pid) - cpu
    return {c.name: {"server_us": round(spent[c.name] / writes / 1000, 1),
                     "wall_us": round(wall[c.name] / writes * 1e6, 1)} for c in copies}


def _round(copies: Sequence[_Copy], tenants: Sequence[str], first: int, writes: int,
           warmup: int) -> dict[str, dict[str, float]]:
    """``warmup`` then ``writes`` writes to each copy, interleaved; per copy the server's
    microseconds per write and the client's wall time per write."""
    count = warmup + writes
    messages = {c.name: [c.message(tenants[k % len(tenants)], first + k) for k in range(count)]
                for c in copies}
    for k in range(warmup):
        for c in copies:
            c.send(messages[c.name][k])
    start = {c.name: backend_cpu_ns(c.pid) for c in copies}
    wall = dict.fromkeys(start, 0.0)
    for k in range(warmup, count):
        for c in (copies if k % 2 else tuple(reversed(copies))):
            t0 = time.perf_counter()
            c.send(messages[c.name][k])
            wall[c.name] += time.perf_counter() - t0
    spent = {c.name: backend_cpu_ns(c.pid) - start[c.name] for c in copies}
    return {c.name: {"server_us": round(spent[c.name] / writes / 1000, 1),
                     "wall_us": round(wall[c.name] / writes * 1e6, 1)} for c in copies}


def measure(*, variant: Path | None, message: str = "engine", write: str = "observe",
            writes: int = 4000,
            rounds: int = 3, warmup: int = 200, tenants: int = 100, out: Path | None = None,
            command: str = "python -m bench.server_ab",
            progress: Callable[[str], object] = log) -> dict[str, Any]:
    """Measure (module docstring); the result, also written to ``out``."""
    if write not in WRITES or (write == "observe" and message == "items-array") or (
            write != "observe" and message not in ("engine", "items-array")):
        raise SystemExit(f"--write {write} with --message {message}: 'items-array' weighs a "
                         "store put, the other message forms the observe write")
    if write == "put_update" and warmup < 1:
        raise SystemExit("--write put_update updates the keys each round's warm-up writes: "
                         "it needs a warm-up")
    started = time.monotonic()
    sql_text = variant_sql(variant) if variant is not None else None
    names = tenant_ids(tenants)
    results: list[dict[str, dict[str, float]]] = []
    with bench_databases(progress=progress) as dbs:
        machine = machine_info(dbs.admin_dsn, embedded=dbs.embedded)
        specs = {name: copy_spec(name) for name in COPIES}
        report = migrate(list(specs.values()), dsn=dbs.engine_admin_dsn,
                         progress=lambda _: None)
        progress(f"two copies of the bench spec: {report.summary()}")
        if sql_text is not None:
            with psycopg.connect(dbs.engine_admin_dsn, autocommit=True) as owner:
                try:
                    owner.execute(sql_text.encode())
                except psycopg.Error as err:
                    raise SystemExit(f"the variant {variant} failed: {err}") from None
            progress(f"variant {variant} applied to the 'variant' copy")
        copies: list[Any] = []
        try:
            for name, spec in specs.items():
                form = message if name == "variant" else "engine"
                copies.append(_Copy(name, spec, dbs.engine_app_dsn, form) if write == "observe"
                              else _StoreCopy(name, spec, dbs.engine_app_dsn, form))
            for n in range(rounds):
                first = n * (warmup + writes)
                row = (_round(copies, names, first, writes, warmup) if write == "observe"
                       else _store_round(copies, names, first, writes, warmup, write))
                results.append(row)
                progress(f"round {n + 1}/{rounds}: base {row['base']['server_us']:.0f} us, "
                         f"variant {row['variant']['server_us']:.0f} us of server CPU per "
                         f"write (variant/base {_ratio(row):.3f})")
            landed = _landed(dbs.engine_admin_dsn)
        finally:
            for c in copies:
                c.close()
    ratios = [_ratio(row) for row in results]
    result = {
        **result_header("server_ab", command, started, machine),
        "parameters": {"variant": shown(variant) if variant else None, "message": message,
                       "write": write,
                       "writes_per_round": writes,
                       "warmup_per_round": warmup, "rounds": rounds, "tenants": tenants,
                       "spec": str(BENCH_SPEC.relative_to(ROOT)), "tier": BENCH_TIER},
        "rounds": results,
        "rows": landed,
        "variant_over_base": {"per_round": ratios,
                              "median": round(statistics.median(ratios), 3)},
    }
    machine_at_end(machine)
    if out is not None:
        progress(f"wrote {write_result(out, result)}")
    return result


def _landed(owner_dsn: str) -> dict[str, dict[str, int]]:
    """Each copy's memories and journal events, counted as the owner: every write landed."""
    counts: dict[str, dict[str, int]] = {}
    with psycopg.connect(owner_dsn, autocommit=True) as owner:
        for name in COPIES:
            counts[name] = {}
            for table in ("memories", "memory_events"):
                query = sql.SQL("SELECT count(*) FROM {}").format(
                    sql.Identifier(SCHEMA, f"{name}_{table}"))
                row = owner.execute(query).fetchone()
                counts[name][table] = int(row[0]) if row else 0
    return counts


def _ratio(row: dict[str, dict[str, float]]) -> float:
    base = row["base"]["server_us"]
    return round(row["variant"]["server_us"] / base, 3) if base else float("nan")


def render_table(result: dict[str, Any]) -> str:
    """The result as a markdown table: server CPU per write per copy and round, the ratios."""
    params = result["parameters"]
    variant = f"`{params['variant']}`" if params["variant"] else "none"
    lines = [f"variant {variant}, message `{params['message']}`, write "
             f"`{params.get('write', 'observe')}`; {params['rounds']} round(s) "
             f"of {params['writes_per_round']:,} interleaved writes per copy "
             f"(`{result['command']}`, {result['started_at']})", "",
             "| round | base: server us/write | variant: server us/write | variant / base |",
             "|---:|---:|---:|---:|"]
    for n, row in enumerate(result["rounds"], start=1):
        lines.append(f"| {n} | {row['base']['server_us']:.0f} | "
                     f"{row['variant']['server_us']:.0f} | {_ratio(row):.3f} |")
    lines += ["", f"median variant / base: {result['variant_over_base']['median']:.3f}"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.server_ab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", type=Path, default=None,
                        help="SQL run as the owner on the variant copy (default: none, A/A)")
    parser.add_argument("--message", choices=MESSAGES, default="engine",
                        help="how the variant copy's writes are sent (default: as the engine)")
    parser.add_argument("--write", choices=WRITES, default="observe",
                        help="what each copy is sent (default: the engine's observe write)")
    parser.add_argument("--writes", type=int, default=4000, help="writes per copy and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds")
    parser.add_argument("--out", type=Path, default=None,
                        help="results file (default: bench/results/server_ab-<variant>.json)")
    args = parser.parse_args(argv)
    if args.writes < 1 or args.rounds < 1:
        parser.error("--writes and --rounds must be at least 1")
    if not sys.platform.startswith("linux") or not os.path.exists("/proc/self/schedstat"):
        parser.error("this tool reads /proc/<pid>/schedstat: it runs on Linux only")
    label = "-".join([*([args.variant.stem] if args.variant else []),
                      *([args.message] if args.message != "engine" else []),
                      *([args.write.replace("_", "-")] if args.write != "observe" else [])]) or "aa"
    out = args.out or RESULTS / f"server_ab-{label}.json"
    argv_text = list(sys.argv[1:] if argv is None else argv)
    result = measure(variant=args.variant, message=args.message, write=args.write,
                     writes=args.writes,
                     rounds=args.rounds, out=out,
                     command=shlex.join(["python", "-m", "bench.server_ab", *argv_text]))
    print(render_table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
