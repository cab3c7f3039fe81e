"""gpulab's device plugin for kind nodes (``cluster/gosrc/kindplugin``) against a stand-in kubelet: its Go test
registers each resource over the kubelet device-plugin API, follows the devices file in ListAndWatch (a GPU turning
unhealthy, a resource leaving the file), refuses a second shared replica in Allocate, and registers again after
the kubelet restarts. Built from the Go module proxy in a wrapper module of its own, so it is in the ``build`` tier.
"""

from __future__ import annotations

import subprocess

from cluster import gobuild, settings
from cluster.progress import LogProgress


def test_node_plugin_go_tests_pass() -> None:
    built = gobuild.build_standalone(settings.cache_root(), "kindplugin", LogProgress())
    assert built.exists()
    work = built.parent.parent
    proc = subprocess.run([str(gobuild.go_binary()), "test", "-count=1", "./..."], cwd=work, capture_output=True,
                          text=True, timeout=600, check=False, env=gobuild.go_env(settings.cache_root()))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok" in proc.stdout
