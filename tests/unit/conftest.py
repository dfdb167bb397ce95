from __future__ import annotations

import socket
import textwrap
from pathlib import Path

import pytest

from generator.compile.load.loader import load_plan
from generator.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
LOCAL_HOSTS = {"127.0.0.1", "::1", "localhost", "0.0.0.0", "::"}


@pytest.fixture(autouse=True, scope="session")
def local_network_only():
    """Any name lookup other than this machine fails at once: a test that would reach the internet fails
    here instead of depending on the network (and CI has none)."""
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else host
        if name is not None and name not in LOCAL_HOSTS and not str(name).startswith("127."):
            raise socket.gaierror(socket.EAI_NONAME, f"unit tests do not reach the network ({name})")
        return real(host, *args, **kwargs)

    socket.getaddrinfo = getaddrinfo
    yield
    socket.getaddrinfo = real


@pytest.fixture
def write(tmp_path):
    """write(yaml_text) -> path of a models.yml holding it (dedented)."""

    def _write(text: str, name: str = "models.yml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return _write


@pytest.fixture
def problems(write):
    """problems(yaml_text) -> the one-line problems load_plan reports (fails if it accepts the file)."""

    def _problems(text: str) -> list[str]:
        with pytest.raises(ConfigError) as err:
            load_plan(write(text))
        return [str(p) for p in err.value.problems]

    return _problems


@pytest.fixture
def plan(write):
    return lambda text: load_plan(write(text))
