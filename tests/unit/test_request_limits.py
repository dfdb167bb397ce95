"""models.yml `limits:`: typed in the schema, merged defaults-under-model, carried by the plan into the rendered
gateway config (model_info.gateway_limits), where the guard reads them."""

from __future__ import annotations

import pytest

from generator.compile.plan import RequestLimits
from generator.compile.renderers.litellm import render_litellm

MODEL = """
m:
  gpus: []
  command: vllm serve x/y --max-model-len 4096
"""


def test_the_defaults_keep_one_request_to_one_answer(plan):
    (m,) = plan(MODEL).models
    assert m.limits == RequestLimits(n=1, best_of=1, tools=128, logit_bias=300, request_bytes=16 * 2**20)


def test_a_models_limits_win_field_by_field_over_the_defaults(plan):
    p = plan(
        "defaults:\n  limits: {n: 4, tools: 16, request_size: 2MiB}\n" + MODEL + "  limits: {n: 8}\n"
        "other:\n  gpus: []\n  command: vllm serve x/z --max-model-len 4096\n"
    )
    m, other = p.models
    assert m.limits == RequestLimits(n=8, best_of=1, tools=16, logit_bias=300, request_bytes=2 * 2**20)
    assert other.limits == RequestLimits(n=4, best_of=1, tools=16, logit_bias=300, request_bytes=2 * 2**20)


def test_the_rendered_config_carries_each_models_limits(plan):
    p = plan(MODEL + "  limits: {n: 2, best_of: 3, tools: 0, logit_bias: 10, request_size: 64KiB}\n")
    (entry,) = render_litellm(p)["model_list"]
    assert entry["model_info"]["gateway_limits"] == {
        "n": 2,
        "best_of": 3,
        "tools": 0,
        "logit_bias": 10,
        "request_bytes": 65536,
    }


@pytest.mark.parametrize(
    "limits,expected",
    [
        ("{n: 0}", "limits.n: Input should be greater than or equal to 1"),
        ("{n: many}", "limits.n: Input should be a valid integer"),
        ("{tools: -1}", "limits.tools: Input should be greater than or equal to 0"),
        ("{request_size: 2GiB}", "limits.request_size: '2GiB' is outside 1KiB..1GiB"),
        ("{request_size: 16MB}", "limits.request_size: '16MB': write 16MiB"),
        ("{bestof: 2}", "limits.bestof: unknown field 'bestof'; did you mean 'best_of'?"),
    ],
)
def test_a_wrong_limit_names_model_field_and_fix(problems, limits, expected):
    (msg,) = problems(MODEL + f"  limits: {limits}\n")
    assert expected in msg and "m" in msg, msg


def test_the_backends_max_logprobs_reaches_the_guard_which_refuses_more(plan, monkeypatch):
    """vLLM refuses more logprobs per token than --max-logprobs (default 20); streamed, LiteLLM made that a 500 (the
    fuzz test found it), so the guard answers it 400 naming the field, per API."""
    from generator.compile.renderers.litellm import MAX_LOGPROBS
    from tests.unit.test_gateway_hooks import load_like_litellm
    from tests.unit.test_routing import Router

    default, raised = (render_litellm(plan(MODEL + extra))["model_list"][0] for extra in ("", "  limits: {n: 2}\n"))
    assert default["model_info"][MAX_LOGPROBS] == 20 == raised["model_info"][MAX_LOGPROBS]
    (wider,) = render_litellm(plan(MODEL.replace("4096", "4096 --max-logprobs 50")))["model_list"]
    assert wider["model_info"][MAX_LOGPROBS] == 50
    guard = load_like_litellm("request_guard")
    import gateway_backends as gb

    monkeypatch.setattr(gb, "router", lambda: Router({**default, "model_name": "m"}))
    problem = lambda api, **body: guard.logprobs_problem(api, {"model": "m", **body})  # noqa: E731
    refused = problem("completions", logprobs=437)
    assert refused.status == 400 and refused.param == "logprobs" and "over the 20 that m's backend" in refused.message
    assert problem("chat", logprobs=True, top_logprobs=21).param == "top_logprobs"
    assert problem("responses", top_logprobs=-1).param == "top_logprobs"  # -1: the whole vocabulary
    assert problem("completions", prompt_logprobs=21).param == "prompt_logprobs"
    for fine in (
        problem("completions", logprobs=20),
        problem("chat", logprobs=True, top_logprobs=0),
        problem("messages", top_logprobs=99),  # not an API of vLLM's logprobs
        guard.logprobs_problem("completions", {"model": "other", "logprobs": 437}),  # no bound known: vLLM's to say
    ):
        assert fine is None
