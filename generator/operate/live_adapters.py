"""Adding and removing a model's LoRA adapters on its running backend, without a restart (`make apply`).

A backend with `adapters:` runs with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True (generator/compile/load/adapters.py), so
vLLM 0.32 serves (vllm/entrypoints/serve/lora/api_router.py, protocol.py; handlers in
vllm/entrypoints/openai/models/serving.py):

- POST /v1/load_lora_adapter {"lora_name", "lora_path", "load_inplace"}: 200 "Success: ...", 400 when the name is
  loaded already (unless load_inplace) or is the base's, 404/500 when the path does not load;
- POST /v1/unload_lora_adapter {"lora_name"}: 200, 404 when it is not loaded. An unload only forgets the name:
  requests in flight for it finish.

Both are under /v1, so they need the backend's key like every other /v1 route (vllm/entrypoints/serve/middleware/
authenticate.py GUARDED_PREFIX). The command keeps --lora-modules with the current adapters, so a restart loads the
same set.

A change is live when the only difference of the backend's definition is its adapter list: the rest of the command,
the image, the environment, volumes ... are the same, and --max-lora-rank does not grow (an adapter of a higher rank
than the running backend's fails to load). A --max-loras change (the generator writes the number of adapters) takes
effect at the backend's next restart: until then vLLM serves every loaded adapter and at most the old number of them
in one batch (the others wait their turn; vllm/lora/worker_manager.py swaps adapters in and out of its slots).

Plain data here, and the calls through a `post(route, body) -> (status, text)` the caller gives: 127.0.0.1:<port> for
the local runtime, `docker compose exec` of the backend container for compose (apply.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

ENV = "VLLM_ALLOW_RUNTIME_LORA_UPDATING"
LOAD, UNLOAD = "/v1/load_lora_adapter", "/v1/unload_lora_adapter"
_ADAPTER_FLAGS = ("--lora-modules", "--max-loras", "--max-lora-rank")

Post = Callable[[str, dict], tuple[int, str]]


@dataclass(frozen=True)
class LiveUpdate:
    """What to do on the running backend: load (name, path) (a changed path: in place), then unload names."""

    load: tuple[tuple[str, str], ...] = ()
    replace: tuple[tuple[str, str], ...] = ()  # same name, new path
    unload: tuple[str, ...] = ()
    later: tuple[str, ...] = ()  # flag changes the running backend takes at its next restart

    def lines(self, model: str) -> list[str]:
        return (
            [f"load adapter {n} into {model} (no restart)" for n, _ in self.load]
            + [f"reload adapter {n} from {p} into {model} (no restart)" for n, p in self.replace]
            + [f"unload adapter {n} from {model} (no restart)" for n in self.unload]
            + [f"{line} at its next restart" for line in self.later]
        )


def _item(token: str) -> tuple[str, str]:
    if token.startswith("{"):
        data = json.loads(token)
        return str(data["name"]), str(data["path"])
    name, _, path = token.partition("=")
    return name, path


def split_command(cmd: list[str]) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """(the command without its adapter flags, {adapter: path} of --lora-modules,
    {--max-loras/--max-lora-rank: value})."""
    rest: list[str] = []
    modules: dict[str, str] = {}
    values: dict[str, str] = {}
    i = 0
    while i < len(cmd):
        flag, eq, value = cmd[i].partition("=")
        if flag == "--lora-modules":
            items = [value] if eq else []
            i += 1
            while not eq and i < len(cmd) and not cmd[i].startswith("--"):
                items.append(cmd[i])
                i += 1
            modules = dict(_item(t) for t in items)  # a later --lora-modules replaces the first (vLLM's nargs +)
            continue
        if flag in _ADAPTER_FLAGS:
            if eq:
                values[flag] = value
                i += 1
            else:
                values[flag] = cmd[i + 1] if i + 1 < len(cmd) else ""
                i += 2
            continue
        rest.append(cmd[i])
        i += 1
    return rest, modules, values


def _enabled(service: dict) -> bool:
    return str((service.get("environment") or {}).get(ENV, "")).strip().lower() in ("1", "true")


def live_update(old: dict, new: dict) -> LiveUpdate | None:
    """The runtime calls that take a backend from compose service `old` to `new`; None when that needs a restart
    (anything besides the adapter list differs, the running backend has no runtime routes, the rank grows) or when
    the adapters are the same."""
    if not (_enabled(old) and _enabled(new)):
        return None
    if {k: v for k, v in old.items() if k != "command"} != {k: v for k, v in new.items() if k != "command"}:
        return None
    (old_rest, old_mods, old_vals), (new_rest, new_mods, new_vals) = (
        split_command(old.get("command") or []),
        split_command(new.get("command") or []),
    )
    if old_rest != new_rest or not new_mods or old_mods == new_mods:
        return None
    old_rank, new_rank = old_vals.get("--max-lora-rank"), new_vals.get("--max-lora-rank")
    if old_rank != new_rank and not (
        old_rank and new_rank and old_rank.isdigit() and new_rank.isdigit() and int(new_rank) < int(old_rank)
    ):
        return None
    later = [f"--max-lora-rank {old_rank} -> {new_rank}"] if old_rank != new_rank else []
    if old_vals.get("--max-loras") != new_vals.get("--max-loras"):
        later.append(
            f"--max-loras {old_vals.get('--max-loras') or '(default)'} -> {new_vals.get('--max-loras') or '(default)'}"
        )
    return LiveUpdate(
        load=tuple((n, p) for n, p in new_mods.items() if n not in old_mods),
        replace=tuple((n, p) for n, p in new_mods.items() if n in old_mods and old_mods[n] != p),
        unload=tuple(n for n in old_mods if n not in new_mods),
        later=tuple(later),
    )


def load_calls(update: LiveUpdate) -> list[tuple[str, dict]]:
    """Before the gateway routes the new names: load the added adapters, reload the changed ones in place."""
    return [(LOAD, {"lora_name": n, "lora_path": p}) for n, p in update.load] + [
        (LOAD, {"lora_name": n, "lora_path": p, "load_inplace": True}) for n, p in update.replace
    ]


def unload_calls(update: LiveUpdate) -> list[tuple[str, dict]]:
    """After the gateway stopped routing the removed names."""
    return [(UNLOAD, {"lora_name": n}) for n in update.unload]


class LiveUpdateError(RuntimeError):
    pass


def call(post: Post, calls: list[tuple[str, dict]], model: str) -> list[str]:
    """Each call in order, one line each of what was done; a failed one raises (naming the adapter, the model
    and vLLM's answer). An unload of a name the backend does not have (404) is done already."""
    done = []
    for route, body in calls:
        name = body["lora_name"]
        status, text = post(route, body)
        if status == 404 and route == UNLOAD:
            done.append(f"adapter {name} was not loaded in {model} (nothing to unload)")
        elif status != 200:
            raise LiveUpdateError(
                f"{'loading' if route == LOAD else 'unloading'} adapter {name} "
                f"{'into' if route == LOAD else 'from'} {model}: HTTP {status or '?'}: "
                f"{text.strip()[:500]}"
            )
        else:
            done.append(
                f"{'unloaded' if route == UNLOAD else 'reloaded' if body.get('load_inplace') else 'loaded'} "
                f"adapter {name} {'from' if route == UNLOAD else 'into'} {model} (no restart)"
            )
    return done


def http_post(base_url: str, key: str, timeout: float = 600) -> Post:
    """post() to a backend at base_url (the local runtime: http://127.0.0.1:<port>) with its key."""
    import urllib.error
    import urllib.request

    def post(route: str, body: dict) -> tuple[int, str]:
        req = urllib.request.Request(
            base_url + route,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read().decode(errors="replace")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")

    return post


# run by python3 inside the backend container (compose: backends publish no port): argv = port route json-body;
# the key is the container's own VLLM_API_KEY; prints "<status> <text>"
IN_CONTAINER = """
import json, os, sys, urllib.error, urllib.request
port, route, body = sys.argv[1:4]
req = urllib.request.Request(f"http://127.0.0.1:{port}{route}", data=body.encode(), method="POST",
    headers={"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["VLLM_API_KEY"]})
try:
    with urllib.request.urlopen(req, timeout=600) as r:
        print(r.status, r.read().decode(errors="replace"))
except urllib.error.HTTPError as exc:
    print(exc.code, exc.read().decode(errors="replace"))
"""


def parse_printed(text: str) -> tuple[int, str]:
    """IN_CONTAINER's output -> (status, text); (0, text) when it printed no status."""
    head, _, rest = text.strip().partition(" ")
    return (int(head), rest) if head.isdigit() else (0, text)
