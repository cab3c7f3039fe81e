#!/usr/bin/env bash
# Build the class images (course/class/Containerfile: targets `learner` and `hub`) from a clean copy of the
# committed tree (git archive HEAD: no .venv, no local state, no uncommitted edits).
#
#   course/class/build-image.sh                      # with a registry: gpulab-learner:<commit>, gpulab-hub:<commit>
#   REGISTRY=registry.example.org/course course/class/build-image.sh --push
#   course/class/build-image.sh --offline            # no registry at all (below); prints the two image names
#
# --offline builds the same Containerfile stages with `docker build --network none` from a local base: Debian
# bookworm made with debootstrap from Debian's mirror (as .ci/kind/node-image.sh makes the kind node's base), with
# the Debian packages install.sh names; the Python wheels for it, downloaded here by pip (course/class/pins.txt);
# configurable-http-proxy from npm; and the control-plane binaries and etcd seed of this machine's gpulab cache
# (`gpulab binaries ensure` makes them: the one-process control plane, etcd, kubectl, celcheck, dpcheck). All of it
# is kept under $GPULAB_CACHE_DIR/class (default ~/.cache/gpulab/class), so a second run rebuilds nothing that
# has not changed; the images are labelled with their inputs' key and reused when it matches.
#
# Environment: REGISTRY (a prefix for the image names), TAG (default the short commit), ENGINE (docker|podman|
# buildah; --offline needs docker), BASE_IMAGE (with a registry: a python:3.11 Debian bookworm image).
# Then deploy with: --set singleuser.image.name=$REGISTRY/gpulab-learner --set singleuser.image.tag=$TAG
set -euo pipefail

push=false offline=false
for arg in "$@"; do
  case "$arg" in
    --push) push=true ;;
    --offline) offline=true ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-image.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
# HEAD once: the archive, the images' key and the tag all name this commit, even if another is made meanwhile.
COMMIT=$(git -C "$repo" rev-parse HEAD)
TAG=${TAG:-$(git -C "$repo" rev-parse --short "$COMMIT")}
prefix=${REGISTRY:+$REGISTRY/}
if [[ -n "$(git -C "$repo" status --porcelain)" ]]; then
  echo "build-image.sh: note: uncommitted changes are not in the images (they are built from HEAD)" >&2
fi
log() { printf '>> [%s] %s\n' "$(date +%T)" "$*" >&2; }

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
git -C "$repo" archive --format=tar "$COMMIT" | tar -x -C "$context"
install_sh="$context/course/class/install.sh"

if ! $offline; then
  if [[ -z "${ENGINE:-}" ]]; then
    for candidate in docker podman buildah; do
      if command -v "$candidate" >/dev/null 2>&1; then ENGINE=$candidate; break; fi
    done
  fi
  if [[ -z "${ENGINE:-}" ]]; then
    echo "build-image.sh: no container engine found (docker, podman or buildah); install one or set ENGINE" >&2
    exit 1
  fi
  build_args=()
  [[ -n "${BASE_IMAGE:-}" ]] && build_args+=(--build-arg "BASE_IMAGE=$BASE_IMAGE")
  subcommand=build
  [[ "$ENGINE" == buildah ]] && subcommand=bud
  for target in hub learner; do
    (cd "$context" && "$ENGINE" "$subcommand" -f course/class/Containerfile --target "$target" \
       -t "${prefix}gpulab-$target:$TAG" "${build_args[@]}" .)
    echo "built ${prefix}gpulab-$target:$TAG"
    if $push; then "$ENGINE" push "${prefix}gpulab-$target:$TAG"; echo "pushed ${prefix}gpulab-$target:$TAG"; fi
  done
  echo "deploy with: --set singleuser.image.name=${prefix}gpulab-learner --set singleuser.image.tag=$TAG"
  exit 0
fi

# --- offline ------------------------------------------------------------------------------------------------------
PY="${PYTHON:-$repo/.venv/bin/python}"
[[ -x "$PY" ]] || { echo "build-image.sh --offline: no Python at $PY (run make python-deps, or set PYTHON)" >&2; exit 1; }
"$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || {
  echo "build-image.sh --offline: $PY is not Python 3.11, the Python of Debian bookworm the images run; pip would" \
       "download wheels for the wrong Python (set PYTHON to a 3.11)" >&2; exit 1; }
PINS="$("$PY" - <<'EOF'
from cluster import binaries, settings
print(f"CACHE='{settings.cache_root()}' BIN_DIR='{binaries.bin_dir()}' SEEDS='{binaries.seeds_dir()}'")
print(f"HAVE_BIN={int(binaries.cached() is not None)}")
EOF
)" || { echo "build-image.sh --offline: cannot read gpulab's cache folders (above)" >&2; exit 1; }
eval "$PINS"
CLASS="$CACHE/class"
mkdir -p "$CLASS"
docker_ok() { timeout 20 docker info --format '{{.ServerVersion}}' >/dev/null 2>&1; }
if ! docker_ok; then
  log "no Docker engine answers: starting the project's (.ci/kind/node-image.sh --base)"
  "$repo/.ci/kind/node-image.sh" --base >/dev/null
fi

