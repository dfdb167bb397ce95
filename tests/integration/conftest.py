"""The gateway the integration tests talk to, through the OpenAI SDK only.

- GATEWAY_URL + GATEWAY_KEY set: a live deployment (e.g. the GPU compose stack); capabilities
  come from GATEWAY_MODELS (default: models.yml).
- otherwise: the CPU stack of examples/cpu-demo/models.yml (real vLLM CPU build + real LiteLLM).
  A stack `make demo` left running (same models.yml and code, healthy) is shared; else one is started for
  the session and stopped: the same models on free ports, with its own state dir, so it never collides with
  a demo (this checkout's or another's) started meanwhile, nor with another checkout's tests.

For the scripted CPU models, what a model does is read from the weights' SCRIPT file (not from its
parsers), so deleting --reasoning-parser or --tool-call-parser from the demo models.yml makes tests
fail instead of silently skipping them, and a parser a model never uses selects no test.
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import anthropic
import httpx
import pytest
import yaml
from openai import OpenAI

from generator.compile.load.loader import load_plan
from generator.compile.load.schema import TOP_LEVEL
from generator.compile.plan import ModelPlan, Plan
from generator.demo.families import Family, families
from generator.demo.family_model import family_of
from generator.demo.script import script_of
from generator.operate.runtime.local import LocalStack
from generator.operate.runtime.ports import free_ports

ROOT = Path(__file__).resolve().parents[2]
DEMO_MODELS = ROOT / "examples/cpu-demo/models.yml"
STATE_DIR = ROOT / ".cache/local-stack"


@dataclass
class Gateway:
    url: str  # ends with /v1
    key: str
    plan: Plan
    scripts: dict[str, str] = field(default_factory=dict)  # served name -> scripted model kind
    stack: LocalStack | None = None  # set when this session started the stack (fault tests need it)

    def client(self, key: str | None = None, **kw) -> OpenAI:
        return OpenAI(base_url=self.url, api_key=key or self.key, max_retries=0, timeout=kw.pop("timeout", 120), **kw)

    def anthropic(self, key: str | None = None, **kw) -> anthropic.Anthropic:
        """The Anthropic SDK as Claude Code points it: base URL without /v1, the key as x-api-key."""
        return anthropic.Anthropic(
            base_url=self.url.removesuffix("/v1"),
            api_key=key or self.key,
            max_retries=0,
            timeout=kw.pop("timeout", 120),
            **kw,
        )

    # A scripted model's SCRIPT decides what it does (the demo reasoner has a tool parser too, but never
    # calls a tool); a live model is expected to do what its parsers parse.
    def wants_tools(self, m: ModelPlan) -> bool:
        script = self.scripts.get(m.served_name)
        return script == "tool-caller" if script else m.auto_tool_choice

    def wants_reasoning(self, m: ModelPlan) -> bool:
        script = self.scripts.get(m.served_name)
        return script == "reasoner" if script else m.reasoning_parser is not None


@functools.cache
def target() -> tuple[Plan, dict[str, str]]:
    """The plan under test and the scripted models in it; read once, at collection time."""
    default = ROOT / "models.yml" if os.environ.get("GATEWAY_URL") else DEMO_MODELS
    plan = load_plan(os.environ.get("GATEWAY_MODELS", default))  # a live scripted stack has SCRIPT files too
    return plan, {m.served_name: s for m in plan.models if (s := script_of(ROOT / m.model))}


def pytest_generate_tests(metafunc):
    """`model` / `tool_model` / `reasoning_model` / `direct_model` (answers without reasoning first) arguments run
    once per matching model."""
    plan, scripts = target()
    probe = Gateway("", "", plan, scripts)
    selectors = {
        "model": lambda m: True,
        "tool_model": probe.wants_tools,
        "reasoning_model": probe.wants_reasoning,
        "direct_model": lambda m: not probe.wants_reasoning(m),
    }
    for arg, wanted in selectors.items():
        if arg in metafunc.fixturenames:
            models = [m for m in plan.models if wanted(m)]
            metafunc.parametrize(arg, models, ids=[m.served_name for m in models])


def on_free_ports(models: Path, out: Path) -> Path:
    """models.yml with its gateway, each model and the on-demand controller on free ports (written to `out`)."""
    doc = yaml.safe_load(models.read_text())
    names = [k for k in doc if k not in TOP_LEVEL]
    gateway_port, controller_port, *ports = free_ports(2 + len(names))
    doc["gateway"] = {**(doc.get("gateway") or {}), "port": gateway_port}
    if "on_demand" in doc:
        doc["on_demand"] = {**(doc["on_demand"] or {}), "port": controller_port}
    for name, port in zip(names, ports):
        doc[name] = {**doc[name], "port": port}
    out.write_text(f"# {models} on free ports (tests/integration/conftest.py)\n" + yaml.safe_dump(doc, sort_keys=False))
    return out


@pytest.fixture(scope="session")
def gateway(tmp_path_factory) -> Gateway:
    plan, scripts = target()
    if os.environ.get("GATEWAY_URL"):
        url = os.environ["GATEWAY_URL"].rstrip("/")
        yield Gateway(url if url.endswith("/v1") else url + "/v1", os.environ["GATEWAY_KEY"], plan, scripts)
        return
    vllm_python = os.environ.get("VLLM_PYTHON", str(ROOT / ".venv-vllm/bin/python"))
    if "GATEWAY_MODELS" not in os.environ and (running := LocalStack.attach(plan, STATE_DIR, vllm_python)):
        # the stack `make demo` left running (same models.yml and code): the tests share it; the fault tests
        # kill and restart its backends through the attached handles; it is left running, as found
        yield Gateway(f"{running.gateway_url}/v1", running.master_key, plan, scripts, running)
        return
    if not Path(vllm_python).exists():
        pytest.fail(f"no vLLM interpreter at {vllm_python}: run `make venv-vllm`, or set GATEWAY_URL/GATEWAY_KEY")
    cwd = os.getcwd()
    os.chdir(ROOT)  # model paths in the demo models.yml are relative to the repo root
    tmp = tmp_path_factory.mktemp("session-stack")
    plan = load_plan(on_free_ports(Path(plan.source), tmp / "models.yml"))
    stack = LocalStack(plan, tmp / "state", vllm_python)
    try:
        stack.start(timeout=900)
        yield Gateway(f"{stack.gateway_url}/v1", stack.master_key, plan, scripts, stack)
    finally:
        stack.stop()
        os.chdir(cwd)


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


# --- the parser families' stacks ---------------------------------------------------------------------------

PARSERS_EXAMPLE = ROOT / "examples/cpu-parsers/models.yml"
# The stream intervals the matrix runs at: vLLM's default (a delta per token) and one that puts several tokens in
# each delta, as speculative decoding and a busy server do (docs/parsers.md). One stack, every family in it (~4 GB of
# backends forked from one warm vLLM: docs/testing.md), its backends restarted for the second interval.
STREAM_INTERVALS = (1, 16)

# `make test` and `make parsers` run every family; PARSER_FAMILIES=glm47,hermes (make parsers FAMILIES=...) the named.
PARSER_FAMILIES_ENV = "PARSER_FAMILIES"


def tested_families() -> list[Family]:
    """The families this run's matrix asks: PARSER_FAMILIES (names, comma-separated, or "all"), else every family."""
    chosen = os.environ.get(PARSER_FAMILIES_ENV, "all")
    every = families()
    if chosen.strip() == "all":
        return every
    names = [n.strip() for n in chosen.split(",") if n.strip()]
    unknown = sorted(set(names) - {f.name for f in every})
    if unknown:
        raise pytest.UsageError(f"{PARSER_FAMILIES_ENV}: no family {unknown}; families: {[f.name for f in every]}")
    return [f for f in every if f.name in names]


