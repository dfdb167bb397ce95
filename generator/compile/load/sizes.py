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


def fmt_tokens(n: int) -> str:
    """A token count for messages and the summary, with the suffix it is round in: 16384 (16K), 8000 (8k)."""
    if n % 1024 == 0 and n >= 1024:
        return f"{n} ({n // 1024}K)"
    if n % 1000 == 0 and n >= 1000:
        return f"{n} ({n // 1000}k)"
    return str(n)


def is_auto(value: object) -> bool:
    """vLLM's `--max-model-len auto` / `-1`: take the length from the model's config."""
    return str(value).strip().lower() in ("auto", "-1")


_BYTE_UNITS = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
_BYTES = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]i?B)")
GIB = 2**30


def parse_bytes(value: object) -> int:
    """A memory size such as `80GiB` or `24576MiB` (binary units only: a GPU's '80GB' is GiB)."""
    text = str(value).strip()
    match = _BYTES.fullmatch(text)
    if not match:
        raise ValueError(f"expected a memory size like 80GiB or 24576MiB, got {text!r}")
    number, unit = match.groups()
    if unit not in _BYTE_UNITS:
        raise ValueError(
            f"{text!r}: write {number}{unit[0]}iB; GPU makers' '{unit}' are binary "
            f"(an '80GB' H100 has 81,559 MiB), so only KiB/MiB/GiB/TiB are taken"
        )
    size = int(float(number) * _BYTE_UNITS[unit])
    if size <= 0:
        raise ValueError(f"must be positive, got {text!r}")
    return size


def fmt_bytes(n: float) -> str:
    """1.5 GiB, 320 KiB, 12 B: for messages."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}" if n % size else f"{int(n // size)} {unit}"
    return f"{int(n)} B"
