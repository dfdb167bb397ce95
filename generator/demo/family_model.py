"""Build a family model: a tiny model that speaks one tool-call / reasoning wire format (generator/demo/families/).

The scripted demo models (scripted_model.py) are bigram tables: each token has one successor, so they cannot emit
two calls in a turn or a marker twice (`<arg_key>` for a second argument). A family model can: its weights are the
same 1-layer Llama (every logit equal), and what it says comes from the script player (script_player.py), a vLLM
logits processor served with it (`--logits-processors generator.demo.script_player:ScriptPlayer`) that reads this
folder's scripts.json: for each conformance turn (conformance.py), the token ids of the family's `render` of it,
and the rule that picks one from the prompt. The next token is then a function of the script and the position in
it (the number of tokens generated so far), so a token may repeat with a different successor each time.

The tokenizer is the scripted models' two-bytes-per-token BPE with the family's markers as added tokens (special or
not, as its real tokenizer has them); the chat template is the family's (families/<name>.py). Built from nothing
(numpy, safetensors, tokenizers: vLLM's interpreter), e.g.::

    python -m generator.demo.family_model .cache/demo-models --all
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib.metadata
import json
from pathlib import Path

import numpy as np

from . import scripted_model as sm
from .conformance import AFTER_TOOL, default_script, scripts_for
from .families import Family, families, family, names

MARKER = "FAMILY"  # the file naming the family (and the digest of the folder's files), as SCRIPT does for scripts
# beside it: what the files were built from (this package's sources, the libraries that shape them) and their names,
# so that `make demo-models` does not build an unchanged family again (gpt-oss's tokenizer conversion alone is ~7 CPU-s,
# and make demo, make test and the compose test each run demo-models)
STAMP = "INPUTS"
SHAPING = ("numpy", "safetensors", "tokenizers", "transformers", "openai-harmony")  # their versions count as inputs


def folder_name(fam: Family) -> str:
    return f"family-{fam.name}"


def added_tokens(fam: Family) -> list[tuple[str, bool]]:
    tokens = [(t, True) for t in fam.special_tokens] + [(t, False) for t in fam.added_tokens]
    seen = [t for t, _ in tokens]
    dupes = {t for t in seen if seen.count(t) > 1}
    if dupes:
        raise ValueError(f"family {fam.name}: tokens listed twice: {sorted(dupes)}")
    return tokens


def tokenizer(fam: Family):
    from tokenizers import Tokenizer

    return Tokenizer.from_str(json.dumps(sm.bpe_tokenizer_json(added_tokens(fam))))


def token_id(fam: Family, text: str) -> int:
    return sm.ADDED_BASE_ID + [t for t, _ in added_tokens(fam)].index(text)


def scripts(fam: Family) -> dict:
    """scripts.json: each script's token ids (its `render`, encoded), and how the player chooses one."""
    return scripts_json(
        fam, tokenizer(fam), {token_id(fam, t) for t in (fam.eos, *fam.stop_tokens)}, token_id(fam, fam.eos)
    )


def scripts_json(fam: Family, tok, stops: set[int], eos: int) -> dict:
    """scripts.json from a `tokenizers.Tokenizer` (or anything with its encode / decode) and the end token ids."""
    book = {}
    for name, turn in scripts_for(fam.has_reasoning, fam.parallel_calls, agents=True).items():
        text = fam.render(turn)
        ids = tok.encode(text, add_special_tokens=False).ids
        if tok.decode(ids, skip_special_tokens=False) != text:
            raise ValueError(f"family {fam.name}, script {name}: the tokenizer does not round-trip its text")
        if not ids or ids[-1] not in stops:
            raise ValueError(f"family {fam.name}, script {name}: the rendered turn must end with an end token")
        book[name] = ids
    return {
        "family": fam.name,
        "scripts": book,
        "default": default_script(fam.has_reasoning),
        "after_tool": AFTER_TOOL,
        "has_reasoning": fam.has_reasoning,
        "parallel_calls": fam.parallel_calls,
        "tool_result_opener": fam.tool_result_opener,
        "user_opener": fam.user_opener,
        "eos": eos,
    }


