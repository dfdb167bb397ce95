"""models.yml's JSON schema (for editors) and its field reference (docs/), both made from schema.py.

    python -m generator.compile.schema_docs           # write schema/models.schema.json + docs/models-yml-reference.md
    python -m generator.compile.schema_docs --check   # exit 1 if either differs from what schema.py gives (make check)

The JSON schema has models.yml's own layout, not pydantic's: the reserved keys (defaults, gateway, gpu_memory,
metrics, on_demand) are properties, every other key is a model (additionalProperties), and the key names follow
the loader's rules. It is JSON Schema draft-07, the draft the YAML language server (VS Code's YAML extension and
other editors) fully supports; models.yml points at it with a `# yaml-language-server: $schema=...` modeline.
The loader stays the judge: the schema is what an editor can check while you type (types, names, enums, ranges,
sizes), never stricter than the loader.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from pydantic.json_schema import GenerateJsonSchema

from .load.schema import MODEL_NAME, RESERVED_NAMES, TOP_LEVEL, ModelsFile

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_FILE = Path("schema/models.schema.json")
REFERENCE_FILE = Path("docs/models-yml-reference.md")
REFRESH = "make schema"
MODELINE = "# yaml-language-server: $schema="

# every definition, in reference order, with the models.yml path it describes
SECTIONS: dict[str, str] = {
    "ModelsFile": "models.yml (top level)",
    "ModelEntry": "<model>",
    "ReplicaRange": "<model>.replicas (a range)",
    "HostedEntry": "<model> with provider: (hosted)",
    "LitellmParams": "<model>.litellm",
    "OnDemand": "<model>.on_demand",
    "Nodes": "<model>.nodes",
    "Media": "<model>.media",
    "Limits": "<model>.limits",
    "Adapter": "<model>.adapters.<name>",
    "ModelK8s": "<model>.k8s",
    "Toleration": "<model>.k8s.tolerations[]",
    "Defaults": "defaults",
    "Gateway": "gateway",
    "GatewayK8s": "gateway.k8s",
    "Metrics": "metrics",
    "Grafana": "metrics.grafana",
    "MetricsK8s": "metrics.k8s",
    "Controller": "on_demand",
    "Person": "people.<name>",
}
ALSO = {
    "LitellmParams": "defaults.litellm",
    "OnDemand": "defaults.on_demand",
    "ModelK8s": "defaults.k8s",
    "Media": "defaults.media",
    "Limits": "defaults.limits",
}


class _NoFieldTitles(GenerateJsonSchema):
    """Field titles would only repeat the key ("Max Tokens"); a type's own title (a size, a duration) stays."""

    def field_title_should_be_set(self, schema) -> bool:  # schema untyped: pydantic-core's schema union
        return False


def _tidy(node: Any) -> Any:
    """Draft-07 shape: `$ref` alone (its siblings would be ignored: wrapped in allOf), one-line descriptions,
    no object defaults beside a `$ref` (each nested field has its own default)."""
    if isinstance(node, list):
        return [_tidy(n) for n in node]
    if not isinstance(node, dict):
        return node
    node = {k: _tidy(v) for k, v in node.items()}
    if isinstance(node.get("description"), str):
        node["description"] = " ".join(node["description"].split())
    if "$ref" in node and len(node) > 1:
        ref = node.pop("$ref")
        node.pop("default", None)
        node = {"allOf": [{"$ref": ref}], **node} if node.keys() - {"allOf"} else {"$ref": ref}
    return node


def json_schema() -> dict[str, Any]:
    core = ModelsFile.model_json_schema(ref_template="#/definitions/{model}", schema_generator=_NoFieldTitles)
    definitions = core.pop("$defs")
    missing = set(definitions) - set(SECTIONS)
    if missing:
        raise RuntimeError(f"schema_docs.SECTIONS has no place for {sorted(missing)}: add them")
    for name, d in definitions.items():
        d["title"] = SECTIONS[name]
    properties = dict(core["properties"])
    models = properties.pop("models")
    hosted = properties.pop("hosted")  # not a key of models.yml: the loader sorts the entries with provider: there
    service_names = sorted(RESERVED_NAMES - set(TOP_LEVEL))
    return _tidy(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "$comment": f"GENERATED from generator/compile/load/schema.py by `{REFRESH}` "
            "(python -m generator.compile.schema_docs); do not edit",
            "title": "models.yml",
            "description": "One entry per self-hosted model (any key other than "
            + ", ".join(TOP_LEVEL)
            + "), plus those optional blocks. docs/models-yml.md explains them.",
            "type": "object",
            "properties": properties,
            "propertyNames": {
                "anyOf": [
                    {"enum": list(TOP_LEVEL)},
                    {
                        "pattern": MODEL_NAME.pattern,
                        "not": {"enum": service_names},
                        "description": "a model name: lowercase letters, digits and '-', "
                        "starting and ending with a letter or digit (a DNS label); "
                        f"{', '.join(service_names)} name services of the stack",
                    },
                ]
            },
            "additionalProperties": {  # an entry with provider: is a hosted model, any other a self-hosted one
                "if": {"type": "object", "required": ["provider"]},
                "then": hosted["additionalProperties"],
                "else": models["additionalProperties"],
            },
            "not": {"propertyNames": {"enum": list(TOP_LEVEL)}, "description": "at least one model"},
            "definitions": definitions,
        }
    )


