"""The controller's GET /metrics: each on-demand model's state for Prometheus, so that a model the controller
unloaded on purpose reads "stopped" there and on the dashboard, not "down" (its backend's scrape fails while it
is stopped: `up` is 0). A state set: one series per model and state, 1 for the model's current state, else 0:

    llm_gateway_on_demand_state{model="reasoner",state="stopped"} 1.0
    llm_gateway_on_demand_state{model="reasoner",state="loaded"} 0.0

prometheus/rules.yml (generator/compile/renderers/metrics.py) joins it to `up` by the `model` label (the
models.yml name, as the vllm job's target label).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from .policy import State

# prometheus_client is imported where it is used: the generator imports STATE_METRIC from here (the rules name it),
# and the generator alone (without the gateway extra) has no prometheus_client

STATE_METRIC = "llm_gateway_on_demand_state"
SCALING_METRIC = "llm_gateway_scaling_events"  # + _total: copies started (up) and stopped (down) per model
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # Prometheus's text format


class _States:
    def __init__(self, states: Mapping[str, State]):
        self.states = states

    def collect(self) -> Iterator:
        from prometheus_client.core import GaugeMetricFamily

        family = GaugeMetricFamily(
            STATE_METRIC, "1 for the on-demand model's current state, 0 for the others", labels=["model", "state"]
        )
        for name, current in sorted(self.states.items()):
            for state in State:
                family.add_metric([name, state.value], 1.0 if state is current else 0.0)
        yield family


class _ScalingEvents:
    def __init__(self, events: Mapping[tuple[str, str], int]):
        self.events = events

    def collect(self) -> Iterator:
        from prometheus_client.core import CounterMetricFamily

        family = CounterMetricFamily(
            SCALING_METRIC,
            "Copies of a replicas: {min, max} model started (up) or stopped (down) by the load",
            labels=["model", "direction"],
        )
        for (model, direction), n in sorted(self.events.items()):
            family.add_metric([model, direction], float(n))
        yield family


def metrics_text(states: Mapping[str, State], events: Mapping[tuple[str, str], int] | None = None) -> bytes:
    """Prometheus's text format of the models' states (model name -> state) and the scaling events ((model,
    up|down) -> count; the family only when some model has a range)."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_States(states))
    if events is not None:
        registry.register(_ScalingEvents(events))
    return generate_latest(registry)
