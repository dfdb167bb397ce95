"""The fit check from Hub metadata, before any download: the real huggingface_hub against a local stand-in
for the Hub (tests/unit/fake_hub.py) serving the published configs (tests/unit/fixtures/fit/SOURCE.md) and
header-only safetensors files built from them (tests/unit/checkpoints.py). Nothing here reaches the
internet: HF_ENDPOINT is the local server, or HF_HUB_OFFLINE=1 (tests/unit/conftest.py)."""

from __future__ import annotations

import functools
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import checkpoints
import pytest
from conftest import ROOT
from fake_hub import FakeHub, commit_of

from generator.compile.load import fit, model_files
from generator.compile.load.sizes import parse_size
from generator.compile.load.vllm_command import load_catalog, parse_serve_command
from generator.errors import ConfigError

FIXTURES = Path(__file__).parent / "fixtures" / "fit"
GIB = 2**30
# repo id on the fake Hub -> (fixture folder, AWQ checkpoint, one model.safetensors instead of shards)
REPOS = {
    "Qwen/Qwen3-8B": ("qwen3-8b", False, False),
    "meta-llama/Llama-3.1-70B": ("llama-3.1-70b", False, False),
    "zai-org/GLM-4.7-Flash": ("glm-4.7-flash", False, False),
    "QuantTrio/GLM-4.7-Flash-AWQ": ("glm-4.7-flash-awq", True, False),
    "Qwen/Qwen3-8B-AWQ": ("qwen3-8b-awq", True, False),
    "Qwen/Qwen2.5-1.5B-Instruct": ("qwen2.5-1.5b-instruct", False, True),
}
GATED = {"meta-llama/Llama-3.1-70B"}  # gated on huggingface.co: its files need a granted token
TOKEN = "hf_granted"


@functools.cache
def repo_files(repo: str) -> dict[str, bytes]:
    folder, awq, single = REPOS[repo]
    config = json.loads((FIXTURES / folder / "config.json").read_text())
    tensors = checkpoints.layout(config)
    if awq:
        tensors = checkpoints.awq(tensors, config["quantization_config"]["group_size"])
    files = checkpoints.header_only_files(tensors, single)
    for name in ("config.json", "tokenizer_config.json"):
        if (FIXTURES / folder / name).is_file():
            files[name] = (FIXTURES / folder / name).read_bytes()
    return files


@pytest.fixture
def hub(monkeypatch):
    """hub(**FakeHub options) -> a running fake Hub, HF_ENDPOINT pointing at it and HF_HUB_OFFLINE unset.
    huggingface_hub reads a few settings when first imported (conftest.py points its caches at the test's)."""
    import huggingface_hub.constants as hf_constants

    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hf_constants, "HF_HUB_DISABLE_TELEMETRY", True)  # no agent-registry request
    monkeypatch.delenv("HF_HUB_OFFLINE")
    started: list[FakeHub] = []

    def start(**options) -> FakeHub:
        server = FakeHub({r: repo_files(r) for r in REPOS}, gated=GATED, token=TOKEN, **options).__enter__()
        started.append(server)
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        return server

    yield start
    for t in threading.enumerate():  # a fetch cut off by the deadline finishes against the server, not a closed one
        if t.name.startswith("fit-hub"):
            t.join(30)
    for server in started:
        server.__exit__(None, None, None)


def cmd_of(model: str, flags: str = "--max-model-len 16K"):
    return parse_serve_command(f"vllm serve {model} {flags}", load_catalog())


def meta(model: str, flags: str = "--max-model-len 16K") -> model_files.ModelFiles:
    return model_files.gather({"m": cmd_of(model, flags)})["m"]


def verdict(model: str, flags: str, gpus=(0,), util=0.9) -> fit.Verdict:
    cmd = cmd_of(model, flags)
    return fit.check(meta(model, flags), cmd, gpus, parse_size(cmd.value("--max-model-len")), util, 80 * GIB, {})


