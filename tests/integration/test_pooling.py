"""Embeddings, rerank and a LoRA adapter through the real gateway: examples/cpu-pooling/models.yml (the designed tiny
embedder and reranker of generator/demo/pooling_models.py, the scripted reasoner with its think-less adapter of
generator/demo/lora_adapter.py, served by real vLLM CPU processes), started once for this module on free ports.
The OpenAI SDK for embeddings and chat; rerank (Cohere/Jina shape) with plain HTTP at /rerank and /v1/rerank."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest
import yaml

from generator.compile.load.loader import load_plan
from generator.demo import lora_adapter
from generator.demo import pooling_models as designed
from generator.demo.script import ANSWER_TEXT, REASONING_TEXT
from generator.operate.runtime.adapters import apply_adapters
from generator.operate.runtime.local import LocalStack

from .conftest import ROOT, on_free_ports
from .helpers import clamp_note

EXAMPLE = ROOT / "examples/cpu-pooling/models.yml"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    if os.environ.get("GATEWAY_URL"):
        pytest.skip("starts its own local CPU stack (examples/cpu-pooling)")
    vllm_python = os.environ.get("VLLM_PYTHON", str(ROOT / ".venv-vllm/bin/python"))
    cwd = os.getcwd()
    os.chdir(ROOT)  # model paths in the example are relative to the repo root
    tmp = tmp_path_factory.mktemp("pooling-stack")
    stack = LocalStack(load_plan(on_free_ports(EXAMPLE, tmp / "models.yml")), tmp / "state", vllm_python)
    try:
        stack.start(timeout=600)
        yield stack
    finally:
        stack.stop()
        os.chdir(cwd)


@pytest.fixture(scope="module")
def client(stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.gateway_url}/v1", api_key=stack.master_key, max_retries=0, timeout=60)


def vectors(client: openai.OpenAI, texts, **kw) -> np.ndarray:
    out = client.embeddings.create(model="embedder", input=texts, encoding_format="float", **kw)
    return np.array([d.embedding for d in sorted(out.data, key=lambda d: d.index)])


def test_embeddings_have_the_models_shape_and_the_designed_geometry(client):
    v = vectors(client, [*designed.NEAR, designed.FAR])
    assert v.shape == (3, designed.HIDDEN)
    assert np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-4)  # sentence-transformers Normalize
    near, far = v[0] @ v[1], max(v[0] @ v[2], v[1] @ v[2])
    assert near > 0.8 and far < 0.2, (near, far)


def test_a_batch_of_16_keeps_its_order(client):
    texts = [f"{'cat ' * (i + 1)}and stock" for i in range(16)]
    v = vectors(client, texts)
    assert v.shape == (16, designed.HIDDEN)
    one = vectors(client, texts[5])
    assert np.allclose(v[5], one[0], atol=1e-5)
    animal_share = [row[0] for row in v]  # dimension 0: the animal topic; more cats, more of it
    assert animal_share == sorted(animal_share)


def test_embeddings_are_deterministic(client):
    assert np.array_equal(vectors(client, designed.NEAR), vectors(client, designed.NEAR))


def test_base64_decodes_to_the_same_floats(client):
    floats = vectors(client, designed.FAR)[0]
    raw = client.embeddings.create(model="embedder", input=designed.FAR, encoding_format="base64").data[0].embedding
    assert isinstance(raw, str)
    assert np.allclose(np.frombuffer(base64.b64decode(raw), dtype=np.float32), floats, atol=1e-6)
    sdk_default = client.embeddings.create(model="embedder", input=designed.FAR).data[0].embedding  # base64 underneath
    assert np.allclose(sdk_default, floats, atol=1e-6)


def test_dimensions_shortens_a_matryoshka_embedding(client):
    assert vectors(client, designed.FAR, dimensions=32).shape == (1, 32)


def test_over_long_input_is_a_400_naming_the_limit(client):
    with pytest.raises(openai.BadRequestError) as err:
        client.embeddings.create(model="embedder", input="cat " * 400)
    assert err.value.status_code == 400 and str(designed.CONTEXT) in str(err.value)


def test_chat_to_an_embedding_model_is_a_clear_error(client):
    with pytest.raises(openai.APIStatusError) as err:
        client.chat.completions.create(model="embedder", messages=[{"role": "user", "content": "hi"}])
    assert 400 <= err.value.status_code < 500


@pytest.mark.parametrize("path", ["/rerank", "/v1/rerank"])
def test_rerank_orders_the_designed_documents(stack, path):
    r = httpx.post(
        stack.gateway_url + path,
        headers={"Authorization": f"Bearer {stack.master_key}"},
        timeout=60,
        json={"model": "reranker", "query": designed.RERANK_QUERY, "documents": designed.RERANK_DOCUMENTS},
    )
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert sorted(x["index"] for x in results) == list(range(len(designed.RERANK_DOCUMENTS)))
    assert [x["index"] for x in results][:3] == designed.RERANK_ORDER
    scores = [x["relevance_score"] for x in results]
    assert scores == sorted(scores, reverse=True) and scores[2] > scores[3]


def test_rerank_top_n_and_a_malformed_request(stack):
    headers = {"Authorization": f"Bearer {stack.master_key}"}
    r = httpx.post(
        stack.gateway_url + "/rerank",
        headers=headers,
        timeout=60,
        json={"model": "reranker", "query": designed.RERANK_QUERY, "documents": designed.RERANK_DOCUMENTS, "top_n": 2},
    )
    assert [x["index"] for x in r.json()["results"]] == designed.RERANK_ORDER[:2]
    r = httpx.post(
        stack.gateway_url + "/rerank",
        headers=headers,
        timeout=60,
        json={"model": "reranker", "query": "q", "documents": []},
    )
    assert r.status_code == 400 and "documents" in r.text
    r = httpx.post(
        stack.gateway_url + "/rerank", timeout=60, json={"model": "reranker", "query": "q", "documents": ["d"]}
    )
    assert r.status_code == 401


def test_models_lists_every_model_and_the_adapter(client):
    assert {"embedder", "reranker", "reasoner", lora_adapter.NAME} <= {m.id for m in client.models.list()}


# --- the LoRA adapter -------------------------------------------------------------------------------
WEATHER = [{"role": "user", "content": "What is the weather in Paris?"}]


def test_the_adapter_answers_by_its_name_and_the_base_by_its_own(client):
    base = client.chat.completions.create(model="reasoner", messages=WEATHER).choices[0].message
    assert base.content.strip() == ANSWER_TEXT and REASONING_TEXT in (base.reasoning_content or "")
    adapted = client.chat.completions.create(model=lora_adapter.NAME, messages=WEATHER)
    assert adapted.model == lora_adapter.NAME
    message = adapted.choices[0].message
    assert message.content.strip() == ANSWER_TEXT and not getattr(message, "reasoning_content", None)


def test_the_adapter_streams_its_answer(client):
    chunks = client.chat.completions.create(model=lora_adapter.NAME, messages=WEATHER, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip() == ANSWER_TEXT


def test_the_adapter_gets_its_own_defaults_and_the_bases_clamp(stack, client):
    plan = {m.served_name: m for m in stack.plan.models}["reasoner"]
    adapter = plan.adapters[0]
    assert adapter.max_tokens == 128 and plan.max_tokens == 256  # examples/cpu-pooling: its own budget
    raw = client.chat.completions.with_raw_response.create(
        model=lora_adapter.NAME, messages=WEATHER, max_tokens=plan.context * 2
    )
    asked, given = clamp_note(raw.headers)
    prompt = raw.parse().usage.prompt_tokens
    assert (asked, given) == (plan.context * 2, plan.context - prompt)
    assert raw.parse().choices[0].message.content.strip() == ANSWER_TEXT


def test_a_prompt_over_the_bases_context_is_a_400_for_the_adapter(stack, client):
    context = {m.served_name: m for m in stack.plan.models}["reasoner"].context
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(
            model=lora_adapter.NAME, max_tokens=8, messages=[{"role": "user", "content": "sunny weather " * context}]
        )
    assert str(context) in str(err.value)


def test_status_shows_the_adapter_under_its_base(stack):
    env = {**os.environ, "GATEWAY_URL": stack.gateway_url + "/v1", "GATEWAY_KEY": stack.master_key}
    out = subprocess.run(
        [sys.executable, "-m", "generator.operate.status", "--json", "--interval", "1", "--models", stack.plan.source],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )
    rows = json.loads(out.stdout)["models"]
    names = [r["name"] for r in rows]
    assert names.index(lora_adapter.NAME) == names.index("reasoner") + 1, names
    row = rows[names.index(lora_adapter.NAME)]
    assert row["adapter_of"] == "reasoner" and row["state"] == "healthy", row
    assert row["gateway_requests_total"] >= 1  # this module's requests by the adapter's name
    assert len([r for r in rows if r["name"] == "reasoner"]) == 1  # one backend, probed once
    text = subprocess.run(
        [sys.executable, "-m", "generator.operate.status", "--interval", "0", "--models", stack.plan.source],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**env, "COLUMNS": "200"},
    ).stdout
    assert f"└ {lora_adapter.NAME}" in text, text


# --- adding and removing an adapter on the running stack (last: it changes the stack's plan, then restores it) ---
def _traffic(client: openai.OpenAI, models: list[str], stop: threading.Event, done: list, failed: list) -> None:
    while not stop.is_set():
        for model in models:
            try:
                r = client.chat.completions.create(model=model, messages=WEATHER, max_tokens=64)
                assert r.choices[0].message.content.strip() == ANSWER_TEXT, r
                done.append(model)
            except Exception as exc:  # noqa: BLE001 - every failure is the finding
                failed.append(f"{model}: {type(exc).__name__}: {exc}")


def test_an_adapter_added_and_removed_by_apply_loses_no_request_and_restarts_nothing(stack, client, tmp_path):
    """A second adapter (a copy of think-less under another name) goes in through vLLM's runtime route and a rolling
    gateway reload while requests to the base and the first adapter flow; then out again. No request fails, no
    process restarts, the new name answers as its adapter does."""
    source = Path(stack.plan.source)
    doc = yaml.safe_load(source.read_text())
    extra = "think-less-too"
    first = {m.served_name: m for m in stack.plan.models}["reasoner"].adapters[0].source
    shutil.copytree(ROOT / first, tmp_path / extra)  # its own directory (the demo build needs safetensors)
    doc["reasoner"]["adapters"][extra] = {"path": str(tmp_path / extra)}
    added = tmp_path / "models.yml"
    added.write_text(yaml.safe_dump(doc, sort_keys=False))
    pids = {p.name: p.pid for p in stack.procs}
    stop, done, failed = threading.Event(), [], []
    threads = [
        threading.Thread(target=_traffic, args=(client, m, stop, done, failed))
        for m in (["reasoner"], [lora_adapter.NAME])
    ]
    for t in threads:
        t.start()
    try:
        time.sleep(1)
        t0 = time.monotonic()
        lines = apply_adapters(stack, load_plan(added))
        took_add = time.monotonic() - t0
        message = client.chat.completions.create(model=extra, messages=WEATHER).choices[0].message
        t0 = time.monotonic()
        removed = apply_adapters(stack, load_plan(source))
        took_remove = time.monotonic() - t0
        time.sleep(1)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
    print(f"apply: add {took_add:.1f}s, remove {took_remove:.1f}s; {len(done)} requests during it")
    assert failed == [], failed[:5]
    assert len(done) >= 4, done
    assert f"loaded adapter {extra} into reasoner (no restart)" in lines, lines
    assert "reasoner: --max-loras 1 -> 2 at its next restart" in lines, lines
    assert message.content.strip() == ANSWER_TEXT and not getattr(message, "reasoning_content", None)
    assert f"unloaded adapter {extra} from reasoner (no restart)" in removed, removed
    assert {p.name: p.pid for p in stack.procs} == pids  # nothing restarted
    assert extra not in {m.id for m in client.models.list()}
    with pytest.raises(openai.APIStatusError):
        client.chat.completions.create(model=extra, messages=WEATHER)
