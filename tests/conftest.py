import contextlib
import fcntl
import gc
import json
import os
import time
from pathlib import Path

import pytest
from hypothesis import settings

from generator.operate.runtime.ports import DEFAULT_RANGE, RANGE_ENV

# Tests that import LiteLLM in this process (the hook modules) must not fetch its price map from the
# internet, as the gateway never does (gateway_process.BASE_ENV); it has to be set before the import.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# CI runs the same examples every time (a new failure is a finding, not a coin flip); locally, explore.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


# Every test process (unit, k8s, integration, ...): the generator run in-process by any test must not
# reach the real Hub, and huggingface_hub must first be imported under these settings (a k8s test that
# ran the CLI first left the Hub tests timing out).
@pytest.fixture(autouse=True)
def no_hub(monkeypatch, tmp_path_factory):
    """Unit tests never reach the Hugging Face Hub (CI has no internet): offline, a Hugging Face home of
    their own (not the user's caches or token) and a closed local endpoint, also for what huggingface_hub
    read when first imported. tests/unit/fake_hub.py stands in for the Hub where a test needs one."""
    home = tmp_path_factory.mktemp("hf-home")
    for var in (
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HF_HUB_CACHE",
        "HUGGINGFACE_HUB_CACHE",
        "HF_ASSETS_CACHE",
        "HUGGINGFACE_ASSETS_CACHE",
        "TRANSFORMERS_OFFLINE",
        "FIT_HUB_TIMEOUT",
        "XDG_CACHE_HOME",
        "HF_OIDC_RESOURCE",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens
    # what huggingface_hub read from the environment when this process first imported it
    import huggingface_hub.constants as hf

    for name, value in (
        ("HF_HUB_CACHE", home / "hub"),
        ("HF_ASSETS_CACHE", home / "assets"),
        ("HF_TOKEN_PATH", home / "token"),
        ("HF_STORED_TOKENS_PATH", home / "stored_tokens"),
        ("ENDPOINT", "http://127.0.0.1:9"),
        ("HF_HUB_OFFLINE", True),
    ):
        monkeypatch.setattr(hf, name, str(value) if isinstance(value, Path) else value)


def worker_port_range(worker: str, count: int) -> str:
    """The FREE_PORT_RANGE of pytest-xdist worker `worker` (gw0, gw1, ...) of `count`: its own slice of the range
    the stacks' free ports come from (generator/operate/runtime/ports.py), so that a port one worker picked for a
    stack that binds it later (an on-demand backend: minutes later) is never picked by the other."""
    low, high = DEFAULT_RANGE
    size = (high - low + 1) // count
    index = int(worker.removeprefix("gw"))
    return f"{low + index * size}-{low + (index + 1) * size - 1}"


# pytest's own processes collect their youngest generation after GC_THRESHOLD0 net allocations (CPython: 700) and
# freeze what collection imported: a test process holds a large heap (LiteLLM, vLLM's config types, Hypothesis) that
# every full collection traversed again. The fuzz test's client (Hypothesis + httpx, 4,000 requests): 34.7 CPU-s
# instead of 39.5. Nothing in the tests waits for an automatic collection (what must be collected, they collect).
GC_THRESHOLD0 = 50_000


def pytest_configure(config):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:  # set before any test picks a port; the processes the tests start inherit it
        os.environ[RANGE_ENV] = worker_port_range(worker, int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    gc.set_threshold(GC_THRESHOLD0, *gc.get_threshold()[1:])


def pytest_collection_finish(session):
    gc.freeze()


@contextlib.contextmanager
def host_ports_lock():
    """Held by a test that counts the local demo's backend requests (test_people.py's route walk) and by one that asks
    127.0.0.1:8001 for a compose backend (test_compose.py: the local demo serves there too, and a refused request is a
    request it counts): in CI the two run side by side, in processes of their own."""
    path = Path(__file__).resolve().parents[1] / ".cache" / "host-ports.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


FUZZ_COUNT = "fuzz count"  # tests/integration/test_fuzz_apis.py's line per API, a property of its report


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The fuzz test's count per API, whatever the capture mode (CI's make test runs without -s); here, not in
    tests/integration/conftest.py, which pytest-xdist's controller never loads (its workers collect)."""
    for status in ("passed", "failed"):
        for report in terminalreporter.stats.get(status, []):
            for name, line in getattr(report, "user_properties", ()):
                if name == FUZZ_COUNT and report.when == "call":
                    terminalreporter.write_line(line)
    skip_log(terminalreporter, config)


def skip_log(terminalreporter, config):
    """With PYTEST_SKIP_LOG set (.ci/run sets it), every skipped test and its reason is appended to that file
    as a JSON line, so the CI run can print all of its skips at the end and refuse the ones that hide a
    test running nowhere (.ci/skips.py)."""
    path = os.environ.get("PYTEST_SKIP_LOG")
    if not path:
        return
    import json

    run = " ".join(config.invocation_params.args) or "pytest"
    with open(path, "a", encoding="utf-8") as log:
        for report in terminalreporter.stats.get("skipped", []):
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            log.write(
                json.dumps({"run": run, "test": report.nodeid, "reason": reason.removeprefix("Skipped: ")}) + "\n"
            )


LIGHT = ("tests/unit/", "tests/docs/")  # no stack of their own, no running stack: a file at a time on any worker
STACKS = "stacks"  # the shared stack's tests (make demo's or the session's) and the agents' and parsers' stacks
# Tests that start a stack of their own and never touch the shared one: each file (bench/ and k8s/: each folder) is a
# unit of work of its own, moved to the END of the collection, longest first (LPT): the worker that ran the unit and
# docs files takes the first once they are done, beside the STACKS unit, and whichever worker is free then takes the
# next, so the two end close together. With one "own" unit after the unit files and replicas, pooling and the
# partial stack inside STACKS, the STACKS worker ran alone for the last ~195 s of a CI run's make test, the cores
# ~50% idle (2026-11-27); two heavy stacks at once had starved each other when every start spawned vLLM and LiteLLM
# anew (docs/testing.md), before the fork servers.
OWN_STACKS = "own"
OWN = (  # longest first: wall seconds of each in that CI run
    "tests/integration/test_replicas.py",  # 171
    "tests/integration/test_on_demand.py",  # 161
    "tests/bench/",  # 140
    # 48 in that run; its stack now also serves a model on two nodes (two vLLM processes, ~37 CPU-s more): 82-104 s
    # measured here (2 cores shared with other runs), against 44 s without it
    "tests/integration/test_partial_availability.py",
    "tests/integration/test_pooling.py",  # 59
    "tests/k8s/",  # 31
)


def own_rank(path: str) -> int | None:
    """The place of the OWN unit `path` belongs to, or None."""
    return next((i for i, prefix in enumerate(OWN) if path.startswith(prefix)), None)


def xdist_group_of(nodeid: str) -> str:
    """The pytest-xdist group (unit of work) a test belongs to."""
    path = nodeid.split("::")[0]
    if path.startswith(LIGHT):
        return path.removesuffix(".py")
    rank = own_rank(path)
    return STACKS if rank is None else f"{OWN_STACKS}-{rank}-{OWN[rank].removesuffix('.py').rstrip('/')}"


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook, which reads these marks into the test ids
def pytest_collection_modifyitems(config, items):
    """`make test` runs on two pytest-xdist workers (`-n 2 --dist loadgroup --no-loadscope-reorder`, Makefile), which
    take units of work in collection order. ONE worker runs every test of the shared stack (and of the agents' and
    parsers' stacks) in the order one process would (the demo stack's tests count its requests, kill its backends and
    spend its people's limits); the other runs the unit and docs tests, a file at a time, and then the OWN units,
    longest first, which the first worker takes too once it is free. Without -n the marks change nothing but the
    order."""
    rank = {item.nodeid: own_rank(item.nodeid.split("::")[0]) for item in items}
    items.sort(key=lambda item: -1 if rank[item.nodeid] is None else rank[item.nodeid])  # stable: OWN last, LPT
    for item in items:
        item.add_marker(pytest.mark.xdist_group(xdist_group_of(item.nodeid)))


TIMELINE_ENV = "PYTEST_TIMELINE"  # .ci/run: a file each test's file and wall-clock span is appended to (.ci/cpu.py)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With PYTEST_TIMELINE set, one line per test (setup, call and teardown: a module's stack start is in its first
    test): the CI's CPU report splits the cores' busy time among the files running (.ci/cpu.py). The compose
    phase's runs (against GATEWAY_URL) are marked `compose:`."""
    path = os.environ.get(TIMELINE_ENV)
    start = time.time()
    yield
    if path:
        where = "compose: " if os.environ.get("GATEWAY_URL") or os.environ.get("COMPOSE_ENV_FILE") else ""
        line = json.dumps({"file": where + item.nodeid.split("::")[0], "start": start, "end": time.time()})
        with open(path, "a") as f:
            f.write(line + "\n")
