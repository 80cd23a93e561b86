"""The compiled plan without a database: tenancy rules, limits, capabilities, quoting, names."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from psycopg import sql

import primitives.compile as compile_pkg
from primitives.compile import (
    RETIRED_MEMORY_INDEXES,
    Capabilities,
    Plan,
    agent_tables,
    compile_plan,
    table_definitions,
)
from primitives.errors import SpecError, StorageError
from primitives.spec import AgentSpec, load_spec, load_spec_text

ROOT = Path(__file__).resolve().parents[2]
SPECTRAL = ROOT / "agents" / "spectral_agent.yaml"

# Legal names that are SQL reserved words: every identifier path must quote them. Also
# exercises the optional tables (graph, governed writes) and a trigram non-mirror defense.
ODD_SPEC = """\
version: 1
agent: odd
anchor:
  keys: [user, order]
  required_at_write: [user]
  nullable_for_cross_scope: [order]
typology:
  select: [episodic]
  group: [semantic, opinion]
tiers:
  - {name: select, boundary: {lifecycle: session_end}}
  - {name: group, boundary: {scope_change: user}, persistent: true}
persistence:
  checkpointer: {enabled: false}
  store:
    schema: table
    prefix: limit
    limits: {content_chars: 1234, value_bytes: 4321, envelope_bytes: 999}
retrieval:
  signals: [lexical, graph, semantic]
  embedding: {dims: 8}
  text_search_config: simple
graph:
  edges: [temporal, supersedes]
  entity_types: [person, tool]
behavior:
  write_policy:
    semantic: {mode: governed, governance: {approvals_required: 1}, justification: facts need approval}
discipline:
  non_mirror:
    - {category: rule_text, defense: trigram_trigger, canonical_source: table.rules.body}
