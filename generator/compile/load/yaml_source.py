"""Read models.yml once: parsed data plus the line of every key, for error messages."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import yaml

from ...errors import ConfigError, Problem


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (plain YAML keeps the last one silently)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first at line {seen[key]})", key_node.start_mark
                )
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


@dataclass(frozen=True)
class Source:
    path: str  # as the user named it
    digest: str  # sha256 of the bytes read, named in generated headers
    data: dict
    root: yaml.Node

    def line_of(self, path: tuple) -> int | None:
        """Line of the deepest node along `path` (mapping keys / list indexes)."""
        node, line = self.root, self.root.start_mark.line + 1
        for part in path:
            if isinstance(node, yaml.MappingNode):
                match = next(((k, v) for k, v in node.value if k.value == str(part)), None)
                if match is None:
                    return line
                line, node = match[0].start_mark.line + 1, match[1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                node = node.value[part]
                line = node.start_mark.line + 1
            else:
                return line
        return line

    def where(self, path: tuple) -> str:
        line = self.line_of(path)
        return f"{self.path}:{line}" if line else self.path


def load_source(path: Path | str) -> Source:
    path = Path(path)
    shown = str(path)
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise ConfigError([Problem(shown, "", "file not found; pass --models PATH")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([Problem(shown, "", f"cannot read: {exc}")]) from None
    try:
        root = yaml.compose(text, Loader=_UniqueKeyLoader)
        data = yaml.load(text, Loader=_UniqueKeyLoader) if root is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{shown}:{mark.line + 1}" if mark else shown
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context = getattr(exc, "context", None)
        text_ = f"YAML syntax error: {problem}" + (f" ({context})" if context else "")
        raise ConfigError([Problem(where, "", text_)]) from None
    if root is None or data is None:
        raise ConfigError(
            [Problem(shown, "", "the file is empty; describe at least one model (see docs/models-yml.md)")]
        )
    if not isinstance(data, dict):
        raise ConfigError(
            [
                Problem(
                    f"{shown}:1",
                    "",
                    f"the top level must be a mapping of model name -> entry, not a {type(data).__name__}",
                )
            ]
        )
    return Source(shown, hashlib.sha256(raw).hexdigest(), data, root)