# --- the field reference ------------------------------------------------------------------------
def _anchor(heading: str) -> str:
    """GitHub's heading anchor: lowercase, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.lower()).replace(" ", "-")


def _heading(name: str) -> str:
    return f"`{SECTIONS[name]}`" + (f" (and `{ALSO[name]}`)" if name in ALSO else "")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _type(s: dict[str, Any]) -> str:
    if "$ref" in s:
        name = s["$ref"].rsplit("/", 1)[-1]
        return f"[`{SECTIONS[name]}`](#{_anchor(_heading(name))})"
    if "allOf" in s:
        return _type(s["allOf"][0])
    if "title" in s:  # a type with a name of its own (a size, a duration, a Kubernetes quantity)
        return s["title"]
    if "anyOf" in s or "oneOf" in s:  # oneOf: a tagged union (`replicas:` a count or a range)
        kinds = [_type(k) for k in s.get("anyOf", s.get("oneOf", [])) if k.get("type") != "null"]
        return " or ".join(dict.fromkeys(kinds))
    if "enum" in s or "const" in s:
        return " | ".join(f"`{v}`" for v in s.get("enum", [s.get("const")]))
    kind = s.get("type")
    if kind == "array":
        return "list of " + _type(s.get("items", {}))
    if kind == "object":
        extra = s.get("additionalProperties")  # a schema, or false / true (no other field / any)
        values = extra if isinstance(extra, dict) and extra else next(iter(s.get("patternProperties", {}).values()), {})
        return "mapping of name to " + (_type(values) if values else "value")
    if kind in ("integer", "number"):
        low = s.get("minimum", s.get("exclusiveMinimum"))
        high = s.get("maximum")
        word = "integer" if kind == "integer" else "number"
        if low is not None and high is not None:
            return f"{word} {low}..{high}" if "minimum" in s else f"{word} > {low}, <= {high}"
        if low is not None:
            return f"{word} >= {low}" if "minimum" in s else f"{word} > {low}"
        return word
    return {"boolean": "true / false", "string": "text"}.get(str(kind), str(kind))


def _default(s: dict[str, Any], required: bool) -> str:
    if required:
        return "**required**"
    if "default" not in s or s["default"] is None:
        return ""
    return f"`{json.dumps(s['default'])}`"


def _table(schema: dict[str, Any], defs: dict[str, Any]) -> list[str]:
    rows = ["| field | type | default | what it is |", "| --- | --- | --- | --- |"]
    required = set(schema.get("required", []))
    for field, s in schema.get("properties", {}).items():
        ref = (s.get("allOf") or [s])[0].get("$ref")
        what = s.get("description") or (defs[ref.rsplit("/", 1)[-1]].get("description", "") if ref else "")
        rows.append(f"| `{field}` | {_cell(_type(s))} | {_cell(_default(s, field in required))} | {_cell(what)} |")
    return rows


def reference(schema: dict[str, Any] | None = None) -> str:
    schema = schema or json_schema()
    defs = schema["definitions"]
    out = [
        "# models.yml field reference",
        "",
        f"<!-- GENERATED from generator/compile/load/schema.py by `{REFRESH}` "
        "(python -m generator.compile.schema_docs); do not edit. -->",
        "",
        "Every field models.yml takes, its type and its default, generated from the typed schema the generator",
        "validates with (`generator/compile/load/schema.py`), so it cannot drift; "
        "`make check` fails when this page is stale.",
        "What the fields are for, with examples: [models.yml](models-yml.md); the rules checked across fields and",
        f"models: [rules](rules.md). The same schema, as JSON Schema for editors: [`{SCHEMA_FILE}`](../{SCHEMA_FILE}).",
        "",
        "Sizes follow vLLM: `16K` = 16384, `16k` = 16000, `25.6k` = 25600 (decimals only with k/m/g/t).",
        "Durations: `90s`, `10m`, `1h` or a number of seconds.",
        "",
        "## Top level",
        "",
        *_table(schema, defs),
        f"| `<model>` (any other key) | [`<model>`](#{_anchor(_heading('ModelEntry'))}) | | "
        f"{_cell(defs['ModelEntry']['description'])} A name is a DNS label (lowercase letters, digits, '-'); "
        f"{', '.join(f'`{n}`' for n in sorted(RESERVED_NAMES - set(TOP_LEVEL)))} are taken by services of the stack. |",
        f"| `<model>` with `provider:` | [`<model>` (hosted)](#{_anchor(_heading('HostedEntry'))}) | | "
        f"{_cell(defs['HostedEntry']['description'])} |",
    ]
    for name in list(SECTIONS)[1:]:
        d = defs[name]
        out += ["", f"## {_heading(name)}", ""]
        if d.get("description"):
            out += [d["description"], ""]
        out += _table(d, defs)
    return "\n".join(out) + "\n"


def rendered() -> dict[Path, str]:
    schema = json_schema()
    return {SCHEMA_FILE: json.dumps(schema, indent=2, ensure_ascii=False) + "\n", REFERENCE_FILE: reference(schema)}


def stale(root: Path = ROOT) -> list[Path]:
    return [rel for rel, text in rendered().items() if not (root / rel).is_file() or (root / rel).read_text() != text]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m generator.compile.schema_docs", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is stale")
    ap.add_argument("--root", type=Path, default=ROOT, help="the repository root (default: this checkout)")
    args = ap.parse_args(argv)
    if args.check:
        found = stale(args.root)
        for rel in found:
            print(
                f"stale: {rel} differs from what generator/compile/load/schema.py gives; run `{REFRESH}`",
                file=sys.stderr,
            )
        if not found:
            print(f"up to date: {SCHEMA_FILE}, {REFERENCE_FILE}")
        return 1 if found else 0
    for rel, text in rendered().items():
        path = args.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
