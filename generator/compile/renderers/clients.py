"""Plan -> configs for coding agents (opencode, Codex CLI, Claude Code) pointed at the gateway.

Each agent is told every model's real limits, so it compacts before the context is full instead
of guessing (opencode: context 0 = never compacts; Codex: 258,400 tokens; Claude Code: 200K).
Agents always send tools, so only models served with `--enable-auto-tool-choice` are offered.
No key is written: each file names the variable that holds the gateway's master key.

Formats (checked against the pinned agents, see tests/agents/):
- opencode 1.18: a provider using `@ai-sdk/openai-compatible`; JSON allows no comment, so the
  header naming the source lives in clients/README.md, written with it.
- Codex CLI 0.169: `config.toml` (provider, default model) plus one `<name>.config.toml` per
  model (its models.yml key), selected with `codex --profile <name>`; Codex 0.169 refuses `[profiles.<name>]` tables
  when --profile is used ("move those settings into <name>.config.toml"), and accepts only
  `wire_api = "responses"`.
- Claude Code 2.1: environment variables (`set -a; . clients/claude-code.env; set +a`).
"""

from __future__ import annotations

import json
import shlex

import tomli_w

from ...errors import ConfigError, Problem
from ..plan import ModelPlan, PersonPlan, Plan
from .target import Target
from .text import header as _stack_header

CLIENTS_DIR = "clients"
OPENCODE_FILE = f"{CLIENTS_DIR}/opencode.json"
CODEX_DIR = f"{CLIENTS_DIR}/codex"
CODEX_FILE = f"{CODEX_DIR}/config.toml"
CLAUDE_FILE = f"{CLIENTS_DIR}/claude-code.env"
README_FILE = f"{CLIENTS_DIR}/README.md"
PROVIDER_ID = "llm-gateway"  # opencode provider and Codex model_providers key


REGENERATE = "make clients"  # named in every header


def header(plan: Plan, comment: str = "#") -> str:
    return _stack_header(plan, comment, regenerate=REGENERATE)


def agent_models(plan: Plan) -> tuple[ModelPlan, ...]:
    """Models an agent can use: every agent request carries tools with tool_choice auto."""
    return tuple(m for m in plan.client_models if m.auto_tool_choice)


def main_model(models: tuple[ModelPlan, ...]) -> ModelPlan:
    """The agents' default: the first tool-capable model in models.yml order (order is the user's choice)."""
    return models[0]


def small_model(models: tuple[ModelPlan, ...]) -> ModelPlan:
    """For the agents' small background tasks (titles, summaries): the smallest context, file order on ties."""
    return min(models, key=lambda m: m.context)


def gateway_base(plan: Plan) -> str:
    """The gateway as a client on the same host reaches it (0.0.0.0 is not an address to connect to)."""
    g = plan.gateway
    host = "127.0.0.1" if g.bind in ("0.0.0.0", "::") else g.bind
    host = f"[{host}]" if ":" in host else host  # an IPv6 address in a URL
    return f"http://{host}:{g.port}"


def compact_limit(m: ModelPlan) -> int:
    """Compact the conversation while the model's default output budget still fits in its context."""
    return m.context - m.max_tokens


def opencode_config(
    plan: Plan, models: tuple[ModelPlan, ...], key_env: str | None = None, key: str | None = None
) -> dict:
    api_key = key or f"{{env:{key_env or plan.gateway.master_key_env}}}"
    return {
        "$schema": "https://opencode.ai/config.json",
        "model": f"{PROVIDER_ID}/{main_model(models).served_name}",
        "small_model": f"{PROVIDER_ID}/{small_model(models).served_name}",
        "autoupdate": False,
        "share": "disabled",
        "provider": {
            PROVIDER_ID: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "llm-gateway-stack",
                "options": {"baseURL": f"{gateway_base(plan)}/v1", "apiKey": api_key},
                "models": {
                    m.served_name: {
                        "name": m.served_name,
                        "tool_call": True,
                        "reasoning": m.reasoning_parser is not None,
                        "temperature": True,
                        "attachment": False,
                        "modalities": {"input": ["text"], "output": ["text"]},
                        "limit": {"context": m.context, "output": m.max_tokens},
                    }
                    for m in models
                },
            }
        },
    }


def codex_model_keys(m: ModelPlan) -> dict:
    return {
        "model": m.served_name,
        "model_provider": PROVIDER_ID,
        "model_context_window": m.context,
        "model_auto_compact_token_limit": compact_limit(m),
    }


def codex_config(plan: Plan, models: tuple[ModelPlan, ...], key_env: str | None = None) -> dict:
    return {
        **codex_model_keys(main_model(models)),
        "check_for_update_on_startup": False,
        "analytics": {"enabled": False},
        "feedback": {"enabled": False},
        "model_providers": {
            PROVIDER_ID: {
                "name": "llm-gateway-stack",
                "base_url": f"{gateway_base(plan)}/v1",
                "env_key": key_env or plan.gateway.master_key_env,
                "wire_api": "responses",
            }
        },
    }


