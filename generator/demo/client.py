"""Send one tool call and one reasoning request through the running gateway and print what came back.

Which model gets which request: a scripted model by its SCRIPT file (what it was built to say), any other
model by its parsers (a tool parser with auto tool choice; a reasoning parser). A reply without the
expected tool call or reasoning is one clear line and exit 1, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import openai
from openai import OpenAI
from rich.console import Console

from ..compile.load.loader import load_plan
from ..compile.output import read_env_file
from ..compile.plan import ModelPlan, Plan
from ..operate.runtime.__main__ import DEFAULT_STATE
from .script import WEATHER_TOOL, script_of


class DemoFailed(Exception):
    """The gateway answered, but not with what the demo shows; the message is the one line to print."""


def demo_models(plan: Plan) -> tuple[ModelPlan | None, ModelPlan | None]:
    """(the model that calls tools, the model that reasons), each None if the plan has none."""

    def does(m: ModelPlan, script: str, capable: bool) -> bool:
        kind = script_of(Path(m.model))
        return kind == script if kind else capable

    tools = next((m for m in plan.models if does(m, "tool-caller", m.auto_tool_choice)), None)
    reasoner = next((m for m in plan.models if does(m, "reasoner", m.reasoning_parser is not None)), None)
    return tools, reasoner


def ask_for_a_tool_call(client: OpenAI, m: ModelPlan) -> tuple[str, dict]:
    reply = client.chat.completions.create(
        model=m.served_name,
        tools=[WEATHER_TOOL],  # type: ignore[list-item]  # the scripts' plain dict, not the SDK's TypedDict
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
    )
    message = reply.choices[0].message
    if not message.tool_calls:
        raise DemoFailed(
            f"{m.served_name} answered without a tool call (finish_reason "
            f"{reply.choices[0].finish_reason}, content {message.content!r:.120}); "
            f"is --enable-auto-tool-choice with --tool-call-parser {m.tool_parser} right for this model?"
        )
    tool_call = message.tool_calls[0]
    if tool_call.type != "function":  # the SDK's other kind, a custom tool call: no function, no JSON arguments
        raise DemoFailed(f"{m.served_name} answered with a {tool_call.type} tool call, not a function call")
    call = tool_call.function
    try:
        return call.name, json.loads(call.arguments)
    except json.JSONDecodeError as exc:
        raise DemoFailed(
            f"{m.served_name} called {call.name} with arguments that are not JSON: {call.arguments!r:.120}"
        ) from exc


def ask_for_reasoning(client: OpenAI, m: ModelPlan) -> tuple[str, str]:
    reply = client.chat.completions.create(
        model=m.served_name, messages=[{"role": "user", "content": "Is it sunny in Paris?"}]
    )
    message = reply.choices[0].message
    reasoning = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
    if not reasoning:
        raise DemoFailed(
            f"{m.served_name} answered without reasoning (content {message.content!r:.120}); "
            f"is --reasoning-parser {m.reasoning_parser} right for this model?"
        )
    return reasoning, message.content or ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=Path("examples/cpu-demo/models.yml"))
    ap.add_argument("--state-dir", type=Path, default=DEFAULT_STATE)
    ap.add_argument(
        "--stopping", action="store_true", help="the stack is stopped next (make demo STOP=1): no usage hint"
    )
    args = ap.parse_args(argv)
    console = Console(width=max(100, Console().width))
    err = Console(stderr=True, highlight=False)
    plan = load_plan(args.models)
    env = args.state_dir / ".env"
    try:
        key = read_env_file(env)[plan.gateway.master_key_env]
    except (OSError, KeyError):
        err.print(
            f"[red]demo failed:[/] no gateway key in {env}: start the stack first "
            f"(python -m generator.operate.runtime up --models {args.models})",
            soft_wrap=True,
        )
        return 1
    base_url = f"http://127.0.0.1:{plan.gateway.port}/v1"
    client = OpenAI(base_url=base_url, api_key=key, timeout=60, max_retries=0)
    tool_model, reasoner = demo_models(plan)
    if not tool_model and not reasoner:
        err.print(f"[red]demo failed:[/] {args.models} has no model that calls tools or reasons", soft_wrap=True)
        return 1
    try:
        if tool_model:
            name, arguments = ask_for_a_tool_call(client, tool_model)
            console.print(
                f"[bold]{tool_model.served_name}[/] (tool parser {tool_model.tool_parser}) called "
                f"[green]{name}[/]({json.dumps(arguments)})"
            )
        if reasoner:
            reasoning, answer = ask_for_reasoning(client, reasoner)
            console.print(f"[bold]{reasoner.served_name}[/] (reasoning parser {reasoner.reasoning_parser})")
            console.print(f"  reasoning: [dim]{reasoning}[/]")
            console.print(f"  answer:    [green]{answer}[/]")
    except DemoFailed as exc:
        err.print(f"[red]demo failed:[/] {exc}", soft_wrap=True)
        return 1
    except openai.APIError as exc:  # the gateway or a backend refused: its own words, one line
        status = getattr(exc, "status_code", None)
        err.print(
            f"[red]demo failed:[/] {base_url}: {f'HTTP {status}: ' if status else ''}{exc.message}", soft_wrap=True
        )
        return 1
    if args.stopping:
        return 0
    console.print(
        f"\nGateway: {base_url}. Use it from any OpenAI client:\n"
        f"  export OPENAI_BASE_URL={base_url}\n"
        f"  export OPENAI_API_KEY=$(sed -n 's/^{plan.gateway.master_key_env}=//p' {env})"
    )
    if plan.gateway.ui:  # the gateway's page (docs/page.md): a person's key or the master key
        console.print(f"In a browser: {base_url.removesuffix('/v1')}/gateway/ (sign in with that key, or a person's)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
