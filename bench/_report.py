"""``docs/benchmarks.md`` from a results dict: every figure in it comes from the run."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

__all__ = ["render_markdown"]

_NAMES = {
    "engine": "primitives engine (`engine.observe`, audited)",
    "langgraph": "LangGraph `PostgresStore.put`",
    "langgraph-shared-store": "LangGraph `PostgresStore.put`, one store shared by the threads",
}


RESULTS = Path(__file__).resolve().parent / "results"


def _ms(value: float) -> str:
    return f"{value:.2f}"


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def _load(machine: dict[str, Any], when: str) -> str:
    values = machine.get(f"load_average_at_{when}")
    return "n/a" if not values else "/".join(f"{v:.1f}" for v in values)


def _flush(machine: dict[str, Any]) -> str:
    """The disk's flush latency at the start and end, where the results have it."""
    start, end = machine.get("disk_flush_us_at_start"), machine.get("disk_flush_us_at_end")
    if start is None or end is None:
        return ""
    return (f" One 8 kB write and fdatasync in the server's folder took {start:.0f} us at the "
            f"start and {end:.0f} us at the end (median over 0.5 s).")


def _yes(flag: bool | None) -> str:
    return {True: "met", False: "**missed**", None: "n/a"}[flag]


def _writers_goal_rows(params: dict[str, Any], met: dict[str, Any],
                       goals: dict[str, Any]) -> list[str]:
    """One row per mode when the results judge each mode (older results: one, best mode)."""
    goal = f"{params['writers']} writers ≥ {goals['writes_per_s_8']:,.0f} writes/s"
    by_mode = met.get("writes_per_s_8_by_mode")
    if by_mode is None:
        return [f"| {goal} (best mode) | {_yes(met.get('writes_per_s_8'))} |"]
    return [f"| {goal}, {mode} | {_yes(flag)} |" for mode, flag in by_mode.items()]


