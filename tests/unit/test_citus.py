"""The Citus plan without a Citus server: read back from the rendered SQL (DESIGN §11).

Citus refuses a unique key or a foreign key between distributed tables that does not
include the distribution column, so each reference spec's plan is checked for that,
for every table being distributed and colocated, and for the adaptations
(``SET LOCAL`` forwarding, triggers on shards, foreign keys after distribution).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from psycopg import sql

from primitives.compile import Capabilities, Plan, compile_citus, compile_plan
from primitives.compile._checkpointer import checkpointer_tables
from primitives.compile._citus import CITUS_GUARD_FUNCTION, distributed_tables
from primitives.compile._definer import checkpoint_delete_threads_function, erase_row_function
from primitives.compile._non_mirror import guard_function, refresh_function
from primitives.db import set_tenant_statement
from primitives.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted((ROOT / "agents").glob("*.yaml"))


@pytest.fixture(params=SPECS, ids=[p.stem for p in SPECS])
def plan(request: pytest.FixtureRequest) -> Plan:
    return compile_citus(load_spec(request.param))


def _statements(plan: Plan) -> list[str]:
    return [step.statement.as_string(None) for step in plan.steps]


def _columns(text: str) -> list[str]:
    return re.findall(r'"(\w+)"', text)


def test_reference_specs_exist() -> None:
    assert len(SPECS) == 5


def test_every_primary_key_and_unique_constraint_includes_the_tenant_column(plan: Plan) -> None:
    tenant = plan.tables.tenant_column
    for definition in plan.definitions:
        for constraint in definition.constraints:
            if constraint.kind in ("primary_key", "unique"):
                assert tenant in constraint.columns, constraint.name
    keys = re.findall(r"(?:PRIMARY KEY|UNIQUE) \(([^)]*)\)", plan.render())
    assert keys
    for key in keys:
        assert tenant in _columns(key), key


def test_every_unique_index_includes_the_tenant_column(plan: Plan) -> None:
    tenant = plan.tables.tenant_column
    for definition in plan.definitions:
        for index in definition.indexes:
            if index.unique:
                assert index.leading == tenant, index.name
    uniques = [s for s in _statements(plan) if s.startswith("CREATE UNIQUE INDEX")]
    assert uniques
    for statement in uniques:
        elements = re.search(r" USING \w+ \((.*)\)(?: WHERE .*)?$", statement)
        assert elements is not None, statement
        assert tenant in _columns(elements.group(1)), statement


def test_every_foreign_key_includes_the_tenant_column_on_both_sides(plan: Plan) -> None:
    tenant = plan.tables.tenant_column
    fks = re.findall(r"FOREIGN KEY \(([^)]*)\) REFERENCES (\S+) \(([^)]*)\)", plan.render())
    expected = sum(c.kind == "foreign_key" for d in plan.definitions for c in d.constraints)
    assert len(fks) == expected and expected >= 1
    for columns, _target, ref_columns in fks:
        assert _columns(columns).index(tenant) == _columns(ref_columns).index(tenant)


def test_every_table_is_distributed_by_the_tenant_and_colocated_with_memories(
    plan: Plan,
) -> None:
    tenant = plan.tables.tenant_column
    memories = plan.tables.memories.ident.as_string(None)
    text = plan.render()
    found = dict(re.findall(
        r"create_distributed_table\('([^']+)'::regclass, '(?:\w+)', colocate_with => '([^']+)'\)",
        text,
    ))
    assert set(distributed_tables(plan)) == set(plan.tables.tables)
    assert set(found) == {t.ident.as_string(None) for t in plan.tables.tables}
    for table, colocate in found.items():
        assert colocate == ("default" if table == memories else memories), table
    assert set(re.findall(r"create_distributed_table\('[^']+'::regclass, '(\w+)'", text)) == {
        tenant}


def test_distribution_is_idempotent_and_follows_the_table_it_distributes(plan: Plan) -> None:
    statements = _statements(plan)
    for table in plan.tables.tables:
        name = table.ident.as_string(None)
        create = _find(statements, f"CREATE TABLE IF NOT EXISTS {name} (")
        distribute = _find(statements, f"create_distributed_table('{name}'")
        # every table's grants (the raw-PII table's: none for the auditor) come before
        # (an access policy grants the auditor columns: GRANT SELECT (...) ON TABLE)
        grants = _find(statements, f" ON TABLE {name} TO \"primitives_auditor\""
                       if table != plan.tables.pii_raw else f"REVOKE ALL ON TABLE {name}")
        assert create < grants < distribute
        assert "WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition" in (
            statements[distribute])


def _find(statements: list[str], fragment: str) -> int:
    matches = [i for i, s in enumerate(statements) if fragment in s]
    assert len(matches) == 1, (fragment, len(matches))
    return matches[0]


def test_foreign_keys_are_added_after_every_table_is_distributed(plan: Plan) -> None:
    statements = _statements(plan)
    creates = [s for s in statements if s.startswith("CREATE TABLE")]
    assert not any("FOREIGN KEY" in s for s in creates)
    last_distribution = max(i for i, s in enumerate(statements)
                            if "create_distributed_table(" in s)
    adds = [i for i, s in enumerate(statements) if " ADD CONSTRAINT " in s and "FOREIGN KEY" in s]
    assert adds and min(adds) > last_distribution
    for i in adds:  # Citus refuses ADD ... FOREIGN KEY beside other subcommands
        assert statements[i - 1].endswith("DROP CONSTRAINT IF EXISTS "
                                           + statements[i].split(" ADD CONSTRAINT ")[1].split()[0])
        assert statements[i].count("ADD CONSTRAINT") == 1


def test_tenant_is_forwarded_to_workers_with_set_local(plan: Plan) -> None:
    statements = _statements(plan)
    assert statements[0] == "RESET ROLE"  # ALTER ROLE needs the admin, not the owner role
    assert "ALTER ROLE \"primitives_app\" SET citus.propagate_set_commands = 'local'" in statements
    assert statements.index('SET LOCAL ROLE "primitives_owner"') > statements.index(
        "ALTER ROLE \"primitives_app\" SET citus.propagate_set_commands = 'local'")
    # a Citus coordinator forwards the SET LOCAL form (the single-node runtime binds the
    # tenant with set_config instead: docs/scaling.md)
    assert set_tenant_statement("acme").as_string(None) == (
        "SET LOCAL primitives.tenant = 'acme'")


def test_triggers_on_shards_are_enabled_and_the_delete_guard_is_shard_local(plan: Plan) -> None:
    statements = _statements(plan)
    assert "SET LOCAL citus.enable_unsafe_triggers = on" in statements
    assert any("create_distributed_function('primitives.event_hash(" in s for s in statements)
    guard = _find(statements, f'FUNCTION "primitives"."{CITUS_GUARD_FUNCTION}"()')
    assert "get_shard_id_for_distribution_column" in statements[guard]
    memories = plan.tables.memories.ident.as_string(None)
    trigger = _find(statements, f"BEFORE DELETE ON {memories}")
    assert guard < trigger
    assert f'"primitives"."{CITUS_GUARD_FUNCTION}"(' in statements[trigger]
    assert not any('"primitives"."guard_memory_delete"(' in s for s in statements)
    # the journal's chain trigger is the generic one, which reads the shard it fires on;
    # the single-node plan's compiled function would query the distributed journal
    events = plan.tables.events.ident.as_string(None)
    chain = statements[_find(statements, f"BEFORE INSERT ON {events}")]
    tenant = plan.tables.tenant_column.replace("'", "''")
    assert f'"primitives"."chain_event"(\'{tenant}\')' in chain
    assert not any(plan.tables.chain_function.as_string(None) in s for s in statements)


def test_the_bounds_function_reaches_the_workers_before_the_memories_shards(plan: Plan) -> None:
    statements = _statements(plan)
    memories = plan.tables.memories
    function = f'"{memories.schema}"."{memories.name}_bounds"'
    create = _find(statements, f"CREATE OR REPLACE FUNCTION {function}(")
    distributed = _find(statements, f"create_distributed_function('{function}(text, text, ")
    constraint = _find(statements, f"CHECK ({function}(")
    shards = _find(statements, f"create_distributed_table('{memories.ident.as_string(None)}'")
    assert create < constraint < distributed < shards
    assert "WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_object" in statements[distributed]


def test_the_single_node_plan_is_contained_in_the_citus_plan(plan: Plan) -> None:
    spec = load_spec(next(p for p in SPECS if load_spec(p).agent == plan.agent))
    single = compile_plan(spec, capabilities=Capabilities(text_match=False))
    citus = set(_statements(plan))
    # a table's CHECKs are replaced one subcommand per statement on a cluster (the test after
    # next): the single-node statement is there in parts
    parted = {s.title.rpartition(", part ")[0] for s in plan.steps if ", part " in s.title}
    missing = [s.statement.as_string(None) for s in single.steps
               if s.statement.as_string(None) not in citus and s.title not in parted]
    # only what the Citus plan changes on purpose: CREATE TABLE without its foreign keys,
    # the delete guard trigger on the memories table, the journal's chain trigger (generic
    # on Citus, compiled on one node) and its comment, and the tenant policies (no
    # subquery: Citus refuses one in a distributed table's policy); the Citus plan leaves
    # out the leakproof full-text operator class, which a distributed table cannot use
    # and the erasure function, which takes the tenant first on a cluster (the next test);
    # the non-mirror guard and its index's refresh (row versions as md5 of the text, the
    # canonical rows read once) and that index's tables, whose row-level security is on but
    # not forced (the owner copies into them)
    chain = plan.tables.chain_function.as_string(None)
    erase = erase_row_function(plan.tables).as_string(None)
    guard_index = [sql.Identifier(plan.tables.schema, plan.tables.object_name(n)).as_string(None)
                   for n in ("canonical_indexed", "canonical_postings", "canonical_signatures")]
    cluster_forms = [
        f"CREATE OR REPLACE FUNCTION {function.as_string(None)}()"
        for function in (guard_function(plan.tables), refresh_function(plan.tables))]
    for statement in missing:
        if statement.startswith(tuple(cluster_forms)) or statement in [
                f"ALTER TABLE {t} ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY"
                for t in guard_index]:
            continue
        assert (statement.startswith("CREATE TABLE") and "FOREIGN KEY" in statement) or (
            "primitives_guard_delete" in statement or chain in statement
            or plan.tables.chain_function_name in statement
            or (statement.startswith("CREATE POLICY") and "(SELECT nullif(" in statement)
            or f"{erase}(uuid, text, uuid, text, jsonb)" in statement
            or statement.startswith(f"CREATE OR REPLACE FUNCTION {erase}(uuid")
            or statement.startswith(  # per tenant, no recursive CTE (the test after next)
                f"CREATE OR REPLACE VIEW {plan.tables.audit_supersession.ident.as_string(None)}")
        ), statement


def test_the_citus_plan_replaces_each_tables_checks_one_subcommand_at_a_time(plan: Plan) -> None:
    """Citus refuses ``ADD CONSTRAINT`` beside other subcommands on a distributed table, as
    every table is when a changed plan is applied again: each drop and add of a CHECK is an
    ``ALTER TABLE`` of its own, in the single-node statement's order."""
    single = {s.title: s.statement.as_string(None) for s in compile_plan(
        load_spec(next(p for p in SPECS if load_spec(p).agent == plan.agent)),
        capabilities=Capabilities(text_match=False)).steps}
    parts: dict[str, list[str]] = {}
    for step in plan.steps:
        if ", part " in step.title:
            parts.setdefault(step.title.rpartition(", part ")[0], []).append(
                step.statement.as_string(None))
    assert parts and all(title.endswith("checks (replaced, so they follow the spec)")
                         for title in parts)
    for title, statements in parts.items():
        table, _, _ = title.partition(": ")
        subcommands = [s.split(" ", 3)[3] for s in statements]
        assert all(s.startswith(("DROP CONSTRAINT IF EXISTS ", "ADD CONSTRAINT ")) and
                   "\n" not in s.split(" CHECK ", 1)[0] for s in subcommands)
        assert any(s.startswith("ADD CONSTRAINT ") for s in subcommands)
        assert single[title] == f"ALTER TABLE {statements[0].split(' ', 3)[2]}\n    " + \
            ",\n    ".join(subcommands), table


