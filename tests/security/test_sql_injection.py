"""SQL metacharacters in every user-controlled field are stored and matched literally.

Each test writes a payload through the engine into one field, reads it back exactly, and
ends by checking that nothing else happened (:func:`intact`): every agent table and view
still exists, and a sentinel tenant's row counts and hash chain are unchanged. The engine's
connections carry ``statement_timeout=4s``, so an injected ``pg_sleep(5)`` would fail the test.
Agent and store names are never bound, so the spec loader pattern-checks them instead.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql
from psycopg.conninfo import make_conninfo

from primitives.db import tenant_transaction
from primitives.engine import Engine
from primitives.engine._core import content_hash, mask_subject
from primitives.errors import SpecError
from primitives.spec import AgentSpec, load_spec_text
from tests.conftest import PostgresHandle
from tests.security._support import (
    APPROVERS,
    ROOT,
    SPEC_BY_AGENT,
    TABLES_BY_AGENT,
    anchor_for,
    connect_engine,
    count,
    new_tenant,
    relation_counts,
    seed_tenant,
    verify_chain,
)

pytestmark = pytest.mark.db

SPEC = SPEC_BY_AGENT["spectral"]
TABLES = TABLES_BY_AGENT["spectral"]
ALL_TIERS = list(SPEC.tier_names)

PAYLOADS = [
    pytest.param("x'); DROP TABLE platform.spectral_memories; --", id="drop-table"),
    pytest.param("' OR 1=1 --", id="or-true"),
    pytest.param("\\'; SELECT pg_sleep(5); --", id="sleep"),
    pytest.param('"; DROP SCHEMA platform CASCADE; --', id="double-quote"),
    pytest.param("$$; DROP TABLE platform.spectral_memory_events; $$", id="dollar-quote"),
    pytest.param("' UNION SELECT content FROM platform.spectral_memories --", id="union"),
    pytest.param("'; SET primitives.tenant = 'victim'; --", id="set-tenant"),
    pytest.param("%s %(tenant)s {tenant} {} $1 ?", id="placeholders"),
    pytest.param("*/ SELECT 1; /* -- ", id="comment"),
    pytest.param("%_%", id="like-wildcards"),
    pytest.param("\\\\x00 \\n \\' E'\\''", id="backslashes"),
    pytest.param('$.** ? (@ == "x") || {"a": 1}', id="jsonpath"),
    pytest.param("!(a & b) | c:* <-> 'd' \"e f\" -g OR", id="tsquery"),
    pytest.param("ünïcødé ✓ 中文 עברית 🧠 \u200b\u202e\ufeff", id="unicode"),
    pytest.param(" \t\r\n leading and trailing \n", id="whitespace"),
    pytest.param("'" * 200, id="quotes"),
]

Conn = psycopg.Connection[Any]


@pytest.fixture(scope="module")
def engine(pg: PostgresHandle, specs: tuple[AgentSpec, ...]) -> Iterator[Engine]:
    dsn = make_conninfo(pg.app_dsn, options="-c statement_timeout=4000")
    with connect_engine(SPEC, dsn, max_connections=2) as eng:
        yield eng


@pytest.fixture(scope="module")
def intact(engine: Engine, pg: PostgresHandle,
           specs: tuple[AgentSpec, ...]) -> Iterator[Callable[[], None]]:
    """A check that every relation exists and the sentinel tenant is untouched."""
    sentinel = seed_tenant(engine, new_tenant("sentinel"))
    relations = [r.qualified for s in specs for r in (*TABLES_BY_AGENT[s.agent].tables,
                                                      *TABLES_BY_AGENT[s.agent].views)]
    with psycopg.connect(pg.app_dsn, autocommit=True) as conn:

        def snapshot() -> dict[str, int]:
            with tenant_transaction(conn, sentinel.tenant):
                assert verify_chain(conn, TABLES, sentinel.tenant) is None
                return dict(relation_counts(conn, TABLES, sentinel.tenant))

        before = snapshot()

        def check() -> None:
            missing = conn.execute(
                "SELECT array_agg(r) FROM unnest(%s::text[]) AS r WHERE to_regclass(r) IS NULL",
                (relations,)).fetchone()
            assert missing == (None,), f"relations gone: {missing}"
            assert snapshot() == before

        yield check


def _neighbours(payload: str) -> tuple[str, ...]:
    """Values near ``payload`` that a non-literal match (LIKE, trimming, OR) could catch."""
    return (payload + "x", "x" + payload, " " + payload, "%", "*")


def _mem(engine: Engine, tenant: str | None = None, **kwargs: Any) -> Any:
    return engine.tenant(anchor_for(SPEC, tenant or new_tenant("inj")), **kwargs)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_tenant_id_with_sql_is_set_and_stored_literally(
    engine: Engine, intact: Callable[[], None], payload: str,
) -> None:
    tenant = payload + new_tenant("")
    with _mem(engine, tenant) as mem:
        created = mem.observe("cycle", "note of an oddly named tenant")
        conn = mem.connection
        assert conn.execute("SELECT primitives.current_tenant()").fetchone() == (tenant,)
        stored = conn.execute(sql.SQL("SELECT {} FROM {}").format(
            TABLES.tenant, TABLES.memories.ident)).fetchall()
        assert stored == [(tenant,)]
        assert [h.memory.id for h in mem.search("oddly named tenant", tiers=ALL_TIERS)] == [
            created.id]
        assert verify_chain(conn, TABLES, tenant) is None
    with _mem(engine, payload) as mem:  # the payload alone is another tenant
        assert mem.get(created.id) is None
        assert count(mem.connection, TABLES.memories) == 0
    intact()


@pytest.mark.parametrize("payload", PAYLOADS)
def test_namespace_label_with_sql_is_stored_literally(
    engine: Engine, intact: Callable[[], None], payload: str,
) -> None:
    with _mem(engine) as mem:
        created = mem.observe("workspace", "namespaced note", typology="procedural",
                              key="k", namespace=[payload, "plain"])
        again = mem.observe("workspace", "namespaced note", typology="procedural",
                            key="k", namespace=[payload, "plain"])
        other = mem.observe("workspace", "namespaced note", typology="procedural",
                            key="k", namespace=["plain"])
        stored = mem.get(created.id)
    assert stored is not None and stored.namespace == (payload, "plain")
    assert again.id == created.id and other.id != created.id
    intact()


@pytest.mark.parametrize("payload", PAYLOADS)
def test_key_with_sql_is_stored_and_matched_literally(
    engine: Engine, intact: Callable[[], None], payload: str,
) -> None:
    with _mem(engine) as mem:
        first = mem.observe("workspace", "first version", typology="procedural", key=payload)
        same = mem.observe("workspace", "first version", typology="procedural", key=payload)
        changed = mem.observe("workspace", "second version", typology="procedural",
                              key=payload)
        neighbour = mem.observe("workspace", "first version", typology="procedural",
                                key=payload + "x")
        old = mem.get(first.id)
        kinds = [e["kind"] for e in mem.history(changed.id)]
    assert first.key == payload and same.id == first.id
    assert old is not None and old.superseded_at is not None
    assert changed.key == payload and neighbour.id not in (first.id, changed.id)
    assert kinds == ["observed", "superseded", "observed", "conflict_resolved"]
    intact()


@pytest.mark.parametrize("payload", PAYLOADS)
def test_tags_with_sql_are_stored_literally(
    engine: Engine, intact: Callable[[], None], payload: str,
) -> None:
    with _mem(engine) as mem:
        created = mem.observe("cycle", "tagged note", tags=[payload, "plain"])
        stored = mem.get(created.id)
    assert stored is not None and stored.tags == (payload, "plain")
    intact()


@pytest.mark.parametrize("payload", PAYLOADS)
def test_envelope_keys_and_values_with_sql_are_stored_and_matched_literally(
    engine: Engine, intact: Callable[[], None], payload: str,
) -> None:
    envelope = {payload: payload, "nested": {payload: [payload]}}
    with _mem(engine) as mem:
        created = mem.observe("cycle", "enveloped note", envelope=envelope)
        mem.observe("cycle", "near miss", envelope={payload: payload + "x"})
        mem.observe("cycle", "other key", envelope={payload + "x": payload})
        stored = mem.get(created.id)
        hits = mem.search("", envelope={payload: payload}, tiers=ALL_TIERS)
        nested = mem.search("", envelope={"nested": {payload: [payload]}}, tiers=ALL_TIERS)
    assert stored is not None and stored.envelope == envelope
    assert [h.memory.id for h in hits] == [created.id]
    assert [h.memory.id for h in nested] == [created.id]
    intact()


@pytest.mark.parametrize("payload", PAYLOADS)
def test_search_query_with_sql_is_inert(
    engine: Engine, intact: Callable[[], None], payload: str,
) -> None:
    victim = new_tenant("victim")
    with _mem(engine, victim) as mem:
        mem.observe("cycle", f"victim note {payload}", envelope={"k": payload})
    with _mem(engine) as mem:
        own = mem.observe("cycle", f"own note {payload}", envelope={"k": payload})
        for hits in (mem.search(payload, tiers=ALL_TIERS),
                     mem.search(payload, envelope={"k": payload}, tiers=ALL_TIERS),
                     mem.search("", envelope={"k": payload}, tiers=ALL_TIERS)):
            assert {h.memory.id for h in hits} <= {own.id}
        assert [h.memory.id for h in mem.search("", envelope={"k": payload},
                                                tiers=ALL_TIERS)] == [own.id]
    intact()


@pytest.mark.parametrize("payload", PAYLOADS)
def test_scope_id_with_sql_is_stored_and_ended_literally(
    engine: Engine, intact: Callable[[], None], payload: str,
) -> None:
    with _mem(engine) as mem:
        ended = mem.observe("cycle", "in the odd scope", scope_id=payload)
        kept = [mem.observe("cycle", "in a neighbouring scope", scope_id=s).id
                for s in _neighbours(payload)]
        assert mem.end_scope("cycle", payload, into_scope=payload) == (1, 0)
        assert mem.get(ended.id) is None
        assert all(mem.get(i) is not None for i in kept)
        closed = mem.connection.execute(sql.SQL(
            "SELECT scope_id FROM {} WHERE closed_at IS NOT NULL").format(
            TABLES.scopes.ident)).fetchall()
    assert closed == [(payload,)]
    intact()


@pytest.mark.parametrize("payload", PAYLOADS)
def test_action_id_and_kind_with_sql_are_stored_literally(
    engine: Engine, intact: Callable[[], None], payload: str,
) -> None:
    with _mem(engine) as mem:
        basis = mem.observe("workspace", "the basis of an action", typology="procedural")
        assert mem.link_action(payload, [basis.id], payload) == 1
        assert mem.link_action(payload, [basis.id], payload) == 0  # same literal key
        rows = mem.connection.execute(sql.SQL(
            "SELECT action_id, link_kind, memory_id FROM {}").format(
            TABLES.audit_action_basis.ident)).fetchall()
    assert rows == [(payload, payload, basis.id)]
    intact()


@pytest.mark.parametrize("payload", PAYLOADS)
def test_erase_subject_with_sql_matches_literally(
    engine: Engine, intact: Callable[[], None], payload: str,
) -> None:
    with _mem(engine) as mem:
        target = mem.observe("workspace", "about the odd subject", typology="procedural",
                             envelope={"subject": payload})
        others = [mem.observe("workspace", "about someone else", typology="procedural",
                              envelope={"subject": s}).id
                  for s in _neighbours(payload)]
        assert mem.erase(payload, approvals=APPROVERS, reason=payload) == 1
        erased = mem.get(target.id)
        untouched = [mem.get(i) for i in others]
        audit = mem.connection.execute(sql.SQL(
            "SELECT memory_id, erasure_reason, residue FROM {}").format(
            TABLES.audit_erasures.ident)).fetchall()
    assert erased is not None and erased.content.startswith("sha256:")
    assert all(m is not None and m.content == "about someone else" for m in untouched)
    # the stored reason masks the subject's name (here the whole reason) and nothing else
    assert audit == [(target.id, mask_subject(payload, payload), False)]
    intact()


@pytest.mark.parametrize("payload", PAYLOADS)
def test_content_value_actor_and_reason_with_sql_are_stored_literally(
    engine: Engine, intact: Callable[[], None], payload: str,
) -> None:
    with _mem(engine, actor=payload) as mem:
        created = mem.observe("cycle", payload + " as content", value={payload: payload},
                              source=payload)
        mem.invalidate(created.id, reason=payload)
        stored = mem.get(created.id)
        events = mem.history(created.id)
    assert stored is not None and stored.content == payload + " as content"
    assert stored.value == {payload: payload}
    assert [(e["kind"], e["actor"]) for e in events] == [("observed", payload),
                                                         ("invalidated", payload)]
    # the journal keeps the reason's hash, never its text (erasure could not remove it)
    assert events[1]["payload"]["reason_sha256"] == content_hash(payload)
    intact()


# -- arbitrary strings --------------------------------------------------------------------------

_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                min_size=1, max_size=40)
_NON_BLANK = _TEXT.filter(lambda s: s.strip() != "")


@settings(max_examples=25, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tenant=_NON_BLANK, key=_TEXT, label=_TEXT, tag=_TEXT, envelope_key=_TEXT,
       envelope_value=_TEXT, scope_id=_TEXT, content=_NON_BLANK)
def test_arbitrary_strings_round_trip_literally_in_every_field(
    engine: Engine, intact: Callable[[], None], tenant: str, key: str, label: str, tag: str,
    envelope_key: str, envelope_value: str, scope_id: str, content: str,
) -> None:
    tenant = tenant + new_tenant("")
    envelope = {envelope_key: envelope_value}
    with _mem(engine, tenant) as mem:
        keyed = mem.observe("workspace", content, typology="procedural", key=key,
                            namespace=[label], tags=[tag], envelope=envelope)
        scoped = mem.observe("cycle", content, scope_id=scope_id)
        stored = mem.get(keyed.id)
        assert mem.observe("workspace", content, typology="procedural", key=key,
                           namespace=[label], tags=[tag], envelope=envelope).id == keyed.id
        assert [h.memory.id for h in mem.search("", envelope=envelope, tiers=ALL_TIERS)] == [
            keyed.id]
        assert mem.end_scope("cycle", scope_id, into_scope=scope_id) == (1, 0)
        assert mem.get(scoped.id) is None
        assert mem.connection.execute("SELECT primitives.current_tenant()").fetchone() == (
            tenant,)
    assert stored is not None
    assert (stored.content, stored.key, stored.namespace, stored.tags, stored.envelope) == (
        content, key, (label,), (tag,), envelope)
    intact()


# -- names that become SQL identifiers ----------------------------------------------------------

_BASE = yaml.safe_load((ROOT / "agents" / "spectral_agent.yaml").read_text(encoding="utf-8"))

BAD_NAMES = [
    pytest.param("x'); DROP TABLE platform.spectral_memories; --", id="drop-table"),
    pytest.param('spectral"; DROP SCHEMA platform CASCADE; --', id="double-quote"),
    pytest.param("spectral; SELECT 1", id="semicolon"),
    pytest.param("spec tral", id="space"),
    pytest.param("spec-tral", id="dash"),
    pytest.param("spectral.memories", id="dot"),
    pytest.param("Spectral", id="upper-case"),
    pytest.param("spëctral", id="non-ascii"),
    pytest.param("1spectral", id="leading-digit"),
    pytest.param("spectral\n", id="trailing-newline"),
    pytest.param("s" * 49, id="too-long"),
    pytest.param("", id="empty"),
]


def _replace_value(data: Any, old: str, new: str) -> Any:
    if isinstance(data, dict):
        return {k: _replace_value(v, old, new) for k, v in data.items()}
    if isinstance(data, list):
        return [_replace_value(v, old, new) for v in data]
    return new if data == old else data


def _with_name(field: str, name: str) -> dict[str, Any]:
    data = copy.deepcopy(_BASE)
    if field == "agent":
        data["agent"] = name
    elif field == "prefix":
        data["persistence"]["store"]["prefix"] = name
    elif field == "schema":
        data["persistence"]["store"]["schema"] = name
    elif field == "checkpointer_schema":
        data["persistence"]["checkpointer"]["schema"] = name
    elif field == "anchor_key":
        data = _replace_value(data, "workspace_id", name)
    elif field == "tier":
        data["tiers"][0]["name"] = name
        data["typology"] = {name if k == "cycle" else k: v for k, v in data["typology"].items()}
        data["retrieval"]["scope"] = {name if k == "cycle" else k: v
                                      for k, v in data["retrieval"]["scope"].items()}
    elif field == "text_search_config":
        data["retrieval"]["text_search_config"] = name
    else:
        raise AssertionError(field)
    return data


NAME_FIELDS = ["agent", "prefix", "schema", "checkpointer_schema", "anchor_key", "tier",
               "text_search_config"]


@pytest.mark.parametrize("field", NAME_FIELDS)
def test_spec_with_well_formed_name_loads(field: str) -> None:
    """Control for the refusals below: the mutated spec is otherwise valid."""
    text = yaml.safe_dump(_with_name(field, "spectral_two"), allow_unicode=True)
    load_spec_text(text, policies_dir=ROOT / "policies")


@pytest.mark.parametrize("field", NAME_FIELDS)
@pytest.mark.parametrize("name", BAD_NAMES)
def test_spec_name_with_sql_metacharacters_is_refused_by_the_loader(
    field: str, name: str,
) -> None:
    text = yaml.safe_dump(_with_name(field, name), allow_unicode=True)
    with pytest.raises(SpecError, match="should match pattern"):
        load_spec_text(text, policies_dir=ROOT / "policies")
