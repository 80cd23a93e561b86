"""The doctor's checks on hand-built catalog rows: one broken rule, one named finding."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from primitives._doctor import (
    CHECKS,
    Catalog,
    Creator,
    Definer,
    Grant,
    MaintainerRole,
    Policy,
    Relation,
    Role,
    RoleSetting,
    RuntimeReach,
    Trigger,
    UniqueIndex,
    diagnose,
)
from primitives.compile import Tables, agent_tables
from primitives.compile._rls import auditor_policy_name, tenant_policy_name
from primitives.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
APP, AUDITOR, OWNER = "primitives_app", "primitives_auditor", "primitives_owner"
REFUSE, CHAIN, GUARD = ("primitives.refuse_journal_mutation", "primitives.chain_event",
                        "primitives.guard_memory_delete")


@pytest.fixture(scope="module")
def tables() -> Tables:
    return agent_tables(load_spec(ROOT / "agents" / "mace.yaml"))  # governed: has approvals


def healthy(tables: Tables) -> Catalog:
    """What a freshly migrated agent looks like in the catalog."""
    relations, policies, grants, indexes, triggers = [], [], [], [], []
    expr = (f"({tables.tenant_column} = ( SELECT NULLIF(current_setting('primitives.tenant'"
            "::text, true), ''::text) AS \"nullif\"))")
    for oid, rel in enumerate((*tables.tables, *tables.views), start=1000):
        grants += [Grant(oid, OWNER, "TRUNCATE"), Grant(oid, APP, "SELECT"),
                   Grant(oid, AUDITOR, "SELECT")]
        if rel.kind == "view":
            relations.append(Relation(rel.schema, rel.name, oid, "v", False, False, OWNER,
                                      ["security_invoker=true"]))
            continue
        relations.append(Relation(rel.schema, rel.name, oid, "r", True, True, OWNER, None))
        policies += [Policy(oid, tenant_policy_name(tables), "*", True, [APP], expr, expr),
                     Policy(oid, auditor_policy_name(tables), "r", True, [AUDITOR], "true", None)]
        grants.append(Grant(oid, APP, "INSERT"))
        indexes.append(UniqueIndex(oid, f"{rel.qualified}_pkey", tables.tenant_column))
        if rel in (tables.events, tables.action_links, tables.approvals):
            triggers += [Trigger(oid, "refuse", 1 | 2 | 8 | 16, "O", REFUSE),
                         Trigger(oid, "refuse_truncate", 2 | 32, "O", REFUSE)]
        if rel == tables.events:
            triggers.append(Trigger(oid, "chain", 1 | 2 | 4, "O", CHAIN))
        if rel == tables.memories:
            triggers.append(Trigger(oid, "guard", 1 | 2 | 8, "O", GUARD))
    return Catalog(relations=relations, policies=policies, grants=grants, indexes=indexes,
                   triggers=triggers,
                   roles=[Role(APP, False, False, [APP]), Role(AUDITOR, False, False, [AUDITOR])])


def oid_of(catalog: Catalog, name: str) -> int:
    oid = next(r.oid for r in catalog.relations if r.name == name)
    assert oid is not None
    return oid


def findings(tables: Tables, catalog: Catalog) -> list[tuple[str, str]]:
    return [(f.check, f.object) for f in diagnose([tables], catalog)]


def test_a_healthy_catalog_has_no_findings(tables: Tables) -> None:
    assert diagnose([tables], healthy(tables)) == []


def test_unforced_rls_names_the_table(tables: Tables) -> None:
    catalog = healthy(tables)
    rows = [r._replace(rls_forced=False) if r.name == tables.memories.name else r
            for r in catalog.relations]
    assert findings(tables, replace(catalog, relations=rows)) == [
        ("rls_forced", f"table {tables.memories.qualified}")]


def test_missing_relation_is_named_and_not_checked_further(tables: Tables) -> None:
    catalog = healthy(tables)
    rows = [r._replace(oid=None) if r.name == tables.scopes.name else r
            for r in catalog.relations]
    assert findings(tables, replace(catalog, relations=rows)) == [
        ("present", f"table {tables.scopes.qualified}")]


def test_tenant_policy_with_a_different_with_check_is_named(tables: Tables) -> None:
    catalog = healthy(tables)
    oid = oid_of(catalog, tables.scopes.name)
    rows = [p._replace(check="true") if p.table_oid == oid and p.command == "*" else p
            for p in catalog.policies]
    found = diagnose([tables], replace(catalog, policies=rows))
    assert [(f.check, f.object) for f in found] == [
        ("tenant_policy", f"policy {tenant_policy_name(tables)} on table "
                          f"{tables.scopes.qualified}")]
    assert "must be identical" in found[0].problem


def test_a_further_permissive_policy_for_the_app_role_is_named(tables: Tables) -> None:
    catalog = healthy(tables)
    oid = oid_of(catalog, tables.memories.name)
    leak = Policy(oid, "leak", "r", True, ["public"], "true", None)
    assert findings(tables, replace(catalog, policies=[*catalog.policies, leak])) == [
        ("extra_policy", f"policy leak on table {tables.memories.qualified}")]


def test_bypassrls_on_a_member_of_the_app_role_is_named(tables: Tables) -> None:
    catalog = healthy(tables)
    member = Role("svc_worker", False, True, [APP])
    found = diagnose([tables], replace(catalog, roles=[*catalog.roles, member]))
    assert [(f.check, f.object) for f in found] == [("runtime_role", "role svc_worker")]
    assert "a member of primitives_app" in found[0].problem


def test_superuser_runtime_role_is_named(tables: Tables) -> None:
    catalog = healthy(tables)
    roles = [Role(APP, True, False, [APP]), Role(AUDITOR, False, False, [AUDITOR])]
    assert findings(tables, replace(catalog, roles=roles)) == [
        ("runtime_role", f"role {APP}")]


def test_a_runtime_role_that_may_create_is_named_once_per_place(tables: Tables) -> None:
    catalog = healthy(tables)
    creators = [Creator(APP, "schema public"), Creator(APP, "database agents"),
                Creator("svc_worker", "schema platform")]
    found = diagnose([tables], replace(catalog, creators=creators))
    assert sorted((f.check, f.object, f.problem.split(":")[0]) for f in found) == [
        ("runtime_create", f"role {APP}", "may CREATE in database agents"),
        ("runtime_create", f"role {APP}", "may CREATE in schema public"),
        ("runtime_create", "role svc_worker", "may CREATE in schema platform"),
    ]


def test_a_superuser_runtime_role_is_named_for_that_alone(tables: Tables) -> None:
    catalog = healthy(tables)
    roles = [Role(APP, True, False, [APP]), Role(AUDITOR, False, False, [AUDITOR])]
    creators = [Creator(APP, "schema public")]  # a superuser may create anywhere
    assert findings(tables, replace(catalog, roles=roles, creators=creators)) == [
        ("runtime_role", f"role {APP}")]


def test_truncate_for_the_app_role_and_insert_for_the_auditor_are_named(tables: Tables) -> None:
    catalog = healthy(tables)
    oid = oid_of(catalog, tables.memories.name)
    extra = [Grant(oid, APP, "TRUNCATE"), Grant(oid, AUDITOR, "INSERT")]
    found = diagnose([tables], replace(catalog, grants=[*catalog.grants, *extra]))
    assert {(f.check, f.object) for f in found} == {
        ("grants", f"table {tables.memories.qualified}")}
    assert len(found) == 2


def test_table_level_update_or_delete_for_the_app_role_is_named_as_a_lock_hazard(
    tables: Tables,
) -> None:
    catalog = healthy(tables)
    oid = oid_of(catalog, tables.scopes.name)
    extra = [Grant(oid, APP, "UPDATE"), Grant(oid, APP, "DELETE"), Grant(oid, APP, "MAINTAIN")]
    found = diagnose([tables], replace(catalog, grants=[*catalog.grants, *extra]))
    assert [(f.check, f.object) for f in found] == [("grants", f"table {tables.scopes.qualified}")] * 3
    assert all("LOCK the table in any mode" in f.problem for f in found)


def test_column_update_is_allowed_except_on_the_tenant_column(tables: Tables) -> None:
    catalog = healthy(tables)
    oid = oid_of(catalog, tables.memories.name)
    extra = [Grant(oid, APP, "UPDATE", "superseded_at"),
             Grant(oid, APP, "UPDATE", tables.tenant_column),
             Grant(oid, AUDITOR, "UPDATE", "content")]
    found = diagnose([tables], replace(catalog, grants=[*catalog.grants, *extra]))
    assert sorted(f.problem for f in found) == [
        f"grants UPDATE (content) to {AUDITOR}",
        f"grants UPDATE ({tables.tenant_column}) to {APP}: a row could be moved to another "
        "tenant"]


def test_unique_index_not_led_by_the_tenant_is_named(tables: Tables) -> None:
    catalog = healthy(tables)
    oid = oid_of(catalog, tables.memories.name)
    bad = [UniqueIndex(oid, "mace.global_key", "key"), UniqueIndex(oid, "mace.expr", None)]
    found = diagnose([tables], replace(catalog, indexes=[*catalog.indexes, *bad]))
    assert [(f.check, f.object) for f in found] == [
        ("tenant_leading_unique", "index mace.expr"),
        ("tenant_leading_unique", "index mace.global_key")]
    assert "an expression" in found[0].problem


def test_disabled_journal_trigger_is_named(tables: Tables) -> None:
    catalog = healthy(tables)
    oid = oid_of(catalog, tables.events.name)
    rows = [t._replace(enabled="D") if t.table_oid == oid and t.name == "refuse" else t
            for t in catalog.triggers]
    found = diagnose([tables], replace(catalog, triggers=rows))
    assert [(f.check, f.object) for f in found] == [
        ("triggers", f"table {tables.events.qualified}")] * 2  # UPDATE and DELETE
    assert all("is disabled" in f.problem for f in found)


@pytest.mark.parametrize("function", ["compiled", "other"])
def test_chain_trigger_must_call_the_compiled_or_the_generic_function(
    tables: Tables, function: str
) -> None:
    catalog = healthy(tables)
    oid = oid_of(catalog, tables.events.name)
    name = tables.chain_function_name if function == "compiled" else "public.chain_event"
    rows = [t._replace(function=name) if t.table_oid == oid and t.name == "chain" else t
            for t in catalog.triggers]
    found = diagnose([tables], replace(catalog, triggers=rows))
    if function == "compiled":
        assert found == []
    else:
        assert [(f.check, f.object) for f in found] == [
            ("triggers", f"table {tables.events.qualified}")]
        assert tables.chain_function_name in found[0].problem
        assert "primitives.chain_event()" in found[0].problem


def test_view_without_security_invoker_is_named(tables: Tables) -> None:
    catalog = healthy(tables)
    rows = [r._replace(options=["security_invoker=false"]) if r.name ==
            tables.audit_erasures.name else r for r in catalog.relations]
    assert findings(tables, replace(catalog, relations=rows)) == [
        ("security_invoker", f"view {tables.audit_erasures.qualified}")]


def test_a_setting_persisted_on_a_runtime_role_is_named_with_its_fix(tables: Tables) -> None:
    settings = [RoleSetting(APP, None, "default_transaction_read_only=on"),
                RoleSetting(AUDITOR, "prod", "search_path=nowhere")]
    found = diagnose([tables], replace(healthy(tables), role_settings=settings))
    assert [(f.check, f.object) for f in found] == [
        ("role_settings", f"role {APP}"), ("role_settings", f"role {AUDITOR}")]
    assert "default_transaction_read_only=on in every database" in found[0].problem
    assert f"ALTER ROLE {APP} RESET ALL" in found[0].problem


def test_built_ins_that_reach_other_tenants_are_named_per_role(tables: Tables) -> None:
    reach = [RuntimeReach(APP, "function", "pg_terminate_backend(integer,bigint)"),
             RuntimeReach(APP, "function", "pg_advisory_lock(bigint)"),
             RuntimeReach(AUDITOR, "view", "pg_stat_user_tables")]
    found = diagnose([tables], replace(healthy(tables), reach=reach))
    assert sorted((f.check, f.object) for f in found) == [
        ("runtime_functions", f"role {APP}"), ("runtime_functions", f"role {APP}"),
        ("runtime_functions", f"role {AUDITOR}")]
    assert any("stall its writes" in f.problem for f in found)


def test_security_definer_functions_need_a_fixed_search_path_and_no_public_execute(
    tables: Tables,
) -> None:
    definers = [Definer("primitives.tenant_xact_lock(text, text)", "pg_catalog, pg_temp", False),
                Definer("platform.open(uuid)", None, False),
                Definer("platform.widened(uuid)", "pg_catalog, public", False),
                Definer("platform.everyone(uuid)", "pg_catalog, pg_temp", True)]
    found = findings(tables, replace(healthy(tables), definers=definers))
    assert found == [("security_definer", "function platform.everyone(uuid)"),
                     ("security_definer", "function platform.open(uuid)"),
                     ("security_definer", "function platform.widened(uuid)")]


def test_every_check_is_documented_in_the_compliance_guide() -> None:
    guide = (ROOT / "docs" / "compliance.md").read_text(encoding="utf-8")
    missing = [name for name in CHECKS if f"`{name}`" not in guide]
    assert not missing


def test_the_maintainer_role_must_exist_stay_nologin_and_have_no_runtime_member(
        tables: Tables) -> None:
    catalog = healthy(tables)
    ok = MaintainerRole(True, False, False, False, ["admin"])
    assert findings(tables, replace(catalog, maintainer=ok)) == []
    bad = MaintainerRole(True, True, False, True, ["admin", APP])
    found = diagnose([tables], replace(catalog, maintainer=bad))
    assert [(f.check, f.object) for f in found] == [
        ("maintainer_role", "role primitives_maintainer")] * 3
    problems = " | ".join(f.problem for f in found)
    assert "LOGIN" in problems and "BYPASSRLS" in problems and f"runtime role {APP}" in problems
    missing = MaintainerRole(False, False, False, False, [])
    assert findings(tables, replace(catalog, maintainer=missing)) == [
        ("maintainer_role", "role primitives_maintainer")]
