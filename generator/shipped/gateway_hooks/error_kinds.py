"""Which failed requests are errors: the backends' failures (a 5xx, a timeout 408, an overload 429, or a status
LiteLLM did not know), not what a client asked for wrong (any other 4xx: a bad body, an unknown model, a wrong
key, a prompt over the context). One definition for `make status` (gateway_status.py, in the gateway) and for the
Prometheus rules and the dashboard (generator/compile/renderers/metrics.py), which match LiteLLM's
`exception_status` label with CLIENT_ERROR_STATUS. Standard library only: the generator imports it too.
"""

from __future__ import annotations

import re

BACKEND_4XX = (408, 429)  # 4xx that are the backend side's: a timeout, an overload
# the 4xx statuses that are NOT backend failures, as a regular expression in the syntax both Python's re and
# Prometheus's RE2 read (PromQL anchors it; Python: fullmatch); "400.0" too (a status LiteLLM wrote as a float)
CLIENT_ERROR_STATUS = "4(0[0-79]|1[0-9]|2[0-8]|[3-9][0-9])([.]0)?"


def backend_failure(exception_status: str | None) -> bool:
    """True for a failed request the backend side caused (see the module's docstring)."""
    return re.fullmatch(CLIENT_ERROR_STATUS, (exception_status or "").strip()) is None
