# GENERATED from models.yml (sha256 2bd369545a7aa57a) by `python -m generator`;
# vLLM flags checked against vLLM 0.32.0. Do not edit: change models.yml, run `make regenerate`.
"""LiteLLM per-request costs the gateway takes off in each worker (gateway_guard.py installs them at load). Each one
was measured (bench/README.md, "Profile"; docs/benchmarks.md), each answers exactly what LiteLLM answers, and each
has a switch that leaves LiteLLM as it is (a `make bench-tune` variant pairs it):

- skip_failing_otel_seed (GATEWAY_LITELLM_OTEL_SEED=keep): a failing import LiteLLM retried on every request;
- cache_type_hints (GATEWAY_LITELLM_TYPE_HINTS=keep): TypedDict hints evaluated on every /v1/responses request;
- set_up_in_the_loop (GATEWAY_LITELLM_SETUP_THREAD=keep): the hop to a pool thread and back for the set-up of every
  request to this stack's backends (two on /v1/messages);
- orjson_for_litellms_json (GATEWAY_LITELLM_JSON=keep): the backend request's body written by the standard json
  module (a coding agent's 76 KB body each request; /v1/responses' through httpx's `json=`), and the Anthropic tools
  copied through its text;
- skip_needless_cache_control_walks (GATEWAY_LITELLM_CACHE_CONTROL=keep): the walk over every message, input item
  and tool that removes Anthropic's `cache_control` keys before a chat or Responses request goes to a backend, on a
  body that has none;
- skip_unread_served_texts (GATEWAY_LITELLM_SERVED_TEXTS=keep): after every stream, the texts the client was served,
  read back from the stream for a logged response nothing of the generated gateway reads (a streamed /v1/messages:
  its whole Anthropic stream parsed again, on a pool thread).

They answer what LiteLLM answers; the last one changes what LiteLLM would log, and nothing here logs it.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import functools
import importlib
import inspect
import json
import os

try:
    import orjson  # LiteLLM's own dependency
except ImportError:  # not beside LiteLLM: json writes as before
    orjson = None  # type: ignore[assignment]

# the provider prefix of this stack's own backends in the router's litellm_params (renderers/litellm.py)
LOCAL_PROVIDER = "hosted_vllm"


def litellm_module(name: str):
    """LiteLLM's module `name`; None in another LiteLLM (or without one), which keeps that cost."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def skip_failing_otel_seed() -> bool:
    """Take a LiteLLM 1.103.7 cost off every request (bench/README.md, "Profile"): after auth, LiteLLM
    calls `_seed_request_destinations`, which starts with `from litellm.integrations.otel.logger import`.
    That import fails without opentelemetry-sdk (and the opentelemetry-api fastapi needs lacks `_events`);
    the function swallows the error, and as a failed import is not cached, Python finds and unmarshals
    the module again on every request: 5-9 % of a worker's CPU. When the import fails here, at load, the
    function cannot do anything on any request, so it is replaced by a no-op; with OTel importable, or
    GATEWAY_LITELLM_OTEL_SEED=keep (the bench's A/B), it is left alone. True when replaced."""
    if os.environ.get("GATEWAY_LITELLM_OTEL_SEED") == "keep":
        return False
    try:
        from litellm.proxy.auth import user_api_key_auth as auth
    except ImportError:  # not inside the proxy
        return False
    if not hasattr(auth, "_seed_request_destinations"):
        return False  # another LiteLLM: nothing to do
    try:
        import litellm.integrations.otel.logger  # noqa: F401  the import LiteLLM retries per request

        return False
    except Exception:  # noqa: BLE001  any failure is the one LiteLLM would swallow on every request
        auth._seed_request_destinations = lambda *args, **kwargs: None
        return True


# LiteLLM 1.108.7 modules that evaluate a TypedDict's type hints on every /v1/responses request (its optional
# parameters, the params the provider takes): get_type_hints, 3.5 % of a Codex request's CPU (make bench-profile)
TYPE_HINT_MODULES = ("litellm.responses.utils", "litellm.llms.openai.responses.transformation")


