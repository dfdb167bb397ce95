"""Parse a `vllm serve ...` line with shlex and check every flag against the pinned vLLM's catalog.

The catalog (data/vllm_flags.json) is generated from vLLM's own argument parser by
`generator.compile.load.catalog_build`; this module never imports vLLM.
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .sizes import is_auto, parse_size

CATALOG_PATH = Path(__file__).parent / "data" / "vllm_flags.json"

# Flags the stack sets itself; a user value would be ignored or leak a secret.
OWNED_FLAGS = {
    "--api-key": "keys are generated into compose/.env and passed as VLLM_API_KEY: remove --api-key from the command",
    "--host": "the stack binds each backend itself (internal network, or 127.0.0.1 locally): remove --host",
    "--allowed-media-domains": "the stack sets it from models.yml (`media: {domains: [images.example.com]}`; none by "
    "default, since without it vLLM fetches any URL a client names): remove it from the command",
    "--allowed-local-media-path": "it lets every key holder make the backend read files under that path (file:// "
    "media URLs): send media inline (data: URLs), or list a media host in models.yml "
    "`media: {domains: [...]}`",
}
_NUMBER = re.compile(r"-?\d+(\.\d+)?")


class FlagError(ValueError):
    def __init__(self, flag: str, message: str):
        self.flag = flag
        super().__init__(message)


@dataclass(frozen=True)
class Catalog:
    vllm_version: str
    flags: dict
    aliases: dict
    removed: dict

    def resolve(self, name: str) -> str | None:
        if name in self.flags:
            return name
        return self.aliases.get(name)

    def suggest(self, name: str) -> str | None:
        names = list(self.flags) + [a for a in self.aliases if a.startswith("--")]
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
        if not close:  # a prefix of a real flag ("--max-model") or a longer spelling ("--max-model-length")
            close = sorted((n for n in names if n.startswith(name) or name.startswith(n)), key=len, reverse=True)
        return close[0] if close else None


@cache
def load_catalog(path: Path = CATALOG_PATH) -> Catalog:
    data = json.loads(path.read_text())
    return Catalog(data["vllm_version"], data["flags"], data["aliases"], data["removed"])


@dataclass(frozen=True)
class Flag:
    name: str  # canonical spelling from the catalog
    values: tuple[str, ...]  # empty for on/off flags
    negated: bool = False  # --no-enable-...


@dataclass(frozen=True)
class ServeCommand:
    model: str
    args: tuple[str, ...]  # everything after the model, as the user wrote it (line breaks removed)
    flags: tuple[Flag, ...]

    def last(self, name: str) -> Flag | None:
        found = [f for f in self.flags if f.name == name]
        return found[-1] if found else None

    def value(self, name: str) -> str | None:
        flag = self.last(name)
        return flag.values[0] if flag and flag.values else None

    def enabled(self, name: str) -> bool:
        flag = self.last(name)
        return flag is not None and not flag.negated


def _split(command: str) -> list[str]:
    try:
        tokens = shlex.split(command.replace("\\\n", " "))
    except ValueError as exc:  # unbalanced quotes
        raise FlagError("", f"cannot split the command like a shell would: {exc}") from None
    return [t for t in tokens if t.strip()]


def _check_value(name: str, spec: dict, value: str) -> None:
    kind = spec["type"]
    try:
        if kind == "int":
            int(value)
        elif kind == "float":
            float(value)
        elif kind == "size":
            parse_size(value)
        elif kind == "size_or_auto" and not is_auto(value):
            parse_size(value)
    except ValueError as exc:
        raise FlagError(name, f"{name} {value!r} is not a valid {kind.replace('_or_auto', '')}: {exc}") from None
    choices = spec.get("choices")
    if choices and value not in choices:
        close = difflib.get_close_matches(value, choices, n=1, cutoff=0.5)
        hint = f"did you mean {close[0]!r}? " if close else ""
        shown = ", ".join(choices[:40]) + (", ..." if len(choices) > 40 else "")
        raise FlagError(name, f"{name} {value!r} is not one of the pinned vLLM's choices; {hint}valid: {shown}")


def _looks_like_flag(token: str) -> bool:
    return token.startswith("-") and not _NUMBER.fullmatch(token)


def parse_serve_command(command: str, catalog: Catalog | None = None) -> ServeCommand:
    """Parse and check `vllm serve MODEL [flags]`; raise FlagError naming the flag and the fix."""
    catalog = catalog or load_catalog()
    tokens = _split(command)
    if tokens[:2] != ["vllm", "serve"]:
        raise FlagError(
            "", "must start with `vllm serve <model>` (the stack runs it in the vLLM image or as a local process)"
        )
    rest = tokens[2:]
    model: str | None = None
    flags: list[Flag] = []
    args_after_model: list[str] = []
    i = 0
    while i < len(rest):
        token = rest[i]
        i += 1
        if not _looks_like_flag(token):
            if model is None:
                model = token
                continue
            raise FlagError(token, f"unexpected argument {token!r}: a second model, or a value without its flag?")
        args_after_model.append(token)
        written, eq, inline = token.partition("=")
        name = written.replace("_", "-") if written.startswith("--") else written
        base = name.split(".", 1)[0]  # --compilation-config.mode=3 style
        if base in catalog.removed:
            raise FlagError(base, f"{base} {catalog.removed[base]}")
        if base in OWNED_FLAGS:
            raise FlagError(base, OWNED_FLAGS[base])
        canonical = catalog.resolve(base)
        if canonical is None:
            guess = catalog.suggest(base)
            hint = f"did you mean {guess}?" if guess else "see `vllm serve --help`"
            raise FlagError(base, f"unknown vLLM {catalog.vllm_version} flag {base}; {hint}")
        spec = catalog.flags[canonical]
        negated = base.startswith("--no-") and not canonical.startswith("--no-")
        if "." in name and spec["type"] != "json":
            raise FlagError(base, f"{name}: only config flags take a .key suffix")
        if not spec["takes_value"]:
            if eq:
                raise FlagError(base, f"{base} is an on/off flag and takes no value: write {base} or --no-{base[2:]}")
            flags.append(Flag(canonical, (), negated))
            continue
        values: list[str] = []
        if eq:
            values.append(inline)
        else:
            while i < len(rest) and not _looks_like_flag(rest[i]):
                values.append(rest[i])
                args_after_model.append(rest[i])
                i += 1
                if spec["nargs"] not in ("+", "*"):
                    break
        if not values and spec["nargs"] not in ("?", "*"):
            raise FlagError(base, f"{base} needs a value")
        if "." not in name:
            for value in values:
                _check_value(base, spec, value)
        flags.append(Flag(canonical, tuple(values)))
    if model is None:
        model_flag = next((f for f in flags if f.name == "--model"), None)
        if model_flag is None or not model_flag.values:
            raise FlagError("", "no model given: write `vllm serve <hf-repo-or-path> ...`")
        model = model_flag.values[0]
    return ServeCommand(model=model, args=tuple(args_after_model), flags=tuple(flags))
