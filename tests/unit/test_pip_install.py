"""tools/pip_install.py: pip's settings (files and PIP_* variables, pip's precedence) become uv's options, a setting
uv would not honour makes the install pip's, and a real install through each path lands the package."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("pip_install", ROOT / "tools/pip_install.py")
pip_install = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pip_install)

THIS_MACHINE = """\
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.default-timeout='180'
:env:.disable-pip-version-check='1'
:env:.find-links='/opt/wheels'
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/wheels'
"""


def test_pip_precedence_variables_then_install_then_global():
    listed = (
        "global.index-url='https://a/simple'\ninstall.index-url='https://b/simple'\n"
        "download.index-url='https://c/simple'\nglobal.timeout='5'\n:env:.timeout='9'\n"
    )
    assert pip_install.settings(listed) == {"index-url": "https://b/simple", "timeout": "9"}


def test_a_multi_line_value_is_every_line():
    listed = "global.extra-index-url='\\nfile:///a\\nhttps://b/simple'\n"
    args, _ = pip_install.uv_options(pip_install.settings(listed), exists=lambda p: True)
    assert args[2:8] == ["--index", "https://pypi.org/simple", "--index", "file:///a", "--index", "https://b/simple"]


def test_this_machines_settings_as_uv_options():
    present = {"/opt/wheels", "/opt/pypi/simple"}
    args, env = pip_install.uv_options(pip_install.settings(THIS_MACHINE), exists=present.__contains__)
    assert args == [
        "--index-strategy",
        "unsafe-best-match",
        # pip's main index first: a version's files come from the first index that lists it
        "--index",
        "https://pypi.org/simple",
        "--index",
        "file:///opt/pypi/simple",
        "--default-index",
        "https://pypi.org/simple",  # the missing /opt/pypi-more: skipped, as pip does
        "--constraint",
        "/etc/xdg/pip/constraints.txt",
        "--find-links",
        "/opt/wheels",
    ]
    assert env == {"SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt", "UV_HTTP_TIMEOUT": "180"}


def test_pips_own_index_hosts_and_proxy():
    args, env = pip_install.uv_options(
        {
            "index-url": "https://mirror/simple",
            "trusted-host": "mirror other",
            "no-index": "false",
            "proxy": "http://proxy:3128",
        },
        exists=lambda p: False,
    )
    assert args == [
        "--index-strategy",
        "unsafe-best-match",
        "--index",
        "https://mirror/simple",
        "--default-index",
        "https://mirror/simple",  # never PyPI behind a machine's own index
        "--allow-insecure-host",
        "mirror",
        "--allow-insecure-host",
        "other",
    ]
    assert env == {"HTTPS_PROXY": "http://proxy:3128"}


def test_no_index_is_find_links_only():
    args, _ = pip_install.uv_options(
        {"no-index": "yes", "extra-index-url": "https://b/simple", "find-links": "/w /missing"}, exists="/w".__eq__
    )
    assert args == ["--index-strategy", "unsafe-best-match", "--no-index", "--find-links", "/w"]


@pytest.mark.parametrize("setting", ["prefer-binary", "only-binary", "require-hashes", "user", "no-compile"])
def test_a_setting_uv_would_not_honour_is_named(setting):
    with pytest.raises(pip_install.NotForUv, match=setting):
        pip_install.uv_options({setting: "1", "find-links": "/x"}, exists=lambda p: True)


def wheel(folder: Path, name: str, tag: str = "py3-none-any", value: object = 42) -> Path:
    """A wheel holding one module `name` that sets VALUE (its tag says which machines it is for)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-1.0-{tag}.whl"
    info = f"{name}-1.0.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}.py", f"VALUE = {value!r}\n")
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        z.writestr(f"{info}/WHEEL", f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n")
        z.writestr(f"{info}/RECORD", f"{name}.py,,\n{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n")
    return path


def simple_index(root: Path, *wheels: Path) -> str:
    """A PEP 503 index on disk (as file:///opt/pypi/simple is) listing `wheels`; its file:// URL."""
    project = root / "simple" / wheels[0].name.split("-")[0].replace("_", "-")
    project.mkdir(parents=True)
    links = "".join(f'<a href="../../{w.parent.name}/{w.name}">{w.name}</a>' for w in wheels)
    (project / "index.html").write_text(f"<!DOCTYPE html><html><body>{links}</body></html>")
    return f"file://{root}/simple"


def install(tmp_path: Path, env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess, str]:
    pip_install.uv_binary()  # uv itself from the index (`make venv` does the same), before a test turns it off
    venv.create(tmp_path / "venv", with_pip=True)
    python = str(tmp_path / "venv/bin/python")
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools/pip_install.py"), python, "-q", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull, **env},
        timeout=300,
        check=False,
    )
    return done, python


