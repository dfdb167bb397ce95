"""Tool-call flags (compile/load/tools.py), through load_plan. What the parsers get wrong: test_parser_support.py;
the repaired ones a backend loads: test_parser_repairs.py."""


def one(command: str, extra: str = "", name: str = "m1", gpus: str = "[0]") -> str:
    return f"{name}:\n  gpus: {gpus}\n  command: {command}\n{extra}"


def test_auto_tool_choice_needs_a_tool_parser(problems):
    (msg,) = problems(one("vllm serve org/m --max-model-len 8K --enable-auto-tool-choice"))
    assert "--enable-auto-tool-choice needs --tool-call-parser" in msg


def test_tool_parser_without_auto_tool_choice_is_a_warning(plan):
    p = plan(one("vllm serve org/m --max-model-len 8K --tool-call-parser hermes"))
    assert any("--enable-auto-tool-choice" in w for w in p.warnings)
