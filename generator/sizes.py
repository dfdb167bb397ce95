"""Token counts written the way vLLM reads them: 16K = 16384, 16k = 16000, 25.6k = 25600."""

from __future__ import annotations

import re

_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")


def parse_size(value: object) -> int:
    """Parse like vLLM's `human_readable_int`; raise ValueError with a hint otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"expected a token count like 8192 or 8K, got {value!r}")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    match = _SIZE.fullmatch(text)
    if match:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        if "." in number:
            raise ValueError(
                f"{text!r}: decimals are not allowed with binary suffix {suffix}; "
                f"did you mean {number}{suffix.lower()}?"
            )
        return int(number) * _BINARY[suffix]
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    raise ValueError(f"expected a token count like 8192, 8K (8192) or 8k (8000), got {text!r}")


def is_auto(value: object) -> bool:
    """vLLM's `--max-model-len auto` / `-1`: take the length from the model's config."""
    return str(value).strip().lower() in ("auto", "-1")