@pytest.mark.parametrize("extra, installer", [({}, "uv"), ({"PIP_PREFER_BINARY": "1"}, "pip")])
def test_a_real_install_from_the_find_links_folder_pip_is_told_of(tmp_path, extra, installer):
    """No index, only a folder (PIP_FIND_LINKS / PIP_NO_INDEX, as a machine's pip.conf would say): the package
    lands either way; with a setting uv has no equivalent for, pip does it and says why."""
    wheel(tmp_path / "wheels", "tiny_pkg")
    done, python = install(
        tmp_path, {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path / "wheels"), **extra}, "tiny_pkg"
    )
    assert done.returncode == 0, done.stderr
    assert (
        subprocess.run(
            [python, "-c", "import tiny_pkg; print(tiny_pkg.VALUE)"], capture_output=True, text=True, check=True
        ).stdout
        == "42\n"
    )
    installer_file = next((tmp_path / "venv/lib").glob("python3*/site-packages/tiny_pkg-1.0.dist-info/INSTALLER"))
    assert installer_file.read_text().strip() == installer
    assert ("pip, not uv: pip setting prefer-binary='1'" in done.stderr) == (installer == "pip"), done.stderr
    assert list((tmp_path / "venv/lib").glob("python3*/site-packages/__pycache__/tiny_pkg*.pyc"))  # byte-compiled


def test_the_wheel_pip_would_pick_when_an_extra_index_holds_only_a_pure_one(tmp_path):
    """The main index lists a version's wheel for this platform and the pure one, an extra index (a mirror) only
    the pure one: pip picks the platform wheel, and so must uv (this machine's mirror lists only soundfile's pure
    wheel; uv reading it first installed a soundfile without its libsndfile, and the gateway did not start)."""
    platform = (
        subprocess.run(
            [sys.executable, "-c", "import sysconfig; print(sysconfig.get_platform())"],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .replace("-", "_")
    )
    if platform != "linux_x86_64":
        pytest.skip(f"the platform wheel below is tagged for linux x86-64, not {platform}")
    main = simple_index(
        tmp_path / "main",
        wheel(tmp_path / "main/files", "tiny_pkg", "py3-none-any", "pure"),
        wheel(tmp_path / "main/files", "tiny_pkg", "py3-none-manylinux_2_17_x86_64", "platform"),
    )
    mirror = simple_index(tmp_path / "mirror", wheel(tmp_path / "mirror/files", "tiny_pkg", "py3-none-any", "pure"))
    done, python = install(
        tmp_path, {"PIP_INDEX_URL": main, "PIP_EXTRA_INDEX_URL": mirror, "PIP_FIND_LINKS": ""}, "tiny_pkg"
    )
    assert done.returncode == 0 and "pip, not uv" not in done.stderr, done.stderr
    assert (
        subprocess.run(
            [python, "-c", "import tiny_pkg; print(tiny_pkg.VALUE)"], capture_output=True, text=True, check=True
        ).stdout
        == "platform\n"
    )
