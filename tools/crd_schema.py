"""A CustomResourceDefinition's v1 openAPIV3Schema without its descriptions, as compact JSON: what the tests validate
generated custom resources against (tests/unit/fixtures/lws/SOURCE.md). Descriptions are text only (no rule of the
schema lives in them); dropping them makes LeaderWorkerSet's 1.3 MB CRD a 130 KB file that loads at once.

    python3 tools/crd_schema.py <crd.yaml> <out.json>     (needs PyYAML: .venv/bin/python)
"""

from __future__ import annotations

import json
import sys

import yaml


def strip(node: object, in_properties: bool = False) -> object:
    """Every `description` keyword removed; a field *named* description (a key of `properties`) stays."""
    if isinstance(node, dict):
        if in_properties:  # keys are field names, values their schemas
            return {k: strip(v) for k, v in node.items()}
        return {
            k: strip(v, k in ("properties", "patternProperties", "definitions"))
            for k, v in node.items()
            if not (k == "description" and isinstance(v, str))
        }
    if isinstance(node, list):
        return [strip(x) for x in node]
    return node


def main(crd_path: str, out: str) -> None:
    with open(crd_path) as f:
        crd = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    (v1,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    with open(out, "w") as f:
        json.dump(strip(v1["schema"]["openAPIV3Schema"]), f, sort_keys=True, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main(*sys.argv[1:3])