def test_the_citus_erasure_function_takes_the_tenant_and_runs_on_its_worker(
    plan: Plan
) -> None:
    erase = erase_row_function(plan.tables).as_string(None)
    statements = _statements(plan)
    created = [s for s in statements if s.startswith(f"CREATE OR REPLACE FUNCTION {erase}(")]
    assert created and all(s.startswith(f"CREATE OR REPLACE FUNCTION {erase}(p_tenant text,")
                           for s in created)
    for body in created:  # every write a VALUES insert or a routed update, no INSERT ... SELECT
        assert "LANGUAGE plpgsql" in body and "INSERT INTO" in body
        assert "VALUES (p_tenant, p_event_id, 'erased', p_id" in body
        assert "p_tenant IS DISTINCT FROM primitives.current_tenant()" in body
    [distribute] = [s for s in statements if "create_distributed_function" in s and erase.replace(
        '"', "") in s.replace('"', "")]
    assert "'$1'" in distribute and "force_delegation => true" in distribute
    assert f"colocate_with => '{plan.tables.memories.qualified}'" in distribute
    assert statements.index(distribute) > max(statements.index(s) for s in created)


def test_the_citus_thread_delete_takes_the_tenant_and_runs_on_its_worker(plan: Plan) -> None:
    names = checkpointer_tables(plan.tables)
    statements = _statements(plan)
    if names is None:
        assert not [s for s in statements if "_checkpoints_delete_threads" in s]
        return
    delete = checkpoint_delete_threads_function(names).as_string(None)
    created = [s for s in statements if s.startswith(f"CREATE OR REPLACE FUNCTION {delete}(")]
    # the single-node form (for the single-node engine's calls) and the form by tenant
    assert [s.split("(", 1)[1].split(")", 1)[0] for s in created] == [
        "text[]", "p_tenant text, p_thread_ids text[]"]
    body = created[1]
    assert "LANGUAGE plpgsql" in body and "SECURITY DEFINER" in body
    assert "p_tenant IS DISTINCT FROM primitives.current_tenant()" in body
    for table in (names.writes, names.blobs, names.checkpoints):
        assert sql.SQL("DELETE FROM {} AS x WHERE x.{} = p_tenant").format(
            table.ident, names.tenant).as_string(None) in body
    assert f"GRANT EXECUTE ON FUNCTION {delete}(text, text[]) TO " in "\n".join(statements)
    [distribute] = [s for s in statements if "create_distributed_function" in s
                    and delete.replace('"', "") in s]
    assert f"{delete.replace(chr(34), '')}(text, text[])" in distribute
    assert "'$1'" in distribute and "force_delegation => true" in distribute
    assert f"colocate_with => '{plan.tables.memories.qualified}'" in distribute
    assert statements.index(distribute) > statements.index(body)


