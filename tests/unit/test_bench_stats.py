"""The benchmark's arithmetic and its mock's wire format (no gateway, no timing assertions)."""

import json
import math

import pytest

from bench.mock import completion_body, nginx_conf, stream_body
from bench.stats import max_rate, median_point, percentile, point_stats, summary_line
from bench.tune import merge


def test_percentile_is_nearest_rank():
    values = list(range(1, 101))
    assert percentile(values, 50) == 50
    assert percentile(values, 99) == 99
    assert percentile(values, 100) == 100
    assert percentile([7.0], 99) == 7.0
    assert math.isnan(percentile([], 50))


def test_point_stats_counts_errors_and_rate():
    p = point_stats(100, [0.001] * 190, errors=10, window_s=2.0)
    assert (p.sent, p.ok, p.errors) == (200, 190, 10)
    assert p.achieved == pytest.approx(95.0)
    assert p.p50_ms == pytest.approx(1.0)
    assert p.error_rate == pytest.approx(0.05)
    assert p.saturated  # 5% errors


def test_saturated_when_the_arm_falls_behind_the_offered_rate():
    assert not point_stats(100, [0.001] * 200, 0, 2.0).saturated
    assert point_stats(100, [0.001] * 200, 0, 2.5).saturated  # 80 req/s of 100 offered
    assert not point_stats(0, [0.001] * 10, 0, 1.0).saturated  # sequential is never "saturated"


def test_median_point_is_fieldwise():
    reps = [point_stats(50, [x / 1000] * 100, 0, 2.0) for x in (1, 3, 2)]
    m = median_point(reps)
    assert m.p50_ms == pytest.approx(2.0)
    assert m.offered == 50


def test_max_rate_ignores_failing_points_and_sequential():
    good = point_stats(100, [0.001] * 200, 0, 2.0)
    failing = point_stats(400, [0.001] * 600, 200, 2.0)  # 25% errors
    sequential = point_stats(0, [0.001] * 5000, 0, 1.0)
    assert max_rate([good, failing, sequential]) == pytest.approx(100.0)
    assert max_rate([]) == 0.0


def test_summary_line_format():
    assert summary_line(1.234, 8.5, 0.61, 0.3) == (
        "added p50 1.23 ms (default 8.50 ms), max rate ratio gateway/direct 0.610 (default 0.300)"
    )


def test_merge_patches_nested_settings():
    base = {"general_settings": {"master_key": "k"}, "model_list": [1]}
    out = merge(base, {"general_settings": {"disable_spend_logs": True}, "litellm_settings": {"x": 1}})
    assert out == {
        "general_settings": {"master_key": "k", "disable_spend_logs": True},
        "model_list": [1],
        "litellm_settings": {"x": 1},
    }
    assert base == {"general_settings": {"master_key": "k"}, "model_list": [1]}


def test_mock_bodies_are_what_an_openai_client_parses():
    body = json.loads(completion_body("mock"))
    assert body["choices"][0]["message"]["content"]
    events = [e for e in stream_body("mock").split("\n\n") if e]
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-1]]
    assert (
        "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == body["choices"][0]["message"]["content"]
    )
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_nginx_conf_quotes_bodies(tmp_path):
    conf = nginx_conf(tmp_path, 18301, 18302)
    assert "listen 127.0.0.1:18301" in conf and "listen 127.0.0.1:18302" in conf
    assert "access_log off" in conf
    assert "'" + completion_body("mock") + "'" in conf  # no quote inside the JSON to escape


def test_workers_for_a_backend_rate_leaves_30_percent_headroom():
    from bench.stats import workers_for

    assert workers_for(600, 12.6) == 11  # 600 x 12.6 ms = 7.56 cores busy / 0.7
    assert workers_for(100, 5.0) == 1 and workers_for(0, 5.0) == 1
    assert workers_for(140, 5.0) == 1 and workers_for(141, 5.0) == 2  # 0.7 of one core = 140 req/s at 5 ms


def test_each_agents_request_as_chat_carries_the_same_prompt_tools_and_message():
    """bench/apis.py as_chat: the *-as-chat scenarios send Claude Code's and Codex's requests in chat's shape, the same
    system prompt, tools (name, description, schema) and user message, so the API's own cost is what differs."""
    from bench.apis import request_body
    from bench.run import SCENARIOS, TWINS

    # each API, whole and streamed, has its twin of the same kind
    assert TWINS == {
        "messages": "messages-as-chat",
        "messages-stream": "messages-as-chat-stream",
        "responses": "responses-as-chat",
        "responses-stream": "responses-as-chat-stream",
    }
    by_name = {s.name: s for s in SCENARIOS}
    for name, twin_name in TWINS.items():
        twin, api = by_name[twin_name], by_name[name].api
        own = json.loads(request_body(by_name[name]))
        chat = json.loads(request_body(twin))
        assert chat["stream"] is own["stream"] is twin.stream is by_name[name].stream
        assert twin.path == "/v1/chat/completions" and not twin.chat  # not one of chat's sweep scenarios
        assert [m["role"] for m in chat["messages"]] == ["system", "user"] and chat["model"] == own["model"]
        system, user = (m["content"] for m in chat["messages"])
        assert system == own.get("system", own.get("instructions"))
        said = own["messages"][0]["content"] if api == "messages" else own["input"][0]["content"][0]["text"]
        assert user == said
        schema = "input_schema" if api == "messages" else "parameters"
        assert [t["function"] for t in chat["tools"]] == [
            {"name": t["name"], "description": t["description"], "parameters": t[schema]} for t in own["tools"]
        ]
        assert all(t["type"] == "function" for t in chat["tools"])


def test_like_for_like_is_the_median_over_repeats_of_each_apis_p50_over_its_twin_and_short_chat():
    from bench.run import like_for_like, paired_line

    reps = [
        {"messages": 14.0, "messages-as-chat": 13.0, "small": 12.0},
        {"messages": 11.0, "messages-as-chat": 10.5, "small": 9.0},
        {"messages": 20.0, "messages-as-chat": 16.0, "small": 15.0},
    ]
    streamed = [{"messages-stream": 9.0, "messages-as-chat-stream": 8.5, "stream": 7.0, "small": 1.0}]
    got = like_for_like(
        {
            "messages": {"generated": reps, "default": reps[:1]},
            "messages-stream": {"generated": streamed, "default": streamed},
        }
    )
    assert got == {
        "messages": {
            "generated": {"over_chat": 1.0, "over_small": 2.0},  # medians of (1, 0.5, 4) and (2, 2, 5)
            "default": {"over_chat": 1.0, "over_small": 2.0},
        },
        # a streamed API against its streamed twin and the short stream (not the whole small request)
        "messages-stream": {d: {"over_chat": 0.5, "over_small": 2.0} for d in ("generated", "default")},
    }
    assert paired_line(got).endswith(
        "generated (default): messages +1.00/+2.00 (+1.00/+2.00) ms, messages-stream +0.50/+2.00 (+0.50/+2.00) ms"
    )