# The base: Debian bookworm, minbase, and the packages install.sh asks for.
DEBS="$(for role in base learner hub; do sh "$install_sh" debs "$role"; done | tr ' ' '\n' | sort -u | tr '\n' ' ')"
BASE_KEY="$(echo "bookworm $DEBS" | sha256sum | cut -c1-12)"
BASE_TAG="gpulab/class-base:bookworm-$BASE_KEY"
if ! docker image inspect "$BASE_TAG" >/dev/null 2>&1; then
  ROOTFS="$CLASS/rootfs-$BASE_KEY"
  rm -rf "$ROOTFS"
  MIRROR="$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list \
    2>/dev/null | grep -oE 'https?://[^ ]+/debian/?$' | head -1 || true)"
  log "debootstrap bookworm (minbase + $DEBS)"
  nice -n 10 debootstrap --variant=minbase --include="$(echo $DEBS | tr ' ' ',')" bookworm "$ROOTFS" \
    "${MIRROR:-http://deb.debian.org/debian}" >"$CLASS/debootstrap.log" 2>&1 \
    || { tail -20 "$CLASS/debootstrap.log" >&2; exit 1; }
  rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/usr/share/doc \
         "$ROOTFS"/usr/share/man "$ROOTFS"/usr/share/locale
  log "importing the base image $BASE_TAG"
  tar -C "$ROOTFS" -c . | nice -n 10 docker import --change 'CMD ["/bin/bash"]' - "$BASE_TAG" >/dev/null
  rm -rf "$ROOTFS"
fi

# The wheels: what pip resolves for the two images' requirements, under the pins, for the base's Python (Debian
# bookworm's 3.11.2, glibc 2.36), as wheels only. The learner's requirement is the course itself (install.sh
# requirements learner: an editable gpulab with its `course` extra); pip downloads what pyproject.toml names.
REQS="$(for role in build hub; do sh "$install_sh" requirements "$role" | tr ' ' '\n'; done)
$("$PY" -c 'import sys, tomllib; p = tomllib.load(open(sys.argv[1], "rb"))["project"]
print("\n".join(p["dependencies"] + p["optional-dependencies"]["course"]))' "$context/pyproject.toml")"
WHEEL_KEY="$(cat "$context/course/class/pins.txt" <(echo "$REQS") | sha256sum | cut -c1-12)"
WHEELS="$CLASS/wheels-$WHEEL_KEY"
if [[ ! -e "$WHEELS/.done" ]]; then
  log "pip download (the images' Python packages for Python 3.11.2, course/class/pins.txt)"
  rm -rf "$WHEELS"; mkdir -p "$WHEELS"
  platforms=(); for glibc in $(seq 36 -1 17); do platforms+=(--platform "manylinux_2_${glibc}_x86_64"); done
  platforms+=(--platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64)
  mapfile -t reqs <<<"$REQS"
  (cd "$context" && nice -n 10 "$PY" -m pip download -q --only-binary=:all: --python-version 3.11.2 \
     --implementation cp --abi cp311 --abi abi3 --abi none "${platforms[@]}" -d "$WHEELS" \
     -c course/class/pins.txt "${reqs[@]}")
  touch "$WHEELS/.done"
fi

# configurable-http-proxy for the hub, from npm.
CHP_VERSION="$(sh "$install_sh" chp-version)"
CHP="$CLASS/chp-$CHP_VERSION"
if [[ ! -x "$CHP/node_modules/.bin/configurable-http-proxy" ]]; then
  log "npm install configurable-http-proxy@$CHP_VERSION"
  rm -rf "$CHP"
  npm install --silent --no-audit --no-fund --prefix "$CHP" "configurable-http-proxy@$CHP_VERSION"
fi

[[ "$HAVE_BIN" = 1 ]] || { echo "build-image.sh --offline: no verified control-plane binaries in $BIN_DIR;" \
                                  "run: gpulab binaries ensure" >&2; exit 1; }
for tool in celcheck dpcheck; do
  ls "$BIN_DIR" | grep -q "^$tool" || { echo "build-image.sh --offline: $tool is missing from $BIN_DIR (it needs Go);" \
                                               "run: gpulab binaries ensure" >&2; exit 1; }
done

# The offline inputs go into the build context's .offline (install.sh source moves them out of the source tree).
mkdir -p "$context/.offline/cache/bin"
cp -a "$WHEELS" "$context/.offline/wheels"; rm -f "$context/.offline/wheels/.done"
cp -a "$CHP" "$context/.offline/chp"
cp -a "$BIN_DIR" "$context/.offline/cache/bin/"
if [[ -d "$SEEDS" ]]; then cp -a "$SEEDS" "$context/.offline/cache/seeds"; fi
# The images' key: the committed tree without tests/ (install.sh source removes it from the images), the base, the
# wheels, the proxy and the binaries. An image of the same key under another tag (an earlier commit that changed
# only tests) is tagged again instead of rebuilt.
KEY="$( (git -C "$repo" ls-tree -r "$COMMIT" | grep -v $'\ttests/'; echo "$BASE_TAG $WHEEL_KEY $CHP_VERSION"
         cat "$BIN_DIR/MANIFEST.json") | sha256sum | cut -c1-12)"
for target in hub learner; do
  image="${prefix}gpulab-$target:$TAG"
  same="$(docker images -q --filter "label=gpulab.class.key=$KEY" --filter "label=gpulab.class.target=$target" | head -1)"
  if [[ -n "$same" ]]; then
    docker tag "$same" "$image"
    log "$image is current ($KEY)"
  else
    log "docker build --network none --target $target ($image)"
    (cd "$context" && nice -n 10 docker build -q --network none --build-arg "BASE_IMAGE=$BASE_TAG" \
       --label "gpulab.class.key=$KEY" --label "gpulab.class.target=$target" -f course/class/Containerfile \
       --target "$target" -t "$image" . >/dev/null)
  fi
  echo "$image"
done
