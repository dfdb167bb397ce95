"""compose's healthcheck of a backend with restart_when_hung (compile/load/hung.py): the check Docker runs in the
container every 10 s, which also ends a backend hung too long.

Docker's `restart: unless-stopped` restarts a container whose main process ended, never one that runs unhealthy
(a hung engine), and restarting one from outside takes the Docker socket (gateway.autoheal: root on the host). So
the check ends its own container: it asks /health as the gateway does (connected, then an answer within 3 s; a
connection refused is down, not hung), remembers in the container when the backend first went silent, and once it
has been silent `after` seconds kills every process of the container but its init (the service runs with
`init: true`: Docker's tini is PID 1, vLLM its child). tini then exits, and the restart policy starts the container
again. Any answer, or a refused connection (a backend starting), forgets the silence.

Python, not bash: a connection may hang in connect() itself (a stopped server's listen queue full), which bash's
/dev/tcp cannot bound; python3 is in every vLLM image. tests/unit/test_hung_restart.py runs this very text.
"""

from __future__ import annotations

SINCE_FILE = "/tmp/llm-gateway-hung-since"  # in the container: when /health first went silent
PROBE_TIMEOUT = 3  # seconds, the gateway's (gateway_hooks/backend_health.py)

SCRIPT = """\
import os, socket, sys, time
HOST, PORT, AFTER, SINCE = {host!r}, {port}, {after}, {since!r}
def forget(code):
    if os.path.exists(SINCE):
        os.remove(SINCE)
    sys.exit(code)
try:
    s = socket.create_connection((HOST, PORT), timeout={timeout})
    s.sendall(b"GET /health HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n")
    line = s.recv(64)
except socket.timeout:
    pass
except OSError:
    forget(1)
else:
    forget(0 if line.split()[1:2] == [b"200"] else 1)
now = time.time()
if not os.path.exists(SINCE):
    with open(SINCE, "w") as f:
        f.write(str(now))
with open(SINCE) as f:
    since = float(f.read() or now)
if now - since >= AFTER:
    print(f"hung for {{now - since:.0f}}s (connected, /health silent): ending the container", flush=True)
    os.kill(-1, 9)
sys.exit(1)
"""


def script(port: int, after: float, host: str = "127.0.0.1", since: str = SINCE_FILE) -> str:
    """The check's Python text for a backend on `host`:`port` (a model on nodes: its leader listens on its host's
    address), restarted after `after` seconds of silence; `since`: where it remembers when the silence began."""
    return SCRIPT.format(host=host, port=port, after=int(after), since=since, timeout=PROBE_TIMEOUT)


def test(port: int, after: float, host: str = "127.0.0.1") -> list[str]:
    """compose's healthcheck `test:` (no `$` in the text: nothing for compose to interpolate)."""
    return ["CMD", "python3", "-c", script(port, after, host)]
