"""models.yml -> validated entries -> a Plan (loader.load_plan). yaml_source keeps line numbers for errors;
schema holds the typed models; vllm_command parses each `vllm serve` command against the pinned vLLM's flag
catalog (data/vllm_flags.json, rebuilt by catalog_build); rules, fit, media and sizes hold the checks."""
