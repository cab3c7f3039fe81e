# The two set-up commands of the README:
#   make course   installs everything and starts the course on the local backend (JupyterLab on 127.0.0.1)
#   make test     installs everything, builds the offline kind node image and runs every tier (what CI runs)
SHELL := /bin/bash
VENV  ?= .venv
PY    := $(VENV)/bin/python
PIP   := $(VENV)/bin/pip
GPULAB := $(VENV)/bin/gpulab
JUPYTER_PORT ?= 8888

.PHONY: install system-deps python-deps proxy binaries kind-image course test test-unit test-static test-build test-e2e test-kind lint bench

install: system-deps python-deps proxy binaries

# Debian packages: Chromium for the real-browser tests. Skipped when present or when not root.
system-deps:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo ">> installing Debian's chromium (browser tests)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo ">> chromium missing and not root: browser tests will fail; run: sudo apt-get install chromium"; fi; \
	fi

python-deps: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[course,test,nvml]'
	@touch $@

# configurable-http-proxy (npm) for class mode's JupyterHub (`gpulab class up`), beside the venv.
CHP_VERSION ?= 5.3.0
proxy: $(VENV)/node_modules/.bin/configurable-http-proxy

$(VENV)/node_modules/.bin/configurable-http-proxy: | python-deps
	@command -v npm >/dev/null 2>&1 || { echo ">> npm missing: class mode needs it (apt-get install npm)"; exit 1; }
	npm install --silent --no-audit --no-fund --prefix $(VENV) configurable-http-proxy@$(CHP_VERSION)

# Control-plane binaries: user cache -> official download (SHA-256 checked) -> build from the Go module proxy.
binaries: python-deps
	$(GPULAB) binaries ensure

# The offline kind node image and a Docker engine for the kind tier (.ci/kind/node-image.sh; cached under
# ~/.cache/gpulab/kind, so a second run takes seconds). Needs root (it installs Debian's docker.io and debootstrap).
kind-image: install
	.ci/kind/node-image.sh

# Jupyter refuses to start as root unless told (containers and CI-like machines run as root).
JUPYTER_ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

course: install
	$(GPULAB) up
	@eval "$$($(GPULAB) env)"; echo ">> KUBECONFIG=$$KUBECONFIG"; \
	  export KUBECONFIG PATH; \
	  $(VENV)/bin/jupyter lab --ip=127.0.0.1 --port=$(JUPYTER_PORT) --no-browser --notebook-dir=course $(JUPYTER_ROOT_FLAG)

# Every tier, the kind tier too (every lab on a real kind cluster from the offline node image, which `kind-image`
# builds first: docs/kind.md, "How this backend is tested").
test: install kind-image
	$(VENV)/bin/python -m pytest -p no:cacheprovider --durations=25 tests

# Tiers (tests/conftest.py): `make test` runs them all; these run one each.
test-unit: python-deps
	$(VENV)/bin/python -m pytest -p no:cacheprovider -m unit tests

test-static: python-deps
	$(VENV)/bin/python -m pytest -p no:cacheprovider -m static tests

test-build: python-deps
	$(VENV)/bin/python -m pytest -p no:cacheprovider -m build tests

test-e2e: install
	$(VENV)/bin/python -m pytest -p no:cacheprovider -m e2e tests

test-kind: kind-image
	$(VENV)/bin/python -m pytest -p no:cacheprovider -m kind tests

lint: python-deps
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# Every speed and memory figure beside its target (`make test` runs the quick one as an e2e test).
bench: python-deps binaries
	$(GPULAB) bench
