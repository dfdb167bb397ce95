"""LiteLLM proxy hook: request defaults, the output-budget clamp and clear 400s, on every API.

Referenced from the generated config.yaml, with this file (and gateway_backends.py) copied next to it:

    litellm_settings:
      callbacks: ["max_tokens_clamp.proxy_handler_instance"]     # gateway.clamp_max_tokens: true
      callbacks: ["max_tokens_clamp.checks_only_instance"]       # false: defaults and 400s only

LiteLLM calls it before routing, with one call type per API:

| API                     | call type          | output budget field                      |
| /v1/chat/completions    | acompletion        | max_completion_tokens, else max_tokens   |
| /v1/completions         | atext_completion   | max_tokens                               |
| /v1/responses           | aresponses         | max_output_tokens                        |
| /v1/messages            | anthropic_messages | max_tokens                               |

For each request, in this order:

1. tools sent to a model without a tool parser (``model_info.supports_function_calling: false``):
   400 naming the models that take tools (vLLM's own answer names a server flag instead);
2. the model's gateway defaults (``litellm_params``: max_tokens, temperature, top_p, ...) are written
   into the request under this API's own field names, where the client sent none (LiteLLM alone
   loses max_tokens on /v1/responses, which has ``max_output_tokens`` instead);
3. the prompt is counted by the backend's own tokenizer (vLLM ``/tokenize`` with the chat template;
   Responses and Messages requests as the chat request LiteLLM's own translation makes of them),
   unless it clearly fits (one token per byte is an upper bound); a prompt that alone fills the context is a 400
   ``prompt is N tokens, <model> holds M tokens``, raised here so LiteLLM adds no advice to it;
4. a prompt + budget over the context goes to the model's first `context_fallbacks:` model that holds it (and the
   caller may use), which is checked from step 1 again (fallbacks.py); the answer says so in
   ``x-gateway-fallback: <asked>-><answered>``;
5. else the budget is lowered so that ``prompt + budget <= context``, and the response says so in
   ``x-gateway-max-tokens-clamped: <asked>-><given>`` (streamed or not).

An attempt of LiteLLM's router on a model's `fallbacks:` model (its model failed) is checked again for that model:
1, 3 and 5, with the request's defaults as they are (async_pre_call_deployment_hook).

When the backend cannot count (down, timeout, a batch of prompts, a hosted model's API), the UTF-8 length of the
prompt's JSON stands in for the count: the budget is still clamped (safely low), but no 400 is raised on a guess.
Any other failure inside the hook leaves the request unchanged: the hook never breaks a request.
"""

from __future__ import annotations

import os
import sys
from collections import OrderedDict
from typing import Any, NamedTuple

from fastapi import HTTPException
from litellm._logging import verbose_proxy_logger
from litellm.integrations.custom_logger import CustomLogger

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # LiteLLM loads this file by path, not as a package: find the modules beside it
    sys.path.insert(0, HERE)
import backend_health  # noqa: E402
import fallbacks  # noqa: E402
import gateway_backends as gb  # noqa: E402

HEADER = "x-gateway-max-tokens-clamped"
SAME = {k: k for k in gb.DEFAULT_KEYS}


class Api(NamedTuple):  # not a dataclass: LiteLLM loads this module without registering it in sys.modules
    """How one API spells what the hook reads and writes."""

    name: str
    budget_keys: tuple[str, ...]  # output budget fields, the one the backend prefers first
    default_fields: dict[str, str]  # litellm_params default -> this API's request field


