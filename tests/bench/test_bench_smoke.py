"""`make bench` end to end in miniature: nginx mock, both gateways, JSON + PNG + summary line.

Checks that the benchmark runs and reports; it asserts no timing (figures come from `make bench`).
"""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from generator.operate.runtime.ports import consecutive_free_ports, free_ports

ROOT = Path(__file__).resolve().parents[2]
CHAT = ("small", "stream", "large")
# the coding agents' requests: opencode's chat, Claude Code's /v1/messages and count_tokens, Codex's /v1/responses, and
# Claude Code's and Codex's requests sent as chat (each next to its own API's: what the API itself costs)
APIS = (
    "opencode",
    "opencode-stream",
    "messages",
    "messages-as-chat",
    "messages-stream",
    "messages-as-chat-stream",
    "count_tokens",
    "responses",
    "responses-as-chat",
    "responses-stream",
    "responses-as-chat-stream",
)
SCENARIO_NAMES = CHAT + APIS
D = r"[+-]\d+\.\d\d"  # a signed difference in ms
SUMMARY = re.compile(
    r"^added p50 -?\d+\.\d\d ms \(default -?\d+\.\d\d ms\), "
    r"max rate ratio gateway/direct \d+\.\d{3} \(default \d+\.\d{3}\); "
    r"CPU/request \d+\.\d\d ms 1 worker, \d+\.\d\d ms 2 workers \([+-]\d+%\), "
    r"\d+ req/s per gateway core; 2 workers x\d+\.\d\d the rate on \d+\.\d\d cores "
    r"\(x\d+\.\d\d on 2 free cores\); 600 req/s needs \d+ workers; "
    r"added p50 ms / CPU ms per request, generated \(default\): "
    + ", ".join(rf"{name} -?\d+\.\d\d/\d+\.\d\d \(-?\d+\.\d\d/\d+\.\d\d\)" for name in SCENARIO_NAMES)
    + "; taking turns, p50 over the same request as chat / over short chat, generated \\(default\\): "
    + ", ".join(
        rf"{api} {D}/{D} \({D}/{D}\) ms" for api in ("messages", "messages-stream", "responses", "responses-stream")
    )
    + "$"
)


