"""The `metrics:` block: validation, the generated Prometheus / Grafana / dcgm-exporter configs (golden files,
promtool, Grafana's published dashboard schema), the Kubernetes side (annotations, NetworkPolicy, ServiceMonitor
against the Prometheus Operator CRD), no key in any file, published ports on loopback only.

Refresh the golden files after an intended change:
    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_metrics.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from generator.cli import main
from generator.compile.gateway_process import LIGHT_METRICS_ENV, gateway_env
from generator.compile.load.loader import load_plan
from generator.compile.output import read_env_file, render_files
from generator.compile.renderers.compose import render_compose
from generator.compile.renderers.dashboard import (
    DASHBOARD_FILE,
    DATASOURCE_FILE,
    PROVIDER_FILE,
    RATE,
    dashboard,
    queries,
)
from generator.compile.renderers.litellm import local_api_base, render_litellm
from generator.compile.renderers.metrics import (
    BACKEND_DOWN_ALERT,
    BACKEND_ERRORS,
    BACKEND_STATE,
    CLIENT_ERRORS,
    GPU_GIVEN,
    GPU_MODELS,
    GPU_USED,
    PROMETHEUS_FILE,
    RULES_FILE,
    failed_requests,
    prometheus_config,
)
from generator.shipped.gateway_hooks.error_kinds import backend_failure
from tests.unit.golden import assert_golden

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
CI = os.environ.get("CI") == "true"

# two models sharing GPU 1, one on GPU 0, Grafana on: every metrics file there is
GPU_STACK = """\
gpu_memory: 80GiB
metrics:
  port: 9091
  scrape_interval: 30s
  retention: 30d
  retention_size: 10GB
  grafana: {enabled: true, port: 3001}
  k8s: {service_monitor: true, service_monitor_labels: {release: kube-prometheus-stack}}
big:
  gpus: [0]
  command: vllm serve org/big --max-model-len 8K
qwen3-8b:
  gpus: [1]
  command: vllm serve Qwen/Qwen3-8B --max-model-len 16K --gpu-memory-utilization 0.6
small-chat:
  gpus: [1]
  command: vllm serve Qwen/Qwen3-0.6B --max-model-len 8K --gpu-memory-utilization 0.3
"""
CPU_STACK = "cpu:\n  gpus: []\n  command: vllm serve org/m --max-model-len 4K\n"


def _promtool() -> str | None:
    """Debian's promtool: on PATH, or unpacked by `make promtool` (no service installed)."""
    local = ROOT / ".cache/promtool/usr/bin/promtool"
    return shutil.which("promtool") or (str(local) if local.exists() else None)


@pytest.fixture(scope="module")
def promtool() -> str:
    tool = _promtool()
    if tool is None:
        if CI:
            pytest.fail("CI must check the Prometheus config: run `make promtool`")
        pytest.skip("no promtool: run `make promtool` (Debian's prometheus package, unpacked into .cache)")
    return tool


@pytest.fixture
def models(tmp_path):
    def write(text: str) -> Path:
        path = tmp_path / "models.yml"
        path.write_text(text)
        return path

    return write


@pytest.fixture
def gpu_files(models) -> dict[str, str]:
    return render_files(load_plan(models(GPU_STACK)), ("stack", "k8s"))


def _promtool_run(promtool: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([promtool, *args], capture_output=True, text=True, timeout=60)


def _rules_test(promtool: str, tmp_path, test: dict) -> subprocess.CompletedProcess:
    """`promtool test rules` on `test` (a rules unit-test document), written to tmp_path/test.yml."""
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test))
    return _promtool_run(promtool, "test", "rules", str(tmp_path / "test.yml"))