def cache_type_hints() -> list[str]:
    """Take another LiteLLM cost off every /v1/responses request: the modules of TYPE_HINT_MODULES call
    `typing.get_type_hints(SomeTypedDict)` per request, which evaluates every annotation of the class again (the
    same answer each time: a class's annotations do not change). Their `get_type_hints` becomes one that remembers
    the answer per class (a copy each call, so no caller can change the remembered one); any other call goes to
    typing's. GATEWAY_LITELLM_TYPE_HINTS=keep (the bench's A/B) leaves them alone. Returns the modules changed."""
    if os.environ.get("GATEWAY_LITELLM_TYPE_HINTS") == "keep":
        return []
    import typing

    remembered = functools.lru_cache(maxsize=64)(typing.get_type_hints)

    def get_type_hints(obj, *args, **kwargs):
        if args or kwargs or not isinstance(obj, type):
            return typing.get_type_hints(obj, *args, **kwargs)
        return dict(remembered(obj))

    changed = []
    for name in TYPE_HINT_MODULES:
        module = litellm_module(name)
        if getattr(module, "get_type_hints", None) is typing.get_type_hints:
            module.get_type_hints = get_type_hints  # the module's own name for it
            changed.append(name)
    module = litellm_module(TYPE_ADAPTER_MODULE)
    original = getattr(module, "TypeAdapter", None)
    if original is not None and not isinstance(original, RememberedTypeAdapters):
        module.TypeAdapter = RememberedTypeAdapters(original)
        changed.append(TYPE_ADAPTER_MODULE)
    return changed


# LiteLLM 1.108.7's module that builds a pydantic TypeAdapter(dict[str, object]) on every /v1/responses request (its
# mapped optional parameters: 1 % of a Codex request's CPU, make bench-profile)
TYPE_ADAPTER_MODULE = "litellm.responses.utils"


class RememberedTypeAdapters:
    """pydantic's `TypeAdapter` as a module sees it, with `TypeAdapter(some_type)` of one argument made once per type
    (building one compiles the type's validator: the same validator each time). An adapter holds no state of a call,
    so one serves every request. Any other call, or an unhashable type, makes a new one as before."""

    def __init__(self, original):
        self.original = original
        self.made: dict = {}

    def __call__(self, kind, *args, **kwargs):
        if args or kwargs:
            return self.original(kind, *args, **kwargs)
        try:
            return self.made[kind]
        except KeyError:
            adapter = self.made[kind] = self.original(kind)
            return adapter
        except TypeError:  # unhashable
            return self.original(kind)

    def __getattr__(self, name: str):  # TypeAdapter's class attributes, for a caller that reads one
        return getattr(self.original, name)


def set_up_functions() -> set:
    """LiteLLM 1.108.7's request set-ups that its async entry points run on the loop's default executor
    (`loop.run_in_executor(None, partial(context.run, partial(f, ...)))`): chat's `completion` (acompletion, which
    /v1/messages calls too), `responses` (aresponses) and the Anthropic messages handler (anthropic_messages). With
    an async call they build the backend request and return a coroutine: no I/O of their own."""
    found = (
        getattr(litellm_module(module), name, None)
        for module, name in (
            ("litellm.main", "completion"),
            ("litellm.responses.main", "responses"),
            ("litellm.llms.anthropic.pass_through.messages.handler", "anthropic_messages_handler"),
        )
    )
    return {function for function in found if function is not None}  # another LiteLLM's missing one keeps its hop


