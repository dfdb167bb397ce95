"""What every generated file shares: the header naming its source, and one YAML style."""

from __future__ import annotations

from pathlib import Path

import yaml

from ..plan import Plan

GENERATED_MARK = b"# GENERATED from "  # how orphan detection recognises a file we wrote
# JSON has no comments: a generated JSON file that must be recognised opens with this key (json_header)
JSON_MARK = b'{\n  "_generated": "GENERATED from '
# the gateway's page files (renderers/litellm.py PAGE_FILES): the header in HTML, script and style comments
PAGE_MARKS = (b"<!-- GENERATED from ", b"// GENERATED from ", b"/* GENERATED from ")
GENERATED_MARKS = (GENERATED_MARK, JSON_MARK, *PAGE_MARKS)


def header(plan: Plan, comment: str = "#", regenerate: str = "make regenerate") -> str:
    return (
        f"{comment} GENERATED from {Path(plan.source).name} (sha256 {plan.source_digest[:16]}) "
        "by `python -m generator`;\n"
        f"{comment} vLLM flags checked against vLLM {plan.vllm_version}. "
        f"Do not edit: change models.yml, run `{regenerate}`.\n"
    )


def json_header(plan: Plan, regenerate: str = "make regenerate") -> dict[str, str]:
    """The header of a JSON file, as its first key (dump with json.dumps(..., indent=2): it opens with JSON_MARK)."""
    return {
        "_generated": f"GENERATED from {Path(plan.source).name} (sha256 {plan.source_digest[:16]}) by "
        f"`python -m generator`. Do not edit: change models.yml, run `{regenerate}`."
    }


class _Dumper(yaml.SafeDumper):
    """Short lists of scalars inline (`[vllm, serve]`), everything else in block style."""


def _represent_list(dumper: yaml.SafeDumper, data: list):
    flow = all(isinstance(x, (str, int, float)) for x in data) and len(repr(data)) <= 60
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


def _represent_str(dumper: yaml.SafeDumper, data: str):
    """A text of several lines (a healthcheck's script) as a literal block, as written, not one escaped line."""
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_Dumper.add_representer(list, _represent_list)
_Dumper.add_representer(str, _represent_str)


def dump_yaml(data: dict) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=4096, allow_unicode=True)
