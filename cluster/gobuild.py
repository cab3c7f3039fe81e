"""Build the control-plane binaries from Go modules through the Go module proxy.

``go install k8s.io/kubernetes/cmd/...@v`` is refused because k/k's go.mod replaces its staging modules, so we
generate wrapper modules (one for Kubernetes with a ``replace`` line per staging module, one for etcd) under the
user cache, and build there with GOMODCACHE and GOCACHE also under the cache, never in the repo. Go's own caches
make an interrupted build resume where it stopped; a file lock keeps two builds from racing.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from cluster import errors, progress as progress_mod, versions

log = logging.getLogger(__name__)

_GOSRC = Path(__file__).parent / "gosrc"
_KUBE_CMDS = tuple(f"k8s.io/kubernetes/cmd/{name}" for name in versions.KUBE_BINARIES)


def go_binary() -> Path:
    found = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if not found:
        raise errors.BinariesUnavailable("Go is not installed (needed to build from the Go module proxy)")
    return Path(found)


def go_env(cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        GOMODCACHE=str(cache / "go" / "mod"),
        GOCACHE=str(cache / "go" / "build"),
        GOFLAGS="-mod=mod",
        CGO_ENABLED="0",
        GOTOOLCHAIN="local",
    )
    return env


def kube_wrapper_gomod() -> str:
    lines = [
        "module gpulab.local/k8sbins",
        "",
        f"go {versions.GO_DIRECTIVE}",
        "",
        "godebug default=go1.26",
        "",
        f"require k8s.io/kubernetes {versions.KUBERNETES_VERSION}",
        "",
        "replace (",
        *(f"\tk8s.io/{m} => k8s.io/{m} {versions.STAGING_VERSION}" for m in versions.STAGING_MODULES),
        ")",
        "",
    ]
    return "\n".join(lines)


def etcd_wrapper_gomod() -> str:
    return (
        f"module gpulab.local/etcdbin\n\ngo {versions.GO_DIRECTIVE}\n\n"
        f"require go.etcd.io/etcd/server/v3 {versions.ETCD_VERSION}\n"
    )


def tools_go(imports: tuple[str, ...]) -> str:
    body = "\n".join(f'\t_ "{imp}"' for imp in imports)
    return f"//go:build tools\n\npackage tools\n\nimport (\n{body}\n)\n"


def version_ldflags(build_date: str | None = None) -> str:
    """The -X flags k/k's hack/lib/version.sh sets, so ``--version`` and ``/version`` report the pinned version."""
    v = versions.KUBERNETES_VERSION
    major, minor = v.lstrip("v").split(".")[:2]
    date = build_date or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={v}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.gitCommit=0000000000000000000000000000000000000000",
            f"-X {pkg}.buildDate={date}",
        ]
    return " ".join(flags)


@contextmanager
def build_lock(directory: Path) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".lock").open("w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.warning("another build holds %s; waiting for it", directory)
            fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 3600) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise errors.BinariesUnavailable(
            f"`{' '.join(cmd)}` failed in {cwd} (exit {proc.returncode}):\n{proc.stderr.strip()[-3000:]}"
        )
    return proc.stdout


def _build_with_progress(
    cmd: list[str], cwd: Path, env: dict[str, str], total: int, prog: progress_mod.Progress, label: str
) -> None:
    """Run ``go build -v``; each package name it prints advances the bar (cached packages are skipped fast)."""
    prog.start(label, float(total))
    log_path = cwd / "build.log"
    with log_path.open("w") as logf:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=logf, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        seen = 0
        tail: list[str] = []
        for line in proc.stderr:
            logf.write(line)
            tail = (tail + [line])[-40:]
            if line.strip() and " " not in line.strip():
                seen += 1
                prog.advance(1, detail=line.strip() if seen % 50 == 0 else None)
        rc = proc.wait()
    if rc != 0:
        raise errors.BinariesUnavailable(f"`go build` failed in {cwd} (exit {rc}):\n{''.join(tail)[-3000:]}")
    prog.finish(f"built in {cwd}")


def _prepare_kube(cache: Path) -> Path:
    work = cache / "build" / f"kubernetes-{versions.KUBERNETES_VERSION}"
    work.mkdir(parents=True, exist_ok=True)
    write_if_changed(work / "go.mod", kube_wrapper_gomod())
    write_if_changed(work / "tools.go", tools_go(_KUBE_CMDS))
    for tool in extra_tools():
        dest = work / "cmd" / tool
        dest.mkdir(parents=True, exist_ok=True)
        for src in (_GOSRC / tool).glob("*.go"):
            write_if_changed(dest / src.name, src.read_text())
    return work


def build_all(cache: Path, prog: progress_mod.Progress) -> dict[str, Path]:
    """Build every control-plane binary; returns name -> path in the build dirs."""
    go = str(go_binary())
    env = go_env(cache)
    work = _prepare_kube(cache)
    with build_lock(work):
        started = time.monotonic()
        prog.start("resolving Kubernetes modules through the Go module proxy")
        run([go, "mod", "tidy"], work, env)
        run([go, "mod", "download"], work, env)
        prog.finish()
        total = len(run([go, "list", "-deps", *_KUBE_CMDS], work, env).split())
        (work / "bin").mkdir(exist_ok=True)
        cmd = [go, "build", "-v", "-trimpath", "-ldflags", version_ldflags(), "-o", "bin/", *_KUBE_CMDS]
        _build_with_progress(cmd, work, env, total, prog, f"building Kubernetes {versions.KUBERNETES_VERSION}")
        log.info("Kubernetes binaries built in %.0f s", time.monotonic() - started)
    files = {name: work / "bin" / name for name in versions.KUBE_BINARIES}
    files["etcd"] = build_etcd(cache, prog)
    return files