def test_the_single_node_plan_has_no_thread_delete_by_tenant(plan: Plan) -> None:
    single = compile_plan(load_spec(next(p for p in SPECS if load_spec(p).agent == plan.agent)))
    names = checkpointer_tables(single.tables)
    if names is None:
        return
    delete = checkpoint_delete_threads_function(names).as_string(None)
    assert [s.split("(", 1)[1].split(")", 1)[0] for s in _statements(single)
            if s.startswith(f"CREATE OR REPLACE FUNCTION {delete}(")] == ["text[]"]
    assert not [s for s in _statements(single) if "p_thread_ids" in s]


def test_no_policy_of_the_citus_plan_holds_a_subquery(plan: Plan) -> None:
    policies = [s for s in _statements(plan) if s.startswith("CREATE POLICY")]
    assert policies
    assert not [p for p in policies if "(SELECT " in p]
    assert any("= nullif(current_setting('primitives.tenant', true), '')" in p
               for p in policies)


def test_the_citus_plan_commits_after_each_table_it_distributes(plan: Plan) -> None:
    commits = [s.statement.as_string(None) for s in plan.steps if s.commit_after]
    distributed = [s for s in commits if "create_distributed_table" in s]
    assert len(distributed) == len(plan.definitions)
    # and each reference table it makes: the canonical tables and the guard's index
    assert all("create_reference_table" in s for s in commits if s not in distributed)
    assert not any("tsvector_match_ops" in s for s in _statements(plan))


