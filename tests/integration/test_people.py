"""People's keys through the real gateway (the session stack: examples/cpu-demo/models.yml has `people:`, so it runs
with its own Redis and the gateway's workers share one count): 401 / 403 / 429 semantics, LiteLLM's limiter
over every worker, changes without restart, and the key never showing up in logs, metrics or bodies.

ann: {models: [reasoner], rpm: 10}; bob: {parallel: 2, tokens_per_day: 1000000} (every model);
ci-bot: {models: [tool-caller], tpm: 2000}."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest

from generator.operate.keys import LOCAL_HEADER, drop_key, person_key, write_hashes
from generator.shipped.gateway_hooks.people import API_KEY_PREFIX, key_hash
from tests.conftest import host_ports_lock
from tests.integration.helpers import responses_turn, status_json

RELOAD = 5.0  # seconds the issue allows for a key change to reach the running gateway
ROOT = Path(__file__).resolve().parents[2]
N_PAGE_REQUESTS = 3  # ann's requests before she opens her page


@pytest.fixture(scope="module")
def people(gateway):
    if gateway.stack is None or not gateway.plan.people:
        pytest.skip("needs a local stack this session started or attached, whose models.yml has people:")
    stack = gateway.stack
    folder = stack.state_dir / "litellm"
    keys = {p.name: person_key(stack.env_path, p, LOCAL_HEADER) for p in gateway.plan.people}
    write_hashes(gateway.plan, stack.env_path, folder)
    wait_until(lambda: status(gateway, keys["bob"], "reasoner") == 200, RELOAD)  # bob: no rpm window opened
    yield keys


def chat(model: str, content: str = "hi", **extra) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 4, **extra}


def status(gateway, key: str, model: str, header: str = "authorization") -> int:
    value = f"Bearer {key}" if header == "authorization" else key
    r = httpx.post(f"{gateway.url}/chat/completions", json=chat(model), headers={header: value}, timeout=120)
    return r.status_code


def wait_until(check, timeout: float) -> float:
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout, f"not within {timeout}s"
        time.sleep(0.2)
    return time.monotonic() - start


def redis_client(gateway):
    import redis

    stack = gateway.stack
    return redis.Redis(host="127.0.0.1", port=stack.redis_port, password=stack.keys()[gateway.plan.redis.password_env])


def fresh_window(gateway, name: str) -> None:
    """Wait until the person's rpm window (LiteLLM's limiter, in Redis) has ended: the count starts at 0."""
    r = redis_client(gateway)
    key = f"{{api_key:{API_KEY_PREFIX}{name}}}:window"
    ttl = r.ttl(key)
    if ttl and ttl > 0:
        print(f"waiting {ttl + 1}s for {name}'s rate window to end")
        time.sleep(ttl + 1)


def test_an_unknown_key_is_401_and_the_master_key_still_works(gateway, people):
    for header in ("authorization", "x-api-key", "api-key"):
        assert status(gateway, "not-a-key-" + "x" * 20, "reasoner", header) == 401
    assert httpx.get(f"{gateway.url}/models", headers={"authorization": "Bearer nope"}).status_code == 401
    assert status(gateway, gateway.key, "tool-caller") == 200


@pytest.mark.parametrize("value", ["", " ", "Bearer ", "Bearer  ", "x" * 10_000, "ключ", "Bearer é", "\t"])
@pytest.mark.parametrize("header", ["authorization", "x-api-key", "api-key", "x-litellm-api-key"])
def test_bad_key_headers_are_401_never_500(gateway, people, header, value):
    """Sent as raw bytes (http.client; httpx refuses a value with surrounding spaces before it leaves)."""
    import http.client
    from urllib.parse import urlsplit

    url = urlsplit(gateway.url)
    for method, path, body in (
        ("POST", "/chat/completions", json.dumps(chat("reasoner")).encode()),
        ("GET", "/models", None),
    ):
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
        conn.putrequest(method, url.path + path)
        conn.putheader(header, value.encode("utf-8"))
        conn.putheader("content-type", "application/json")
        conn.putheader("content-length", str(len(body or b"")))
        conn.endheaders(body)
        r = conn.getresponse()
        text = r.read().decode(errors="replace")
        conn.close()
        assert r.status == 401, (method, r.status, text)


def test_a_persons_key_in_every_header_an_sdk_uses(gateway, people):
    for header in ("authorization", "x-api-key", "api-key"):
        assert status(gateway, people["bob"], "reasoner", header) == 200


def test_a_model_not_theirs_is_403_naming_the_model_and_no_secret(gateway, people):
    r = httpx.post(
        f"{gateway.url}/chat/completions",
        json=chat("tool-caller"),
        headers={"authorization": f"Bearer {people['ann']}"},
    )
    assert r.status_code == 403
    assert "tool-caller" in r.json()["error"]["message"]
    assert people["ann"] not in r.text and key_hash(people["ann"]) not in r.text
    m = gateway.anthropic(key=people["ann"])
    with pytest.raises(Exception) as err:
        m.messages.create(model="tool-caller", max_tokens=4, messages=[{"role": "user", "content": "hi"}])
    assert getattr(err.value, "status_code", None) == 403
    listed = httpx.get(f"{gateway.url}/models", headers={"authorization": f"Bearer {people['ann']}"}).json()
    assert [m["id"] for m in listed["data"]] == ["reasoner"]


def backend_generations(gateway) -> float:
    """Requests the stack's backends have answered (vLLM's own count)."""
    total = 0.0
    for m in gateway.plan.models:
        text = httpx.get(f"http://127.0.0.1:{m.port}/metrics", timeout=30).text
        total += sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("vllm:request_success_total{")
        )
    return total


def test_health_which_makes_every_backend_generate_is_the_master_keys_alone(gateway, people):
    """Issue 48: LiteLLM's /health makes one generation on every backend the key may use, counted by no limit."""
    root = gateway.url.removesuffix("/v1")
    before = backend_generations(gateway)
    assert (
        httpx.get(f"{root}/health", headers={"authorization": f"Bearer {gateway.key}"}, timeout=120).status_code == 200
    )
    after_master = backend_generations(gateway)
    assert after_master > before  # what the count below would show, had a person's /health gone through
    for path in ("/health", "/health/services?service=datadog", "/health/latest", "/health/history"):
        r = httpx.get(root + path, headers={"authorization": f"Bearer {people['ann']}"}, timeout=60)
        assert r.status_code == 403 and "master key" in r.text, f"{path}: {r.status_code} {r.text[:200]}"
    r = httpx.get(f"{root}/health/readiness", headers={"authorization": f"Bearer {people['ann']}"}, timeout=60)
    assert r.status_code == 200, r.text[:200]
    assert backend_generations(gateway) == after_master


