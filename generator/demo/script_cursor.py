"""Where a request is in its script (the script player's state per request; no dependencies, unit-tested)."""

from __future__ import annotations

from collections.abc import Callable


class Row:
    """One request: its script, its output ids (vLLM's list, kept current) and the script index of each."""

    def __init__(self, script: list[int], output_ids: list[int]):
        self.script, self.output = script, output_ids
        self.at: list[int] = []

    def next_token(self, allowed: Callable[[int], bool], eos: int) -> int:
        """The script's next token. A token a grammar forbids is skipped, as a constrained model would write what
        the grammar lets it (hermes under tool_choice required: no newline between two calls); past the script,
        or when nothing left in it is allowed, the end token."""
        n = len(self.output)
        del self.at[n:]
        j = self.at[-1] + 1 if self.at else 0
        while j < len(self.script) and not allowed(self.script[j]):
            j += 1
        self.at.append(j)
        return self.script[j] if j < len(self.script) else eos
