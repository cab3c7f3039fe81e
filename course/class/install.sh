#!/bin/sh
# The install steps of the class images, in one place: course/class/Containerfile runs each step in its stage, and
# `course/class/build-image.sh --offline` reads the same lists (Debian packages, Python requirements, the proxy's
# npm version) to fill its offline base and wheel folder, so the two builds cannot drift
# (tests/static/test_class_images_one_source.py checks it).
#
#   install.sh source SRC        drop the lab solutions from SRC; move SRC/.offline (the offline build's inputs) out
#   install.sh system ROLE       install ROLE's Debian packages that the base lacks (learner, hub or build)
#   install.sh build             the learner's venv (the course, gpulab, Jupyter), the control-plane binaries, and
#                                the hub's venv (JupyterHub, KubeSpawner) with configurable-http-proxy
#   install.sh learner | hub     the final stage: the non-root account and the runtime folders
#   install.sh debs ROLE | requirements ROLE | chp-version    print one list (for build-image.sh --offline)
#
# Offline (a folder /offline with wheels/, cache/ and chp/, which build-image.sh --offline puts in the context):
# pip installs from /offline/wheels only, the binaries and the etcd seed are copied from /offline/cache and the
# proxy from /offline/chp. Otherwise pip and npm use their registries and `gpulab binaries ensure` fetches the
# binaries (official downloads, SHA-256 checked). Either way pip is held to course/class/pins.txt.
set -eu

NB_USER=jovyan NB_UID=1000 NB_GID=100
SRC=${GPULAB_SRC:-/opt/gpulab/src}  # build-image.sh --offline names the host's copy
VENV=/opt/gpulab/venv
HUB=/opt/hub
CACHE=/opt/gpulab/cache
OFFLINE=/offline
# configurable-http-proxy, as the Makefile's `proxy` target installs it for the one-host class (CHP_VERSION).
CHP_VERSION=5.3.0

debs() {
  case "$1" in
    # python3-venv: Debian's python3 has no venv module of its own (the registry's python image has one).
    base) echo "python3 python3-venv" ;;
    learner) echo "ca-certificates procps" ;;
    hub) echo "ca-certificates nodejs" ;;
    build) [ -d "$OFFLINE/chp" ] && echo "" || echo "npm" ;;
    *) echo "install.sh: no Debian package list for '$1'" >&2; exit 2 ;;
  esac
}

requirements() {
  case "$1" in
    # The learner's server: the course with its Jupyter stack (pyproject.toml's `course` extra).
    learner) echo "-e $SRC[course]" ;;
    # The hub: JupyterHub (the learners' jupyterhub-singleuser matches it through the same pin), KubeSpawner,
    # the idle culler the values file's `cull` section starts.
    hub) echo "jupyterhub jupyterhub-kubespawner jupyterhub-idle-culler" ;;
    # What pip builds an editable gpulab with (pyproject.toml's build-system).
    build) echo "setuptools wheel" ;;
    *) echo "install.sh: no requirements for '$1'" >&2; exit 2 ;;
  esac
}

pip_in() {  # pip_in VENV ARGS...: pip of that venv, held to the pins, from the offline wheels when there are some
  venv=$1; shift
  if [ -d "$OFFLINE/wheels" ]; then
    set -- --no-index --find-links "$OFFLINE/wheels" "$@"
  fi
  PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/pip" install -q -c "$SRC/course/class/pins.txt" "$@"
}

system() {
  missing=""
  for pkg in $(debs "$1"); do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing="$missing $pkg"
  done
  [ -z "$missing" ] && return 0
  if [ -d "$OFFLINE" ] && [ -n "$(ls -A "$OFFLINE" 2>/dev/null)" ]; then
    echo "install.sh: the offline base lacks$missing (build-image.sh --offline installs debs base, learner, hub)" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
  rm -rf /var/lib/apt/lists/*
}

build() {
  python3 -m venv "$VENV"
  # shellcheck disable=SC2046  # the lists are words
  pip_in "$VENV" $(requirements build)
  pip_in "$VENV" $(requirements learner)
  # JupyterLab's settings for the course, where `make python-deps` puts them (no news prompt on a first launch).
  install -D -m 644 "$SRC/course/jupyterlab/gpulab.json" "$VENV/share/jupyter/lab/settings/overrides.d/gpulab.json"
  if [ -d "$OFFLINE/cache/bin" ]; then
    mkdir -p "$CACHE"
    cp -a "$OFFLINE/cache/." "$CACHE/"
  fi
  GPULAB_CACHE_DIR=$CACHE "$VENV/bin/gpulab" binaries ensure
  GPULAB_CACHE_DIR=$CACHE "$VENV/bin/gpulab" binaries path
  python3 -m venv "$HUB/venv"
  pip_in "$HUB/venv" $(requirements hub)
  install -D -m 644 "$SRC/course/class/hub_config.py" "$HUB/jupyterhub_config.py"
  if [ -d "$OFFLINE/chp/node_modules" ]; then
    cp -a "$OFFLINE/chp" "$HUB/chp"
  else
    npm install --silent --no-audit --no-fund --prefix "$HUB/chp" "configurable-http-proxy@$CHP_VERSION"
  fi
  "$HUB/chp/node_modules/.bin/configurable-http-proxy" --version >/dev/null 2>&1 || {
    echo "install.sh: configurable-http-proxy does not run (is nodejs installed?)" >&2; exit 1; }
}

account() {
  getent group "$NB_GID" >/dev/null || groupadd --gid "$NB_GID" users
  getent passwd "$NB_UID" >/dev/null || useradd --uid "$NB_UID" --gid "$NB_GID" --create-home --shell /bin/bash "$NB_USER"
}

case "${1:-}" in
  source)
    root=${2:?usage: install.sh source SRC}
    if [ -d "$root/.offline" ]; then mv "$root/.offline" "$OFFLINE"; else mkdir -p "$OFFLINE"; fi
    sh "$root/course/class/withhold-solutions.sh" "$root"
    ;;
  system) system "${2:?usage: install.sh system ROLE}" ;;
  build) build ;;
  learner)
    account
    # The binaries' cache, the etcd seed among them: readable by every uid and writable by none, for each
    # learner's pod runs as a uid of its own (course/class/z2jh-values.yaml, hub.extraConfig). The exchange's
    # mount point is the instructor's account's, as the exchange's root is.
    chown -R 0:0 "$CACHE"
    chmod -R a+rX,go-w "$CACHE"
    install -d -o "$NB_UID" -g "$NB_GID" /srv/nbgrader/exchange
    install -D -m 644 "$SRC/course/class/nbgrader_config.py" /etc/jupyter/nbgrader_config.py
    ;;
  hub)
    account
    install -d -o "$NB_UID" -g "$NB_GID" /srv/jupyterhub
    ;;
  debs) debs "${2:?usage: install.sh debs ROLE}" ;;
  requirements) requirements "${2:?usage: install.sh requirements ROLE}" ;;
  chp-version) echo "$CHP_VERSION" ;;
  *) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
