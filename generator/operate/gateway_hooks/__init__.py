"""Modules that run INSIDE the gateway process (custom auth, request guard, max_tokens clamp, count_tokens,
the /gateway/status route, the worker supervisor). The renderers copy them next to the LiteLLM config, where
LiteLLM loads them as top-level modules: they import each other by plain name, never through this package."""
