# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make regenerate`.
"""One HTTP client per gateway worker for the OpenAI-SDK paths of LiteLLM that would otherwise build one per request.

LiteLLM 1.108.7's text-completion handler (/v1/completions) builds a new httpx client for every request: streamed,
`OpenAIAsyncHTTPClient()` (its factory is `lambda: litellm.aclient_session`, None by default); not streamed,
`BaseOpenAILLM.get_async_http_client()`, which is not cached. Each new client loads the CA bundle into a new SSL
context (`ssl.create_default_context`: 24 % of a worker's event-loop CPU under the fuzz test's completions, for
backends that speak plain HTTP) and opens a new connection to the backend. `litellm.aclient_session` is LiteLLM's
own setting for the client those paths use: set once per worker to the client LiteLLM itself builds (its SSL, proxy
and transport settings), they share it and its kept-alive connections. LiteLLM never closes a client given that way
(`BaseOpenAILLM.owns_wrapped_http_client`). Chat, responses and messages go through LiteLLM's cached clients already.
"""

from __future__ import annotations

from gateway_serve import served  # beside this file (standard library only)


def install() -> bool:
    """In a gateway worker (a unit test's process is left alone: one client must not outlive its event loop), set
    `litellm.aclient_session` unless something set it already; True when set here."""
    if not served():
        return False
    try:
        import litellm
        from litellm.llms.openai.common_utils import BaseOpenAILLM
    except ImportError:  # not inside the proxy
        return False
    if litellm.aclient_session is not None:
        return False
    litellm.aclient_session = BaseOpenAILLM.get_async_http_client()
    return litellm.aclient_session is not None
