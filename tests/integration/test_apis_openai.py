"""/v1/responses and /v1/completions through the gateway with the official OpenAI SDK, streamed and
not: tool calls arrive structured with their arguments intact (LiteLLM #20711), reasoning arrives as
reasoning, the output budget is clamped with the x-gateway-max-tokens-clamped header, the model's
gateway defaults apply, a prompt longer than the context and tools sent to a model without a tool
parser get one clear 400. (/v1/chat/completions: test_gateway_basics, test_tool_calls, test_reasoning,
and the shared 400 tests below.) Every number comes from the plan."""

from __future__ import annotations

import json

import openai
import pytest

from generator.compile.renderers.litellm import prompt_logprobs_served
from generator.demo.script import ANSWER_TEXT, REASONING_TEXT, TOOL_CALL, WEATHER_TOOL

from .helpers import ASK_WEATHER, clamp_note, text_of, too_long_text

QUESTION = ASK_WEATHER[0]["content"]
PREFILL_BUDGET = 8192  # tokens of prompt a test may make a backend actually read (CPU prefill)
RESPONSES_TOOL = {"type": "function", **WEATHER_TOOL["function"]}  # the Responses API's flat tool shape


def _scripted(gateway, model, kind: str) -> bool:
    return gateway.scripts.get(model.served_name) == kind


# --- /v1/responses: tool calls ---------------------------------------------------------------------


def _check_args(gateway, model, name: str, arguments: str) -> None:
    assert name == "get_weather"
    args = json.loads(arguments)  # valid JSON, not parser text
    assert isinstance(args, dict) and args.get("city")
    if _scripted(gateway, model, "tool-caller"):
        assert args == TOOL_CALL["arguments"]


def test_responses_tool_call(gateway, tool_model):
    reply = gateway.client().responses.create(model=tool_model.served_name, input=QUESTION, tools=[RESPONSES_TOOL])
    calls = [o for o in reply.output if o.type == "function_call"]
    assert calls, f"no function_call item; output was {reply.output!r}"
    assert calls[0].call_id
    _check_args(gateway, tool_model, calls[0].name, calls[0].arguments)
    assert "<tool_call>" not in (reply.output_text or "")


def test_responses_streamed_tool_call(gateway, tool_model):
    deltas, done, final = [], [], None
    with gateway.client().responses.stream(
        model=tool_model.served_name, input=QUESTION, tools=[RESPONSES_TOOL]
    ) as stream:
        for event in stream:
            if event.type == "response.function_call_arguments.delta":
                deltas.append(event.delta)
            elif event.type == "response.output_item.done" and event.item.type == "function_call":
                done.append(event.item)
        final = stream.get_final_response()
    assert done, "no function_call item in the stream"
    _check_args(gateway, tool_model, done[0].name, done[0].arguments)
    if deltas:  # when the arguments are streamed in pieces, the pieces must add up
        assert json.loads("".join(deltas)) == json.loads(done[0].arguments)
    calls = [o for o in final.output if o.type == "function_call"]
    assert calls and json.loads(calls[0].arguments) == json.loads(done[0].arguments)


