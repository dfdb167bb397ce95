"""A stand-in for vLLM's `vllm serve` in tests/unit/test_vllm_fork.py: the fork server imports it once, each forked
child runs its main(). Prints what the child is (argv, cwd, environment, ids) as one JSON line, then does what its
arguments say: `exit N` or `sleep S`."""

import json
import os
import sys
import time


def main() -> None:
    print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "env": dict(os.environ), "pid": os.getpid(),
                      "ppid": os.getppid(), "sid": os.getsid(0), "pgid": os.getpgid(0)}), flush=True)
    print("to stderr", file=sys.stderr, flush=True)
    action, value = sys.argv[1], sys.argv[2]
    if action == "sleep":
        time.sleep(float(value))
    sys.exit(int(value) if action == "exit" else 0)