# --- validation ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, where, message",
    [
        ("metrics: {scrape_intervl: 15s}\n", "metrics.scrape_intervl", "did you mean 'scrape_interval'"),
        ("metrics: {grafana: {enabeld: true}}\n", "metrics.grafana.enabeld", "did you mean 'enabled'"),
        ("metrics: {k8s: {service_monitr: true}}\n", "metrics.k8s.service_monitr", "did you mean 'service_monitor'"),
        ("metrics: {scrape_interval: 15}\n", "metrics.scrape_interval", "a Prometheus duration such as 15s"),
        ("metrics: {scrape_interval: 10m}\n", "metrics", "outside 1s..5m"),
        ("metrics: {retention: 10m}\n", "metrics", "less than an hour"),
        ("metrics: {retention_size: 2G}\n", "metrics.retention_size", "a size such as 512MB or 2GB"),
        ("metrics: {bind: localhost}\n", "metrics.bind", "IP"),
        ("metrics: {enabled: yes please}\n", "metrics.enabled", "boolean"),
        ("metrics: {port: 4000}\n", "metrics.port", "the gateway's port"),
        (
            "metrics: {grafana: {enabled: true, port: 9090}}\n",
            "metrics.grafana.port",
            "Prometheus's (metrics.port) port",
        ),
        ("metrics: {k8s: {prometheus_namespace: Monitoring}}\n", "metrics.k8s.prometheus_namespace", "namespace name"),
        ("prometheus:\n  gpus: []\n  command: vllm serve m --max-model-len 1K\n", "prometheus", "name of a service"),
    ],
)
def test_metrics_fields_are_checked_with_the_line_and_a_fix(models, capsys, text, where, message):
    path = models(text + CPU_STACK)
    assert main(["--models", str(path), "--out", str(path.parent / "out"), "-q"]) == 2
    err = capsys.readouterr().err
    line = next(ln for ln in err.splitlines() if f" {where}:" in ln)
    assert line.startswith(f"error: {path}:") and message.lower() in line.lower(), err
    assert not (path.parent / "out").exists()


def test_metrics_are_on_by_default_and_off_means_no_prometheus_at_all(models):
    on = load_plan(models(CPU_STACK))
    assert on.metrics.enabled and not on.metrics.gpu_exporter and not on.grafana
    assert PROMETHEUS_FILE in render_files(on) and "prometheus" in render_compose(on)["services"]
    off = load_plan(models("metrics: {enabled: false, grafana: {enabled: true}}\n" + CPU_STACK))
    files = render_files(off, ("stack", "k8s"))
    assert not [f for f in files if f.startswith(("prometheus/", "grafana/"))]
    doc = render_compose(off)
    assert set(doc["services"]) == {"cpu", "litellm", "redis"} and "prometheus-data" not in doc["volumes"]
    assert "prometheus.io/scrape" not in files["k8s/models/cpu.yaml"]
    assert off.secret_envs == on.secret_envs  # no Grafana password when nothing uses it


def test_light_gateway_metrics_drop_litellms_callback_and_turn_the_guards_counters_on(models):
    full = load_plan(models("gateway: {metrics: full}\n" + CPU_STACK))
    light = load_plan(models("gateway: {metrics: light}\n" + CPU_STACK))
    assert load_plan(models(CPU_STACK)).gateway.metrics == "light"  # the default (issue 47)

    def callbacks(plan):
        return render_litellm(plan, local_api_base)["litellm_settings"]["callbacks"]

    assert "prometheus" in callbacks(full) and "prometheus" not in callbacks(light)
    assert callbacks(light) == [c for c in callbacks(full) if c != "prometheus"]  # the hooks stay
    assert LIGHT_METRICS_ENV not in gateway_env(full.gateway) and gateway_env(light.gateway)[LIGHT_METRICS_ENV] == "1"
    assert gateway_env(light.gateway)["GATEWAY_METRICS_PORT"]  # the gateway's metrics process serves the counters
    env = render_compose(light)["services"]["litellm"]["environment"]
    assert env[LIGHT_METRICS_ENV] == "1"


def test_a_published_prometheus_beyond_loopback_is_warned_about(models, capsys):
    plan = load_plan(models("metrics: {bind: 0.0.0.0}\n" + CPU_STACK))
    assert any("metrics: Prometheus published on 0.0.0.0:9090" in w for w in plan.warnings)
    assert render_compose(plan)["services"]["prometheus"]["ports"] == ["0.0.0.0:9090:9090"]


# --- what is generated ----------------------------------------------------------------------------


