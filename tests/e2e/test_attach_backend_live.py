"""Attaching to a running cluster (here: the session's local cluster, treated as someone else's) only reads it.

``up`` lists the nodes, ``down`` refuses, destructive steps are refused by the guard, tenant kubeconfigs work, and
after ``down --purge`` the attached cluster is still up with its nodes exactly as they were.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cluster import errors, fleet, ops
from cluster.backends import guard
from cluster.backends.attach import AttachBackend
from cluster.kube.client import Client
from cluster.progress import LogProgress


LocalCluster = Any  # tests/e2e/conftest.py's LocalCluster (conftest modules are not imported by name)


def _node_view(cluster: LocalCluster) -> dict[str, Any]:
    """What attach must never change: each node's labels, annotations and taints."""
    with cluster.client() as c:
        items = c.get("/api/v1/nodes")["items"]
    return {n["metadata"]["name"]: (n["metadata"].get("labels"), n["metadata"].get("annotations"),
                                    n["spec"].get("taints")) for n in items}


def _drop_tenant(cluster: LocalCluster, namespace: str) -> None:
    with cluster.client() as c:
        for path in (f"/api/v1/namespaces/{namespace}",
                     f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{ops.NODE_READER}:{namespace}"):
            try:
                c.delete(path)
            except errors.NotFound:
                pass


def test_attach_lists_the_nodes_refuses_down_and_leaves_the_cluster_untouched(local_cluster: LocalCluster) -> None:
    before = _node_view(local_cluster)
    be = AttachBackend("foreign")
    be.configure(local_cluster.kubeconfig)
    st = be.up(None, LogProgress())
    assert st.backend == "attach" and st.healthy, st.problems
    assert {n.name for n in st.nodes} == set(fleet.load("starter").node_names())
    assert st.api_server == local_cluster.backend.server()

    with pytest.raises(errors.CourseError, match="not gpulab's to stop"):
        be.down()
    with pytest.raises(errors.CourseError, match="refusing to cordon every node"):
        guard.refuse_if_attach(be, "cordon every node")

    try:
        tenant = be.tenant_kubeconfig("attach-tenant")
        with Client.from_kubeconfig(tenant) as c:
            assert c.get("/api/v1/namespaces/attach-tenant/pods")["items"] == []
            assert len(c.get("/api/v1/nodes")["items"]) == len(before)  # read access to nodes
            with pytest.raises(errors.ApiError) as info:
                c.patch("/api/v1/nodes/t4-0", {"metadata": {"labels": {"tenant-was-here": "yes"}}})
            assert info.value.status == 403
    finally:
        _drop_tenant(local_cluster, "attach-tenant")

    be.down(purge=True)
    assert not be.configured()
    assert local_cluster.backend.status().healthy
    assert _node_view(local_cluster) == before


def test_gpulab_up_with_a_kubeconfig_attaches_through_the_cli(local_cluster: LocalCluster, tmp_path: Path) -> None:
    """`gpulab up --kubeconfig` records attach in its own state dir; `down` exits 1 with the refusal."""
    env = dict(os.environ, GPULAB_STATE_DIR=str(tmp_path / "attach-state"))
    exe = str(Path(sys.executable).parent / "gpulab")

    def gpulab(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=120, env=env)

    up = gpulab("up", "--kubeconfig", str(local_cluster.kubeconfig))
    assert up.returncode == 0, up.stdout + up.stderr
    status = gpulab("status", "--json")
    assert status.returncode == 0, status.stdout + status.stderr
    data = json.loads(status.stdout)
    assert data["backend"] == "attach" and data["healthy"]
    assert sorted(n["name"] for n in data["nodes"]) == sorted(fleet.load("starter").node_names())
    down = gpulab("down")
    assert down.returncode == 1
    assert "not gpulab's to stop" in down.stdout + down.stderr and "Traceback" not in down.stderr
    assert gpulab("down", "--purge").returncode == 0
    assert not (tmp_path / "attach-state" / "gpulab").exists()
    assert local_cluster.backend.status().healthy
