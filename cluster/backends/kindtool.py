"""The kind CLI, pinned to ``versions.KIND_VERSION``: found in the user cache, or built from the Go module proxy.

``go install sigs.k8s.io/kind@<version>`` puts the binary in ``<cache>/bin/kind-<version>/``, with GOMODCACHE and
GOCACHE shared with the control-plane build (``gobuild.go_env``), never in the repo. A ``kind`` already on PATH is
used only when it reports exactly the pinned version, because the node image we ask for is the one that version
was released with. This module runs kind's own ``version`` and nothing else; creating clusters is ``kind.py``'s job.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
from pathlib import Path

from cluster import errors, gobuild, progress as progress_mod, settings, versions

log = logging.getLogger(__name__)

MODULE = "sigs.k8s.io/kind"


def install_dir() -> Path:
    return settings.cache_root() / "bin" / f"kind-{versions.KIND_VERSION}"


def cached_path() -> Path:
    return install_dir() / "kind"


def reported_version(path: Path) -> str | None:
    """The version a kind binary reports (``kind v0.32.0 go1.26 linux/amd64`` -> ``v0.32.0``), or None."""
    try:
        proc = subprocess.run([str(path), "version"], capture_output=True, text=True, timeout=30, check=False)
    except OSError:
        return None
    words = proc.stdout.split()
    if proc.returncode != 0 or len(words) < 2 or words[0] != "kind":
        return None
    return words[1]


def find() -> Path | None:
    """The pinned kind, from the cache or PATH, without building anything."""
    candidates = [cached_path()]
    on_path = shutil.which("kind")
    if on_path:
        candidates.append(Path(on_path))
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK) and reported_version(path) == versions.KIND_VERSION:
            return path
    return None


def ensure_kind(prog: progress_mod.Progress | None = None) -> Path:
    """Return the pinned kind binary, building it with ``go install`` when it is not there yet."""
    found = find()
    if found:
        return found
    try:
        go = gobuild.go_binary()
    except errors.BinariesUnavailable as exc:
        raise errors.BackendUnavailable(
            f"kind {versions.KIND_VERSION} is not installed, and Go is not available to build it",
            hint=f"install kind {versions.KIND_VERSION} (https://kind.sigs.k8s.io/docs/user/quick-start/#installation) "
            "and put it on PATH, or install Go and run `gpulab up --backend kind` again",
        ) from exc
    return _go_install(go, prog or progress_mod.LogProgress())


def _go_install(go: Path, prog: progress_mod.Progress) -> Path:
    cache = settings.cache_root()
    dest = install_dir()
    dest.mkdir(parents=True, exist_ok=True)
    env = gobuild.go_env(cache)
    # `go install pkg@version` ignores any go.mod around it; a -mod flag in GOFLAGS would be refused.
    env.pop("GOFLAGS", None)
    env["GOBIN"] = str(dest)
    cmd = [str(go), "install", "-trimpath", "-ldflags=-s -w", f"{MODULE}@{versions.KIND_VERSION}"]
    with (dest / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second gpulab waits here, then finds the binary below
        if reported_version(cached_path()) == versions.KIND_VERSION:
            return cached_path()
        prog.start(f"building kind {versions.KIND_VERSION} from the Go module proxy")
        proc = subprocess.run(cmd, cwd=dest, env=env, capture_output=True, text=True, timeout=1800, check=False)
        if proc.returncode != 0:
            raise errors.BackendUnavailable(
                f"`{' '.join(cmd)}` failed (exit {proc.returncode}):\n{proc.stderr.strip()[-2000:]}",
                hint="check that the Go module proxy is reachable (`go env GOPROXY`), or install kind "
                f"{versions.KIND_VERSION} yourself and put it on PATH",
            )
        prog.finish(f"kind {versions.KIND_VERSION} in {dest}")
    got = reported_version(cached_path())
    if got != versions.KIND_VERSION:
        raise errors.BackendUnavailable(
            f"the kind built in {dest} reports version {got!r}, expected {versions.KIND_VERSION}",
            hint=f"delete {dest} and run `gpulab up --backend kind` again",
        )
    log.info("kind %s built in %s", versions.KIND_VERSION, dest)
    return cached_path()
