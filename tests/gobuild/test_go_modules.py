"""gpulab's Go helpers (``cluster/gosrc/<name>``) are ordinary Go modules: each folder holds a committed ``go.mod``
and ``go.sum`` whose module is ``gpulab.local/<name>`` and whose pinned modules and replacements are the ones
``cluster.gobuild`` builds the helper with (the Kubernetes wrapper module for kube-control-plane and celcheck, a
wrapper of its own for dpcheck and kindplugin). Modules come from the Go module proxy into the user
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
    return {**gobuild.go_env(settings.cache_root()), "GOFLAGS": "-mod=readonly"}


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
