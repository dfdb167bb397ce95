"""The plan: plain, validated data that every renderer and runtime consumes. No YAML, no checks."""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class K8sToleration:
    key: str | None
    operator: str  # Exists | Equal
    value: str | None
    effect: str | None
    toleration_seconds: int | None


@dataclass(frozen=True)
class ModelK8sPlan:
    """What only the Kubernetes target reads (models.yml `k8s:`, merged over `defaults.k8s`)."""

    node_selector: dict[str, str] = field(default_factory=dict)  # sorted
    tolerations: tuple[K8sToleration, ...] = ()
    storage_class: str | None = None  # None: the cluster's default StorageClass
    cache_size: str = "100Gi"
    gpu_resource: str | None = None  # None: nvidia.com/gpu, or nvidia.com/gpu.shared when the GPU is shared
    cpu: str | None = None  # resources.requests
    memory: str | None = None


@dataclass(frozen=True)
class GatewayK8sPlan:
    replicas: int = 1
    expose: str = "none"  # none | loadbalancer | nodeport
    namespace: str = "llm-gateway"


@dataclass(frozen=True)
class RequestLimits:
    """models.yml `limits:` (defaults' under the model's): what one request may ask of this model. The gateway
    guard reads them from the rendered config (model_info.gateway_limits) and answers 400/413 past them."""

    n: int = 1
    best_of: int = 1
    tools: int = 128
    logit_bias: int = 300
    request_bytes: int = 16 * 1024 * 1024


@dataclass(frozen=True)
class Mount:
    source: str  # host path as written (compose resolves relative ones and ${VAR}) or a volume name
    target: str  # absolute path in the container
    read_only: bool

    @property
    def named(self) -> bool:
        """A named volume (compose declares it) rather than a host path."""
        return not self.source.startswith(("/", ".", "~", "$"))

    def __str__(self) -> str:
        return f"{self.source}:{self.target}" + (":ro" if self.read_only else "")


@dataclass(frozen=True)
class OnDemandPlan:
    """models.yml `on_demand:` of one model: loaded when a request asks for it, unloaded when idle or when
    another model of its group must load. The on-demand controller (generator/shipped/on_demand/) is the only one
    that starts and stops such a model; the gateway reaches it through the controller."""

    group: str  # models of one group take turns: at most one of them loaded at a time (default: the model's name)
    idle_timeout: (
        float  # seconds without a request (none in flight) before it unloads; 0: only when its group needs room
    )
    unload: str  # "stop": the backend process/container stops (everywhere); "sleep": vLLM sleep level 1 (GPU only)


@dataclass(frozen=True)
class ControllerPlan:
    """The on-demand controller's settings (models.yml `on_demand:` top-level block); present in the plan only
    when some model is on demand."""

    port: int = 4002  # internal: the gateway's api_base for on-demand models (never published)
    queue: int = 64  # requests waiting per model while it loads; past that: 503 + Retry-After
    load_timeout: float = 900  # seconds a waiting request (and a load) may take; past that: 503 + Retry-After
    drain_timeout: float = 300  # seconds an unload waits for requests in flight to finish before it cuts them
    docker_socket: bool = False  # compose: the controller may start/stop backend containers (opt-in, SECURITY.md)


@dataclass(frozen=True)
class ScalePlan:
    """models.yml `replicas: {min, max}` (compile/load/autoscale.py): the model's copies follow its load. Copies
    1..min always run; the others are on-demand backends (ModelPlan.on_demand) that the controller starts when the
    requests waiting per running copy stay above `waiting` for `up_after` s, and stops after `idle` s without a
    request (drained first). min 0: copy 1 loads on a request, as an on-demand model."""

    min: int
    max: int
    waiting: int  # vllm:num_requests_waiting per running copy above which ...
    up_after: float  # ... for this long, a copy starts
    idle: float  # a copy above min with no request this long drains and stops


