#!/usr/bin/env python3
"""`pip install` into a venv, done by uv with this machine's pip settings, or by pip where uv cannot honour them.

    python3 tools/pip_install.py VENV_PYTHON [--no-compile] PIP_INSTALL_ARGS...

Why uv: on a 2-core box the project's two venvs took pip 52 s (the gateway's, resolving) and 62 s (vLLM's 3 GB lock)
of one core each; uv installs the same files, byte-compiled, in 14 s and 19 s (docs/testing.md). Both venvs are
made by `python -m venv`, so pip stays inside them for users; only the install is uv's.

Why this file: uv does not read pip's configuration (its docs: "uv does not read pip.conf"), and a machine's pip
settings are how it reaches its package indexes (here: a find-links folder, file:// mirrors, a constraint file,
a CA bundle). So pip's own view of its settings (`pip config list`, files and PIP_* variables, pip's precedence)
is turned into uv's options. A setting with no uv equivalent known here makes the install pip's, with one line
saying which: never an install that quietly ignores how the machine is set up. Standard library only: it runs
before any venv exists.
"""

from __future__ import annotations

import ast
import fcntl
import os
import re
import subprocess
import sys
from pathlib import Path

# uv 0.13.9: the newest on this machine's index when it was adopted; `uv pip install`'s options below are its
UV_VERSION = "0.13.9"
UV_HOME = Path(__file__).resolve().parents[1] / ".cache/uv-tool"

PYPI = "https://pypi.org/simple"  # pip's index when no index-url is set
LISTS = {  # pip setting -> uv option, one per whitespace-separated value
    "find-links": "--find-links",
    "constraint": "--constraint",
    "trusted-host": "--allow-insecure-host",
}
ENV = {
    "cert": "SSL_CERT_FILE",
    "timeout": "UV_HTTP_TIMEOUT",
    "default-timeout": "UV_HTTP_TIMEOUT",
    "proxy": "HTTPS_PROXY",
}
IGNORED = {
    "disable-pip-version-check",
    "no-cache-dir",
    "progress-bar",
    "quiet",
    "verbose",
    "no-input",
    "no-color",
    "root-user-action",
    "no-warn-script-location",
    "retries",
    "config-file",
}  # how pip talks (or found its files), not what it installs


class NotForUv(Exception):
    """A pip setting uv would not honour: the install is pip's."""


def settings(config_list: str) -> dict[str, str]:
    """`pip config list` output -> {setting: value} with pip's precedence: PIP_* variables, then [install], then
    [global] (pip has already merged its config files, later ones winning)."""
    rank = {"global": 0, "install": 1, ":env:": 2}
    found: dict[str, tuple[int, str]] = {}
    for line in config_list.splitlines():
        m = re.fullmatch(r"(:env:|[\w-]+)\.([\w-]+)=(.+)", line.strip())
        if not m:
            continue
        section, key, quoted = m.groups()
        value = ast.literal_eval(quoted)  # pip prints repr(value): a multi-line value comes as '...\n...'
        if section not in rank:  # another command's section ([download], [wheel], ...)
            continue
        if key not in found or rank[section] >= found[key][0]:
            found[key] = (rank[section], value)
    return {key: value for key, (_, value) in found.items()}


def local_path(value: str) -> str | None:
    """The folder a find-links / index value names on this disk, or None for a URL."""
    if value.startswith("file://"):
        return value[len("file://") :]
    return None if "://" in value else value


def uv_options(pip: dict[str, str], exists=os.path.exists) -> tuple[list[str], dict[str, str]]:
    """pip settings -> (uv pip install options, environment). Raises NotForUv for a setting with no equivalent.

    Indexes: pip takes the newest version across all its indexes, then the best wheel for this machine among every
    file of that version, whichever index lists it. uv (unsafe-best-match) also takes the newest version across
    indexes, but every file of a version from the first index that lists it. So pip's main index (index-url, else
    PyPI) goes first and its extra indexes after: a mirror holding only a version's pure-Python wheel (this machine's
    file:///opt/pypi has soundfile's, without the libsndfile PyPI's manylinux wheel bundles) does not hide the
    wheel pip would pick. Checked: both venvs get the same files (every dist-info's wheel tags) from pip and uv."""
    args = ["--index-strategy", "unsafe-best-match"]
    env: dict[str, str] = {}
    no_index = pip.get("no-index", "").strip().lower() in ("1", "true", "yes", "on")
    indexes = (
        []
        if no_index
        else [pip.get("index-url", PYPI)]
        + [url for url in pip.get("extra-index-url", "").split() if local_path(url) is None or exists(local_path(url))]
    )  # pip skips a missing local index with a warning
    for url in indexes:
        args += ["--index", url]
    args += ["--default-index", indexes[0]] if indexes else ["--no-index"]  # not PyPI behind pip's own index
    for key, value in sorted(pip.items()):
        if key in LISTS:
            for item in value.split():
                if key == "find-links" and local_path(item) is not None and not exists(local_path(item)):
                    continue  # as pip does; uv would fail
                args += [LISTS[key], item]
        elif key in ENV:
            env[ENV[key]] = value
        elif key not in IGNORED | {"index-url", "extra-index-url", "no-index"}:
            raise NotForUv(f"pip setting {key}={value!r}")
    return args, env


def uv_binary() -> Path:
    """uv UV_VERSION in a venv of its own under .cache (made once, pip from the index; `make -j2` runs two
    installs at once, so the first makes it while the other waits on a lock)."""
    uv = UV_HOME / "bin" / "uv"
    UV_HOME.parent.mkdir(parents=True, exist_ok=True)
    with open(UV_HOME.parent / "uv-tool.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        version = (
            subprocess.run([uv, "--version"], capture_output=True, text=True, check=False) if uv.exists() else None
        )
        if version is None or UV_VERSION not in version.stdout:
            subprocess.run([sys.executable, "-m", "venv", "--clear", UV_HOME], check=True)
            subprocess.run(
                [UV_HOME / "bin/python", "-m", "pip", "install", "-q", f"uv=={UV_VERSION}"],
                check=True,
                stderr=subprocess.PIPE,
                text=True,
            )
    return uv


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0].startswith("-"):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    python, args = argv[0], argv[1:]
    compile_ = "--no-compile" not in args
    args = [a for a in args if a != "--no-compile"]
    try:
        listed = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True)
        options, env = uv_options(settings(listed.stdout))
        uv = uv_binary()
    except NotForUv as exc:
        why = str(exc)
    except subprocess.CalledProcessError as exc:
        last = ((exc.stderr or "").strip().splitlines() or ["no message"])[-1]
        why = f"{' '.join(map(str, exc.cmd[:4]))} failed: {last}"
    except OSError as exc:
        why = str(exc)
    else:
        why = None
    if why:
        print(f"pip-install: pip, not uv: {why}", file=sys.stderr)
        return subprocess.run(
            [python, "-m", "pip", "install", *args, *(["--no-compile"] if not compile_ else [])], check=False
        ).returncode
    command = [
        str(uv),
        "pip",
        "install",
        "--python",
        python,
        *options,
        *(["--compile-bytecode"] if compile_ else []),
        *args,
    ]
    return subprocess.run(command, env={**os.environ, **env}, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
