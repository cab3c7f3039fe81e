"""gpulab's Go helpers (``cluster/gosrc/<name>``) are ordinary Go modules: each folder holds a committed ``go.mod``
and ``go.sum`` whose module is ``gpulab.local/<name>`` and whose pinned modules and replacements are the ones
``cluster.gobuild`` builds the helper with (the Kubernetes wrapper module for kube-control-plane and celcheck, a
wrapper of its own for dpcheck and kindplugin). ``go vet`` and ``go test`` pass in each folder with
``-mod=readonly``, so the committed ``go.sum`` is complete. Modules come from the Go module proxy into the user
cache on first use, so this is the ``build`` tier."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cluster import gobuild, settings

GOSRC = Path(gobuild.__file__).parent / "gosrc"
HELPERS = sorted(p.name for p in GOSRC.iterdir() if p.is_dir() and any(p.glob("*.go")))


def _env() -> dict[str, str]:
    # -trimpath as the builds have it (cluster.gobuild): the compiled packages' cache keys then match the ones
    # `make binaries` left in the shared build cache, so vet reuses them instead of compiling the control plane
    # again (kube-control-plane's vet: 13 min with the keys apart on a new machine, under 3 min with them shared).
    return {**gobuild.go_env(settings.cache_root()), "GOFLAGS": "-mod=readonly -trimpath"}


def _edit_json(gomod: str, tmp: Path) -> dict[str, Any]:
    (tmp / "go.mod").write_text(gomod)
    out = subprocess.run([str(gobuild.go_binary()), "mod", "edit", "-json"], cwd=tmp, capture_output=True, text=True,
                         timeout=60, check=True, env=_env())
    parsed: dict[str, Any] = json.loads(out.stdout)
    return parsed


def _built_with(name: str) -> str:
    if name in {*gobuild.STANDALONE_TOOLS, *gobuild.NODE_TOOLS}:
        return gobuild.standalone_gomod(name)
    assert name in gobuild.extra_tools()
    return gobuild.kube_wrapper_gomod()


def test_every_helper_is_listed() -> None:
    assert HELPERS == ["celcheck", "dpcheck", "kindplugin", "kube-control-plane"]


@pytest.mark.parametrize("name", HELPERS)
def test_the_committed_module_is_the_one_gobuild_builds_with(name: str, tmp_path: Path) -> None:
    folder = GOSRC / name
    assert (folder / "go.sum").is_file() and (folder / "go.sum").read_text().strip()
    committed = _edit_json((folder / "go.mod").read_text(), tmp_path)
    built = _edit_json(_built_with(name), tmp_path)
    assert committed["Module"]["Path"] == f"gpulab.local/{name}"
    assert committed["Go"] == built["Go"]
    assert committed.get("Replace") == built.get("Replace")
    versions = {r["Path"]: r["Version"] for r in committed.get("Require") or []}
    pinned = {r["Path"]: r["Version"] for r in built.get("Require") or []}
    # every module gobuild pins is at its pin here (celcheck imports no k8s.io/kubernetes package, so tidy drops it)
    assert {m: v for m, v in pinned.items() if m in versions} == {m: versions[m] for m in pinned if m in versions}
    if name != "celcheck":
        assert set(pinned) <= set(versions)
# kube-control-plane's vet compiles the API server, controller manager and scheduler packages: 13 min on the busy
# 2-core machine with an empty build cache (2026-12-02), past pytest's default 600 s; the limit stays for a build
# cache that `make binaries` did not fill (binaries downloaded, not built).
@pytest.mark.timeout(2400)
@pytest.mark.parametrize("name", HELPERS)
def test_go_vet_and_go_test_pass(name: str) -> None:
    go = str(gobuild.go_binary())
    for cmd in ([go, "vet", "./..."], [go, "test", "-count=1", "./..."]):
        proc = subprocess.run(cmd, cwd=GOSRC / name, capture_output=True, text=True, timeout=2400, check=False,
                              env=_env())
        assert proc.returncode == 0, f"{' '.join(cmd[1:])} in {name}:\n{proc.stdout[-4000:]}{proc.stderr[-4000:]}"