def claude_env(plan: Plan, models: tuple[ModelPlan, ...], key: str | None = None) -> dict[str, str]:
    main, small = main_model(models), small_model(models)
    used = {main.served_name: main, small.served_name: small}.values()
    env = plan.gateway.master_key_env
    return {
        "ANTHROPIC_BASE_URL": gateway_base(plan),  # Claude Code appends /v1/messages itself
        "ANTHROPIC_AUTH_TOKEN": shlex.quote(key) if key else f"${{{env}:?set {env} to the gateway key}}",
        "ANTHROPIC_MODEL": main.served_name,
        "ANTHROPIC_DEFAULT_OPUS_MODEL": main.served_name,
        "ANTHROPIC_DEFAULT_SONNET_MODEL": main.served_name,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": small.served_name,
        "CLAUDE_CODE_SUBAGENT_MODEL": main.served_name,
        # one value for every model Claude Code may pick: the smallest budget among them
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(min(m.max_tokens for m in used)),
        # Claude Code assumes 200K and never takes a window under 100K (it raises smaller values)
        "CLAUDE_CODE_AUTO_COMPACT_WINDOW": str(min(m.context for m in used)),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",  # no telemetry, error reports, update checks
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
    }


def _env_text(plan: Plan, env: dict[str, str]) -> str:
    lines = [f"{k}={v}" if k == "ANTHROPIC_AUTH_TOKEN" else f"{k}={shlex.quote(v)}" for k, v in env.items()]
    return (
        header(plan)
        + "# Claude Code against the gateway: set -a; . clients/claude-code.env; set +a; claude\n"
        + f"# needs {plan.gateway.master_key_env} in the environment (the gateway's master key).\n"
        + "\n".join(lines)
        + "\n"
    )


def _readme(plan: Plan, models: tuple[ModelPlan, ...]) -> str:
    rows = "\n".join(
        f"| `{m.served_name}` | `--profile {m.entry}` | {m.context} | {m.max_tokens} | {compact_limit(m)} | "
        f"{'yes' if m.reasoning_parser else 'no'} |"
        for m in models
    )
    skipped = [m.served_name for m in plan.client_models if not m.auto_tool_choice]
    note = (
        (
            f"\nNot offered to agents (no `--enable-auto-tool-choice`; agents always send tools): "
            f"{', '.join(f'`{n}`' for n in skipped)}.\n"
        )
        if skipped
        else ""
    )
    return (
        header(plan)
        + "\nCoding-agent configs for the gateway at "
        + f"{gateway_base(plan)} (key: `${plan.gateway.master_key_env}`, never written here).\n"
        + "`opencode.json` is JSON, which has no comments: this file is its header.\n\n"
        + "| model | Codex | context | output budget | Codex compacts at | reasoning |\n"
        + "| --- | --- | --- | --- | --- | --- |\n"
        + rows
        + "\n"
        + note
        + "\n- `opencode.json`: `OPENCODE_CONFIG=clients/opencode.json opencode`\n"
        + "- `codex/`: `CODEX_HOME=clients/codex codex` (default model), "
        + "`codex --profile <name>` for another model (`codex/<name>.config.toml`)\n"
        + "- `claude-code.env`: `set -a; . clients/claude-code.env; set +a; claude`\n"
    )


def clients_files(plan: Plan) -> dict[str, str]:
    """The `clients` target: one config per coding agent, from the same plan as the gateway."""
    models = agent_models(plan)
    if not models:
        raise ConfigError(
            [
                Problem(
                    plan.source,
                    "clients",
                    (
                        "no model is served with --enable-auto-tool-choice and a --tool-call-parser; coding agents "
                        "always send tools, so add both to a model's command"
                    ),
                )
            ]
        )
    files = {
        README_FILE: _readme(plan, models),
        OPENCODE_FILE: json.dumps(opencode_config(plan, models), indent=2) + "\n",
        CODEX_FILE: header(plan) + tomli_w.dumps(codex_config(plan, models)),
        CLAUDE_FILE: _env_text(plan, claude_env(plan, models)),
    }
    for m in models:  # the models.yml key names the profile: a DNS label, safe as a file name
        files[f"{CODEX_DIR}/{m.entry}.config.toml"] = header(plan) + tomli_w.dumps(codex_model_keys(m))
    return files


def person_clients(plan: Plan, person: PersonPlan, key: str) -> dict[str, str]:
    """`make clients NAME=ann`: the agents' configs for one person, carrying that person's key (never the master
    key), offering only the agent-capable models the person may use. Under clients/people/<name>/ (git-ignored,
    written mode 600: they hold a secret). Codex reads a key only from a variable: codex/key.env sets it."""
    models = tuple(m for m in agent_models(plan) if person.models is None or m.served_name in person.models)
    if not models:
        raise ConfigError(
            [
                Problem(
                    plan.source,
                    f"people.{person.name}.models",
                    (
                        "none of this person's models takes tools (--enable-auto-tool-choice), "
                        "which coding agents always send"
                    ),
                )
            ]
        )
    base = f"{CLIENTS_DIR}/people/{person.name}"
    note = (
        f"# {person.name}'s key is in this file: keep it private (make key NAME={person.name} ROTATE=1 replaces it).\n"
    )
    claude = "\n".join(
        f"{k}={v}" if k == "ANTHROPIC_AUTH_TOKEN" else f"{k}={shlex.quote(v)}"
        for k, v in claude_env(plan, models, key).items()
    )
    files = {
        f"{base}/opencode.json": json.dumps(opencode_config(plan, models, key=key), indent=2) + "\n",
        f"{base}/codex/config.toml": header(plan) + tomli_w.dumps(codex_config(plan, models, person.key_env)),
        f"{base}/codex/key.env": header(plan) + note + f"export {person.key_env}={shlex.quote(key)}\n",
        f"{base}/claude-code.env": header(plan) + note + claude + "\n",
    }
    for m in models:
        files[f"{base}/codex/{m.name}.config.toml"] = header(plan) + tomli_w.dumps(codex_model_keys(m))
    return files


# client configs only name the key's variable: they need no keys file
TARGET = Target("clients", clients_files, regenerate=REGENERATE, keys_file=None, marker=README_FILE)
