"""What acts on a running stack: the generated files -> processes and containers, and back.
It uses the compiler (compile.load.load_plan, the renderers); the compiler never imports this package.

    runtime/        the local runtime (`make demo`): vLLM and LiteLLM as processes from a plan
    apply.py        `make apply`: a changed models.yml -> the running compose stack, only what changed
                    (changes.py computes the difference)
    status.py       `make status`: the running stack at a glance, read through the gateway
    gateway_hooks/  code that runs INSIDE the gateway (auth, guard, clamp, status route, supervisor);
                    the renderers copy it next to the LiteLLM config
    on_demand/      the on-demand controller (loads and unloads backends as requests ask)
"""