CHAT = Api("chat", ("max_completion_tokens", "max_tokens"), SAME)
TEXT = Api("text", ("max_tokens",), SAME)
RESPONSES = Api(
    "responses",
    ("max_output_tokens",),
    {
        "max_tokens": "max_output_tokens",
        "temperature": "temperature",
        "top_p": "top_p",
        # vLLM's ResponsesRequest takes these too; LiteLLM forwards them to vLLM's /v1/responses
        "top_k": "top_k",
        "min_p": "min_p",
        "presence_penalty": "presence_penalty",
        "frequency_penalty": "frequency_penalty",
        "repetition_penalty": "repetition_penalty",
        "seed": "seed",
    },
)
MESSAGES = Api(
    "messages",
    ("max_tokens",),
    {
        "max_tokens": "max_tokens",
        "temperature": "temperature",
        "top_p": "top_p",
        "top_k": "top_k",
        "stop": "stop_sequences",
    },
)
API_OF = {
    "completion": CHAT,
    "acompletion": CHAT,
    "text_completion": TEXT,
    "atext_completion": TEXT,
    "responses": RESPONSES,
    "aresponses": RESPONSES,
    "anthropic_messages": MESSAGES,
    "aanthropic_messages": MESSAGES,
}


def sends_tools(api: Api, data: dict) -> bool:
    tools = data.get("tools")
    if not isinstance(tools, list) or not tools:
        return False
    choice = data.get("tool_choice")
    if api is MESSAGES:
        return not (isinstance(choice, dict) and choice.get("type") == "none")
    return choice != "none"


def prompt_of(api: Api, data: dict) -> object:
    """The part of the request that becomes the prompt (for the byte upper bound)."""
    keys = {
        "chat": ("messages", "tools"),
        "text": ("prompt",),
        "responses": ("input", "instructions", "tools"),
        "messages": ("system", "messages", "tools"),
    }[api.name]
    return {k: data.get(k) for k in keys if data.get(k) is not None}


def responses_as_chat(data: dict) -> dict:
    """A Responses request as the chat request vLLM renders it from: LiteLLM's own translation."""
    from litellm.responses.litellm_completion_transformation.transformation import (
        LiteLLMCompletionResponsesConfig as R,
    )

    messages = R.transform_responses_api_input_to_messages(
        input=data.get("input") or "", responses_api_request={"instructions": data.get("instructions")}
    )
    payload: dict = {"messages": gb.plain(messages), "add_generation_prompt": True}
    if data.get("tools"):
        tools, _ = R.transform_responses_api_tools_to_chat_completion_tools(data["tools"])
        if tools:
            payload["tools"] = gb.plain(tools)
    return payload


async def count_prompt(api: Api, dep: object, data: dict) -> tuple[int | None, int | None]:
    """(prompt tokens, backend max_model_len) by the backend's tokenizer, or (None, None)."""
    if api is MESSAGES:
        return await gb.count_message_tokens(dep, data), None
    if api is CHAT and isinstance(data.get("messages"), list):
        payload = {"messages": data["messages"], "add_generation_prompt": True}
        if data.get("tools"):
            payload["tools"] = data["tools"]
        return await gb.tokenize(dep, payload)
    if api is TEXT:
        prompt = data.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        return await gb.tokenize(dep, {"prompt": prompt}) if isinstance(prompt, str) else (None, None)
    if api is RESPONSES:
        return await gb.tokenize(dep, responses_as_chat(data))
    return None, None


def apply_defaults(api: Api, data: dict, defaults: dict[str, object]) -> list[str]:
    """The model's gateway defaults, under this API's field names, where the client set nothing; the fields set."""
    written = []
    for key, value in defaults.items():
        fld = api.default_fields.get(key)
        if fld is None:
            continue
        if fld in api.budget_keys and any(data.get(k) is not None for k in api.budget_keys):
            continue  # the client chose a budget (under either name)
        if data.get(fld) is None:
            data[fld] = [value] if fld == "stop_sequences" and isinstance(value, str) else value
            written.append(fld)
    return written


def answer_in(exc: Exception, **fields) -> bool:
    """Set the fields an endpoint that ignores a failure hook's answer builds its own answer from (/v1/completions,
    /v1/messages); False when the exception type has read-only ones (LiteLLM's own answer then stands there)."""
    for field, value in fields.items():
        try:
            setattr(exc, field, value)
        except AttributeError:
            return False
    return True


