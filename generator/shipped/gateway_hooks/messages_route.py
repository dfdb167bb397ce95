"""``POST /v1/messages`` for the stack's own backends: Anthropic's request translated once, then LiteLLM's chat path.

LiteLLM 1.108.7 answers /v1/messages for a chat backend (a ``hosted_vllm/`` model) through a second entry point: its
router's generic call, ``litellm.anthropic_messages`` and its handler, which translates the request and calls
``litellm.acompletion`` inside it; a request is set up, copied, priced and logged twice on the way (make bench-pairs:
Claude Code's request took 1.5 ms longer on /v1/messages than the same request sent as chat, 2026-11-29, issue 62).

This route takes the request first (installed in front of LiteLLM's at config load, as count_tokens.py's). When every
deployment of the model is one of the stack's own backends and the request asks for nothing beyond the Messages API's
plain fields (ELIGIBLE_FIELDS; no compaction block), it translates the request with LiteLLM's own adapter
(``_prepare_completion_kwargs``, what LiteLLM's handler calls) and hands it to LiteLLM's chat processing, as
``/v1/chat/completions`` would get it: the same auth, hooks, limits, routing, fallbacks, logging and spend. The answer
goes back through LiteLLM's adapter (``translate_completion_output_params``), a stream through its Anthropic stream
wrapper and its Anthropic SSE generator (the stream hooks, tool_call_repairs.py's among them, and its error events),
with its keepalive pings; errors get LiteLLM's Anthropic error shape. Any other request (a hosted model, an alias of
none, context_management, MCP servers, safeguards, an unknown field...) is LiteLLM's own route's, unchanged.
GATEWAY_MESSAGES_ROUTE=litellm leaves every request to LiteLLM's (the bench's A/B).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from fastapi import Depends, HTTPException, Request, Response
from fastapi.routing import APIRoute

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # LiteLLM loads this file by path, not as a package: find the modules beside it
    sys.path.insert(0, HERE)
import gateway_backends as gb  # noqa: E402

PATH = "/v1/messages"
CHAT_PATH = "/v1/chat/completions"
NAME = "gateway_messages"
KEEP_ENV = "GATEWAY_MESSAGES_ROUTE"  # "litellm": every request to LiteLLM's own route
# the Messages API fields _prepare_completion_kwargs takes by name: a request with any other goes to LiteLLM's route
ELIGIBLE_FIELDS = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "system",
        "stream",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "tools",
        "tool_choice",
        "thinking",
        "metadata",
    }
)
PROVIDER = "hosted_vllm"  # the stack's own backends (renderers/litellm.py)
# what LiteLLM's chat route (proxy_server.chat_completion) copies from the key into the request's metadata
KEY_METADATA = (
    ("user_id", "user_api_key_user_id"),
    ("team_id", "user_api_key_team_id"),
    ("org_id", "user_api_key_org_id"),
    ("organization_alias", "user_api_key_org_alias"),
    ("agent_id", "agent_id"),
)


def _has_compaction_block(messages: list) -> bool:
    return any(
        isinstance(m, dict)
        and isinstance(m.get("content"), list)
        and any(isinstance(b, dict) and b.get("type") == "compaction" for b in m["content"])
        for m in messages
    )


def eligible(data: object) -> bool:
    """Whether the request is one for this route: plain Messages API fields, on a model all of whose deployments are
    the stack's own chat backends."""
    if not isinstance(data, dict) or not set(data) <= ELIGIBLE_FIELDS:
        return False
    model, messages = data.get("model"), data.get("messages")
    if not isinstance(model, str) or not isinstance(messages, list) or not isinstance(data.get("max_tokens"), int):
        return False
    if _has_compaction_block(messages):
        return False
    rt = gb.router()
    deps = gb.deployments(rt, model) if rt is not None else []
    return bool(deps) and all(
        not gb.hosted(d) and str(gb.get(gb.get(d, "litellm_params") or {}, "model") or "").startswith(f"{PROVIDER}/")
        for d in deps
    )


