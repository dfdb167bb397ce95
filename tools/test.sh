#!/usr/bin/env bash
# `make test`: the whole suite as two pytest runs side by side. tests/unit (pure Python: one core, no stack) runs
# beside the rest (integration, bench, k8s, docs), which spends much of its time waiting on what it starts (vLLM
# loads, a gateway's rolling reload, on-demand idle timers) with a core idle; the unit run fills it (CI time,
# docs/testing.md). The unit run's output goes to .cache/test-unit.log and is printed after the other run's; the
# exit status is 1 when either fails. TEST_SERIAL=1: one pytest run of everything, as before.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
[ -z "${TEST_SERIAL:-}" ] || exec "$PY" -m pytest
mkdir -p .cache
log=.cache/test-unit.log
t0=$SECONDS
"$PY" -m pytest tests/unit >"$log" 2>&1 & unit=$!
trap 'kill "$unit" 2>/dev/null' EXIT
echo "test: tests/unit runs beside the rest; its output follows theirs (log: $log)"
"$PY" -m pytest --ignore=tests/unit; rest=$?
wait "$unit"; unit_rc=$?
trap - EXIT
echo "test: ---------------- tests/unit (ran beside the above) ----------------"
cat "$log"
echo "test: tests/unit exit $unit_rc, the rest exit $rest; $((SECONDS - t0))s in all"
[ "$unit_rc" = 0 ] && [ "$rest" = 0 ]
