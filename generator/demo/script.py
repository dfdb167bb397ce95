"""What the scripted demo models say, word for word (no dependencies: tests import it)."""

import json
from pathlib import Path

SCRIPTS = ("reasoner", "tool-caller", "plain")

REASONING_TEXT = "The user asks about the weather, so I will answer briefly."
ANSWER_TEXT = "It is sunny in Paris."
TOOL_CALL = {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
TOOL_CALL_JSON = json.dumps(TOOL_CALL)  # hermes body: <tool_call>{...}</tool_call>
TOOL_CALL_PREFIX = '{"name": "%s", "arguments": ' % TOOL_CALL["name"]
TOOL_ARGS_JSON = json.dumps(TOOL_CALL["arguments"])
assert TOOL_CALL_PREFIX + TOOL_ARGS_JSON + "}" == TOOL_CALL_JSON

# The tool the demo client and the integration tests offer; the tool caller always calls it.
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"],
        },
    },
}


def script_of(weights: Path) -> str | None:
    """The script a model folder was built with (its SCRIPT file: `<script> <digest>`), None if it is no
    scripted model. What a scripted model does is read from here, not from its parsers (the demo reasoner
    has a tool parser too, but never calls a tool)."""
    marker = Path(weights) / "SCRIPT"
    try:
        return marker.read_text().split()[0]
    except (OSError, IndexError):
        return None
