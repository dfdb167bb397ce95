"""A stand-in for the gateway's status side (no LiteLLM): `/health/liveliness` answers 200 to anyone,
`/gateway/report` answers the report of two samples of the status route's JSON (generator/shipped/gateway_hooks/
gateway_status.py, computed by the real status_report.py) to its own key only, 401 to any other, as the real gateway
does.

    python tests/unit/standin_gateway.py PORT KEY MODEL [MODEL ...]
"""

from __future__ import annotations

import http.server
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from generator.shipped.gateway_hooks import status_report


def route_json(models: list[str]) -> dict:
    metrics = {
        "requests_running": 0.0,
        "requests_waiting": 0.0,
        "kv_cache_usage": 0.0,
        "prompt_tokens_total": 0.0,
        "generation_tokens_total": 0.0,
        "preemptions_total": 0.0,
        "requests_finished_total": 0.0,
        "ttft_seconds": {"buckets": [], "count": 0, "sum": 0},
    }
    return {
        "time": time.time(),
        "gateway": {
            "state": "healthy",
            "pid": 1,
            "workers": 1,
            "metrics_error": None,
            "metrics": {
                "requests_total": 3.0,
                "errors_total": 0.0,
                "client_errors_total": 2.0,
                "requests_by_model": {m: 1.0 for m in models},
                "errors_by_model": {},
                "client_errors_by_model": {models[0]: 2.0},
            },
        },
        "models": [
            {"name": m, "backend": f"http://{m}:8001", "state": "healthy", "reason": "/health 200", "metrics": metrics}
            for m in models
        ],
    }


def serve(port: int, key: str, models: list[str]) -> None:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/health/liveliness":
                code, body = 200, b'"I\'m alive!"'
            elif self.path.startswith("/gateway/report?") and self.headers.get("Authorization") == f"Bearer {key}":
                url = f"http://127.0.0.1:{port}"
                code, body = 200, json.dumps(status_report.report(None, route_json(models), url)).encode()
            else:
                code, body = 401, b'{"error": "Authentication Error"}'
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2], sys.argv[3:])