def test_golden_files_of_a_gpu_stack_with_grafana(gpu_files):
    picked = {
        rel: text
        for rel, text in gpu_files.items()
        if rel.startswith(("prometheus/", "grafana/")) or rel in ("k8s/monitoring.yaml", "compose/docker-compose.yml")
    }
    assert set(picked) == {
        PROMETHEUS_FILE,
        RULES_FILE,
        DATASOURCE_FILE,
        PROVIDER_FILE,
        DASHBOARD_FILE,
        "k8s/monitoring.yaml",
        "compose/docker-compose.yml",
    }
    assert_golden({f"metrics-gpu/{rel}": text for rel, text in picked.items()})


def test_same_plan_same_bytes(models):
    path = models(GPU_STACK)
    assert render_files(load_plan(path), ("stack", "k8s")) == render_files(load_plan(path), ("stack", "k8s"))


def test_every_backend_and_the_gateway_are_scraped_with_model_and_gpu_labels(models):
    config = prometheus_config(load_plan(models(GPU_STACK)))
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    assert set(jobs) == {"vllm", "litellm", "dcgm"}
    static = jobs["vllm"]["static_configs"]
    assert [(s["targets"], s["labels"]["model"], s["labels"]["gpus"]) for s in static] == [
        (["big:8001"], "big", "0"),
        (["qwen3-8b:8002"], "qwen3-8b", "1"),
        (["small-chat:8003"], "small-chat", "1"),
    ]
    assert jobs["litellm"]["static_configs"] == [{"targets": ["litellm:4001"]}]
    assert jobs["dcgm"]["static_configs"] == [{"targets": ["dcgm-exporter:9400"]}]
    assert config["global"]["scrape_interval"] == "30s"
    cpu = prometheus_config(load_plan(models(CPU_STACK)))
    assert cpu["rule_files"] == ["rules.yml"] and [j["job_name"] for j in cpu["scrape_configs"]] == ["vllm", "litellm"]
    assert cpu["scrape_configs"][0]["static_configs"][0]["labels"]["gpus"] == "none"


def test_compose_services_retention_volume_networks_and_loopback(models):
    doc = render_compose(load_plan(models(GPU_STACK)))
    s = doc["services"]
    prom = s["prometheus"]
    assert (
        "--storage.tsdb.retention.time=30d" in prom["command"]
        and "--storage.tsdb.retention.size=10GB" in prom["command"]
    )
    assert "prometheus-data:/prometheus" in prom["volumes"] and "../prometheus:/etc/prometheus:ro" in prom["volumes"]
    assert prom["networks"] == ["backends", "frontend"] and prom["ports"] == ["127.0.0.1:9091:9090"]
    assert s["grafana"]["networks"] == ["frontend"] and s["grafana"]["ports"] == ["127.0.0.1:3001:3000"]
    assert s["dcgm-exporter"]["networks"] == ["backends"] and "ports" not in s["dcgm-exporter"]
    assert s["dcgm-exporter"]["deploy"]["resources"]["reservations"]["devices"][0]["count"] == "all"
    published = [p for svc in s.values() for p in svc.get("ports", [])]
    assert len(published) == 3 and all(p.startswith("127.0.0.1:") for p in published)
    assert {"prometheus-data", "grafana-data"} <= set(doc["volumes"])
    for name, svc in s.items():
        assert "no-new-privileges:true" in svc["security_opt"], name
    assert "${GRAFANA_ADMIN_PASSWORD:?" in s["grafana"]["environment"]["GF_SECURITY_ADMIN_PASSWORD"]


def test_compose_file_with_every_metrics_service_fits_the_compose_schema(models):
    schema = ROOT.parent / "shared/schemas/compose-spec.json"
    if not schema.exists():
        pytest.skip(f"Compose JSON schema not found at {schema} (it lives in ../shared/schemas)")
    jsonschema.Draft7Validator(json.loads(schema.read_text())).validate(render_compose(load_plan(models(GPU_STACK))))


def test_no_key_in_any_generated_file_and_the_grafana_password_is_a_generated_secret(models, tmp_path):
    path = models(GPU_STACK)
    out = tmp_path / "out"
    assert main(["--models", str(path), "--out", str(out), "-q"]) == 0
    assert main(["k8s", "--models", str(path), "--out", str(out), "-q"]) == 0
    keys = {**read_env_file(out / "compose/.env"), **read_env_file(out / "k8s/secrets.env")}
    assert len(keys["GRAFANA_ADMIN_PASSWORD"]) >= 32
    files = [p for p in out.rglob("*") if p.is_file() and p.name not in (".env", "secrets.env")]
    assert any(p.name == "llm-gateway.json" for p in files)
    for p in files:
        text = p.read_text()
        assert not [k for k, v in keys.items() if v in text], f"a key is written in {p}"


