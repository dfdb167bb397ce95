"""Code that runs INSIDE the stack, shipped there by the renderers (copied next to the LiteLLM config, or into
the on-demand controller's container): it imports nothing else of the generator.

    gateway_hooks/  inside the LiteLLM gateway: auth, request guard, max_tokens clamp, count_tokens, the
                    /gateway/status route, the worker supervisor (top-level modules there, imported by plain name)
    on_demand/      the on-demand controller: loads and unloads backends as requests ask (policy.py decides,
                    drivers.py acts, server.py serves)
    parser_repairs/ inside vLLM: repaired tool-call and reasoning parsers, loaded as a parser plugin by the
                    backends whose models name a parser the pinned vLLM gets wrong

The compiler (generator/compile) ships these and may read their constants (metric names, error kinds);
generator/operate starts and watches them.
"""
