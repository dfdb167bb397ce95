"""`make apply` on the running compose stack (docker/compose-test.sh runs this file last: it changes the stack).

In order, each step applying a changed copy of the example to the stack the earlier steps left:
1. a litellm default and a second LoRA adapter of the reasoner: no container recreated, the adapter is loaded
   into the running reasoner (vLLM's runtime route, through `docker compose exec`) and the gateway reloads
   (rolling, 2 workers) while a stream, plain requests (a new connection each) and requests to the first adapter
   (one keep-alive connection) run: every one is answered, the streams that started before the reload end with
   [DONE], the new adapter answers as its copy does, and the clamp header shows the new default;
2. in one apply, one model's flag changed and the other model renamed: the first container is recreated,
   the renamed model's old container removed and a new one added (served and listed), the gateway
   recreated, and every other container (Prometheus) keeps its id. One apply, so the two backend loads
   overlap instead of running one after the other (CI time); the recreated reasoner serves both adapters;
3. the renamed model made on demand (`on_demand: {idle: 20s}`, `docker_socket: true`): the on-demand
   controller is added; through the real Docker engine it stops the model's container (idle), starts it
   again when a request asks for the model (the request waits through the load and gets its tool call),
   and stops it once more when idle; the gateway's status shows each state; the always-on model keeps serving.
   The same apply removes the second adapter: unloaded from the running reasoner, whose container compose
   leaves alone (`up --no-deps` of the others).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from generator.demo import lora_adapter
from generator.demo.script import ANSWER_TEXT
from generator.demo.scripted_model import NO_END_LOGIT_BIAS

from .stack import container_of, docker

EXAMPLE = Path(os.environ.get("GATEWAY_MODELS", "examples/cpu-compose/models.yml"))
UNIT = "The quick brown fox jumps over the lazy dog near the river bank. "
EXTRA = "think-less-too"  # a copy of the reasoner's adapter (lora_adapter.NAME): step 1 adds it live, step 3 removes it
TIMES: dict[str, float] = {}  # what each apply took, printed at the end (docs/changing-a-running-stack.md)


@pytest.fixture(scope="module")
def stack(deployed, tmp_path_factory):
    if (
        "--num_workers" not in deployed.doc["services"]["litellm"]["command"]
        or deployed.doc["services"]["litellm"]["command"][
            deployed.doc["services"]["litellm"]["command"].index("--num_workers") + 1
        ]
        == "1"
    ):
        pytest.skip("the example's gateway runs one worker: a reload would cut (set gateway.workers: 2)")
    folder = tmp_path_factory.mktemp("apply")
    models = Path(os.environ["DEMO_MODELS_DIR"])  # mounted at /models in the backends
    shutil.copytree(models / lora_adapter.NAME, models / EXTRA, dirs_exist_ok=True)
    try:
        yield deployed, folder
    finally:
        shutil.rmtree(models / EXTRA, ignore_errors=True)
    print("\napply times: " + ", ".join(f"{k} {v:.0f}s" for k, v in TIMES.items()))


def apply(deployed, folder: Path, name: str, text: str, dry_run: bool = False) -> str:
    models = folder / f"{name}.yml"
    models.write_text(text)
    t0 = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "generator",
            "apply",
            "--models",
            str(models),
            "--out",
            str(deployed.root),
            *(["--dry-run"] if dry_run else []),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "COLUMNS": "200"},
    )
    if not dry_run:
        TIMES[name] = time.monotonic() - t0
    print(proc.stdout, proc.stderr)
    assert proc.returncode == 0, f"apply {name} failed:\n{proc.stdout}\n{proc.stderr}"
    deployed.doc.clear()
    deployed.doc.update(__import__("yaml").safe_load((deployed.root / "compose/docker-compose.yml").read_text()))
    return proc.stdout


def ids() -> dict[str, str]:
    out = docker(
        "ps",
        "-a",
        "--filter",
        f"label=com.docker.compose.project={os.environ['COMPOSE_PROJECT_NAME']}",
        "--format",
        '{{.ID}} {{.Label "com.docker.compose.service"}}',
    )
    return {svc: cid for cid, svc in (line.split() for line in out.splitlines() if line.strip())}


def headers(deployed) -> dict[str, str]:
    return {"Authorization": f"Bearer {deployed.env['LITELLM_MASTER_KEY']}"}


def chat(deployed, model: str, content: str = "Say hello.", timeout: float = 120, **extra) -> httpx.Response:
    return httpx.post(
        f"{deployed.url}/chat/completions",
        headers=headers(deployed),
        timeout=timeout,
        json={"model": model, "messages": [{"role": "user", "content": content}], **extra},
    )


def stream(deployed, model: str, **extra) -> tuple[float, float, bool]:
    """(start, end, ended with [DONE]) of one streamed chat completion through the gateway."""
    start, last = time.time(), ""
    body = {"model": model, "messages": [{"role": "user", "content": "Say hello."}], "stream": True, **extra}
    with httpx.stream(
        "POST", f"{deployed.url}/chat/completions", headers=headers(deployed), json=body, timeout=300
    ) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if line.strip():
                last = line.strip()
    return start, time.time(), last == "data: [DONE]"


class Load:
    """Streams and plain requests in loops until stopped; every outcome recorded (an exception counts as failed)."""

    def __init__(self, deployed, model: str, keep_alive_model: str | None = None):
        self.deployed, self.model, self.stop = deployed, model, threading.Event()
        self.keep_alive_model, self.kept = keep_alive_model, []
        self.streams: list[tuple[float, float, bool]] = []
        self.plain: list[int] = []
        self.errors: list[str] = []
        # one stream at a time: enough to span a reload (each one outlasts a new worker's start), and light
        # enough that the new workers' import is not starved (two streams kept both cores busy: 272 s reloads)
        self.threads = [
            threading.Thread(target=self._streams, daemon=True),
            threading.Thread(target=self._plain, daemon=True),
        ]
        if keep_alive_model:  # one client, one connection reused: a worker stopping must not close it under a request
            self.threads.append(threading.Thread(target=self._keep_alive, daemon=True))

    def _streams(self):
        while not self.stop.is_set():
            try:  # a long answer (most of the 2048-token context): past its script, end tokens banned (LiteLLM
                # stops a stream repeating one chunk)
                self.streams.append(
                    stream(self.deployed, self.model, max_tokens=1900, ignore_eos=True, logit_bias=NO_END_LOGIT_BIAS)
                )
            except Exception as exc:  # noqa: BLE001 - any failure is what the test counts
                self.errors.append(f"stream: {type(exc).__name__}: {exc}")

    def _plain(self):
        while not self.stop.is_set():
            try:
                self.plain.append(chat(self.deployed, self.model, max_tokens=8).status_code)
            except Exception as exc:  # noqa: BLE001
                self.errors.append(f"request: {type(exc).__name__}: {exc}")
            time.sleep(0.3)

    def _keep_alive(self):
        with httpx.Client(base_url=self.deployed.url, headers=headers(self.deployed), timeout=120) as client:
            while not self.stop.is_set():
                try:
                    r = client.post(
                        "/chat/completions",
                        json={
                            "model": self.keep_alive_model,
                            "max_tokens": 16,
                            "messages": [{"role": "user", "content": "Hi."}],
                        },
                    )
                    self.kept.append(r.status_code)
                except Exception as exc:  # noqa: BLE001
                    self.errors.append(f"keep-alive request: {type(exc).__name__}: {exc}")
                time.sleep(0.2)

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=320)


def supervisor_lines(since: float) -> list[tuple[float, str]]:
    out = subprocess.run(
        ["docker", "logs", "-t", "--since", str(int(since) - 1), container_of("litellm")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    found = []
    for line in (out.stdout + out.stderr).splitlines():
        stamp, _, text = line.partition(" ")
        if text.startswith("gateway-supervisor:"):
            found.append((datetime.fromisoformat(stamp[:26].rstrip("Z") + "+00:00").timestamp(), text))
    return found


def prompt_of(deployed, model: str, tokens: int) -> str:
    """A user message of about `tokens` prompt tokens (sized with the backend's own usage counts)."""
    count = lambda text: chat(deployed, model, text, max_tokens=1).json()["usage"]["prompt_tokens"]  # noqa: E731
    one, more = count(UNIT), count(UNIT * 11)
    return UNIT * max(1, round(1 + (tokens - one) / ((more - one) / 10)))


def test_a_litellm_default_reloads_the_gateway_without_losing_a_request(stack):
    deployed, folder = stack
    before = ids()
    text = EXAMPLE.read_text()
    assert text.count("litellm: {max_tokens: 256}") == 2
    new = text.replace("litellm: {max_tokens: 256}", "litellm: {max_tokens: 100}", 2)  # both models
    first = re.search(rf"^    {lora_adapter.NAME}:\n      path: /models/{lora_adapter.NAME}\b.*\n", new, flags=re.M)
    assert first, "the example's reasoner has no adapter"
    new = new[: first.start()] + f"    {EXTRA}:\n      path: /models/{EXTRA}\n" + new[first.start() :]
    plan = apply(deployed, folder, "max-tokens-dry-run", new, dry_run=True)
    assert "reload gateway: reasoner max_tokens 256 -> 100" in plan and "unchanged: tool-caller" in plan
    assert f"load adapter {EXTRA} into reasoner (no restart)" in plan, plan
    assert ids() == before  # a dry run changes nothing
    reasoner = deployed.served_name("reasoner")
    t0 = time.time()
    with Load(deployed, reasoner, keep_alive_model=lora_adapter.NAME) as load:
        time.sleep(3)  # streams in flight before the change
        out = apply(deployed, folder, "litellm default", new)
        time.sleep(2)
    assert "reload gateway" in out and "recreate" not in out
    assert f"loaded adapter {EXTRA} into reasoner (no restart)" in out, out
    assert ids() == before, "a container was recreated for a gateway-only change and an adapter"
    assert load.kept and set(load.kept) == {200}, f"keep-alive requests to {lora_adapter.NAME}: {load.kept}"
    message = chat(deployed, EXTRA, "What is the weather in Paris?", max_tokens=64).json()["choices"][0]["message"]
    assert message["content"].strip() == ANSWER_TEXT and not message.get("reasoning_content"), message
    lines = supervisor_lines(t0)
    hup = [t for t, text in lines if "rolling restart" in text]
    done = [t for t, text in lines if "reloaded" in text]
    assert hup and done, f"no rolling reload in the gateway's log: {lines}"
    assert not load.errors, f"{len(load.errors)} request(s) failed during the reload: {load.errors[:5]}"
    assert load.plain and set(load.plain) == {200}, f"plain requests during the reload: {load.plain}"
    assert all(ok for _, _, ok in load.streams), "a stream did not end with [DONE]"
    # an old worker exits only once the streams it holds are done: a stream accepted before the reload
    # (by an old worker) that ended after the first old worker exited was in flight while it was stopped
    exited = [t for t, text in lines if "old worker" in text]
    spanning = [s for s in load.streams if s[0] < hup[0] and s[1] > exited[0] - 1.5]
    assert spanning, f"no stream was in flight while an old worker stopped (streams: {load.streams}, log: {lines})"
    print(
        f"reload: {len(load.plain)} requests and {len(load.streams)} streams during it, {len(spanning)} "
        f"started before it and still running when an old worker stopped; rolled in {done[-1] - hup[0]:.1f}s"
    )
    # the new default: a prompt that leaves ~60 tokens gets the clamp header with 100 as the asked budget
    context = 2048
    r = chat(deployed, reasoner, prompt_of(deployed, reasoner, context - 60))
    assert r.status_code == 200, r.text
    asked, given = map(int, r.headers["x-gateway-max-tokens-clamped"].split("->"))
    assert asked == 100 and 0 < given < 100


def test_a_flag_and_a_rename_recreate_only_those_models(stack):
    deployed, folder = stack
    before = ids()
    assert "prometheus" in before, f"the example has no other container to stay untouched: {before}"
    text = (folder / "litellm default.yml").read_text()
    new = text.replace(
        "vllm serve /models/reasoner --max-model-len 2048", "vllm serve /models/reasoner --max-model-len 1536"
    )
    assert new != text
    new = re.sub(r"^tool-caller:", "caller-b:", new, flags=re.M)
    out = apply(deployed, folder, "flag + rename", new)
    assert "recreate reasoner: --max-model-len 2048 -> 1536" in out
    assert "remove tool-caller" in out and "add caller-b" in out and "recreate litellm" in out
    assert "keys kept" in out
    after = ids()
    assert after["reasoner"] != before["reasoner"]
    assert "tool-caller" not in after and "caller-b" in after
    untouched = set(before) - {"reasoner", "tool-caller", "litellm"}
    assert {k: after.get(k) for k in untouched} == {k: before[k] for k in untouched}, (
        "an unchanged service was recreated"
    )
    r = chat(deployed, deployed.served_name("reasoner"), max_tokens=16)
    assert r.status_code == 200, r.text
    listed = {
        m["id"] for m in httpx.get(f"{deployed.url}/models", headers=headers(deployed), timeout=30).json()["data"]
    }
    assert listed == {deployed.served_name("reasoner"), deployed.served_name("caller-b"), lora_adapter.NAME, EXTRA}
    assert chat(deployed, EXTRA, max_tokens=16).status_code == 200  # the recreated reasoner loads both adapters
    r = chat(
        deployed,
        deployed.served_name("caller-b"),
        "What is the weather in Paris? Use the tool.",
        max_tokens=64,
        tools=[
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                },
            }
        ],
    )
    assert r.status_code == 200, r.text
    assert json.loads(r.json()["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"])