# --- promtool: the config, the rules, and what the rules compute -----------------------------------


def _write(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


@pytest.mark.parametrize("source", ["repo", "cpu-compose", "gpu"])
def test_promtool_accepts_the_generated_config_and_rules(promtool, models, tmp_path, source):
    path = {"repo": ROOT / "models.yml", "cpu-compose": ROOT / "examples/cpu-compose/models.yml"}.get(source) or models(
        GPU_STACK
    )
    out = _write(tmp_path / "out", render_files(load_plan(path)))
    run = _promtool_run(promtool, "check", "config", str(out / PROMETHEUS_FILE))
    assert run.returncode == 0, run.stdout + run.stderr
    if (out / RULES_FILE).exists():
        assert "SUCCESS: 1 rule files found" in run.stdout + run.stderr


STATUSES = [
    "400",
    "401",
    "403",
    "404",
    "408",
    "413",
    "422",
    "429",
    "500",
    "502",
    "503",
    "504",
    "400.0",
    "429.0",
    "None",
    "",
]


def test_the_rules_split_errors_as_make_status_does(promtool, models, tmp_path):
    """promtool's rule unit test: LiteLLM's failed-request counter with every kind of status -> the backend-errors
    rule counts exactly the statuses make status's backend_failure() calls the backends', the client rule the rest."""
    out = _write(tmp_path, {RULES_FILE: render_files(load_plan(ROOT / "examples/cpu-compose/models.yml"))[RULES_FILE]})
    failed = "litellm_proxy_failed_requests_metric_total"
    series = [
        {
            "series": f'{failed}{{job="litellm",requested_model="m",exception_status="{code}",exception_class="E"}}',
            "values": "0+60x10",
        }
        for code in STATUSES
    ]  # +1 per second each
    backend = sum(backend_failure(code) for code in STATUSES)
    test = {
        "rule_files": [str(out / RULES_FILE)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {
                        "expr": BACKEND_ERRORS,
                        "eval_time": "8m",
                        "exp_samples": [
                            {"labels": f'{{__name__="{BACKEND_ERRORS}",requested_model="m"}}', "value": backend}
                        ],
                    },
                    {
                        "expr": CLIENT_ERRORS,
                        "eval_time": "8m",
                        "exp_samples": [
                            {
                                "labels": f'{{__name__="{CLIENT_ERRORS}",requested_model="m"}}',
                                "value": len(STATUSES) - backend,
                            }
                        ],
                    },
                ],
            }
        ],
    }
    assert 0 < backend < len(STATUSES)
    run = _rules_test(promtool, tmp_path, test)
    assert run.returncode == 0, run.stdout + run.stderr
    # control: counting a 404 as the backends' fails
    test["tests"][0]["promql_expr_test"][0]["exp_samples"][0]["value"] = backend + 1
    assert _rules_test(promtool, tmp_path, test).returncode != 0


