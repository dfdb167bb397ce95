"""The scripted demo models' tokenizer: exact round trips, ~2 bytes per token, ids the library agrees with."""

from __future__ import annotations

import json

import pytest

from generator.demo import scripted_model as sm
from generator.demo.script import TOOL_CALL_JSON, WEATHER_TOOL

tokenizers = pytest.importorskip("tokenizers")  # LiteLLM depends on it: always in .venv


@pytest.fixture(scope="module")
def tok():
    return tokenizers.Tokenizer.from_str(json.dumps(sm._tokenizer_json()))


def test_added_tokens_get_the_ids_the_weights_use(tok):
    # the library numbers added tokens after the model vocab, whatever tokenizer.json says:
    # the bigram table must use the same ids, or the model says the wrong script
    for text, token_id in sm.TOKEN_ID.items():
        assert tok.token_to_id(text) == token_id
    assert tok.get_vocab_size() == sm.VOCAB_SIZE


def test_the_logit_bias_for_long_answers_bans_exactly_the_end_tokens(tok):
    assert {tok.id_to_token(int(i)) for i in sm.NO_END_LOGIT_BIAS} == {"<|im_end|>", "<|endoftext|>"}
    assert set(sm.NO_END_LOGIT_BIAS.values()) == {-100}  # the lowest bias the OpenAI API takes


def test_round_trip_and_two_bytes_per_token(tok):
    text = (
        "You are an agent. Use the tools below to answer the user's questions.\n\n"
        + json.dumps([WEATHER_TOOL] * 20, indent=2)
        + "\nnaïve café ✓\n"
    )
    ids = tok.encode(text).ids
    assert tok.decode(ids, skip_special_tokens=False) == text
    assert len(text.encode()) / len(ids) > 1.7  # a 76 KB agent prompt: ~44K tokens, not 76K


def test_the_generation_prompt_ends_with_the_newline_token_the_scripts_start_from(tok):
    prompt = "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n"
    assert tok.encode(prompt).ids[-1] == sm.NL
    assert tok.encode("\n\n").ids == [sm.NL, sm.NL]  # newlines never merge


def test_script_phrases_are_single_tokens(tok):
    for phrase in (sm.REASONING_TEXT, sm.ANSWER_TEXT, sm.TOOL_CALL_PREFIX, sm.TOOL_ARGS_JSON):
        assert tok.encode(phrase).ids == [sm.TOKEN_ID[phrase]]
    assert sm.TOOL_CALL_PREFIX + sm.TOOL_ARGS_JSON + "}" == TOOL_CALL_JSON
