"""models.yml's rules through load_plan, asserting on the message a person reads: the file's shape and names
(compile/load/parse.py), commands, GPU counts, unique names and ports, defaults, the gateway block. Other concerns
have a test file of their own (test_context.py, test_tools.py, test_gpu_sharing.py, test_replicas.py,
test_volumes.py, test_on_demand.py, test_routing.py, test_lora.py, test_pooling.py, test_media.py, ...)."""

from generator.compile.load.loader import load_plan


def one(command: str, extra: str = "", name: str = "m1", gpus: str = "[0]") -> str:
    return f"{name}:\n  gpus: {gpus}\n  command: {command}\n{extra}"


def test_typo_in_a_flag_names_model_flag_and_suggestion(problems):
    (msg,) = problems(one("vllm serve org/m --max-model-length 8K"))
    assert "m1.command --max-model-length" in msg and "did you mean --max-model-len?" in msg


def test_parallel_size_must_match_the_gpus(problems):
    (msg,) = problems(one("vllm serve org/m --max-model-len 8K -tp 2 --pipeline-parallel-size 2", gpus="[0, 1]"))
    assert "m1.gpus" in msg and "2 GPU(s)" in msg and "size is 4" in msg
    assert "twice" in problems(one("vllm serve org/m --max-model-len 8K -tp 2", gpus="[0, 0]"))[0]


def test_tensor_parallel_with_matching_gpus_is_accepted(plan):
    (m,) = plan(one("vllm serve org/m --max-model-len 8K -tp 2", gpus="[2, 3]")).models
    assert m.gpus == (2, 3)


def test_served_names_and_ports_must_be_unique(problems):
    text = (
        one("vllm serve org/a --max-model-len 8K --served-model-name same", name="a", gpus="[]")
        + one("vllm serve org/b --max-model-len 8K --served-model-name same --port 9000", name="b", gpus="[]")
        + one("vllm serve org/c --max-model-len 8K", name="c", gpus="[]")
        + "  port: 9000\n"
    )
    msgs = "\n".join(problems(text))
    assert "served model name 'same' is already used by a" in msgs and "port 9000 is already used by b" in msgs


def test_model_names_must_be_dns_labels_and_not_reserved(problems):
    msgs = "\n".join(
        problems(
            one("vllm serve o/m --max-model-len 8K", name="GLM_4")
            + one("vllm serve o/m --max-model-len 8K", name="litellm")
        )
    )
    assert "GLM_4: model names become service and host names" in msgs
    assert "'litellm' is the name of a service of the stack" in msgs


def test_yaml_syntax_error_names_file_and_line(problems):
    (msg,) = problems("m1:\n  gpus: [0\n  command: x\n")
    assert msg.startswith("") and "YAML syntax error" in msg and ":3:" in msg


def test_empty_file_and_wrong_top_level(problems):
    assert "the file is empty" in problems("")[0]
    assert "must be a mapping" in problems("- a\n- b\n")[0]
    assert "no models" in problems("gateway: {port: 4000}\n")[0]


def test_wrong_types_and_unknown_fields_with_suggestions(problems):
    msgs = "\n".join(
        problems("""\
        m1:
          gpus: "0"
          command: vllm serve org/m --max-model-len 8K
          litelm: {}
          env: {FLAG: true}
        m2:
          gpus: [0]
          command: vllm serve org/m --max-model-len 8K
          litellm: {max_token: 10, temperature: hot}
        """)
    )
    assert "m1.gpus" in msgs and "valid list" in msgs
    assert "unknown field 'litelm'; did you mean 'litellm'?" in msgs
    assert "m1.env.FLAG" in msgs and "quote it" in msgs
    assert "unknown field 'max_token'; did you mean 'max_tokens'?" in msgs
    assert "m2.litellm.temperature" in msgs


def test_duplicate_keys_are_refused(problems):
    assert "duplicate key 'm1'" in problems(one("vllm serve o/m --max-model-len 8K") * 2)[0]


