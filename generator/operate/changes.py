"""What applying a new models.yml to a running stack does, service by service (`make apply` prints it).

Plain data in, plain data out: the compose document and gateway files that were applied (what runs),
the ones just rendered, and which services have a container. No Docker here (apply.py asks Docker).

- a model service (or any service this module does not know, e.g. an observability one) is recreated
  when its definition changed: compose's own rule (its config-hash label), so a plain
  `docker compose up -d` does the same; the lines say what changed (`--max-model-len 2048 -> 1536`);
- the gateway is recreated when its service changed (port, image, workers, environment: keys of added
  or removed models), which cuts requests in flight, and the plan says so; when only its files changed
  (config.yaml, hook modules) it is reloaded by its supervisor: rolling, no cut, with >= 2 workers;
- a backend whose definition differs only in its LoRA adapter list (and its runtime adapter routes are on) is
  updated live: its adapters are loaded / unloaded through vLLM's runtime routes, no restart, no cut
  (live_adapters.py); its container keeps the command it was made with until its next restart, which then loads
  the adapters of the new command;
- services in the new file without a container are added; containers whose service is gone are removed.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

import yaml

from ..shipped.gateway_hooks.gateway_supervisor import content
from .live_adapters import LiveUpdate, live_update

GATEWAY = "litellm"  # the gateway's compose service
REDEFINED = "its container was made from another definition"  # apply.py: its config-hash differs from the new file's


@dataclass(frozen=True)
class Change:
    action: str  # add | recreate | adapters (live, no restart) | reload | remove | unchanged
    service: str
    details: tuple[str, ...] = ()  # what changed, one short line each
    cut: str = ""  # why requests in flight through it are cut ("" = they are not)
    waits_for: tuple[str, ...] = ()  # services that must be healthy before it starts (depends_on)
    live: LiveUpdate | None = None  # action adapters: the runtime calls

    def __str__(self) -> str:
        head = f"{self.action} {self.service}" if self.action != "unchanged" else f"unchanged: {self.service}"
        if self.details:
            head += ": " + "; ".join(self.details)
        if self.waits_for:
            head += f" (starts once {', '.join(self.waits_for)} is healthy)"
        if self.cut:
            head += f"\n    CUT: {self.cut}"
        return head


def flags(cmd: list[str]) -> tuple[list[str], dict[str, str]]:
    """A `vllm serve` / LiteLLM command as (positional words, {--flag: value or ''}), in order."""
    words, out, key = [], {}, None
    for token in cmd:
        if token.startswith("--"):
            key, _, value = token.partition("=")
            out[key] = value
            key = key if not value else None
        elif key is not None:
            out[key] = f"{out[key]} {token}".strip()
            key = None
        else:
            words.append(token)
    return words, out


def command_changes(old: list[str] | None, new: list[str] | None) -> list[str]:
    (old_words, old_flags), (new_words, new_flags) = flags(old or []), flags(new or [])
    lines = [f"{shlex.join(old_words)} -> {shlex.join(new_words)}"] if old_words != new_words else []
    for flag in dict.fromkeys([*old_flags, *new_flags]):
        if flag not in new_flags:
            lines.append(f"{flag} removed" + (f" (was {old_flags[flag]})" if old_flags[flag] else ""))
        elif flag not in old_flags:
            lines.append(f"{flag} {new_flags[flag]} added".replace("  ", " "))
        elif old_flags[flag] != new_flags[flag]:
            lines.append(f"{flag} {old_flags[flag]} -> {new_flags[flag]}")
    return lines


def _mapping_changes(label: str, old: dict, new: dict) -> list[str]:
    lines = []
    for key in dict.fromkeys([*old, *new]):
        if key not in new:
            lines.append(f"{label}{key} removed")
        elif key not in old:
            lines.append(f"{label}{key}={new[key]} added")
        elif old[key] != new[key]:
            lines.append(f"{label}{key} {old[key]} -> {new[key]}")
    return lines


def _gpus(service: dict) -> list[str]:
    devices = ((((service.get("deploy") or {}).get("resources") or {}).get("reservations") or {}).get("devices")) or []
    return [g for d in devices for g in d.get("device_ids", [])]


def service_changes(old: dict, new: dict) -> list[str]:
    """What differs between two definitions of one compose service, one short line per change."""
    lines = []
    for key in dict.fromkeys([*old, *new]):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if key == "command":
            lines += command_changes(a, b)
        elif key == "environment":
            lines += _mapping_changes("env ", a or {}, b or {})
        elif key == "image":
            lines.append(f"image {a} -> {b}")
        elif key == "deploy" and _gpus(old) != _gpus(new):
            lines.append(f"gpus [{', '.join(_gpus(old))}] -> [{', '.join(_gpus(new))}]")
        elif key == "depends_on":
            lines.append(f"start after [{', '.join(a or {})}] -> [{', '.join(b or {})}]")
        elif key == "ports":
            lines.append(f"published port {', '.join(a or [])} -> {', '.join(b or [])}")
        elif key == "labels":
            lines += _mapping_changes("label ", a or {}, b or {})
        else:
            lines.append(f"{key} changed")
    return lines


def _flat(prefix: str, value) -> dict[str, object]:
    if isinstance(value, dict):
        return {k: v for key, sub in value.items() for k, v in _flat(f"{prefix}{key}.", sub).items()}
    return {prefix.rstrip("."): value}


def config_changes(old_text: str, new_text: str) -> list[str]:
    """LiteLLM config.yaml: per model (`tool-caller max_tokens 256 -> 100`), then the settings."""
    old, new = yaml.safe_load(old_text or "{}") or {}, yaml.safe_load(new_text or "{}") or {}
    models = lambda doc: {m["model_name"]: m for m in doc.get("model_list") or []}  # noqa: E731
    om, nm = models(old), models(new)
    lines = []
    for name in dict.fromkeys([*om, *nm]):
        if name not in nm:
            lines.append(f"{name} no longer routed")
        elif name not in om:
            lines.append(f"{name} routed")
        else:
            a = {**_flat("", om[name].get("litellm_params") or {}), **_flat("", om[name].get("model_info") or {})}
            b = {**_flat("", nm[name].get("litellm_params") or {}), **_flat("", nm[name].get("model_info") or {})}
            lines += [f"{name} {line}" for line in _mapping_changes("", a, b)]
    rest = lambda doc: _flat("", {k: v for k, v in doc.items() if k != "model_list"})  # noqa: E731
    return lines + _mapping_changes("", rest(old), rest(new))


def gateway_file_changes(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """The gateway's folder ({file name: text}), generated headers left out (as its supervisor does)."""
    lines = config_changes(content(old.get("config.yaml", "")), content(new.get("config.yaml", "")))
    # what the supervisor reloads for (config.yaml, *.py); people.json and people-keys.json are read live
    for name in sorted(n for n in set(old) | set(new) if n.endswith(".py")):
        if content(old.get(name, "")) != content(new.get(name, "")):
            lines.append(f"module {name} {'added' if name not in old else 'removed' if name not in new else 'changed'}")
    return lines