@dataclass(frozen=True)
class AdapterPlan:
    """A LoRA adapter of a chat model (models.yml `adapters:`): a gateway model of its own name, served by its base
    model's backend(s) (vLLM --lora-modules), with the base's context, clamp, parsers and limits."""

    name: str  # what clients send as "model"; vLLM's LoRA name
    source: str  # what vLLM loads: the directory as the backend sees it, or a Hugging Face repo id
    rank: int | None  # the largest rank of its adapter_config.json (r, rank_pattern); None: not at hand
    max_tokens: int  # default output budget; < the base's context
    max_tokens_derived: bool
    litellm_params: dict[str, object]  # request defaults, sorted, includes max_tokens
    local: bool = True  # a directory (models.yml `path:`), not a Hub repo id (`repo:`)
    description: str = ""
    rank_from: str = ""  # where the rank was read (summary), or why it is unknown


@dataclass(frozen=True)
class HostedSpec:
    """Where a hosted model is served (models.yml `provider:` entry, compile/load/hosted.py): an API somebody else
    runs. Its ModelPlan has no command, image, GPU or port; the gateway calls the API with the key in `key_env`."""

    provider: str  # openai | anthropic | openai-compatible
    model: str  # the provider's name for it
    api_base: str | None  # None: the provider's own
    key_env: str  # the environment variable that holds the provider's key (the keys file or the environment)
    route: str  # LiteLLM's name for it: <LiteLLM provider>/<model> (openai-compatible APIs take LiteLLM's openai/)
    context_from: str = ""  # where the context came from: "" (models.yml) or LiteLLM's model map
    chat_only: bool = False  # the API is asked for chat completions only: LiteLLM turns /v1/responses and /v1/messages
    # requests into chat completions for it (an OpenAI-compatible API need not serve OpenAI's /v1/responses)


@dataclass(frozen=True)
class NodesPlan:
    """models.yml `nodes:` of one model (compile/load/nodes.py, docs/multinode.md): one vLLM per node, one group. The
    leader (rank 0) is the model's backend (its port, Service, gateway entry); ranks 1.. run headless and serve no
    API. Each node runs the model's own flags plus `args(rank, leader)`; the leader's address is the target's
    (compose: hosts[0]; Kubernetes: LeaderWorkerSet's $(LWS_LEADER_ADDRESS); the local runtime: 127.0.0.1)."""

    count: int
    hosts: tuple[str, ...] = ()  # each node's address, the leader first; () when models.yml gives none (Kubernetes)
    port: int = 29501  # where the nodes meet on the leader (vLLM --master-port)
    backend_flag: bool = True  # the command has no --distributed-executor-backend: the generator adds mp

    def args(self, rank: int | str, leader: str, port: int | None = None) -> tuple[str, ...]:
        """The flags that make a node of the group: rank 0 serves the API, the others run headless. `rank` may be a
        reference the target fills in (a worker template's $(LWS_WORKER_INDEX)); `port` overrides `port`."""
        flags = (
            "--nnodes",
            str(self.count),
            "--node-rank",
            str(rank),
            "--master-addr",
            leader,
            "--master-port",
            str(port or self.port),
            *(("--distributed-executor-backend", "mp") if self.backend_flag else ()),
        )
        return flags if rank in (0, "0") else (*flags, "--headless")


