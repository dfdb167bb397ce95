import os

from hypothesis import settings

# CI runs the same examples every time (a new failure is a finding, not a coin flip); locally, explore.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