def backend_requests(gateway) -> dict[str, float]:
    """{handler: requests} over the stack's backends (vLLM's own HTTP count), the probes and scrapes left out."""
    counts: dict[str, float] = {}
    for m in gateway.plan.models:
        for line in httpx.get(f"http://127.0.0.1:{m.port}/metrics", timeout=30).text.splitlines():
            if line.startswith("http_requests_total{"):
                handler = line.split('handler="', 1)[1].split('"', 1)[0]
                if handler not in ("/health", "/metrics"):
                    counts[handler] = counts.get(handler, 0.0) + float(line.rsplit(" ", 1)[1])
    return counts


def test_no_route_reaches_a_backend_outside_a_persons_limits(gateway, people):
    """Issue 48: every route the gateway answers (its OpenAPI schema: /gateway/routes), every method, asked with a
    person's key. The APIs the guard checks (request_shapes.py: chat, completions, responses, messages, count_tokens,
    embeddings, rerank) are metered on every request (a person's models and budgets in the guard, LiteLLM's limiter:
    the rpm test below asks each); every other route must leave the backends untouched and answer no more than the
    model list and LiteLLM's probes."""
    import concurrent.futures
    import re

    from generator.shipped.gateway_hooks.request_shapes import api_of

    root = gateway.url.removesuffix("/v1")
    routes = httpx.get(f"{root}/gateway/routes", headers={"authorization": f"Bearer {gateway.key}"}, timeout=60).json()[
        "routes"
    ]
    assert len(routes) > 300 and {"path": "/v1/chat/completions", "methods": ["POST"]} in routes
    asked = [(r["path"], m) for r in routes for m in r["methods"] if api_of(r["path"]) is None]
    body = {
        "model": "tool-caller",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 1,
        "input": "hi",
        "prompt": "hi",
        "query": "hi",
        "documents": ["a"],
        "file": "x",
        "text": "hi",
        "contents": [{"text": "hi"}],
    }

    def ask(path: str, method: str) -> tuple[str, str, int]:
        url = root + re.sub(r"\{[^}:]+\}", "x", path)
        try:
            r = httpx.request(
                method,
                url,
                headers={"authorization": f"Bearer {people['bob']}"},
                timeout=30,
                **({"json": body} if method in ("POST", "PUT", "PATCH") else {}),
            )
            return path, method, r.status_code
        except httpx.HTTPError:
            return path, method, 0

    with host_ports_lock():  # the compose test asks these backends' ports too, with a key of its own
        before = backend_requests(gateway)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda pm: ask(*pm), asked))
        after = backend_requests(gateway)
    reached = {h: after[h] - before.get(h, 0.0) for h in after if after[h] > before.get(h, 0.0)}
    answered = sorted({path for path, _, code in answers if code < 400})
    print(f"\n{len(answers)} route x method asked (the inference APIs aside); answered < 400: {answered}")
    assert reached == {}, f"the backends answered {reached} for routes outside the metered APIs"
    assert set(answered) <= {
        "/health/readiness",
        "/health/liveliness",
        "/health/liveness",
        "/models",
        "/v1/models",
        "/models/{model_id}",
    }, answered


