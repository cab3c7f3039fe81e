# The two set-up commands of the README:
#   make course   installs everything and starts the course on the local backend (JupyterLab on 127.0.0.1)
#   make test     installs everything, builds the offline kind node image and runs every tier (what CI runs)
SHELL := /bin/bash
VENV  ?= .venv
PY    := $(VENV)/bin/python
PIP   := $(VENV)/bin/pip
GPULAB := $(VENV)/bin/gpulab
JUPYTER_PORT ?= 8888

# Each set-up step prints ">> stage NAME: N s" when it ends (.ci/stage), so a slow step shows in any log.
STAGE := .ci/stage

.PHONY: install setup system-deps python-deps proxy binaries kind-base kind-image class-images course test test-fresh test-unit \
        test-static test-build test-e2e test-kind lint bench

install: system-deps python-deps proxy binaries

# Everything `make test` needs before its first test, with independent steps side by side (the Go builds keep both
# cores busy; Debian's packages, pip, npm and debootstrap mostly wait on the network or the disk).
setup: install kind-image class-images

# Debian packages: Chromium for the real-browser tests, and for the kind tier (`make test`) Docker's engine and
# debootstrap, in one apt run (two at once would fight over dpkg's lock). Skipped when present or when not root.
SYSTEM_PKGS ?= chromium
system-deps:
	@$(STAGE) system-deps .ci/system-deps $(SYSTEM_PKGS)

python-deps: $(VENV)/.installed

# JupyterLab's settings for the course go where jupyterlab_server reads defaults (<prefix>/share/jupyter/lab/
# settings/overrides.d, JupyterLab >= 4): no news prompt on a learner's first launch. Copied here, not as the
# package's data-files: setuptools' editable install skips data-files (editable_wheel asks has_data, not
# has_data_files). course/class/Containerfile copies the same file.
LAB_OVERRIDES := share/jupyter/lab/settings/overrides.d/gpulab.json

$(VENV)/.installed: pyproject.toml course/jupyterlab/gpulab.json
	@s=$$(date +%s); set -e; test -x $(PY) || python3 -m venv $(VENV); \
	  $(PIP) install -q --upgrade pip; \
	  $(PIP) install -q -e '.[course,test,nvml]'; \
	  install -D -m 644 course/jupyterlab/gpulab.json $(VENV)/$(LAB_OVERRIDES); \
	  touch $@; echo ">> stage python-deps: $$(( $$(date +%s) - s )) s"

# configurable-http-proxy (npm) for class mode's JupyterHub (`gpulab class up`), beside the venv.
CHP_VERSION ?= 5.3.0
proxy: $(VENV)/node_modules/.bin/configurable-http-proxy

$(VENV)/node_modules/.bin/configurable-http-proxy: | python-deps
	@command -v npm >/dev/null 2>&1 || { echo ">> npm missing: class mode needs it (apt-get install npm)"; exit 1; }
	@$(STAGE) proxy npm install --silent --no-audit --no-fund --prefix $(VENV) configurable-http-proxy@$(CHP_VERSION)

# Control-plane binaries: user cache -> official download (SHA-256 checked) -> build from the Go module proxy.
binaries: python-deps
	@$(STAGE) binaries $(GPULAB) binaries ensure

# The offline kind node image and a Docker engine for the kind tier (.ci/kind/node-image.sh; cached under
# ~/.cache/gpulab/kind, so a second run takes seconds). Needs root (it installs Debian's docker.io and debootstrap).
# Its base image (debootstrap) needs no control-plane binary, so it is made while they build.
kind-base: python-deps system-deps
	@$(STAGE) kind-base .ci/kind/node-image.sh --base >/dev/null

kind-image: install kind-base
	@$(STAGE) kind-image .ci/kind/node-image.sh

# The class images for the kind tier's class on Kubernetes (course/class/build-image.sh --offline: a debootstrapped
# Debian bookworm, wheels from pip, the proxy from npm and this machine's control-plane binaries, built with
# `docker build --network none`; cached under ~/.cache/gpulab/class, so a second run takes seconds).
class-images: install kind-base
	@$(STAGE) class-images course/class/build-image.sh --offline >/dev/null

# Jupyter refuses to start as root unless told (containers and CI-like machines run as root).
JUPYTER_ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

# `course trust`: this account's JupyterLab draws the notebooks' saved widgets before anything runs (labs/nbtrust.py).
course:
	@$(STAGE) install $(MAKE) --no-print-directory -j3 install
	$(GPULAB) up
	$(GPULAB) course trust
	@eval "$$($(GPULAB) env)"; echo ">> KUBECONFIG=$$KUBECONFIG"; \
	  export KUBECONFIG PATH; \
	  $(VENV)/bin/jupyter lab --ip=127.0.0.1 --port=$(JUPYTER_PORT) --no-browser --notebook-dir=course $(JUPYTER_ROOT_FLAG)

# Two workers side by side: a cluster test mostly waits on its cluster, so two keep 2 cores busy where one left
# them half idle (tests/conftest.py: a file is a unit of work, the longest start first). XDIST= runs them in one.
XDIST ?= -n 2 --dist loadscope --no-loadscope-reorder

# Every tier, the kind tier too (every lab on a real kind cluster from the offline node image, which `kind-image`
# builds first: docs/kind.md, "How this backend is tested").
test:
	@$(STAGE) setup $(MAKE) --no-print-directory -j3 SYSTEM_PKGS="chromium docker.io debootstrap" setup
	@$(STAGE) pytest $(VENV)/bin/python -m pytest -p no:cacheprovider --durations=25 $(XDIST) tests

# The new-machine check (.ci/fresh): the whole of .ci/run in a fresh clone of HEAD with every cache empty. Run it
# before you stop whenever set-up changes; docs/ci.md keeps its dated wall times.
test-fresh:
	.ci/fresh

# Tiers (tests/conftest.py): `make test` runs them all; these run one each.
test-unit: python-deps
	$(VENV)/bin/python -m pytest -p no:cacheprovider -m unit tests

test-static: python-deps
	$(VENV)/bin/python -m pytest -p no:cacheprovider -m static tests

test-build: python-deps
	$(VENV)/bin/python -m pytest -p no:cacheprovider -m build tests

test-e2e: install
	$(VENV)/bin/python -m pytest -p no:cacheprovider -m e2e tests

test-kind: kind-image class-images
	$(VENV)/bin/python -m pytest -p no:cacheprovider -m kind tests

lint: python-deps
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# Every speed and memory figure beside its target (`make test` runs the quick one as an e2e test).
bench: python-deps binaries
	$(GPULAB) bench