STREAM_INTERVAL = re.compile(r"\s*--stream-interval[ =]\d+")


def streaming(doc: dict, models, interval: int) -> dict:
    """models.yml `doc` with each of `models`' backends streaming `interval` tokens a delta (vLLM's default 1: no
    flag), whatever interval its command asked before."""
    for name in models:
        command = STREAM_INTERVAL.sub("", doc[name]["command"]).rstrip()
        doc[name] = {
            **doc[name],
            "command": command + (f" --stream-interval {interval}" if interval != 1 else "") + "\n",
        }
    return doc


class Stacks:
    """The families' stack at the stream interval asked for, started when first asked (the other one stopped)."""

    def __init__(self, tmp: Path, vllm_python: str):
        self.tmp, self.vllm_python = tmp, vllm_python
        self.interval: int | None = None
        self.stack: LocalStack | None = None
        self.gateway: Gateway | None = None
        self.starts = 0  # a folder per start: the matrix stops the stack, the agents' tests may start it again

    def serving(self, fam: Family, interval: int = 1) -> tuple[Gateway, str]:
        """The gateway and the served name of `fam`'s model, its backend streaming `interval` tokens a delta."""
        if self.stack is None:
            self.start(interval)
        elif interval != self.interval:
            self.restream(interval)
        assert self.gateway is not None
        return self.gateway, next(name for name, f in self.gateway.scripts.items() if f == fam.name)

    def models_yml(self, interval: int) -> Path:
        """The families' models.yml, each backend streaming `interval` tokens a delta, on free ports."""
        wanted = {f.name for f in tested_families()}
        models = {m.served_name for m in load_plan(PARSERS_EXAMPLE).models if family_of(ROOT / m.model) in wanted}
        doc = {k: v for k, v in yaml.safe_load(PARSERS_EXAMPLE.read_text()).items() if k in TOP_LEVEL or k in models}
        self.starts += 1
        folder = self.tmp / f"every-{interval}-start-{self.starts}"
        folder.mkdir()
        (folder / "stack.yml").write_text(
            f"# {PARSERS_EXAMPLE}, --stream-interval {interval}\n"
            + yaml.safe_dump(streaming(doc, models, interval), sort_keys=False)
        )
        return on_free_ports(folder / "stack.yml", folder / "models.yml")

    def start(self, interval: int) -> None:
        plan = load_plan(self.models_yml(interval))
        self.interval, self.stack = interval, LocalStack(plan, Path(plan.source).parent / "state", self.vllm_python)
        self.stack.start(timeout=900)
        self.serve(plan)

    def restream(self, interval: int) -> None:
        """The running stack's backends restarted streaming `interval` tokens a delta: the gateway, its Redis and the
        vLLM fork server keep running (same ports, names and keys), which saves their start (~30 CPU-s)."""
        assert self.stack is not None
        source = Path(self.stack.plan.source)  # the running stack's models.yml: its ports, only the commands change
        names = [m.name for m in self.stack.plan.models]
        out = self.tmp / f"every-{interval}.yml"
        out.write_text(
            f"# {source}, --stream-interval {interval}\n"
            + yaml.safe_dump(streaming(yaml.safe_load(source.read_text()), names, interval), sort_keys=False)
        )
        plan = load_plan(out)
        for name in names:
            self.stack.kill(name)
        self.stack.plan, self.interval = plan, interval
        self.stack.start_backends(names, timeout=900)
        self.serve(plan)

    def serve(self, plan: Plan) -> None:
        assert self.stack is not None and self.interval is not None
        served = {m.served_name: family_of(ROOT / m.model) for m in plan.models}
        assert set(served.values()) == {f.name for f in tested_families()}, f"every {self.interval}: {served}"
        for m in plan.models:  # each backend streams as asked (a restart that kept the old flags would not)
            tokens, deltas = streamed_deltas(m, self.stack.keys()[m.api_key_env])
            # at most a delta per `interval` tokens (and the last); at interval 1 more than 16 would give, though
            # fewer than a delta per token: vLLM merges the deltas a busy API server has not sent yet (CI: 11 of 40)
            most = {n: -(-tokens // n) + 1 for n in {*STREAM_INTERVALS, self.interval}}
            expected = (
                range(most[max(STREAM_INTERVALS)] + 1, most[1] + 1)
                if self.interval == 1
                else range(1, most[self.interval] + 1)
            )
            assert tokens > self.interval and deltas in expected, (m.name, self.interval, tokens, deltas)
        self.gateway = Gateway(f"{self.stack.gateway_url}/v1", self.stack.master_key, plan, served, self.stack)

    def stop(self) -> None:
        if self.stack is not None:
            self.stack.stop()
        self.interval = self.stack = self.gateway = None


def streamed_deltas(m: ModelPlan, key: str) -> tuple[int, int]:
    """A streamed completion straight from `m`'s backend: its tokens and the deltas that carried text."""
    body = {"model": m.served_name, "prompt": "Hi.", "max_tokens": 40, "ignore_eos": True, "stream": True}
    body["stream_options"] = {"include_usage": True}
    tokens = deltas = 0
    with httpx.stream(
        "POST", f"http://127.0.0.1:{m.port}/v1/completions", json=body, headers={"Authorization": f"Bearer {key}"}
    ) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            deltas += any(c.get("text") for c in chunk.get("choices") or [])
            tokens = (chunk.get("usage") or {}).get("completion_tokens") or tokens
    return tokens, deltas


@pytest.fixture(scope="session")
def family_stacks(tmp_path_factory) -> Stacks:
    """The parser families' stacks (examples/cpu-parsers/models.yml), one stream interval at a time: the matrix
    (tests/integration/parsers/) and the agents' runs on the GLM-4.7 format share them."""
    if os.environ.get("GATEWAY_URL"):  # make compose-test: its tests are of the deployment there, and these are not
        pytest.skip(
            "starts its own local CPU stacks (examples/cpu-parsers); tests nothing of the deployment at GATEWAY_URL"
        )
    vllm_python = os.environ.get("VLLM_PYTHON", str(ROOT / ".venv-vllm/bin/python"))
    cwd = os.getcwd()
    os.chdir(ROOT)  # model paths (and the script player's module) are relative to the repo root
    stacks = Stacks(tmp_path_factory.mktemp("parsers-stacks"), vllm_python)
    try:
        yield stacks
    finally:
        stacks.stop()
        os.chdir(cwd)
