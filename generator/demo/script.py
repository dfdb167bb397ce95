"""What the scripted demo models say, word for word (no dependencies: tests import it)."""

import json

SCRIPTS = ("reasoner", "tool-caller", "plain")

REASONING_TEXT = "The user asks about the weather, so I will answer briefly."
ANSWER_TEXT = "It is sunny in Paris."
TOOL_CALL = {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
TOOL_CALL_JSON = json.dumps(TOOL_CALL)  # hermes body: <tool_call>{...}</tool_call>
TOOL_CALL_PREFIX = '{"name": "%s", "arguments": ' % TOOL_CALL["name"]
TOOL_ARGS_JSON = json.dumps(TOOL_CALL["arguments"])
assert TOOL_CALL_PREFIX + TOOL_ARGS_JSON + "}" == TOOL_CALL_JSON