def build_etcd(cache: Path, prog: progress_mod.Progress) -> Path:
    go = str(go_binary())
    env = go_env(cache)
    work = cache / "build" / f"etcd-{versions.ETCD_VERSION}"
    work.mkdir(parents=True, exist_ok=True)
    write_if_changed(work / "go.mod", etcd_wrapper_gomod())
    write_if_changed(work / "tools.go", tools_go(("go.etcd.io/etcd/server/v3",)))
    with build_lock(work):
        run([go, "mod", "tidy"], work, env)
        total = len(run([go, "list", "-deps", "go.etcd.io/etcd/server/v3"], work, env).split())
        (work / "bin").mkdir(exist_ok=True)
        ld = f"-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=gpulab"
        cmd = [go, "build", "-v", "-trimpath", "-ldflags", ld, "-o", "bin/etcd", "go.etcd.io/etcd/server/v3"]
        _build_with_progress(cmd, work, env, total, prog, f"building etcd {versions.ETCD_VERSION}")
    return work / "bin" / "etcd"


# Go programs of ours built in a wrapper module of their own (they need a module the Kubernetes one must not
# pull in): name -> (module, version). The binary is installed as ``<name>-<version>``.
STANDALONE_TOOLS: dict[str, tuple[str, str]] = {
    "dpcheck": (versions.DEVICE_PLUGIN_MODULE, versions.DEVICE_PLUGIN_VERSION),
}
# Go programs of ours that run inside kind nodes, not on the host: built on demand by the kind backend (a static
# binary, CGO off) in a wrapper module of their own, never by ``gpulab binaries``.
NODE_TOOLS: dict[str, tuple[str, str]] = {
    "kindplugin": ("k8s.io/kubelet", versions.STAGING_VERSION),
}


def extra_tools() -> tuple[str, ...]:
    """Small Go programs of ours (``cluster/gosrc/<name>``) built inside the Kubernetes wrapper module."""
    if not _GOSRC.is_dir():
        return ()
    return tuple(sorted(p.name for p in _GOSRC.iterdir()
                        if p.is_dir() and any(p.glob("*.go")) and p.name not in {*STANDALONE_TOOLS, *NODE_TOOLS}))


# The revision of an extra tool, part of its installed name: a helper that learnt something new is built again
# instead of an older one being reused (celcheck 2 evaluates selectors against devices, 3 returns the parsed syntax
# tree; kube-control-plane 1 is the one-process control plane, 2 adapts GOMAXPROCS to its load).
EXTRA_REVISIONS: dict[str, int] = {"celcheck": 3, "kube-control-plane": 2}


def extra_binary_name(name: str) -> str:
    """``celcheck`` -> ``celcheck-3``; a tool without a revision keeps its name."""
    return f"{name}-{EXTRA_REVISIONS[name]}" if name in EXTRA_REVISIONS else name


def standalone_binary_name(name: str) -> str:
    """``dpcheck`` -> ``dpcheck-v0.19.1``: a new pin never reuses a binary built against the old one."""
    return f"{name}-{_standalone(name)[1]}"


def _standalone(name: str) -> tuple[str, str]:
    return STANDALONE_TOOLS.get(name) or NODE_TOOLS[name]


def source_key(name: str) -> str:
    """A short hash of ``cluster/gosrc/<name>``'s sources (tests left out) and its wrapper module."""
    digest = hashlib.sha256(standalone_gomod(name).encode())
    for src in sorted((_GOSRC / name).glob("*.go")):
        if not src.name.endswith("_test.go"):
            digest.update(src.name.encode() + b"\0" + src.read_bytes())
    return digest.hexdigest()[:12]


def standalone_gomod(name: str) -> str:
    module, version = _standalone(name)
    return f"module gpulab.local/{name}\n\ngo {versions.GO_DIRECTIVE}\n\nrequire {module} {version}\n"


def build_standalone(cache: Path, name: str, prog: progress_mod.Progress) -> Path:
    """Build ``cluster/gosrc/<name>`` in ``<cache>/build/<name>-<version>`` (Go's caches make a rebuild fast)."""
    go = str(go_binary())
    env = go_env(cache)
    binary = standalone_binary_name(name)
    work = cache / "build" / binary
    work.mkdir(parents=True, exist_ok=True)
    with build_lock(work):
        write_if_changed(work / "go.mod", standalone_gomod(name))
        for src in (_GOSRC / name).glob("*.go"):
            write_if_changed(work / src.name, src.read_text())
        prog.start(f"building {binary}")
        run([go, "mod", "tidy"], work, env)
        (work / "bin").mkdir(exist_ok=True)
        run([go, "build", "-trimpath", "-ldflags", "-s -w", "-o", f"bin/{binary}", "."], work, env)
        prog.finish()
    return work / "bin" / binary


def build_extra(cache: Path, name: str, prog: progress_mod.Progress) -> Path:
    go = str(go_binary())
    env = go_env(cache)
    work = _prepare_kube(cache)
    with build_lock(work):
        prog.start(f"building {name}")
        run([go, "mod", "tidy"], work, env)
        (work / "bin").mkdir(exist_ok=True)
        # The version flags too: kube-control-plane's API server reports the pinned version on /version.
        run([go, "build", "-trimpath", "-ldflags", version_ldflags(), "-o", f"bin/{name}", f"./cmd/{name}"], work, env)
        prog.finish()
    return work / "bin" / name
