"""models.yml -> validated entries -> a Plan (loader.load_plan). yaml_source keeps line numbers for errors; parse
and schema give the typed models; vllm_command parses each `vllm serve` command against the pinned vLLM's flag
catalog (data/vllm_flags.json, rebuilt by catalog_build). loader.build_plan is a pipeline of concerns, one module
each (volumes, commands, ports, context, pooling, output_budget, adapters, tools, gpus, backends, replicas, media,
parser_support, fit, on_demand, parser_repairs, gpu_memory, hosted, routing, start_order, gateway, metrics, people,
limits), sharing one state.State; model_files reads each model's files, sizes formats numbers."""