@dataclass(frozen=True)
class ModelPlan:
    """One backend: a model of models.yml, or one replica of a model with `replicas: N` > 1 (then `name` is
    <model>-<i> and `replica_of` the model; every replica has its own GPUs and port, and the same served name,
    key, command and limits). Every rule and renderer works per backend."""

    name: str  # models.yml key (<key>-<i> for a replica): compose service, host name on the backend network
    served_name: str  # what clients put in "model"
    model: str  # Hugging Face repo or path given to `vllm serve`
    flag_args: tuple[str, ...]  # flags after the model, including --served-model-name and --port
    description: str
    image: str
    env: dict[str, str]  # sorted
    gpus: tuple[int, ...]
    port: int  # port vLLM listens on (inside its container, or on 127.0.0.1 locally)
    context: int  # --max-model-len, else context_length, else what vLLM derives from the model's config
    max_tokens: int  # default output budget the gateway applies; always < context (0 for a pooling model)
    max_tokens_derived: bool  # True when the generator chose it (half the context)
    tool_parser: str | None
    reasoning_parser: str | None
    auto_tool_choice: bool
    trust_remote_code: bool
    litellm_params: dict[str, object]  # request defaults, sorted, includes max_tokens
    api_key_env: str  # name of the variable that holds this backend's key
    k8s: ModelK8sPlan = ModelK8sPlan()
    # models that must be healthy before this one starts: the previous model (file order) on each GPU
    # it shares, plus models.yml's `start_after:`; file order, no cycles (compose depends_on, local runtime)
    start_after: tuple[str, ...] = ()
    fit: str = ""  # one line: the fit check's estimate and verdict, or why it was skipped (summary only)
    context_from: str = ""  # where a context taken from the model's config came from ("": the flag or field)
    memory_fraction: float = 0.0  # --gpu-memory-utilization (or vLLM's default): its share of each of its GPUs
    volumes: tuple[Mount, ...] = ()  # models.yml `volumes:` (defaults first, then the model's)
    on_demand: OnDemandPlan | None = None  # None: always on (started with the stack)
    # hosts a client's image_url / video_url / audio_url may name (vLLM --allowed-media-domains); (): none
    media_domains: tuple[str, ...] = ()
    limits: RequestLimits = RequestLimits()
    replica_of: str = ""  # the models.yml key this backend is a replica of ("": the model has one copy)
    replica: int = 0  # 1..replicas for a replica; 0: the model has one copy
    replicas: int = 1  # copies of the model this backend belongs to
    # what vLLM serves for it (compile/load/pooling.py): chat, or a pooling model's embedding / rerank (LiteLLM's
    # model_info.mode); decided by the command and the model's config, and how (kind_from, for the summary)
    kind: str = "chat"
    kind_from: str = ""
    max_logprobs: int = 20  # vLLM --max-logprobs (its default 20; -1: the vocabulary): logprobs per token it computes
    adapters: tuple[AdapterPlan, ...] = ()  # LoRA adapters this backend serves besides the model (chat only)
    # routes between models (compile/load/routing.py, docs/routing.md); served names, models.yml order
    fallbacks: tuple[str, ...] = ()  # tried in turn when this model fails before its first byte
    context_fallbacks: tuple[str, ...] = ()  # larger contexts, for a prompt + budget over this model's
    aliases: tuple[str, ...] = ()  # other names clients may send for this model
    list_aliases: bool = False  # /v1/models lists the aliases too
    hosted: HostedSpec | None = None  # a hosted model (Plan.hosted, never in Plan.models): no backend of ours
    # the vLLM parsers this backend runs repaired (compile/load/parser_repairs.py: their names, tool-call first): its
    # flag_args load the stack's parser plugin, and the renderers give it generator/shipped/parser_repairs/'s files
    parser_repairs: tuple[str, ...] = ()
    # seconds a hung backend (connected, /health silent) waits before the stack restarts it (compile/load/hung.py);
    # None: never (`off`, or an on-demand model: its controller kills a hung one at once)
    restart_when_hung: float | None = None
    nodes: NodesPlan | None = None  # models.yml `nodes:` (compile/load/nodes.py): served across hosts as one group
    scale: ScalePlan | None = None  # replicas: {min, max}: the model's copies follow its load (None: a fixed count)

    @property
    def by_load(self) -> bool:
        """A copy the on-demand controller starts when the model's queue grows (never by a request of its own): a
        copy above the range's min, and above the first (min 0: the first loads on a request)."""
        return self.scale is not None and max(self.replica, 1) > max(self.scale.min, 1)

    @property
    def pooling(self) -> bool:
        """An embedding or rerank model: no text generated, so no max_tokens, clamp, sampling defaults or tools."""
        return self.kind != "chat"

    @property
    def takes_tools(self) -> bool:
        """Requests with tools reach it: a backend with a tool call parser, a hosted model whose API takes them."""
        return self.tool_parser is not None if self.hosted is None else self.auto_tool_choice

    @property
    def serve_args(self) -> tuple[str, ...]:
        return (self.model, *self.flag_args)

    @property
    def compose_host(self) -> str:
        """Where compose's gateway and Prometheus reach this backend: its service name on the backend network, or
        for a model on `nodes:` the leader's address (its nodes run with the host's network: docs/multinode.md)."""
        return self.nodes.hosts[0] if self.nodes and self.nodes.hosts else self.name

    @property
    def entry(self) -> str:
        """The models.yml key this backend comes from (where its errors point)."""
        return self.replica_of or self.name

    def as_adapter(self, a: AdapterPlan) -> ModelPlan:
        """What a client sees of adapter `a`: this model under the adapter's name, with its defaults, output budget
        and description (for client configs; never a backend of its own)."""
        return replace(
            self,
            name=a.name,
            served_name=a.name,
            replica_of="",
            replica=0,
            replicas=1,
            max_tokens=a.max_tokens,
            max_tokens_derived=a.max_tokens_derived,
            litellm_params=a.litellm_params,
            description=a.description,
            adapters=(),
            fallbacks=(),
            context_fallbacks=(),
            aliases=(),
        )


