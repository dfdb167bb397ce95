"""The on-demand controller (issue 19): loads a model when a request asks for it, unloads it when idle or
when another model of its group needs the room, and proxies the gateway's requests to it meanwhile.

    python -m generator.shipped.on_demand --config on-demand.json

- policy.py: the decisions, no I/O (states, queue, drain, lanes, idle/LRU, timeouts, failures);
- drivers.py: the hands (local processes, Docker containers, vLLM sleep mode);
- server.py: the HTTP side (/m/<model>/..., /status, /healthz) and the loop that carries out decisions;
- config.py: on-demand.json, as renderers/on_demand.py (compose) or runtime/local.py (local) writes it.

One process, one worker: it is the single decider whatever the number of gateway workers.
"""
