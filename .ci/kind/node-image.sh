#!/usr/bin/env bash
# Make the offline kind node image and a Docker engine to run it (no registry access needed).
#
#   .ci/kind/node-image.sh            build what is missing, start dockerd if it is not answering; prints the image
#   .ci/kind/node-image.sh --check    exit 0 when the image is built and dockerd answers, 1 otherwise (builds nothing)
#   .ci/kind/node-image.sh --base     only what needs no control-plane binary: dockerd, kind, the kind nodes' device
#                                     plugin, crictl and the base image (`make test` runs it while they build)
#
# kind pulls `kindest/node` from a registry; CI machines cannot reach one. This script builds a node image the way
# ../shared/reference/kind-offline.md records (a debootstrapped Debian bookworm base, our own Kubernetes binaries from
# the Go module proxy, `kind build node-image --type file`) and tags it as the image our kind version expects
# (cluster/versions.py KIND_NODE_IMAGE), so `kind create cluster` uses it without a pull.
#
# Everything lives under $GPULAB_CACHE_DIR/kind (default ~/.cache/gpulab/kind), keyed by the versions and this
# script's own inputs, so a second run reuses every piece: the Go builds, the base image, the node image, and the
# Docker data root (our dockerd keeps its images there). Heavy steps run under `nice -n 10`.
#
# Three workarounds for sandboxes without CAP_SYS_RESOURCE and with cgroup v1 (each explained where it is made):
# a runc wrapper for dockerd (runc-nosysresource), containerd's restrict_oom_score_adj in the node, and kubelet's
# --fail-cgroupv1=false.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PY="${PYTHON:-$REPO/.venv/bin/python}"
CHECK_ONLY=0 BASE_ONLY=0
case "${1:-}" in
  --check) CHECK_ONLY=1 ;;
  --base) BASE_ONLY=1 ;;
  "") ;;
  *) echo "usage: $0 [--check | --base]" >&2; exit 2 ;;
esac

GOBIN_DIR=/usr/local/go/bin
export PATH="$GOBIN_DIR:$PATH"
# Assigned first, then evaluated: a failing helper stops the script here (an eval of its empty output would not).
PINS="$("$PY" - <<'EOF'
from cluster import gobuild, settings, versions
print(f"CACHE='{settings.cache_root()}'")  # the cache gpulab itself uses ($GPULAB_CACHE_DIR, else the XDG one)
print(f"K8S={versions.KUBERNETES_VERSION} STAGING={versions.STAGING_VERSION} ETCD={versions.ETCD_VERSION}")
print(f"KIND_VERSION={versions.KIND_VERSION} NODE_IMAGE={versions.KIND_NODE_IMAGE}")
print(f"LDFLAGS='{gobuild.version_ldflags('2026-01-01T00:00:00Z')}'")
EOF
)" || { echo "$0: cannot read the pinned versions from the cluster package (above)" >&2; exit 1; }
eval "$PINS"
# The images the labs' pods and the simulated operator's operands name: the node image holds a stand-in under each
# (pinned tags only, so no kubelet pulls), and the list is part of the cache key.
WORKLOAD_IMAGES="$(cd "$REPO" && "$PY" - <<'EOF'
import re
from pathlib import Path
from cluster.sim.gpu import manifests
found = {manifests.IMAGE}
for path in Path("labs").glob("0*/**/*.yaml"):
    found.update(m.group(1) for m in re.finditer(r"image:\s*[\"']?([^\s\"']+)", path.read_text()))
latest = sorted(i for i in found if i.endswith(":latest") or ":" not in i.rsplit("/", 1)[-1])
if latest:  # imagePullPolicy defaults to Always for these: the kubelet would pull even with the image on the node
    raise SystemExit(f"pin a tag for {', '.join(latest)}: an untagged or :latest image is always pulled")
print(" ".join(sorted(found)))
EOF
)"
COREDNS_VERSION=v1.14.2
CRICTL_VERSION=v1.36.0
KEY="$(cat "$0" "$HERE"/runc-nosysresource "$HERE"/src/*/*.go "$HERE"/src/*/go.mod "$HERE"/src/go.mod \
       <(echo "$K8S $ETCD $KIND_VERSION $COREDNS_VERSION $CRICTL_VERSION $WORKLOAD_IMAGES") | sha256sum | cut -c1-12)"
