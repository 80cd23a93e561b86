"""The tutorial's shown outputs are what the commands print (docs/tutorial/declare-an-agent.md).

The test follows the tutorial in a fresh folder and a fresh database: each ``console`` block's
``$ primitives ...`` command runs through the CLI, each ``python`` block runs as written, and
the lines shown after it must be what it printed, in order (``...`` stands for lines left out;
a block without ``...`` must show every line but the validator's warnings). The edits the prose
asks for (a typo, a wrong anchor key, a promotion rule) are made here the same way.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from primitives.cli import main
from tests.conftest import PostgresHandle

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "tutorial" / "declare-an-agent.md"
SPEC = Path("agents/support_bot.yaml")
_HASH = re.compile(r"'[0-9a-f]{8}'")
_HIT = re.compile(r"^0\.\d{4} (.*) \{.*\}$", re.M)  # a hit: its score and ranks vary with ties


def _blocks() -> Iterator[tuple[str, list[str]]]:
    lang, lines = "", list[str]()
    inside = False
    for line in TUTORIAL.read_text().splitlines():
        if line.startswith("```"):
            if inside:
                yield lang, lines
            inside, lang, lines = not inside, line[3:].strip(), []
        elif inside:
            lines.append(line)


def _commands(block: list[str]) -> Iterator[tuple[list[str], list[str]]]:
    """(the arguments of a ``$ primitives`` command, the lines shown after it)."""
    command: list[str] | None = None
    shown: list[str] = []
    pending = ""
    for line in block:
        if pending or line.startswith("$ "):
            text = pending + line.removeprefix("$ ").strip()
            if text.endswith("\\"):
                pending = text[:-1] + " "
                continue
            pending = ""
            if command is not None:
                yield command, shown
            words = shlex.split(text)
            command, shown = (words[1:] if words[0] == "primitives" else None), []
            if command is None:
                command = []  # mkdir, cd, export: the fixture has done their work
        else:
            shown.append(line)
    if command is not None:
        yield command, shown


def _matches(shown: list[str], printed: str) -> None:
    lines = [line.rstrip() for line in printed.splitlines() if line.strip()]
    shown = [line.rstrip() for line in shown if line.strip()]
    if "..." not in [s.strip() for s in shown]:
        assert shown == [line for line in lines if not line.startswith("warning ")], printed
        return
    position = 0
    for line in shown:
        if line.strip() == "...":
            continue
        assert line in lines[position:], f"{line!r} not printed (in order):\n{printed}"
        position = lines.index(line, position) + 1


def _run(capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    main(args)
    captured = capsys.readouterr()
    return captured.out + captured.err


def _python(code: str) -> str:
    out = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out):
        warnings.simplefilter("always")
        exec(compile(code, str(TUTORIAL), "exec"), {"__name__": "tutorial"})
    shown = [f"{w.category.__name__}: {w.message}" for w in caught]
    return "\n".join([*shown, out.getvalue()])


def _edit(old: str, new: str) -> Callable[[], None]:
    text = SPEC.read_text()
    assert old in text
    SPEC.write_text(text.replace(old, new, 1))
    return lambda: SPEC.write_text(text)


def test_the_tutorial_shows_what_its_commands_print(
    pg: PostgresHandle, fresh_database: Callable[[], str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policies").symlink_to(ROOT / "policies")
    monkeypatch.setenv("PRIMITIVES_DSN", fresh_database())
    blocks = list(_blocks())
    console = [lines for lang, lines in blocks if lang == "console"]
    yamls = [lines for lang, lines in blocks if lang == "yaml"]
    pythons = [lines for lang, lines in blocks if lang == "python"]
    texts = [lines for lang, lines in blocks if lang == "text"]
    edits: list[Callable[[], Callable[[], None]] | None] = [
        None,  # init
        None,  # validate
        lambda: _edit("lifecycle: conversation_end", "lifecycle: conversation_ended"),
        lambda: _edit("scope_change: tenant_id", "scope_change: tenant"),
        lambda: _edit("behavior: {}", "\n".join(yamls[1])),
        lambda: _edit("behavior: {}", "\n".join(yamls[2])),
        None,  # compile
        None,  # migrate
        None,  # migrate again
    ]
    assert len(console) == len(edits), "a console block was added: say what it needs here"
    undo: Callable[[], None] | None = None
    for index, (block, edit) in enumerate(zip(console, edits, strict=True)):
        if undo is not None and index in (3, 4, 5):
            undo()  # each mistake is undone; the justified rule replaces the bare one
        if edit is not None:
            undo = edit()
        for args, shown in _commands(block):
            if args:
                _matches(shown, _run(capsys, args))
        if index == 0:  # the scaffold, shown trimmed: its lines in order
            written = SPEC.read_text().splitlines()
            _matches(["...", *yamls[0]], "\n".join(written))
        if index == 5:  # section 5 reads the spec with the justified rule in place
            _matches(texts[0], _python("\n".join(pythons[0])))
    for code, shown in zip(pythons[1:], texts[1:], strict=True):
        # the hashes cover ids and times; the lexical signal ranks the two printer rows
        # (equal text rank) in either order, so a hit is its tier and content
        printed = _HIT.sub(r"<hit> \1", _HASH.sub("'<hash>'", _python("\n".join(code))))
        shown = [_HIT.sub(r"<hit> \1", line) for line in shown]
        if not any(line.startswith("RuntimeWarning") for line in shown):
            printed = "\n".join(p for p in printed.splitlines()
                                 if not p.startswith("RuntimeWarning"))
        assert sorted(line.rstrip() for line in printed.splitlines() if line.strip()) == \
            sorted(_HASH.sub("'<hash>'", line) for line in shown if line.strip()), printed