def without_source(line: str) -> str:
    return line.split("; metadata from ")[0]


# --- the repo's models.yml, as a user on a machine that reaches the Hub runs it -----------------------------


def generate(models: Path, out: Path, **env: str) -> subprocess.CompletedProcess:
    """The generator CLI with `env`; FIT_HUB_TIMEOUT 30 s, not 3: the stand-in Hub answers from this test process,
    which a CI run's busy cores kept from answering within 3 s once (glm47-flash's config.json: "skipped").
    The timeouts have tests of their own (a slow Hub, below)."""
    environ = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"} | {"FIT_HUB_TIMEOUT": "30"} | env
    return subprocess.run(
        [sys.executable, "-m", "generator", "--models", str(models), "--out", str(out)],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def fit_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("fit ")]


def test_the_repo_models_get_an_estimate_from_the_hub_then_from_the_cache_without_a_request(hub, tmp_path):
    server = hub()
    first = generate(ROOT / "models.yml", tmp_path / "online", HF_ENDPOINT=server.url)
    assert first.returncode == 0, first.stderr
    lines = fit_lines(first.stdout)
    assert [line.split(":")[0] for line in lines] == ["fit glm47-flash", "fit qwen3-8b", "fit small-chat"]
    assert all(": fits: weights " in line and "; metadata from the Hub: " in line for line in lines), lines
    assert "reading config.json and safetensors headers of 3 model(s) from the Hub at " + server.url in first.stderr
    page = (ROOT / "docs/rules.md").read_text()
    for line in lines:  # the fit check's documentation shows what a user sees: these exact lines
        assert line in page, f"docs/rules.md does not show: {line}"
    asked = server.paths()
    assert any(p.startswith("GET /api/models/QuantTrio/GLM-4.7-Flash-AWQ") for p in asked)
    assert any("range" in h for m, p, h in server.requests if p.endswith(".safetensors"))  # headers only

    server.requests.clear()
    second = generate(ROOT / "models.yml", tmp_path / "online", HF_ENDPOINT=server.url)
    assert second.returncode == 0, second.stderr
    assert server.requests == []  # served from the cache
    assert [
        line.replace("metadata from the cache of an earlier Hub fetch: ", "metadata from the Hub: ")
        for line in fit_lines(second.stdout)
    ] == lines
    assert "reading config.json" not in second.stderr

    offline = generate(
        ROOT / "models.yml",
        tmp_path / "offline",
        HF_ENDPOINT=server.url,
        HF_HUB_OFFLINE="1",
        HF_HOME=str(tmp_path / "empty-home"),
    )
    assert offline.returncode == 0 and server.requests == []
    assert all("skipped: " in line and "HF_HUB_OFFLINE=1" in line for line in fit_lines(offline.stdout))
    generated = sorted(p.relative_to(tmp_path / "online") for p in (tmp_path / "online").rglob("*") if p.is_file())
    assert generated == sorted(
        p.relative_to(tmp_path / "offline") for p in (tmp_path / "offline").rglob("*") if p.is_file()
    )
    for rel in generated:  # nothing written depends on whether the Hub answered (only the summary does)
        if rel.name != ".env":  # fresh random keys
            assert (tmp_path / "online" / rel).read_bytes() == (tmp_path / "offline" / rel).read_bytes(), rel