def test_responses_tool_result_turn(gateway, tool_model):
    client = gateway.client()
    first = client.responses.create(model=tool_model.served_name, input=QUESTION, tools=[RESPONSES_TOOL])
    call = next(o for o in first.output if o.type == "function_call")
    items = [
        {"role": "user", "content": QUESTION},
        {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": json.dumps({"sky": "sunny"})},
    ]
    second = client.responses.create(model=tool_model.served_name, input=items, tools=[RESPONSES_TOOL])
    assert second.status == "completed" and second.output


# --- /v1/responses: reasoning ----------------------------------------------------------------------


def _reasoning_text(item) -> str:
    parts = [c.text for c in (getattr(item, "content", None) or []) if getattr(c, "text", None)]
    parts += [s.text for s in (getattr(item, "summary", None) or []) if getattr(s, "text", None)]
    return "".join(parts)


def test_responses_reasoning_is_separated(gateway, reasoning_model):
    reply = gateway.client().responses.create(model=reasoning_model.served_name, input=QUESTION)
    reasoning = "".join(_reasoning_text(o) for o in reply.output if o.type == "reasoning")
    assert reasoning, f"no reasoning item; output was {reply.output!r}"
    assert "<think>" not in reply.output_text and "</think>" not in reply.output_text
    if _scripted(gateway, reasoning_model, "reasoner"):
        assert reasoning.strip() == REASONING_TEXT and reply.output_text.strip() == ANSWER_TEXT


def test_responses_streamed_reasoning_is_separated(gateway, reasoning_model):
    reasoning, text = [], []
    with gateway.client().responses.stream(model=reasoning_model.served_name, input=QUESTION) as stream:
        for event in stream:
            if event.type in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
                reasoning.append(event.delta)
            elif event.type == "response.output_text.delta":
                text.append(event.delta)
    assert reasoning, "no reasoning deltas in the stream"
    assert "<think>" not in "".join(text)
    if _scripted(gateway, reasoning_model, "reasoner"):
        assert "".join(reasoning).strip() == REASONING_TEXT and "".join(text).strip() == ANSWER_TEXT


# --- the clamp -------------------------------------------------------------------------------------


def _check_clamp(model, note, asked: int, prompt_tokens: int) -> None:
    assert note, "a budget above the context must be clamped and say so in x-gateway-max-tokens-clamped"
    assert note == (asked, model.context - prompt_tokens), f"clamped {note}, prompt {prompt_tokens} tokens"


def test_responses_max_output_tokens_is_clamped(gateway, model):
    asked = model.context * 2
    raw = gateway.client().responses.with_raw_response.create(
        model=model.served_name, input="Say hello.", max_output_tokens=asked
    )
    reply = raw.parse()
    _check_clamp(model, clamp_note(raw.headers), asked, reply.usage.input_tokens)
    assert reply.max_output_tokens == model.context - reply.usage.input_tokens


def test_responses_max_output_tokens_is_clamped_when_streaming(gateway, model):
    asked = model.context * 2
    with gateway.client().responses.with_streaming_response.create(
        model=model.served_name, input="Say hello.", max_output_tokens=asked, stream=True
    ) as raw:
        note = clamp_note(raw.headers)
        final = [e for e in raw.parse() if e.type == "response.completed"]
    assert final, "the stream did not complete"
    _check_clamp(model, note, asked, final[0].response.usage.input_tokens)


def test_completions_max_tokens_is_clamped(gateway, model):
    asked = model.context * 2
    raw = gateway.client().completions.with_raw_response.create(
        model=model.served_name, prompt="Say hello.", max_tokens=asked
    )
    _check_clamp(model, clamp_note(raw.headers), asked, raw.parse().usage.prompt_tokens)


def test_completions_max_tokens_is_clamped_when_streaming(gateway, model):
    asked = model.context * 2
    with gateway.client().completions.with_streaming_response.create(
        model=model.served_name,
        prompt="Say hello.",
        max_tokens=asked,
        stream=True,
        stream_options={"include_usage": True},
    ) as raw:
        note = clamp_note(raw.headers)
        usage = [c.usage for c in raw.parse() if c.usage]
    assert usage, "no usage chunk"
    _check_clamp(model, note, asked, usage[-1].prompt_tokens)


def test_chat_default_max_tokens_is_what_gets_clamped(gateway, model):
    """No max_tokens from the client: the model's default applies, and is clamped when the prompt
    leaves less than it (the header names the default)."""
    leave = model.max_tokens // 2
    if model.context - leave > PREFILL_BUDGET:
        pytest.skip(
            f"needs a {model.context - leave}-token prompt: minutes of CPU prefill (the unit tests and "
            "test_responses_get_the_models_defaults cover the defaults)"
        )
    text = text_of(gateway, model, model.context - leave)
    raw = gateway.client().chat.completions.with_raw_response.create(
        model=model.served_name, messages=[{"role": "user", "content": text}]
    )
    reply = raw.parse()
    _check_clamp(model, clamp_note(raw.headers), model.max_tokens, reply.usage.prompt_tokens)


# --- defaults --------------------------------------------------------------------------------------


def test_responses_get_the_models_defaults(gateway, model):
    """The Responses API echoes the sampling settings vLLM used: the gateway's defaults."""
    reply = gateway.client().responses.create(model=model.served_name, input="Say hello.")
    assert reply.max_output_tokens == model.max_tokens
    for key in ("temperature", "top_p"):
        if key in model.litellm_params:
            assert getattr(reply, key) == pytest.approx(model.litellm_params[key]), key


def test_responses_client_values_beat_the_defaults(gateway, model):
    reply = gateway.client().responses.create(
        model=model.served_name, input="Say hello.", max_output_tokens=20, temperature=0.0
    )
    assert reply.max_output_tokens == 20 and reply.temperature == 0.0


# --- one clear 400 ---------------------------------------------------------------------------------


def _check_too_long(model, err) -> None:
    assert err.value.status_code == 400, err.value
    message = str(err.value)
    assert "prompt is " in message and f"{model.served_name} holds {model.context} tokens" in message, message
    assert "context_window_fallback" not in message and "docs.litellm.ai" not in message, message
    tokens = int(message.split("prompt is ", 1)[1].split()[0])
    assert tokens > model.context


CALLS = {
    "chat": lambda c, m, text, **kw: c.chat.completions.create(
        model=m, messages=[{"role": "user", "content": text}], **kw
    ),
    "completions": lambda c, m, text, **kw: c.completions.create(model=m, prompt=text, **kw),
    "responses": lambda c, m, text, **kw: c.responses.create(model=m, input=text, **kw),
}


@pytest.mark.parametrize("api", CALLS)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_prompt_longer_than_the_context_is_one_clear_400(gateway, model, api, stream):
    text = too_long_text(gateway, model)
    with pytest.raises(openai.BadRequestError) as err:
        result = CALLS[api](gateway.client(), model.served_name, text, stream=stream)
        if stream:
            list(result)
    _check_too_long(model, err)


def test_the_backends_own_context_error_carries_no_litellm_advice(gateway, model):
    """When the gateway cannot count (here: a batch of two prompts), vLLM refuses the long one itself;
    its message reaches the client without LiteLLM's "Set 'context_window_fallback'" advice."""
    with pytest.raises(openai.BadRequestError) as err:
        gateway.client().completions.create(
            model=model.served_name, prompt=[too_long_text(gateway, model), "hi"], max_tokens=16
        )
    message = str(err.value)
    assert "context" in message.lower(), message
    assert "context_window_fallback" not in message and "docs.litellm.ai" not in message, message


# --- logprobs: served, and the backend still serves afterwards ---------------------------------------
# vLLM 0.32's CPU sampler builds its rank kernel with torch.compile (inductor, C++) on the first request
# that asks for logprobs (vllm/v1/sample/ops/logprobs.py). In a backend image without a C++ compiler
# that one request killed the engine (EngineDeadError, then connection refused): any key holder could
# stop a model. Found by the fuzz run against the compose stack; docs/limits.md.
LOGPROBS = {
    "completions-logprobs-0": lambda c, m: c.completions.create(model=m, prompt="Say hello.", max_tokens=2, logprobs=0),
    "completions-echo-prompt-logprobs": lambda c, m: c.completions.create(
        model=m, prompt="Say hello.", max_tokens=2, logprobs=2, echo=True
    ),
    "chat-top-logprobs": lambda c, m: c.chat.completions.create(
        model=m, messages=[{"role": "user", "content": "Say hello."}], max_tokens=2, logprobs=True, top_logprobs=2
    ),
    "chat-streamed-logprobs": lambda c, m: list(
        c.chat.completions.create(
            model=m, messages=[{"role": "user", "content": "Say hello."}], max_tokens=2, logprobs=True, stream=True
        )
    ),
}


def _has_logprobs(reply) -> bool:
    if isinstance(reply, list):  # streamed chunks
        return any(ch.choices and ch.choices[0].logprobs and ch.choices[0].logprobs.content for ch in reply)
    choice = reply.choices[0]
    return bool(
        choice.logprobs
        and (getattr(choice.logprobs, "content", None) or getattr(choice.logprobs, "token_logprobs", None))
    )


@pytest.mark.parametrize("ask", LOGPROBS)
def test_logprobs_are_served_and_the_backend_serves_on(gateway, model, ask):
    client = gateway.client()
    if ask == "completions-echo-prompt-logprobs" and not prompt_logprobs_served(model):  # LoRA on CPU: a clear 400
        with pytest.raises(openai.BadRequestError) as refused:
            LOGPROBS[ask](client, model.served_name)
        assert "asks for the prompt's logprobs" in str(refused.value) and refused.value.param == "logprobs"
    else:
        reply = LOGPROBS[ask](client, model.served_name)
        assert _has_logprobs(reply), reply
    after = client.chat.completions.create(
        model=model.served_name, messages=[{"role": "user", "content": "Hi."}], max_tokens=2
    )
    assert after.choices[0].message is not None


# --- the OpenAI Agents SDK: an agent's tool loop on the gateway's stored responses ------------------


def test_the_openai_agents_sdk_runs_its_tool_loop_on_stored_responses(gateway):
    """The OpenAI Agents SDK (openai-agents, pinned in pyproject's dev extra), as an application written against OpenAI
    runs it: with `auto_previous_response_id` it sends each turn as the new items only (the tool's output) with the
    previous response's id, and the gateway's store (docs/apis.md) fills in the rest, the function call included. A
    second run continues the first by `previous_response_id`."""
    import agents
    from openai import AsyncOpenAI

    agents.set_tracing_disabled(True)  # traces would go to OpenAI's servers
    scripted = {kind: name for name, kind in gateway.scripts.items()}  # the demo's scripted models, what they answer
    if not {"tool-caller", "reasoner"} <= scripted.keys():
        pytest.skip("needs the demo's scripted tool-caller and reasoner (their answers are known)")

    def model(served_name: str) -> agents.OpenAIResponsesModel:
        client = AsyncOpenAI(base_url=gateway.url, api_key=gateway.key, max_retries=0, timeout=120)
        return agents.OpenAIResponsesModel(model=served_name, openai_client=client)

    asked: list[str] = []

    @agents.function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        asked.append(city)
        return f"Sunny in {city}."

    caller = agents.Agent(
        name="weather", instructions="Use the tool.", tools=[get_weather], model=model(scripted["tool-caller"])
    )
    # the scripted tool-caller calls the tool at every turn: two turns, then the SDK stops the loop
    with pytest.raises(agents.MaxTurnsExceeded) as stopped:
        agents.Runner.run_sync(caller, QUESTION, max_turns=2, auto_previous_response_id=True)
    assert len(asked) == 2 and all(asked), asked  # the second turn's call came after the first's output was read
    second = stopped.value.run_data.raw_responses[-1].response_id
    kinds = [i.type for i in gateway.client().responses.input_items.list(second, order="asc", limit=100).data]
    assert kinds == ["message", "function_call", "function_call_output"], kinds  # the store's, then the new item

    thinker = agents.Agent(name="thinker", instructions="Answer.", model=model(scripted["reasoner"]))
    first = agents.Runner.run_sync(thinker, "hi")
    again = agents.Runner.run_sync(thinker, "and then?", previous_response_id=first.last_response_id)
    assert ANSWER_TEXT in again.final_output
    items = gateway.client().responses.input_items.list(again.last_response_id, order="asc", limit=100).data
    assert [i.type for i in items][:3] == ["message", "reasoning", "message"], items  # turn one, reasoning included