@dataclass(frozen=True)
class GatewayPlan:
    port: int
    bind: str
    image: str
    workers: int | str  # a number, or "auto" (resolved where the gateway runs: gateway_start.py)
    log_level: str  # LITELLM_LOG
    clamp_max_tokens: bool
    request_timeout: int
    stream_timeout: int
    backend_internet: bool
    admin_ui: bool
    autoheal: bool
    ui: bool = True  # the gateway's page at /gateway/ (gateway_hooks/gateway_page.py)
    metrics: str = "light"  # light: the guard's and people.py's counters; full: LiteLLM's prometheus callback
    responses_ttl: int = 30 * 86400  # seconds a stored /v1/responses answer is kept (0: none: response_store.py)
    master_key_env: str = "LITELLM_MASTER_KEY"
    k8s: GatewayK8sPlan = GatewayK8sPlan()


@dataclass(frozen=True)
class GrafanaPlan:
    enabled: bool = False
    port: int = 3000
    image: str = ""
    password_env: str = "GRAFANA_ADMIN_PASSWORD"  # in the keys file, like the other secrets


@dataclass(frozen=True)
class MetricsK8sPlan:
    service_monitor: bool = False
    service_monitor_labels: dict[str, str] = field(default_factory=dict)  # sorted
    prometheus_namespace: str = "monitoring"
    prometheus_pod_labels: dict[str, str] = field(default_factory=dict)  # sorted


@dataclass(frozen=True)
class MetricsPlan:
    """models.yml `metrics:`: Prometheus (compose), what the Kubernetes target adds for a cluster's Prometheus."""

    enabled: bool = True
    port: int = 9090  # Prometheus UI/API on the host, on `bind`
    bind: str = "127.0.0.1"
    scrape_interval: str = "15s"
    retention: str = "15d"
    retention_size: str = "2GB"
    image: str = ""
    gpu_exporter: bool = False  # True only when some model has GPUs and models.yml did not turn it off
    gpu_exporter_image: str = ""
    grafana: GrafanaPlan = GrafanaPlan()
    k8s: MetricsK8sPlan = MetricsK8sPlan()


@dataclass(frozen=True)
class PersonPlan:
    """models.yml `people:` one entry: who may use which models, within which limits (None: no limit). The gateway
    reads these from litellm/people.json; the person's key stays in the keys file, the gateway gets its hash."""

    name: str
    models: tuple[str, ...] | None = None  # served names (what clients send); None: every model
    rpm: int | None = None
    tpm: int | None = None
    parallel: int | None = None
    tokens_per_day: int | None = None
    tokens_per_month: int | None = None
    stored_responses: int | None = None  # bytes of stored /v1/responses answers (response_store.py)
    description: str = ""

    @property
    def counted(self) -> bool:
        """Some limit of this person must be counted across gateway workers and replicas (in Redis)."""
        return any(
            v is not None
            for v in (
                self.rpm,
                self.tpm,
                self.parallel,
                self.tokens_per_day,
                self.tokens_per_month,
                self.stored_responses,
            )
        )

    @property
    def key_env(self) -> str:
        """The variable of the keys file that holds this person's key (never given to the gateway)."""
        return "PERSON_KEY_" + self.name.upper().replace("-", "_")


