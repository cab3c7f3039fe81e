#!/usr/bin/env bash
# Build the gpulab learner image (course/class/Containerfile) with docker, podman or buildah, from a clean copy
# of the committed tree (git archive HEAD: no .venv, no local state, no uncommitted edits).
#
#   course/class/build-image.sh                          # builds gpulab-learner:<short commit>
#   IMAGE=registry.example.org/course/gpulab-learner course/class/build-image.sh --push
#
# Environment: IMAGE (default gpulab-learner), TAG (default the short commit), ENGINE (docker|podman|buildah;
# default the first one found), BASE_IMAGE (a python:3.11 Debian image your builders can pull).
# Then deploy with: --set singleuser.image.name=$IMAGE --set singleuser.image.tag=$TAG (docs/class-mode.md).
set -euo pipefail

push=false
for arg in "$@"; do
  case "$arg" in
    --push) push=true ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-image.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
IMAGE=${IMAGE:-gpulab-learner}
TAG=${TAG:-$(git -C "$repo" rev-parse --short HEAD)}
if [[ -z "${ENGINE:-}" ]]; then
  for candidate in docker podman buildah; do
    if command -v "$candidate" >/dev/null 2>&1; then ENGINE=$candidate; break; fi
  done
fi
if [[ -z "${ENGINE:-}" ]]; then
  echo "build-image.sh: no container engine found (docker, podman or buildah); install one or set ENGINE" >&2
  exit 1
fi
if [[ -n "$(git -C "$repo" status --porcelain)" ]]; then
  echo "build-image.sh: note: uncommitted changes are not in the image (it is built from HEAD)" >&2
fi

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
git -C "$repo" archive --format=tar HEAD | tar -x -C "$context"

build_args=()
[[ -n "${BASE_IMAGE:-}" ]] && build_args+=(--build-arg "BASE_IMAGE=$BASE_IMAGE")
subcommand=build
[[ "$ENGINE" == buildah ]] && subcommand=bud
(cd "$context" && "$ENGINE" "$subcommand" -f course/class/Containerfile -t "$IMAGE:$TAG" "${build_args[@]}" .)
echo "built $IMAGE:$TAG"
if $push; then
  "$ENGINE" push "$IMAGE:$TAG"
  echo "pushed $IMAGE:$TAG"
fi
echo "deploy with: --set singleuser.image.name=$IMAGE --set singleuser.image.tag=$TAG"