# --- the same verdicts as from disk ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "repo, flags, gpus",
    [
        ("Qwen/Qwen3-8B", "--max-model-len 32K --gpu-memory-utilization 0.55", (0,)),
        ("Qwen/Qwen3-8B", "--max-model-len 32K --gpu-memory-utilization 0.2", (0,)),
        ("meta-llama/Llama-3.1-70B", "--max-model-len 32K", (0,)),
        ("meta-llama/Llama-3.1-70B", "--max-model-len 128K -tp 2", (0, 1)),
        ("zai-org/GLM-4.7-Flash", "--max-model-len 16K --gpu-memory-utilization 0.6", (0,)),
        ("QuantTrio/GLM-4.7-Flash-AWQ", "--max-model-len 16K --kv-cache-dtype fp8 --gpu-memory-utilization 0.9", (0,)),
        ("Qwen/Qwen3-8B-AWQ", "--max-model-len 32K --gpu-memory-utilization 0.1", (0,)),
        ("Qwen/Qwen2.5-1.5B-Instruct", "--max-model-len 8k --gpu-memory-utilization 0.35", (0,)),
    ],
)
def test_the_hub_gives_the_same_verdict_as_the_files_on_disk(hub, monkeypatch, tmp_path, repo, flags, gpus):
    util = float(flags.split("--gpu-memory-utilization ")[1]) if "utilization" in flags else 0.9
    local = checkpoints.write(tmp_path / "local", repo_files(repo))
    on_disk = verdict(str(local), flags, gpus, util)
    hub()
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    from_hub = verdict(repo, flags, gpus, util)
    assert on_disk.fits is not None and on_disk.fits == from_hub.fits
    assert on_disk.line.endswith(f"; metadata from disk: {local}")
    assert from_hub.line.endswith(f"; metadata from the Hub: {repo}@{commit_of(repo)[:7]}")
    assert without_source(from_hub.line) == without_source(on_disk.line)
    assert from_hub.problem.replace(
        f"metadata from the Hub: {repo}@{commit_of(repo)[:7]}", "X"
    ) == on_disk.problem.replace(f"metadata from disk: {local}", "X")


@pytest.mark.parametrize("folder", ["qwen3-8b", "llama-3.1-70b", "glm-4.7-flash"])
def test_the_built_checkpoints_have_the_published_sizes(folder):
    config = json.loads((FIXTURES / folder / "config.json").read_text())
    index = json.loads((FIXTURES / folder / "model.safetensors.index.json").read_text())
    assert checkpoints.nbytes(checkpoints.layout(config)) == index["metadata"]["total_size"]


def test_an_awq_checkpoint_is_estimated_from_its_real_tensor_sizes(hub):
    hub()
    awq, bf16 = meta("QuantTrio/GLM-4.7-Flash-AWQ"), meta("zai-org/GLM-4.7-Flash")
    config = json.loads((FIXTURES / "glm-4.7-flash-awq" / "config.json").read_text())
    expected = checkpoints.nbytes(checkpoints.awq(checkpoints.layout(config), 128))
    assert awq.weights.stored == expected == 16_587_111_168  # packed int32 weights and zeros, fp16 scales
    assert bf16.weights.stored == 59_886_787_840  # parameters x 2, as the published index says
    est = fit.estimate(awq.config, awq.weights, cmd_of("x"))
    assert est.weights == expected and est.dtype_note == "awq 4-bit checkpoint"


def test_fp8_and_gptq_checkpoints_load_as_stored_not_cast(tmp_path):
    for method, dtypes in (("fp8", ["F8_E4M3", "F32", "BF16"]), ("gptq", ["I32", "I32", "F16", "I32"])):
        d = tmp_path / method
        config = {
            "num_hidden_layers": 2,
            "num_attention_heads": 8,
            "hidden_size": 1024,
            "torch_dtype": "bfloat16",
            "quantization_config": {"quant_method": method, **({"bits": 4} if method == "gptq" else {})},
        }
        tensors = [(f"t{i}", dtype, [1024, 256]) for i, dtype in enumerate(dtypes)]
        checkpoints.write(
            d, {"config.json": json.dumps(config).encode(), **checkpoints.header_only_files(tensors, True)}
        )
        files = meta(str(d))
        est = fit.estimate(files.config, files.weights, cmd_of("x", "--max-model-len 8K --dtype float32"))
        assert est.weights == checkpoints.nbytes(tensors)  # no cast to --dtype: quantized tensors load as stored
        assert est.dtype_note == ("fp8 checkpoint" if method == "fp8" else "gptq 4-bit checkpoint")