# one request per API the stack serves, the same person: all count against one rpm
API_CALLS = (
    ("/chat/completions", lambda: chat("reasoner")),
    ("/completions", lambda: {"model": "reasoner", "prompt": "hi", "max_tokens": 4}),
    ("/responses", lambda: {"model": "reasoner", "input": "hi", "max_output_tokens": 16}),
    ("/messages", lambda: {"model": "reasoner", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}),
)


def test_rpm_is_counted_once_over_every_gateway_worker_and_every_api(gateway, people):
    """20 requests at once from ann (rpm 10), spread over the gateway's workers and over chat, completions,
    responses and messages: exactly 10 answered, 10 are 429 with Retry-After; the master key is not limited."""
    fresh_window(gateway, "ann")

    async def burst() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=20, max_keepalive_connections=0)  # new connections: any worker
        async with httpx.AsyncClient(timeout=120, limits=limits) as client:
            return await asyncio.gather(
                *(
                    client.post(
                        f"{gateway.url}{path}", json=body(), headers={"authorization": f"Bearer {people['ann']}"}
                    )
                    for path, body in API_CALLS * 5
                )
            )

    answers = asyncio.run(burst())
    codes = sorted(r.status_code for r in answers)
    assert codes == [200] * 10 + [429] * 10, [(r.request.url.path, r.status_code, r.text[:80]) for r in answers]
    for r in answers:
        if r.status_code == 429:
            assert int(r.headers.get("retry-after", 0)) > 0, (r.request.url.path, dict(r.headers))
            assert people["ann"] not in r.text and key_hash(people["ann"]) not in r.text
    assert status(gateway, gateway.key, "reasoner") == 200


def test_tpm_stops_a_person_once_the_minutes_tokens_are_used(gateway, people):
    """ci-bot (tpm 2000): requests one after another are answered until the tokens the backends counted this minute
    reach the limit, then 429 with Retry-After; counted once over every worker."""
    fresh_window(gateway, "ci-bot")
    client = httpx.Client(timeout=120)
    used, codes = 0, []
    prompt = "weather " * 150
    for _ in range(40):
        r = client.post(
            f"{gateway.url}/chat/completions",
            json=chat("tool-caller", prompt, max_tokens=16),
            headers={"authorization": f"Bearer {people['ci-bot']}"},
        )
        codes.append(r.status_code)
        if r.status_code != 200:
            break
        used += r.json()["usage"]["total_tokens"]
    assert codes[-1] == 429 and set(codes[:-1]) == {200}, codes
    assert used >= 2000, used  # not refused before the limit was reached
    assert int(r.headers["retry-after"]) > 0 and people["ci-bot"] not in r.text
    print(f"tpm 2000: {len(codes) - 1} answered ({used} tokens), then 429")