class SetUpInTheLoop(concurrent.futures.ThreadPoolExecutor):
    """The event loop's default executor in a gateway worker. A request's set-up (set_up_functions) for one of this
    stack's backends (a `hosted_vllm/` model) runs at once, in the context LiteLLM copied for it, instead of on a
    pool thread the loop then waits for: the hop costs two thread switches and the GIL handed over and back, per
    request (5 % of a /v1/messages request's CPU, which makes two hops; 2 % of chat's). Everything else goes to
    the pool as before: a hosted provider's set-up (which may fetch a token over the network), rerank's and the
    other entry points' (some call their backend synchronously there), and any other job sent to the default
    executor (asyncio.to_thread, getaddrinfo). A ThreadPoolExecutor, as asyncio wants its default executor to be."""

    def __init__(self, functions: set):
        super().__init__(thread_name_prefix="asyncio")  # the pool asyncio would have made
        self.functions = functions

    def inline(self, fn) -> bool:
        if not (isinstance(fn, functools.partial) and fn.args and not fn.keywords):
            return False
        if not isinstance(getattr(fn.func, "__self__", None), contextvars.Context):
            return False
        setup = fn.args[0]
        if not (isinstance(setup, functools.partial) and setup.func in self.functions and len(fn.args) == 1):
            return False
        model, provider = setup.keywords.get("model"), setup.keywords.get("custom_llm_provider")
        return provider == LOCAL_PROVIDER or (
            provider is None and isinstance(model, str) and model.startswith(f"{LOCAL_PROVIDER}/")
        )

    def submit(self, fn, /, *args, **kwargs):
        if args or kwargs or not self.inline(fn):
            return super().submit(fn, *args, **kwargs)
        future: concurrent.futures.Future = concurrent.futures.Future()
        try:
            future.set_result(fn())
        except BaseException as e:  # noqa: BLE001  as a pool thread hands any exception to the awaiting coroutine
            future.set_exception(e)
        return future


def set_up_in_the_loop(loop) -> SetUpInTheLoop | None:
    """Make `loop`'s default executor a SetUpInTheLoop; None when GATEWAY_LITELLM_SETUP_THREAD=keep (the bench's
    A/B), when LiteLLM has none of the set-ups, or when the loop has a default executor already (asyncio makes one at
    its first use: a worker's loop gets this one at config load, before any request)."""
    if os.environ.get("GATEWAY_LITELLM_SETUP_THREAD") == "keep" or getattr(loop, "_default_executor", None):
        return None
    if not (functions := set_up_functions()):
        return None
    executor = SetUpInTheLoop(functions)
    loop.set_default_executor(executor)
    return executor


class WireJson:
    """The `json` module as LiteLLM's HTTP handler sees it (its `json.dumps(data)` writes each backend request's body),
    with `dumps` of one argument written by orjson (LiteLLM's own dependency; 5-10 times as fast: 76 KB of Claude
    Code's tools and system prompt, 0.25 ms a request in json's C encoder). The same JSON value: orjson writes no
    spaces after separators and UTF-8 where json escapes non-ASCII; what orjson refuses (an integer over 64 bits,
    a lone surrogate, a key that is not a string, an object of another type) goes to json as before. A non-finite
    float, which json writes as the non-JSON NaN and orjson as null, cannot come from a request: the guard's parser
    refuses NaN (request_guard.parse)."""

    def __getattr__(self, name: str):
        return getattr(json, name)

    @staticmethod
    def dumps(obj, *args, **kwargs) -> str:
        if args or kwargs or orjson is None:
            return json.dumps(obj, *args, **kwargs)
        try:
            return orjson.dumps(obj).decode()
        except TypeError:  # orjson's JSONEncodeError is a TypeError
            return json.dumps(obj)


class NotPlainJson(Exception):
    """A value json's round trip would change or refuse (a tuple, a subclass, a key that is not a string, an object)."""


def plain_json_copy(value):
    """A copy of a tree of dicts (string keys), lists, strings, numbers, booleans and None: new containers, the same
    leaves (immutable), which is what json.loads(json.dumps(value)) gives for such a tree (a float's repr reads back
    as the same float, NaN included). NotPlainJson for anything else."""
    kind = type(value)
    if kind is dict:
        copy = {}
        for key, item in value.items():
            if type(key) is not str:
                raise NotPlainJson
            copy[key] = plain_json_copy(item)
        return copy
    if kind is list:
        return [plain_json_copy(item) for item in value]
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    raise NotPlainJson


def copy_without_json(original):
    """LiteLLM's `json_copy_or_original` (a JSON round trip that copies a tool before it is translated; 18 per Claude
    Code request) as plain_json_copy: the same copy without writing and reading the text (0.036 ms for the bench's
    18 tools against json's 0.236 ms); `original`'s own answer for a value that is not plain JSON."""

    def json_copy_or_original(value):
        try:
            return plain_json_copy(value)
        except (NotPlainJson, RecursionError):
            return original(value)

    json_copy_or_original.original = original  # type: ignore[attr-defined]
    return json_copy_or_original


