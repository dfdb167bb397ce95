"""An editor's view of a models.yml: the YAML language server (what VS Code's YAML extension, Neovim, Helix ...
run) over its stdio protocol, as an editor drives it: open a file, read its diagnostics, ask for completions.

`python -m tests.docs.editor` installs the pinned server into .cache/editor (npm); the tests call `ensure()`.
Standard library only.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EDITOR_DIR = ROOT / ".cache/editor"
# 1.19.2: the newest release that runs on node 20 (2.x needs node >= 22.13); it validates draft-07 schemas
PIN = ("yaml-language-server", "1.19.2")
SERVER = EDITOR_DIR / "node_modules/.bin/yaml-language-server"
SETTINGS = {"validate": True, "hover": True, "completion": True, "schemaStore": {"enable": False}}


class NpmUnreachable(RuntimeError):
    """npm is missing or its registry does not answer: the only reason the editor test skips."""


def installed() -> bool:
    manifest = EDITOR_DIR / "node_modules" / PIN[0] / "package.json"
    return SERVER.exists() and manifest.exists() and json.loads(manifest.read_text()).get("version") == PIN[1]


def ensure() -> Path:
    """The server's executable; installs it when missing."""
    if not installed():
        npm = shutil.which("npm")
        if npm is None:
            raise NpmUnreachable("npm is not installed")
        ping = subprocess.run([npm, "ping"], capture_output=True, text=True, timeout=60)
        if ping.returncode:
            raise NpmUnreachable(f"npm registry unreachable: {(ping.stderr or ping.stdout).strip().splitlines()[-1:]}")
        EDITOR_DIR.mkdir(parents=True, exist_ok=True)
        (EDITOR_DIR / "package.json").write_text('{"private": true}\n')
        subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", f"{PIN[0]}@{PIN[1]}"],
            cwd=EDITOR_DIR,
            check=True,
            timeout=600,
        )
        if not installed():
            raise RuntimeError(f"npm install finished but {PIN[0]} {PIN[1]} is not in {EDITOR_DIR}")
    return SERVER


class Editor:
    """One language server session; `open` a document as an editor buffer (its text need not be on disk)."""

    def __init__(self, server: Path, root: Path = ROOT) -> None:
        self._proc = subprocess.Popen(
            [str(server), "--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self._inbox: queue.Queue[dict[str, Any]] = queue.Queue()
        self._ids = iter(range(1, 1_000_000))
        self._versions: dict[str, int] = {}  # open buffers
        threading.Thread(target=self._read, daemon=True).start()
        self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": root.as_uri(),
                "capabilities": {
                    "workspace": {"configuration": True},
                    "textDocument": {"publishDiagnostics": {}, "hover": {"contentFormat": ["plaintext"]}},
                },
            },
        )
        self.notify("initialized", {})
        self.notify("workspace/didChangeConfiguration", {"settings": {"yaml": SETTINGS}})

    def _read(self) -> None:
        out = self._proc.stdout
        while True:
            length = 0
            while (line := out.readline()) not in (b"\r\n", b"\n"):
                if not line:
                    return
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            self._inbox.put(json.loads(out.read(length)))

    def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self._proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self._proc.stdin.flush()

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._send({"method": method, "params": params})

    def _next(self, until: float) -> dict[str, Any]:
        """The next message for us, answering the server's own requests (its settings) on the way."""
        while True:
            message = self._inbox.get(timeout=max(0.1, until - time.monotonic()))
            if "method" in message and "id" in message:
                items = message["params"].get("items", []) if message["method"] == "workspace/configuration" else None
                result = (
                    [SETTINGS if i.get("section") == "yaml" else None for i in items] if items is not None else None
                )
                self._send({"id": message["id"], "result": result})
                continue
            return message

    def request(self, method: str, params: dict[str, Any], timeout: float = 30) -> Any:
        ident = next(self._ids)
        self._send({"id": ident, "method": method, "params": params})
        until = time.monotonic() + timeout
        while (message := self._next(until)).get("id") != ident:
            pass
        return message.get("result")

    def open(self, path: Path, text: str, timeout: float = 30) -> list[dict[str, Any]]:
        """`text` as the buffer of `path` (opened, or its whole text replaced, as an editor does on every
        keystroke); the diagnostics the server publishes for this version."""
        uri = path.as_uri()
        self._drain()
        version = self._versions.get(uri, 0) + 1
        if version == 1:
            self.notify(
                "textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "yaml", "version": 1, "text": text}}
            )
        else:
            self.notify(
                "textDocument/didChange",
                {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]},
            )
        self._versions[uri] = version
        until = time.monotonic() + timeout
        while True:
            message = self._next(until)
            if message.get("method") == "textDocument/publishDiagnostics" and message["params"]["uri"] == uri:
                return message["params"]["diagnostics"]

    def _drain(self) -> None:
        """Let the server finish what it was doing (late diagnostics of an earlier version are dropped)."""
        try:
            while True:
                self._next(time.monotonic() + 0.5)
        except queue.Empty:
            pass

    def complete(self, path: Path, line: int, character: int) -> list[str]:
        result = self.request(
            "textDocument/completion",
            {"textDocument": {"uri": path.as_uri()}, "position": {"line": line, "character": character}},
        )
        return [item["label"] for item in (result or {}).get("items", [])]

    def hover(self, path: Path, line: int, character: int) -> str:
        result = self.request(
            "textDocument/hover",
            {"textDocument": {"uri": path.as_uri()}, "position": {"line": line, "character": character}},
        )
        contents = (result or {}).get("contents", "")
        return contents.get("value", "") if isinstance(contents, dict) else str(contents)

    def close(self) -> None:
        self._proc.kill()
        self._proc.wait()


if __name__ == "__main__":
    try:
        print(ensure())
    except NpmUnreachable as exc:
        sys.exit(f"cannot install {PIN[0]}: {exc}")
