"""The compiler: models.yml -> files. Nothing here touches a running stack or imports generator.operate.

load/       models.yml -> typed, validated entries -> the plan (YAML source, pydantic schema, the vLLM flag
            catalog, one module per concern, model files on disk or the Hub, the fit check); every error names
            model, field and fix
plan.py     the plan: plain data every renderer reads (no YAML past load/)
renderers/  plan -> file contents per target (compose, LiteLLM config, Kubernetes, clients, metrics...)
output.py   the files written all-or-nothing (temp dir, then move), the keys files, staleness checks
gateway_process.py  the gateway's command line and environment (compose, Kubernetes, the local runtime)
summary.py  what a regenerate prints; schema_docs.py: schema -> editors' JSON schema + field reference
"""