def test_an_unloaded_on_demand_model_reads_stopped_and_only_a_real_failure_alerts(promtool, tmp_path):
    """promtool's rule unit test on the rules of examples/on-demand: three backends scraped down (up 0): `sleeper`,
    which the controller stopped (state stopped), `waker`, which it is loading, and `broken`, which failed (state
    failed); `always` is not on demand and up. Only `broken` reads down (0) and fires the alert."""
    plan = load_plan(ROOT / "examples/on-demand/models.yml")
    out = _write(tmp_path, {RULES_FILE: render_files(plan)[RULES_FILE]})
    assert "job_name: on-demand" in render_files(plan)[PROMETHEUS_FILE]  # the controller is scraped
    states = {"sleeper": "stopped", "waker": "loading", "broken": "failed"}
    series = [{"series": f'up{{job="vllm",model="{m}"}}', "values": "0x10"} for m in states]
    series.append({"series": 'up{job="vllm",model="always"}', "values": "1x10"})
    series += [
        {
            "series": f'llm_gateway_on_demand_state{{job="on-demand",model="{m}",state="{st}"}}',
            "values": f"{int(st == current)}x10",
        }
        for m, current in states.items()
        for st in ("stopped", "loading", "loaded", "asleep", "failed")
    ]
    want = {"sleeper": 2, "waker": 2, "broken": 0, "always": 1}
    test = {
        "rule_files": [str(out / RULES_FILE)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {
                        "expr": BACKEND_STATE,
                        "eval_time": "5m",
                        "exp_samples": [
                            {"labels": f'{{__name__="{BACKEND_STATE}",model="{m}"}}', "value": v}
                            for m, v in want.items()
                        ],
                    }
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "5m",
                        "alertname": BACKEND_DOWN_ALERT,
                        "exp_alerts": [
                            {
                                "exp_labels": {"severity": "critical", "model": "broken"},
                                "exp_annotations": {
                                    "summary": "broken: its backend is down (Prometheus cannot scrape it, "
                                    "and it is not an on-demand model the controller stopped)"
                                },
                            }
                        ],
                    }
                ],
            }
        ],
    }
    run = _rules_test(promtool, tmp_path, test)
    assert run.returncode == 0, run.stdout + run.stderr
    # control: the stopped model read as down fails
    test["tests"][0]["promql_expr_test"][0]["exp_samples"][0]["value"] = 0
    assert _rules_test(promtool, tmp_path, test).returncode != 0


@pytest.mark.parametrize("code", [str(c) for c in range(100, 600)] + [f"{c}.0" for c in (400, 404, 408, 429, 500)])
def test_backend_failure_is_every_status_but_the_clients_4xx(code):
    assert backend_failure(code) is not (400 <= int(float(code)) < 500 and int(float(code)) not in (408, 429))


def test_the_dashboards_error_panels_use_the_same_rule(models):
    exprs = dict((title, e) for title, e in queries(dashboard(load_plan(models(GPU_STACK)))))
    backend = next(e for t, e in exprs.items() if t.startswith("Gateway errors (backend failures)"))
    client = next(e for t, e in exprs.items() if t.startswith("Gateway client errors"))
    assert failed_requests(True) in backend and failed_requests(False) in client


def test_promtool_refuses_a_broken_config(promtool, tmp_path):
    """Control: the check can fail."""
    bad = tmp_path / "prometheus.yml"
    bad.write_text(
        "global: {scrape_interval: 15s}\nscrape_configs:\n- job_name: x\n  static_configs: [{targets: [a:1]}]\n"
        "- job_name: x\n  static_configs: [{targets: [b:1]}]\n"
    )
    assert _promtool_run(promtool, "check", "config", str(bad)).returncode != 0


def test_each_gpu_is_mapped_to_the_models_sharing_it(promtool, gpu_files, tmp_path):
    """promtool's rule unit test: DCGM series for GPUs 0 and 1 -> used and given memory with models= labels."""
    out = _write(tmp_path, {RULES_FILE: gpu_files[RULES_FILE]})
    mib = 1024

    def dcgm(gpu, metric):
        return f'{metric}{{gpu="{gpu}",UUID="GPU-{gpu}",Hostname="h",modelName="H100"}}'

    test = {
        "rule_files": [str(out / RULES_FILE)],
        "evaluation_interval": "30s",
        "tests": [
            {
                "interval": "30s",
                "input_series": [
                    {"series": dcgm(0, "DCGM_FI_DEV_FB_USED"), "values": f"{60 * mib}x4"},
                    {"series": dcgm(0, "DCGM_FI_DEV_FB_FREE"), "values": f"{20 * mib}x4"},
                    {"series": dcgm(1, "DCGM_FI_DEV_FB_USED"), "values": f"{40 * mib}x4"},
                    {"series": dcgm(1, "DCGM_FI_DEV_FB_FREE"), "values": f"{40 * mib}x4"},
                ],
                "promql_expr_test": [
                    {
                        "expr": GPU_USED,
                        "eval_time": "1m",
                        "exp_samples": [
                            {
                                "labels": f'{{__name__="{GPU_USED}",gpu="0",UUID="GPU-0",Hostname="h",modelName="H100",'
                                'models="big"}',
                                "value": 0.75,
                            },
                            {
                                "labels": f'{{__name__="{GPU_USED}",gpu="1",UUID="GPU-1",Hostname="h",modelName="H100",'
                                'models="qwen3-8b,small-chat"}',
                                "value": 0.5,
                            },
                        ],
                    },
                    {
                        "expr": GPU_GIVEN,
                        "eval_time": "1m",
                        "exp_samples": [
                            {"labels": f'{{__name__="{GPU_GIVEN}",gpu="0",models="big"}}', "value": 0.92},
                            {
                                "labels": f'{{__name__="{GPU_GIVEN}",gpu="1",models="qwen3-8b,small-chat"}}',
                                "value": 0.6 + 0.3,
                            },
                        ],
                    },
                    {
                        "expr": GPU_MODELS,
                        "eval_time": "1m",
                        "exp_samples": [
                            {"labels": f'{{__name__="{GPU_MODELS}",gpu="0",models="big"}}', "value": 1},
                            {"labels": f'{{__name__="{GPU_MODELS}",gpu="1",models="qwen3-8b,small-chat"}}', "value": 1},
                        ],
                    },
                ],
            }
        ],
    }
    run = _rules_test(promtool, tmp_path, test)
    assert run.returncode == 0, run.stdout + run.stderr
    # control: a wrong expectation fails
    test["tests"][0]["promql_expr_test"][1]["exp_samples"][1]["value"] = 1.0
    assert _rules_test(promtool, tmp_path, test).returncode != 0


