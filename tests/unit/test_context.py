"""A model's context (compile/load/context.py: --max-model-len, context_length or the model's config) and its output
budget (compile/load/output_budget.py: max_tokens below the context), through load_plan, asserting on the message a
person reads. The context taken from a model's config: test_fit.py."""


def one(command: str, extra: str = "", name: str = "m1", gpus: str = "[0]") -> str:
    return f"{name}:\n  gpus: {gpus}\n  command: {command}\n{extra}"


def test_max_tokens_equal_to_the_context_is_refused_naming_model_and_both_numbers(problems):
    (msg,) = problems(one("vllm serve org/m --max-model-len 128K", "  litellm: {max_tokens: 128K}\n"))
    assert "m1.litellm.max_tokens" in msg and msg.count("131072") == 2 and "models.yml:4" in msg
    assert "65536" in msg  # the suggested fix: half the context


def test_max_tokens_below_the_context_is_kept(plan):
    (m,) = plan(one("vllm serve org/m --max-model-len 16K", "  litellm: {max_tokens: 8K}\n")).models
    assert (m.context, m.max_tokens, m.max_tokens_derived) == (16384, 8192, False)
    assert m.litellm_params["max_tokens"] == 8192


def test_missing_max_tokens_is_derived_as_half_the_context(plan):
    (m,) = plan(one("vllm serve org/m --max-model-len 25.6k")).models
    assert (m.max_tokens, m.max_tokens_derived) == (12800, True)


def test_unknown_context_is_refused(problems):
    (msg,) = problems(one("vllm serve org/m"))
    assert "m1.command" in msg and "--max-model-len is missing" in msg and "context_length" in msg
    (msg,) = problems(one("vllm serve org/m --max-model-len auto"))
    assert "is `auto`" in msg


def test_auto_context_with_context_length_is_accepted(plan):
    (m,) = plan(one("vllm serve org/m --max-model-len auto", "  context_length: 8K\n")).models
    assert m.context == 8192 and m.max_tokens == 4096


def test_context_length_must_agree_with_the_flag(problems):
    (msg,) = problems(one("vllm serve org/m --max-model-len 8K", "  context_length: 16K\n"))
    assert "m1.context_length" in msg and "disagrees" in msg