def gateway_states(deployed) -> dict[str, str]:
    r = httpx.get(deployed.url.removesuffix("/v1") + "/gateway/status", headers=headers(deployed), timeout=30)
    r.raise_for_status()
    return {m["name"]: m["state"] for m in r.json()["models"]}


def running(service: str) -> bool:
    out = docker(
        "ps",
        "-a",
        "--filter",
        f"label=com.docker.compose.project={os.environ['COMPOSE_PROJECT_NAME']}",
        "--filter",
        f"label=com.docker.compose.service={service}",
        "--format",
        "{{.State}}",
    )
    return out.strip() == "running"


def wait_for(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(1)
    raise AssertionError(f"not {what} within {seconds:.0f}s")


def test_a_model_made_on_demand_is_stopped_and_started_by_the_controller_through_docker(stack):
    deployed, folder = stack
    text = (folder / "flag + rename.yml").read_text()
    new = text.replace(
        "\nreasoner:",
        "\non_demand: {docker_socket: true}   # the controller starts/stops caller-b's container\n\nreasoner:",
        1,
    )
    new = re.sub(r"^(caller-b:\n)", r"\1  on_demand: {idle: 20s}\n", new, flags=re.M)
    new = re.sub(r"^  start_after: \[reasoner\].*\n", "", new, flags=re.M)  # on demand: no start order (a rule)
    assert "on_demand: {idle: 20s}" in new and "docker_socket: true" in new
    extra = f"    {EXTRA}:\n      path: /models/{EXTRA}\n"
    assert new.count(extra) == 1
    new = new.replace(extra, "")  # the second adapter goes: unloaded live, the reasoner's container kept
    before = ids()
    out = apply(deployed, folder, "on demand", new)
    assert "add on-demand" in out, out
    assert f"unloaded adapter {EXTRA} from reasoner (no restart)" in out, out
    assert "on-demand" in ids()
    assert ids()["reasoner"] == before["reasoner"], "the reasoner was recreated to remove an adapter"
    assert 400 <= chat(deployed, EXTRA, max_tokens=8).status_code < 500  # no longer a model of the gateway
    caller, reasoner = deployed.served_name("caller-b"), deployed.served_name("reasoner")
    # `make apply` created caller-b's container stopped, or the controller adopted the running one and its
    # idle timeout stops it: either way it ends stopped, by the controller's hand (through the Docker socket)
    t0 = time.monotonic()
    wait_for(
        lambda: not running("caller-b") and gateway_states(deployed).get(caller) == "stopped", 180, "caller-b stopped"
    )
    assert gateway_states(deployed)[reasoner] == "healthy"
    seen: set[str] = set()
    sampling = threading.Event()

    def sample():
        while not sampling.is_set():
            try:
                seen.add(gateway_states(deployed)[caller])
            except httpx.HTTPError:
                pass
            time.sleep(1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t1 = time.monotonic()
    r = chat(
        deployed,
        caller,
        "What is the weather in Paris? Use the tool.",
        timeout=600,
        max_tokens=64,
        tools=[
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                },
            }
        ],
    )
    loaded_after = time.monotonic() - t1
    sampling.set()
    sampler.join(timeout=30)
    assert r.status_code == 200, r.text
    assert json.loads(r.json()["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"])
    assert running("caller-b"), "the controller did not start caller-b's container"
    assert "loading" in seen, f"status never showed caller-b loading: {seen}"
    assert gateway_states(deployed)[caller] == "loaded"
    assert chat(deployed, reasoner, max_tokens=8).status_code == 200  # the always-on model was never touched
    t2 = time.monotonic()
    wait_for(lambda: not running("caller-b"), 120, "caller-b stopped after 20 s idle")
    unloaded_after = time.monotonic() - t2
    assert gateway_states(deployed)[caller] == "stopped"
    TIMES["on-demand first stop"] = t1 - t0
    TIMES["on-demand load through the gateway"] = loaded_after
    TIMES["on-demand idle stop"] = unloaded_after
    print(
        f"on demand (compose): stopped {t1 - t0:.0f}s after apply, a request waited {loaded_after:.0f}s through "
        f"its container's start, stopped again {unloaded_after:.0f}s after its last request (idle 20 s); "
        f"states seen: {sorted(seen)}"
    )
