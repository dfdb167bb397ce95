import os

from hypothesis import settings

# Tests that import LiteLLM in this process (the hook modules) must not fetch its price map from the
# internet, as the gateway never does (gateway_process.BASE_ENV); it has to be set before the import.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# CI runs the same examples every time (a new failure is a finding, not a coin flip); locally, explore.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
