"""The pinned coding agents, installed from npm into .cache/agents (git-ignored) when missing.

`python -m tests.integration.agents.install` installs them (`make agents`); the tests call `ensure()`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
AGENTS_DIR = ROOT / ".cache/agents"
# Pinned: the versions the generated clients/ configs were checked against (issue 12).
# claude-code 2.1.197 is the newest release that runs on node 20.
PINS = {"opencode-ai": "1.18.33", "@anthropic-ai/claude-code": "2.1.197", "@openai/codex": "0.169.0"}
BINS = {"opencode": "opencode", "claude-code": "claude", "codex": "codex"}


class NpmUnreachable(RuntimeError):
    """npm is missing or its registry does not answer: the only reason the agent tests skip."""


def installed() -> bool:
    for package, version in PINS.items():
        manifest = AGENTS_DIR / "node_modules" / package / "package.json"
        if not manifest.exists() or json.loads(manifest.read_text()).get("version") != version:
            return False
    return all((AGENTS_DIR / "node_modules/.bin" / b).exists() for b in BINS.values())


def ensure() -> Path:
    """The node_modules/.bin holding the three agents; installs them when missing."""
    if not installed():
        npm = shutil.which("npm")
        if npm is None:
            raise NpmUnreachable("npm is not installed")
        ping = subprocess.run([npm, "ping"], capture_output=True, text=True, timeout=60)
        if ping.returncode:
            raise NpmUnreachable(f"npm registry unreachable: {(ping.stderr or ping.stdout).strip().splitlines()[-1:]}")
        AGENTS_DIR.mkdir(parents=True, exist_ok=True)
        (AGENTS_DIR / "package.json").write_text('{"private": true}\n')
        subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", *(f"{p}@{v}" for p, v in PINS.items())],
            cwd=AGENTS_DIR,
            check=True,
            timeout=900,
        )
        if not installed():
            raise RuntimeError(f"npm install finished but the pinned agents are not in {AGENTS_DIR}")
    return AGENTS_DIR / "node_modules/.bin"


if __name__ == "__main__":
    try:
        print(ensure())
    except NpmUnreachable as exc:
        sys.exit(f"cannot install the coding agents: {exc}")