def test_every_dashboard_query_is_valid_promql(promtool, models, tmp_path):
    """Each panel's expression, as a recording rule, passes `promtool check rules` (PromQL syntax)."""
    dash = dashboard(load_plan(models(GPU_STACK)))
    rules = [
        {"record": f"dashboard:q{i}", "expr": expr.replace(RATE, "1m")} for i, (_, expr) in enumerate(queries(dash))
    ]
    (tmp_path / "q.yml").write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    run = _promtool_run(promtool, "check", "rules", str(tmp_path / "q.yml"))
    assert run.returncode == 0 and f"SUCCESS: {len(rules)} rules found" in run.stdout, run.stdout + run.stderr
    (tmp_path / "q.yml").write_text(
        yaml.safe_dump({"groups": [{"name": "d", "rules": [{"record": "x:y", "expr": "sum by (model (up)"}]}]})
    )
    assert _promtool_run(promtool, "check", "rules", str(tmp_path / "q.yml")).returncode != 0  # control


# --- the dashboard against Grafana's published schema ----------------------------------------------


def _schema(name: str, definition: str | None = None) -> dict:
    schema = json.loads((FIXTURES / "grafana" / f"{name}.jsonschema.json").read_text())
    return {**schema, "$ref": f"#/definitions/{definition}"} if definition else schema


def _dashboard_problems(dash: dict) -> list[str]:
    validator = jsonschema.Draft7Validator(_schema("dashboard"))
    problems = [f"dashboard: {e.message} at {list(e.absolute_path)}" for e in validator.iter_errors(dash)]
    query = jsonschema.Draft7Validator(_schema("prometheus", "Dataquery"))
    options = jsonschema.Draft7Validator(_schema("timeseries", "Options"))
    for panel in dash["panels"]:
        if panel["type"] == "row":
            continue
        problems += [f"{panel['title']}: target {e.message}" for t in panel["targets"] for e in query.iter_errors(t)]
        problems += [f"{panel['title']}: options {e.message}" for e in options.iter_errors(panel["options"])]
    return problems


@pytest.mark.parametrize("stack", [GPU_STACK, CPU_STACK])
def test_the_dashboard_fits_grafanas_dashboard_schema(models, stack):
    dash = dashboard(load_plan(models(stack)))
    assert not _dashboard_problems(dash)
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    titles = [p["title"] for p in dash["panels"] if p["type"] == "row"]
    assert titles == (["Models", "Gateway", "GPUs"] if stack == GPU_STACK else ["Models", "Gateway"])


def test_the_schema_check_catches_a_wrong_dashboard(models):
    """Control: misspelt fields, a wrong grid width and a query without expr are all caught."""
    dash = dashboard(load_plan(models(CPU_STACK)))
    panel = dash["panels"][1]
    panel["gridPos"]["w"] = 30
    panel["tittle"] = "x"
    panel["targets"][0].pop("expr")
    dash["schemaVersion"] = "39"
    problems = _dashboard_problems(dash)
    assert len(problems) >= 3, problems