"""


def odd_spec(text: str = ODD_SPEC) -> AgentSpec:
    return load_spec_text(text, policies={})


@pytest.fixture(scope="module")
def spectral() -> AgentSpec:
    return load_spec(SPECTRAL)


@pytest.fixture(scope="module", params=["spectral", "odd"])
def plan(request: pytest.FixtureRequest, spectral: AgentSpec) -> Plan:
    spec = spectral if request.param == "spectral" else odd_spec()
    return compile_plan(spec)


def rendered(plan: Plan) -> list[str]:
    return [step.statement.as_string(None) for step in plan.steps]


def test_public_api_is_pinned() -> None:
    assert sorted(compile_pkg.__all__) == sorted([
        "ACTIVE_STATE_COLUMNS", "CURRENT_KEY_COLUMNS", "DEFAULT_CAPABILITIES",
        "ERASED_CONTENT_PATTERN", "ERASED_EVENT_KIND", "GENERATED_MEMORY_COLUMNS",
        "MIN_SERVER_VERSION", "OBSERVED_EVENT_KIND", "REQUEST_STATUSES", "RETIRED_MEMORY_INDEXES", "RETENTION_STATES", "SANITIZED_EVENT_KIND",
        "VIEW_COLUMNS", "Capabilities", "Column", "Constraint", "Index", "Plan", "Step",
        "Table", "TableDef", "Tables", "Trigger", "active_predicate", "agent_tables",
        "compile_citus", "compile_plan", "current_tenant_expr", "require_server_version", "table_definitions",
        "tenant_policy_expression",
    ])
    for name in compile_pkg.__all__:
        assert hasattr(compile_pkg, name)


def test_every_table_has_rls_enabled_forced_and_one_tenant_policy_with_identical_check(
    plan: Plan,
) -> None:
    statements = rendered(plan)
    tenant = re.escape(f'"{plan.tables.tenant_column}"')
    for table in plan.tables.tables:
        ident = re.escape(table.ident.as_string(None))
        assert f"ALTER TABLE {table.ident.as_string(None)} ENABLE ROW LEVEL SECURITY" in statements
        assert f"ALTER TABLE {table.ident.as_string(None)} FORCE ROW LEVEL SECURITY" in statements
        policies = [s for s in statements if re.match(rf"CREATE POLICY \S+ ON {ident} ", s)]
        tenant_policies = [s for s in policies if " FOR ALL TO \"primitives_app\"" in s]
        assert len(tenant_policies) == 1, table
        match = re.search(r"USING (\(.*\)) WITH CHECK (\(.*\))$", tenant_policies[0])
        assert match is not None
        using, with_check = match.groups()
        assert using == with_check
        assert re.fullmatch(
            rf"\({tenant} = \(SELECT nullif\(current_setting\('primitives\.tenant', true\), ''\)\)\)",
            using,
        )
        auditor = [s for s in policies if "FOR SELECT TO \"primitives_auditor\" USING (true)" in s]
        assert len(auditor) == 1, table


def test_every_primary_key_and_unique_index_leads_with_the_tenant_column(plan: Plan) -> None:
    tenant = plan.tables.tenant_column
    for definition in plan.definitions:
        for constraint in definition.constraints:
            if constraint.kind in ("primary_key", "unique", "foreign_key"):
                assert constraint.columns[0] == tenant, constraint.name
        for index in definition.indexes:
            if index.unique or index.method == "btree":
                assert index.leading == tenant, index.name
    # the same, read back from the SQL text
    text = plan.render()
    keys = re.findall(r"(?:PRIMARY KEY|UNIQUE|FOREIGN KEY) \(\"(\w+)\"", text)
    uniques = re.findall(r"CREATE UNIQUE INDEX .*? USING \w+ \(\"(\w+)\"", text)
    assert keys and uniques
    assert set(keys) == set(uniques) == {tenant}


def test_gin_indexes_lead_with_the_tenant_only_with_btree_gin(spectral: AgentSpec) -> None:
    with_ext = compile_plan(spectral).render()
    without = compile_plan(spectral, capabilities=Capabilities(btree_gin=False)).render()
    assert 'USING gin ("workspace_id", tsv primitives.tsvector_match_ops)' in with_ext
    assert "USING gin (tsv primitives.tsvector_match_ops)" in without
    assert 'USING gin ("workspace_id"' not in without


def test_the_fulltext_index_uses_the_leakproof_match_where_the_database_has_it(
        spectral: AgentSpec) -> None:
    plain = compile_plan(spectral, capabilities=Capabilities(text_match=False)).render()
    assert 'USING gin ("workspace_id", "tsv")' in plain
    assert "tsvector_match_ops" not in plain and "_tsv_idx\"\n" not in plain
    assert 'DROP INDEX IF EXISTS "platform"."spectral_memories_tsv_idx"' not in plain
    matched = compile_plan(spectral).render()
    drop = matched.index('DROP INDEX IF EXISTS "platform"."spectral_memories_tsv_idx"')
    create = matched.index('"spectral_memories_tsv_match_idx" ON "platform"."spectral_memories" '
                           'USING gin ("workspace_id", tsv primitives.tsvector_match_ops)')
    assert drop < create  # an index an earlier plan built goes before its replacement


def test_envelope_and_tags_get_no_index_and_an_earlier_plans_are_dropped(
        spectral: AgentSpec) -> None:
    plan = compile_plan(spectral)
    memories = next(d for d in table_definitions(spectral) if d.table.name.endswith("memories"))
    names = {index.name for index in memories.indexes}
    retired = {f"spectral_{n}" for n in RETIRED_MEMORY_INDEXES}
    assert retired == {"spectral_memories_envelope_idx", "spectral_memories_tags_idx"}
    assert not names & retired
    assert all("envelope" not in i.elements[-1].as_string(None) for i in memories.indexes)
    text = plan.render()
    for name in sorted(retired):
        assert f'DROP INDEX IF EXISTS "platform"."{name}";' in text
        assert f'INDEX IF NOT EXISTS "{name}"' not in text
    labels = [step.title for step in plan.steps]
    drops = [i for i, label in enumerate(labels) if "drop index spectral_memories_" in label
             and "tsv_idx" not in label]
    first_create = next(i for i, label in enumerate(labels)
                        if label.startswith("platform.spectral_memories: index "))
    assert len(drops) == 2 and max(drops) < first_create


def test_no_vector_types_without_pgvector(plan: Plan) -> None:
    spec_plan = compile_plan(
        odd_spec() if plan.agent == "odd" else load_spec(SPECTRAL),
        capabilities=Capabilities(vector=False),
    )
    text = spec_plan.render()
    assert "halfvec" not in text
    assert "hnsw" not in text
    assert not re.search(r"\bvector\b", text)
    assert '"embedding"' not in text
    assert "halfvec(" in plan.render()  # and they are there with it


def test_limits_from_the_spec_appear_in_checks() -> None:
    text = compile_plan(odd_spec()).render()
    # the memories table's bounds, in its bounds function (each as its own test too)
    for bound in ("(char_length(content) <= 1234)", '(octet_length("value"::text) <= 4321)',
                  '(octet_length("envelope"::text) <= 999)'):
        assert f"IF {bound} IS FALSE THEN" in text
        assert f"        AND {bound}" in text or f"IF ({bound}" in text
    assert "halfvec(8)" in text
    assert "to_tsvector('simple'::regconfig" in text


def test_checks_are_replaced_in_one_statement_so_they_follow_the_spec(spectral: AgentSpec) -> None:
    statements = rendered(compile_plan(spectral))
    create = next(s for s in statements if s.startswith('CREATE TABLE IF NOT EXISTS "platform"'
                                                         '."spectral_memories"'))
    assert "CHECK" not in create
    replace = next(s for s in statements if s.startswith('ALTER TABLE "platform".'
                                                          '"spectral_memories"\n'))
    # the columns added since the table shipped, the bounds function, its grants (app,
    # maintainer), then the one statement that replaces the checks
    added, function, revoke, grant = statements[statements.index(create) + 1:][:4]
    assert added.startswith('ALTER TABLE "platform"."spectral_memories" ADD COLUMN IF NOT EXISTS')
    assert function.startswith('CREATE OR REPLACE FUNCTION "platform"."spectral_memories_bounds"(')
    assert revoke.startswith("REVOKE ALL ON FUNCTION") and grant.startswith("GRANT EXECUTE")
    assert statements.index(replace) == statements.index(create) + 6
    drops = re.findall(r'DROP CONSTRAINT IF EXISTS "(\w+)"', replace)
    adds = re.findall(r'ADD CONSTRAINT "(\w+)" CHECK', replace)
    separate = [f"spectral_memories_{n}_check" for n in (
        "tier", "typology", "content", "value", "envelope", "provenance", "confidence",
        "erasure")]
    # an earlier plan's separate constraints go; one constraint calls the function
    assert drops == [*separate, "spectral_memories_bounds_check"]
    assert adds == ["spectral_memories_bounds_check"]
    assert ('CHECK ("platform"."spectral_memories_bounds"("tier", "typology", "content", '
            '"value", "envelope", "provenance", "confidence", "erased_at", '
            '"erasure_reason"))') in replace
    for name in separate:  # a broken bound fails under its own name
        assert f"CONSTRAINT = '{name}'" in function
    # the other tables keep separate constraints, replaced the same way
    scopes = next(s for s in statements if s.startswith('ALTER TABLE "platform".'
                                                         '"spectral_scopes"\n'))
    scope_drops = re.findall(r'DROP CONSTRAINT IF EXISTS "(\w+)"', scopes)
    assert scope_drops == re.findall(r'ADD CONSTRAINT "(\w+)" CHECK', scopes) != []


def test_tier_and_typology_checks_list_the_spec(spectral: AgentSpec) -> None:
    text = compile_plan(spectral).render()
    assert "IF (tier IN ('cycle', 'run', 'workspace')) IS FALSE THEN" in text
    assert ("IF ((tier || ':' || typology) = ANY ('{cycle:episodic,run:episodic,"
            "workspace:episodic,workspace:semantic,workspace:procedural}'::text[])) IS FALSE"
            ) in text
    assert """GENERATED ALWAYS AS ("tier" = 'workspace') STORED""" in text


def test_reserved_word_identifiers_are_always_quoted() -> None:
    text = compile_plan(odd_spec()).render()
    assert '"user" text NOT NULL' in text
    assert '"order" text,' in text
    assert 'CREATE SCHEMA IF NOT EXISTS "table" AUTHORIZATION' in text
    assert 'CREATE TABLE IF NOT EXISTS "table"."limit_memories"' in text
    code = "\n".join(line for line in text.splitlines() if not line.startswith("--"))
    code = re.sub(r"'(?:[^']|'')*'", "''", code)  # drop string literals (comments, checks)
    bare = re.findall(r'(?<![\w"])(user|order|table|limit_memories)(?![\w"])', code)
    assert bare == []


def test_anchor_keys_become_columns_required_ones_not_null(spectral: AgentSpec) -> None:
    memories = compile_plan(odd_spec()).definitions[0]
    columns = {c.name: c for c in memories.columns}
    assert memories.column_names[:2] == ("user", "order")
    assert columns["user"].not_null and not columns["order"].not_null
    assert memories.generated_columns == ("persistent", "tsv")
    assert memories.primary_key == ("user", "id")


def test_statements_are_idempotent(plan: Plan) -> None:
    statements = rendered(plan)
    assert statements[0] == 'SET LOCAL ROLE "primitives_owner"'
    for index, statement in enumerate(statements):
        code = re.sub(r"\$(fn|bounds)\$.*?\$\1\$", "$fn$$fn$", statement,
                      flags=re.S)  # function bodies
        code = re.sub(r"'(?:[^']|'')*'", "''", code)
        assert ";" not in code, "one statement per step"
        if statement.startswith("CREATE"):
            assert re.match(
                r"CREATE (SCHEMA IF NOT EXISTS|TABLE IF NOT EXISTS|(UNIQUE )?INDEX IF NOT EXISTS|"
                r"OR REPLACE (VIEW|TRIGGER|FUNCTION)|POLICY)",
                statement,
            ), statement
        if statement.startswith("CREATE POLICY"):
            name, table = re.match(r"CREATE POLICY (\S+) ON (\S+)", statement).groups()  # type: ignore[union-attr]
            assert statements[index - 1] == f"DROP POLICY IF EXISTS {name} ON {table}"
        if statement.startswith("GRANT") and " ON TABLE " in statement:
            target = statement.split(" ON TABLE ")[1].split(" TO ")[0]
            assert any(s == f'REVOKE ALL ON TABLE {target} FROM "primitives_app", '
                       '"primitives_auditor", "primitives_maintainer"' for s in statements[:index])
        if statement.startswith("GRANT") and " ON FUNCTION " in statement:
            # the revoke from PUBLIC, then the grants (the app role, the maintainer role)
            target = statement.split(" ON FUNCTION ")[1].split(" TO ")[0]
            previous = index - 1
            while statements[previous].startswith(f"GRANT EXECUTE ON FUNCTION {target} TO "):
                previous -= 1
            assert statements[previous] == f"REVOKE ALL ON FUNCTION {target} FROM PUBLIC"


def test_schemas_are_created_for_the_owner_checkpointer_only_when_enabled(
    spectral: AgentSpec,
) -> None:
    statements = rendered(compile_plan(spectral))
    assert 'CREATE SCHEMA IF NOT EXISTS "platform" AUTHORIZATION "primitives_owner"' in statements
    assert 'CREATE SCHEMA IF NOT EXISTS "langgraph" AUTHORIZATION "primitives_owner"' in statements
    odd = rendered(compile_plan(odd_spec()))
    assert [s for s in odd if s.startswith("CREATE SCHEMA")] == [
        'CREATE SCHEMA IF NOT EXISTS "table" AUTHORIZATION "primitives_owner"'
    ]


def test_app_grants_are_least_privilege(spectral: AgentSpec) -> None:
    plan = compile_plan(odd_spec())
    tables = plan.tables
    grants = {
        s.split(" ON TABLE ")[1].split(" TO ")[0]: s.split("GRANT ")[1].split(" ON ")[0]
        for s in rendered(plan) if s.startswith("GRANT") and s.endswith('TO "primitives_app"')
        and " ON TABLE " in s
    }
    functions = [s for s in rendered(plan) if s.startswith("GRANT") and " ON FUNCTION " in s
                 and s.endswith('TO "primitives_app"')]
    # the one the memories table's constraint calls, the one hard delete of memories, the
    # governed erasure of a row's content and the read of canonical rows' current versions
    assert [s.split(" ON FUNCTION ")[1].split("(")[0] for s in functions] == [
        '"table"."limit_memories_bounds"', '"table"."limit_delete_transient"',
        '"table"."limit_erase_row"', '"table"."limit_canonical_version"']
    assert all(s.startswith("GRANT EXECUTE") and s.endswith('TO "primitives_app"')
               for s in functions)

    def granted(table: object) -> str:
        assert tables is not None
        return grants[table.ident.as_string(None)]  # type: ignore[attr-defined]

    # no table-level UPDATE, DELETE or TRUNCATE anywhere: any of them lets LOCK TABLE take
    # every mode; UPDATE only of the columns the engine sets, never the tenant or the key
    assert granted(tables.memories).startswith('SELECT, INSERT, UPDATE ("superseded_at", ')
    assert '"user"' not in granted(tables.memories) and '"key"' not in granted(tables.memories)
    assert granted(tables.scopes) == 'SELECT, INSERT, UPDATE ("last_activity_at", "closed_at")'
    for append_only in (tables.events, tables.action_links, tables.approvals, tables.promotions):
        assert granted(append_only) == "SELECT, INSERT"
    for table in tables.tables:
        assert "DELETE" not in granted(table)
        assert granted(table).startswith("SELECT, INSERT") and "UPDATE" not in \
            granted(table).replace("UPDATE (", "")
    for view in tables.views:
        assert granted(view) == "SELECT"
    auditor = [s for s in rendered(plan) if s.endswith('TO "primitives_auditor"')]
    assert all(s.startswith("GRANT SELECT ON TABLE") for s in auditor)
    assert len(auditor) == len(tables.tables) + len(tables.views)
    # the maintainer: the app role's privileges on the tables maintenance writes, plus DELETE
    # on memories only (transient rows at an idle scope's end; the delete guard still refuses
    # the rest); SELECT on those it only reads; nothing on the others, nor on any view
    maintainer = {
        s.split(" ON TABLE ")[1].split(" TO ")[0]: s.split("GRANT ")[1].split(" ON ")[0]
        for s in rendered(plan) if s.startswith("GRANT") and " ON TABLE " in s
        and s.endswith('TO "primitives_maintainer"')}
    memories = tables.memories.ident.as_string(None)
    assert maintainer[memories] == granted(tables.memories) + ", DELETE"
    writes = {tables.events, tables.scopes, tables.promotions, tables.edges}
    reads = {tables.action_links, tables.entities, tables.node_entities,
             tables.canonical_refs} - {None}  # canonical references: with a non-mirror list
    assert None not in writes  # the odd spec has a graph: every kind it writes is here
    for table in tables.tables:
        ident = table.ident.as_string(None)
        if table in writes:
            assert maintainer[ident] == grants[ident]
        elif table in reads:
            assert maintainer[ident] == "SELECT"
        elif ident != memories:
            assert ident not in maintainer, ident
    assert len(maintainer) == 1 + len(writes) + len(reads)
    assert not any(view.ident.as_string(None) in maintainer for view in tables.views)


def test_journal_links_and_approvals_refuse_mutation_and_memories_guard_delete() -> None:
    plan = compile_plan(odd_spec())
    tables = plan.tables
    for table in (tables.events, tables.action_links, tables.approvals):
        triggers = {t.events: t for t in plan.definition(table).triggers}  # type: ignore[arg-type]
        assert triggers["UPDATE OR DELETE"].level == "ROW"
        assert triggers["TRUNCATE"].level == "STATEMENT"
    text = plan.render()
    assert ('BEFORE INSERT ON "table"."limit_memory_events" FOR EACH ROW EXECUTE FUNCTION '
            '"table"."limit_chain_event"()') in text
    # the compiled chain function names the journal and the tenant column, quoted
    assert 'CREATE OR REPLACE FUNCTION "table"."limit_chain_event"() RETURNS trigger' in text
    assert 'FROM "table"."limit_memory_events" AS e' in text
    assert 'WHERE e."user" = NEW."user"' in text
    assert 'REVOKE ALL ON FUNCTION "table"."limit_chain_event"() FROM PUBLIC' in text
    assert ('BEFORE DELETE ON "table"."limit_memories" FOR EACH ROW EXECUTE FUNCTION '
            '"primitives"."guard_memory_delete"(\'"table"."limit_action_links"\', \'user\')') in text


def test_optional_tables_follow_the_spec(spectral: AgentSpec) -> None:
    plain = agent_tables(spectral)
    assert plain.edges is None and plain.action_requests is None
    assert [t.name for t in plain.tables] == [
        "spectral_memories", "spectral_memory_events", "spectral_action_links",
        "spectral_scopes", "spectral_promotions", "spectral_canonical_refs",
        "spectral_outbox", "spectral_checkpoints",
        "spectral_checkpoint_blobs", "spectral_checkpoint_writes",
    ]  # outbox: cross_context event_driven
    assert plain.checkpoints is not None and plain.checkpoints.schema == "langgraph"
    odd = agent_tables(odd_spec())
    assert [t.name for t in odd.tables] == [
        "limit_memories", "limit_memory_events", "limit_action_links", "limit_scopes",
        "limit_promotions", "limit_edges", "limit_entities", "limit_node_entities",
        "limit_sessions", "limit_action_requests", "limit_approvals", "limit_canonical_refs",
    ]
    assert odd.checkpoints is None  # persistence.checkpointer.enabled: false
    text = compile_plan(odd_spec()).render()
    assert "CHECK (relation_type IN ('temporal', 'supersedes'))" in text
    assert "CHECK (type IN ('person', 'tool'))" in text
    # the trigram non-mirror guard: a trigger on memories comparing with the canonical text
    assert '"public".word_similarity(d.body, NEW.content)' in text
    assert 'DROP INDEX IF EXISTS "table"."limit_memories_content_trgm_idx"' in text
    assert "word_similarity" not in compile_plan(
        odd_spec(), capabilities=Capabilities(trigram=False)).render()
    # creation order: a referenced table before its referrers
    names = [d.table.name for d in table_definitions(odd_spec())]
    assert names.index("limit_entities") < names.index("limit_node_entities")


def test_tables_object_names_every_relation(spectral: AgentSpec) -> None:
    tables = agent_tables(spectral)
    assert tables.memories.ident.as_string(None) == '"platform"."spectral_memories"'
    assert tables.memories.qualified == "platform.spectral_memories"
    assert tables.events.name == "spectral_memory_events"
    assert tables.tenant.as_string(None) == '"workspace_id"'
    assert tables.anchor_columns == ("workspace_id",)
    assert tables.checkpointer_schema == "langgraph"
    assert len(tables.views) == 9
    assert tables.active_memories not in tables.audit_views
    assert {v.name for v in tables.audit_views} == {
        f"spectral_{n}" for n in ("audit_lineage", "audit_supersession", "audit_action_basis",
                                  "audit_retention_state", "audit_erasures",
                                  "audit_sanitization", "audit_redactions", "audit_policy_coverage")
    }


def test_render_is_deterministic_and_checksummed(spectral: AgentSpec) -> None:
    first, second = compile_plan(spectral), compile_plan(load_spec(SPECTRAL))
    assert first.render() == second.render()
    assert first.checksum == hashlib.sha256(first.render().encode()).hexdigest()
    # each step, then the validations after their heading
    assert first.validations
    assert first.render().count("\n\n-- ") == len(first.steps) + len(first.validations) + 1
    other = compile_plan(spectral, capabilities=Capabilities(vector=False))
    assert other.checksum != first.checksum


def test_a_prefix_too_long_for_postgres_names_is_a_spec_error() -> None:
    long_prefix = "p" * 45
    with pytest.raises(SpecError) as caught:
        compile_plan(odd_spec(ODD_SPEC.replace("prefix: limit", f"prefix: {long_prefix}")))
    assert caught.value.field == "persistence.store.prefix"
    assert "63" in caught.value.message


def test_an_anchor_key_named_like_a_framework_column_is_a_spec_error() -> None:
    text = ODD_SPEC.replace("[user, order]", "[user, tier]").replace("[order]", "[tier]")
    with pytest.raises(SpecError) as caught:
        compile_plan(odd_spec(text))
    assert caught.value.field == "anchor.keys"
    assert "'tier'" in caught.value.message


def test_servers_older_than_postgres_15_are_refused(spectral: AgentSpec) -> None:
    with pytest.raises(StorageError, match="PostgreSQL 15"):
        compile_plan(spectral, capabilities=Capabilities(server_version=140010))


def test_role_names_match_the_migrations() -> None:
    from primitives.compile import _names
    from primitives.db import _names as db_names

    for name in ("OWNER_ROLE", "APP_ROLE", "AUDITOR_ROLE", "TENANT_SETTING"):
        assert getattr(_names, name) == getattr(db_names, name)


def test_builders_return_composed_sql(spectral: AgentSpec) -> None:
    plan = compile_plan(spectral)
    assert all(isinstance(step.statement, sql.Composed) for step in plan.steps)
    assert all("\n" not in step.title for step in plan.steps)
