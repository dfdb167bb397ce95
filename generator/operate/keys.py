"""People's keys (models.yml `people:`): `make key NAME=ann` prints ann's key alone on stdout.

    python -m generator.operate.keys --models models.yml --name ann [--rotate | --revoke] [--state-dir DIR | --k8s]

The key is made on the first call (secrets.token_urlsafe(32)) and kept in the stack's keys file beside its other
secrets (compose/.env; the local stack's STATE_DIR/.env; k8s/secrets.env), as PERSON_KEY_<NAME>; --rotate replaces
it, --revoke removes it. Every call then rewrites the gateway's people-keys.json ({sha256 of a key: name}, for the
people models.yml still has): a running gateway knows a new key at its first request and stops taking a removed one
within a second or two, no restart. The gateway
never gets a person's key, only its hash. Exit 2 for a name models.yml's `people:` does not have.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
import tempfile
from pathlib import Path

from ..compile.load.loader import load_plan
from ..compile.output import ensure_env_file, read_env_file
from ..compile.plan import PersonPlan, Plan
from ..compile.renderers.clients import person_clients
from ..compile.renderers.k8s import ENV_FILE as K8S_ENV_FILE
from ..compile.renderers.k8s import ENV_HEADER as K8S_ENV_HEADER
from ..compile.renderers.k8s import K8S_DIR
from ..compile.renderers.stack import ENV_FILE, ENV_HEADER
from ..errors import ConfigError, Problem, print_problems
from ..shipped.gateway_hooks.people import KEYS_FILE, key_hash

LOCAL_HEADER = "# Keys of the local stack, made by `python -m generator.operate.runtime up`. Never commit."


def hashes(plan: Plan, keys: dict[str, str]) -> dict[str, str]:
    """{sha256 of a key: name} for every person of the plan who has a key in `keys`."""
    return {key_hash(keys[p.key_env]): p.name for p in plan.people if keys.get(p.key_env)}


def write_hashes(plan: Plan, keys_file: Path, gateway_dir: Path) -> Path:
    """gateway_dir/people-keys.json from the keys file, replaced in one rename (the gateway never reads half)."""
    keys = read_env_file(keys_file) if keys_file.exists() else {}
    gateway_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=gateway_dir, prefix=f".{KEYS_FILE}.", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(hashes(plan, keys), fh, indent=1, sort_keys=True)
        fh.write("\n")
    os.chmod(tmp, 0o644)  # hashes of 256-bit random keys, read by the gateway's user (in its container too)
    path = gateway_dir / KEYS_FILE
    os.replace(tmp, path)
    return path


def drop_key(keys_file: Path, env: str) -> None:
    if not keys_file.exists():
        return
    lines = [ln for ln in keys_file.read_text().splitlines() if ln.partition("=")[0].strip() != env]
    fd, tmp = tempfile.mkstemp(dir=keys_file.parent, prefix=".env.", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, keys_file)


def person_key(keys_file: Path, person: PersonPlan, header: str, rotate: bool = False) -> str:
    """The person's key from the keys file, made when missing (or when rotating)."""
    if rotate:
        drop_key(keys_file, person.key_env)
    ensure_env_file(keys_file, (person.key_env,), header)
    return read_env_file(keys_file)[person.key_env]


def find_person(plan: Plan, name: str) -> PersonPlan:
    for p in plan.people:
        if p.name == name:
            return p
    names = [p.name for p in plan.people]
    close = difflib.get_close_matches(name, names, n=1)
    hint = (
        f"did you mean {close[0]!r}?"
        if close
        else (f"people: {', '.join(names)}" if names else "add them under `people:` in models.yml first")
    )
    raise ConfigError([Problem(plan.source, f"people.{name}", f"no such person; {hint}")])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m generator.operate.keys", description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=Path("models.yml"))
    ap.add_argument("--name", required=True)
    ap.add_argument(
        "--out", type=Path, default=Path("."), help="where compose/ and litellm/ are (make regenerate's --out)"
    )
    change = ap.add_mutually_exclusive_group()
    change.add_argument("--rotate", action="store_true", help="replace the key (the old one gets 401)")
    change.add_argument("--revoke", action="store_true", help="remove the key (it gets 401); prints nothing")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--state-dir", type=Path, help="the local stack's state dir (make demo: .cache/local-stack)")
    where.add_argument("--k8s", action="store_true", help="k8s/secrets.env and the hashes for the Kubernetes Secret")
    ap.add_argument(
        "--clients",
        action="store_true",
        help="write clients/people/NAME/ (agents' configs carrying the key, mode 600) instead of printing the key",
    )
    args = ap.parse_args(argv)
    from rich.console import Console

    console = Console(stderr=True, highlight=False)
    try:
        plan = load_plan(args.models)
        person = find_person(plan, args.name)
    except ConfigError as exc:
        print_problems(exc, console)
        return 2
    if args.state_dir:
        keys_file, header, gateway_dir = args.state_dir / ".env", LOCAL_HEADER, args.state_dir / "litellm"
    elif args.k8s:
        keys_file, header, gateway_dir = args.out / K8S_ENV_FILE, K8S_ENV_HEADER, args.out / K8S_DIR
    else:
        keys_file, header, gateway_dir = args.out / ENV_FILE, ENV_HEADER, args.out / "litellm"
    if args.revoke:
        drop_key(keys_file, person.key_env)
        write_hashes(plan, keys_file, gateway_dir)
        console.print(f"{person.name}: key revoked ({keys_file}); a running gateway answers it 401 within seconds")
        return 0
    key = person_key(keys_file, person, header, rotate=args.rotate)
    path = write_hashes(plan, keys_file, gateway_dir)
    console.print(f"{person.name}: key in {keys_file} ({person.key_env}); its hash in {path}", soft_wrap=True)
    if args.clients:
        try:
            files = person_clients(plan, person, key)
        except ConfigError as exc:
            print_problems(exc, console)
            return 2
        for rel, text in files.items():
            target = args.out / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            os.chmod(tmp, 0o600)  # they carry the key
            os.replace(tmp, target)
        console.print(
            f"wrote {', '.join(files)} (mode 600, git-ignored: they carry {person.name}'s key)", soft_wrap=True
        )
        return 0
    print(key)
    return 0


if __name__ == "__main__":
    sys.exit(main())
