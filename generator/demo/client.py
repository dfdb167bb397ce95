"""Send one tool call and one reasoning request through the running gateway and print what came back."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from openai import OpenAI
from rich.console import Console

from ..loader import load_plan
from ..output import read_env_file
from ..runtime.__main__ import DEFAULT_STATE
from .script import WEATHER_TOOL


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", type=Path, default=Path("examples/cpu-demo/models.yml"))
    ap.add_argument("--state-dir", type=Path, default=DEFAULT_STATE)
    args = ap.parse_args(argv)
    plan = load_plan(args.models)
    key = read_env_file(args.state_dir / ".env")[plan.gateway.master_key_env]
    base_url = f"http://127.0.0.1:{plan.gateway.port}/v1"
    client = OpenAI(base_url=base_url, api_key=key, timeout=60, max_retries=0)
    console = Console(width=max(100, Console().width))
    tool_model = next((m for m in plan.models if m.auto_tool_choice), None)
    reasoner = next((m for m in plan.models if m.reasoning_parser), None)
    if tool_model:
        reply = client.chat.completions.create(
            model=tool_model.served_name, tools=[WEATHER_TOOL],
            messages=[{"role": "user", "content": "What is the weather in Paris?"}])
        call = reply.choices[0].message.tool_calls[0].function
        console.print(f"[bold]{tool_model.served_name}[/] (tool parser {tool_model.tool_parser}) called "
                      f"[green]{call.name}[/]({json.dumps(json.loads(call.arguments))})")
    if reasoner:
        reply = client.chat.completions.create(
            model=reasoner.served_name, messages=[{"role": "user", "content": "Is it sunny in Paris?"}])
        message = reply.choices[0].message
        reasoning = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
        console.print(f"[bold]{reasoner.served_name}[/] (reasoning parser {reasoner.reasoning_parser})")
        console.print(f"  reasoning: [dim]{reasoning}[/]")
        console.print(f"  answer:    [green]{message.content}[/]")
    env = args.state_dir / ".env"
    console.print(f"\nGateway: {base_url}. Use it from any OpenAI client:\n"
                  f"  export OPENAI_BASE_URL={base_url}\n"
                  f"  export OPENAI_API_KEY=$(sed -n 's/^{plan.gateway.master_key_env}=//p' {env})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
