"""Gateway overhead benchmark: direct-to-backend vs LiteLLM defaults vs the generated gateway."""