def test_compile_citus_follows_capabilities_and_shard_count() -> None:
    spec = load_spec(ROOT / "agents" / "spectral_agent.yaml")
    plan = compile_citus(spec, capabilities=Capabilities(vector=False), shard_count=64)
    text = plan.render()
    assert "halfvec" not in text
    assert text.count("shard_count => 64") == 1  # only the first table opens a colocation group
    assert compile_citus(spec).render() == compile_citus(spec).render()
    assert compile_citus(spec).checksum != compile_plan(spec).checksum


def test_the_citus_supersession_view_walks_each_tenants_links_without_a_recursive_cte(
    plan: Plan
) -> None:
    statements = _statements(plan)
    view = plan.tables.audit_supersession.ident.as_string(None)
    [created] = [s for s in statements if s.startswith(f"CREATE OR REPLACE VIEW {view}")]
    assert "RECURSIVE" not in created and "WITH" not in created.split(" AS\n", 1)[1]
    assert f'GROUP BY "s"."{plan.tables.tenant_column}"' in created
    assert '"primitives"."supersession_chains"(g.ids, g.successors)' in created
    chains = "primitives.supersession_chains(uuid[], uuid[])"
    function = statements.index(next(
        s for s in statements
        if s.startswith('CREATE OR REPLACE FUNCTION "primitives"."supersession_chains"')))
    [distribute] = [s for s in statements
                    if "create_distributed_function" in s and chains in s]
    grant = statements.index(
        f'GRANT EXECUTE ON FUNCTION {chains} TO "primitives_app", "primitives_auditor"')
    assert function < statements.index(distribute) < grant < statements.index(created)
    assert f"REVOKE ALL ON FUNCTION {chains} FROM PUBLIC" in statements
    single = compile_plan(load_spec(next(p for p in SPECS if load_spec(p).agent == plan.agent)))
    assert any("WITH RECURSIVE chain" in s.statement.as_string(None) for s in single.steps)


