"""Fallbacks under load on the shared stack (docs/routing.md): the demo's tool-caller falls back to the reasoner.
Its backend is killed while requests on chat, responses and messages keep arriving: none is lost, the reasoner
answers those the tool-caller cannot, a person whose `models:` leave the reasoner out gets the tool-caller's own
error, and once the backend is back the tool-caller answers again. (A model down from the start, context fallbacks
and aliases: tests/integration/test_partial_availability.py.)"""

from __future__ import annotations

import concurrent.futures
import threading
import time

import httpx
import pytest

from generator.operate.keys import LOCAL_HEADER, person_key, write_hashes

HELLO = "Say hello."
BODIES = {
    "/chat/completions": {"messages": [{"role": "user", "content": HELLO}], "max_tokens": 16},
    "/responses": {"input": HELLO, "max_output_tokens": 16},
    "/messages": {"messages": [{"role": "user", "content": HELLO}], "max_tokens": 16},
}
AFTER_KILL = 24  # requests sent after the backend died


def ask(gateway, key: str, path: str, model: str) -> tuple[int, str]:
    """(status, the model group that answered) of one request."""
    try:
        r = httpx.post(
            gateway.url + path,
            json={"model": model, **BODIES[path]},
            headers={"Authorization": f"Bearer {key}"},
            timeout=60,
        )
    except httpx.HTTPError as exc:  # a lost request: a reset or a hang
        return 0, type(exc).__name__
    return r.status_code, r.headers.get("x-litellm-model-group", "")


def test_a_killed_model_under_load_is_answered_by_its_fallback_and_served_again_when_back(gateway):
    if gateway.stack is None:
        pytest.skip("needs a local stack (this session's or the running `make demo`), not GATEWAY_URL")
    primary = next((m for m in gateway.plan.served if m.fallbacks), None)
    if primary is None:
        pytest.skip("no model of this models.yml has fallbacks")
    fallback = primary.fallbacks[0]
    stack = gateway.stack
    outsider = next(p for p in gateway.plan.people if p.models and fallback not in p.models)
    outsider_key = person_key(stack.env_path, outsider, LOCAL_HEADER)
    write_hashes(gateway.plan, stack.env_path, stack.state_dir / "litellm")
    assert ask(gateway, gateway.key, "/chat/completions", primary.served_name) == (200, primary.served_name)

    answers: list[tuple[str, float, int, str]] = []  # (path, when sent, status, answered by)
    killed = threading.Event()
    sent_after_kill = 0
    lock = threading.Lock()

    def load(path: str) -> None:
        nonlocal sent_after_kill
        while True:
            with lock:
                if killed.is_set():
                    if sent_after_kill >= AFTER_KILL:
                        return
                    sent_after_kill += 1
            sent = time.monotonic()
            answers.append((path, sent, *ask(gateway, gateway.key, path, primary.served_name)))

    names = [m.name for m in gateway.plan.models if m.served_name == primary.served_name]
    try:
        with concurrent.futures.ThreadPoolExecutor(len(BODIES)) as pool:
            running = [pool.submit(load, path) for path in BODIES]
            while len(answers) < 6:  # the load is on: every API answered by the model itself
                time.sleep(0.05)
            for name in names:
                stack.kill(name)
            killed.set()
            dead_at = time.monotonic()
            for f in running:
                f.result()
        lost = [a for a in answers if a[2] != 200]
        assert not lost, f"requests not answered: {lost}"
        after = [a for a in answers if a[1] > dead_at]
        assert len(after) >= AFTER_KILL and {a[3] for a in after} == {fallback}, after
        assert {a[0] for a in after} == set(BODIES)
        # a person who may not use the fallback: the model's own error, as without a fallback
        status, _ = ask(gateway, outsider_key, "/chat/completions", primary.served_name)
        assert 500 <= status < 600, status
    finally:
        for name in names:
            stack.start_backend(name, wait=True)
    deadline = time.monotonic() + 30  # the router tries the model first again: no cooldown for a lone deployment
    while (got := ask(gateway, gateway.key, "/chat/completions", primary.served_name)) != (200, primary.served_name):
        assert time.monotonic() < deadline, got
        time.sleep(0.5)
    for path in BODIES:
        assert ask(gateway, gateway.key, path, primary.served_name) == (200, primary.served_name)