def test_the_dashboard_shows_what_issue_17_asks_for(models):
    exprs = " ".join(e for _, e in queries(dashboard(load_plan(models(GPU_STACK)))))
    for metric in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:e2e_request_latency_seconds_bucket",
        "vllm:num_preemptions_total",
        "litellm_proxy_total_requests_metric_total",
        "litellm_proxy_failed_requests_metric_total",
        GPU_USED,
        GPU_GIVEN,
    ):
        assert metric in exprs, metric
    assert "histogram_quantile(0.5," in exprs and "histogram_quantile(0.95," in exprs


def test_grafana_is_provisioned_with_the_compose_prometheus(gpu_files):
    ds = yaml.safe_load(gpu_files[DATASOURCE_FILE])["datasources"][0]
    assert ds["url"] == "http://prometheus:9090" and ds["uid"] == "llm-gateway-prometheus"
    assert ds["jsonData"]["timeInterval"] == "30s"
    provider = yaml.safe_load(gpu_files[PROVIDER_FILE])["providers"][0]
    assert provider["options"]["path"] == "/etc/grafana/dashboards" and provider["allowUiUpdates"] is False
    dash = json.loads(gpu_files[DASHBOARD_FILE])
    assert {t["datasource"]["uid"] for p in dash["panels"] if p["type"] != "row" for t in p["targets"]} == {ds["uid"]}
    assert dash["description"].startswith("GENERATED from models.yml")


# --- Kubernetes ------------------------------------------------------------------------------------


def _docs(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


def test_pods_carry_scrape_annotations_and_prometheus_may_reach_the_backends(gpu_files):
    backend = {d["kind"]: d for d in _docs(gpu_files["k8s/models/qwen3-8b.yaml"])}
    assert backend["Deployment"]["spec"]["template"]["metadata"]["annotations"] == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "8002",
        "prometheus.io/path": "/metrics",
    }
    gateway = next(d for d in _docs(gpu_files["k8s/gateway.yaml"]) if d["kind"] == "Deployment")
    assert gateway["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == "4001"
    gate, scraper = backend["NetworkPolicy"]["spec"]["ingress"]
    assert scraper["from"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
        }
    ]
    assert scraper["ports"] == gate["ports"] == [{"protocol": "TCP", "port": 8002}]


def test_service_monitors_fit_the_prometheus_operator_crd(gpu_files):
    crd = yaml.safe_load((FIXTURES / "prometheus-operator/monitoring.coreos.com_servicemonitors.yaml").read_text())
    (v1,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema = _closed(v1["schema"]["openAPIV3Schema"])
    docs = _docs(gpu_files["k8s/monitoring.yaml"])
    monitors = [d for d in docs if d["kind"] == "ServiceMonitor"]
    assert [m["metadata"]["name"] for m in monitors] == ["llm-gateway-backends", "llm-gateway-gateway"]
    for m in monitors:
        jsonschema.validate(m, schema)
        assert m["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        assert m["spec"]["endpoints"][0]["interval"] == "30s"
    broken = {**monitors[0], "spec": {**monitors[0]["spec"], "endpoints": [{"port": "http", "intervall": "30s"}]}}
    with pytest.raises(jsonschema.ValidationError):  # control: an unknown field is refused
        jsonschema.validate(broken, schema)
    (service,) = [d for d in docs if d["kind"] == "Service"]
    for version in ("1.35", "1.36", "1.37"):
        kubernetes_validate.validate(service, version, strict=True)
    assert service["spec"]["type"] == "ClusterIP" and service["spec"]["ports"][0]["port"] == 4001
    assert "monitoring.yaml" in yaml.safe_load(gpu_files["k8s/kustomization.yaml"])["resources"]


def _closed(schema: dict) -> dict:
    """The CRD's schema with unknown fields refused where it lists the properties (the API server prunes them)."""
    if isinstance(schema, dict):
        out = {k: _closed(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_closed(x) for x in schema]
    return schema


def test_no_service_monitor_unless_asked(models):
    files = render_files(load_plan(models(CPU_STACK)), ("k8s",))
    assert "k8s/monitoring.yaml" not in files
    assert "monitoring.yaml" not in yaml.safe_load(files["k8s/kustomization.yaml"])["resources"]
