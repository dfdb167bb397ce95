from __future__ import annotations

import socket
import textwrap
from pathlib import Path

import pytest

from generator.errors import ConfigError
from generator.loader import load_plan

ROOT = Path(__file__).resolve().parents[2]
LOCAL_HOSTS = {"127.0.0.1", "::1", "localhost", "0.0.0.0", "::"}


@pytest.fixture(autouse=True)
def no_hub(monkeypatch, tmp_path_factory):
    """Unit tests never reach the Hugging Face Hub (CI has no internet): offline, a Hugging Face home of
    their own (not the user's caches or token) and a closed local endpoint, also for what huggingface_hub
    read when first imported. tests/unit/fake_hub.py stands in for the Hub where a test needs one."""
    home = tmp_path_factory.mktemp("hf-home")
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_ASSETS_CACHE",
                "HUGGINGFACE_ASSETS_CACHE", "TRANSFORMERS_OFFLINE", "FIT_HUB_TIMEOUT", "XDG_CACHE_HOME",
                "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens
    # what huggingface_hub read from the environment when this process first imported it
    import huggingface_hub.constants as hf

    for name, value in (("HF_HUB_CACHE", home / "hub"), ("HF_ASSETS_CACHE", home / "assets"),
                        ("HF_TOKEN_PATH", home / "token"), ("HF_STORED_TOKENS_PATH", home / "stored_tokens"),
                        ("ENDPOINT", "http://127.0.0.1:9"), ("HF_HUB_OFFLINE", True)):
        monkeypatch.setattr(hf, name, str(value) if isinstance(value, Path) else value)


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
