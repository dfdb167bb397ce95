"""Runtimes: start a validated Plan. `local` runs vLLM + LiteLLM as processes on 127.0.0.1."""