KROOT="$CACHE/kind"
WORK="$KROOT/$KIND_VERSION-$K8S-$KEY"
# The Go builds and the base image have keys of their own, so an edit elsewhere in this script reuses them.
BIN_KEY="$(cat "$HERE"/src/coredns/* <(echo "$K8S $COREDNS_VERSION $CRICTL_VERSION") | sha256sum | cut -c1-12)"
BASE_KEY="$(sed -n '/^# --- the base image/,/^# --- the end of the base image/p' "$0" \
            | cat - <(echo "$KIND_VERSION $CRICTL_VERSION") \
            | sha256sum | cut -c1-12)"
BIN="$KROOT/bin-$K8S-$BIN_KEY"
DOCKER_ROOT="$KROOT/docker"
BUILT_TAG="gpulab/kind-node:$K8S-$KEY"
BASE_TAG="gpulab/kind-base:bookworm-$BASE_KEY"
SOCK=/var/run/docker.sock

log() { printf '>> [%s] %s\n' "$(date +%T)" "$*" >&2; }
docker_ok() { timeout 20 docker info --format '{{.ServerVersion}}' >/dev/null 2>&1; }

if [ "$CHECK_ONLY" = 1 ]; then
  docker_ok && docker image inspect "$NODE_IMAGE" --format '{{index .Config.Labels "gpulab.key"}}' 2>/dev/null \
    | grep -qx "$KEY"
  exit $?
fi

# One run at a time per cache: two runs (two checkouts, or `make -j` beside a test) would debootstrap into the same
# base folder and delete each other's half-made files.
mkdir -p "$KROOT"
exec 9>"$KROOT/.lock"
if ! flock -n 9; then
  log "waiting for another node-image.sh run to finish (lock $KROOT/.lock)"
  flock 9
fi

need_pkgs=()
command -v dockerd >/dev/null || need_pkgs+=(docker.io)
command -v debootstrap >/dev/null || need_pkgs+=(debootstrap)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "need root to install ${need_pkgs[*]} (apt-get install ${need_pkgs[*]})" >&2; exit 1; }
  log "installing ${need_pkgs[*]} (Debian)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi

# --- a Docker engine -------------------------------------------------------------------------------------------
# Started by hand (no systemd here), with its data under our cache. The runc wrapper is the default runtime:
# `docker run --privileged` asks for every capability, CAP_SYS_RESOURCE included, which the sandbox withholds.
if ! docker_ok; then
  log "starting dockerd (data root $DOCKER_ROOT)"
  mkdir -p "$DOCKER_ROOT" "$KROOT/run"
  install -m 0755 "$HERE/runc-nosysresource" "$KROOT/runc-nosysresource"
  nohup dockerd --storage-driver=overlay2 --data-root="$DOCKER_ROOT" --exec-root=/var/run/gpulab-docker \
    --pidfile="$KROOT/run/dockerd.pid" --host="unix://$SOCK" \
    --add-runtime "gpulab-runc=$KROOT/runc-nosysresource" --default-runtime gpulab-runc \
    >"$KROOT/dockerd.log" 2>&1 9>&- &  # 9>&-: the engine outlives this run and must not keep its lock
  for _ in $(seq 1 100); do docker_ok && break; sleep 0.2; done
  docker_ok || { echo "dockerd did not start; its log:" >&2; tail -20 "$KROOT/dockerd.log" >&2; exit 1; }
fi

# What the kind tier needs beside the image, made here so that no test builds it first: the pinned kind binary and
# the device plugin our kind nodes run (cluster/gosrc/kindplugin). Both return at once when already built.
KIND="$("$PY" -c 'from cluster.backends import kindtool; print(kindtool.ensure_kind())')"
"$PY" -c 'from cluster.backends import kind; from cluster.progress import LogProgress; kind.ensure_node_plugin(LogProgress())' >/dev/null

if docker image inspect "$NODE_IMAGE" --format '{{index .Config.Labels "gpulab.key"}}' 2>/dev/null | grep -qx "$KEY"; then
  log "node image $NODE_IMAGE is current ($KEY)"
  echo "$NODE_IMAGE"
  exit 0
fi
mkdir -p "$BIN" "$WORK"