def test_the_citus_plan_puts_canonical_tables_and_the_guards_index_on_every_node() -> None:
    """Non-mirror on a cluster: the canonical table (the platform's) and the guard's index
    become reference tables before anything reads them, the guard and the refresh record a
    row's version as the md5 of its text (every node holds its own copy, with its own
    ``xmin``), the refresh reads the canonical rows once, and the references' foreign key to
    the canonical table is added, in two statements, once the references are distributed."""
    spec = load_spec(ROOT / "agents" / "world_agent.yaml")
    plan = compile_citus(spec, capabilities=Capabilities(
        text_match=False, canonical_keys=(("worlds.rules", "integer"),)))
    statements = _statements(plan)
    tables = plan.tables
    assert tables.canonical_refs is not None

    def first(predicate: str) -> int:
        return next(i for i, s in enumerate(statements) if predicate in s)

    canonical = first("create_reference_table(pg_catalog.to_regclass('\"worlds\".\"rules\"'))")
    assert plan.steps[canonical].commit_after
    assert canonical < first("SET LOCAL ROLE")  # as the migrating admin
    refresh = refresh_function(tables).as_string(None)
    for name in ("canonical_indexed", "canonical_postings", "canonical_signatures"):
        quoted = sql.Identifier(tables.schema, tables.object_name(name)).as_string(None)
        made = first(f"CREATE TABLE IF NOT EXISTS {quoted}")
        placed = first(f"create_reference_table(pg_catalog.to_regclass('{quoted}'))")
        assert made < placed < first(f"CREATE OR REPLACE FUNCTION {refresh}()")
        assert f"ALTER TABLE {quoted} ENABLE ROW LEVEL SECURITY, NO FORCE ROW LEVEL SECURITY" \
            in statements
    guard = statements[first(f"CREATE OR REPLACE FUNCTION {guard_function(tables).as_string(None)}()")]
    assert 'x.row_version = pg_catalog.md5(c."body_text")' in guard and "c.xmin" not in guard
    body = statements[first(f"CREATE OR REPLACE FUNCTION {refresh}()")]
    # the canonical table is read once, into arrays; no statement writing the index reads it
    assert "xmin" not in body and body.count('"worlds"."rules"') == 1
    assert 'INTO keys, versions, bodies FROM "worlds"."rules" AS c;' in body
    refs = tables.canonical_refs.ident.as_string(None)
    added = first('REFERENCES "worlds"."rules"')
    assert statements[added].startswith(f"ALTER TABLE {refs} ADD CONSTRAINT")
    assert first(f"create_distributed_table('{refs}'") < added
    assert statements[added - 1].startswith(f"ALTER TABLE {refs} DROP CONSTRAINT IF EXISTS")
    assert not any("DROP CONSTRAINT" in s and "FOREIGN KEY" in s for s in statements)


def test_set_tenant_on_a_coordinator_forwards_every_runtime_setting_it_can() -> None:
    """Every setting the runtime's connections start with is either copied to the workers'
    transactions by the coordinator's ``primitives.set_tenant`` or named with why not: a
    worker's connection starts with the application role's persisted settings."""
    from primitives.db._citus import (
        _SET_TENANT_SET_LOCAL,
        WORKER_SETTINGS,
        WORKER_SETTINGS_NOT_FORWARDED,
    )
    from primitives.db._session import _SINCE_17, DEFAULT_SETTINGS, PINNED_SETTINGS

    runtime = {n.lower() for n in (*PINNED_SETTINGS, *DEFAULT_SETTINGS, *_SINCE_17)}
    runtime.add("search_path")
    assert runtime == set(WORKER_SETTINGS) - {"transaction_read_only"} | set(
        WORKER_SETTINGS_NOT_FORWARDED)
    assert not set(WORKER_SETTINGS) & set(WORKER_SETTINGS_NOT_FORWARDED)
    body = _SET_TENANT_SET_LOCAL.as_string(None)
    for name in WORKER_SETTINGS:
        assert f"'{name}'" in body
    # the settings before the tenant, every one with SET LOCAL (what Citus forwards)
    assert body.index("FOREACH setting") < body.index("SET LOCAL primitives.tenant")
    assert "set_config(" not in body
