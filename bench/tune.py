"""`make bench-tune`: one setting at a time on top of LiteLLM's defaults, against the same nginx mock.

Every variant runs as its own gateway (pinned to the gateway CPUs, all started first) and is
measured in adjacent pairs with the defaults gateway: sequential p50 of a small request, capacity
(the rate it completes with --concurrency requests always in flight) and the gateway's CPU time
per request. The table gives the median over the pairs of the difference or ratio. The table in bench/README.md comes
from this.
`--baseline NAME` pairs every variant with another one instead (e.g. the generated gateway without
its prometheus callback, for what the gateway's metrics cost); `--models` takes another bench
models.yml (other ports: variants listen on gateway.port + 10 + i).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

from generator.compile.gateway_process import METRICS_PORT_ENV, gateway_env
from generator.compile.renderers.litellm import local_api_base, render_litellm

from .apis import Scenario
from .arms import Arm, VariantGateway, default_config
from .loadgen import LoadGen
from .run import SCENARIOS
from .session import ALL_CPUS, MODELS, bench_session


@dataclass(frozen=True)
class Variant:
    name: str
    config: dict = field(default_factory=dict)  # merged into LiteLLM's default config
    env: dict = field(default_factory=dict)
    args: tuple[str, ...] = ()
    workers: int | None = None
    model_info: bool = False  # the generated model_info (context sizes) in each model entry
    packages: tuple[str, ...] = ()  # installed for this variant only (pip --target, on PYTHONPATH)
    generated: bool = False  # the config + flags + env the generator emits
    without_prometheus: bool = False  # generated, minus the prometheus callback and its metrics process
    gateway_metrics: str | None = None  # generated with this gateway.metrics level (full | light)
    all_cpus: bool = False  # not pinned to the gateway CPUs: every CPU, beside the load generator
    litellm: str | None = None  # another LiteLLM version, in a venv of its own (litellm_venv); None: this venv's
    model_info_extra: dict = field(default_factory=dict)  # generated: added to every model entry's model_info


def merge(base: dict, patch: dict) -> dict:
    out = dict(base)
    for k, v in patch.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


VARIANTS = (
    Variant("defaults"),
    Variant("defaults, again (noise floor)"),
    # the pinned LiteLLM's cost apart from the machine's (issue 47): the version the bench's reference ran on,
    # with the same defaults config, paired with this venv's (1.108.7) in one run
    Variant("defaults on LiteLLM 1.103.7", litellm="1.103.7"),
    Variant("LITELLM_LOG=ERROR", env={"LITELLM_LOG": "ERROR"}),
    Variant("2 workers on 1 core", workers=2),
    Variant("granian server", args=("--run_granian",)),
    Variant("httptools installed (uvicorn's C HTTP parser)", packages=("httptools==0.9.0",)),
    # LiteLLM 1.103.7 retries a failing `import litellm.integrations.otel.logger` on every request:
    # it needs opentelemetry-sdk and an API that still has `_events` (1.36); fastapi wants >= 1.44
    Variant(
        "opentelemetry 1.36 (the per-request import succeeds)",
        packages=("opentelemetry-sdk==1.36.0", "opentelemetry-api==1.36.0"),
    ),
    Variant("turn_off_message_logging", config={"litellm_settings": {"turn_off_message_logging": True}}),
    Variant(
        "disable_spend/error_logs",
        config={"general_settings": {"disable_spend_logs": True, "disable_error_logs": True}},
    ),
    Variant("disable_cooldowns", config={"router_settings": {"disable_cooldowns": True}}),
    Variant("num_retries 0", config={"litellm_settings": {"num_retries": 0}, "router_settings": {"num_retries": 0}}),
    Variant("httpx transport", config={"litellm_settings": {"disable_aiohttp_transport": True}}),
    Variant(
        "background health checks 5s",
        config={"general_settings": {"background_health_checks": True, "health_check_interval": 5}},
    ),
    Variant("+ custom_auth guard", config={"general_settings": {"custom_auth": "gateway_guard.user_api_key_auth"}}),
    Variant("model_info (context sizes)", model_info=True),
    Variant(
        "+ max_tokens clamp hook",
        config={"litellm_settings": {"callbacks": ["max_tokens_clamp.proxy_handler_instance"]}},
        model_info=True,
    ),  # the hook reads the context from model_info (else it asks the backend)
    Variant("generated", generated=True),
    # the gateway's metrics (issue 17): LiteLLM's prometheus callback served by its metrics process
    # (GATEWAY_METRICS_PORT: LocalStack gives the variant a free port and a folder of its own)
    Variant(
        "prometheus callback",
        config={"litellm_settings": {"callbacks": ["prometheus"]}},
        env={METRICS_PORT_ENV: "set by LocalStack"},
    ),
    Variant("generated without prometheus", generated=True, without_prometheus=True),
    Variant("generated without prometheus, again (noise floor)", generated=True, without_prometheus=True),
    # gateway.metrics: light (the default since issue 47): no callback; the request guard counts requests and errors,
    # people.py's callback a person's tokens (request_counters.py); full: LiteLLM's prometheus callback besides
    Variant("generated, light metrics", generated=True, gateway_metrics="light"),
    Variant("generated, full metrics", generated=True, gateway_metrics="full"),
    # only the two counters status and the dashboard read, with only the labels they group by
    Variant(
        "generated, prometheus with 2 metrics",
        generated=True,
        gateway_metrics="full",
        config={
            "litellm_settings": {
                "prometheus_metrics_config": [
                    {
                        "group": "requests",
                        "metrics": ["litellm_proxy_total_requests_metric"],
                        "include_labels": ["requested_model", "status_code"],
                    },
                    {
                        "group": "errors",
                        "metrics": ["litellm_proxy_failed_requests_metric"],
                        "include_labels": ["requested_model", "exception_status"],
                    },
                ]
            }
        },
    ),
    # the same with LiteLLM's failing per-request OTel import left in place (litellm_cuts.skip_failing_otel_seed)
    Variant("generated, OTel import kept", generated=True, env={"GATEWAY_LITELLM_OTEL_SEED": "keep"}),
    # the generated gateway with LiteLLM's route table order (route_order.py off; issue 62): /v1/messages matched last
    Variant("generated, LiteLLM's route order", generated=True, env={"GATEWAY_ROUTE_ORDER": "litellm"}),
    # the same with LiteLLM's per-request get_type_hints on /v1/responses left in place (litellm_cuts.cache_type_hints)
    Variant("generated, type hints per request", generated=True, env={"GATEWAY_LITELLM_TYPE_HINTS": "keep"}),
    # the same with each request's set-up on a pool thread, as LiteLLM runs it (litellm_cuts.set_up_in_the_loop)
    Variant("generated, set-up on a thread", generated=True, env={"GATEWAY_LITELLM_SETUP_THREAD": "keep"}),
    # the same with LiteLLM's backend body and tool copies written by json (litellm_cuts.orjson_for_litellms_json)
    Variant("generated, LiteLLM's json", generated=True, env={"GATEWAY_LITELLM_JSON": "keep"}),
    # the same with LiteLLM's cache_control walks over every message, input item and tool run on a body without one
    # (litellm_cuts.skip_needless_cache_control_walks)
    Variant("generated, cache_control walks", generated=True, env={"GATEWAY_LITELLM_CACHE_CONTROL": "keep"}),
    # the same with the texts served read back from every stream at its end (litellm_cuts.skip_unread_served_texts)
    Variant("generated, served texts read back", generated=True, env={"GATEWAY_LITELLM_SERVED_TEXTS": "keep"}),
    # the same with /v1/messages answered by LiteLLM's own route (messages_route.py off; issue 62): two entry points
    Variant("generated, LiteLLM's /v1/messages route", generated=True, env={"GATEWAY_MESSAGES_ROUTE": "litellm"}),
    # /v1/messages forwarded untranslated to the backend's own /v1/messages (LiteLLM's per-deployment opt-in; vLLM
    # 0.32 serves it): what LiteLLM's translation and second entry point cost (issue 62; not what the generator writes)
    Variant(
        "generated, /v1/messages to the backend's own",
        generated=True,
        model_info_extra={"supported_endpoints": ["/v1/messages"]},
    ),
    # the generated gateway with httptools, on an agent's 77 KB body too (issue 62; not kept: bench/README.md)
    Variant("generated, httptools", generated=True, packages=("httptools==0.9.0",)),
    # 1 vs 2 workers of the generated gateway, both on every CPU (beside the load generator): CPU per request
    Variant("generated, 1 worker, every CPU", generated=True, workers=1, all_cpus=True),
    Variant("generated, 2 workers, every CPU", generated=True, workers=2, all_cpus=True),
)


async def sample(gen: LoadGen, target, pid: int, args) -> dict[str, float]:
    seq = await gen.sequential(target, args.sequential)
    cap, cpu_s = await gen.closed_loop_cpu(target, args.concurrency, args.duration, pid)
    cpu_ms = cpu_s * 1000 / max(cap.ok, 1)
    if seq.errors or cap.errors:
        raise RuntimeError(f"{seq.errors + cap.errors} failed requests ({dict(gen.failures)}): see the gateway log")
    return {"p50_ms": seq.p50_ms, "capacity": cap.achieved, "cpu_ms": cpu_ms}


async def measure(args, gateways, scenario: Scenario, results: dict, console: Console) -> None:
    """Each variant against the defaults gateway in adjacent pairs (alternating which goes first), so a
    machine that speeds up or slows down over minutes shifts both sides of a pair alike."""
    async with LoadGen(timeout_s=30) as gen:
        targets = {
            v.name: (Arm(v.name, gw.gateway_url, gw.master_key).scenario_target(scenario), gw.procs[-1].pid)
            for v, gw in gateways
        }
        for t, _ in targets.values():
            await gen.warm_up(t, 100)
        base = gateways[0][0].name
        for v, _ in gateways[1:]:
            r = results.setdefault(v.name, {"d_p50_ms": [], "capacity_ratio": [], "cpu_ratio": [], "cpu_ms": []})
            for pair in range(args.pairs):
                order = (base, v.name) if pair % 2 == 0 else (v.name, base)
                got = {name: await sample(gen, *targets[name], args) for name in order}
                r["d_p50_ms"].append(got[v.name]["p50_ms"] - got[base]["p50_ms"])
                r["capacity_ratio"].append(got[v.name]["capacity"] / got[base]["capacity"])
                r["cpu_ratio"].append(got[v.name]["cpu_ms"] / got[base]["cpu_ms"])
                r["cpu_ms"].append(got[v.name]["cpu_ms"])
            console.print(
                f"{v.name:34} Δ p50 {statistics.median(r['d_p50_ms']):+6.2f} ms  "
                f"capacity {statistics.median(r['capacity_ratio']) - 1:+6.1%}  "
                f"CPU/request {statistics.median(r['cpu_ratio']) - 1:+6.1%}",
                soft_wrap=True,
            )


def install_packages(v: Variant, root: Path, console: Console) -> dict[str, str]:
    """PYTHONPATH for a variant that needs extra packages, installed once into root/<hash>."""
    if not v.packages:
        return {}
    target = root / "pkgs" / "-".join(sorted(v.packages)).replace("=", "").replace("/", "_")
    if not (target / ".done").exists():
        console.print(f"installing {', '.join(v.packages)} for variant {v.name!r}")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(target), *v.packages], check=True)
        (target / ".done").touch()
    return {"PYTHONPATH": str(target.resolve())}


def litellm_venv(version: str, root: Path, console: Console) -> str:
    """The python of a venv with `litellm[proxy]==version` (and what our supervisor's metrics process imports),
    made once under root; a comparison of versions, not a supported setup (pip resolves the rest)."""
    venv = root / f"litellm-{version}"
    python = venv / "bin" / "python"
    if not (venv / ".done").exists():
        console.print(f"installing LiteLLM {version} into {venv} (once; ~1 min)")
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        pkgs = [f"litellm[proxy]=={version}", "prometheus-client==0.26.0", "psutil"]
        subprocess.run([str(python), "-m", "pip", "install", "-q", *pkgs], check=True)
        (venv / ".done").touch()
    return str(python.absolute())


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m bench.tune", description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=MODELS, help="default: $BENCH_MODELS or bench/models.yml")
    ap.add_argument("--state-dir", type=Path, default=Path(".cache/bench-tune"))
    ap.add_argument("--out", type=Path, default=Path("bench/results/tune.json"))
    ap.add_argument("--pairs", type=int, default=6, help="defaults/variant pairs per variant")
    ap.add_argument("--sequential", type=int, default=60, help="sequential requests per arm and pair")
    ap.add_argument("--concurrency", type=int, default=16, help="requests in flight for the capacity test")
    ap.add_argument("--duration", type=float, default=1.5, help="seconds of each capacity test")
    ap.add_argument("--scenario", default="small", choices=[s.name for s in SCENARIOS])
    ap.add_argument("--only", nargs="*", help="variant names to run (the baseline always runs)")
    ap.add_argument(
        "--baseline",
        default="defaults",
        help="the variant every other one is paired with "
        "(e.g. 'generated without prometheus' for the metrics callback's cost)",
    )
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    console = Console(stderr=True, highlight=False)
    variants = [v for v in VARIANTS if not args.only or v.name == args.baseline or v.name in args.only]
    variants.sort(key=lambda v: v.name != args.baseline)  # the baseline first: measure() pairs with it
    scenario = next(s for s in SCENARIOS if s.name == args.scenario)
    results: dict[str, dict[str, list[float]]] = {}
    with bench_session(args.models, args.state_dir) as (plan, _, gateway_cpus):
        gateways: list[tuple[Variant, VariantGateway]] = []
        try:
            for i, v in enumerate(variants):
                vplan = replace(
                    plan,
                    gateway=replace(
                        plan.gateway, port=plan.gateway.port + 10 + i, metrics=v.gateway_metrics or plan.gateway.metrics
                    ),
                )
                common = dict(
                    plan=vplan,
                    state_dir=args.state_dir / f"v{i}",
                    vllm_python="",
                    gateway_cpus=ALL_CPUS if v.all_cpus else gateway_cpus,
                    console=console,
                )
                if v.generated:
                    config = merge(render_litellm(vplan, local_api_base), v.config)
                    for entry in config["model_list"]:
                        entry["model_info"] = {**entry.get("model_info", {}), **v.model_info_extra}
                    env = {**gateway_env(vplan.gateway), **v.env, **install_packages(v, args.state_dir, console)}
                    if v.without_prometheus:
                        config["litellm_settings"]["callbacks"].remove("prometheus")
                        env.pop(METRICS_PORT_ENV)
                    gw = VariantGateway(
                        **common, config=config, workers=v.workers or vplan.gateway.workers, env_overrides=env
                    )
                else:
                    if v.litellm:
                        common["gateway_python"] = litellm_venv(v.litellm, args.state_dir, console)
                    gw = VariantGateway(
                        **common,
                        config=merge(default_config(vplan, local_api_base, v.model_info), v.config),
                        extra_args=v.args,
                        workers=v.workers,
                        env_overrides={**v.env, **install_packages(v, args.state_dir, console)},
                    )
                console.print(f"starting variant [bold]{v.name}[/]")
                gateways.append((v, gw))
                gw.start_gateway()
            asyncio.run(measure(args, gateways, scenario, results, console))
        finally:
            for _, gw in gateways:
                gw.stop()
    table = Table(
        "setting (alone, on LiteLLM defaults)" if args.baseline == "defaults" else f"vs {args.baseline}",
        "Δ seq p50 ms",
        "Δ capacity",
        "Δ CPU/request",
        "CPU ms/req",
        box=None,
    )
    summary = {}
    for v in variants[1:]:
        r = results[v.name]
        med = {k: statistics.median(x) for k, x in r.items()}
        summary[v.name] = {**med, "pairs": r}
        table.add_row(
            v.name,
            f"{med['d_p50_ms']:+.2f}",
            f"{med['capacity_ratio'] - 1:+.1%}",
            f"{med['cpu_ratio'] - 1:+.1%}",
            f"{med['cpu_ms']:.2f}",
        )
    console.print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"scenario": scenario.name, "baseline": args.baseline, "variants": summary}, indent=1) + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