class MaxTokensClamp(CustomLogger):
    def __init__(self, clamp: bool = True) -> None:
        super().__init__()
        self.clamp = clamp
        self._notes: OrderedDict[str, dict[str, str]] = OrderedDict()  # litellm_call_id -> headers of its answer
        # litellm_call_id -> the proxy's data of a request whose model has fallbacks on failure: an attempt on one
        # marks it so that the answer names the model that answered (fallbacks.name_the_answerer)
        self._may_fall_back: OrderedDict[str, dict] = OrderedDict()

    def _note(self, data: dict, header: str, value: str) -> None:
        call_id = data.get("litellm_call_id")
        if isinstance(call_id, str):
            self._notes.setdefault(call_id, {})[header] = value
            while len(self._notes) > 10_000:  # a request that never reached the header hook
                self._notes.popitem(last=False)

    def _remember(self, data: dict) -> None:
        call_id = data.get("litellm_call_id")
        if isinstance(call_id, str) and fallbacks.falls_back(gb.router(), data.get("model")):
            self._may_fall_back[call_id] = data
            while len(self._may_fall_back) > 1_000:  # a request that never reached the header or failure hook
                self._may_fall_back.popitem(last=False)

    def _forget(self, data: object) -> None:
        call_id = data.get("litellm_call_id") if isinstance(data, dict) else None
        if isinstance(call_id, str):
            self._may_fall_back.pop(call_id, None)

    async def async_pre_call_hook(self, user_api_key_dict, cache, data, call_type):
        try:
            await self._handle(data, call_type, getattr(user_api_key_dict, "models", None))
            self._remember(data)
        except HTTPException:
            raise  # the 400s this hook means to give
        except Exception as e:  # noqa: BLE001 - never break a request
            verbose_proxy_logger.warning("max_tokens_clamp: skipped after error: %r", e)
        return data

    async def async_pre_call_deployment_hook(self, kwargs: dict, call_type: object) -> dict | None:
        """Each attempt of LiteLLM's router; only an attempt on a fallback (fallbacks.py) is re-checked: a fallback
        without tools for a request with tools, or whose context the prompt fills, is a 400 here, and the router
        goes on to the next fallback; the output budget is clamped to the fallback's context."""
        attempt = fallbacks.attempt_of(kwargs) if isinstance(kwargs, dict) else None
        if attempt is None:
            return None  # every request that is not a fallback's: nothing to do
        asked, tried = attempt
        try:
            await self._handle(kwargs, call_type, None, fallback=False, model=tried, defaults=False)
        except HTTPException:
            raise  # this fallback cannot take the request: the router tries the next
        except Exception as e:  # noqa: BLE001 - never break a request
            verbose_proxy_logger.warning("max_tokens_clamp: fallback check skipped after error: %r", e)
        self._note(kwargs, fallbacks.HEADER, f"{asked}->{tried}")
        # the router's attempt has a copy of the request's metadata: the proxy's own data decides what the answer's
        # events name (a stream's are renamed to the model asked unless it is marked)
        fallbacks.name_the_answerer(self._may_fall_back.get(str(kwargs.get("litellm_call_id")), {}))
        return kwargs

    async def log_success_fallback_event(self, original_model_group, kwargs, original_exception):
        """LiteLLM's router: a fallback answered (failure fallbacks; context ones are counted where decided)."""
        fallbacks.count(str(original_model_group), str((kwargs or {}).get("model")), "error")

    async def _handle(
        self,
        data: dict,
        call_type: object,
        allowed: object,
        fallback: bool = True,
        model: str | None = None,
        defaults: bool = True,
    ) -> None:
        """`allowed`: the caller's key's models (context fallbacks it may use); `fallback`: a context fallback may
        take the request; `model`: the model group (default: the request's); `defaults`: write its defaults."""
        api = API_OF.get(str(getattr(call_type, "value", call_type)))
        model = model or (data.get("model") if isinstance(data, dict) else None)
        if api is None or not isinstance(model, str):
            return
        rt = gb.router()
        deps = gb.deployments(rt, model) if rt is not None else []
        if not deps:
            return

        tools = sends_tools(api, data)
        if tools and not all(gb.takes_tools(d) for d in deps):
            takers = gb.tool_models(rt)
            where = f"send tools to one of: {', '.join(takers)}" if takers else "no model of this gateway takes tools"
            raise gb.RequestError(f"{model} takes no tools (it is served without a tool call parser); {where}")

        written = apply_defaults(api, data, gb.defaults(deps)) if defaults else []

        present = [k for k in api.budget_keys if gb.as_int(data.get(k)) is not None]
        requested = gb.as_int(data[present[0]]) if present else None
        context = gb.config_context(rt, model, deps)
        upper_bound = gb.byte_upper_bound(prompt_of(api, data))
        if context is not None and upper_bound + max(requested or 1, 1) <= context:
            return  # fits even at one token per byte: no need to ask the backend

        prompt_tokens, max_model_len = None, None
        for dep in deps:  # the replicas of a model in turn: a dead one does not answer, the next one counts
            if gb.hosted(dep):
                break  # a hosted API is not asked to count: the estimate stands in
            prompt_tokens, max_model_len = await count_prompt(api, dep, data)
            if prompt_tokens is not None:
                break
        counted = prompt_tokens is not None
        if prompt_tokens is None:
            prompt_tokens = upper_bound
        context = context or max_model_len
        if context is None:
            return
        need = prompt_tokens + max(requested or 1, 1)
        if (
            fallback
            and counted
            and need > context
            and (target := fallbacks.context_target(rt, model, deps, need, tools, allowed)) is not None
        ):
            for key in written:  # the asked model's defaults are not the fallback's
                data.pop(key, None)
            data["model"] = target[0]
            fallbacks.name_the_answerer(data)
            self._note(data, fallbacks.HEADER, f"{model}->{target[0]}")
            fallbacks.count(model, target[0], "context")
            verbose_proxy_logger.info(
                "max_tokens_clamp: %s model=%s needs %s tokens, holds %s: to %s", api.name, model, need, context, target
            )
            return await self._handle(data, call_type, allowed, fallback=False)
        if counted and prompt_tokens >= context:
            raise gb.RequestError(
                f"prompt is {prompt_tokens} tokens, {model} holds {context} tokens "
                "(prompt and answer together): shorten the prompt or use a model with a larger context"
            )
        if not self.clamp or requested is None or prompt_tokens + requested <= context:
            return
        given = context - prompt_tokens
        if given < 1:
            return  # only on an estimate: let the backend answer for itself
        for key in present:
            data[key] = given
        note = f"{requested}->{given}"
        self._note(data, HEADER, note)
        verbose_proxy_logger.info(
            "max_tokens_clamp: %s model=%s %s clamped %s (prompt=%s tokens%s, context=%s)",
            api.name,
            model,
            "/".join(present),
            note,
            prompt_tokens,
            "" if counted else " (estimate)",
            context,
        )

    async def async_post_call_response_headers_hook(
        self,
        data: dict,
        user_api_key_dict: Any,
        response: Any,
        request_headers: dict | None = None,
        litellm_call_info: dict | None = None,
    ) -> dict | None:
        self._forget(data)
        call_id = data.get("litellm_call_id") if isinstance(data, dict) else None
        return self._notes.pop(call_id, None) if isinstance(call_id, str) else None

    async def async_post_call_failure_hook(
        self,
        request_data: dict,
        original_exception: Exception,
        user_api_key_dict: Any,
        traceback_str: str | None = None,
    ):
        """An embeddings request to a model that serves none: a clear 400 (not_an_embedding_model).
        A backend's (the on-demand controller's) `Retry-After` reaches the client as `Retry-After`: LiteLLM
        passes a provider's headers on only renamed (`llm_provider-retry-after`), which no client's retry logic
        reads. LiteLLM uses an exception's own `headers` when it has them (common_request_processing)."""
        self._forget(request_data)
        retry = retry_after_of(original_exception)
        if retry and not getattr(original_exception, "headers", None):
            try:
                original_exception.headers = {"retry-after": retry}  # type: ignore[attr-defined]  # any exception type
            except AttributeError:  # an exception type with a read-only headers property: left as it is
                pass
        if (refusal := refused_in_stream(original_exception)) is not None:
            # /v1/completions answers from the exception's own fields (it does not take the hook's answer)
            if answer_in(original_exception, status_code=400, message=refusal.message, type=refusal.type):
                original_exception.param = refusal.param  # type: ignore[attr-defined]  # any exception type
            return refusal
        if (hung := backend_health.hung_failure(request_data, original_exception)) is not None:
            # /v1/messages answers from the exception's own fields (it does not take the hook's answer)
            answer_in(original_exception, status_code=503, message=hung.detail, headers=hung.headers)
        return (
            not_an_embedding_model(request_data, original_exception)
            or hosted_failure(request_data, original_exception)
            or hung
        )


