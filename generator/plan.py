"""The plan: plain, validated data that every renderer and runtime consumes. No YAML, no checks."""

from __future__ import annotations

from dataclasses import dataclass, field


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
class ModelPlan:
    name: str  # models.yml key: compose service, host name on the backend network
    served_name: str  # what clients put in "model"
    model: str  # Hugging Face repo or path given to `vllm serve`
    flag_args: tuple[str, ...]  # flags after the model, including --served-model-name and --port
    description: str
    image: str
    env: dict[str, str]  # sorted
    gpus: tuple[int, ...]
    port: int  # port vLLM listens on (inside its container, or on 127.0.0.1 locally)
    context: int  # --max-model-len (or context_length)
    max_tokens: int  # default output budget the gateway applies; always < context
    max_tokens_derived: bool  # True when the generator chose it (half the context)
    tool_parser: str | None
    reasoning_parser: str | None
    auto_tool_choice: bool
    trust_remote_code: bool
    litellm_params: dict[str, object]  # request defaults, sorted, includes max_tokens
    api_key_env: str  # name of the variable that holds this backend's key
    volumes: tuple["Mount", ...] = ()  # models.yml `volumes:` (defaults first, then the model's)

    @property
    def serve_args(self) -> tuple[str, ...]:
        return (self.model, *self.flag_args)


@dataclass(frozen=True)
class GatewayPlan:
    port: int
    bind: str
    image: str
    workers: int
    log_level: str  # LITELLM_LOG
    clamp_max_tokens: bool
    request_timeout: int
    stream_timeout: int
    backend_internet: bool
    admin_ui: bool
    autoheal: bool
    master_key_env: str = "LITELLM_MASTER_KEY"


@dataclass(frozen=True)
class Plan:
    source: str  # models.yml path as given; named in every generated header
    source_digest: str  # sha256 of models.yml
    vllm_version: str  # version of the flag catalog the commands were checked against
    models: tuple[ModelPlan, ...]
    gateway: GatewayPlan
    warnings: tuple[str, ...] = field(default=())

    @property
    def secret_envs(self) -> tuple[str, ...]:
        return (self.gateway.master_key_env, *(m.api_key_env for m in self.models))