def _single_table(result: dict[str, Any]) -> list[str]:
    rows = {r["target"]: r for r in result["single_writer"]}
    lines = [
        "| single writer, one write per transaction | p50 ms | p95 ms | p99 ms | mean ms "
        "| writes/s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for target, row in rows.items():
        lat = row["latency"]
        lines.append(f"| {_NAMES.get(target, target)} | {_ms(lat['p50_ms'])} | "
                     f"{_ms(lat['p95_ms'])} | {_ms(lat['p99_ms'])} | {_ms(lat['mean_ms'])} | "
                     f"{row['writes_per_s']:,.0f} |")
    ratios = result["ratios"]
    if "single_p50_ms_ours_over_theirs" in ratios:
        lines.append(
            f"| *ours / theirs* | {_ratio(ratios['single_p50_ms_ours_over_theirs'])} | "
            f"{_ratio(ratios['single_p95_ms_ours_over_theirs'])} | "
            f"{_ratio(ratios['single_p99_ms_ours_over_theirs'])} | | |")
    return lines


def _load_table(result: dict[str, Any]) -> list[str]:
    lines = [
        "| concurrent writers over 100 tenants | mode | writes/s | p50 ms | p95 ms | p99 ms "
        "| errors |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in result["concurrent"]:
        lat = row["latency"]
        lines.append(
            f"| {_NAMES.get(row['target'], row['target'])}, {row['writers']} writers | "
            f"{row['mode']} | {row['writes_per_s']:,.0f} | {_ms(lat['p50_ms'])} | "
            f"{_ms(lat['p95_ms'])} | {_ms(lat['p99_ms'])} | {row['errors']} |")
    ratios = result["ratios"]
    for mode in ("threads", "processes"):
        key = f"writes_per_s_{mode}_ours_over_theirs"
        if key in ratios:
            lines.append(f"| *ours / theirs* | {mode} | {_ratio(ratios[key])} | | | | |")
    return lines


def _breakdown_table(result: dict[str, Any]) -> list[str]:
    parts = result.get("breakdown")
    if not parts:
        return []
    lines = [
        "",
        "### Where one engine write spends its time",
        "",
        "The engine's own `observe` operation driven step by step on one app-role connection "
        "(`bench/_breakdown.py`), "
        f"{result['parameters'].get('breakdown_writes', '')} writes:",
        "",
        "| part | p50 ms | p95 ms | mean ms |",
        "|---|---:|---:|---:|",
    ]
    for part in parts.values():
        lines.append(f"| {part['label']} | {_ms(part['p50_ms'])} | {_ms(part['p95_ms'])} | "
                     f"{_ms(part['mean_ms'])} |")
    return lines


def render_markdown(result: dict[str, Any], *, table_only: bool = False) -> str:
    """The benchmark page (or only its tables, for the terminal)."""
    tables = [*_single_table(result), "", *_load_table(result), *_breakdown_table(result)]
    if table_only:
        return "\n".join(tables) + "\n"
    machine = result["machine"]
    params = result["parameters"]
    met = result["targets_met"]
    goals = met["goals"]
    settings = ", ".join(f"{k} {v}" for k, v in machine["postgresql_settings"].items())
    packages = ", ".join(f"{k} {v}" for k, v in machine["packages"].items() if v)
    lines = [
        "# Benchmarks",
        "",
        "<!-- generated by `python -m bench.run`; edit bench/_report.py, not this file -->",
        "",
        f"Command: `{result['command']}` (`make bench`), run {result['started_at']} in "
        f"{result['duration_s']:.0f} s. Raw results: `bench/results/writes.json`.",
        "",
        f"Machine: {machine['cores']} cores, {machine['memory_gib']} GiB, {machine['platform']}; "
        f"Python {machine['python']}; PostgreSQL {machine['postgresql']} "
        f"({machine['postgresql_server']}; {settings}); {packages}; "
        f"commit {machine['git_commit']}. Load average (1, 5, 15 min) at the start "
        f"{_load(machine, 'start')}, at the end {_load(machine, 'end')}: the machine may be "
        f"shared, and commit latency follows its disk load.{_flush(machine)}",
        "",
        "What is measured, on one server in one run:",
        "",
        f"- **ours**: `engine.observe({{\"workspace_id\": t}}, \"{params['tier']}\", content, "
        f"envelope=..., tags=...)` with the spec `{params['spec']}`, connected as "
        "`primitives_app` (row-level security forced). One transaction per write, sent in one "
        "round trip (`BEGIN`, the bound tenant, the prepared insert with bound values, "
        "`COMMIT`, `RESET ALL` in one pipeline): the memory row, its hash-chained journal "
        "event and the scope mark.",
        "- **theirs**: LangGraph's `PostgresStore.put((t, tier), key, value, index=False)` in "
        "its own database, connected as the admin: it has no tenancy, no row-level security "
        "and no journal. Same payloads.",
        f"- single writer: {params['writes']:,} timed writes per system after "
        f"{params['warmup']} warm-up writes, in alternating blocks of {params['block']}, "
        f"round-robin over {params['tenants']} tenants.",
        f"- concurrent: {params['writers']} writers for {params['seconds']:g} s per system and "
        f"mode (in {params['rounds']} alternating rounds), over {params['tenants']} tenants: "
        f"as threads in one process sharing a pool of {params['writers']} connections, and as "
        f"{params['writers']} processes with one connection each. Each LangGraph thread has "
        "its own `PostgresStore` on the shared pool; one shared store serializes `batch` "
        "behind a lock (its own row).",
        "",
        "## Results",
        "",
        *tables,
        "",
        "Ratios are ours divided by theirs: above 1x is slower for latency and faster for "
        "writes/s.",
        "",
        "## Goals",
        "",
        "| goal | result |",
        "|---|---|",
        f"| single write p50 ≤ {goals['single_p50_ms']:g} ms | {_yes(met.get('single_p50_ms'))} |",
        f"| single write p95 ≤ {goals['single_p95_ms']:g} ms | {_yes(met.get('single_p95_ms'))} |",
        *_writers_goal_rows(params, met, goals),
        "",
        "What the figures mean for scaling, and where the write time goes, is discussed in "
        "[scaling.md](scaling.md).",
        "",
        *_other_results(),
    ]
    return "\n".join(lines)


def _other_results(folder: Path = RESULTS) -> list[str]:
    """Headline figures of the other benchmarks, read from their committed JSON results."""
    lines = ["## Other benchmarks (their own commands; figures from their committed results)", ""]
    locomo = _read(folder / "locomo.json")
    if locomo:
        lines += ["Retrieval quality, LoCoMo dev (`python -m bench.locomo`, "
                  "`bench/results/locomo.json`; details in [retrieval.md](retrieval.md)):", "",
                  "| recall | @5 | @10 | @25 | @50 |", "|---|---:|---:|---:|---:|"]
        for name, row in locomo["recall"].items():
            lines.append(f"| {name} | " + " | ".join(f"{row[k]:.3f}" for k in
                                                      ("5", "10", "25", "50")) + " |")
        store = _read(folder / "locomo_store.json")
        for name, row in (store or {}).get("recall", {}).items():
            lines.append(f"| {name} (`--store-only`, `bench/results/locomo_store.json`) | "
                         + " | ".join(f"{row[k]:.3f}" for k in ("5", "10", "25", "50")) + " |")
        lines.append("")
    speed = _read(folder / "retrieval_speed.json")
    if speed:
        lines += ["Search latency, limit 10, query embedding excluded (`python -m "
                  "bench.retrieval_speed`, `bench/results/retrieval_speed.json`):", "",
                  "| rows | system | p50 ms | p95 ms | p99 ms | full limit |",
                  "|---:|---|---:|---:|---:|---:|"]
        for rows, scale in speed["scales"].items():
            for key, label in (("ours_hybrid", "ours, hybrid"),
                               ("langgraph_vector", "PostgresStore, vector only")):
                r = scale[key]
                lines.append(f"| {int(rows):,} | {label} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} "
                             f"| {r['p99_ms']:.1f} | {r['full_limit_share']:.1%} |")
        lines.append("")
    store = _read(folder / "store_speed.json")
    if store:
        ours, theirs = store["results"]["MemoryStore"], store["results"]["PostgresStore"]
        lines += ["LangGraph store operations (`python -m bench.store_speed`, "
                  "`bench/results/store_speed.json`):", "",
                  "| op | MemoryStore p50 / p95 ms | PostgresStore p50 / p95 ms | p50 ratio |",
                  "|---|---:|---:|---:|"]
        for op in ours:
            a, b = ours[op], theirs[op]
            lines.append(f"| {op} | {a['p50_ms']:.2f} / {a['p95_ms']:.2f} | {b['p50_ms']:.2f} / "
                         f"{b['p95_ms']:.2f} | {a['p50_ms'] / b['p50_ms']:.2f}x |")
        lines.append("")
        concurrent = store.get("async_concurrent")
        if concurrent:
            a, b = concurrent["MemoryStore"], concurrent["PostgresStore"]
            lines += [f"Async stores under {store['settings']['concurrent']:,} concurrent small "
                      "calls (half `aput` of a new key, half `aget`; `AsyncMemoryStore` against "
                      "`AsyncPostgresStore`, rounds alternating; target: at least its "
                      "throughput):", "",
                      "| AsyncMemoryStore calls/s | AsyncPostgresStore calls/s | ratio |",
                      "|---:|---:|---:|",
                      f"| {a['calls_per_s']:,.0f} | {b['calls_per_s']:,.0f} | "
                      f"{a['calls_per_s'] / b['calls_per_s']:.2f}x |", ""]
    tick = _read(folder / "tick.json")
    if tick:
        lines += _tick_lines(tick)
    maintain = _read(folder / "maintain.json")
    if maintain:
        lines += _maintain_lines(maintain)
    pii = _read(folder / "pii.json")
    if pii:
        lines += _pii_lines(pii)
    deferred = _read(folder / "embed_deferred.json")
    if deferred:
        lines += _embed_deferred_lines(deferred)
    outbox = _read(folder / "outbox.json")
    if outbox:
        lines += _outbox_lines(outbox)
    consolidation = _read(folder / "consolidation.json")
    if consolidation:
        lines += _consolidation_lines(consolidation)
    non_mirror = _read(folder / "non_mirror.json")
    if non_mirror:
        lines += _non_mirror_lines(non_mirror)
    graph = _read(folder / "graph.json")
    if graph:
        lines += _graph_lines(graph)
    citus = _read(folder / "citus.json")
    if citus:
        lines += _citus_lines(citus)
    return lines if len(lines) > 2 else []


def _citus_lines(result: dict[str, Any]) -> list[str]:
    """Writes and hybrid search on a three-node Citus cluster against one node
    (``python -m bench.citus``)."""
    writes, search = result["writes"], result["search"]
    rounds = writes["rounds"]
    one = sorted(r["one"]["writes_per_s"] for r in rounds)[len(rounds) // 2]
    cluster = sorted(r["cluster"]["writes_per_s"] for r in rounds)[len(rounds) // 2]
    return [f"A Citus coordinator with two workers against one node, all on this machine's "
            f"cores, {result['tenants']:,} tenants (`{result['command']}`, "
            "`bench/results/citus.json`; what it measures is in "
            "[scaling.md](scaling.md#measured-on-a-cluster)):", "",
            "| measurement | one node | cluster | cluster / one node |",
            "|---|---:|---:|---:|",
            f"| writes/s, {result['writers']} writers ({writes['path']}; median of "
            f"{len(rounds)} rounds) | {one:,.0f} | {cluster:,.0f} | "
            f"{writes['median_ratio']:.2f}x |",
            f"| search p95 ms ({', '.join(search['signals'])}; {search['searches_each']:,} "
            f"each) | {search['one']['p95_ms']:.1f} | {search['cluster']['p95_ms']:.1f} | "
            f"{search['p95_ratio']:.2f}x |", "",
            f"Measured with a 1-minute load average of {result['load_average_1m']:.1f} (taken at "
            "the end of the run); writes and searches alternate between the two, so the load "
            "moves both alike.", ""]


def _graph_lines(result: dict[str, Any]) -> list[str]:
    """The assistant's hot-path writes and why / when questions beside a plain hybrid
    search of the same graph (``python -m bench.graph``)."""
    plain = result["plain"]
    lines = [f"The assistant's graph memory at {result['nodes']:,} nodes, one user "
             f"(`{result['command']}`, `bench/results/graph.json`; what it measures is in "
             "[profiles/assistant-memory.md](profiles/assistant-memory.md#at-100000-nodes)):",
             "", "| measurement | p50 ms | p95 ms | p95 / plain search | target |",
             "|---|---:|---:|---:|---:|",
             f"| plain hybrid search (semantic, lexical, recency; RRF) | "
             f"{plain['p50_ms']:.1f} | {plain['p95_ms']:.1f} | 1.00x | |"]
    for key, label in (("why", "why question (causal walk)"),
                       ("when", "when question (temporal walk)")):
        r = result[key]
        lines.append(f"| {label} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | "
                     f"{result[f'{key}_vs_plain_p95']:.2f}x | <= {result['target']:g}x |")
    w = result["write"]
    lines += [f"| hot-path write (episode, journal event, temporal edge) | {w['p50_ms']:.1f} | "
              f"{w['p95_ms']:.1f} | {result['write_vs_plain_p95']:.2f}x | |", ""]
    machine = result.get("machine", {})
    if machine.get("cores"):
        lines += [f"Measured on {machine['cores']} cores with a 1-minute load average of "
                  f"{machine['load_average_at_start'][0]:.1f} (taken at the end of the run); "
                  "the three searches of a round run back to back, in an order that rotates, "
                  "so the load moves all of them alike.", ""]
    return lines


def _non_mirror_lines(result: dict[str, Any]) -> list[str]:
    """A write under the non-mirror trigram guard against the same write without it
    (``python -m bench.non_mirror``)."""
    machine = result.get("machine", {})
    lines = [f"A write of a {result['note_chars']}-character note under the non-mirror trigram "
             "guard (the canonical rows sharing a word shingle with it, or whose word signature "
             "its words nearly cover, by its own index) against the same write "
             f"without it (`{result['command']}`, `bench/results/non_mirror.json`, load "
             f"average at the start {_load(machine, 'start')}; "
             "[non-mirror.md](non-mirror.md)):", "",
             "| canonical rows | p50 without / with the guard ms | ratio | shingle / signature "
             "lookup ms (signature entries reached) |", "|---:|---:|---:|---:|"]
    for r in result["sizes"]:
        lookups = (f"{r['shingle_lookup_ms']:.3f} / {r['signature_lookup_ms']:.3f} "
                   f"({r['signature_entries']})" if "signature_lookup_ms" in r else "n/a")
        lines.append(f"| {r['canonical_rows']:,} | {r['plain_p50_ms']:.3f} / "
                     f"{r['guarded_p50_ms']:.3f} | {r['ratio']:.2f}x | {lookups} |")
    lines.append("")
    return lines


def _embed_deferred_lines(result: dict[str, Any]) -> list[str]:
    """A deferred write against a write without an embedder, and the embedding worker
    against the model encoding the same texts in one call (``python -m
    bench.embed_deferred``)."""
    writes, worker = result["writes"], result["worker"]
    lines = [f"Deferred embedding on the assistant spec with {result['embedder']} "
             "(`python -m bench.embed_deferred`, `bench/results/embed_deferred.json`; what it "
             "measures is in [retrieval.md](retrieval.md#deferred-embedding)):", "",
             "| measurement | value | target |", "|---|---:|---:|",
             f"| write p50: no embedder / deferred / inline (ms) | "
             f"{writes['none']['p50_ms']:.2f} / {writes['deferred']['p50_ms']:.2f} / "
             f"{writes['inline']['p50_ms']:.2f} | |",
             f"| write p50, deferred / no embedder | "
             f"{writes['p50_ratio_deferred_over_none']:.2f}x | <= {writes['target']:g}x |",
             f"| `embed_pending` rows/s / one `embed_documents` call over the same "
             f"{worker['rows']} texts (batches of {worker['batch']}), median (worst) | "
             f"{worker['median']:.2f}x ({worker['worst']:.2f}x) | >= {worker['target']:g}x |",
             ""]
    machine = result.get("machine", {})
    if machine.get("cores"):
        lines[-1:] = ["", f"Measured on {machine['cores']} cores with a 1-minute load average of "
                      f"{machine['load_average_at_start'][0]:.1f} (taken at the end of the "
                      "run): each round's two timings run back to back, so a busy neighbour "
                      "moves single rounds, and the median is the figure to read.", ""]
    return lines


def _pii_lines(result: dict[str, Any]) -> list[str]:
    """A write under a PII policy against the same write without one (``python -m bench.pii``)."""
    lines = [f"A write of {result['content_chars']} characters under a PII policy (all twelve "
             "kinds, `before: [any_write]`) against the same write without one "
             f"(`{result['command']}`, `bench/results/pii.json`; "
             "[privacy.md](privacy.md)):", "",
             "| content | p50 without / with the policy ms | ratio | target |",
             "|---|---:|---:|---:|"]
    for key, label, target in (("clean", "no personal data", f"<= {result['target']:g}x"),
                               ("with_pii", "an email and a phone number (redacted)", "")):
        r = result[key]
        lines.append(f"| {label} | {r['plain_p50_ms']:.3f} / {r['guarded_p50_ms']:.3f} | "
                     f"{r['ratio']:.2f}x | {target} |")
    lines.append("")
    return lines


def _outbox_lines(result: dict[str, Any]) -> list[str]:
    """A write of an event-driven agent against the same write of one without an outbox
    (``python -m bench.outbox``)."""
    lines = ["A one-statement write of an agent that publishes through an outbox "
             "(`cross_context: event_driven`) against the same write of one that does not "
             f"(`{result['command']}`, `bench/results/outbox.json`; "
             "[cross-context.md](cross-context.md)):", "",
             "| write | p50 without / with the outbox ms | ratio | target |",
             "|---|---:|---:|---:|"]
    for key, label, target in (
            ("unpublished", "episodic, outside the gate's from", f"<= {result['target']:g}x"),
            ("published", "semantic, published (outbox entry, journal event, NOTIFY)", "")):
        r = result[key]
        lines.append(f"| {label} | {r['private_p50_ms']:.3f} / {r['published_p50_ms']:.3f} | "
                     f"{r['ratio']:.2f}x | {target} |")
    lines.append("")
    return lines


def _maintain_lines(result: dict[str, Any]) -> list[str]:
    """The maintain job against a sequential scan, beside 8 writers, and search with access
    tracking (``python -m bench.maintain``)."""
    scan, writers = result["maintain_vs_scan"], result["writers"]
    lines = [f"The maintain job over {result['rows']:,} memories in {result['tenants']:,} "
             "tenants (`python -m bench.maintain`, `bench/results/maintain.json`; what it "
             "measures is in [lifecycle.md](lifecycle.md#the-maintain-job)):", "",
             "| measurement | median | worst | target |", "|---|---:|---:|---:|",
             f"| one maintain pass (daily, after the first) / sequential scan of the table | "
             f"{scan['median']:.2f}x | "
             f"{scan['worst']:.2f}x | <= {scan['target']:g}x |",
             *([f"| the first pass over the loaded, never maintained history / sequential "
                f"scan (once; not held to the target) | {result['catch_up']['ratio']:.2f}x | "
                f"| |"] if "catch_up" in result else []),
             f"| 8 writers' writes/s beside back-to-back passes (duty {writers['duty']:g}) / "
             f"alone | {writers['median']:.2f}x | {writers['worst']:.2f}x | "
             f">= {writers['target']:g}x |"]
    search = result.get("search_access_tracking")
    if search:
        lines.append(f"| search p95 with access tracking / without | {search['p95_ratio']:.2f}x "
                     f"| | <= {search['target']:g}x |")
    lines.append("")
    return lines


def _tick_lines(result: dict[str, Any]) -> list[str]:
    """A tick of working memory against one UPDATE of its TTL column (``python -m
    bench.tick``)."""
    ratio = result["tick_vs_update"]
    return [f"A tick over {result['rows']:,} working-memory items in {result['jobs']} jobs "
            "(`python -m bench.tick`, `bench/results/tick.json`; what a tick does is in "
            "[profiles/mace.md](profiles/mace.md#ticks)):", "",
            "| measurement | median | worst | target |", "|---|---:|---:|---:|",
            f"| `tick()` / one `UPDATE` of the same rows' `ttl_ticks` | {ratio['median']:.2f}x "
            f"| {ratio['worst']:.2f}x | <= {ratio['target']:g}x |", ""]


def _consolidation_lines(result: dict[str, Any]) -> list[str]:
    """A session's consolidation against writing it (``python -m bench.consolidation``)."""
    rounds = result["rounds"]
    median = {k: statistics.median(r[k] for r in rounds)
              for k in ("write_ms", "consolidate_ms", "rerun_ms")}
    ratio, rerun = result["consolidate_vs_write"], result["rerun_vs_write"]
    return [f"Consolidating a session of {result['episodes']} episodes with the rule-based "
            f"extractor, {result['sessions']} sessions per round (`python -m "
            "bench.consolidation`, `bench/results/consolidation.json`; what it measures is in "
            "[extraction.md](extraction.md)):", "",
            "| per session | median ms | / writing the session, median | worst |",
            "|---|---:|---:|---:|",
            f"| write the episodes (`observe`) | {median['write_ms']:.1f} | | |",
            f"| consolidate, then end the session | {median['consolidate_ms']:.1f} | "
            f"{ratio['median']:.2f}x | {ratio['worst']:.2f}x |",
            f"| end it again (nothing to claim) | {median['rerun_ms']:.1f} | "
            f"{rerun['median']:.3f}x | {rerun['worst']:.3f}x |", ""]


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data
