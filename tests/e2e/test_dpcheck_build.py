"""NVIDIA's device-plugin config decoder (``dpcheck``) builds from a clean build folder through the Go module
proxy, as ``gpulab binaries ensure`` builds it on a fresh clone, and answers with NVIDIA's own verdicts.

Go-building tests live in the e2e tier, beside the celcheck build test (tests/e2e/test_faults_build.py). The Go
module and build caches are the user's shared ones (linked, never purged): a warm cache makes this quick, a cold
one downloads the module once.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from cluster import gobuild, progress, versions
from cluster import settings
from cluster.gpu import dpcheck
from prerequisites import missing


def _private_cache(tmp: Path) -> Path:
    shared = settings.cache_root()
    try:
        gobuild.go_binary()
    except Exception as exc:  # noqa: BLE001 - the message says what is missing
        missing(str(exc))
    for name in ("mod", "build"):
        (shared / "go" / name).mkdir(parents=True, exist_ok=True)
        (tmp / "go").mkdir(parents=True, exist_ok=True)
        (tmp / "go" / name).symlink_to(shared / "go" / name)
    return tmp


def test_dpcheck_builds_from_a_clean_folder_and_decodes_like_the_plugin(tmp_path: Path) -> None:
    cache = _private_cache(tmp_path)
    binary = gobuild.build_standalone(cache, "dpcheck", progress.LogProgress())
    assert binary.name == f"dpcheck-{versions.DEVICE_PLUGIN_VERSION}"
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.strip() == versions.DEVICE_PLUGIN_VERSION  # the module the binary really links
    ok, empty, bad_flag = dpcheck.check([
        ("version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 4.0\n      replica: 8\n", ()),
        ("version: v1\nsharing:\n  timeSlicing:\n", ()),
        ("version: v1\nflags:\n  migStrategy: bogus\n", ()),
    ], binary=binary)
    assert ok.ok and ok.replicated("timeSlicing") == (("nvidia.com/gpu", 4, ""),)
    assert ok.dropped == ("sharing.timeSlicing.resources[0].replica",)
    assert not empty.ok and empty.error.endswith("while decoding JSON: no resources specified")
    assert bad_flag.error == "error starting plugins: unable to validate flags: unknown MIG strategy: bogus"
