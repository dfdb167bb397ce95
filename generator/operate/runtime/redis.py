"""The local stack's Redis (plan.redis): Debian's redis-server as a process of the stack, on 127.0.0.1 and a free
port, with the stack's REDIS_PASSWORD; started before the gateway, stopped with the stack.

Its config (password included) is a file in the state dir, mode 600 like the keys file beside it: never on a
command line. Append-only file in the same folder: counters that must outlive a restart (tokens per day/month)
survive `make down` / `make demo`.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

INSTALL_HINT = "install it with `tools/apt.sh install redis-server` (Debian's package; `make demo` does)"


def server_binary() -> str | None:
    """redis-server on PATH or where Debian puts it."""
    return shutil.which("redis-server") or next(
        (p for p in ("/usr/bin/redis-server", "/usr/sbin/redis-server") if os.access(p, os.X_OK)), None
    )


def write_config(folder: Path, port: int, password: str, hz: int) -> Path:
    """folder/redis.conf (mode 600 from the start): loopback only, the password, append-only file in folder."""
    folder.mkdir(parents=True, exist_ok=True)
    text = "\n".join(
        [
            "bind 127.0.0.1",
            f"port {port}",
            "protected-mode yes",
            f"requirepass {password}",
            f"dir {folder.resolve()}",
            "appendonly yes",
            f"hz {hz}",
            'save ""',
            "daemonize no",
            "loglevel warning",
            "",
        ]
    )
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".redis.conf.", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(tmp, 0o600)
    path = folder / "redis.conf"
    os.replace(tmp, path)
    return path


def ping(port: int, password: str, timeout: float = 2) -> bool:
    """AUTH + PING over RESP: True when this Redis answers PONG to this password."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            pw = password.encode()
            sock.sendall(b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n*1\r\n$4\r\nPING\r\n" % (len(pw), pw))
            reply = b""
            deadline = time.monotonic() + timeout
            while b"PONG" not in reply and b"-" not in reply[:1] and time.monotonic() < deadline:
                chunk = sock.recv(256)
                if not chunk:
                    break
                reply += chunk
            return reply.startswith(b"+OK\r\n+PONG")
    except OSError:
        return False