@dataclass(frozen=True)
class RedisPlan:
    """The stack's Redis: state the gateway's workers (and replicas) share, e.g. rate-limit counters. In the plan
    only when the stack needs it (loader.needs_redis). Reached by the gateway through REDIS_HOST / REDIS_PORT /
    REDIS_PASSWORD (gateway_process.redis_env); never published on the host."""

    image: str  # compose and Kubernetes (gateway.redis_image); the local runtime runs Debian's redis-server
    port: int = 6379  # in the stack (compose service, Kubernetes Service); the local runtime takes a free port
    password_env: str = "REDIS_PASSWORD"  # in the keys file, like the other secrets
    service: str = "redis"  # compose service / Kubernetes Service name (the gateway's REDIS_HOST)
    # its background work (expiring keys, client timeouts) once a second, not Redis's 10: an idle redis-server used
    # 2.3 % of a core here with 10, 0.7 % with 1 (docs/testing.md, "Idle CPU"); an expired key is dropped when read
    hz: int = 1


@dataclass(frozen=True)
class Plan:
    source: str  # models.yml path as given; named in every generated header
    source_digest: str  # sha256 of models.yml
    vllm_version: str  # version of the flag catalog the commands were checked against
    models: tuple[ModelPlan, ...]
    gateway: GatewayPlan
    warnings: tuple[str, ...] = field(default=())
    notes: tuple[str, ...] = field(default=())  # informational lines for the summary (e.g. assumed GPU memory)
    metrics: MetricsPlan = MetricsPlan(enabled=False)
    controller: ControllerPlan | None = None  # set when some model is on demand
    people: tuple[PersonPlan, ...] = ()  # models.yml order
    redis: RedisPlan | None = None  # set when the stack needs a Redis (loader.needs_redis)
    hosted: tuple[ModelPlan, ...] = ()  # models.yml's hosted models (ModelPlan.hosted set), file order

    @property
    def on_demand(self) -> tuple[ModelPlan, ...]:
        return tuple(m for m in self.models if m.on_demand is not None)

    def required_controller(self) -> ControllerPlan:
        """`controller`, for what renders the on-demand controller (called only when some model is on demand)."""
        if self.controller is None:
            raise ValueError("no model is on demand: the plan has no controller")
        return self.controller

    def required_redis(self) -> RedisPlan:
        """`redis`, for what renders the stack's Redis or points at it (called only when the stack needs one)."""
        if self.redis is None:
            raise ValueError("the stack needs no Redis: the plan has none")
        return self.redis

    @property
    def served(self) -> tuple[ModelPlan, ...]:
        """One model per name clients send (a replicated model's first replica), then the hosted models: client
        configs, /v1/models, routes."""
        backends = tuple(
            {m.served_name: m for m in reversed(self.models)}[name]
            for name in dict.fromkeys(m.served_name for m in self.models)
        )
        return backends + self.hosted

    @property
    def client_models(self) -> tuple[ModelPlan, ...]:
        """Every model name clients send, one ModelPlan each: `served`, each followed by its LoRA adapters
        (ModelPlan.as_adapter): client configs."""
        return tuple(x for m in self.served for x in (m, *(m.as_adapter(a) for a in m.adapters)))

    @property
    def aliases(self) -> dict[str, str]:
        """Every alias -> the served name of its model."""
        return {alias: m.served_name for m in self.served for alias in m.aliases}

    @property
    def replicated(self) -> tuple[str, ...]:
        """Served names of the models with more than one replica."""
        return tuple(dict.fromkeys(m.served_name for m in self.models if m.replicas > 1))

    @property
    def grafana(self) -> bool:
        return self.metrics.enabled and self.metrics.grafana.enabled

    @property
    def provider_key_envs(self) -> tuple[str, ...]:
        """The variables that hold hosted models' keys: the admin's to set (never made here), given to the gateway."""
        return tuple(dict.fromkeys(m.hosted.key_env for m in self.hosted if m.hosted))

    @property
    def secret_envs(self) -> tuple[str, ...]:
        grafana = (self.metrics.grafana.password_env,) if self.grafana else ()
        redis = (self.redis.password_env,) if self.redis else ()
        return tuple(
            dict.fromkeys((self.gateway.master_key_env, *(m.api_key_env for m in self.models), *grafana, *redis))
        )
