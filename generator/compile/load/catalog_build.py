"""Build generator/compile/load/data/vllm_flags.json from the pinned vLLM's own argument parser.

Run with the interpreter that has the pinned vLLM (see Makefile `catalog`):

    .venv-vllm/bin/python -m generator.compile.load.catalog_build            # rewrite the catalog
    .venv-vllm/bin/python -m generator.compile.load.catalog_build --check    # exit 1 if it is stale

It also writes data/vllm_architectures.json: what vLLM's ModelConfig needs to pick a model's runner (generate or
pooling) and convert type when the command leaves them on auto (vllm/config/model.py `_get_runner_type`,
`_get_convert_type`): the registry's verdict for each architecture whose class could be inspected here, the
architecture-name suffix table it falls back to, and the sentence-transformers module types that make a model
pool by default. generator/compile/load/pooling.py applies the same decision to a model's config.json.

The generator itself only reads the JSON; it never imports vLLM.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

CATALOG_PATH = Path(__file__).parent / "data" / "vllm_flags.json"
ARCHITECTURES_PATH = Path(__file__).parent / "data" / "vllm_architectures.json"

# Flags that older vLLM releases accepted and the pinned one rejects, with what to do instead.
# Each one is checked against the parser below: a flag that still exists is an error here.
REMOVED_FLAGS = {
    "--enable-reasoning": "was removed in vLLM 0.10; --reasoning-parser alone turns reasoning on: "
    "delete --enable-reasoning",
    "--disable-log-requests": "was removed; request logging is off by default (--enable-log-requests turns it on): "
    "delete it",
    "--use-v2-block-manager": "was removed; the v2 block manager is the only one: delete it",
    "--num-scheduler-steps": "was removed with the V0 engine: delete it",
    "--worker-use-ray": "was removed: use --distributed-executor-backend ray",
    "--engine-use-ray": "was removed: use --distributed-executor-backend ray",
    "--tokenizer-pool-size": "was removed with the V0 engine: delete it",
    "--device": "was removed; vLLM detects the platform itself: delete it",
}


# Flags whose valid values live in vLLM registries rather than in argparse `choices`.
def _registry_choices() -> dict[str, list[str]]:
    import typing

    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
    from vllm.model_executor.model_loader import LoadFormats  # a Literal of the built-in loaders
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    choices = {
        "--tool-call-parser": sorted(ToolParserManager.list_registered()),
        "--reasoning-parser": sorted(ReasoningParserManager.list_registered()),
        "--quantization": sorted(QUANTIZATION_METHODS),
        "--load-format": sorted(typing.get_args(LoadFormats)),
    }
    empty = [flag for flag, values in choices.items() if not values]
    if empty:
        raise SystemExit(f"no choices found in this vLLM for {empty}: update _registry_choices")
    return choices


def _type_name(action: argparse.Action) -> str:
    fn = action.type
    if fn is None:
        return "str"
    name = getattr(fn, "__name__", type(fn).__name__)
    closure = getattr(fn, "__closure__", None)  # a function's (action.type may also be a FileType or a str)
    if name == "_optional_type" and closure:
        name = getattr(closure[0].cell_contents, "__name__", "str")
    return {
        "int": "int",
        "float": "float",
        "human_readable_int": "size",
        "human_readable_int_or_auto": "size_or_auto",
        "str": "str",
    }.get(name, "json" if ("dict" in name or "json" in name or "dataclass" in name) else "str")


def _scalar(value):
    return value if isinstance(value, (int, float, str, bool)) or value is None else None


def build() -> dict:
    import vllm
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())
    registry = _registry_choices()
    flags: dict[str, dict] = {}
    aliases: dict[str, str] = {}
    for action in parser._actions:
        longs = [s for s in action.option_strings if s.startswith("--")]
        if not longs or isinstance(action, argparse._HelpAction):
            continue
        canonical = longs[0]
        takes_value = action.nargs != 0
        entry = {
            "takes_value": takes_value,
            "type": _type_name(action) if takes_value else "bool",
            "nargs": action.nargs if action.nargs in ("+", "*", "?") else None,
            "repeatable": isinstance(action, argparse._AppendAction),
            "choices": sorted(map(str, action.choices)) if action.choices else registry.get(canonical),
            "default": _scalar(action.default),
        }
        flags[canonical] = entry
        for alias in action.option_strings:
            if alias != canonical:
                aliases[alias] = canonical
    known = set(flags) | set(aliases)
    still_there = sorted(f for f in REMOVED_FLAGS if f in known)
    if still_there:
        raise SystemExit(f"REMOVED_FLAGS lists flags the pinned vLLM still has: {still_there}")
    return {
        "vllm_version": vllm.__version__,
        "flags": dict(sorted(flags.items())),
        "aliases": dict(sorted(aliases.items())),
        "removed": dict(sorted(REMOVED_FLAGS.items())),
    }


def build_architectures() -> dict:
    """The registry's runner for each architecture (in-process class inspection; an architecture whose module does
    not import in this environment, e.g. one needing torchvision, is left to the suffix table, as vLLM itself
    falls back to it for architectures it cannot resolve)."""
    import logging

    import vllm
    from vllm.config.model import iter_architecture_defaults
    from vllm.model_executor.models import registry as vllm_registry
    from vllm.model_executor.models.interfaces_base import is_pooling_model, is_text_generation_model
    from vllm.model_executor.models.registry import ModelRegistry
    from vllm.transformers_utils.config import _ST_POOLING_MODULE_TYPES

    logging.disable(logging.WARNING)  # per-class import noise
    # what a pooling class serves, by the registry table that lists it (a class may be listed twice: last wins)
    tasks = {
        arch: task
        for table, task in (
            ("_EMBEDDING_MODELS", "embed"),
            ("_REWARD_MODELS", "embed"),
            ("_LATE_INTERACTION_MODELS", "token_embed"),
            ("_TOKEN_CLASSIFICATION_MODELS", "token_classify"),
            ("_SEQUENCE_CLASSIFICATION_MODELS", "classify"),
        )
        for arch in getattr(vllm_registry, table)
    }
    runners: dict[str, dict[str, str]] = {}
    for arch in sorted(ModelRegistry.get_supported_archs()):
        try:
            cls = ModelRegistry.models[arch].load_model_cls()
        except Exception:  # noqa: BLE001  a module that needs a package this environment lacks
            continue
        runner = "pooling" if is_pooling_model(cls) else "generate" if is_text_generation_model(cls) else None
        if runner is None:  # neither: vLLM decides by the suffix table
            continue
        runners[arch] = {"runner": runner, **({"task": tasks.get(arch, "embed")} if runner == "pooling" else {})}
    logging.disable(logging.NOTSET)
    return {
        "vllm_version": vllm.__version__,
        "suffix_defaults": [[suffix, runner, convert] for suffix, (runner, convert) in iter_architecture_defaults()],
        "sentence_transformers_pooling": sorted(_ST_POOLING_MODULE_TYPES),
        "architectures": runners,
    }


def render(catalog: dict) -> str:
    return json.dumps(catalog, indent=1, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed catalog differs")
    ap.add_argument("--out", type=Path, default=CATALOG_PATH)
    args = ap.parse_args(argv)
    outputs = {args.out: render(build()), ARCHITECTURES_PATH: render(build_architectures())}
    if args.check:
        stale = [str(path) for path, text in outputs.items() if (path.read_text() if path.exists() else "") != text]
        if stale:
            print(f"{', '.join(stale)} stale for this vLLM: run `make catalog`", file=sys.stderr)
            return 1
        print(f"{', '.join(map(str, outputs))} match the installed vLLM")
        return 0
    for path, text in outputs.items():
        path.write_text(text)
    print(
        f"wrote {args.out} ({len(json.loads(outputs[args.out])['flags'])} flags) and {ARCHITECTURES_PATH} "
        f"({len(json.loads(outputs[ARCHITECTURES_PATH])['architectures'])} architectures)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