def test_a_used_up_token_budget_is_429_until_the_period_ends(gateway, people):
    """bob's day (tokens_per_day 1,000,000): with the day's counter at the budget (set in the stack's Redis, as
    a day of use would leave it) his next request is a 429 whose Retry-After is the rest of the UTC day."""
    import datetime as dt

    from generator.shipped.gateway_hooks.people import budget_key, periods

    day, left = periods(dt.datetime.now(dt.UTC))["day"]
    key = budget_key("bob", "day", day)
    r = redis_client(gateway)
    before = int(r.get(key) or 0)
    r.set(key, 1_000_000)
    try:
        answer = httpx.post(
            f"{gateway.url}/chat/completions",
            json=chat("reasoner"),
            headers={"authorization": f"Bearer {people['bob']}"},
            timeout=60,
        )
        assert answer.status_code == 429, answer.text
        assert "per day" in answer.json()["error"]["message"]
        assert 0 < int(answer.headers["retry-after"]) <= left + 1
        assert status(gateway, gateway.key, "reasoner") == 200  # the master key has no budget
    finally:
        r.set(key, before)
    assert status(gateway, people["bob"], "reasoner") == 200


def test_parallel_requests_over_the_limit_are_429(gateway, people):
    """bob may have 2 requests in flight: of 6 streams held open at once, the ones past 2 get 429."""

    async def streams() -> list[int]:
        async with httpx.AsyncClient(timeout=120) as client:

            async def one() -> int:
                body = chat("reasoner", "count slowly", stream=True, max_tokens=200)
                async with client.stream(
                    "POST",
                    f"{gateway.url}/chat/completions",
                    json=body,
                    headers={"authorization": f"Bearer {people['bob']}"},
                ) as r:
                    async for _ in r.aiter_bytes():
                        pass
                    return r.status_code

            return await asyncio.gather(*(one() for _ in range(6)))

    codes = asyncio.run(streams())
    assert codes.count(429) >= 1 and codes.count(200) >= 2, codes
    assert set(codes) <= {200, 429}, codes


def person_usage(gateway) -> tuple[dict, dict]:
    r = httpx.get(
        f"{gateway.url.removesuffix('/v1')}/gateway/status",
        headers={"authorization": f"Bearer {gateway.key}"},
        timeout=60,
    ).json()["gateway"]
    return (r["metrics"] or {}).get("people", {}), r.get("budgets") or {}


def test_usage_per_person_is_the_sum_of_the_backends_usage_fields(gateway, people):
    """bob's requests and tokens in/out per model in the gateway's metrics (label: his name), and his token budget's
    count for today, grow by exactly what the backends' `usage` fields say."""

    def counts() -> tuple[float, float, float, int]:
        by_person, budgets = person_usage(gateway)
        row = by_person.get("bob", {}).get("tool-caller", {})
        return (
            row.get("requests", 0.0),
            row.get("input_tokens", 0.0),
            row.get("output_tokens", 0.0),
            budgets.get("bob", {}).get("day", 0),
        )

    before = counts()
    client = gateway.client(key=people["bob"])
    usage = [
        client.chat.completions.create(
            model="tool-caller", max_tokens=8, messages=[{"role": "user", "content": f"weather {i}"}]
        ).usage
        for i in range(3)
    ]
    prompt, completion = sum(u.prompt_tokens for u in usage), sum(u.completion_tokens for u in usage)
    expected = (before[0] + 3, before[1] + prompt, before[2] + completion, before[3] + prompt + completion)
    deadline = time.monotonic() + 15
    while (now := counts()) != expected and time.monotonic() < deadline:
        time.sleep(0.5)
    assert now == expected


def test_a_revoked_key_is_401_within_seconds_and_a_stream_in_flight_runs_to_its_end(gateway, people):
    stack, plan = gateway.stack, gateway.plan
    bob = next(p for p in plan.people if p.name == "bob")
    folder = stack.state_dir / "litellm"
    key = people["bob"]
    body = chat("reasoner", "tell me a long story", stream=True, max_tokens=200)
    chunks = []
    with httpx.Client(timeout=120) as client:
        with client.stream(
            "POST", f"{gateway.url}/chat/completions", json=body, headers={"authorization": f"Bearer {key}"}
        ) as r:
            assert r.status_code == 200
            lines = r.iter_lines()
            chunks.append(next(lines))
            drop_key(stack.env_path, bob.key_env)  # revoke while the stream is in flight
            write_hashes(plan, stack.env_path, folder)
            took = wait_until(lambda: status(gateway, key, "reasoner") == 401, RELOAD)
            chunks.extend(lines)
    assert any("[DONE]" in c for c in chunks), chunks[-3:]
    print(f"revoked key refused after {took:.1f}s")
    # a new key for bob (rotation) works at once after the file changes
    people["bob"] = person_key(stack.env_path, bob, LOCAL_HEADER)
    write_hashes(plan, stack.env_path, folder)
    wait_until(lambda: status(gateway, people["bob"], "reasoner") == 200, RELOAD)
    assert status(gateway, key, "reasoner") == 401


