"""The script player: a vLLM logits processor that makes a family model (family_model.py) say its script exactly.

Served with the model: `vllm serve .cache/demo-models/family-glm47 --logits-processors
generator.demo.script_player:ScriptPlayer` (the local runtime starts vLLM from the checkout, so the module imports).
For each request it picks a script from the prompt (conformance.choose, on the prompt decoded with its special
tokens) and then, at each step, leaves only the script's next token possible, then the end token. Every other logit
is -inf, so sampling settings change nothing. A structured-output grammar (tool_choice required / named) masks the
logits before this processor runs: a script token it forbids is skipped (Row.next_token), as a constrained model
writes only what the grammar allows.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from tokenizers import Tokenizer
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from .conformance import choose
from .script_cursor import Row


class Book:
    """A family model's scripts.json, and the rule that picks a script for a prompt."""

    def __init__(self, model_dir: Path):
        self.data = json.loads((model_dir / "scripts.json").read_text())
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.eos = self.data["eos"]

    def script_for(self, prompt_ids: list[int] | None) -> list[int]:
        text = self.tokenizer.decode(list(prompt_ids or ()), skip_special_tokens=False)
        name = choose(
            text,
            self.data["has_reasoning"],
            self.data["tool_result_opener"],
            self.data["user_opener"],
            self.data["parallel_calls"],
        )
        return self.data["scripts"][name]


class ScriptPlayer(LogitsProcessor):
    def __init__(self, vllm_config, device: torch.device, is_pin_memory: bool) -> None:
        self.book = Book(Path(vllm_config.model_config.model))
        self.rows: dict[int, Row] = {}  # batch row -> the request's script and output so far

    def is_argmax_invariant(self) -> bool:
        return False  # it decides the argmax: must run for greedy requests too

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for row in batch_update.removed:
            self.rows.pop(row, None)
        for row, _params, prompt_ids, output_ids in batch_update.added:
            self.rows[row] = Row(self.book.script_for(prompt_ids), output_ids)
        for a, b, direction in batch_update.moved:
            first, second = self.rows.pop(a, None), self.rows.pop(b, None)
            if first is not None:
                self.rows[b] = first
            if direction == MoveDirectionality.SWAP and second is not None:
                self.rows[a] = second

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        for row, state in self.rows.items():
            if row < logits.shape[0]:
                allowed = logits[row] > float("-inf")  # a grammar (tool_choice required / named) masked the rest
                token = state.next_token(lambda t: bool(allowed[t]), self.book.eos)  # noqa: B023 - called here
                logits[row] = float("-inf")
                logits[row, token] = 0.0
        return logits
