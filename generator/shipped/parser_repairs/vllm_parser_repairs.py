"""The stack's repairs of vLLM 0.32's tool-call and reasoning parsers, as vLLM loads a parser plugin:

    vllm serve MODEL --tool-call-parser deepseek_v3 --tool-parser-plugin /opt/parser-repairs/vllm_parser_repairs.py

(and --reasoning-parser-plugin, the same file). Importing it registers every repaired parser under its upstream
name (force: the upstream class is replaced for this process), so models.yml's --tool-call-parser and
--reasoning-parser stay as they are. One module per repair beside this file (repaired_*.py); why each exists and
how it was found: docs/parsers.md. The generator passes it only to the models whose parsers it repairs.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
REPAIRED = (
    "repaired_deepseek_v3",
    "repaired_deepseek_v31",
    "repaired_llama3_json",
    "repaired_deepseek_r1",
    "repaired_kimi_k2",
)

if HERE not in sys.path:
    sys.path.insert(0, HERE)  # the repairs import each other by plain name, as the gateway's hooks do
for name in REPAIRED:
    importlib.import_module(name)
