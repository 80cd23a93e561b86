"""YAML reading that remembers where every key and item came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from primitives.errors import SpecError

__all__ = ["LineMap", "read_yaml"]

Path_ = tuple[str | int, ...]


@dataclass
class LineMap:
    """Maps a path inside a YAML document (keys and list indexes) to its 1-based line."""

    lines: dict[Path_, int] = field(default_factory=dict)

    def line_of(self, path: Path_) -> int:
        """Line of ``path``, or of its nearest ancestor that the document spells out."""
        for end in range(len(path), -1, -1):
            found = self.lines.get(tuple(path[:end]))
            if found is not None:
                return found
        return 1


def _walk(node: yaml.Node, path: Path_, out: LineMap, file: str, problems: list[SpecError]) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value
            line = key_node.start_mark.line + 1
            if key in seen:
                problems.append(
                    SpecError(
                        f"duplicate key '{key}' (first given at line {seen[key]})",
                        file=file,
                        line=line,
                        field=_dotted((*path, key)),
                    )
                )
                continue
            seen[key] = line
            out.lines[(*path, key)] = line
            _walk(value_node, (*path, key), out, file, problems)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            out.lines[(*path, index)] = item.start_mark.line + 1
            _walk(item, (*path, index), out, file, problems)


def _dotted(path: Path_) -> str:
    text = ""
    for step in path:
        if isinstance(step, int):
            text += f"[{step}]"
        else:
            text += ("." if text else "") + str(step)
    return text


def read_yaml(text: str, file: str) -> tuple[Any, LineMap]:
    """Parse ``text``; return the data and a :class:`LineMap`. Malformed YAML raises SpecError."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = err.problem or "malformed YAML"
        raise SpecError(f"malformed YAML: {problem}", file=file, line=line) from err
    except yaml.YAMLError as err:
        raise SpecError(f"malformed YAML: {err}", file=file) from err
    lines = LineMap()
    problems: list[SpecError] = []
    if node is not None:
        lines.lines[()] = node.start_mark.line + 1
        _walk(node, (), lines, file, problems)
    if problems:
        raise SpecError(problems[0].message, file=file, line=problems[0].line,
                        field=problems[0].field, problems=problems)
    return data, lines


dotted = _dotted
