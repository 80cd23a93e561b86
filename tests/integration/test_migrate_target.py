"""``migrate --target``: the distributed plan needs a Citus coordinator; auto picks single."""

from __future__ import annotations

import pytest

from primitives._project import migrate
from primitives.errors import MigrationError
from tests.conftest import PostgresHandle
from tests.security._support import SPECS


def test_target_citus_is_refused_on_a_server_without_citus(pg: PostgresHandle) -> None:
    with pytest.raises(MigrationError, match="not a Citus coordinator"):
        migrate([SPECS[0]], dsn=pg.admin_dsn, progress=lambda _: None, target="citus")


def test_auto_migrates_a_plain_server_with_the_single_node_plan(pg: PostgresHandle) -> None:
    report = migrate([SPECS[0]], dsn=pg.admin_dsn, progress=lambda _: None)
    assert report.target == "single"
    assert [p.agent for p in report.plans] == [SPECS[0].agent]


def test_an_unknown_target_is_refused(pg: PostgresHandle) -> None:
    with pytest.raises(MigrationError, match="unknown migrate target"):
        migrate([SPECS[0]], dsn=pg.admin_dsn, progress=lambda _: None,
                target="sharded")  # type: ignore[arg-type]