# --- Go builds: crictl first (the base image holds it) ------------------------------------------------------
export GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod
gob() { nice -n 10 go build -trimpath "$@"; }
if [ ! -x "$BIN/crictl" ]; then
  log "building crictl $CRICTL_VERSION"
  GOBIN="$BIN" GOFLAGS= nice -n 10 go install -trimpath -ldflags "-s -w" "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
fi

# --- the base image (debootstrapped bookworm + kind's base files) -----------------------------------------------
# kind's module holds the base image's files and the names of its component images: fetched here, by this script,
# so that nothing depends on an earlier run (or another tool) having put it in the module cache.
KIND_SRC="$(GOFLAGS= go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
[ -d "$KIND_SRC/images/base/files" ] || { echo "kind $KIND_VERSION's module has no images/base/files in $KIND_SRC" >&2; exit 1; }
if ! docker image inspect "$BASE_TAG" >/dev/null 2>&1; then
  ROOTFS="$KROOT/rootfs-$BASE_KEY"
  if [ ! -e "$ROOTFS/.done" ]; then
    log "debootstrap bookworm (minbase + systemd, containerd, runc, CNI plugins, iptables)"
    rm -rf "$ROOTFS"
    MIRROR="$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list \
      2>/dev/null | grep -oE 'https?://[^ ]+/debian/?$' | head -1 || true)"
    nice -n 10 debootstrap --variant=minbase \
      --include=systemd,systemd-sysv,dbus,iptables,nftables,conntrack,iproute2,ethtool,containerd,runc,containernetworking-plugins,ca-certificates,procps,util-linux,mount,kmod,libseccomp2,bash,jq,pigz,socat,ebtables \
      bookworm "$ROOTFS" "${MIRROR:-http://deb.debian.org/debian}" >"$WORK/debootstrap.log" 2>&1
    F="$KIND_SRC/images/base/files"
    install -m 0755 "$F"/usr/local/bin/* "$ROOTFS/usr/local/bin/"
    mkdir -p "$ROOTFS/kind/bin" "$ROOTFS/etc/containerd" "$ROOTFS/etc/kubernetes/manifests" "$ROOTFS/opt/cni"
    cp -r "$F/kind/." "$ROOTFS/kind/"; chmod 0755 "$ROOTFS"/kind/bin/*
    cp "$F/etc/crictl.yaml" "$ROOTFS/etc/"
    cp "$F/etc/sysctl.d/"* "$ROOTFS/etc/sysctl.d/"
    cp "$F/etc/systemd/system/"*.service "$F/etc/systemd/system/"*.slice "$ROOTFS/etc/systemd/system/"
    mkdir -p "$ROOTFS/etc/systemd/system/kubelet.service.d"
    cp "$F/etc/systemd/system/kubelet.service.d/"* "$ROOTFS/etc/systemd/system/kubelet.service.d/"
    # Debian's containerd lives in /usr/bin, kind's unit expects /usr/local/bin.
    sed -i 's#/usr/local/bin/containerd#/usr/bin/containerd#' "$ROOTFS/etc/systemd/system/containerd.service"
    # containerd 1.6's ctr has no `info`, which kind's image build calls to see containerd answer.
    mv "$ROOTFS/usr/bin/ctr" "$ROOTFS/usr/bin/ctr.real"
    printf '#!/bin/sh\n[ "$1" = info ] && exec /usr/bin/ctr.real version\nexec /usr/bin/ctr.real "$@"\n' > "$ROOTFS/usr/bin/ctr"
    chmod 0755 "$ROOTFS/usr/bin/ctr"
    # oom_score_adj -998 for static pods needs CAP_SYS_RESOURCE, which the sandbox withholds: restrict it.
    sed -e 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' \
        -e 's#registry.k8s.io/pause:3.10"#registry.k8s.io/pause:3.10.1"#' \
        "$F/etc/containerd/config.toml" > "$ROOTFS/etc/containerd/config.toml"
    # Kubernetes 1.35+ refuses cgroup v1 unless told; this machine has v1.
    printf 'KUBELET_EXTRA_ARGS=--runtime-cgroups=/system.slice/containerd.service --fail-cgroupv1=false\n' \
      > "$ROOTFS/etc/default/kubelet"
    ln -sfn /usr/lib/cni "$ROOTFS/opt/cni/bin"
    install -m 0755 "$BIN/crictl" "$ROOTFS/usr/local/bin/crictl"
    chroot "$ROOTFS" /usr/bin/ctr.real oci spec > "$WORK/oci-spec.json"
    "$PY" - "$WORK/oci-spec.json" "$ROOTFS/etc/containerd/cri-base.json" <<'EOF'
import json, sys
spec = json.load(open(sys.argv[1]))
spec.setdefault("hooks", {}).setdefault("createContainer", []).append({"path": "/kind/bin/mount-product-files.sh"})
spec["process"].pop("rlimits", None)
json.dump(spec, open(sys.argv[2], "w"), indent=2)
EOF
    # As kind's base Dockerfile: no units but ours, journald without kmsg, init = systemd.
    rm -f "$ROOTFS"/lib/systemd/system/multi-user.target.wants/* "$ROOTFS"/etc/systemd/system/*.wants/* \
          "$ROOTFS"/lib/systemd/system/local-fs.target.wants/* "$ROOTFS"/lib/systemd/system/sockets.target.wants/*udev* \
          "$ROOTFS"/lib/systemd/system/sockets.target.wants/*initctl* "$ROOTFS"/lib/systemd/system/basic.target.wants/*
    find "$ROOTFS/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
    echo "ReadKMsg=no" >> "$ROOTFS/etc/systemd/journald.conf"
    ln -sfn /usr/lib/systemd/systemd "$ROOTFS/sbin/init"
    chroot "$ROOTFS" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
    chroot "$ROOTFS" systemctl mask systemd-binfmt.service >/dev/null 2>&1
    rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/usr/share/doc \
           "$ROOTFS"/usr/share/man "$ROOTFS"/usr/share/locale
    touch "$ROOTFS/.done"
  fi
  log "importing the base image $BASE_TAG"
  tar -C "$ROOTFS" --exclude=./.done -c . | nice -n 10 docker import \
    --change 'ENV container=docker' \
    --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' - "$BASE_TAG" >/dev/null
  rm -rf "$ROOTFS"  # the image holds it now
fi

# --- the end of the base image ---------------------------------------------------------------------------------
if [ "$BASE_ONLY" = 1 ]; then
  log "base image $BASE_TAG ready"
  echo "$BASE_TAG"
  exit 0
fi

# --- Go builds that need the control plane's module (kubelet, kubeadm, kube-proxy), CoreDNS, the small ones ------
if [ ! -x "$BIN/kubelet" ] || [ ! -x "$BIN/kubeadm" ] || [ ! -x "$BIN/kube-proxy" ]; then
  log "building kubelet, kubeadm, kube-proxy $K8S"
  KB="$WORK/build/k8s"; mkdir -p "$KB"
  # The control plane's wrapper module (cluster/gobuild.py): its staging pins apply here too. Its go.sum is reused
  # when `gpulab binaries` built the control plane here (it may have downloaded it instead); -mod=mod fills it in.
  "$PY" -c 'from cluster import gobuild; print(gobuild.kube_wrapper_gomod(), end="")' > "$KB/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kubelet"\n\t_ "k8s.io/kubernetes/cmd/kubeadm"\n\t_ "k8s.io/kubernetes/cmd/kube-proxy"\n)\n' > "$KB/tools.go"
  GOSUM="$CACHE/build/kubernetes-$K8S/go.sum"
  if [ -f "$GOSUM" ]; then cp "$GOSUM" "$KB/"; else (cd "$KB" && nice -n 10 go mod tidy >/dev/null); fi
  (cd "$KB" && gob -ldflags "$LDFLAGS" -o "$BIN/" k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubeadm \
     k8s.io/kubernetes/cmd/kube-proxy)
fi
if [ ! -x "$BIN/coredns" ]; then
  log "building CoreDNS $COREDNS_VERSION (kubeadm's Corefile plugins only)"
  CB="$WORK/build/coredns"; mkdir -p "$CB"; cp "$HERE/src/coredns/"* "$CB/"
  sed -i "s#coredns/coredns v.*#coredns/coredns $COREDNS_VERSION#" "$CB/go.mod"
  (cd "$CB" && nice -n 10 go mod tidy >/dev/null && gob -ldflags "-s -w" -o "$BIN/coredns" .)
fi
log "building pause, kindnetd-lite and the workload stand-in (seconds)"
(cd "$HERE/src" && for p in pause kindnetd workload; do gob -ldflags "-s -w" -o "$BIN/$p" "./$p"; done)

# --- component images and the release tarball kind's `--type file` reads ----------------------------------------
log "component images and the release tarball"
REL="$WORK/release"; rm -rf "$REL"; mkdir -p "$REL/kubernetes/server/bin"
SB="$REL/kubernetes/server/bin"
CTX="$WORK/ctx"; rm -rf "$CTX"; mkdir -p "$CTX"
CP_BIN="$CACHE/bin/k8s-$K8S-etcd-$ETCD"
KUBEADM_IMAGES="$("$BIN/kubeadm" config images list --kubernetes-version "$K8S")"
img_of() { echo "$KUBEADM_IMAGES" | grep "/$1:"; }
scratch_image() {  # scratch_image TAG BINARY [ENTRYPOINT]: a FROM-scratch image with the binary in /usr/local/bin
  local tag=$1 bin=$2 entry=${3:-}; local d="$CTX/$(echo "$tag" | tr '/:' '__')"; mkdir -p "$d"
  cp "$bin" "$d/"
  { echo "FROM scratch"; echo 'ENV PATH=/usr/local/bin:/usr/bin:/bin'; echo "COPY $(basename "$bin") /usr/local/bin/"
    if [ -n "$entry" ]; then echo "ENTRYPOINT [\"/usr/local/bin/$(basename "$bin")\"]"; fi; } > "$d/Dockerfile"
  docker build -q -t "$tag" "$d" >/dev/null
}
for c in kube-apiserver kube-controller-manager kube-scheduler; do
  scratch_image "registry.k8s.io/$c:$K8S" "$CP_BIN/$c"
  docker save "registry.k8s.io/$c:$K8S" -o "$SB/$c.tar"
done
ETCD_IMAGE="$(img_of etcd)"; COREDNS_IMAGE="$(img_of coredns)"; PAUSE_IMAGE="$(img_of pause)"
scratch_image "$ETCD_IMAGE" "$CP_BIN/etcd"
scratch_image "$COREDNS_IMAGE" "$BIN/coredns" entrypoint
scratch_image "$PAUSE_IMAGE" "$BIN/pause" entrypoint
# containerd's sandbox image (our config.toml) may differ from kubeadm's pause tag: both are the same image.
SANDBOX_IMAGE="$(docker run --rm --entrypoint cat "$BASE_TAG" /etc/containerd/config.toml | grep -o 'registry.k8s.io/pause:[^"]*')"
[ "$SANDBOX_IMAGE" = "$PAUSE_IMAGE" ] || docker tag "$PAUSE_IMAGE" "$SANDBOX_IMAGE"
KINDNETD_IMAGE="$(grep -o 'docker.io/kindest/kindnetd:[^"]*' "$KIND_SRC/pkg/build/nodeimage/const_cni.go")"
STORAGE_IMAGES="$(grep -o 'docker.io/kindest/local-path-[a-z]*:[^"]*' "$KIND_SRC/pkg/build/nodeimage/const_storage.go")"
# The storage images are placeholders (pause): kind's image build asks for them; the node image drops their manifest.
for s in $STORAGE_IMAGES; do docker tag "$PAUSE_IMAGE" "$s"; done
# kube-proxy and kindnetd need iptables, ip and their libraries: both sit on the base image.
mkdir -p "$CTX/kube-proxy" "$CTX/kindnetd"
cp "$BIN/kube-proxy" "$CTX/kube-proxy/"; cp "$BIN/kindnetd" "$CTX/kindnetd/"
printf 'FROM %s\nCOPY kube-proxy /usr/local/bin/\nENTRYPOINT []\n' "$BASE_TAG" > "$CTX/kube-proxy/Dockerfile"
printf 'FROM %s\nCOPY kindnetd /usr/local/bin/\nENTRYPOINT ["/usr/local/bin/kindnetd"]\n' "$BASE_TAG" > "$CTX/kindnetd/Dockerfile"
docker build -q -t "registry.k8s.io/kube-proxy:$K8S" "$CTX/kube-proxy" >/dev/null
# The images the labs' pods and the simulated operator's operands name cannot be pulled here (and hold no GPU code
# worth running without a GPU): one stand-in (src/workload) answers to all of them.
mkdir -p "$CTX/workload"; cp "$BIN/workload" "$CTX/workload/"
printf 'FROM scratch\nCOPY workload /bin/sleep\nCOPY workload /bin/sh\nCOPY workload /bin/bash\nCOPY workload /usr/bin/sleep\nENV PATH=/usr/local/bin:/usr/bin:/bin\nCMD ["/bin/sleep", "infinity"]\n' > "$CTX/workload/Dockerfile"
docker build -q -t gpulab/workload:stand-in "$CTX/workload" >/dev/null
for i in $WORKLOAD_IMAGES; do docker tag gpulab/workload:stand-in "$i"; done
docker build -q -t "$KINDNETD_IMAGE" "$CTX/kindnetd" >/dev/null
# kind reads one archive's tags from the first of `repositories` / `manifest.json` it meets and pulls every image
# it did not find there; so every extra image rides in kube-proxy.tar with a `repositories` entry first, in full
# docker.io names (the names kind compares).
EXTRA=("registry.k8s.io/kube-proxy:$K8S" "$ETCD_IMAGE" "$COREDNS_IMAGE" $(echo "$PAUSE_IMAGE" "$SANDBOX_IMAGE" | tr ' ' '\n' | sort -u)
       "$KINDNETD_IMAGE" $STORAGE_IMAGES $WORKLOAD_IMAGES)
docker save "${EXTRA[@]}" -o "$WORK/kube-proxy.raw.tar"
"$PY" - "$WORK/kube-proxy.raw.tar" "$SB/kube-proxy.tar" <<'EOF'
import json, sys, tarfile, io
src, dst = sys.argv[1:]
with tarfile.open(src) as tin:
    manifest = json.load(tin.extractfile("manifest.json"))
    repos = {}
    for entry in manifest:
        layer_id = entry["Layers"][-1].split("/")[0]
        for tag in entry.get("RepoTags") or []:
            name, _, version = tag.rpartition(":")
            if "." not in name.split("/")[0]:
                name = "docker.io/" + (name if "/" in name else "library/" + name)
            repos.setdefault(name, {})[version] = layer_id
    data = json.dumps(repos).encode()
    with tarfile.open(dst, "w") as tout:
        info = tarfile.TarInfo("repositories"); info.size = len(data); info.mode = 0o644
        tout.addfile(info, io.BytesIO(data))
        for member in tin.getmembers():
            if member.name == "repositories":
                continue
            tout.addfile(member, tin.extractfile(member) if member.isfile() else None)
EOF
rm -f "$WORK/kube-proxy.raw.tar"
for b in kubelet kubeadm kube-proxy; do cp "$BIN/$b" "$SB/"; done
cp "$CP_BIN/kubectl" "$SB/"
echo "$K8S" > "$REL/kubernetes/version"
tar -C "$REL" -cf - kubernetes | gzip -1 > "$WORK/kubernetes-server-linux-amd64.tar.gz"  # read once, by kind: fast over small
rm -rf "$REL" "$CTX"

# --- the node image ----------------------------------------------------------------------------------------------
log "kind build node-image --type file"
nice -n 10 "$KIND" build node-image --type file --base-image "$BASE_TAG" --image "$BUILT_TAG" \
  "$WORK/kubernetes-server-linux-amd64.tar.gz" >"$WORK/build-node-image.log" 2>&1 \
  || { tail -30 "$WORK/build-node-image.log" >&2; exit 1; }
# Labelled with the cache key (so --check and later runs know it is current), tagged as the image kind expects.
# kind's local-path provisioner image cannot be had offline, so its manifest goes: kind then installs a host-path
# StorageClass `standard` instead (kind's installstorage action); the labs use no volumes.
printf 'FROM %s\nRUN rm -f /kind/manifests/default-storage.yaml\nLABEL gpulab.key=%s\n' "$BUILT_TAG" "$KEY" \
  | docker build -q -t "$NODE_IMAGE" - >/dev/null
rm -f "$WORK/kubernetes-server-linux-amd64.tar.gz"
# Older keys' work dirs are not needed once this one is built (the Go caches are shared and stay).
for old in "$KROOT"/"$KIND_VERSION"-*; do [ "$old" != "$WORK" ] && [ -d "$old" ] && rm -rf "$old"; done
log "node image $NODE_IMAGE ready ($KEY)"
echo "$NODE_IMAGE"
