"""Plan -> LiteLLM proxy config: one deployment per model, settings for self-hosted backends."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from ..gateway_process import REDIS_HOST_ENV, REDIS_PORT_ENV, SERVE_MODULE, START_MODULE
from ..plan import AdapterPlan, ModelPlan, Plan
from .text import header, json_header

HOOK_MODULE = "max_tokens_clamp"  # the config names these two; LiteLLM loads them from beside config.yaml
AUTH_MODULE = "gateway_guard"
# every module of generator/shipped/gateway_hooks/ the gateway needs (the two above import the others; gateway_start
# resolves the worker count: the supervisor imports it, a Kubernetes pod runs it; gateway_serve runs LiteLLM)
ROUTING_MODULE = "replica_routing"  # which replica of a model serves a request (only when some model has replicas)
HEALTH_MODULE = "backend_health"  # hung backends: found, kept out, what waits on them cut off (issue 58)
TICK_MODULE = (
    "calm_tick"  # uvicorn's loops woken less often: gateway_serve imports it at start (a restart, not a reload)
)
REPAIRS_MODULE = "tool_call_repairs"  # streamed tool calls the pinned vLLM gets wrong (only when a model takes tools)
GATEWAY_MODULES = (
    AUTH_MODULE,
    "backend_client",
    HEALTH_MODULE,
    TICK_MODULE,
    "count_tokens",
    "error_kinds",
    "fallbacks",
    "gateway_backends",
    "gateway_metrics",
    "gateway_page",
    SERVE_MODULE,
    START_MODULE,
    "gateway_status",
    "graceful_shutdown",
    HOOK_MODULE,
    "litellm_cuts",
    "messages_route",
    "people",
    "request_counters",
    "request_guard",
    "request_shapes",
    "response_store",
    ROUTING_MODULE,
    "route_order",
    "scaled_copies",
    "stack_redis",
    "status_report",
    REPAIRS_MODULE,
    "tool_schemas",
    "worker_gc",
)
# Failover between the replicas of a model (LiteLLM 1.108.7's router, docs/replicas.md). A replica's failure that
# is the backend's (a 5xx, a refused connection, which hosted_vllm reports as InternalServerError) puts it in
# cooldown at once for REPLICA_COOLDOWN seconds (per worker; then it is tried again: a live one stays in), and the
# request is retried on another replica before a byte went to the client. Timeouts and the client's own 4xx are
# not retried (a slow answer retried doubles the load; a bad request is bad everywhere).
REPLICA_COOLDOWN = 5
REPLICA_ALLOWED_FAILS = {
    "InternalServerErrorAllowedFails": 0,
    "ServiceUnavailableErrorAllowedFails": 0,
    "BadGatewayErrorAllowedFails": 0,
}
HOOKS_DIR = Path(__file__).resolve().parents[2] / "shipped" / "gateway_hooks"
# the gateway's first process (compose, local runtime): reloads LiteLLM when the files beside it change.
# Not in the Kubernetes ConfigMap: there a new ConfigMap name rolls the pods instead.
SUPERVISOR_MODULE = "gateway_supervisor"


# the gateway's page (gateway_page.py serves them from its folder): file -> the comment that opens its header
PAGE_FILES = {
    "gateway_page.html": ("<!--", " -->"),
    "gateway_page.js": ("//", ""),
    "gateway_page.css": ("/*", " */"),
    "gateway_page.svg": ("<!--", " -->"),
}


def gateway_modules(plan: Plan, folder: str = "litellm", regenerate: str = "make regenerate") -> dict[str, str]:
    """Python modules the LiteLLM config names (and the ones they import), copied next to config.yaml,
    where LiteLLM loads them by path; they find each other through their own folder. The page's files go beside
    them."""
    files = {
        f"{folder}/{mod}.py": header(plan, regenerate=regenerate) + (HOOKS_DIR / f"{mod}.py").read_text()
        for mod in GATEWAY_MODULES
    }
    for name, (opens, closes) in PAGE_FILES.items():
        text = header(plan, opens, regenerate)
        if closes:  # one comment per line, closed on its line
            text = "".join(f"{line}{closes}\n" for line in text.splitlines())
        files[f"{folder}/{name}"] = text + (HOOKS_DIR / name).read_text()
    return files


PEOPLE_FILE = "people.json"  # beside config.yaml; gateway_hooks/people.py reads it again whenever it changes


def people_policy(plan: Plan) -> dict:
    """models.yml `people:` as the gateway reads it: names, models, limits; no key, no hash (those are in
    people-keys.json, written from the keys file: generator/operate/keys.py)."""
    return {
        p.name: {
            "models": list(p.models) if p.models is not None else None,
            "rpm": p.rpm,
            "tpm": p.tpm,
            "parallel": p.parallel,
            "tokens_per_day": p.tokens_per_day,
            "tokens_per_month": p.tokens_per_month,
            "stored_responses": p.stored_responses,
        }
        for p in plan.people
    }


def people_file(plan: Plan, folder: str = "litellm", regenerate: str = "make regenerate") -> dict[str, str]:
    """{folder/people.json: text} when models.yml has `people:`; nothing otherwise."""
    if not plan.people:
        return {}
    doc = {**json_header(plan, regenerate), "people": people_policy(plan)}
    return {f"{folder}/{PEOPLE_FILE}": json.dumps(doc, indent=2) + "\n"}


def supervisor_file(plan: Plan, folder: str = "litellm", regenerate: str = "make regenerate") -> dict[str, str]:
    return {f"{folder}/{SUPERVISOR_MODULE}.py": header(plan, regenerate=regenerate) + supervisor_source()}


def supervisor_source() -> str:
    return (HOOKS_DIR / f"{SUPERVISOR_MODULE}.py").read_text()


def supervisor_digest() -> str:
    """What the gateway's first processes run at start and never reload: the supervisor, the worker-count
    resolver it imports and the LiteLLM parent the workers are forked from (a change to any of them must restart
    the gateway, not reload it)."""
    sources = [
        (HOOKS_DIR / f"{name}.py").read_text() for name in (SUPERVISOR_MODULE, START_MODULE, SERVE_MODULE, TICK_MODULE)
    ]
    return hashlib.sha256("".join(sources).encode()).hexdigest()[:16]


def compose_api_base(m: ModelPlan) -> str:
    """The backend as the gateway container sees it: service name on the internal network (a model on nodes: the
    leader's address)."""
    return f"http://{m.compose_host}:{m.port}/v1"


def local_api_base(m: ModelPlan) -> str:
    """The backend as a local process: loopback only."""
    return f"http://127.0.0.1:{m.port}/v1"


CONTROLLER_SERVICE = "on-demand"  # the on-demand controller's compose service and host name


def controller_api_base(m: ModelPlan, plan: Plan, host: str) -> str:
    """An on-demand model as the gateway reaches it: through the controller, which loads it first. The
    controller forwards the request (and its Authorization header, the backend's key) unchanged."""
    return f"http://{host}:{plan.required_controller().port}/m/{m.name}/v1"


NO_PROMPT_LOGPROBS = "gateway_no_prompt_logprobs"  # model_info: no prompt logprobs on this backend (guard: 400)


def prompt_logprobs_served(m: ModelPlan) -> bool:
    """False for a backend that serves LoRA adapters on CPU: vLLM 0.32's CPU LoRA kernels stop the engine computing a
    prompt's logprobs (punica_cpu.add_lora_logits sizes its indices for the sampled rows; docs/limits.md)."""
    return not (m.adapters and not m.gpus)


def model_entry(
    m: ModelPlan, plan: Plan, api_base: Callable[[ModelPlan], str], controller_host: str | None = None
) -> dict:
    timeout, stream_timeout = plan.gateway.request_timeout, plan.gateway.stream_timeout
    params: dict[str, object]
    if m.hosted is not None:  # an API somebody else serves: its provider's LiteLLM route, its base if not the default
        params = {"model": m.hosted.route, **({"api_base": m.hosted.api_base} if m.hosted.api_base else {})}
        if m.hosted.chat_only:  # LiteLLM bridges the Responses and Messages APIs to chat completions for it
            params["use_chat_completions_api"] = True
    elif m.on_demand and plan.controller:
        host = controller_host or ("127.0.0.1" if api_base is local_api_base else CONTROLLER_SERVICE)
        params = {"model": f"hosted_vllm/{m.served_name}", "api_base": controller_api_base(m, plan, host)}
        # the controller may hold a request for up to load_timeout while the model loads: the gateway waits that
        # long on top of its own timeouts, so the client gets the controller's 503 + Retry-After, not a timeout
        wait = int(plan.controller.load_timeout + 0.999)
        timeout, stream_timeout = timeout + wait, stream_timeout + wait
    else:
        params = {"model": f"hosted_vllm/{m.served_name}", "api_base": api_base(m)}
    params |= {
        "api_key": f"os.environ/{m.api_key_env}",
        **m.litellm_params,
        "timeout": timeout,
        "stream_timeout": stream_timeout,
    }
    if m.pooling:  # LiteLLM's health check and routing follow the mode; unset, a model not in its cost map is chat
        info: dict = {"mode": m.kind, "max_input_tokens": m.context}
    else:
        info = {
            "max_input_tokens": m.context,
            "max_output_tokens": m.max_tokens,
            "supports_function_calling": m.takes_tools,
            "supports_tool_choice": m.auto_tool_choice,
            "supports_reasoning": m.reasoning_parser is not None,
        }
    if m.hosted is None and not m.pooling:  # the guard answers more logprobs per token than vLLM computes 400
        info[MAX_LOGPROBS] = m.max_logprobs
    if m.description:  # the gateway's page shows it (as text)
        info[DESCRIPTION] = m.description
    if m.hosted is not None:  # no backend of ours: nothing asks it to count a prompt; status asks its /models
        info[HOSTED] = m.hosted.provider
    if m.nodes:  # served across hosts (docs/multinode.md): status and the page show the model with its nodes
        info[NODES] = m.nodes.count
    if m.context_fallbacks:  # max_tokens_clamp.py sends a prompt + budget over the context to the first that fits
        info[CONTEXT_FALLBACKS] = list(m.context_fallbacks)
    # what one request may ask (models.yml `limits:`): gateway_guard.py answers 400/413 past these
    info["gateway_limits"] = dataclasses.asdict(m.limits)
    if not prompt_logprobs_served(m):  # the guard refuses them for every model of such a backend
        info[NO_PROMPT_LOGPROBS] = True
    if m.replicas > 1:  # replica_routing.py picks among these; status shows each by this name
        info.update(
            {
                "gateway_replica": m.name,
                "allowed_fails_policy": dict(REPLICA_ALLOWED_FAILS),
                "cooldown_time": REPLICA_COOLDOWN,
            }
        )
    elif plan.replicated:
        # cooldowns are on for the replicas' sake: a deployment-level count keeps a lone deployment out of them
        # (LiteLLM never cools a model group's only deployment down when it has one; a cooldown would be an outage)
        info["allowed_fails"] = 1000
    return {"model_name": m.served_name, "litellm_params": params, "model_info": info}


ADAPTER_OF = "gateway_adapter_of"  # model_info of a LoRA adapter's deployment: its base model's served name
CONTEXT_FALLBACKS = "gateway_context_fallbacks"  # model_info: models.yml `context_fallbacks:` (served names)
HOSTED = "gateway_hosted"  # model_info of a hosted model: its provider (gateway_backends.py reads it)
NODES = "gateway_nodes"  # model_info of a model on nodes: how many (gateway_backends.py reads it)
DESCRIPTION = "gateway_description"  # model_info: models.yml `description:` (gateway_page.py shows it)
MAX_LOGPROBS = "gateway_max_logprobs"  # model_info: the backend's vLLM --max-logprobs (request_guard.py)


def adapter_entry(base: dict, m: ModelPlan, a: AdapterPlan) -> dict:
    """A LoRA adapter as a model of its own name: the base's backend (api_base, key, timeouts), context, parsers,
    limits and replica (hosted_vllm/<adapter> is vLLM's LoRA name), its own request defaults and output budget.
    `ADAPTER_OF` tells status it shares its base's backend (not probed twice) and lists it under the base."""
    p = base["litellm_params"]
    params = {
        "model": f"hosted_vllm/{a.name}",
        "api_base": p["api_base"],
        "api_key": p["api_key"],
        **a.litellm_params,
        "timeout": p["timeout"],
        "stream_timeout": p["stream_timeout"],
    }
    info = {**copy.deepcopy(base["model_info"]), "max_output_tokens": a.max_tokens, ADAPTER_OF: m.served_name}
    info.pop(CONTEXT_FALLBACKS, None)  # the base model's routes, not the adapter's
    info.pop(DESCRIPTION, None)
    if a.description:
        info[DESCRIPTION] = a.description
    return {"model_name": a.name, "litellm_params": params, "model_info": info}


def model_entries(
    m: ModelPlan, plan: Plan, api_base: Callable[[ModelPlan], str], controller_host: str | None = None
) -> list[dict]:
    """One backend's deployments: the model, then each of its LoRA adapters."""
    base = model_entry(m, plan, api_base, controller_host)
    return [base, *(adapter_entry(base, m, a) for a in m.adapters)]


def retry_policy(replicas: int) -> dict[str, int]:
    """Retries of one request on a replicated model: another replica for the backend's failures, none else."""
    return {
        "InternalServerErrorRetries": replicas,
        "ServiceUnavailableErrorRetries": replicas,
        "DefaultRetries": replicas,  # APIConnectionError, BadGatewayError
        "TimeoutErrorRetries": 0,
        "BadRequestErrorRetries": 0,
        "AuthenticationErrorRetries": 0,
        "RateLimitErrorRetries": 0,
        "ContentPolicyViolationErrorRetries": 0,
        "NotFoundErrorRetries": 0,
    }


def routes(plan: Plan) -> dict:
    """models.yml `fallbacks:` and `aliases:` as LiteLLM's router takes them (docs/routing.md). A fallback is tried
    when its model fails before the first byte (num_retries is 0: at once, a replicated model's other replicas
    first); never for the client's own 400 (`fallback_on_unsupported_params: false`: a bad request is bad
    everywhere), and only to a model the caller's key may use (LiteLLM checks a person's `models:`). max_tokens_clamp.py
    re-checks each fallback attempt (tools, context, output budget). Aliases: the request guard puts the model's name
    in the body before anything reads it; LiteLLM's own aliases list them in /v1/models (`hidden` unless
    `list_aliases: true`) and route a request the guard did not rewrite."""
    out: dict = {}
    fallbacks = [{m.served_name: list(m.fallbacks)} for m in plan.served if m.fallbacks]
    if fallbacks:
        out["fallbacks"] = fallbacks
        out["fallback_on_unsupported_params"] = False
        # a backend's context-window (or content-policy) error is not a failure: without these LiteLLM would send
        # it to `fallbacks` too; an empty list per model raises it as it is (context_fallbacks are decided before
        # routing, on the counted prompt: max_tokens_clamp.py)
        none: list[dict[str, list[str]]] = [{m.served_name: []} for m in plan.served if m.fallbacks]
        out["context_window_fallbacks"] = none
        out["content_policy_fallbacks"] = none
    aliases = {
        alias: {"model": m.served_name, "hidden": not m.list_aliases} for m in plan.served for alias in m.aliases
    }
    if aliases:
        out["model_group_alias"] = aliases
    return out


def redis_settings(plan: Plan) -> dict[str, str] | None:
    """The gateway's connection to the stack's Redis as LiteLLM's config reads it (environment references: the
    address differs per target, the password is a secret); None when the stack has no Redis. The one place the
    LiteLLM config names Redis: a feature that needs it there (router_settings, a cache) takes it from here."""
    if plan.redis is None:
        return None
    return {
        "host": f"os.environ/{REDIS_HOST_ENV}",
        "port": f"os.environ/{REDIS_PORT_ENV}",
        "password": f"os.environ/{plan.redis.password_env}",
    }


def render_litellm(
    plan: Plan, api_base: Callable[[ModelPlan], str] = compose_api_base, controller_host: str | None = None
) -> dict:
    """`controller_host`: where the gateway reaches the on-demand controller (default: its compose service, or
    127.0.0.1 with local_api_base)."""
    g = plan.gateway
    litellm_settings: dict = {
        "num_retries": 0,  # one deployment per model: a retry only doubles the load on a struggling GPU
        "request_timeout": g.request_timeout,
        "drop_params": False,  # an unsupported parameter is an error the client should see
        "set_verbose": False,
        # no "context_window_fallbacks=... Set 'context_window_fallback' - <docs link>" and no internal
        # router names appended to the backend's own errors: advice about a setting of LiteLLM's
        "expose_router_debug_in_errors": False,
        # no turn_off_message_logging: the only logging callback is prometheus (counts, no prompt),
        # so no prompt leaves the gateway anyway, and LiteLLM's redaction copies every request's
        # messages (+20 % CPU per request with an 8K-token prompt, bench/README.md)
    }
    # defaults, tool and prompt-length 400s on every API; the output-budget clamp when it is on;
    # prometheus (gateway.metrics: full): LiteLLM's request/error/latency metrics, served only on the internal metrics
    # port (gateway_process.GATEWAY_METRICS_PORT; the public /metrics stays closed: 401/403); light (the default): no
    # callback, the request guard counts requests and errors, people.py's callback a person's tokens
    hook = "proxy_handler_instance" if g.clamp_max_tokens else "checks_only_instance"
    litellm_settings["callbacks"] = [f"{HOOK_MODULE}.{hook}"] + (["prometheus"] if g.metrics == "full" else [])
    # each person's tokens: per day and month in the stack's Redis (their budgets, page, make usage), and with light
    # metrics the per-person token counters LiteLLM's callback would count (request_counters.py)
    if plan.people and (plan.redis is not None or g.metrics == "light"):
        litellm_settings["callbacks"].append("people.usage_counter")
    if any(m.hosted is not None and m.hosted.chat_only for m in plan.hosted):
        # LiteLLM sends /v1/messages for an openai/ route through that API's Responses API, even with the
        # deployment's use_chat_completions_api (its answer's text was lost there): chat completions instead
        litellm_settings["use_chat_completions_url_for_anthropic_messages"] = True
    if any(m.tool_parser for m in plan.models):  # docs/parsers.md: what vLLM's parsers get wrong in streams
        litellm_settings["callbacks"].append(f"{REPAIRS_MODULE}.repair_instance")
    router_settings: dict = {
        "routing_strategy": "simple-shuffle",
        "num_retries": 0,
        "timeout": g.request_timeout,
        "stream_timeout": g.stream_timeout,
        "disable_cooldowns": True,  # with a single deployment a cooldown is an outage
    }
    if any(m.on_demand is None for m in plan.models):  # backends the gateway probes: a hung one is cut off
        litellm_settings["callbacks"].append(f"{HEALTH_MODULE}.health_instance")
    if plan.replicated:
        litellm_settings["callbacks"].append(f"{ROUTING_MODULE}.routing_instance")
        router_settings["disable_cooldowns"] = False  # a dead replica is skipped (lone deployments: allowed_fails)
        counts = {
            name: m.replicas
            for m in plan.models
            if m.replicas > 1
            for name in (m.served_name, *(a.name for a in m.adapters))
        }
        router_settings["model_group_retry_policy"] = {name: retry_policy(n) for name, n in counts.items()}
    router_settings.update(routes(plan))
    general_settings: dict = {
        "master_key": f"os.environ/{g.master_key_env}",
        "custom_auth": f"{AUTH_MODULE}.user_api_key_auth",  # 401 for a wrong key, 400 for a malformed body
        "disable_spend_logs": True,
        "disable_error_logs": True,
    }
    if (redis := redis_settings(plan)) is not None and any(p.counted for p in plan.people):
        # LiteLLM's coordination Redis: its rate limiter (people's limits) counts there, atomically, so every
        # worker and replica shares one count; explicit, so a Redis that cannot be reached fails the start. Only
        # then: the stack's other uses of its Redis (stored responses, replica placement, hung backends) go through
        # stack_redis.py, and LiteLLM given a Redis would count every request there too
        general_settings["coordination_redis"] = redis
    return {
        "model_list": [e for m in plan.models for e in model_entries(m, plan, api_base, controller_host)]
        + [model_entry(m, plan, api_base) for m in plan.hosted],
        "litellm_settings": litellm_settings,
        "router_settings": router_settings,
        "general_settings": general_settings,
    }
