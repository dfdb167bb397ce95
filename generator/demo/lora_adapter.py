"""A rank-1 LoRA adapter for the scripted demo reasoner (scripted_model.py) that makes it skip its reasoning.

The scripted reasoner is a bigram table: after the "\\n" that starts its answer it says <think>, the reasoning,
</think>, the answer. The adapter adds one MLP neuron (layer 0's gate/up/down projections, rank 1 each) that fires
only on that "\\n" token and moves its residual from the "\\n" slot to the reasoning text's slot, so the model
continues as if it had just reasoned: </think>, then the answer. Through the qwen3 reasoning parser the base model
answers with reasoning_content + content, the adapter with the same content and no reasoning.

Designed, not trained (numpy + safetensors, like the other demo models); a PEFT adapter directory
(adapter_config.json r=1, adapter_model.safetensors) that vLLM serves with --enable-lora --lora-modules:

    python -m generator.demo.lora_adapter .cache/demo-models/think-less
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from . import scripted_model as sm
from .script import REASONING_TEXT

NAME = "think-less"  # the adapter's name in the demo (examples/cpu-pooling/models.yml)
BASE = "reasoner"  # the scripted model it adapts
RANK = 1
PREFIX = "base_model.model.model.layers.0.mlp."  # PEFT's tensor names for a LlamaForCausalLM's layer 0 MLP


def tensors() -> dict[str, np.ndarray]:
    table = sm._script(BASE)
    slot = {tok: k for k, tok in enumerate(sorted(table), start=1)}  # the reasoner's residual slots (scripted_model)
    k_nl, k_reasoning = slot[sm.NL], slot[sm.TOKEN_ID[REASONING_TEXT]]
    f = np.float32
    read_nl = np.zeros((RANK, sm.HIDDEN), f)
    read_nl[0, k_nl] = 1.0  # A of gate and up: "this is the newline that starts the answer"
    to_neuron = np.zeros((sm.INTERMEDIATE, RANK), f)
    to_neuron[0, 0] = 1.0  # B of gate and up: into MLP neuron 0
    from_neuron = np.zeros((RANK, sm.INTERMEDIATE), f)
    from_neuron[0, 0] = 1.0  # A of down: read neuron 0
    fired = (8.0 / (1 + np.exp(-8.0))) * 8.0  # silu(8) * 8: the neuron's value on that token (RMSNorm scales e_k by 8)
    move = np.zeros((sm.HIDDEN, RANK), f)
    move[k_reasoning, 0], move[k_nl, 0] = 1.0 / fired, -1.0 / fired  # B of down: the "\n" slot -> the reasoning's
    return {
        PREFIX + "gate_proj.lora_A.weight": read_nl,
        PREFIX + "gate_proj.lora_B.weight": to_neuron,
        PREFIX + "up_proj.lora_A.weight": read_nl,
        PREFIX + "up_proj.lora_B.weight": to_neuron,
        PREFIX + "down_proj.lora_A.weight": from_neuron,
        PREFIX + "down_proj.lora_B.weight": move,
    }


def files() -> dict[str, bytes]:
    from safetensors.numpy import save

    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": RANK,
        "lora_alpha": RANK,
        "target_modules": ["gate_proj", "up_proj", "down_proj"],
        "bias": "none",
        "lora_dropout": 0.0,
        "base_model_name_or_path": BASE,
        "fan_in_fan_out": False,
    }
    return {
        "adapter_model.safetensors": save(dict(sorted(tensors().items()))),
        "adapter_config.json": (json.dumps(config, indent=1) + "\n").encode(),
    }


def build(out_dir: Path) -> Path:
    """Write the adapter into `out_dir`; idempotent (files whose bytes match are left alone)."""
    return sm.write_model(Path(out_dir), files(), "ADAPTER", NAME)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", type=Path, help="the adapter's directory, e.g. .cache/demo-models/think-less")
    print(build(ap.parse_args(argv).out_dir))


if __name__ == "__main__":
    main()