def as_chat(data: dict) -> tuple[dict, dict[str, str]]:
    """(the chat request, the tool names LiteLLM shortened -> their own): LiteLLM's translation, as its handler makes
    it for a hosted_vllm deployment, with the model's name kept for the router."""
    from litellm.llms.anthropic.pass_through.adapters.handler import (
        LiteLLMMessagesToCompletionTransformationHandler as Handler,
    )

    named = {k: v for k, v in data.items() if k != "model"}
    kwargs, tool_names = Handler._prepare_completion_kwargs(
        model=data["model"], extra_kwargs={"custom_llm_provider": PROVIDER}, **named
    )
    chat = dict(kwargs)
    chat.pop("custom_llm_provider", None)  # the router's deployment says it
    chat["model"] = data["model"]
    return chat, tool_names


def translation(data: object) -> tuple[dict, dict[str, str]] | None:
    """as_chat(data) for a request this route takes, else None: one it does not take (eligible), or one LiteLLM's
    adapter refuses (messages: [], ...), which LiteLLM's own route answers as it always has."""
    if not eligible(data):
        return None
    try:
        return as_chat(data)  # type: ignore[arg-type]  # eligible: a dict
    except Exception:  # noqa: BLE001  whatever the adapter raises, LiteLLM's route says
        return None


def chat_request(request: Request, chat: dict) -> Request:
    """The same connection and state, as a chat request: LiteLLM's chat processing reads the path (where its
    metadata goes) and the parsed body (scope["parsed_body"], where it looks before reading the body)."""
    scope = {**request.scope, "path": CHAT_PATH, "raw_path": CHAT_PATH.encode(), "parsed_body": (tuple(chat), chat)}
    return Request(scope, request.receive)


def anthropic_stream(model: str, tool_names: dict[str, str]):
    """LiteLLM's select_data_generator for the chat processing: its chat stream through LiteLLM's Anthropic stream
    wrapper and Anthropic SSE generator (what its own /v1/messages route does with the stream it gets), with pings.
    The events name the model that answered, renamed to `model` (the one asked) unless the request is marked to keep
    the answering one's name (fallbacks.name_the_answerer), as LiteLLM's route does."""
    import litellm
    from litellm.llms.anthropic.pass_through.adapters.handler import ANTHROPIC_ADAPTER
    from litellm.proxy.common_request_processing import ProxyBaseLLMRequestProcessing, should_return_raw_model_name
    from litellm.proxy.common_utils.sse_keepalive import wrap_sse_stream_with_keepalive_pings
    from litellm.proxy.proxy_server import proxy_logging_obj

    def select(response: Any, user_api_key_dict: Any, request_data: dict, request: Request | None = None):
        answered = getattr(response, "model", None)
        anthropic = ANTHROPIC_ADAPTER.translate_completion_output_params_streaming(
            response,
            model=answered if isinstance(answered, str) and answered else model,
            tool_name_mapping=tool_names,
            is_async=True,
            litellm_logging_obj=request_data.get("litellm_logging_obj"),
        )
        events = ProxyBaseLLMRequestProcessing.async_sse_data_generator(
            response=anthropic,
            user_api_key_dict=user_api_key_dict,
            request_data=request_data,
            proxy_logging_obj=proxy_logging_obj,
            request=request,
            restamp_model=None if should_return_raw_model_name(request_data) else model,
        )
        return wrap_sse_stream_with_keepalive_pings(
            stream=events, ping_interval_seconds=litellm.anthropic_sse_ping_interval_seconds
        )

    return select


