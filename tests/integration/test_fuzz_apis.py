"""Fuzzing every API of the real gateway in front of its real backends: no request, however wrong, costs more than
a 4xx. Per API, FUZZ_REQUESTS (2,000) bodies drawn by Hypothesis from the API's request shape (fuzz_schemas.py)
and then broken: a field replaced by any JSON, something inside replaced, a required field dropped, a field of
another API (or an OpenAI chat field) added, a `type` anywhere inside (content part, block, input item, tool) made
another API's or an unknown one, the body replaced by other JSON or by bytes. Each must get an answer under 500 within
ANSWER_TIMEOUT seconds, on a connection that is not reset, a streamed answer must carry no 5xx error event, and the
gateway must serve a normal request afterwards. Seeded (FUZZ_SEED), bounded in count and time (FUZZ_SECONDS per
API); prints per API the count, the time and the slowest answer (the margin to ANSWER_TIMEOUT). One failing body per
kind of failure is appended to fuzz_regressions.jsonl (commit it: the regression test below replays every case there
on each run).

Each bound of models.yml `limits:` is fuzzed on every API too: any value past it is a 400 naming field and bound
(413 for the body size).
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import os
import re
import threading
import time
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from tests.conftest import FUZZ_COUNT
from tests.guard_cases import BASE, HELLO, bounded
from tests.integration.fuzz_schemas import APIS, MORE_FIELDS, TYPES, Body

FUZZ_REQUESTS = int(os.environ.get("FUZZ_REQUESTS", 2000))  # per API
# per API: past it, no more requests are sent (and the test fails: fewer than FUZZ_REQUESTS). A bound against a
# run that never ends, not a speed test: 2,000 messages requests took 24-40 s here, and 150 s was once too short
# while the CI images were built beside (1,764 sent, 0 failed)
FUZZ_SECONDS = float(os.environ.get("FUZZ_SECONDS", 600))
FUZZ_SEED = int(os.environ.get("FUZZ_SEED", 31))
IN_FLIGHT = 8  # concurrent requests
ANSWER_TIMEOUT = 30  # seconds: the demo's answers take a few at most; past it, a hang
REGRESSIONS = Path(__file__).with_name("fuzz_regressions.jsonl")
ALL_CHECKS = list(HealthCheck)

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def replace_inside(body: object, draw) -> object:
    """`body` with one value somewhere inside (a field, a list element, at any depth) replaced by any JSON."""
    if isinstance(body, dict) and body and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(body)))
        return {**body, key: replace_inside(body[key], draw)}
    if isinstance(body, list) and body and draw(st.booleans()):
        i = draw(st.integers(0, len(body) - 1))
        return [*body[:i], replace_inside(body[i], draw), *body[i + 1 :]]
    return draw(JSON)


def typed_places(body: object, at: tuple = ()) -> list[tuple]:
    """The paths (keys and indexes) of every object inside `body` that has a string `type`."""
    found = [at] if isinstance(body, dict) and isinstance(body.get("type"), str) else []
    items = body.items() if isinstance(body, dict) else enumerate(body) if isinstance(body, list) else ()
    for key, value in items:
        found += typed_places(value, (*at, key))
    return found


def retyped(body: object, at: tuple, kind: str) -> object:
    """`body` with the object at path `at` given type `kind`."""
    if not at:
        return {**body, "type": kind}
    head, rest = at[0], at[1:]
    if isinstance(body, dict):
        return {**body, head: retyped(body[head], rest, kind)}
    return [*body[:head], retyped(body[head], rest, kind), *body[head + 1 :]]


def bodies(shape: Body, others: tuple[Body, ...] = ()) -> st.SearchStrategy:
    """Well-formed bodies and broken ones: bytes, or JSON data to send. `others`: the other APIs' shapes, whose
    fields (well-formed as there, or any JSON) are added as fields this API does not take."""
    good, fields = shape.strategy, list(shape.fields)
    foreign = sorted(({f for other in others for f in other.fields} | set(MORE_FIELDS)) - set(fields))

    @st.composite
    def broken(draw):
        body = draw(good)
        how = draw(st.sampled_from(["field", "inside", "drop", "extra", "foreign", "type", "type"]))  # "type": each
        if how == "type" and (places := typed_places(body)):  # a content part, block or item of another type
            return retyped(body, draw(st.sampled_from(places)), draw(st.sampled_from(TYPES) | st.text(max_size=10)))
        if how == "foreign" and others:  # another API's field, as that API takes it or as any JSON
            theirs = draw(draw(st.sampled_from(others)).strategy)
            if (new := sorted(set(theirs) - set(body))) and draw(st.booleans()):
                key = draw(st.sampled_from(new))
                return {**body, key: theirs[key]}
            return {**body, draw(st.sampled_from(foreign)): draw(JSON)}
        if how == "field":
            return {**body, draw(st.sampled_from(fields)): draw(JSON)}
        if how == "inside":
            return replace_inside(body, draw)
        if how == "drop":
            return {k: v for k, v in body.items() if k != draw(st.sampled_from(shape.required))}
        return {**body, draw(st.text(min_size=1, max_size=10)): draw(JSON)}

    return st.one_of(good, broken(), broken(), broken(), JSON, st.binary(max_size=48))


def failure_of(r: httpx.Response | Exception, elapsed: float) -> str | None:
    if isinstance(r, httpx.TimeoutException):
        return f"no answer within {ANSWER_TIMEOUT}s"
    if isinstance(r, Exception):
        return f"connection failed: {r!r}"
    if r.status_code >= 500:
        return f"{r.status_code}: {r.text[:300]}"
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        for line in r.text.splitlines():
            if line.startswith("data: {") and '"error"' in line:
                error = json.loads(line[6:]).get("error") or {}
                code = str(error.get("code") or error.get("status_code") or "")
                if code.isdigit() and int(code) >= 500:
                    return f"streamed error event: {line[:300]}"
    return None


def timed_send(client: httpx.Client, path: str, body: object) -> tuple[str | None, float]:
    """What was wrong with the answer (None: nothing), and the seconds it took."""
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    start = time.monotonic()
    try:
        r = client.post(path, content=content)
    except httpx.HTTPError as exc:
        r = exc
    elapsed = time.monotonic() - start
    return failure_of(r, elapsed), elapsed


def send(client: httpx.Client, path: str, body: object) -> str | None:
    return timed_send(client, path, body)[0]


def signature(api: str, seen: str) -> str:
    """What kind of failure it is: the API and the answer with its numbers and quoted values left out."""
    return api + ": " + re.sub(r"\d+", "N", re.sub(r"'[^']*'|prompt=.*", "", seen))[:120]


def keep(api: str, failures: list[tuple[object, str]]) -> None:
    """Append one failing body per new kind of failure to fuzz_regressions.jsonl (one JSON line each)."""
    cases = (
        [json.loads(line) for line in REGRESSIONS.read_text().splitlines() if line.strip()]
        if REGRESSIONS.exists()
        else []
    )
    known = {signature(c["api"], c["seen"]) for c in cases}
    lines = []
    for body, seen in failures:
        if (kind := signature(api, seen)) in known:
            continue
        known.add(kind)
        case = {"api": api, "seen": seen[:200]}
        case.update({"bytes": base64.b64encode(body).decode()} if isinstance(body, bytes) else {"body": body})
        lines.append(json.dumps(case, sort_keys=True))
    with REGRESSIONS.open("a") as f:
        f.writelines(line + "\n" for line in lines)


def client_of(gateway) -> httpx.Client:
    return httpx.Client(
        base_url=gateway.url.removesuffix("/v1"),
        timeout=ANSWER_TIMEOUT,
        headers={"Authorization": f"Bearer {gateway.key}", "Content-Type": "application/json"},
        limits=httpx.Limits(max_connections=IN_FLIGHT),
    )


def assert_serves_a_normal_request(client: httpx.Client, model: str) -> None:
    r = client.post("/v1/chat/completions", json={"model": model, "messages": HELLO, "max_tokens": 8})
    assert r.status_code == 200 and r.json()["choices"][0]["message"], r.text[:300]


@pytest.mark.parametrize("api", APIS)
def test_fuzzed_requests_never_get_a_5xx_a_reset_or_a_hang(gateway, api, record_property):
    path, schema_of = APIS[api]
    models = [m.served_name for m in gateway.plan.models]
    failures: list[tuple[object, str]] = []
    failed_at: list[float] = []  # seconds into the run each failure came back: clustered, a stall; spread, bodies
    took: list[tuple[float, object]] = []  # each answer's seconds and body (appended from the pool's threads)
    sent = 0
    slots = threading.BoundedSemaphore(IN_FLIGHT * 2)
    start = time.monotonic()
    with client_of(gateway) as client, concurrent.futures.ThreadPoolExecutor(IN_FLIGHT) as pool:

        def done(body, future):
            slots.release()
            why, seconds = future.result()
            took.append((seconds, body))
            if why is not None:
                failures.append((body, why))
                failed_at.append(time.monotonic() - start)

        @seed(FUZZ_SEED)
        @settings(
            max_examples=FUZZ_REQUESTS,
            phases=[Phase.generate],
            database=None,
            deadline=None,
            suppress_health_check=ALL_CHECKS,
        )
        @given(bodies(schema_of(models), tuple(other(models) for name, (_, other) in APIS.items() if name != api)))
        def fuzz(body):
            nonlocal sent
            if time.monotonic() - start > FUZZ_SECONDS:
                return
            slots.acquire()
            sent += 1
            pool.submit(timed_send, client, path, body).add_done_callback(lambda f, b=body: done(b, f))

        fuzz()
        pool.shutdown(wait=True)
        elapsed = time.monotonic() - start
        seconds, body = max(took, key=lambda t: t[0], default=(0.0, ""))  # the slowest: the bound's margin
        line = (
            f"fuzz {api}: {sent} requests in {elapsed:.1f} s ({sent / elapsed:.0f}/s), {len(failures)} failed, "
            f"slowest answer {seconds:.1f} s (the bound: {ANSWER_TIMEOUT} s) for {str(body)[:120]}"
        )
        print("\n" + line)
        record_property(FUZZ_COUNT, line)  # printed at the end of the run (conftest.py), from a pytest-xdist worker too
        keep(api, failures)
        assert not failures, (
            f"{len(failures)} of {sent} fuzzed {api} requests failed (kept in {REGRESSIONS.name}), "
            f"{min(failed_at):.1f}-{max(failed_at):.1f} s into the {elapsed:.1f} s run; "
            f"first: {failures[0][1]} for {str(failures[0][0])[:300]}"
        )
        assert sent >= FUZZ_REQUESTS, f"only {sent} {api} requests in the {FUZZ_SECONDS:.0f} s bound (FUZZ_SECONDS)"
        assert_serves_a_normal_request(client, models[0])


def regressions() -> list:
    if not REGRESSIONS.exists():
        return []
    cases = [json.loads(line) for line in REGRESSIONS.read_text().splitlines() if line.strip()]
    return [pytest.param(c, id=f"{c['api']}-{i}") for i, c in enumerate(cases)]


@pytest.mark.parametrize("case", regressions())
def test_kept_fuzz_failures_stay_fixed(gateway, case):
    body = base64.b64decode(case["bytes"]) if "bytes" in case else case["body"]
    with client_of(gateway) as client:
        assert send(client, APIS[case["api"]][0], body) is None, f"again: {case['seen']}"
        assert_serves_a_normal_request(client, gateway.plan.models[0].served_name)


# --- each bound of models.yml `limits:`, on every API -----------------------------------------------------------
TOOL = {  # each API's own tool shape, so that only the count is past the bound
    "responses": lambda i: {"type": "function", "name": f"f{i}", "parameters": {}},
    "messages": lambda i: {"name": f"f{i}", "input_schema": {}},
    "count_tokens": lambda i: {"name": f"f{i}", "input_schema": {}},
}
ASKS = {  # bound -> (request field, how a request asks for k of it)
    "n": ("n", lambda api, k: k),
    "best_of": ("best_of", lambda api, k: k),
    "tools": (
        "tools",
        lambda api, k: [
            TOOL.get(api, lambda i: {"type": "function", "function": {"name": f"f{i}"}})(i) for i in range(k)
        ],
    ),
    "logit_bias": ("logit_bias", lambda api, k: {str(i): 1 for i in range(k)}),
}


@pytest.mark.parametrize("api,bound", bounded(ASKS))
def test_any_value_past_a_bound_is_a_400_naming_field_and_bound(gateway, api, bound):
    m = gateway.plan.models[0]
    most = getattr(m.limits, bound)
    field, asking = ASKS[bound]

    @seed(FUZZ_SEED)
    @settings(max_examples=8, database=None, deadline=None, suppress_health_check=ALL_CHECKS)
    @given(st.integers(most + 1, most + 600))
    def past(k):
        body = {"model": m.served_name, **BASE[api], field: asking(api, k)}
        r = httpx.post(
            gateway.url.removesuffix("/v1") + APIS[api][0],
            json=body,
            timeout=ANSWER_TIMEOUT,
            headers={"Authorization": f"Bearer {gateway.key}"},
        )
        assert r.status_code == 400, f"{field}={k}: {r.status_code} {r.text[:300]}"
        assert f"`{field}` asks {k}" in r.text and f"over the {most} that {m.served_name} (limits.{bound}" in r.text

    past()


@pytest.mark.parametrize("api", APIS)
def test_any_body_past_the_size_bound_is_a_413(gateway, api):
    m = gateway.plan.models[0]
    most = m.limits.request_bytes

    @seed(FUZZ_SEED)
    @settings(max_examples=3, database=None, deadline=None, suppress_health_check=ALL_CHECKS)
    @given(st.integers(1, 4 * 1024 * 1024))
    def past(extra):
        body = json.dumps({"model": m.served_name, **BASE[api], "user": "x" * (most + extra)}).encode()
        r = httpx.post(
            gateway.url.removesuffix("/v1") + APIS[api][0],
            content=body,
            timeout=120,
            headers={"Authorization": f"Bearer {gateway.key}", "Content-Type": "application/json"},
        )
        assert r.status_code == 413 and "limits.request_size" in r.text, f"{r.status_code}: {r.text[:300]}"

    past()
