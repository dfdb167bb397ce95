"""tests/compose run against a stack `docker compose up` started (docker/compose-test.sh sets
COMPOSE_FILE, COMPOSE_PROJECT_NAME and COMPOSE_ENV_FILE). Without them they are skipped."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from openai import OpenAI

from generator.compile.output import read_env_file

from .stack import compose_file


@dataclass
class Deployed:
    doc: dict  # the generated compose file
    root: Path  # the folder the generator wrote (compose/, litellm/)
    env: dict[str, str]  # compose/.env: the keys
    url: str  # gateway, ends with /v1

    @property
    def backends(self) -> list[str]:
        return [
            name for name, s in self.doc["services"].items() if name != "litellm" and "vllm" in s.get("entrypoint", [])
        ]

    def client(self, timeout: float = 60) -> OpenAI:
        return OpenAI(base_url=self.url, api_key=self.env["LITELLM_MASTER_KEY"], timeout=timeout, max_retries=0)

    def served_name(self, service: str) -> str:
        cmd = self.doc["services"][service]["command"]
        return cmd[cmd.index("--served-model-name") + 1]


@pytest.fixture(scope="session")
def deployed() -> Deployed:
    if not os.environ.get("COMPOSE_FILE") or not os.environ.get("COMPOSE_ENV_FILE"):
        pytest.skip("needs a running compose stack: run `make compose-test`")
    doc = compose_file()
    published = doc["services"]["litellm"]["ports"][0]  # bind:host_port:container_port
    host_port = published.rsplit(":", 2)[-2]
    return Deployed(
        doc,
        Path(os.environ["COMPOSE_FILE"]).resolve().parents[1],
        read_env_file(Path(os.environ["COMPOSE_ENV_FILE"])),
        f"http://127.0.0.1:{host_port}/v1",
    )


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/compose" in str(item.fspath):
            item.add_marker(pytest.mark.compose)
