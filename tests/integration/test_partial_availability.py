"""A stack with one broken model: `up` reports it (exit code, last log lines) and exits non-zero, the
gateway and the healthy model keep serving, and requests for the broken one fail fast and clearly.

Runs its own small CPU stack through `python -m generator.operate.runtime up/down`, on free ports (never the
session stack's, a demo's or another checkout's), next to it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import openai
import psutil
import pytest

from generator.compile.load.loader import load_plan
from generator.compile.output import read_env_file
from generator.operate.runtime.ports import free_ports

from .conftest import DEMO_MODELS, ROOT

HELLO = [{"role": "user", "content": "Say hello."}]


def _models_yml(demo_model, gateway_port: int, good_port: int, broken_port: int) -> str:
    env = "".join(f"    {k}: {v!r}\n" for k, v in demo_model.env.items())
    return f"""
gateway: {{port: {gateway_port}, workers: 1}}  # one gateway worker: ~8 CPU-s less to start; the demo stack tests 2
broken:                      # a path with no model: vLLM exits at start-up
  gpus: []
  env:
{env}  command: vllm serve .cache/demo-models/no-such-model --max-model-len 2048 --enforce-eager --port {broken_port}
good:
  gpus: []
  start_after: [broken]      # a failed model holds no memory: the next one still starts
  env:
{env}  command: vllm serve {demo_model.model} --max-model-len {demo_model.context} --enforce-eager --port {good_port}
"""


def _runtime(*args: str, timeout: float) -> subprocess.CompletedProcess:
    vllm_python = os.environ.get("VLLM_PYTHON", str(ROOT / ".venv-vllm/bin/python"))
    extra = ["--vllm-python", vllm_python] if args[0] == "up" else []
    return subprocess.run(
        [sys.executable, "-m", "generator.operate.runtime", *args, *extra],
        cwd=ROOT,
        text=True,
        capture_output=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def partial_stack(tmp_path_factory):
    if os.environ.get("GATEWAY_URL"):
        pytest.skip("starts its own local CPU stack")
    tmp = tmp_path_factory.mktemp("partial")
    demo = load_plan(DEMO_MODELS).models[0]
    gateway_port, *backend_ports = free_ports(3)  # never the session stack's, a demo's or another checkout's
    (tmp / "models.yml").write_text(_models_yml(demo, gateway_port, *backend_ports))
    state = tmp / "state"
    try:
        up = _runtime("up", "--models", str(tmp / "models.yml"), "--state-dir", str(state), timeout=900)
        yield up, state, gateway_port
    finally:
        recorded = json.loads((state / "state.json").read_text())["procs"] if (state / "state.json").exists() else []
        sessions = [p["sid"] for p in recorded]
        _runtime("down", "--state-dir", str(state), timeout=120)
        left = [p.pid for p in psutil.process_iter() if _sid(p.pid) in sessions]
        assert not left, f"`down` left processes running: {left}"


def _sid(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def test_up_reports_the_broken_model_with_exit_code_and_log_lines_and_exits_non_zero(partial_stack):
    up, state, gateway_port = partial_stack
    assert up.returncode == 1, up.stderr[-3000:]
    out = up.stderr
    assert "failed: broken exited with code" in out and "1 of 2 model(s) failed to start: broken" in out
    last_line = [line for line in (state / "logs" / "broken.log").read_text().splitlines() if line.strip()][-1]
    assert last_line.strip()[:60] in out  # the log's last lines are in the report
    assert "good: ready" in out and f"gateway ready at http://127.0.0.1:{gateway_port}/v1 serving good" in out


def test_the_healthy_model_is_served_and_the_broken_one_fails_fast_and_clearly(partial_stack):
    _, state, gateway_port = partial_stack
    key = read_env_file(state / ".env")["LITELLM_MASTER_KEY"]
    # a hang would end in APITimeoutError, not in the assertions below
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{gateway_port}/v1", api_key=key, timeout=60, max_retries=0)
    answer = client.chat.completions.create(model="good", messages=HELLO, max_tokens=32)
    assert answer.choices[0].message.content or answer.choices[0].message.tool_calls
    with pytest.raises(openai.APIStatusError) as err:
        client.chat.completions.create(model="broken", messages=HELLO, max_tokens=32)
    assert 400 <= err.value.status_code < 600


def test_the_cpu_demo_models_get_a_fit_estimate_from_their_files():
    cwd = os.getcwd()
    os.chdir(ROOT)  # the demo's model paths are relative to the repo root
    try:
        plan = load_plan(DEMO_MODELS)
    finally:
        os.chdir(cwd)
    for m in plan.models:
        assert m.fit.startswith("weights ") and "/token" in m.fit and "no GPU check (gpus: [])" in m.fit, m.fit
