"""The parser conformance stacks: examples/cpu-parsers/models.yml (one family model per wire format, each with its
family's vLLM parsers) behind the real gateway, on free ports, in BATCHES: the families of one batch run at a time
(~1.2 GB per backend; all ten at once beside the demo stack and CI's compose stack would be ~13 GB more), each
batch started once, as the matrix's cells come family by family (`make parsers`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from generator.compile.load.loader import load_plan
from generator.compile.load.schema import TOP_LEVEL
from generator.demo.families import Family, families
from generator.demo.family_model import family_of
from generator.operate.runtime.local import LocalStack

from ..conftest import ROOT, Gateway, on_free_ports

EXAMPLE = ROOT / "examples/cpu-parsers/models.yml"
BATCHES = 2


def batch_of(fam: Family) -> int:
    names = [f.name for f in families()]
    return names.index(fam.name) * BATCHES // len(names)


class Stacks:
    """The batch of the family asked for, started when first asked (the one before stopped)."""

    def __init__(self, tmp: Path, vllm_python: str):
        self.tmp, self.vllm_python = tmp, vllm_python
        self.batch: int | None = None
        self.stack: LocalStack | None = None
        self.gateway: Gateway | None = None

    def serving(self, fam: Family) -> tuple[Gateway, str]:
        """The gateway and the served name of `fam`'s model."""
        if batch_of(fam) != self.batch:
            self.stop()
            self.start(batch_of(fam))
        assert self.gateway is not None
        return self.gateway, next(name for name, f in self.gateway.scripts.items() if f == fam.name)

    def start(self, batch: int) -> None:
        wanted = {f.name for f in families() if batch_of(f) == batch}
        models = {m.served_name for m in load_plan(EXAMPLE).models if family_of(ROOT / m.model) in wanted}
        doc = {k: v for k, v in yaml.safe_load(EXAMPLE.read_text()).items() if k in TOP_LEVEL or k in models}
        folder = self.tmp / f"batch-{batch}"
        folder.mkdir()
        (folder / "batch.yml").write_text(f"# {EXAMPLE}: batch {batch}\n" + yaml.safe_dump(doc, sort_keys=False))
        plan = load_plan(on_free_ports(folder / "batch.yml", folder / "models.yml"))
        self.batch, self.stack = batch, LocalStack(plan, folder / "state", self.vllm_python)
        self.stack.start(timeout=900)
        served = {m.served_name: family_of(ROOT / m.model) for m in plan.models}
        assert set(served.values()) == wanted, f"batch {batch}: {served}"
        self.gateway = Gateway(f"{self.stack.gateway_url}/v1", self.stack.master_key, plan, served, self.stack)

    def stop(self) -> None:
        if self.stack is not None:
            self.stack.stop()
        self.batch = self.stack = self.gateway = None


@pytest.fixture(scope="session")
def parsers(tmp_path_factory) -> Stacks:
    vllm_python = os.environ.get("VLLM_PYTHON", str(ROOT / ".venv-vllm/bin/python"))
    cwd = os.getcwd()
    os.chdir(ROOT)  # model paths (and the script player's module) are relative to the repo root
    stacks = Stacks(tmp_path_factory.mktemp("parsers-stacks"), vllm_python)
    try:
        yield stacks
    finally:
        stacks.stop()
        os.chdir(cwd)
