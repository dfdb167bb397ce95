"""What acts on a running stack: the generated files -> processes and containers, and back.
It uses the compiler (compile.load.load_plan, the renderers) and starts what generator/shipped holds; the
compiler never imports this package.

    runtime/        the local runtime (`make demo`): vLLM and LiteLLM as processes from a plan
    apply.py        `make apply`: a changed models.yml -> the running compose stack, only what changed
                    (changes.py computes the difference)
    status.py       `make status`: the running stack at a glance, read through the gateway
"""
