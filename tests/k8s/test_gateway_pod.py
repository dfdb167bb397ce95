"""The gateway container as the k8s/ manifests define it, run as a local process (no cluster here).

The files of k8s/gateway/ are laid out the way the kubelet mounts a ConfigMap (read-only, each
file a symlink into `..data/`), LiteLLM is started with the container's own args and plain env from
k8s/gateway.yaml, its keys read from k8s/secrets.env as the Secret would give them. Checked: the
probe routes answer 200 without a key (kubelet probes send none), and the auth hook is imported
from the mounted folder (401 without the key, the models with it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from generator.cli import main
from generator.compile.output import read_env_file
from generator.compile.renderers.k8s import ENV_FILE
from generator.operate.runtime.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def configmap_volume(src: Path, dest: Path) -> None:
    """What the kubelet makes of a ConfigMap: files in a timestamped folder, `..data` and per-key symlinks."""
    data = dest / "..2026_01_01_00_00_00.000000000"
    data.mkdir(parents=True)
    for f in sorted(src.iterdir()):
        (data / f.name).write_bytes(f.read_bytes())
        (dest / f.name).symlink_to(f"..data/{f.name}")
    (dest / "..data").symlink_to(data.name)
    for path in (data, dest):
        path.chmod(0o555)


@pytest.fixture
def gateway(tmp_path):
    assert main(["k8s", "--models", str(ROOT / "models.yml"), "--out", str(tmp_path), "-q"]) == 0
    keys = read_env_file(tmp_path / ENV_FILE)
    docs = list(yaml.safe_load_all((tmp_path / "k8s/gateway.yaml").read_text()))
    (container,) = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"]
    (mount,) = container["volumeMounts"]
    volume = tmp_path / "volume"
    configmap_volume(tmp_path / "k8s/gateway", volume)
    env = {
        e["name"]: e["value"] if "value" in e else keys[e["valueFrom"]["secretKeyRef"]["key"]] for e in container["env"]
    }
    port = free_port()
    # the container's metrics port is the pod's own; on this host another stack may hold it
    env["GATEWAY_METRICS_PORT"] = str(free_port())
    # the container's /tmp is its own: here the workers' metrics folder (gateway_start.py's default, under the
    # temp dir) would be left in the host's /tmp. Not TMPDIR: the fork server's socket path would be too long
    env["PROMETHEUS_MULTIPROC_DIR"] = str(tmp_path / "metrics")
    args = [a.replace(mount["mountPath"], str(volume)) for a in container["args"]]
    args[args.index("--port") + 1] = str(port)
    # the container's own command: gateway_start.py from the mounted ConfigMap (it resolves `--num_workers
    # auto` for this process's CPUs and execs LiteLLM); python3 of the image = this interpreter here
    command = [
        sys.executable if c == "python3" else c.replace(mount["mountPath"], str(volume)) for c in container["command"]
    ]
    log = (tmp_path / "gateway.log").open("wb")
    proc = subprocess.Popen(
        [*command, *args, "--host", "127.0.0.1"],
        env={**os.environ, **env},
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        cwd=tmp_path,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, (tmp_path / "gateway.log").read_text()[-3000:]
            try:
                if httpx.get(f"{url}/health/liveliness", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "gateway did not start in 180 s"
            time.sleep(1)
        yield url, keys["LITELLM_MASTER_KEY"], container, tmp_path / "gateway.log"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        except ProcessLookupError:  # it had exited (the failure above says why)
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def test_gateway_from_the_configmap_answers_probes_and_guards_the_api(gateway):
    url, key, container, log = gateway
    # the pod's command resolved `--num_workers auto` itself (the args say auto: LiteLLM alone refuses it)
    assert container["args"][container["args"].index("--num_workers") + 1] == "auto"
    assert "gateway: " in log.read_text() and "worker(s) (gateway.workers: auto: " in log.read_text()
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        r = httpx.get(url + container[probe]["httpGet"]["path"], timeout=10)
        assert r.status_code == 200, (probe, r.text)
    assert httpx.get(f"{url}/v1/models", timeout=10).status_code == 401  # gateway_guard came from the volume
    r = httpx.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=10)
    assert r.status_code == 200
    assert sorted(m["id"] for m in r.json()["data"]) == ["glm47-flash", "qwen3-8b", "small-chat"]