def make_usage(gateway) -> list[dict]:
    """`make usage`'s rows (status --usage reads the same report; --json prints them), for this gateway."""
    return status_json(gateway, "--interval", "0")[1]["people"]


def test_a_persons_page_shows_their_models_limits_and_the_usage_make_usage_shows(gateway, people):
    """ann opens /gateway/ in a real browser with her key: exactly her `models:` (the other model absent), her limits,
    her usage equal to `make usage`'s rows for her after N more requests, and a connection snippet for the OpenAI SDK
    that, copied from the page and run, gets an answer, which bob's page, left open, then counts by itself. A wrong
    key: a clear message and no data."""
    from selenium.webdriver.common.by import By

    from tests.integration.browser import (
        WRONG_KEY_LOGGED,
        chromium,
        page_errors,
        screenshot,
        shown,
        sign_in,
        table,
        wait_for,
    )

    ann = next(p for p in gateway.plan.people if p.name == "ann")
    asked = lambda rows: sum(r["requests"] for r in rows if r["person"] == "ann" and r["model"] == "reasoner")  # noqa: E731
    before = asked(make_usage(gateway))
    client = gateway.client(key=people["ann"])
    for i in range(N_PAGE_REQUESTS):  # a 429 of her rpm is counted too (the rpm test used her minute)
        with contextlib.suppress(openai.RateLimitError):
            client.chat.completions.create(
                model="reasoner", max_tokens=4, messages=[{"role": "user", "content": f"{i}"}]
            )
    # LiteLLM counts after the answer: until her requests are all counted and her tokens settle
    wait_until(
        lambda: asked(rows := make_usage(gateway)) == before + N_PAGE_REQUESTS and rows == make_usage(gateway), 30
    )
    root = gateway.url.removesuffix("/v1")
    with chromium() as driver:
        sign_in(driver, root, "sk-not-a-key-of-this-gateway")
        message = wait_for(lambda: driver.find_element(By.ID, "sign-in-error").text, what="the wrong key's message")
        assert message == "That key is not valid for this gateway."
        assert not shown(driver, "person") and not shown(driver, "admin") and not table(driver, "models")

        sign_in(driver, root, people["ann"])
        wait_for(lambda: shown(driver, "person") and table(driver, "models"), what="ann's page")
        expected = [r for r in make_usage(gateway) if r["person"] == "ann"]
        assert driver.find_element(By.ID, "who").text == "signed in as ann"
        assert [row[0] for row in table(driver, "models")] == sorted(ann.models)  # the tool-caller is absent
        limits = dict(zip(*[[e.text for e in driver.find_elements(By.TAG_NAME, t)] for t in ("dt", "dd")]))
        assert limits["requests a minute"] == "10" and limits["tokens a day (UTC)"] == "no limit", limits
        assert limits["bytes of stored responses"] == "no limit", limits
        per_model = [r for r in expected if r["model"] != "(budget)"]
        assert [
            [r["model"], f"{r['requests']:,.0f}", f"{r['input_tokens']:,.0f}", f"{r['output_tokens']:,.0f}"]
            for r in per_model
        ] == table(driver, "usage")
        assert next(r for r in per_model if r["model"] == "reasoner")["requests"] >= N_PAGE_REQUESTS
        budget = next(r for r in expected if r["model"] == "(budget)")
        kept = f", {budget['stored_responses']:,} stored responses ({budget['stored_bytes']:,} bytes)"
        assert driver.find_element(By.ID, "tokens").text == (
            f"{budget['tokens_today']:,} tokens today, {budget['tokens_this_month']:,} tokens this month{kept}"
        )
        assert people["ann"] in driver.find_element(By.CSS_SELECTOR, "[data-snippet=openai] pre").get_attribute(
            "textContent"
        )
        screenshot(driver, "page-person")
        assert page_errors(driver, expected=(WRONG_KEY_LOGGED,)) == []
        # bob's snippet is the one run: ann's minute of requests may be used up (a 429 is no answer)
        driver.find_element(By.ID, "sign-out").click()
        sign_in(driver, root, people["bob"])
        wait_for(lambda: driver.find_element(By.ID, "who").text == "signed in as bob", what="bob's page")
        assert [row[0] for row in table(driver, "models")] == sorted(m.served_name for m in gateway.plan.served)
        snippet = driver.find_element(By.CSS_SELECTOR, "[data-snippet=openai] pre").get_attribute("textContent")
        assert people["bob"] in snippet and gateway.key not in driver.page_source
        bobs = lambda rows: [  # noqa: E731  bob's rows as his page's usage table shows them
            [r["model"], f"{r['requests']:,.0f}", f"{r['input_tokens']:,.0f}", f"{r['output_tokens']:,.0f}"]
            for r in rows
            if r["person"] == "bob" and r["model"] != "(budget)"
        ]
        requests = lambda rows: sum(r["requests"] for r in rows if r["person"] == "bob" and r["model"] != "(budget)")  # noqa: E731
        before = requests(make_usage(gateway))
        run = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert run.returncode == 0 and run.stdout.strip(), run.stderr[-2000:]
        # his page, left open, shows the snippet's request by itself (it asks /gateway/me again every 10 s)
        wait_until(lambda: requests(rows := make_usage(gateway)) == before + 1 and rows == make_usage(gateway), 30)
        expected = bobs(make_usage(gateway))
        wait_for(lambda: table(driver, "usage") == expected, timeout=25, what="bob's usage, refreshed")
        assert driver.find_element(By.ID, "person-refreshed").text.startswith("updated ")


