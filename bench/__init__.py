"""Write-path benchmarks: the engine against LangGraph's ``PostgresStore`` on one server.

``python -m bench.run`` (what ``make bench`` calls) starts a throwaway embedded
PostgreSQL, gives each system under test its own database, measures

- single-writer latency: one write per tenant transaction (our engine: the memory
  row plus its hash-chained journal event; PostgresStore: ``put``), p50/p95/p99;
- concurrent throughput: 8 writers over 100 tenants for a fixed time, as threads
  sharing one pool of 8 connections and as 8 processes with one connection each;

and writes ``bench/results/writes.json`` and the table in ``docs/benchmarks.md``.
``--quick`` is a 20-second smoke run that writes under ``bench/results/quick/``.

The measuring functions are importable (``bench.writes``) so a test can run them
with tiny counts.
"""

__all__: list[str] = []
