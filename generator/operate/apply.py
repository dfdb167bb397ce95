"""`python -m generator apply` (`make apply`): a changed models.yml onto the running compose stack.

validate -> render -> compare with what runs (the applied files, and each container's compose
config-hash and image against what the new file gives) -> print the plan -> (--dry-run stops here)
-> load the adapters added to running backends (vLLM's runtime routes, no restart: live_adapters.py)
-> write the files and keys -> `docker compose up -d --remove-orphans --wait` (compose recreates
exactly the services whose definition changed, in depends_on order, and removes the containers of
removed models; a backend updated live is left out: its container keeps its command until its next
restart) -> wait for the gateway's supervisor to report the reload of its new files -> unload the
adapters removed from running backends.

A backend updated live has a container whose compose config-hash is not its file's: LIVE_RECORD keeps that
hash, so the next apply knows the container runs the applied file's definition (and leaves it alone when that
is unchanged) instead of recreating it.

Exit codes: 0 applied (or nothing to do), 1 something did not come up (named, with its last log lines;
the rest keeps serving), 2 bad models.yml (nothing changed).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml
from rich.console import Console

from ..compile.load.loader import load_plan
from ..compile.output import ENV_FILE, ensure_env_file, read_env_file, remove_orphans, render_files, write_files
from ..compile.renderers import COMPOSE_FILE, TARGETS
from ..compile.renderers.compose import ON_DEMAND_PROFILE
from ..compile.renderers.stack import ENV_HEADER
from ..errors import ConfigError, print_problems
from ..shipped.gateway_hooks.gateway_supervisor import digest as gateway_digest
from ..shipped.gateway_hooks.gateway_supervisor import reload_outcome
from .changes import GATEWAY, REDEFINED, Change, flags, plan_changes
from .keys import write_hashes
from .live_adapters import IN_CONTAINER, LiveUpdateError, Post, call, load_calls, parse_printed, unload_calls

GATEWAY_DIR = "litellm"
LIVE_RECORD = "compose/.live-adapters.json"  # service -> config-hash of its container whose adapters were updated live


def run(cmd: list[str], stdin: str | None = None, timeout: float = 120, check: bool = True) -> str:
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode:
        raise RuntimeError(f"{' '.join(cmd[:4])} ... failed: {proc.stderr.strip()[-2000:]}")
    return proc.stdout


def gateway_folder(root: Path) -> dict[str, str]:
    folder = root / GATEWAY_DIR
    return (
        {p.name: p.read_text() for p in sorted(folder.glob("*")) if p.is_file() and not p.name.startswith(".")}
        if folder.is_dir()
        else {}
    )


def project_containers(project: str) -> dict[str, dict]:
    """service -> `docker inspect` of its container, for the compose project."""
    ids = run(["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={project}"]).split()
    found = {}
    for c in json.loads(run(["docker", "inspect", *ids])) if ids else []:
        service = c["Config"]["Labels"].get("com.docker.compose.service")
        if service:
            found[service] = c
    return found


def new_hashes(compose_text: str, compose_dir: Path, keys: dict[str, str]) -> dict[str, str]:
    """The config-hash compose gives each service of the new file (same project directory and .env)."""
    env = {**os.environ, **keys}
    # --profile: the on-demand backends' hashes too (without it compose leaves services of a profile out)
    proc = subprocess.run(
        [
            "docker",
            "compose",
            "-f",
            "-",
            "--project-directory",
            str(compose_dir),
            "--profile",
            ON_DEMAND_PROFILE,
            "config",
            "--hash",
            "*",
        ],
        input=compose_text,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    if proc.returncode:
        raise RuntimeError(f"docker compose config: {proc.stderr.strip()}")
    return dict(line.split() for line in proc.stdout.splitlines() if line.strip())


def image_id(image: str) -> str | None:
    out = run(["docker", "image", "inspect", "--format", "{{.Id}}", image], check=False).strip()
    return out or None


def config_hash(container: dict) -> str | None:
    return container["Config"]["Labels"].get("com.docker.compose.config-hash")


def compose_recreates(
    new_doc: dict,
    hashes: dict[str, str],
    containers: dict[str, dict],
    old_doc: dict | None = None,
    live: dict[str, str] | None = None,
) -> dict[str, str]:
    """Services compose will recreate: config-hash or image differs from the running container's. A container
    whose adapters were updated live (`live`: service -> its config-hash then) runs old_doc's definition: it is
    kept when that is the new file's."""
    out = {}
    old_services = (old_doc or {}).get("services") or {}
    for name, service in (new_doc.get("services") or {}).items():
        c = containers.get(name)
        if c is None:
            continue
        if config_hash(c) != hashes.get(name):
            if not ((live or {}).get(name) == config_hash(c) and old_services.get(name) == service):
                out[name] = REDEFINED
        elif (img := image_id(service["image"])) and img != c["Image"]:
            out[name] = f"image {service['image']} was rebuilt"
    return out