def refused_in_stream(exc: BaseException) -> gb.RequestError | None:
    """A backend's 400 that LiteLLM 1.108.7 answered as a 500: a streamed /v1/completions request vLLM refuses
    (a logit_bias or allowed token id out of the vocabulary, a structured output it cannot compile...) gets its 400
    as the stream's first event, and LiteLLM's text-completion stream wraps it as a MidStreamFallbackError. The
    backend's own error (the OpenAI SDK's, with the body vLLM sent) is in the exception's chain: its 400 and its
    message, as the same request unstreamed gets them."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen and len(seen) < 16:
        seen.add(id(cause))
        body = getattr(cause, "body", None)
        if type(cause).__module__.split(".")[0] == "openai" and isinstance(body, dict) and body.get("code") == 400:
            refusal = gb.RequestError(str(body.get("message") or cause))
            refusal.param = body.get("param") if isinstance(body.get("param"), str) else None
            return refusal
        cause = getattr(cause, "original_exception", None) or cause.__cause__ or cause.__context__
    return None


def hosted_failure(request_data: dict, exc: Exception) -> HTTPException | None:
    """A hosted model's API that failed (no answer, or its 5xx/401): the error names the model and its API, so the
    client knows which of the gateway's models is affected (LiteLLM's says only "Connection error")."""
    model = request_data.get("model") if isinstance(request_data, dict) else None
    rt = gb.router() if isinstance(model, str) else None
    deps = gb.deployments(rt, model) if rt is not None and isinstance(model, str) else []
    if not deps or not all(gb.hosted(d) for d in deps):
        return None
    status = getattr(exc, "status_code", None)
    unreachable = "connection" in f"{type(exc).__name__} {exc}".lower()  # LiteLLM: APIConnectionError or a 500
    if not unreachable and not (isinstance(status, int) and (status >= 500 or status in (401, 403))):
        return None  # the client's own error (a 400): LiteLLM's answer stands
    url = gb.hosted_request(deps[0])[0].removesuffix("/models")
    what = (
        "did not answer"
        if unreachable
        else "refused the gateway's key for it"
        if status in (401, 403)
        else f"failed ({status})"
    )
    return HTTPException(status_code=502, detail=f"hosted model {model}: its API at {url} {what}")


def not_an_embedding_model(request_data: dict, exc: Exception) -> HTTPException | None:
    """/v1/embeddings to a model whose backend has no such route (vLLM serves it only for pooling models: its
    404 says "Not Found"): a 400 that names the model and says so, in place of the backend's 404."""
    if getattr(exc, "status_code", None) != 404 or not isinstance(request_data, dict):
        return None
    url = str((request_data.get("proxy_server_request") or {}).get("url") or "")
    if not url.split("?")[0].rstrip("/").endswith("/embeddings"):
        return None
    model = request_data.get("model")
    return gb.RequestError(
        f"{model} is not an embedding model: its backend serves no /v1/embeddings (vLLM serves "
        "embeddings only for a pooling model, `vllm serve ... --runner pooling`)"
    )


def retry_after_of(exc: Exception) -> str | None:
    """The Retry-After of the backend answer behind a LiteLLM exception (its response or its recorded headers)."""
    for source in (
        getattr(getattr(exc, "response", None), "headers", None),
        getattr(exc, "litellm_response_headers", None),
    ):
        try:
            value = dict(source or {}).get("retry-after") or dict(source or {}).get("Retry-After")
        except (TypeError, ValueError):
            continue
        if value:
            return str(value)
    return None


proxy_handler_instance = MaxTokensClamp(clamp=True)
checks_only_instance = MaxTokensClamp(clamp=False)