# --- failures: one line, within seconds ------------------------------------------------------------------------


def test_offline_is_a_one_line_skip_without_any_request(hub, monkeypatch):
    server = hub()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    v = verdict("Qwen/Qwen3-8B", "--max-model-len 32K")
    assert v.fits is None and v.line.startswith("skipped: no config.json for Qwen/Qwen3-8B on disk")
    assert v.line.endswith("; HF_HUB_OFFLINE=1 keeps the Hub out") and "\n" not in v.line
    assert server.requests == []


def test_a_closed_port_is_a_one_line_skip(hub, monkeypatch):
    hub()
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    v = verdict("Qwen/Qwen3-8B", "--max-model-len 32K")
    assert v.fits is None and "\n" not in v.line
    assert f"; the Hub at http://127.0.0.1:{port} could not be reached (ConnectError: " in v.line


def test_an_endpoint_that_is_not_a_hub_is_a_one_line_skip(hub, monkeypatch):
    server = hub()
    monkeypatch.setenv("HF_ENDPOINT", server.url + "/not-a-hub")  # plain 404s, without the Hub's X-Error-Code
    v = verdict("Qwen/Qwen3-8B", "--max-model-len 32K")
    assert v.fits is None and v.line.endswith(
        f"; {server.url}/not-a-hub answered 404 for Qwen/Qwen3-8B without saying "
        "what is missing: is HF_ENDPOINT a Hugging Face Hub or a mirror of it?"
    )


def test_a_gated_model_without_a_token_is_a_skip_and_hf_token_is_honoured(hub, monkeypatch):
    server = hub()
    v = verdict("meta-llama/Llama-3.1-70B", "--max-model-len 32K -tp 2", gpus=(0, 1))
    assert v.fits is None and "\n" not in v.line
    assert (
        "meta-llama/Llama-3.1-70B is a gated repository on " + server.url + " and this request has no access "
        "(the Hub answered 401); set HF_TOKEN to a token that was granted access to it"
    ) in v.line
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert verdict("meta-llama/Llama-3.1-70B", "--max-model-len 32K -tp 2", gpus=(0, 1)).fits is True
    assert any(h.get("authorization") == f"Bearer {TOKEN}" for _, _, h in server.requests)


def test_a_model_id_the_hub_does_not_know_is_a_problem_that_names_the_model(hub, write):
    hub()
    path = write(
        "gpu_memory: 80GiB\nglm:\n  gpus: [0]\n  command: vllm serve QuantTrio/GLM-4.7-Flash-AWQX --max-model-len 16K\n"
    )
    with pytest.raises(ConfigError) as err:
        from generator.compile.load.loader import load_plan

        load_plan(path)
    (msg,) = map(str, err.value.problems)
    assert msg.startswith(f"{path}:4: glm.command: model 'QuantTrio/GLM-4.7-Flash-AWQX' does not exist on ")
    assert "(the Hub answered 401)" in msg and "check the repo id's spelling" in msg
    assert "no did-you-mean is possible" in msg and "set HF_TOKEN" in msg


def test_the_revision_of_the_command_is_asked_for_and_a_wrong_one_is_a_problem(hub):
    server = hub()
    commit = commit_of("Qwen/Qwen3-8B")
    files = meta("Qwen/Qwen3-8B", f"--max-model-len 32K --revision {commit}")
    assert files.origin == "Hub" and files.where == f"Qwen/Qwen3-8B@{commit[:7]}"
    assert f"GET /api/models/Qwen/Qwen3-8B/revision/{commit}" in server.paths()
    assert all(commit in p for p in server.paths())
    wrong = meta("Qwen/Qwen3-8B", "--max-model-len 32K --revision v9")
    assert wrong.config is None and wrong.problem.startswith("--revision v9 does not exist in Qwen/Qwen3-8B on ")


