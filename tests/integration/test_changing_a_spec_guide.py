"""The `primitives plan` output shown in docs/changing-a-spec.md comes from a real run.

The guide's example is replayed here against a live database; the output between the
guide's markers must match it (``PRIMITIVES_UPDATE_DOCS=1`` rewrites the block).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from primitives._project import migrate
from primitives.cli import main
from primitives.spec import load_spec
from tests.conftest import PostgresHandle
from tests.integration.test_spec_evolution import TEMPLATE

pytestmark = pytest.mark.db

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "changing-a-spec.md"
BEGIN, END = "<!-- plan-output:begin -->", "<!-- plan-output:end -->"
SHOWN_PATH = "agents/notes.yaml"

BASE = {"agent": "guide_notes", "user_key": "user_id", "anchor_extra": "",
        "persistent": "team", "tier_extra": "", "retention": "365d",
        "schema": "guide_notes", "prefix": "notes", "dims": 8}


def _shown(tmp_path: Path, pg: PostgresHandle, monkeypatch: pytest.MonkeyPatch,
           capsys: pytest.CaptureFixture[str]) -> str:
    path = tmp_path / "notes.yaml"
    path.write_text(TEMPLATE.format(**BASE), encoding="utf-8")
    migrate([load_spec(path)], dsn=pg.admin_dsn, progress=lambda _: None)
    changed = {**BASE, "persistent": "org", "tier_extra": "\n    renamed_from: team",
               "retention": "30d", "dims": 16}
    path.write_text(TEMPLATE.format(**changed), encoding="utf-8")
    monkeypatch.setenv("PRIMITIVES_DSN", pg.admin_dsn)
    capsys.readouterr()
    assert main(["plan", str(path)]) == 1  # something is refused
    out = capsys.readouterr().out.replace(str(path), SHOWN_PATH)
    return f"$ primitives plan {SHOWN_PATH}\n{out}"


def test_the_guide_shows_the_output_of_a_real_plan(
    tmp_path: Path, pg: PostgresHandle, admin_conn: psycopg.Connection[Any],
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    try:
        shown = _shown(tmp_path, pg, monkeypatch, capsys)
    finally:
        admin_conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
            sql.Identifier(BASE["schema"])))
        admin_conn.execute("DELETE FROM primitives.agent_plans WHERE agent = %s",
                           (BASE["agent"],))
    guide = GUIDE.read_text(encoding="utf-8")
    block = f"{BEGIN}\n```text\n{shown}```\n{END}"
    if os.environ.get("PRIMITIVES_UPDATE_DOCS"):
        GUIDE.write_text(re.sub(re.escape(BEGIN) + ".*?" + re.escape(END),
                                lambda _: block, guide, flags=re.S), encoding="utf-8")
        return
    assert block in guide, "regenerate with PRIMITIVES_UPDATE_DOCS=1"
