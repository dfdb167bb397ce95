"""A stand-in for vLLM's `vllm serve`, for tests/unit/test_vllm_fork.py and the local runtime's fork tests
(tests/unit/test_runtime_local.py): the fork server imports it once, each forked child runs its main(). Prints what
the child is (argv, cwd, environment, ids) as one JSON line, then does what its arguments say: `exit N`, `sleep S`,
`engine S` (fork an engine that prints its pid and sleeps S seconds, then sleep),
or, given vLLM's flags, answers GET /health on `--port` as a loaded backend would."""

import http.server
import json
import os
import sys
import time


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


def main() -> None:
    print(
        json.dumps(
            {
                "argv": sys.argv,
                "cwd": os.getcwd(),
                "env": dict(os.environ),
                "pid": os.getpid(),
                "ppid": os.getppid(),
                "sid": os.getsid(0),
                "pgid": os.getpgid(0),
            }
        ),
        flush=True,
    )
    print("to stderr", file=sys.stderr, flush=True)
    if "--port" in sys.argv:
        port = int(sys.argv[sys.argv.index("--port") + 1])
        http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
    action, value = sys.argv[1], sys.argv[2]
    if action == "engine":  # fork an "engine" as vLLM does (cpu_backend_patches: forked from the API server)
        if os.fork() == 0:
            print(json.dumps({"engine": os.getpid()}), flush=True)
            time.sleep(float(value))
            os._exit(0)
        action = "sleep"
    if action == "sleep":
        time.sleep(float(value))
    sys.exit(int(value) if action == "exit" else 0)


if __name__ == "__main__":
    main()
