"""Every shell command README.md and docs/*.md show, where it runs, and a runner for the ones CI runs from here.

    python3 tests/docs/readme.py list          # each command, and who runs it (or why it cannot run here)
    python3 tests/docs/readme.py quick-start   # README's Quick start block, exactly as written (CI's first phase)
    python3 tests/docs/readme.py commands      # the other CPU-safe commands, README first, then docs/ page by page
                                               # (CI, after make test); a command shown twice runs once

Commands come from the pages' ```bash blocks (`\\`-continued lines joined, trailing `# comments` dropped)
and from the first column of their command tables. Each must match one rule of WHERE, first match wins;
tests/unit/test_readme_commands.py fails on a command no rule covers, so a new command in the README or a
docs/ page is either run or says why it cannot be. docs/_incoming/ (text not yet placed) is not read.
Standard library only: CI runs it before and after the venvs exist.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def pages() -> list[Path]:
    """README.md, then every docs/ page in name order (docs/_incoming/ holds text not yet placed)."""
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


RUN = "run"  # run by `readme.py commands` (CI, with the demo stack up); everything else names who runs it
CI = "ci: "
NOT_HERE = "not here: "

# (regex on the command, where it runs). Order matters: the first match wins.
WHERE: list[tuple[str, str]] = [
    (r"^make demo$", CI + "quick start (this file's `quick-start`, first thing after the installs)"),
    (r"^make test$", CI + "quick start; make test shares the stack make demo left running"),
    (r"^make demo STOP=1$", RUN),
    (r"^make (regenerate|check|k8s|clients|schema|down)$", RUN),
    (r"^make usage$", RUN),
    (r"^make browser$", RUN),  # installed already by .ci/run (make test needs it): a check that it is there
    (
        r"^make page-screenshots$",
        CI + "make test takes the screenshots (.cache/page-screenshots, printed by .ci/run); copying them over "
        "docs/images/ would change committed files, which CI forbids",
    ),  # against the demo stack make test left running (its people: bob, ann)
    (
        r"^make key( |$)",
        CI + "make test: tests/unit/test_keys.py runs `make key` on a models.yml with people: (the repo's has none)",
    ),
    (r"^make status( JSON=1)?$", RUN),  # against the demo stack make test left running
    (
        r"^\.venv/bin/python -m generator\.operate\.runtime (up --models examples/cpu-on-demand/models\.yml|down)$",
        CI + "make test: tests/integration/test_on_demand.py starts this file's stack through the same runtime (idle "
        "shortened, a broken model added), reads the controller's states and stops it",
    ),
    (
        r"^make status WATCH=1$",
        NOT_HERE + "refreshes until Ctrl-C, for a person; it draws the table make status prints",
    ),
    (
        r"^make status MODELS=path/to/",
        NOT_HERE + "a placeholder path; make status MODELS=... is run by tests/integration/test_status.py",
    ),
    (
        r"^make status MODELS=examples/cpu-on-demand/models\.yml$",
        CI + "make test: tests/integration/test_status.py runs status --models with the running local stack's own "
        "models.yml (that stack's key, not compose/.env's), the path this command takes for the on-demand stack",
    ),
    (r"^make status K8S=1$", NOT_HERE + "a Kubernetes cluster (a port-forward to its gateway)"),
    (r"^make unit$", CI + "inside make test (make test = the unit tests + the rest)"),
    (r"^make lint$", CI + "beside the quick start (.ci/run), its exit checked after it; make check runs it too"),
    (
        r"^GATEWAY_URL=http://127\.0\.0\.1:4000 "
        r"GATEWAY_KEY=\$\(sed -n 's/\^LITELLM_MASTER_KEY=//p' \.cache/local-stack/\.env\)",
        RUN,
    ),  # the tests against the running demo, as a user copies them
    (r"^make compose-test$", CI + "its own phase (a real Docker engine)"),
    (
        r"^make apply( DRY_RUN=1)?$",
        CI + "inside make compose-test (tests/compose/test_apply.py applies changed copies of the "
        "CPU compose example to its running stack)",
    ),
    (
        r"^make (images|engine-down)$",
        CI + "inside make compose-test (docker/compose-test.sh builds the images, stops the engine)",
    ),
    (r"^make agents$", CI + "its own phase (agents-install)"),
    (r"^make agents-test$", CI + "inside make test (tests/integration/agents)"),
    (r"^make parsers$", CI + "inside make test (tests/integration/parsers: every family, both stream intervals)"),
    (r"^\.venv/bin/python -m generator --models examples/routing/models\.yml --out /tmp/routing-example$", RUN),
    (r"^make catalog$", CI + "inside make test (tests/unit/test_catalog.py rebuilds the catalog and compares)"),
    (
        r"^\.venv/bin/python -m pytest -s tests/integration/test_fuzz_apis\.py$",
        CI + "inside make test (tests/integration/test_fuzz_apis.py through the demo stack)",
    ),
    (
        r"^FUZZ_REQUESTS=\d+ FUZZ_SEED=\d+ \.venv/bin/python -m pytest",
        NOT_HERE + "a longer fuzz run of another seed, for a person; make test runs the 2,000 per API of seed 31",
    ),
    (r"^make hub-versions$", CI + "beside the quick start, after the install phase (.ci/run)"),
    (r"^make promtool$", CI + "inside make test (a prerequisite of make test and make unit)"),
    (
        r"^curl -s http://127\.0\.0\.1:4000/v1/rerank ",
        CI + "make test: tests/integration/test_pooling.py sends this "
        "rerank request (its designed documents) through the gateway of examples/cpu-pooling",
    ),
    (
        r"^docker compose exec dcgm-exporter|^curl -s 'http://127\.0\.0\.1:9090/|^curl -su admin:.*:3000/",
        NOT_HERE + "a GPU compose stack (dcgm-exporter, Grafana); make compose-test queries the CPU stack's Prometheus",
    ),
    (
        r"^make bench(-tune|-soak|-profile|-pairs)?( SOAK_MINUTES=\d+)?$",
        NOT_HERE + "minutes of load each; tests/bench runs a miniature make bench in make test",
    ),
    (r"^make bench BACKEND_URL=", NOT_HERE + "a running GPU deployment (a real backend to compare with)"),
    (
        r"^make bench-replicas$",
        NOT_HERE + "about 3 minutes of two vLLM CPU replicas under load (its numbers are in "
        "docs/replicas.md); tests/integration/test_replicas.py runs the same stack in make test",
    ),
    (r"^make bench-replicas MODELS=", NOT_HERE + "a GPU host with the models of that file"),
    (r"^\$EDITOR ", NOT_HERE + "an editor, for a person"),
    (
        r"^cd compose && docker compose (up -d && docker compose )?--profile on-demand (create|down)$",
        NOT_HERE + "a GPU compose stack with on-demand models; "
        "tests/unit/test_on_demand.py checks the profile and the controller in the generated file; make compose-test's "
        "last step makes a CPU model on demand with make apply (which runs the create) "
        "and stops it with the profile's down",
    ),
    (
        r"^cd compose && docker compose up -d",
        NOT_HERE + "the CUDA vLLM image and GPUs; make compose-test runs a generated "
        "compose file of the same shape (examples/cpu-compose) in a real engine",
    ),
    (
        r"^docker compose (-f compose/nodes/\S+ up -d|ps deepseek-r1)$",
        NOT_HERE
        + "the hosts of a model on nodes (GPUs, the CUDA image); tests/unit/test_compose_nodes.py checks every "
        "host's file against the Compose schema, docs/multinode.md says what runs on this machine",
    ),
    (
        r"^GATEWAY_URL=\S+ GATEWAY_KEY=\$\(sed -n 's/\^LITELLM_MASTER_KEY=//p' compose/\.env\)",
        NOT_HERE + "a GPU compose stack; make compose-test runs the same tests against the CPU compose stack",
    ),
    (r"^export LITELLM_MASTER_KEY=\.\.\.$", NOT_HERE + "a placeholder for the user's key"),
    (
        r"(^|&& |; )(opencode|codex|claude)\b|CODEX_HOME=|OPENCODE_CONFIG=",
        NOT_HERE + "interactive agents; tests/integration/agents runs each "
        "non-interactively with the same clients/ files",
    ),
    (
        r"^(POD=\$\()?kubectl |^tar .*kubectl|^GATEWAY_URL=.*k8s/secrets\.env",
        NOT_HERE + "a Kubernetes cluster; tests/unit/test_k8s.py and tests/k8s check the manifests",
    ),
]


@dataclass(frozen=True)
class Command:
    line: int  # line of its page it starts on
    text: str  # as a user types it (continuations joined, comment dropped)
    block: int | None  # index of its ```bash block; None for a command table
    page: str = "README.md"  # relative to the repository root

    @property
    def where_shown(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def where(self) -> str | None:
        return next((how for pattern, how in WHERE if re.search(pattern, self.text)), None)


def _strip_comment(line: str) -> str:
    """Drop a trailing `# comment` (README style: a `#` after whitespace, outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if ch in "'\"" and quote in (None, ch):
            quote = None if quote else ch
        elif ch == "#" and quote is None and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def bash_blocks(text: str, page: str = "README.md") -> list[tuple[int, list[Command]]]:
    blocks = []
    for n, m in enumerate(re.finditer(r"^```(bash|sh|shell)\n(.*?)^```", text, re.S | re.M)):
        first = text[: m.start(2)].count("\n") + 1
        commands, pending, start = [], "", first
        for offset, raw in enumerate(m.group(2).splitlines()):
            line = _strip_comment(raw)
            if not pending:
                start = first + offset
            if line.endswith("\\"):
                pending += line[:-1].rstrip() + " "
                continue
            full = (pending + line.strip()).strip()
            pending = ""
            if full:
                commands.append(Command(start, re.sub(r"\s+", " ", full), n, page))
        blocks.append((first, commands))
    return blocks


def table_commands(text: str, page: str = "README.md") -> list[Command]:
    """`make ...` commands in the first column of the command table (| command | what it does |)."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("| `make"):
            first_cell = line.split("|")[1]
            found += [Command(number, cmd, None, page) for cmd in re.findall(r"`(make [^`]+)`", first_cell)]
    return found


def page_commands(text: str, page: str = "README.md") -> list[Command]:
    return [c for _, block in bash_blocks(text, page) for c in block] + table_commands(text, page)


def commands(text: str | None = None) -> list[Command]:
    """Every page's commands (README first), or those of one page's text."""
    if text is not None:
        return page_commands(text)
    return [c for path in pages() for c in page_commands(path.read_text(), str(path.relative_to(ROOT)))]


def quick_start(text: str | None = None) -> list[Command]:
    """The first bash block under `## Quick start`."""
    text = README.read_text() if text is None else text
    section = text.index("## Quick start")
    return next(block for first, block in bash_blocks(text) if text[:section].count("\n") < first)


def run(cmds: list[Command], env: dict[str, str] | None = None) -> int:
    """Each command with bash from the repo root, as a user types it; stop at the first failure."""
    total = time.monotonic()
    for c in cmds:
        print(f"readme: $ {c.text}    ({c.where_shown})", flush=True)
        start = time.monotonic()
        rc = subprocess.run(["bash", "-c", c.text], cwd=ROOT, env={**os.environ, **(env or {})}).returncode
        print(f"readme: exit {rc} after {time.monotonic() - start:.0f}s", flush=True)
        if rc:
            print(f"readme: FAILED: `{c.text}` ({c.where_shown}) exited {rc}", flush=True)
            return 1
    print(f"readme: {len(cmds)} command(s) ran in {time.monotonic() - total:.0f}s", flush=True)
    return 0


def to_run(text: str | None = None) -> list[Command]:
    """The RUN commands once each (a command several pages show runs once), README first, then the docs/ pages;
    `make down` and `make demo STOP=1` last (they stop the demo stack the others use)."""
    seen, picked = set(), []
    for c in commands(text):
        if c.where == RUN and c.text not in seen:
            seen.add(c.text)
            picked.append(c)
    stoppers = ("make demo STOP=1", "make down")
    return [c for c in picked if c.text not in stoppers] + sorted(
        (c for c in picked if c.text in stoppers), key=lambda c: stoppers.index(c.text)
    )


def main(argv: list[str]) -> int:
    action = argv[0] if argv else "list"
    if action == "list":
        for c in commands():
            print(f"{c.where_shown}: {c.text}\n    -> {c.where or 'UNCLASSIFIED'}")
        return 0
    if action == "quick-start":
        return run(quick_start())
    if action == "commands":
        # the test snippet runs one module of the suite: the whole suite ran through the same stack in make test
        return run(
            to_run(), env={"PYTEST_ADDOPTS": os.environ.get("README_PYTEST_ADDOPTS", "-q -k test_gateway_basics")}
        )
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
