import pytest

from generator.compile.load.vllm_command import FlagError, load_catalog, parse_serve_command

GLM = """vllm serve QuantTrio/GLM-4.7-Flash-AWQ \\
  --max-model-len 16K --tool-call-parser glm47 --reasoning-parser glm45 \\
  --enable-auto-tool-choice --kv-cache-dtype fp8 --gpu-memory-utilization 0.90
"""


def error(command: str) -> FlagError:
    with pytest.raises(FlagError) as err:
        parse_serve_command(command)
    return err.value


def test_parses_the_glm_example_with_line_continuations():
    cmd = parse_serve_command(GLM)
    assert cmd.model == "QuantTrio/GLM-4.7-Flash-AWQ"
    assert cmd.value("--max-model-len") == "16K"
    assert cmd.value("--tool-call-parser") == "glm47"
    assert cmd.enabled("--enable-auto-tool-choice")
    assert cmd.args[:2] == ("--max-model-len", "16K") and "\n" not in "".join(cmd.args)


def test_typo_gets_a_did_you_mean():
    err = error("vllm serve m --max-model-length 4K")
    assert err.flag == "--max-model-length"
    assert "did you mean --max-model-len?" in str(err)


def test_removed_flag_gets_its_own_message():
    assert "--reasoning-parser alone" in str(error("vllm serve m --enable-reasoning --reasoning-parser qwen3"))
    assert "--enable-log-requests" in str(error("vllm serve m --disable-log-requests"))


@pytest.mark.parametrize(
    "command,fragment",
    [
        ("vllm serve m --tool-call-parser hermess", "did you mean 'hermes'"),
        ("vllm serve m --reasoning-parser qwen", "did you mean 'qwen3'"),
        ("vllm serve m --kv-cache-dtype fp9", "--kv-cache-dtype 'fp9' is not one of"),
        ("vllm serve m --dtype halfs", "--dtype 'halfs'"),
        ("vllm serve m --quantization awqq", "did you mean 'awq'"),
        ("vllm serve m --load-format safetensor", "did you mean 'safetensors'"),
        ("vllm serve m --tensor-parallel-size two", "not a valid int"),
        ("vllm serve m --gpu-memory-utilization lots", "not a valid float"),
        ("vllm serve m --max-model-len 1.5K", "did you mean 1.5k"),
        ("vllm serve m --enable-prefix-caching=true", "takes no value"),
        ("vllm serve m --max-model-len", "needs a value"),
        ("vllm serve m --api-key secret", "compose/.env"),
        ("vllm serve m --host 0.0.0.0", "remove --host"),
        ("python -m vllm.entrypoints.openai.api_server --model m", "must start with `vllm serve"),
        ("vllm serve --max-model-len 4K", "no model given"),
        ("vllm serve m other", "unexpected argument 'other'"),
        ("vllm serve 'm", "cannot split"),
    ],
)
def test_bad_commands_name_the_flag_and_the_fix(command, fragment):
    assert fragment in str(error(command))


def test_spellings_vllm_accepts():
    cmd = parse_serve_command(
        "vllm serve m --max_model_len=8K -tp 2 --no-enable-prefix-caching "
        "--served-model-name a b --compilation-config.mode 3"
    )
    assert cmd.value("--max-model-len") == "8K"
    assert cmd.value("--tensor-parallel-size") == "2"
    assert cmd.last("--enable-prefix-caching").negated and not cmd.enabled("--enable-prefix-caching")
    assert cmd.last("--served-model-name").values == ("a", "b")


def test_catalog_carries_the_parsers_the_readme_uses():
    catalog = load_catalog()
    assert catalog.vllm_version == "0.32.0"
    assert {"hermes", "glm47", "qwen3_coder"} <= set(catalog.flags["--tool-call-parser"]["choices"])
    assert {"qwen3", "glm45", "deepseek_r1"} <= set(catalog.flags["--reasoning-parser"]["choices"])
    assert catalog.aliases["-tp"] == "--tensor-parallel-size"