def test_no_key_or_hash_in_logs_or_metrics(gateway, people):
    stack = gateway.stack
    logs = "".join(p.read_text(errors="replace") for p in (stack.state_dir / "logs").glob("*.log"))
    metrics = (
        httpx.get(f"http://127.0.0.1:{stack.metrics_port}/metrics/", timeout=30).text if stack.metrics_port else ""
    )
    for key in people.values():
        for secret in (key, key_hash(key), key_hash(key)[:12]):
            assert secret not in logs and secret not in metrics
    assert 'api_key_alias="ann"' in metrics  # the person's name is the label


@pytest.mark.parametrize("stream", [False, True])
def test_a_conversation_by_previous_response_id_is_its_owners_alone(gateway, people, stream):
    """Stored responses (docs/apis.md): three turns by previous_response_id, the expanded prompt counted, reasoning
    items carried back; the owner reads, lists and deletes; another person gets 403 on every route; a deleted id is a
    404; `make usage` counts the person's stored responses; a `conversation` (kept by no one here) is a 400."""
    bob, ann = gateway.client(people["bob"]), gateway.client(people["ann"])

    def stored() -> tuple[int, int]:
        row = next(r for r in make_usage(gateway) if r["person"] == "bob" and r["model"] == "(budget)")
        return row["stored_responses"], row["stored_bytes"]

    before = stored()

    def turn(text: str, previous: str | None):
        return responses_turn(bob, "reasoner", text, previous, stream)

    first = turn("hi", None)
    second = turn("and then?", first.id)
    third = turn("and at last?", second.id)
    assert third.usage.input_tokens > second.usage.input_tokens > first.usage.input_tokens  # the whole conversation
    kinds = [i.type for i in bob.responses.input_items.list(third.id, order="asc", limit=100).data]
    assert kinds == ["message", "reasoning", "message", "message", "reasoning", "message", "message"], kinds
    assert bob.responses.retrieve(third.id).output_text == third.output_text
    kept = stored()
    assert kept[0] == before[0] + 3 and kept[1] > before[1], (before, kept)
    for refused in (
        lambda: ann.responses.retrieve(third.id),
        lambda: ann.responses.input_items.list(third.id),
        lambda: ann.responses.delete(third.id),
        lambda: ann.responses.cancel(third.id),
        lambda: ann.responses.create(model="reasoner", input="x", previous_response_id=third.id),
    ):
        with pytest.raises(openai.PermissionDeniedError):
            refused()
    bob.responses.delete(third.id)
    assert stored()[0] == kept[0] - 1
    with pytest.raises(openai.NotFoundError):
        bob.responses.retrieve(third.id)
    with pytest.raises(openai.BadRequestError, match="previous_response_id"):
        bob.responses.create(model="reasoner", input="x", conversation="conv_123")
    with pytest.raises(openai.NotFoundError, match=third.id[:20]):
        bob.responses.create(model="reasoner", input="x", previous_response_id=third.id)
