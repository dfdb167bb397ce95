# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make regenerate`.
"""``GET /gateway/status``: the state and raw counters of every backend and of the gateway, as JSON.

The one place `python -m generator.operate.status` reads, the same way for every target (compose, the local
stack, Kubernetes behind ``kubectl port-forward``): the gateway sits on the backend network, so it
asks each configured backend (``api_base`` of the router's deployments, nothing else) for ``/health``
and ``/metrics``, and its own metrics process (LiteLLM's metrics server, started by gateway_start.py on
127.0.0.1:$GATEWAY_METRICS_PORT, which sums every worker) for the gateway's counters.

Stateless: each call probes afresh and returns cumulative counters with the gateway's clock; the
client computes rates from two calls. So any worker of any replica answers the same.

``GET /gateway/report?interval=S``: the report of two samples S seconds apart (status_report.py): what `make
status`, `make usage` and the page (gateway_page.py) show.

``GET /gateway/routes``: every route of the gateway's OpenAPI schema, with its methods.

Both need the master key (Authorization: Bearer, or x-api-key), checked by the guard. Installed in front
of LiteLLM's routes by gateway_guard.py, like count_tokens.py.

State of a backend, from its ``/health`` (vLLM 0.32 binds its port before loading the model but
listens only once it is ready to serve; /health is 200 while its engine runs, 503 once it died):

* ``healthy``: 200;
* ``unhealthy``: any other HTTP status (503: the engine died under a live API server), or a
  connection accepted but no answer within PROBE_READ_TIMEOUT (a hung server);
* ``hung``: the gateway's own probes (backend_health.py, every worker's, shared through the stack's Redis) found
  it connected and silent twice in a row: ``hung since 12:03:10 (connected, /health silent for 9 s)``; it gets no
  request until it answers again;
* ``down``: the connection is refused, the name does not resolve or the host does not answer
  (process or container gone, or not listening yet: ``reason`` says which).

There is no ``starting`` from a probe: a loading vLLM 0.32 refuses connections exactly as a dead one
does (measured), so nothing seen from the network tells them apart; ``reason`` says so.

An on-demand model (its api_base is the on-demand controller) has the controller's state instead, from the
``x-on-demand-state`` header the controller puts on every answer: ``loaded`` (its /health 200, forwarded),
``loading``, ``draining``, ``asleep``, ``stopped`` (a GET never loads it) or ``failed`` (its last error).
Prometheus text is parsed with prometheus_client's parser.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable

import httpx
from fastapi import Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from prometheus_client.parser import text_string_to_metric_families

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # LiteLLM loads these files by path, not as a package: find the modules beside it
    sys.path.insert(0, HERE)
import backend_health  # noqa: E402
import gateway_backends as gb  # noqa: E402
import status_report  # noqa: E402
from error_kinds import backend_failure  # noqa: E402  (also the Prometheus rules' and dashboard's)
from gateway_start import METRICS_PORT_ENV  # noqa: E402  (gateway_start.py starts the metrics process on it)

PATH = "/gateway/status"
# every route of the gateway's OpenAPI schema, with its methods (the master key's): what the route walk asks with a
# person's key (tests/integration/test_people.py); LiteLLM 1.108 adds routes at start and lazily, so no import lists
# them
ROUTES_PATH = "/gateway/routes"
# the report of two samples of `status()` `interval` seconds apart (status_report.py): what `make status`, `make usage`
# and the page's admin view show
REPORT_PATH = "/gateway/report"
REPORT_MAX_INTERVAL = 10.0
PROBE_CONNECT_TIMEOUT = 2.0
PROBE_READ_TIMEOUT = 3.0

# vLLM sample name -> our field (counters: cumulative since the backend started)
VLLM_SUMS = {
    "vllm:num_requests_running": "requests_running",
    "vllm:num_requests_waiting": "requests_waiting",
    "vllm:prompt_tokens_total": "prompt_tokens_total",
    "vllm:generation_tokens_total": "generation_tokens_total",
    "vllm:num_preemptions_total": "preemptions_total",
    "vllm:request_success_total": "requests_finished_total",
}
VLLM_KV = "vllm:kv_cache_usage_perc"  # 0..1 per engine; the fullest engine is reported
VLLM_TTFT = "vllm:time_to_first_token_seconds"
LITELLM_REQUESTS = "litellm_proxy_total_requests_metric_total"  # label requested_model, status_code
LITELLM_FAILED = "litellm_proxy_failed_requests_metric_total"  # label requested_model, exception_status
FALLBACKS = "gateway_fallbacks_total"  # fallbacks.py: labels model, fallback, reason (context | error)
# per person (models.yml people:): LiteLLM labels these with the key's alias, the person's name (people.py)
PERSON_COUNTERS = {
    LITELLM_REQUESTS: "requests",
    "litellm_input_tokens_metric_total": "input_tokens",
    "litellm_output_tokens_metric_total": "output_tokens",
}


def samples(text: str):
    """Every sample of a Prometheus text exposition (prometheus_client's parser)."""
    for family in text_string_to_metric_families(text):
        yield from family.samples


def histogram(buckets: dict[float, float], count: float, total: float) -> dict:
    """Cumulative buckets as [upper bound as Prometheus writes it ("0.5", "+Inf": JSON has no
    infinity), count], lowest first."""
    return {"buckets": [[_le(le), n] for le, n in sorted(buckets.items())], "count": count, "sum": total}


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


def backend_metrics(text: str) -> dict:
    """The counters and gauges status shows, summed over a backend's engines (label sets)."""
    out: dict = {field: 0.0 for field in VLLM_SUMS.values()}
    kv: list[float] = []
    buckets: dict[float, float] = {}
    count = total = 0.0
    for s in samples(text):
        if s.name in VLLM_SUMS:
            out[VLLM_SUMS[s.name]] += s.value
        elif s.name == VLLM_KV:
            kv.append(s.value)
        elif s.name == VLLM_TTFT + "_bucket":
            le = float(s.labels["le"])
            buckets[le] = buckets.get(le, 0.0) + s.value
        elif s.name == VLLM_TTFT + "_count":
            count += s.value
        elif s.name == VLLM_TTFT + "_sum":
            total += s.value
    out["kv_cache_usage"] = max(kv) if kv else None
    out["ttft_seconds"] = histogram(buckets, count, total)
    return out


def gateway_metrics(text: str) -> dict:
    """The gateway's request and error counters (already summed over workers by LiteLLM's metrics
    process), in total and per requested model; errors are the backends' failures, client_errors the
    other 4xx answers (see backend_failure); fallbacks the requests each model's fallbacks answered."""
    requests: dict[str, float] = {}
    errors: dict[str, float] = {}
    client_errors: dict[str, float] = {}
    people: dict[str, dict[str, dict[str, float]]] = {}
    fallbacks: dict[str, dict[str, dict[str, float]]] = {}  # model -> its fallback -> reason -> requests
    for s in samples(text):
        person = s.labels.get("api_key_alias")
        if s.name in PERSON_COUNTERS and person and person != "None":
            row = people.setdefault(person, {}).setdefault(
                s.labels.get("requested_model") or "", {"requests": 0.0, "input_tokens": 0.0, "output_tokens": 0.0}
            )
            row[PERSON_COUNTERS[s.name]] += s.value
        if s.name == FALLBACKS and s.value:
            pair = fallbacks.setdefault(s.labels.get("model", ""), {}).setdefault(s.labels.get("fallback", ""), {})
            reason = s.labels.get("reason", "")
            pair[reason] = pair.get(reason, 0.0) + s.value
            continue
        if s.name == LITELLM_REQUESTS:
            into = requests
        elif s.name == LITELLM_FAILED:
            into = errors if backend_failure(s.labels.get("exception_status")) else client_errors
        else:
            continue
        model = s.labels.get("requested_model") or ""
        into[model] = into.get(model, 0.0) + s.value
    return {
        "requests_total": sum(requests.values()),
        "errors_total": sum(errors.values()),
        "client_errors_total": sum(client_errors.values()),
        "requests_by_model": dict(sorted(requests.items())),
        "errors_by_model": dict(sorted(errors.items())),
        "client_errors_by_model": dict(sorted(client_errors.items())),
        "people": {name: dict(sorted(rows.items())) for name, rows in sorted(people.items())},
        "fallbacks": {model: dict(sorted(to.items())) for model, to in sorted(fallbacks.items())},
    }


def state_of(outcome: int | Exception) -> tuple[str, str]:
    """(state, reason) from a /health probe: its HTTP status, or the exception it raised."""
    if isinstance(outcome, int):
        return ("healthy", "/health 200") if outcome == 200 else ("unhealthy", f"/health answered {outcome}")
    if isinstance(outcome, httpx.ReadTimeout):
        return "unhealthy", f"connected, but /health did not answer within {PROBE_READ_TIMEOUT:.0f}s"
    if isinstance(outcome, httpx.ConnectTimeout):
        return "down", "no answer to the connection (host unreachable)"
    if isinstance(outcome, httpx.ConnectError):
        text = str(outcome).lower()
        if "name" in text or "resolution" in text or "nodename" in text:
            return "down", "its name does not resolve (container not running)"
        return "down", "connection refused (not listening: stopped, or still loading)"
    return "down", f"{type(outcome).__name__}: {outcome}"[:200]


ON_DEMAND_HEADER = "x-on-demand-state"  # generator/shipped/on_demand/server.py STATE_HEADER
SCALING_HEADER = "x-on-demand-scaling"  # server.py SCALING_HEADER: a copy that follows the load, its model's scaling


def scaling_of(health: httpx.Response) -> dict | None:
    """The controller's word on a copy's model (replicas: {min, max}): its range, copies, last decision, counts."""
    raw = health.headers.get(SCALING_HEADER)
    try:
        value = json.loads(raw) if raw else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def on_demand_state(state: str, health: httpx.Response) -> tuple[str, str]:
    """(state, reason) of an on-demand model from its controller's answer to /health."""
    if state == "loaded":
        return (
            ("loaded", "on demand: loaded, /health 200")
            if health.status_code == 200
            else ("unhealthy", f"on demand: loaded, but /health answered {health.status_code}")
        )
    try:
        error = health.json().get("last_error")
    except ValueError:
        error = None
    return state, f"on demand: {state}" + (
        f" ({error})" if error else " (a request loads it)" if state == "stopped" else ""
    )


_client: httpx.AsyncClient | None = None


def http() -> httpx.AsyncClient:
    """Short timeouts; trust_env=False: no proxy variable reroutes a probe."""
    global _client
    if _client is None or _client.is_closed:
        _client = httpx.AsyncClient(
            timeout=httpx.Timeout(PROBE_READ_TIMEOUT, connect=PROBE_CONNECT_TIMEOUT), trust_env=False
        )
    return _client


async def fetch(url: str, headers: dict | None = None, redirects: bool = False) -> httpx.Response | Exception:
    try:
        return await http().get(url, headers=headers or {}, follow_redirects=redirects)
    except Exception as exc:  # noqa: BLE001  every failure is an answer here
        return exc


async def hosted_api(name: str, dep: object) -> dict:
    """A hosted model: its API's model list answers (with its key) or not, and how fast."""
    url, headers = gb.hosted_request(dep)
    start = time.monotonic()
    answer = await fetch(url, headers)
    ms = round(1000 * (time.monotonic() - start))
    if isinstance(answer, httpx.Response):
        state = "healthy" if answer.status_code == 200 else "down"
        reason = f"{url} answered {answer.status_code} in {ms} ms" + (
            " (its key was refused)" if answer.status_code in (401, 403) else ""
        )
    else:
        state, reason = "down", f"{url} did not answer: {type(answer).__name__} after {ms} ms"
    return {"name": name, "backend": url, "state": state, "reason": reason, "metrics": None, "hosted": gb.hosted(dep)}


async def backend(name: str, dep: object) -> dict:
    if gb.hosted(dep):
        return await hosted_api(name, dep)
    root = gb.backend_root(dep)
    if root is None:
        return {"name": name, "backend": None, "state": "down", "reason": "no api_base in the config", "metrics": None}
    if (since := backend_health.MONITOR.since(root)) is not None:
        # the gateway's own probes found it hung (shared by its workers): no probe of ours that would only wait out
        # its timeout (a report, `make status` and the page answer at once); the first answer it gives ends it
        hung = {"state": "hung", "reason": backend_health.reason(since), "metrics": None}
        return {"name": name, "backend": root, **hung, "nodes": gb.nodes(dep)}
    health, metrics = await asyncio.gather(fetch(root + "/health"), fetch(root + "/metrics", gb.backend_headers(dep)))
    state, reason = state_of(health.status_code if isinstance(health, httpx.Response) else health)
    on_demand = health.headers.get(ON_DEMAND_HEADER) if isinstance(health, httpx.Response) else None
    scaling = None
    if on_demand and isinstance(health, httpx.Response):  # (on_demand comes from a response)
        state, reason = on_demand_state(on_demand, health)
        if (scaling := scaling_of(health)) is not None:
            reason = f"{state}: {status_report.scaling_line(scaling)}"
    parsed = None
    if isinstance(metrics, httpx.Response) and metrics.status_code == 200:
        try:
            parsed = backend_metrics(metrics.text)
        except ValueError:  # not Prometheus text
            parsed = None
    out = {"name": name, "backend": root, "state": state, "reason": reason, "metrics": parsed, "nodes": gb.nodes(dep)}
    if scaling is not None:
        out["scaling"] = scaling
    return out


async def gateway(person: str | None = None) -> dict:
    """The gateway's state and counters, with every person's tokens this day and month (or only `person`'s)."""
    port = os.environ.get(METRICS_PORT_ENV)
    out: dict = {
        "state": "healthy",
        "pid": os.getpid(),
        "workers": gb.as_int(os.environ.get("NUM_WORKERS")) or 1,
        "metrics": None,
        "metrics_error": None,
    }
    if not port:
        out["metrics_error"] = f"{METRICS_PORT_ENV} is not set: the gateway serves no metrics"
        return out
    resp = await fetch(f"http://127.0.0.1:{port}/metrics", redirects=True)  # LiteLLM's mount: 307 to /metrics/
    if isinstance(resp, Exception) or resp.status_code != 200:
        out["metrics_error"] = f"its metrics port {port} did not answer: " + (
            f"{type(resp).__name__}" if isinstance(resp, Exception) else f"HTTP {resp.status_code}"
        )
        return out
    out["metrics"] = gateway_metrics(resp.text)
    out["budgets"] = await budgets_used(person)
    return out


REPLICA = "gateway_replica"  # model_info of a replicated model's deployment: the replica's name (<model>-<i>)


async def budgets_used(name: str | None = None) -> dict[str, dict]:
    """Tokens each person (or only `name`) used this UTC day and month, with their budgets, and the responses they
    keep stored (/v1/responses' state: how many, their bytes, of their `stored_responses` limit). people.py and
    response_store.py count them in the stack's Redis; without one: nothing."""
    try:
        import people
        import response_store

        people.DIRECTORY.refresh()
        if people.redis_client() is None:
            return {}
        out = {}
        store = response_store.redis_client()  # None: the stack stores no responses (responses_ttl 0)
        for p in people.DIRECTORY.people.values():
            if name is None or p.name == name:
                out[p.name] = {**await people.used_tokens(p.name), "limits": people.budgets(p)}
                if p.stored_responses is not None:
                    out[p.name]["limits"]["stored_bytes"] = p.stored_responses
                if store is not None:
                    count, size = await response_store.usage(store, response_store.owner_of(p.name))
                    out[p.name]["stored"] = {"responses": count, "bytes": size}
        return out
    except Exception:  # noqa: BLE001  no Redis, no people: status still answers
        return {}


ADAPTER_OF = "gateway_adapter_of"  # model_info of a LoRA adapter's deployment: its base model's served name


async def status() -> dict:
    """Every backend deployment of the router, one entry each: a replicated model's replicas one by one, each under
    its replica's name, with `model` the name clients send, and `adapters` the names of the LoRA adapters it serves
    (an adapter's deployment shares its base's backend: it is listed there, not probed again)."""
    rt = gb.router()
    pairs = [(name, dep) for name in (gb.model_names(rt) if rt is not None else []) for dep in gb.deployments(rt, name)]
    adapters: dict[str, set[str]] = {}
    for name, dep in pairs:
        if base := gb.info(dep).get(ADAPTER_OF):
            adapters.setdefault(str(base), set()).add(name)
    pairs = [(name, dep) for name, dep in pairs if not gb.info(dep).get(ADAPTER_OF)]
    now = time.time()
    gw, *models = await asyncio.gather(
        gateway(), *(backend(str(gb.info(dep).get(REPLICA) or name), dep) for name, dep in pairs)
    )
    for (name, _), entry in zip(pairs, models):
        entry["model"] = name
        if name in adapters:
            entry["adapters"] = sorted(adapters[name])
    return {"time": now, "gateway": gw, "models": models}


def interval_of(value: str | None) -> float:
    """?interval= in seconds, within 0..REPORT_MAX_INTERVAL (default 1; not a number: 1)."""
    try:
        seconds = float(value) if value is not None else 1.0
    except ValueError:
        seconds = 1.0
    return min(max(seconds, 0.0), REPORT_MAX_INTERVAL) if seconds == seconds else 1.0


async def report(interval: float, url: str) -> dict:
    """status_report.report of two samples `interval` seconds apart (0: one sample, no rates)."""
    first = await status()
    if interval <= 0:
        return status_report.report(None, first, url.rstrip("/"))
    await asyncio.sleep(interval)
    return status_report.report(first, await status(), url.rstrip("/"))


def install(check_key: Callable[[str], Awaitable[object]]) -> None:
    """Put the route in front of LiteLLM's own (once per process)."""
    from litellm.proxy.proxy_server import app

    routes = app.router.routes
    if any(getattr(r, "name", None) == "gateway_status" for r in routes):
        return

    async def endpoint(request: Request) -> JSONResponse:
        await check_key(request.headers.get("x-api-key") or request.headers.get("authorization", ""))
        return JSONResponse(await status())

    routes.insert(0, APIRoute(PATH, endpoint, methods=["GET"], name="gateway_status", include_in_schema=False))

    async def reporting(request: Request) -> JSONResponse:
        await check_key(request.headers.get("x-api-key") or request.headers.get("authorization", ""))
        return JSONResponse(await report(interval_of(request.query_params.get("interval")), str(request.base_url)))

    routes.insert(0, APIRoute(REPORT_PATH, reporting, methods=["GET"], name="gateway_report", include_in_schema=False))

    async def listing(request: Request) -> JSONResponse:
        await check_key(request.headers.get("x-api-key") or request.headers.get("authorization", ""))
        return JSONResponse({"routes": served_routes(request.app.openapi())})

    routes.insert(0, APIRoute(ROUTES_PATH, listing, methods=["GET"], name="gateway_routes", include_in_schema=False))


def served_routes(schema: dict) -> list[dict]:
    """The routes of the app's OpenAPI schema (built from the app whatever NO_OPENAPI says, with LiteLLM's stubs
    for its lazily loaded features): path and methods."""
    verbs = ("get", "post", "put", "patch", "delete")
    return [
        {"path": path, "methods": sorted(m.upper() for m in ops if m in verbs)}
        for path, ops in sorted((schema.get("paths") or {}).items())
    ]
