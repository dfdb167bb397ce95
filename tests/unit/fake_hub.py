"""A local HTTP server standing in for the Hugging Face Hub (HF_ENDPOINT=http://127.0.0.1:PORT).

It answers the requests huggingface_hub 2.x makes for the fit check, as huggingface.co answers them:
  GET  /api/models/{repo}[/revision/{rev}]     model_info: the commit (`sha`) and the file list
  HEAD /{repo}/resolve/{rev}/{file}            hf_hub_download / file_exists: X-Repo-Commit, ETag, size
  GET  /{repo}/resolve/{rev}/{file}            the file; with `Range: bytes=a-b` (safetensors headers) 206
and the Hub's errors with its X-Error-Code header (huggingface_hub turns that into its exception types):
  an unknown repo: 401 RepoNotFound without a token, 404 with one (huggingface.co does not say whether a
  repo is private or missing); an unknown revision: 404 RevisionNotFound; a gated repo's files without a
  granted token: 401 GatedRepo (its /api/models info stays public); a missing file: 404 EntryNotFound.
Every request is recorded (method, path, headers) so tests can count them; `delay` seconds before each
answer make a slow Hub.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

API = re.compile(r"/api/models/(?P<repo>[^/]+(?:/[^/]+)??)(?:/revision/(?P<rev>[^/]+))?")
RESOLVE = re.compile(r"/(?P<repo>[^/]+(?:/[^/]+)?)/resolve/(?P<rev>[^/]+)/(?P<file>.+)")
RANGE = re.compile(r"bytes=(\d+)-(\d*)")


def commit_of(repo: str) -> str:
    """A fixed 40-hex commit per repo (the Hub's `sha`), so summary lines are the same every run."""
    return hashlib.sha1(repo.encode()).hexdigest()


class FakeHub:
    def __init__(
        self,
        repos: dict[str, dict[str, bytes]],
        gated: set[str] = frozenset(),
        token: str = "hf_granted",
        delay: float = 0.0,
    ):
        self.repos, self.gated, self.token, self.delay = repos, set(gated), token, delay
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self._lock = threading.Lock()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                hub._answer(self, head=False)

            def do_HEAD(self):
                hub._answer(self, head=True)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> FakeHub:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def paths(self) -> list[str]:
        with self._lock:
            return [f"{m} {p}" for m, p, _ in self.requests]

    # --- answers ------------------------------------------------------------------------------------------

    def _answer(self, h: BaseHTTPRequestHandler, head: bool) -> None:
        with self._lock:
            self.requests.append(("HEAD" if head else "GET", h.path, dict(h.headers)))
        if self.delay:
            time.sleep(self.delay)
        path = unquote(h.path.split("?", 1)[0])
        authorized = h.headers.get("authorization") == f"Bearer {self.token}"
        if (m := API.fullmatch(path)) and not head:
            repo, rev = m["repo"], m["rev"] or "main"
            if repo not in self.repos:
                return self._error(
                    h, 404 if h.headers.get("authorization") else 401, "RepoNotFound", "Repository not found", head
                )
            if rev not in ("main", commit_of(repo)):
                return self._error(h, 404, "RevisionNotFound", "Invalid rev id: " + rev, head)
            info = {
                "_id": commit_of(repo)[:24],
                "id": repo,
                "modelId": repo,
                "sha": commit_of(repo),
                "private": False,
                "gated": "manual" if repo in self.gated else False,
                "disabled": False,
                "tags": [],
                "library_name": "transformers",
                "siblings": [{"rfilename": f} for f in sorted(self.repos[repo])],
            }
            return self._send(h, 200, json.dumps(info).encode(), {"Content-Type": "application/json"}, head)
        if m := RESOLVE.fullmatch(path):
            repo, rev, name = m["repo"], m["rev"], m["file"]
            if repo not in self.repos:
                return self._error(
                    h, 404 if h.headers.get("authorization") else 401, "RepoNotFound", "Repository not found", head
                )
            if rev not in ("main", commit_of(repo)):
                return self._error(h, 404, "RevisionNotFound", "Invalid rev id: " + rev, head)
            if repo in self.gated and not authorized:
                return self._error(
                    h,
                    401,
                    "GatedRepo",
                    f"Access to model {repo} is restricted. You must have access to "
                    "it and be authenticated to access it. Please log in.",
                    head,
                )
            commit = {"X-Repo-Commit": commit_of(repo)}
            if name not in self.repos[repo]:
                return self._error(h, 404, "EntryNotFound", f'{name} does not exist on "{rev}"', head, commit)
            data = self.repos[repo][name]
            headers = {
                **commit,
                "ETag": f'"{hashlib.sha1(data).hexdigest()}"',
                "Accept-Ranges": "bytes",
                "Content-Type": "application/octet-stream",
            }
            rng = RANGE.fullmatch(h.headers.get("range", "")) if not head else None
            if rng:
                start, end = int(rng[1]), min(int(rng[2] or len(data) - 1), len(data) - 1)
                headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
                return self._send(h, 206, data[start : end + 1], headers, head)
            return self._send(h, 200, data, headers, head)
        return self._error(h, 404, "", "Not found", head)

    def _error(self, h, status: int, code: str, message: str, head: bool, extra: dict | None = None) -> None:
        headers = {**(extra or {}), "X-Error-Message": message, "Content-Type": "application/json"}
        if code:
            headers["X-Error-Code"] = code
        self._send(h, status, json.dumps({"error": message}).encode(), headers, head)

    @staticmethod
    def _send(h, status: int, body: bytes, headers: dict[str, str], head: bool) -> None:
        try:
            h.send_response(status)
            for k, v in headers.items():
                h.send_header(k, v)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            if not head:
                h.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            pass