def test_a_silent_hub_is_a_skip_after_the_configured_timeout(hub, monkeypatch):
    server = hub(delay=30)
    monkeypatch.setenv("FIT_HUB_TIMEOUT", "0.5")
    start = time.monotonic()
    v = verdict("Qwen/Qwen3-8B", "--max-model-len 32K")
    took = time.monotonic() - start
    assert v.fits is None and v.line.endswith(
        f"; the Hub at {server.url} did not answer within 0.5 s (FIT_HUB_TIMEOUT)"
    )
    # not huggingface_hub's own 10 s request timeout: the configured one was passed to every request
    assert took < 10, took


def test_a_hub_that_answers_too_slowly_in_all_is_cut_off_after_three_timeouts(hub, monkeypatch):
    server = hub(delay=0.3)  # each answer within the timeout; a model's dozen requests are not
    monkeypatch.setenv("FIT_HUB_TIMEOUT", "0.5")
    v = verdict("Qwen/Qwen3-8B", "--max-model-len 32K")
    assert v.fits is None and v.line.endswith(
        f"; the Hub at {server.url} did not finish answering within 1.5 s (3 x FIT_HUB_TIMEOUT 0.5 s)"
    )


def test_a_repo_without_safetensors_gives_its_config_but_no_estimate(hub, monkeypatch):
    server = hub()
    server.repos["someone/bin-only"] = {
        "config.json": repo_files("Qwen/Qwen3-8B")["config.json"],
        "pytorch_model.bin": b"\0",
    }
    files = meta("someone/bin-only")
    assert files.config["num_hidden_layers"] == 36 and files.weights is None
    v = fit.check(files, cmd_of("someone/bin-only"), (0,), 16384, 0.9, 80 * GIB, {})
    assert (
        v.line == f"skipped: someone/bin-only@{commit_of('someone/bin-only')[:7]} has no safetensors weights "
        "(model.safetensors or its index)"
    )


# --- the context from the model's config -------------------------------------------------------------------------


def test_without_max_model_len_the_context_comes_from_the_config_fetched_before_the_plan(hub, plan):
    hub()
    (m,) = plan("gpu_memory: 80GiB\nqwen:\n  gpus: [0]\n  command: vllm serve Qwen/Qwen3-8B\n").models
    assert m.context == 40960 and m.max_tokens == 20480 and m.max_tokens_derived
    assert m.context_from == (
        f"config.json max_position_embeddings 40960; metadata from the Hub: "
        f"Qwen/Qwen3-8B@{commit_of('Qwen/Qwen3-8B')[:7]}"
    )
    assert m.fit.startswith("fits: weights 15.3 GiB + KV 5.6 GiB for one 40960-token sequence")
    (auto,) = plan(
        "gpu_memory: 80GiB\nqwen:\n  gpus: [0]\n  command: vllm serve Qwen/Qwen3-8B --max-model-len auto\n"
    ).models
    assert (
        auto.context == 40960
        and "with --max-model-len auto vLLM takes this when it fits, else less" in auto.context_from
    )


def test_auto_that_does_not_fit_asks_for_a_max_model_len(hub, problems):
    hub()
    (msg,) = problems(
        "gpu_memory: 80GiB\nqwen:\n  gpus: [0]\n  command: vllm serve Qwen/Qwen3-8B "
        "--max-model-len auto --gpu-memory-utilization 0.2\n"
    )
    assert "does not fit" in msg and "lower --max-model-len to" in msg
    assert msg.endswith(
        "with --max-model-len auto vLLM would shorten the context to what fits, but the gateway "
        "must know it: set --max-model-len"
    )