async def answer(
    request: Request, fastapi_response: Response, user_api_key_dict: Any, chat: dict, tool_names: dict[str, str]
) -> Any:
    """The translated request (as_chat) through LiteLLM's chat processing, the answer or error in Anthropic's shape."""
    from litellm.llms.anthropic.pass_through.adapters.handler import ANTHROPIC_ADAPTER
    from litellm.proxy import proxy_server as ps
    from litellm.proxy._types import ProxyException
    from litellm.proxy.anthropic_endpoints.endpoints import _anthropic_error_json_response
    from litellm.proxy.common_request_processing import (
        ProxyBaseLLMRequestProcessing,
        log_llm_api_exception,
        proxy_exception_from_http_exception,
    )
    from litellm.proxy.common_utils.openai_error_payload import (
        error_status_code,
        openai_error_param,
        openai_error_type,
        with_litellm_call_id,
    )

    given = chat.get("metadata")
    metadata: dict = given if isinstance(given, dict) else {}
    chat["metadata"] = metadata  # as LiteLLM's chat route adds the key's owner
    for field, name in KEY_METADATA:
        if getattr(user_api_key_dict, field, None) is not None:
            metadata[name] = getattr(user_api_key_dict, field)
    processor = ProxyBaseLLMRequestProcessing(data=chat)
    try:
        result = await processor.base_process_llm_request(
            request=chat_request(request, chat),
            fastapi_response=fastapi_response,
            user_api_key_dict=user_api_key_dict,
            route_type="acompletion",
            proxy_logging_obj=ps.proxy_logging_obj,
            llm_router=ps.llm_router,
            general_settings=ps.general_settings,
            proxy_config=ps.proxy_config,
            select_data_generator=anthropic_stream(chat["model"], tool_names),
            model=None,
            user_model=ps.user_model,
            user_temperature=ps.user_temperature,
            user_request_timeout=ps.user_request_timeout,
            user_max_tokens=ps.user_max_tokens,
            user_api_base=ps.user_api_base,
            version=ps.version,
        )
        if isinstance(result, Response):  # the stream
            return result
        return ANTHROPIC_ADAPTER.translate_completion_output_params(result, tool_name_mapping=tool_names)  # type: ignore[arg-type]  # a ModelResponse: not a stream
    except Exception as e:  # noqa: BLE001  as LiteLLM's /v1/messages route answers any error (anthropic_endpoints)
        await ps.proxy_logging_obj.post_call_failure_hook(
            user_api_key_dict=user_api_key_dict, original_exception=e, request_data=processor.data
        )
        log_llm_api_exception(e, processor.litellm_call_id)
        if isinstance(e, ProxyException):
            return _anthropic_error_json_response(with_litellm_call_id(e, processor.litellm_call_id), request)
        headers = ProxyBaseLLMRequestProcessing.get_custom_headers(
            user_api_key_dict=user_api_key_dict,
            call_id=processor.litellm_call_id,
            model_id="",
            version=ps.version,
            response_cost=0,
            model_region=getattr(user_api_key_dict, "allowed_model_region", ""),
            request_data=chat,
            timeout=getattr(e, "timeout", None),
            litellm_logging_obj=None,
        )
        if isinstance(e, HTTPException):
            return _anthropic_error_json_response(proxy_exception_from_http_exception(e, headers), request)
        code = error_status_code(e, 500)
        return _anthropic_error_json_response(
            ProxyException(
                message=getattr(e, "message", f"{e}"),
                type=openai_error_type(e, code),
                param=openai_error_param(e),
                code=code,
                headers=headers,
            ),
            request,
        )


def install() -> None:
    """Put the route in front of LiteLLM's own (once per process)."""
    from litellm.proxy.anthropic_endpoints.endpoints import anthropic_response
    from litellm.proxy.auth.user_api_key_auth import user_api_key_auth
    from litellm.proxy.common_utils.http_parsing_utils import read_request_body
    from litellm.proxy.proxy_server import app

    routes = app.router.routes
    if os.environ.get(KEEP_ENV) == "litellm" or any(getattr(r, "name", None) == NAME for r in routes):
        return

    async def endpoint(
        request: Request,
        fastapi_response: Response,
        user_api_key_dict: Any = Depends(user_api_key_auth),  # noqa: B008  FastAPI's way, as LiteLLM's route has it
    ) -> Any:
        translated = translation(await read_request_body(request=request))
        if translated is None:
            return await anthropic_response(
                fastapi_response=fastapi_response, request=request, user_api_key_dict=user_api_key_dict
            )
        return await answer(request, fastapi_response, user_api_key_dict, *translated)

    routes.insert(0, APIRoute(PATH, endpoint, methods=["POST"], name=NAME, include_in_schema=False))
