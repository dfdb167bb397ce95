#!/usr/bin/env bash
# `make compose-test`: the generated CPU stack (examples/cpu-compose/models.yml) in a real Docker engine.
# engine up -> Compose v2 -> images built or reused -> regenerate into a temp dir -> `up -d --wait`
# -> integration tests through the compose gateway -> tests/compose/ -> `down -v` (always) -> engine
# stopped if we started it. Prints the time each phase took.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
EXAMPLE=${COMPOSE_EXAMPLE:-examples/cpu-compose/models.yml}  # another models.yml (own port) to run beside this one
WAIT=${COMPOSE_WAIT_TIMEOUT:-900}  # seconds for every service to be healthy
export DOCKER_BUILDKIT=0 COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-llm-gateway-compose-test}
export DEMO_MODELS_DIR=$PWD/.cache/demo-models
# its tests' own stacks pick free ports below the range make test's workers use (CI runs both side by side)
export FREE_PORT_RANGE=${FREE_PORT_RANGE:-15000-19999}
T0=$SECONDS; LAST=$SECONDS; TIMES=()
phase() { TIMES+=("$1 $((SECONDS - LAST))s"); LAST=$SECONDS; }
report() { echo "compose-test: phase times: ${TIMES[*]} (total $((SECONDS - T0))s)"; }

# a daemon an earlier run left running (see `make engine-down`) is not ours to stop this time
OURS=yes; [ -f .cache/dockerd/started.pid ] && kill -0 "$(cat .cache/dockerd/started.pid)" 2>/dev/null && OURS=no
docker/engine.sh up; rc=$?
if [ $rc = 3 ]; then
  [ "${CI:-}" = true ] && { echo "compose-test: FAILED: CI must run the compose tests"; exit 1; }
  echo "compose-test: SKIPPED: no Docker engine (see the line above)"; exit 0
fi
[ $rc = 0 ] || exit $rc
TMP=$(mktemp -d)
REPLICAS=
cleanup() {
  local code=$?
  # the replicas test, if still running: SIGINT lets pytest run its fixture's teardown (down -v of its project)
  [ -z "$REPLICAS" ] || { kill -INT "$REPLICAS" 2>/dev/null; wait "$REPLICAS" 2>/dev/null; }
  if [ -f "$TMP/compose/docker-compose.yml" ] && [ $code != 0 ]; then  # every container's whole log, before down
    mkdir -p .cache/compose-test-logs && rm -f .cache/compose-test-logs/*.log
    for svc in $(docker compose -f "$TMP/compose/docker-compose.yml" --profile on-demand ps -a --services 2>/dev/null); do
      docker compose -f "$TMP/compose/docker-compose.yml" logs --no-color --timestamps "$svc" >".cache/compose-test-logs/$svc.log" 2>&1
    done
    echo "compose-test: FAILED: each container's log is in .cache/compose-test-logs/"
  fi
  if [ -f "$TMP/compose/docker-compose.yml" ]; then
    echo "compose-test: docker compose down -v"
    # --profile on-demand: the on-demand backends too (a plain down leaves a profile's containers behind)
    docker compose -f "$TMP/compose/docker-compose.yml" --profile on-demand down -v --remove-orphans --timeout 20 2>&1 | grep -v '^ *$' | tail -n 3
    left=$(docker ps -aq --filter "label=com.docker.compose.project=$COMPOSE_PROJECT_NAME" | wc -l)
    echo "compose-test: containers of $COMPOSE_PROJECT_NAME left: $left"
    [ "$left" = 0 ] || { echo "compose-test: FAILED: containers left after down"; [ $code != 0 ] || code=1; }
  fi
  rm -rf "$TMP"
  if [ $OURS = yes ]; then docker/engine.sh down; else echo "compose-test: the engine was running before; left running"; fi
  phase teardown; report
  exit $code
}
trap cleanup EXIT
trap 'exit 130' INT TERM
phase engine

docker/compose-plugin.sh || exit 1
docker/images.sh || exit 1
phase images

[ -f "$DEMO_MODELS_DIR/reasoner/SCRIPT" ] && [ -f "$DEMO_MODELS_DIR/tool-caller/SCRIPT" ] || make -s demo-models || exit 1
$PY -m generator --models "$EXAMPLE" --out "$TMP" -q || exit 1
export COMPOSE_FILE=$TMP/compose/docker-compose.yml
echo "compose-test: generated $COMPOSE_FILE from $EXAMPLE (keys in $TMP/compose/.env)"
$PY -m tests.compose.stack up --timeout "$WAIT" || { docker compose logs --tail 30; exit 1; }
phase up
# tests/compose/test_replicas.py runs a project of its own (two replica containers: ~2 min of container starts),
# so it runs beside the integration tests of this stack instead of after them; its log is printed after them
set -m; $PY -m pytest -q tests/compose/test_replicas.py -p no:cacheprovider >"$TMP/replicas.log" 2>&1 & REPLICAS=$!; set +m

key=$(sed -n 's/^LITELLM_MASTER_KEY=//p' "$TMP/compose/.env")
port=$($PY -c "from generator.compile.load.loader import load_plan; print(load_plan('$EXAMPLE').gateway.port)")
# The fuzz test runs here too (300 requests per API, seed 32; make test sends 2,000 per API through the local
# stack). Here it meets the backend IMAGE, which the local stack never runs: its first run found that one request
# asking for logprobs killed a vLLM engine in an image without a C++ compiler (docs/limits.md). FUZZ_COMPOSE=0
# leaves it out; the backends' errors are printed when the tests fail.
fuzz=()
[ "${FUZZ_COMPOSE:-1}" != 0 ] || fuzz=(--deselect tests/integration/test_fuzz_apis.py::test_fuzzed_requests_never_get_a_5xx_a_reset_or_a_hang)
GATEWAY_URL=http://127.0.0.1:$port GATEWAY_KEY=$key GATEWAY_MODELS=$EXAMPLE FUZZ_REQUESTS=${FUZZ_REQUESTS:-300} \
  FUZZ_SEED=${FUZZ_SEED:-32} $PY -m pytest -q tests/integration -p no:cacheprovider "${fuzz[@]}" ||
  { docker compose logs --tail 60 2>&1 | grep -E "Error|error|Traceback|Killed|EngineCore" | tail -15 |
      sed 's/^/compose-test: backend: /'; exit 1; }  # .ci/run's failure summary repeats these lines
phase integration-tests
rc=0; wait "$REPLICAS" || rc=$?; REPLICAS=; sed 's/^/  replicas: /' "$TMP/replicas.log"
[ $rc = 0 ] || { echo "compose-test: FAILED: tests/compose/test_replicas.py (exit $rc)"; exit 1; }
COMPOSE_ENV_FILE=$TMP/compose/.env GATEWAY_MODELS=$EXAMPLE $PY -m pytest -q tests/compose -p no:cacheprovider \
  --ignore tests/compose/test_apply.py --ignore tests/compose/test_replicas.py || exit 1
phase compose-tests
# last: `make apply` changes the stack (a gateway reload under load, a flag + a renamed model, a model made on demand)
COMPOSE_ENV_FILE=$TMP/compose/.env GATEWAY_MODELS=$EXAMPLE $PY -m pytest -q -s tests/compose/test_apply.py \
  -p no:cacheprovider || { docker compose logs --tail 30; exit 1; }
phase apply-tests