def test_without_max_model_len_and_without_a_config_the_problem_says_why(problems):
    (msg,) = problems("qwen:\n  gpus: [0]\n  command: vllm serve Qwen/Qwen3-8B\n")
    assert (
        "qwen.command: --max-model-len is missing, so the context (and a safe max_tokens) is unknown, and the "
        "model's config gives none (no config.json for Qwen/Qwen3-8B on disk" in msg
    )
    assert (
        "HF_HUB_OFFLINE=1 keeps the Hub out); add `--max-model-len 16K` to the command or `context_length: 16K`" in msg
    )


def test_context_length_still_wins_and_a_context_above_the_model_is_a_warning(tmp_path, plan):
    d = shutil.copytree(FIXTURES / "qwen3-8b", tmp_path / "qwen3-8b")
    (m,) = plan(f"q:\n  gpus: []\n  command: vllm serve {d}\n  context_length: 16K\n").models
    assert m.context == 16384 and m.context_from == ""
    p = plan(f"q:\n  gpus: []\n  command: vllm serve {d} --max-model-len 64K\n")
    assert p.warnings == (
        "q: --max-model-len 65536 (64K) is above the model's 40960 (40K) (config.json "
        "max_position_embeddings 40960): vLLM refuses to start unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 "
        "is in its env",
    )
    allowed = plan(
        f"q:\n  gpus: []\n  env: {{VLLM_ALLOW_LONG_MAX_MODEL_LEN: '1'}}\n"
        f"  command: vllm serve {d} --max-model-len 64K\n"
    )
    assert allowed.warnings == ()


@pytest.mark.parametrize(
    "config, tokenizer_max, expected",
    [
        ({"max_position_embeddings": 40960}, None, (40960, "config.json max_position_embeddings 40960")),
        ({"max_position_embeddings": 32768}, 131072, (32768, "config.json max_position_embeddings 32768")),
        ({"max_position_embeddings": 32768}, 8192, (8192, "tokenizer_config.json model_max_length 8192")),
        (
            {"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 4.0}},
            None,
            (16384, "config.json max_position_embeddings 4096 x RoPE scaling factor 4 (linear)"),
        ),
        (
            {"max_position_embeddings": 4096, "rope_parameters": {"rope_type": "dynamic", "factor": 2.0}},
            None,
            (8192, "config.json max_position_embeddings 4096 x RoPE scaling factor 2 (dynamic)"),
        ),
        # vLLM 0.32: yarn and llama3 configs already give the scaled length in max_position_embeddings
        (
            {
                "max_position_embeddings": 32768,
                "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
            },
            None,
            (32768, "config.json max_position_embeddings 32768"),
        ),
        (
            json.loads((FIXTURES / "llama-3.1-70b" / "config.json").read_text()),
            None,
            (131072, "config.json max_position_embeddings 131072"),
        ),
        (
            {
                "max_position_embeddings": 131072,
                "original_max_position_embeddings": 4096,
                "rope_scaling": {"type": "longrope", "long_factor": [1.0], "short_factor": [1.0]},
            },
            None,
            (4096, "config.json original_max_position_embeddings 4096 (longrope)"),
        ),
        (
            {"max_position_embeddings": 8192, "model_max_length": 131072},
            None,
            (131072, "config.json model_max_length 131072"),
        ),
        (
            {"architectures": ["X"], "text_config": {"max_position_embeddings": 262144}},
            None,
            (262144, "config.json max_position_embeddings 262144"),
        ),
        ({"n_positions": 1024, "max_position_embeddings": 2048}, None, (1024, "config.json n_positions 1024")),
        ({"hidden_size": 8}, None, None),
    ],
)
def test_the_context_vllm_derives_from_a_config(config, tokenizer_max, expected):
    assert fit.config_context(config, tokenizer_max) == expected


def test_unit_tests_cannot_reach_the_internet():
    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["HF_ENDPOINT"] == "http://127.0.0.1:9"
    with pytest.raises(socket.gaierror, match="unit tests do not reach the network"):
        socket.getaddrinfo("huggingface.co", 443)
