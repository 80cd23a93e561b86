"""The server CPU A/B diagnostic (``python -m bench.server_ab``): two copies of the bench spec
in one database, the variant's SQL on the second only, every write landed (structure, not
timings)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from bench._env import scratch_database
from bench._targets import BENCH_SPEC
from bench.server_ab import (
    COPIES,
    MESSAGES,
    _form,
    copy_spec,
    main,
    measure,
    render_table,
    variant_sql,
)
from primitives._project import migrate
from primitives.db._oneshot import _commands, _Prepared
from primitives.db._pipeline import SET_TENANT, Command
from primitives.spec import load_spec
from tests.conftest import PostgresHandle


def test_each_copy_is_the_bench_spec_under_its_own_name_and_tables() -> None:
    bench = load_spec(BENCH_SPEC)
    for name in COPIES:
        copy = copy_spec(name)
        assert copy.agent == name
        assert copy.persistence.store.prefix == name
        assert copy.persistence.store.schema_ == bench.persistence.store.schema_
        assert copy.persistence.checkpointer.schema_ == f"{name}_graph"
        assert copy.anchor.tenant_key == bench.anchor.tenant_key
        assert copy.tier_names == bench.tier_names


def test_a_variant_names_the_variant_copy_and_a_bad_one_says_so(tmp_path: Path) -> None:
    good = tmp_path / "v.sql"
    good.write_text("DROP INDEX {schema}.{variant}_memories_tsv_match_idx;\n")
    assert variant_sql(good) == "DROP INDEX platform.variant_memories_tsv_match_idx;\n"
    with pytest.raises(SystemExit, match="cannot read the variant"):
        variant_sql(tmp_path / "missing.sql")
    empty = tmp_path / "empty.sql"
    empty.write_text("  \n")
    with pytest.raises(SystemExit, match="holds no SQL"):
        variant_sql(empty)


def test_a_run_interleaves_both_copies_and_lands_every_write(
    pg: PostgresHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)  # its databases on the session's server
    variant = tmp_path / "no_gin.sql"
    variant.write_text("DROP INDEX {schema}.{variant}_memories_tsv_match_idx;\n")
    out = tmp_path / "ab.json"
    result = measure(variant=variant, writes=20, rounds=2, warmup=3, tenants=5, out=out,
                     command="python -m bench.server_ab (smoke)", progress=lambda _: None)
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    assert result["rows"] == {name: {"memories": 46, "memory_events": 46} for name in COPIES}
    assert len(result["rounds"]) == 2
    for row in result["rounds"]:
        assert row["base"]["server_us"] > 0 and row["variant"]["server_us"] > 0
    ratios = result["variant_over_base"]["per_round"]
    assert ratios == [round(r["variant"]["server_us"] / r["base"]["server_us"], 3)
                      for r in result["rounds"]]
    table = render_table(result)
    assert "python -m bench.server_ab (smoke)" in table and str(ratios[0]) in table


def test_the_variant_runs_on_the_variant_copy_only(
    pg: PostgresHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    refuse = tmp_path / "refuse.sql"
    refuse.write_text("ALTER TABLE {schema}.{variant}_memories "
                      "ADD CONSTRAINT {variant}_refuse CHECK (content = '');\n")
    with pytest.raises(psycopg.errors.CheckViolation) as caught:
        measure(variant=refuse, writes=2, rounds=1, warmup=1, tenants=2, out=None,
                progress=lambda _: None)
    assert caught.value.diag.constraint_name == "variant_refuse"
    assert caught.value.diag.table_name == "variant_memories"
    broken = tmp_path / "broken.sql"
    broken.write_text("ALTER TABLE {schema}.{variant}_nothing ADD COLUMN x int;\n")
    with pytest.raises(SystemExit, match=r"broken\.sql failed"):
        measure(variant=broken, writes=2, rounds=1, out=None, progress=lambda _: None)


def test_each_message_form_rewrites_the_engines_message() -> None:
    call = _Prepared("primitives_once_x", "PREPARE ...", (b"1",))
    engine = _commands(b"t", call, True, tenant_prepared=True)
    execute = Command(b"primitives_once_x", (b"1",), prepared=True)
    tenant = Command(b"primitives_set_tenant", (b"t",), prepared=True)
    assert engine == [Command(b"BEGIN"), tenant, execute, Command(b"COMMIT"),
                      Command(b"RESET ALL")]
    unnamed = _commands(b"t", call, True)
    assert unnamed == [Command(b"BEGIN"), Command(SET_TENANT, (b"t",)), *engine[2:]]
    forms = {form: _form(engine, form) for form in MESSAGES if form != "items-array"}
    assert forms == {
        "engine": engine,
        "implicit": [tenant, execute, Command(b"RESET ALL")],
        "no-reset": engine[:-1],
        "unnamed-tenant": unnamed,
    }
    assert _form(unnamed, "implicit") == unnamed[1:-2] + unnamed[-1:]
    with pytest.raises(AssertionError, match="no longer have the shape"):
        _form([execute], "implicit")


def test_the_implicit_message_lands_every_write(
    pg: PostgresHandle, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    result = measure(variant=None, message="implicit", writes=10, rounds=1, warmup=2,
                     tenants=3, out=None, progress=lambda _: None)
    assert result["parameters"]["message"] == "implicit"
    assert result["rows"] == {name: {"memories": 12, "memory_events": 12} for name in COPIES}


def test_the_command_refuses_bad_counts(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--writes", "0"])
    assert "at least 1" in capsys.readouterr().err


def test_the_store_puts_land_on_both_copies(
    pg: PostgresHandle, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    new = measure(variant=None, write="put_new", writes=6, rounds=1, warmup=3, tenants=2,
                  out=None, progress=lambda _: None)
    assert new["parameters"]["write"] == "put_new"
    # 3 warm-up keys and 6 new ones per copy: a row and an observed event each
    assert new["rows"] == {name: {"memories": 9, "memory_events": 9} for name in COPIES}
    update = measure(variant=None, write="put_update", writes=6, rounds=1, warmup=3,
                     tenants=2, out=None, progress=lambda _: None)
    # each update supersedes a warm-up key's version: a row more, and its superseded,
    # observed and conflict_resolved events (the typology's update_with_supersession)
    assert update["rows"] == {name: {"memories": 9, "memory_events": 3 + 6 * 3}
                              for name in COPIES}
    assert all(row[c]["server_us"] > 0 for row in update["rounds"] for c in COPIES)
    # the variant copy's one-item put as the array of items a group of puts sends
    array = measure(variant=None, message="items-array", write="put_update", writes=4,
                    rounds=1, warmup=2, tenants=2, out=None, progress=lambda _: None)
    assert array["rows"] == {name: {"memories": 6, "memory_events": 2 + 4 * 3}
                             for name in COPIES}
    for message, write in (("implicit", "put_new"), ("items-array", "observe")):
        with pytest.raises(SystemExit, match="'items-array' weighs a store put"):
            measure(variant=None, message=message, write=write, writes=1, rounds=1,
                    out=None, progress=lambda _: None)


VARIANTS = sorted((Path(__file__).resolve().parents[2] / "bench" / "variants").glob("*.sql"))


@pytest.fixture(scope="module")
def variant_copy(pg: PostgresHandle) -> Iterator[str]:
    """The admin DSN of a scratch database holding the bench spec's ``variant`` copy."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
        with scratch_database("variants") as (dsn, _embedded):
            migrate([copy_spec("variant")], dsn=dsn, progress=lambda _: None)
            yield dsn


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.stem for v in VARIANTS])
def test_each_shipped_variant_applies_to_the_variant_copy(variant_copy: str, variant: Path) -> None:
    """Every file in bench/variants still finds what it rewrites (the chain trigger's text,
    the indexes it drops): applied in a transaction that is rolled back."""
    with psycopg.connect(variant_copy) as owner:
        owner.execute(variant_sql(variant).encode())
        owner.rollback()
