"""PII before persistent writes (seed 001 §5), as the app role: each kind redacted, blocked,
or kept raw with a logged consent; a non-admin never receives a raw value; the privacy
admin's raw read is journalled; erasure removes the raw copy; ``audit_redactions``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives._project import migrate
from primitives.compile import agent_tables
from primitives.db import privacy_admin_dsn
from primitives.engine import Engine
from primitives.errors import PolicyViolation, PrivacyBlocked
from primitives.spec import AgentSpec, load_spec
from tests.conftest import PostgresHandle

pytestmark = pytest.mark.filterwarnings("ignore:.*semantic signal needs an embedder")

SAMPLES = {
    "email": "write to jane.doe@example.com about it",
    "phone": "she asked us to call +1 415-555-0132 after lunch",
    "credit_card": "paid with card 4111 1111 1111 1111 yesterday",
    "iban": "wire it to IBAN DE89370400440532013000 by Friday",
    "ssn": "his ssn is 536-22-8117 on the form",
    "ip_address": "the login came from 192.168.1.20 twice",
    "us_itin": "the ITIN 912-78-1234 was filed",
    "passport": "my passport number is 912803456 for the booking",
    "national_id": "NHS number 943 476 5919 is on the letter",
    "driver_license": "driver license number D1234567 expires soon",
    "crypto_wallet": "send it to 1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa tonight",
    "secret": "the deploy key is AKIAIOSFODNN7EXAMPLE, keep it safe",
}
"""One sentence per kind; the value in it is what must never come back raw."""

VALUES = {
    "email": "jane.doe@example.com", "phone": "415-555-0132",
    "credit_card": "4111 1111 1111 1111", "iban": "DE89370400440532013000",
    "ssn": "536-22-8117", "ip_address": "192.168.1.20", "us_itin": "912-78-1234",
    "passport": "912803456", "national_id": "943 476 5919", "driver_license": "D1234567",
    "crypto_wallet": "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa", "secret": "AKIAIOSFODNN7EXAMPLE",
}

_SPEC = """\
version: 1
agent: {agent}
anchor:
  keys: [user_id]
  required_at_write: [user_id]
typology:
  scratch: [procedural]
  session: [episodic]
  profile: [episodic, semantic]
tiers:
  - name: scratch
    boundary: {{lifecycle: job_end}}
    persistent: false
  - name: session
    boundary: {{lifecycle: session_end}}
    persistent: false
  - name: profile
    boundary: {{scope_change: user_id}}
    persistent: true
persistence:
  store: {{schema: pii_tests, prefix: {agent}}}
retrieval:
  signals: [semantic, lexical, recency]
behavior:
  write_policy:
    semantic:
      mode: explicit
      justification: the test writes facts directly
discipline:
  pii:
    policy: {policy}
    before: [{before}]