def bench_models_on_free_ports(out: Path) -> Path:
    """bench/models.yml with free ports: the bench's gateways listen on gateway.port, +1 and +2 (bench/arms.py),
    so three ports in a row; nginx on the two model ports. Never bench/models.yml's fixed 4301/18301: a
    `make bench` (this checkout's or another's) may be running."""
    doc = yaml.safe_load((ROOT / "bench/models.yml").read_text())
    base = consecutive_free_ports(3)
    taken = {base, base + 1, base + 2}
    doc["gateway"]["port"] = base
    ports = [p for p in free_ports(4) if p not in taken][:2]
    for name, port in zip(("mock", "mock-stream"), ports):
        doc[name]["command"] = doc[name]["command"].replace(doc[name]["command"].split("--port ")[1], str(port))
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def test_quick_bench_writes_json_png_and_the_summary_line(tmp_path):
    # a missing tool fails, it is not a skip (make test installs it first: the bench-tools target)
    assert shutil.which("nginx") or Path("/usr/sbin/nginx").exists(), (
        "nginx (the benchmark's mock backend) is not installed: run `make bench-tools`"
    )
    out = tmp_path / "results"
    models = bench_models_on_free_ports(tmp_path / "models.yml")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.run",
            "--quick",
            "--out",
            str(out),
            "--state-dir",
            str(tmp_path / "state"),
            "--models",
            str(models),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    assert SUMMARY.match(lines[-1]), lines[-1]

    report = json.loads((out / "bench.json").read_text())
    assert report["summary"] == lines[-1]
    pairs = report["like_for_like"]  # the paired phase: each API, its request as chat and short chat taking turns
    assert set(pairs) == {"messages", "messages-stream", "responses", "responses-stream"} and all(
        set(d) == {"generated", "default"} for d in pairs.values()
    )
    assert list(report["scenarios"]) == list(SCENARIO_NAMES)  # every API the coding agents use, whole and streamed
    for name, per_arm in report["scenarios"].items():
        chat = name in CHAT
        assert set(per_arm) == {"direct", "default", "generated", *(["generated-2w"] if chat else [])}
        for arm, r in per_arm.items():
            seq = r["sequential"]
            # every request answered (a stream: to its API's end, [DONE], message_stop or response.completed)
            assert seq["sent"] == (40 if chat else 20) and seq["errors"] == 0, (name, arm, seq)
            if arm != "generated-2w" and chat:  # beside the load generator on every CPU: capacity only
                assert r["sweep"] and r["sweep"][0]["offered"] == 50.0
            elif not chat:  # the other APIs: sequential and capacity phases
                assert r["sweep"] == [] and r["cpu_ms_at_load"] is None
            capacity = r["repeats"]["capacity"][0]  # its failures say what went wrong (a timeout, an HTTP status)
            assert r["max_rate"] > 0 and capacity["errors"] == 0, (name, arm, capacity)
            assert (r["cpu_ms_per_request"] is None) == (arm == "direct")  # gateway CPU time is read
        assert per_arm["generated"]["added_p50_ms"] > 0  # a gateway cannot be faster than no gateway
        assert per_arm["generated"]["client_cores"] > 0
        if chat:
            assert per_arm["generated-2w"]["gateway_cores"] > 0
    log = (tmp_path / "state" / "generated-2w" / "logs" / "gateway.log").read_text()
    assert "gateway: 2 worker(s)" in log  # the count gateway_start.py resolved, in the start log
    assert (out / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    leftovers = subprocess.run(["pgrep", "-af", str(tmp_path)], capture_output=True, text=True).stdout
    assert not leftovers.strip(), f"the bench left processes running:\n{leftovers}"  # nginx and both gateways


def test_bench_profile_samples_every_worker_that_serves_and_shows_the_guard_and_litellm(tmp_path):
    """`make bench-profile` in miniature: 2 workers, one API. Each worker is profiled (not the supervisor, whose
    samples were all in its file-watching loop), and the profile holds the request guard's and LiteLLM's frames."""
    out = tmp_path / "profile"
    run = subprocess.run(
        [
            *(sys.executable, "-m", "bench.profile", "--workers", "2", "--apis", "chat", "--seconds", "3"),
            *("--concurrency", "8", "--min-samples", "100", "--out", str(out), "--state-dir", str(tmp_path / "state")),
            *("--models", str(bench_models_on_free_ports(tmp_path / "models.yml"))),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    chat = json.loads((out / "profile.json").read_text())["chat"]
    assert chat["errors"] == 0 and chat["requests"] > 0
    assert len(chat["samples_per_process"]) == 2, chat["samples_per_process"]  # both workers, nothing else
    assert chat["samples"] >= 100 and chat["samples_per_request"] > 0
    collapsed = (out / "chat.txt").read_text()
    assert "RequestGuard.__call__" in collapsed and "/litellm/proxy/" in collapsed
    assert "gateway_supervisor" not in collapsed
    leftovers = subprocess.run(["pgrep", "-af", str(tmp_path)], capture_output=True, text=True).stdout
    assert not leftovers.strip(), f"the profile left processes running:\n{leftovers}"


def test_bench_pairs_takes_turns_and_reports_the_median_difference(tmp_path):
    """`make bench-pairs` in miniature: two scenarios through one gateway, 2 rounds of 5 requests; the report holds
    each round's p50 of both and their differences, and nothing is left running."""
    out = tmp_path / "pairs.json"
    run = subprocess.run(
        [
            *(sys.executable, "-m", "bench.pairs", "messages", "messages-as-chat", "--rounds", "2", "--requests", "5"),
            *("--out", str(out), "--state-dir", str(tmp_path / "state")),
            *("--models", str(bench_models_on_free_ports(tmp_path / "models.yml"))),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(out.read_text())
    rounds = report["rounds"]
    assert set(rounds) == {"messages", "messages-as-chat"} and all(len(r["p50_ms"]) == 2 for r in rounds.values())
    assert report["d_p50_ms_rounds"] == [a - b for a, b in zip(*(rounds[n]["p50_ms"] for n in rounds))]
    assert run.stdout.startswith("messages - messages-as-chat: p50 ")
    leftovers = subprocess.run(["pgrep", "-af", str(tmp_path)], capture_output=True, text=True).stdout
    assert not leftovers.strip(), f"bench-pairs left processes running:\n{leftovers}"