def print_plan(changes: list[Change], console: Console) -> None:
    console.print("plan:", soft_wrap=True)
    for change in changes:
        console.print(f"  {change}", soft_wrap=True, markup=False, highlight=False)


def wait_reload(container: str, digest: str, since: str, timeout: float, console: Console) -> bool:
    """Until the gateway's supervisor says it reloaded `digest` (True) or could not (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc = subprocess.run(
            ["docker", "logs", "--since", since, container], capture_output=True, text=True, timeout=30
        )
        if outcome := reload_outcome(proc.stdout + proc.stderr, digest):
            done, said = outcome
            console.print(f"gateway: {said}", soft_wrap=True, markup=False, style=None if done else "red")
            return done
        time.sleep(1)
    console.print(f"[red]gateway: no reload of {digest} reported within {timeout:.0f}s[/]")
    return False


def read_live(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return (
        {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(data, dict) else {}
    )


def exec_post(compose_path: Path, service: str, port: str) -> Post:
    """post() into a backend container (compose publishes no backend port): its python3 calls 127.0.0.1 with the
    container's own key."""

    def post(route: str, body: dict) -> tuple[int, str]:
        proc = subprocess.run(
            [
                "docker",
                "compose",
                "-f",
                str(compose_path),
                "exec",
                "-T",
                service,
                "python3",
                "-c",
                IN_CONTAINER,
                port,
                route,
                json.dumps(body),
            ],
            capture_output=True,
            text=True,
            timeout=660,
        )
        return parse_printed(proc.stdout) if proc.stdout.strip() else (0, proc.stderr.strip()[-500:])

    return post


def live_calls(changes: list[Change], new_doc: dict, compose_path: Path, which, out: Console) -> bool:
    """The load (which=load_calls) or unload calls of every live adapter change; False (printed) on a failure."""
    for c in changes:
        if c.action != "adapters" or c.live is None or not (steps := which(c.live)):
            continue
        port = flags(new_doc["services"][c.service].get("command") or [])[1].get("--port") or "8000"
        try:
            for line in call(exec_post(compose_path, c.service, port), steps, c.service):
                out.print(f"  {line}", markup=False, soft_wrap=True)
        except LiveUpdateError as exc:
            out.print(f"[red]failed: {c.service}[/] {exc}", soft_wrap=True)
            return False
    return True