# LiteLLM 1.108.7's module that writes each backend request's body with json.dumps, and the one that copies each
# Anthropic tool through json (bench/README.md, "Profile": 5 % of a /v1/messages request between them)
WIRE_JSON_MODULE = "litellm.llms.custom_httpx.llm_http_handler"
TOOL_COPY_MODULE = "litellm.llms.anthropic.pass_through.adapters.transformation"


def orjson_for_litellms_json() -> list[str]:
    """Give WIRE_JSON_MODULE a WireJson for its `json`, TOOL_COPY_MODULE a copy_without_json for its
    `json_copy_or_original` and HTTPX_CONTENT_MODULE an orjson_encode_json for its `encode_json`;
    GATEWAY_LITELLM_JSON=keep (the bench's A/B) leaves all three. Returns the modules changed."""
    if os.environ.get("GATEWAY_LITELLM_JSON") == "keep":
        return []
    changed = []
    if getattr(wire := litellm_module(WIRE_JSON_MODULE), "json", None) is json:
        wire.json = WireJson()  # the module's own name for it
        changed.append(WIRE_JSON_MODULE)
    original = getattr(tools := litellm_module(TOOL_COPY_MODULE), "json_copy_or_original", None)
    if callable(original) and not hasattr(original, "original"):
        tools.json_copy_or_original = copy_without_json(original)
        changed.append(TOOL_COPY_MODULE)
    encode = getattr(content := litellm_module(HTTPX_CONTENT_MODULE), "encode_json", None)
    if callable(encode) and not hasattr(encode, "original") and orjson is not None:
        content.encode_json = orjson_encode_json(encode)
        changed.append(HTTPX_CONTENT_MODULE)
    return changed


# httpx's module whose encode_json writes a request's `json=` body with the standard json module: LiteLLM's
# /v1/responses handler posts its body that way (Codex's 39 KB: 3 % of the request's CPU, make bench-profile)
HTTPX_CONTENT_MODULE = "httpx._content"


def orjson_encode_json(original):
    """httpx's `encode_json(json)` with the body written by orjson: the same JSON value in the form httpx writes
    (compact separators, UTF-8, no ASCII escapes; a float may be spelt otherwise, 1e16 for 1e+16), in a fifth of the
    time, with the same headers. What orjson refuses (an integer over 64 bits, a lone surrogate, a key that is not a
    string, an object of another type) goes to httpx's own, which writes or refuses it as before. One difference: a
    NaN or infinity, which httpx refuses (allow_nan=False), orjson writes as null; none comes from a request (the
    guard's parser refuses them) and LiteLLM adds none."""
    from httpx._content import ByteStream

    def encode_json(json_value):
        try:
            body = orjson.dumps(json_value)
        except TypeError:  # orjson's JSONEncodeError is a TypeError
            return original(json_value)
        return {"Content-Length": str(len(body)), "Content-Type": "application/json"}, ByteStream(body)

    encode_json.original = original  # type: ignore[attr-defined]
    return encode_json


# LiteLLM 1.108.7's walks that remove Anthropic's `cache_control` keys from every message, Responses input item and
# tool before the request goes to an OpenAI-style backend (Codex's 10 tools: 1.5 % of a /v1/responses request)
CACHE_CONTROL_WALKS = (
    (
        "litellm.llms.openai.responses.transformation",
        "OpenAIResponsesAPIConfig",
        "remove_cache_control_flag_from_input_and_tools",
    ),
    (
        "litellm.llms.openai.chat.gpt_transformation",
        "OpenAIGPTConfig",
        "remove_cache_control_flag_from_messages_and_tools",
    ),
)
CACHE_CONTROL_KEY = b'"cache_control"'


def mentions_cache_control(*values) -> bool:
    """Whether a key named cache_control may be anywhere in `values`: orjson writes every key as its own characters
    between quotes (it escapes only quotes, backslashes and control characters), so a value without that text has
    no such key at any depth. True (the walk decides) for anything orjson cannot write."""
    try:
        return CACHE_CONTROL_KEY in orjson.dumps(values)
    except TypeError:
        return True


