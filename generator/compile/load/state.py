"""What build_plan's concerns share (loader.build_plan, docs/architecture.md "The pipeline"): the input, what they
found, one record per self-hosted model that the per-model concerns fill in, and the backends planned so far.

A concern reads what the concerns before it added and adds its own; only the parts of the plan that the file's blocks
make (gateway, metrics, controller, people) are returned to build_plan instead. A finding is (path in models.yml,
message): `stop_on_findings` turns them into located problems, and nothing is planned past it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import ConfigError, Problem
from ..plan import AdapterPlan, ModelPlan
from .model_files import ModelFiles
from .pooling import CHAT, Kind
from .ports import Ports
from .schema import ModelEntry, ModelsFile
from .vllm_command import Catalog, ServeCommand
from .yaml_source import Source

Finding = tuple[tuple, str]  # (path in models.yml, message)


@dataclass
class Model:
    """One self-hosted entry of models.yml as the per-model concerns fill it in, each the fields it owns."""

    name: str
    entry: ModelEntry
    stopped: bool = False  # a concern found it cannot be planned (its finding says why): the later ones skip it
    command: ServeCommand | None = None  # commands.parse (a command that does not parse stops the model)
    files: ModelFiles | None = None  # model_files.read: its config and weights, from disk or the Hub
    config_context: tuple[int, str] | None = None  # context.resolve: what vLLM derives from the config, and where
    context: int = 0  # context.resolve
    context_from: str = ""  # context.resolve: where a context taken from the config came from
    auto_context: bool = False  # context.resolve: --max-model-len auto (or -1)
    kind: Kind = Kind(CHAT, "")  # pooling.decide
    max_tokens: int = 0  # output_budget.plan (0 for a pooling model)
    max_tokens_derived: bool = False  # output_budget.plan: half the context, chosen by the generator
    adapters: tuple[AdapterPlan, ...] = ()  # adapters.serve
    lora_args: tuple[str, ...] = ()  # adapters.serve: the flags that serve them
    gpu_sets: list[tuple[int, ...]] = field(default_factory=list)  # gpus.place: each replica's GPUs
    backends: list[ModelPlan] = field(default_factory=list)  # backends.plan: the model, or each replica
    weights: dict[str, int | None] = field(default_factory=dict)  # backends.plan: bytes of each backend's weights (fit)
    notes: list[str] = field(default_factory=list)  # the model's own notes (after the file's in the plan)

    @property
    def cmd(self) -> ServeCommand:
        """The parsed command: every concern after commands.parse sees only models whose command parsed."""
        if self.command is None:
            raise RuntimeError(f"{self.name}: its command did not parse (commands.parse stops such a model)")
        return self.command

    @property
    def meta(self) -> ModelFiles:
        """What model_files.read found of the model's files (it reads them for every model whose command parsed)."""
        if self.files is None:
            raise RuntimeError(f"{self.name}: its files were not read (model_files.read)")
        return self.files


@dataclass
class State:
    """The input (source, parsed file, flag catalog), the collectors every concern adds to, and the plan's models as
    they grow (the per-model concerns append each backend; the concerns across models may replace them)."""

    src: Source
    file: ModelsFile
    catalog: Catalog
    models: list[Model] = field(init=False)  # every self-hosted entry, in file order
    findings: list[Finding] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # commands that do not parse: listed first
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # the file's notes; each model's own follow them (Model.notes)
    backend_names: dict[str, list[str]] = field(default_factory=dict)  # replicas.name_backends: per model, file order
    backends: list[ModelPlan] = field(default_factory=list)  # every backend planned, in file order
    hosted: list[ModelPlan] = field(default_factory=list)  # hosted.plan
    ports: Ports = field(default_factory=Ports)  # ports.explicit and ports.assign

    def __post_init__(self) -> None:
        self.models = [Model(name, entry) for name, entry in self.file.models.items()]

    def commands(self) -> dict[str, ServeCommand]:
        """Each model's parsed command, by models.yml name."""
        return {m.name: m.command for m in self.models if m.command is not None}

    def stop_on_findings(self) -> None:
        """Every problem at once, each located in models.yml (a replica's finding points at its model's entry)."""
        if not self.findings and not self.problems:
            return
        owner = {backend: name for name, backends in self.backend_names.items() for backend in backends}
        located = dict.fromkeys(
            ((owner.get(path[0], path[0]), *path[1:]) if path else path, msg) for path, msg in self.findings
        )
        raise ConfigError(
            self.problems + [Problem(self.src.where(path), ".".join(map(str, path)), msg) for path, msg in located]
        )
