"""The compose stack under test, through the docker CLI (COMPOSE_FILE / COMPOSE_PROJECT_NAME in the environment).

`python -m tests.compose.stack up --timeout N` runs `docker compose up -d --wait` and prints, every
few seconds, one line per service: its state and health, and what a created container waits for.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import yaml


def connects(host: str, port: int) -> bool:
    """A TCP connection to host:port succeeds within 2 s."""
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def host_addresses() -> list[str]:
    """Every IP address of this host (ip -o addr)."""
    out = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True, check=True).stdout
    return [f.split()[3].split("/")[0] for f in out.splitlines() if " inet" in f]


def docker(*args: str, check: bool = True, timeout: float = 120) -> str:
    return subprocess.run(["docker", *args], check=check, capture_output=True, text=True, timeout=timeout).stdout


def compose(*args: str, check: bool = True, timeout: float = 120) -> str:
    return docker("compose", *args, check=check, timeout=timeout)


def compose_file() -> dict:
    return yaml.safe_load(Path(os.environ["COMPOSE_FILE"]).read_text())


def containers() -> list[dict]:
    """`docker compose ps -a` as dicts (Service, State, Health, Name, ID, ...)."""
    out = compose("ps", "-a", "--format", "json").strip()
    if out.startswith("["):
        return json.loads(out)
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def events_file() -> Path:
    """Container events (start, health_status, ...) of the project, recorded while `up` ran."""
    return Path(os.environ["COMPOSE_FILE"]).with_name("events.jsonl")


def container_of(service: str) -> str:
    return compose("ps", "-a", "-q", service).strip()


def inspect(container: str) -> dict:
    return json.loads(docker("inspect", container))[0]


def _line(c: dict, deps: dict[str, list[str]], states: dict[str, str]) -> str:
    state, health = c.get("State", "?"), c.get("Health") or ""
    if state == "created":
        waiting = [d for d in deps.get(c["Service"], []) if states.get(d) != "healthy"]
        return f"{c['Service']}: waiting for {', '.join(waiting)}" if waiting else f"{c['Service']}: created"
    return f"{c['Service']}: {state}" + (f" ({health})" if health else "")


def up(timeout: int, every: float = 10) -> int:
    doc = compose_file()
    deps = {name: list(s.get("depends_on") or []) for name, s in doc["services"].items()}
    t0 = time.monotonic()
    log = Path(os.environ["COMPOSE_FILE"]).with_name("up.log")
    project = os.environ.get("COMPOSE_PROJECT_NAME") or doc["name"]
    with log.open("w") as out, events_file().open("w") as events:
        recorder = subprocess.Popen(
            [
                "docker",
                "events",
                "--format",
                "{{json .}}",
                "--filter",
                "type=container",
                "--filter",
                f"label=com.docker.compose.project={project}",
            ],
            stdout=events,
        )
        proc = None
        try:
            proc = subprocess.Popen(
                ["docker", "compose", "up", "-d", "--wait", "--wait-timeout", str(timeout)],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
            last = ""
            while proc.poll() is None:
                time.sleep(every if last else 2)
                try:
                    cs = containers()
                except (subprocess.SubprocessError, ValueError):  # not answering yet, or half-written JSON
                    continue
                states = {c["Service"]: (c.get("Health") or c.get("State", "")) for c in cs}
                line = " | ".join(_line(c, deps, states) for c in sorted(cs, key=lambda c: c["Service"]))
                print(f"up: [{time.monotonic() - t0:4.0f}s] {line or 'creating'}", flush=True)
                last = line
        finally:  # never leave `docker events` (or a half-done `up`) running behind us
            for p in (proc, recorder):
                if p is not None and p.poll() is None:
                    p.terminate()
                    p.wait(timeout=10)
    took = time.monotonic() - t0
    if proc.returncode:
        print(f"up: FAILED after {took:.0f}s; docker compose said:\n" + log.read_text()[-3000:], flush=True)
    else:
        print(f"up: every service healthy after {took:.0f}s", flush=True)
    return proc.returncode


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=["up"])
    ap.add_argument("--timeout", type=int, default=900)
    sys.exit(up(ap.parse_args().timeout))