def skip_walk_without_cache_control(walk):
    """The walk `walk(self, model, items, tools=None)` (LiteLLM calls it by position and by keyword, with its own
    parameter names), run only when a cache_control key may be in its items or tools: it removes that key and nothing
    else, so on the rest it changes nothing and returns (items, tools) as it was given them."""
    names = list(inspect.signature(walk).parameters)[1:4]  # model, then the items' and the tools' names

    @functools.wraps(walk)
    def walk_when_needed(self, *args, **kwargs):
        given = dict(zip(names, args)) | kwargs
        items, tools = given.get(names[1]), given.get(names[2])
        if len(given) != len(args) + len(kwargs) or mentions_cache_control(items, tools):
            return walk(self, *args, **kwargs)  # (an argument given twice: the walk's own TypeError)
        return items, tools

    walk_when_needed.original = walk  # type: ignore[attr-defined]
    return walk_when_needed


def skip_needless_cache_control_walks() -> list[str]:
    """Wrap each walk of CACHE_CONTROL_WALKS in skip_walk_without_cache_control; GATEWAY_LITELLM_CACHE_CONTROL=keep
    (the bench's A/B) leaves them. Returns the classes changed."""
    if os.environ.get("GATEWAY_LITELLM_CACHE_CONTROL") == "keep" or orjson is None:
        return []
    changed = []
    for module_name, class_name, method in CACHE_CONTROL_WALKS:
        cls = getattr(litellm_module(module_name), class_name, None)
        walk = cls.__dict__.get(method) if cls is not None else None
        if callable(walk) and not hasattr(walk, "original"):
            setattr(cls, method, skip_walk_without_cache_control(walk))
            changed.append(f"{module_name}.{class_name}")
    return changed


# LiteLLM 1.108.7's class whose static `_record_served_stream_output` runs when a stream ends (proxy/utils.py)
SERVED_TEXTS_CLASS = ("litellm.proxy.utils", "ProxyLogging", "_record_served_stream_output")


def skip_unread_served_texts() -> bool:
    """LiteLLM 1.108.7 ends every stream with `ProxyLogging._record_served_stream_output`: on a pool thread, it reads
    the texts the client was served back from the chunks it sent, so a logging integration that logs the response
    shows those texts (`overlay_served_output_texts`: what a guardrail or a stream hook left, not the backend's).
    For a streamed /v1/messages that is the whole Anthropic stream assembled again (every event parsed into chat
    chunks and built into a response): 8 % of such a request's CPU with a 10-event answer (make bench-profile), and
    more the longer the answer. Nothing the generator configures reads the logged response: its callbacks (the
    clamp, people's usage, tool-call repairs, backend health, replica routing, LiteLLM's prometheus) read counts,
    tokens and timings, and it configures no guardrail and no logging integration (tests/unit: the rendered config's
    callbacks). So the recording becomes a no-op; the answer is unchanged. GATEWAY_LITELLM_SERVED_TEXTS=keep (the
    bench's A/B, or an edited config that logs responses) leaves it. True when replaced."""
    if os.environ.get("GATEWAY_LITELLM_SERVED_TEXTS") == "keep":
        return False
    module_name, class_name, method = SERVED_TEXTS_CLASS
    cls = getattr(litellm_module(module_name), class_name, None)
    record = cls.__dict__.get(method) if cls is not None else None
    if not isinstance(record, staticmethod) or hasattr(record.__func__, "original"):
        return False  # another LiteLLM, or replaced already

    async def record_nothing(request_data, served_chunks) -> None:
        return None

    record_nothing.original = record.__func__  # type: ignore[attr-defined]
    setattr(cls, method, staticmethod(record_nothing))
    return True


def install() -> None:
    """Every cut this LiteLLM and this environment allow (at config load, in the worker's running event loop)."""
    import asyncio

    skip_failing_otel_seed()
    cache_type_hints()
    orjson_for_litellms_json()
    skip_needless_cache_control_walks()
    skip_unread_served_texts()
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # imported outside a worker (a unit test, a script): no loop to give it to
        return
    set_up_in_the_loop(loop)
