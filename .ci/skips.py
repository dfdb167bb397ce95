"""Print every test the CI run skipped, grouped by reason, from the JSON lines tests/conftest.py appended to
PYTEST_SKIP_LOG; exit 1 when a skip means a test that runs nowhere (a parameter no model of the plan
provides: pytest's "got empty parameter set")."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

RUNS_NOWHERE = "got empty parameter set"


def main(path: Path) -> int:
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    by_reason: dict[str, list[str]] = defaultdict(list)
    for skip in lines:
        by_reason[skip["reason"]].append(f"{skip['test']} (in: {skip['run']})")
    print(f"ci: {len(lines)} test(s) skipped, {len(by_reason)} reason(s)")
    for reason, tests in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
        print(f"  {len(tests):3d} x {reason}")
        for test in tests[:3]:
            print(f"        {test}")
        if len(tests) > 3:
            print(f"        ... and {len(tests) - 3} more")
    nowhere = [r for r in by_reason if RUNS_NOWHERE in r]
    if nowhere:
        print(
            "ci: FAILED: tests that run nowhere (no model of the plan under test provides their parameter): "
            "give them a model or remove them"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