def workers(service: dict) -> int | None:
    value = flags(service.get("command") or [])[1].get("--num_workers", "1")
    return int(value) if value.isdigit() else None


def gateway_cut(old: dict, new: dict) -> str:
    why = []
    if old.get("ports") != new.get("ports"):
        why.append("its published port changes")
    if old.get("image") != new.get("image"):
        why.append("its image changes")
    if workers(old) != workers(new):
        why.append("its worker count changes")
    if (old.get("environment") or {}) != (new.get("environment") or {}):
        why.append("its environment changes (keys of added or removed models)")
    if not why:
        why.append("its service definition changes")
    return "the gateway container is recreated (" + ", ".join(why) + "): requests in flight through it are cut"


def plan_changes(
    old_doc: dict,
    new_doc: dict,
    old_files: dict[str, str],
    new_files: dict[str, str],
    running: set[str] | None = None,
    recreate: dict[str, str] | None = None,
) -> list[Change]:
    """old_doc/old_files: the compose document and gateway folder that were applied; new_*: just rendered.
    running: services that have a container (None: those of old_doc). recreate: when known (from Docker),
    the services compose will recreate, with a reason for the ones whose definition looks the same
    (their container was made from another file, or their image was rebuilt); None: decided by the
    definitions alone. Order: removals (they free GPUs), then the new file's order, the gateway last."""
    old_services, new_services = old_doc.get("services") or {}, new_doc.get("services") or {}
    running = set(old_services) if running is None else running
    changes = [Change("remove", s) for s in sorted(running - set(new_services))]
    names = [s for s in new_services if s != GATEWAY] + [s for s in new_services if s == GATEWAY]
    for name in names:
        new = new_services[name]
        old = old_services.get(name, {})
        waits = tuple(s for s in (new.get("depends_on") or {}))
        if name not in running:
            changes.append(Change("add", name, waits_for=waits))
            continue
        details = service_changes(old, new)
        changed = (name in recreate) if recreate is not None else bool(details)
        if changed and not details and recreate is not None:  # changed without details: Docker said so
            details = [recreate[name] or REDEFINED]
        files = gateway_file_changes(old_files, new_files) if name == GATEWAY else []
        live = (
            live_update(old, new)
            if changed and name != GATEWAY and (recreate is None or (recreate[name] or REDEFINED) == REDEFINED)
            else None
        )
        if live is not None:
            changes.append(Change("adapters", name, tuple(live.lines(name)), live=live))
        elif changed:
            cut = gateway_cut(old, new) if name == GATEWAY else ""
            changes.append(Change("recreate", name, tuple(details + files), cut, waits))
        elif files:
            n = workers(new)
            cut = (
                (
                    "one worker: the reload restarts the gateway, requests in flight are cut "
                    "(gateway.workers >= 2 reloads without a cut)"
                )
                if n == 1
                else ""
            )
            changes.append(Change("reload", "gateway", tuple(files), cut))
        else:
            changes.append(Change("unchanged", name))
    return changes