def test_every_problem_of_every_model_is_reported_at_once_with_its_line(problems):
    msgs = problems(
        one("vllm serve o/a --max-model-len 8K --bogus", name="a")
        + one("vllm serve o/b --max-model-len 8K", "  litellm: {max_tokens: 8K}\n", name="b")
    )
    assert len(msgs) == 2
    assert msgs[0].split(": ")[0].endswith("models.yml:3") and "a.command --bogus" in msgs[0]
    assert msgs[1].split(": ")[0].endswith("models.yml:7") and "b.litellm.max_tokens" in msgs[1]


def test_defaults_merge_under_each_model(plan):
    p = plan("""\
        defaults:
          env: {SHARED: "1", OVERRIDE: base}
          litellm: {temperature: 0.5, top_p: 0.9}
          image: my/vllm:1
        m1:
          gpus: [0]
          command: vllm serve o/m --max-model-len 8K
          env: {OVERRIDE: mine}
          litellm: {temperature: 0.1}
        """)
    (m,) = p.models
    assert m.env == {"OVERRIDE": "mine", "SHARED": "1"}
    assert m.litellm_params == {"max_tokens": 4096, "temperature": 0.1, "top_p": 0.9}
    assert m.image == "my/vllm:1"


def test_trust_remote_code_is_a_warning(plan):
    p = plan(one("vllm serve o/m --max-model-len 8K --trust-remote-code"))
    assert p.models[0].trust_remote_code and any("trust-remote-code" in w for w in p.warnings)


def test_parsers_and_served_name_reach_the_plan(plan):
    (m,) = plan(
        one(
            "vllm serve o/m --max-model-len 8K --reasoning-parser qwen3 --enable-auto-tool-choice "
            "--tool-call-parser hermes --served-model-name public"
        )
    ).models
    assert (m.served_name, m.tool_parser, m.reasoning_parser, m.auto_tool_choice) == ("public", "hermes", "qwen3", True)
    assert m.flag_args[-4:] == ("--port", "8001", "--allowed-media-domains", "NO-MEDIA-URLS.invalid")
    assert "--served-model-name" in m.flag_args


def test_gateway_bind_must_be_an_ip_and_non_loopback_warns(problems, plan):
    assert "gateway.bind" in problems("gateway: {bind: everywhere}\n" + one("vllm serve o/m --max-model-len 8K"))[0]
    p = plan("gateway: {bind: 0.0.0.0}\n" + one("vllm serve o/m --max-model-len 8K"))
    assert any("0.0.0.0" in w for w in p.warnings)


def test_gateway_log_level_defaults_to_error_and_takes_only_known_levels(problems, plan):
    assert plan(one("vllm serve o/m --max-model-len 8K")).gateway.log_level == "error"
    assert plan("gateway: {log_level: info}\n" + one("vllm serve o/m --max-model-len 8K")).gateway.log_level == "info"
    (msg,) = problems("gateway: {log_level: verbose}\n" + one("vllm serve o/m --max-model-len 8K"))
    assert "gateway.log_level" in msg and "'error'" in msg


def test_the_repo_models_yml_is_valid():
    from pathlib import Path

    p = load_plan(Path(__file__).resolve().parents[2] / "models.yml")
    assert len(p.models) >= 3 and all(m.max_tokens < m.context for m in p.models)


def test_gateway_workers_default_to_auto_and_take_a_number_or_auto_only(problems, plan):
    assert plan(one("vllm serve o/m --max-model-len 8K")).gateway.workers == "auto"
    assert plan("gateway: {workers: 3}\n" + one("vllm serve o/m --max-model-len 8K")).gateway.workers == 3
    for bad in ("0", "65", "many"):
        (msg,) = problems(f"gateway: {{workers: {bad}}}\n" + one("vllm serve o/m --max-model-len 8K"))
        assert "gateway.workers" in msg, msg


def test_a_boolean_where_a_number_belongs_is_refused_not_read_as_0_or_1(problems):
    """pydantic alone reads `true` as 1: `gpus: [true]` would have been GPU 1, `port: yes` port 1."""
    (msg,) = problems(one("vllm serve org/m --max-model-len 8K", gpus="[true]"))
    assert "m1.gpus.0" in msg and "expected a number, got true" in msg
    (msg,) = problems(one("vllm serve org/m --max-model-len 8K", "  litellm: {temperature: off}\n"))
    assert "m1.litellm.temperature" in msg and "got false" in msg