def _files(fam: Family) -> dict[str, bytes]:
    if fam.files is not None:
        return fam.files(fam)

    def js(obj: dict) -> bytes:
        return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode()

    tokens = added_tokens(fam)
    vocab_size = sm.ADDED_BASE_ID + len(tokens)
    eos = token_id(fam, fam.eos)
    stops = [eos] + [token_id(fam, t) for t in fam.stop_tokens]
    bos = token_id(fam, fam.bos) if fam.bos else eos
    embed = np.zeros((vocab_size, sm.HIDDEN), np.float32)
    embed[:, 0] = 1.0  # every token alike: all logits equal, the script player decides
    lm_head = np.zeros((vocab_size, sm.HIDDEN), np.float32)
    decoder = {
        str(sm.ADDED_BASE_ID + k): {
            "content": t,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": special,
        }
        for k, (t, special) in enumerate(tokens)
    }
    return {
        "config.json": js(sm.llama_config(vocab_size, bos, stops if len(stops) > 1 else eos)),
        "generation_config.json": js({"bos_token_id": bos, "eos_token_id": stops, "pad_token_id": bos}),
        "tokenizer.json": js(sm.bpe_tokenizer_json(tokens)),
        "tokenizer_config.json": js(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "add_bos_token": False,
                "add_eos_token": False,
                "bos_token": fam.bos,
                "eos_token": fam.eos,
                "pad_token": fam.eos,
                "unk_token": None,
                "model_max_length": sm.MAX_POS,
                "clean_up_tokenization_spaces": False,
                "added_tokens_decoder": decoder,
                "chat_template": fam.chat_template,
            }
        ),
        "special_tokens_map.json": js(
            {"eos_token": fam.eos, "pad_token": fam.eos, **({"bos_token": fam.bos} if fam.bos else {})}
        ),
        "scripts.json": js(scripts(fam)),
        "model.safetensors": sm.llama_safetensors(embed, lm_head),
    }


@functools.cache  # once per process: `--all` builds ten families from the same inputs
def inputs_digest() -> str:
    """sha256 of this package's sources (generator/demo/, every .py) and the versions of SHAPING."""
    h = hashlib.sha256()
    package = Path(__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        h.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    for dist in SHAPING:
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            version = "-"
        h.update(f"{dist}={version}\0".encode())
    return h.hexdigest()


def up_to_date(out_dir: Path, fam: Family, inputs: str) -> bool:
    """Whether `out_dir` holds `fam`'s model built from `inputs`, every file as written (MARKER's digest of them)."""
    try:
        stamp = json.loads((out_dir / STAMP).read_text())
        label, digest = (out_dir / MARKER).read_text().split()
        if stamp["inputs"] != inputs or label != fam.name:
            return False
        h = hashlib.sha256()
        for name in sorted(stamp["files"]):
            h.update((out_dir / name).read_bytes())
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return h.hexdigest() == digest


def build(out_dir: Path, fam: Family) -> Path:
    """Write `fam`'s model into `out_dir` (idempotent, as scripted_model.build_model); nothing to do when it is
    up to date (its STAMP)."""
    out_dir, inputs = Path(out_dir), inputs_digest()
    if up_to_date(out_dir, fam, inputs):
        return out_dir
    files = _files(fam)
    sm.write_model(out_dir, files, MARKER, fam.name)
    (out_dir / STAMP).write_text(json.dumps({"inputs": inputs, "files": sorted(files)}) + "\n")
    return out_dir


def family_of(weights: Path) -> str | None:
    """The family a model folder was built for (its FAMILY file), None if it is no family model."""
    try:
        return (Path(weights) / MARKER).read_text().split()[0]
    except (OSError, IndexError):
        return None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", type=Path, help="the parent of one folder per family (family-<name>)")
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--family", choices=names())
    group.add_argument("--all", action="store_true", help="every family")
    args = ap.parse_args(argv)
    for fam in families() if args.all else [family(args.family)]:
        print(build(args.out_dir / folder_name(fam), fam))


if __name__ == "__main__":
    main()