def failed_services(project: str, expected: list[str]) -> list[str]:
    containers = project_containers(project)
    bad = []
    for name in expected:
        c = containers.get(name)
        state = (c or {}).get("State") or {}
        health = (state.get("Health") or {}).get("Status")
        if not c or state.get("Status") != "running" or health not in (None, "healthy"):
            bad.append(name)
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m generator apply", description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=Path("models.yml"))
    ap.add_argument("--out", type=Path, default=Path("."), help="where compose/ and litellm/ are (default: .)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    ap.add_argument("--timeout", type=int, default=900, help="seconds for the changed services to be healthy")
    args = ap.parse_args(argv)
    out, err = Console(highlight=False), Console(stderr=True, highlight=False)
    t0 = time.monotonic()
    try:
        plan = load_plan(args.models)
    except ConfigError as exc:
        print_problems(exc, err)
        err.print("nothing was changed", soft_wrap=True)
        return 2
    files = render_files(plan, ("stack",))
    new_doc = yaml.safe_load(files[COMPOSE_FILE])
    compose_path = args.out / COMPOSE_FILE
    project = os.environ.get("COMPOSE_PROJECT_NAME") or new_doc["name"]
    old_doc = yaml.safe_load(compose_path.read_text()) if compose_path.exists() else {}
    old_gateway = gateway_folder(args.out)
    new_gateway = {Path(rel).name: text for rel, text in files.items() if rel.startswith(f"{GATEWAY_DIR}/")}
    env_path = args.out / ENV_FILE
    keys = read_env_file(env_path) if env_path.exists() else {}
    missing = {n: "not-yet-created" for n in plan.secret_envs if not keys.get(n)}  # dry run: no key written
    live_path = args.out / LIVE_RECORD
    live = read_live(live_path)
    try:
        containers = project_containers(project)
        hashes = new_hashes(files[COMPOSE_FILE], compose_path.parent.absolute(), missing)
        recreate = compose_recreates(new_doc, hashes, containers, old_doc, live)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        err.print(f"[red]error:[/] cannot read the running stack: {exc}", soft_wrap=True)
        return 1
    running = {n for n, c in containers.items() if (c.get("State") or {}).get("Status") == "running"}
    changes = plan_changes(old_doc, new_doc, old_gateway, new_gateway, set(containers), recreate)
    # a stopped container (an on-demand backend) has no runtime routes: it is recreated (it serves nothing now)
    changes = [
        Change("recreate", c.service, c.details, waits_for=c.waits_for)
        if c.action == "adapters" and c.service not in running
        else c
        for c in changes
    ]
    # containers compose must leave alone: updated live now, or earlier and still running the applied definition
    keep = sorted(
        {c.service for c in changes if c.action == "adapters"}
        | {
            c.service
            for c in changes
            if c.action == "unchanged" and c.service in live and config_hash(containers[c.service]) == live[c.service]
        }
    )
    kept = sorted(k for k in keys if k.startswith("VLLM_API_KEY_") and k not in plan.secret_envs)
    out.print(f"project {project}: {args.models} against {len(containers)} running container(s)")
    print_plan(changes, out)
    if kept:
        out.print(f"  keys kept in {env_path} for removed models: {', '.join(kept)} (delete them by hand when unused)")
    if args.dry_run:
        out.print("dry run: nothing changed")
        return 0
    acting = [c for c in changes if c.action != "unchanged"]
    # on-demand backends (unload: stop) sit in a compose profile: `up` neither creates nor starts them; their
    # containers are created here, stopped, for the on-demand controller to start (docs/on-demand.md)
    profiled = [name for name, s in new_doc["services"].items() if s.get("profiles")]
    if not acting:
        out.print("nothing to do: the stack runs this file")
        return 0

    if any(c.action == "adapters" and c.live and load_calls(c.live) for c in changes):  # before the gateway routes them
        out.print("loading adapters into running backends (vLLM's /v1/load_lora_adapter) ...")
        if not live_calls(changes, new_doc, compose_path, load_calls, out):
            err.print(
                "[red]nothing else was changed[/]: fix the adapter (or restart its base with "
                "`docker compose up -d --force-recreate <model>`) and run make apply again",
                soft_wrap=True,
            )
            return 1
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1))  # the supervisor's lines after this
    written = write_files(files, args.out)
    written += [f"(removed) {r}" for r in remove_orphans(files, args.out, TARGETS["stack"].folders)]
    added = ensure_env_file(env_path, plan.secret_envs, ENV_HEADER)
    if plan.people:  # people's key hashes for the people still in models.yml: the gateway reads them within seconds
        write_hashes(plan, env_path, args.out / GATEWAY_DIR)
    out.print(f"wrote {', '.join(written) or 'nothing (files were current)'}", soft_wrap=True)
    if added:
        out.print(f"added key(s) to {env_path}: {', '.join(added)}")
    if any(c.action in ("add", "recreate", "remove") for c in changes):
        # the backends kept live are left out (--no-deps: nor pulled in as a dependency): compose would recreate them
        only = ["--no-deps", *(s for s in new_doc["services"] if s not in keep and s not in profiled)] if keep else []
        out.print(
            "docker compose up -d --remove-orphans --wait (only the services above change"
            + (
                f"; {', '.join(keep)} {'keeps its container' if len(keep) == 1 else 'keep their containers'}"
                if keep
                else ""
            )
            + ") ...",
            soft_wrap=True,
        )
        proc = subprocess.run(
            [
                "docker",
                "compose",
                "-f",
                str(compose_path),
                "up",
                "-d",
                "--remove-orphans",
                "--wait",
                "--wait-timeout",
                str(args.timeout),
                *only,
            ],
            text=True,
            capture_output=True,
        )
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
        for line in lines:
            if re.search(r"Recreat|Creat|Remov|Start|Stop|Error|error|fail", line):
                out.print(f"  {line.strip()}", markup=False, soft_wrap=True)
        if proc.returncode:
            bad = failed_services(project, [name for name in new_doc["services"] if name not in profiled])
            for name in bad or ["(compose)"]:
                log = (
                    run(
                        ["docker", "compose", "-f", str(compose_path), "logs", "--no-color", "--tail", "20", name],
                        check=False,
                        timeout=60,
                    )
                    if bad
                    else "\n".join(lines[-20:])
                )
                err.print(f"[red]failed: {name}[/] did not become healthy; last lines of its log:", soft_wrap=True)
                err.print(log.rstrip(), markup=False, soft_wrap=True)
            err.print(f"[red]{len(bad)} service(s) failed: {', '.join(bad)}[/]; the other services keep serving")
            return 1
    if profiled:
        out.print(f"docker compose create {' '.join(profiled)} (on-demand: the controller starts them) ...")
        proc = subprocess.run(
            ["docker", "compose", "-f", str(compose_path), "create", *profiled], text=True, capture_output=True
        )
        if proc.returncode:
            err.print(f"[red]error:[/] docker compose create: {proc.stderr.strip()}", soft_wrap=True)
            return 1
    reload = next((c for c in changes if c.action == "reload"), None)
    if reload is not None:
        gw = project_containers(project).get(GATEWAY)
        if gw is None or not wait_reload(gw["Id"], gateway_digest(args.out / GATEWAY_DIR), since, 600, out):
            return 1
    if any(c.action == "adapters" for c in changes):  # the gateway no longer routes the removed names
        if not live_calls(changes, new_doc, compose_path, unload_calls, out):
            return 1
    record = {s: h for s in keep if (h := config_hash(containers[s]))}
    if record or live_path.exists():
        live_path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    out.print(f"applied in {time.monotonic() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
