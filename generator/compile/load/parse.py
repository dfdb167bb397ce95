"""models.yml -> its typed shape (schema.ModelsFile): a model name that cannot be a host name, a schema error as one
line with the field's path (and the closest field name for an unknown one); all problems at once."""

from __future__ import annotations

from pydantic import BaseModel, ValidationError

from ...errors import ConfigError, Problem
from .schema import (
    GPU_LISTS,
    MODEL_NAME,
    REPLICA_FORMS,
    RESERVED_NAMES,
    TOP_LEVEL,
    HostedEntry,
    Limits,
    Media,
    Metrics,
    ModelEntry,
    ModelsFile,
    OnDemand,
    Person,
    ReplicaRange,
)
from .yaml_source import Source


def _schema_problems(src: Source, exc: ValidationError) -> list[Problem]:
    problems = []
    for err in exc.errors():
        loc = err["loc"]
        path = tuple(
            p
            for p in (loc[1:] if loc and loc[0] in ("models", "hosted") else loc)
            if p not in (*GPU_LISTS, *REPLICA_FORMS)
        )
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = f"unknown field {path[-1]!r}" + _field_hint(path, bool(loc) and loc[0] == "hosted")
        elif err["type"] == "missing":
            msg = f"required field {path[-1]!r} is missing"
        elif err["type"] in ("model_type", "dict_type"):
            msg = (
                f"expected a mapping of fields (name: value lines), "
                f"got {type(err['input']).__name__} {err['input']!r:.40}"
            )
        problems.append(Problem(src.where(path), ".".join(map(str, path)), msg))
    return problems


def _field_hint(path: tuple, hosted: bool = False) -> str:
    import difflib

    from .schema import (
        Controller,
        Defaults,
        Gateway,
        GatewayK8s,
        Grafana,
        LitellmParams,
        MetricsK8s,
        ModelK8s,
        Toleration,
    )

    parent = path[-3] if len(path) > 2 and isinstance(path[-2], int) else path[-2] if len(path) > 1 else ""
    top: dict[str, type[BaseModel]] = {"gateway": GatewayK8s, "metrics": MetricsK8s}
    k8s = top.get(str(path[0]), ModelK8s)
    on_demand = Controller if len(path) == 2 else OnDemand  # top-level block, or a model's (or defaults')
    if path[0] == "people" and len(path) == 3:
        close = difflib.get_close_matches(str(path[-1]), list(Person.model_fields), n=1)
        return f"; did you mean {close[0]!r}?" if close else f"; valid: {', '.join(Person.model_fields)}"
    if len(path) > 3 and path[-3] == "adapters":  # <model>.adapters.<name>.<field>
        from .schema import Adapter

        close = difflib.get_close_matches(str(path[-1]), list(Adapter.model_fields), n=1)
        return f"; did you mean {close[0]!r}?" if close else f"; valid: {', '.join(Adapter.model_fields)}"
    sections: dict[str, type[BaseModel]] = {
        "litellm": LitellmParams,
        "gateway": Gateway,
        "defaults": Defaults,
        "metrics": Metrics,
        "grafana": Grafana,
        "k8s": k8s,
        "tolerations": Toleration,
        "on_demand": on_demand,
        "media": Media,
        "limits": Limits,
        "replicas": ReplicaRange,
    }
    blocks: dict[str, type[BaseModel]] = {"gateway": Gateway, "metrics": Metrics}
    entry: type[BaseModel] = HostedEntry if hosted else ModelEntry
    owner = sections.get(str(parent)) or blocks.get(str(path[0]), entry)
    close = difflib.get_close_matches(str(path[-1]), list(owner.model_fields), n=1)
    return f"; did you mean {close[0]!r}?" if close else f"; valid: {', '.join(owner.model_fields)}"


def _name_problems(src: Source) -> list[Problem]:
    problems = []
    for name in src.data:
        if name in RESERVED_NAMES - set(TOP_LEVEL):
            problems.append(
                Problem(
                    src.where((name,)), str(name), f"{name!r} is the name of a service of the stack; rename the model"
                )
            )
        elif name not in RESERVED_NAMES and not (isinstance(name, str) and MODEL_NAME.match(name)):
            problems.append(
                Problem(
                    src.where((name,)),
                    str(name),
                    "model names become service and host names: use lowercase letters, digits "
                    "and '-', starting and ending with a letter or digit (e.g. qwen3-8b)",
                )
            )
    return problems


def _is_hosted(entry: object) -> bool:
    """An entry with `provider:` is a hosted model (schema.HostedEntry), any other a self-hosted one."""
    return isinstance(entry, dict) and "provider" in entry


def parse_file(src: Source) -> ModelsFile:
    """models.yml's entries, typed (schema.py); every problem of names, fields and types at once."""
    problems = _name_problems(src)
    doc = {k: v for k, v in src.data.items() if k in TOP_LEVEL}
    entries = {k: v for k, v in src.data.items() if k not in RESERVED_NAMES}
    doc["hosted"] = {k: v for k, v in entries.items() if _is_hosted(v)}
    doc["models"] = {k: v for k, v in entries.items() if not _is_hosted(v)}
    if not entries and not problems:
        problems.append(
            Problem(src.where(()), "", "no models: add at least one `name: {command: vllm serve ..., gpus: [...]}`")
        )
    try:
        parsed = ModelsFile.model_validate(doc)
    except ValidationError as exc:
        raise ConfigError(problems + _schema_problems(src, exc)) from None
    if problems:
        raise ConfigError(problems)
    return parsed