"""

_POLICY = """\
version: 1
kind: pii
name: {name}
detectors: [{kinds}]
on_detect: {on_detect}
raw_with_consent: {consent}
admin_raw_reads: {consent}
refusal_message: "PRIVACY_BLOCKED: not stored, it holds personal data."
{actions}
"""


def _spec(tmp_path: Path, pg: PostgresHandle, *, on_detect: str = "redact",
          consent: bool = True, before: str = "persistent_write",
          kinds: tuple[str, ...] = tuple(SAMPLES), actions: str = "") -> AgentSpec:
    agent = f"pii{uuid.uuid4().hex[:8]}"
    (tmp_path / "agents").mkdir(exist_ok=True)
    (tmp_path / "policies").mkdir(exist_ok=True)
    (tmp_path / "policies" / f"{agent}.yaml").write_text(_POLICY.format(
        name=agent, kinds=", ".join(kinds), on_detect=on_detect,
        consent="true" if consent else "false", actions=actions), encoding="utf-8")
    path = tmp_path / "agents" / f"{agent}.yaml"
    path.write_text(_SPEC.format(agent=agent, policy=agent, before=before), encoding="utf-8")
    spec = load_spec(path)
    migrate([spec], dsn=pg.admin_dsn)
    return spec


@pytest.fixture
def engine(tmp_path: Path, pg: PostgresHandle) -> Iterator[Engine]:
    spec = _spec(tmp_path, pg)
    with Engine.connect(spec, pg.app_dsn, max_connections=2) as engine:
        yield engine


def _raw_rows(admin: psycopg.Connection[Any], spec: AgentSpec) -> list[tuple[Any, ...]]:
    tables = agent_tables(spec)
    return admin.execute(sql.SQL("SELECT memory_id, content FROM {}").format(
        tables.pii_raw.ident)).fetchall() if tables.pii_raw else []


def _everything_readable(mem: Any, memory_id: uuid.UUID) -> str:
    """All a non-admin session can read about the row: the row, its search hit, its events."""
    row = mem.get(memory_id)
    hits = mem.search("the", limit=50)
    tables = mem.ctx.tables
    stored = mem.connection.execute(sql.SQL("SELECT m::text FROM {} AS m WHERE id = %s").format(
        tables.memories.ident), (memory_id,)).fetchall()
    events = mem.connection.execute(sql.SQL("SELECT payload::text FROM {} WHERE memory_id = %s"
                                            ).format(tables.events.ident),
                                    (memory_id,)).fetchall()
    return " ".join([row.content, str(row.value), str(row.envelope), stored[0][0],
                     *(h.memory.content for h in hits), *(e[0] for e in events)])


def _provenance(mem: Any, memory_id: uuid.UUID) -> Any:
    return mem.connection.execute(sql.SQL("SELECT provenance FROM {} WHERE id = %s").format(
        mem.ctx.tables.memories.ident), (memory_id,)).fetchone()[0]


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_each_kind_is_redacted_and_no_non_admin_read_returns_the_value(
        engine: Engine, kind: str) -> None:
    tenant = f"u-{uuid.uuid4().hex[:8]}"
    with engine.tenant({"user_id": tenant}) as mem:
        written = mem.observe("profile", SAMPLES[kind], typology="episodic",
                              envelope={"note": SAMPLES[kind]})
        assert VALUES[kind] not in written.content
        assert f"[{kind.replace('_', ' ')} redacted]" in written.content
        readable = _everything_readable(mem, written.id)
        events = mem.connection.execute(sql.SQL(
            "SELECT kind, payload FROM {} WHERE memory_id = %s ORDER BY seq").format(
            mem.ctx.tables.events.ident), (written.id,)).fetchall()
    assert VALUES[kind] not in readable
    redacted = [payload for k, payload in events if k == "pii_redacted"]
    assert len(redacted) == 1
    assert redacted[0]["kinds"] == {kind: 2}
    assert redacted[0]["fields"] == ["content", "envelope"]
    assert redacted[0]["action"] == "redacted"


def test_engine_observe_scans_a_redacted_write_once(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """The one-message path checks the fields, finds personal data and hands its checked
    fields to the general path, which writes them without scanning again."""
    from primitives.engine import _core, _observe_message

    scans: list[str] = []
    original = _core.checked_write

    def counted(*args: Any, **kwargs: Any) -> Any:
        scans.append(args[2])
        return original(*args, **kwargs)

    monkeypatch.setattr(_core, "checked_write", counted)
    monkeypatch.setattr(_observe_message, "checked_write", counted)
    tenant = {"user_id": f"u-{uuid.uuid4().hex[:8]}"}
    written = engine.observe(tenant, "profile", SAMPLES["email"], typology="episodic")
    assert scans == [SAMPLES["email"]]
    assert VALUES["email"] not in written.content
    with engine.tenant(tenant) as mem:
        kinds = mem.connection.execute(sql.SQL(
            "SELECT kind FROM {} WHERE memory_id = %s ORDER BY seq").format(
            mem.ctx.tables.events.ident), (written.id,)).fetchall()
    assert kinds == [("observed",), ("pii_redacted",)]


def test_the_hash_of_each_value_is_kept_in_provenance(engine: Engine) -> None:
    import hashlib
    with engine.tenant({"user_id": f"u-{uuid.uuid4().hex[:8]}"}) as mem:
        written = mem.observe("profile", SAMPLES["email"], typology="episodic")
        provenance = _provenance(mem, written.id)
    (entry,) = provenance["pii"]
    assert entry["kind"] == "email" and entry["field"] == "content"
    assert entry["sha256"] == hashlib.sha256(VALUES["email"].encode()).hexdigest()


def test_text_without_personal_data_is_written_as_given_without_an_event(
        engine: Engine) -> None:
    text = "lowering the temperature on 2023-05-08 by 12 degrees removed 4 of 5 faults"
    with engine.tenant({"user_id": f"u-{uuid.uuid4().hex[:8]}"}) as mem:
        written = mem.observe("profile", text, typology="episodic")
        kinds = mem.connection.execute(sql.SQL("SELECT kind FROM {} WHERE memory_id = %s").format(
            mem.ctx.tables.events.ident), (written.id,)).fetchall()
    assert written.content == text
    assert kinds == [("observed",)]


def test_a_value_nested_in_the_value_object_is_redacted(engine: Engine) -> None:
    with engine.tenant({"user_id": f"u-{uuid.uuid4().hex[:8]}"}) as mem:
        written = mem.observe("profile", "contact details", typology="episodic",
                              value={"contacts": [{"mail": "jane.doe@example.com"}]})
        row = mem.get(written.id)
        provenance = _provenance(mem, written.id)
    assert row.value == {"contacts": [{"mail": "[email redacted]"}]}
    assert provenance["pii"][0]["field"] == "value.contacts[0].mail"


def test_a_label_holding_personal_data_is_refused(engine: Engine) -> None:
    with engine.tenant({"user_id": f"u-{uuid.uuid4().hex[:8]}"}) as mem:
        with pytest.raises(PrivacyBlocked) as err:
            mem.observe("profile", "likes tea", typology="episodic",
                        key="jane.doe@example.com")
        assert err.value.context["field"] == "key"
        assert list(mem.search("tea")) == []


def test_a_transient_tier_whose_rows_promotion_carries_into_a_persistent_one_is_scanned(
        tmp_path: Path, pg: PostgresHandle) -> None:
    # session.episodic compounds into profile.episodic (the default promotion): what a
    # set-based promotion will carry into persistent memory is scanned when it is written
    spec = _spec(tmp_path, pg, before="persistent_write")
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine, \
            engine.tenant({"user_id": "u1"}) as mem:
        written = mem.observe("session", SAMPLES["email"], scope_id="s1")
        ended = mem.end_scope("session", "s1")
        promoted = [h.memory for h in mem.search("write", limit=10)]
    assert VALUES["email"] not in written.content
    assert ended.promoted == 1 and promoted
    assert all(VALUES["email"] not in m.content for m in promoted)


@pytest.mark.parametrize(("before", "scanned"), [
    ("persistent_write", {"session", "profile"}),
    ("promotion", {"session", "profile"}),
    ("any_write", {"scratch", "session", "profile"}),
])
def test_the_checkpoints_decide_which_tiers_are_scanned(
        tmp_path: Path, pg: PostgresHandle, before: str, scanned: set[str]) -> None:
    # scratch holds procedural memory, which no promotion carries anywhere
    spec = _spec(tmp_path, pg, before=before)
    found = set()
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine, \
            engine.tenant({"user_id": "u1"}) as mem:
        for tier, typology in (("scratch", None), ("session", None), ("profile", "episodic")):
            written = mem.observe(tier, SAMPLES["email"], typology=typology, scope_id="s1")
            if VALUES["email"] not in written.content:
                found.add(tier)
    assert found == scanned


@pytest.mark.parametrize("kind", ["credit_card", "secret", "ssn"])
def test_a_blocked_kind_refuses_the_write_and_writes_nothing(
        tmp_path: Path, pg: PostgresHandle, admin_conn: psycopg.Connection[Any],
        kind: str) -> None:
    spec = _spec(tmp_path, pg, actions=f"actions: {{{kind}: block}}")
    tables = agent_tables(spec)
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine:
        with pytest.raises(PrivacyBlocked) as err:
            engine.observe({"user_id": "u1"}, "profile", SAMPLES[kind], typology="episodic")
        # another kind of the same policy is still redacted, not blocked
        kept = engine.observe({"user_id": "u1"}, "profile", SAMPLES["email"],
                              typology="episodic")
    envelope = err.value.envelope()
    assert envelope["error"] == "PRIVACY_BLOCKED"
    assert envelope["message"].startswith("PRIVACY_BLOCKED: not stored")
    assert envelope["kinds"] == [kind]
    rows = admin_conn.execute(sql.SQL("SELECT id FROM {}").format(
        tables.memories.ident)).fetchall()
    assert rows == [(kept.id,)]


def test_on_detect_block_refuses_every_kind(tmp_path: Path, pg: PostgresHandle) -> None:
    spec = _spec(tmp_path, pg, on_detect="block", consent=False)
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine:
        for kind in ("email", "iban"):
            with pytest.raises(PrivacyBlocked):
                engine.observe({"user_id": "u1"}, "profile", SAMPLES[kind],
                               typology="episodic")


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_with_consent_the_raw_value_is_kept_for_the_privacy_admin_only(
        tmp_path: Path, pg: PostgresHandle, admin_conn: psycopg.Connection[Any],
        kind: str) -> None:
    spec = _spec(tmp_path, pg, kinds=(kind,))
    tenant = f"u-{uuid.uuid4().hex[:8]}"
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine, \
            engine.tenant({"user_id": tenant}) as mem:
        consent = mem.record_consent(kinds=[kind], reason="the user asked to keep it")
        written = mem.observe("profile", SAMPLES[kind], typology="episodic", consent=consent)
        readable = _everything_readable(mem, written.id)
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine, \
            pytest.raises(PolicyViolation, match="permission denied for function"), \
            engine.tenant({"user_id": tenant}) as mem:
        mem.read_raw(written.id, reason="curious")
    assert VALUES[kind] not in readable
    with Engine.connect(spec, privacy_admin_dsn(pg.admin_dsn), max_connections=1) as admin, \
            admin.tenant({"user_id": tenant}, actor="dpo") as mem:
        raw = mem.read_raw(written.id, reason="subject access request")
        other = mem.read_raw(uuid.uuid4(), reason="a row with nothing kept")
    assert raw is not None and raw["content"] == SAMPLES[kind]
    assert raw["consent_event"] == consent
    assert other is None
    tables = agent_tables(spec)
    journal = admin_conn.execute(sql.SQL(
        "SELECT kind, actor, payload FROM {} WHERE {} = %s ORDER BY seq").format(
        tables.events.ident, tables.tenant), (tenant,)).fetchall()
    kinds = [k for k, _, _ in journal]
    assert kinds == ["pii_consent", "observed", "pii_redacted", "pii_raw_read", "pii_raw_read"]
    assert journal[2][2]["action"] == "kept_with_consent"
    assert journal[2][2]["consent_event"] == str(consent)
    assert (journal[3][1], journal[3][2]["found"]) == ("dpo", True)
    assert journal[4][2]["found"] is False
    assert all(VALUES[kind] not in str(p) for _, _, p in journal)


def test_consent_must_be_a_consent_event_of_this_tenant(
        engine: Engine) -> None:
    with engine.tenant({"user_id": "u-a"}) as mem:
        theirs = mem.record_consent(reason="a")
        observed = mem.observe("profile", "no pii here", typology="episodic")
    with engine.tenant({"user_id": "u-b"}) as mem:
        with pytest.raises(PolicyViolation, match="no consent event"):
            mem.observe("profile", SAMPLES["email"], typology="episodic", consent=theirs)
        with pytest.raises(PolicyViolation, match="no consent event"):
            mem.observe("profile", SAMPLES["email"], typology="episodic",
                        consent=uuid.uuid4())
        assert list(mem.search("write")) == []
    assert observed.content == "no pii here"


def test_consent_is_refused_where_the_policy_never_keeps_raw_data(
        tmp_path: Path, pg: PostgresHandle) -> None:
    spec = _spec(tmp_path, pg, consent=False)
    assert agent_tables(spec).pii_raw is None
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine, \
            engine.tenant({"user_id": "u1"}) as mem:
        consent = mem.record_consent(reason="asked")
        with pytest.raises(PolicyViolation, match="never keeps raw personal data"):
            mem.observe("profile", SAMPLES["email"], typology="episodic", consent=consent)


def test_the_app_role_cannot_read_the_raw_table(
        tmp_path: Path, pg: PostgresHandle, app_conn: psycopg.Connection[Any]) -> None:
    tables = agent_tables(_spec(tmp_path, pg))
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        app_conn.execute(sql.SQL("SELECT content FROM {}").format(tables.pii_raw.ident))


def test_erasure_deletes_the_raw_copy(tmp_path: Path, pg: PostgresHandle,
                                      admin_conn: psycopg.Connection[Any]) -> None:
    spec = _spec(tmp_path, pg)
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine:
        with engine.tenant({"user_id": "u1"}) as mem:
            consent = mem.record_consent(reason="keep")
            written = mem.observe("profile", SAMPLES["email"], typology="episodic",
                                  consent=consent)
        assert len(_raw_rows(admin_conn, spec)) == 1
        with engine.tenant({"user_id": "u1"}) as mem:
            assert mem.erase("jane", approvals=["admin"], reason="right to be forgotten",
                             memory_ids=[written.id]) == 1
    assert _raw_rows(admin_conn, spec) == []


def test_the_redactions_view_lists_what_was_redacted_for_the_auditor(
        engine: Engine, pg: PostgresHandle) -> None:
    tenant = f"u-{uuid.uuid4().hex[:8]}"
    with engine.tenant({"user_id": tenant}) as mem:
        written = mem.observe("profile", SAMPLES["iban"] + " " + SAMPLES["email"],
                              typology="episodic")
    from primitives.db import auditor_dsn
    with psycopg.connect(auditor_dsn(pg.admin_dsn)) as auditor:
        rows = auditor.execute(sql.SQL(
            "SELECT kind, memory_id, policy, action, kinds, fields FROM {} WHERE {} = %s"
        ).format(engine.tables.audit_redactions.ident, engine.tables.tenant),
            (tenant,)).fetchall()
    assert rows == [("pii_redacted", written.id, engine.spec.discipline.pii.policy,
                     "redacted", {"email": 1, "iban": 1}, ["content"])]


def test_observe_many_embeds_the_redacted_text(tmp_path: Path, pg: PostgresHandle) -> None:
    from primitives.embeddings import HashingEmbedder
    spec = _spec(tmp_path, pg)
    seen: list[str] = []

    class Recording(HashingEmbedder):  # type: ignore[misc]
        def embed_documents(self, texts: Any) -> list[list[float]]:
            seen.extend(texts)
            return super().embed_documents(texts)  # type: ignore[no-any-return]

    embedder = Recording(dims=spec.retrieval.embedding.dims)
    with Engine.connect(spec, pg.app_dsn, max_connections=1, embedder=embedder) as engine, \
            engine.tenant({"user_id": "u1"}) as mem:
        mem.observe_many([{"tier": "profile", "typology": "episodic",
                           "content": SAMPLES["email"]}])
        mem.observe("profile", SAMPLES["phone"], typology="episodic")
    assert seen and all(VALUES["email"] not in t and VALUES["phone"] not in t for t in seen)


def test_supersede_and_the_store_put_are_scanned_too(engine: Engine) -> None:
    from primitives.langgraph import MemoryStore
    with engine.tenant({"user_id": "u-s"}) as mem:
        first = mem.observe("profile", "no personal data yet", typology="episodic")
        second = mem.supersede(first.id, SAMPLES["iban"])
    assert VALUES["iban"] not in second.content
    store = MemoryStore(engine)
    store.put(("u-s", "profile", "episodic"), "contact", {"text": SAMPLES["email"]})
    item = store.get(("u-s", "profile", "episodic"), "contact")
    assert item is not None and VALUES["email"] not in str(item.value)


def test_a_transient_row_removed_at_its_scopes_end_takes_its_raw_copy(
        tmp_path: Path, pg: PostgresHandle, admin_conn: psycopg.Connection[Any]) -> None:
    spec = _spec(tmp_path, pg, before="any_write")
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine:
        with engine.tenant({"user_id": "u1"}) as mem:
            consent = mem.record_consent(reason="keep")
            mem.observe("scratch", SAMPLES["email"], scope_id="j1", consent=consent)
        assert len(_raw_rows(admin_conn, spec)) == 1
        with engine.tenant({"user_id": "u1"}) as mem:
            ended = mem.end_scope("scratch", "j1")
    assert ended.removed == 1
    assert _raw_rows(admin_conn, spec) == []


def test_the_privacy_admin_reads_only_the_bound_tenants_raw_rows(
        tmp_path: Path, pg: PostgresHandle) -> None:
    spec = _spec(tmp_path, pg)
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine, \
            engine.tenant({"user_id": "u-a"}) as mem:
        consent = mem.record_consent(reason="keep")
        written = mem.observe("profile", SAMPLES["email"], typology="episodic",
                              consent=consent)
    with Engine.connect(spec, privacy_admin_dsn(pg.admin_dsn), max_connections=1) as admin:
        with admin.tenant({"user_id": "u-b"}) as mem:
            assert mem.read_raw(written.id, reason="wrong tenant") is None
        with admin.tenant({"user_id": "u-a"}) as mem:
            raw = mem.read_raw(written.id, reason="right tenant")
    assert raw is not None and raw["content"] == SAMPLES["email"]


def test_a_policy_names_the_phone_regions_its_detector_knows(
        tmp_path: Path, pg: PostgresHandle) -> None:
    spec = _spec(tmp_path, pg, kinds=("phone",), actions="phone_regions: [US]")
    text = "reach the Berlin office on 030 12345678 or the US desk on +1 415-555-0132"
    with Engine.connect(spec, pg.app_dsn, max_connections=1) as engine:
        written = engine.observe({"user_id": "u1"}, "profile", text, typology="episodic")
    assert "030 12345678" in written.content  # not a US number
    assert "415-555-0132" not in written.content and "[phone redacted]" in written.content
