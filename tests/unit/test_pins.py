"""One LiteLLM version everywhere it is named: the gateway extra's pin, the LiteLLM installed here, the official image
tag the generator writes, the local image docker/images.sh builds and examples/cpu-compose runs, and its lock."""

from __future__ import annotations

import re
from importlib.metadata import version

from conftest import ROOT

from generator.compile.load.schema import LITELLM_IMAGE, LITELLM_VERSION


def pinned() -> str:
    return re.search(r'"litellm\[proxy\]==([^"]+)"', (ROOT / "pyproject.toml").read_text()).group(1)


def test_the_generator_writes_the_pinned_litellm_and_runs_on_it():
    assert LITELLM_VERSION == pinned() == version("litellm")
    assert LITELLM_IMAGE == f"ghcr.io/berriai/litellm:v{pinned()}"


def test_the_local_image_is_tagged_and_locked_with_the_pinned_litellm():
    tag = f"llm-gateway/litellm:{pinned()}"
    assert re.search(rf"^build litellm {re.escape(tag)}$", (ROOT / "docker/images.sh").read_text(), re.M)
    assert f"image: {tag}" in (ROOT / "examples/cpu-compose/models.yml").read_text()
    assert (ROOT / "docker/litellm/Dockerfile").read_text().startswith(f"# {tag}:")
    lock = (ROOT / "docker/litellm/requirements.txt").read_text()
    assert f"\nlitellm=={pinned()}\n" in lock, "run docker/lock.sh"
    assert f"litellm[proxy]=={pinned()}" in lock.splitlines()[0], "run docker/lock.sh"
