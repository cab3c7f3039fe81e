"""Attaching to a running cluster (here: the session's local cluster, treated as someone else's) only reads it.

``up`` lists the nodes, ``down`` refuses, destructive steps are refused by the guard, tenant kubeconfigs work, and
after ``down --purge`` the attached cluster is still up with its nodes exactly as they were. Every lab start and
lab step, ``gpulab gpu-operator``, ``gpulab fault`` and ``gpulab node`` run against the attached cluster with the
GPU Operator installed, and its nodes, CRDs, namespaces and NVIDIA objects are compared before and after.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cluster import errors, fleet, ops, pki
from cluster.kube import kubeconfig
from cluster.backends import guard
from cluster.backends.attach import AttachBackend
from cluster.kube.client import Client
from cluster.progress import LogProgress
from cluster.sim.gpu import names
from cluster.testing import wait_for
from gpu_e2e import gpu_operator

__all__ = ["gpu_operator"]


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

        def gone() -> bool:  # the namespace controller finishes a deletion seconds later; later views compare it
            try:
                c.get(f"/api/v1/namespaces/{namespace}")
            except errors.NotFound:
                return True
            return False

        wait_for(gone, timeout=90, interval=0.5, what=f"namespace {namespace} to be deleted")


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


def _cluster_view(cluster: LocalCluster) -> dict[str, Any]:
    """Everything a cluster-wide step could change: nodes' labels, annotations and taints, CRDs, namespaces,
    priority and device classes, the ClusterPolicy and the GPU Operator's ConfigMaps."""
    with cluster.client() as c:
        nodes = {n["metadata"]["name"]: ({k: v for k, v in (n["metadata"].get("labels") or {}).items()
                                          if k != "nvidia.com/gfd.timestamp"},
                                         n["metadata"].get("annotations"), n["spec"].get("taints"))
                 for n in c.get("/api/v1/nodes")["items"]}
        listed = {path: sorted(o["metadata"]["name"] for o in c.get(path)["items"]) for path in (
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "/api/v1/namespaces",
            "/apis/scheduling.k8s.io/v1/priorityclasses", "/apis/resource.k8s.io/v1/deviceclasses",
            f"/api/v1/namespaces/{names.NAMESPACE}/configmaps")}
        policy = c.get(f"{names.POLICY_PATH}/{names.POLICY_NAME}")["spec"]
    return {"nodes": nodes, **listed, "policy": policy}


def _settled(cluster: LocalCluster) -> dict[str, Any]:
    """The view once two reads a second apart agree (the operator may still be labelling nodes)."""
    last: list[dict[str, Any]] = [_cluster_view(cluster)]

    def same() -> bool:
        now = _cluster_view(cluster)
        agreed = now == last[0]
        last[0] = now
        return agreed

    wait_for(same, timeout=60, interval=1.0, what="the cluster to stop changing")
    return last[0]


REFUSED_COMMANDS = [
    ("lab", "start", "01-device-plugins"), ("lab", "start", "04a-time-slicing"), ("lab", "start", "04d-mig"),
    ("gpu-operator", "uninstall"), ("gpu-operator", "install"),
    ("fault", "inject", "a100-1", "gpu-unhealthy"), ("fault", "clear", "a100-1", "gpu-unhealthy"),
    ("node", "heartbeat", "t4-0", "off"),
]


def test_attach_refuses_every_cluster_wide_step_and_changes_nothing(
        local_cluster: LocalCluster, gpu_operator: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 15: on attach, `gpulab lab start 01-device-plugins` deleted the gpu-operator namespace, the
    ClusterPolicy CRD and the nodes' GPU labels, and `gpulab fault inject` annotated a node. Now every such
    command, and every lab step run through the library, refuses with one message and the cluster is unchanged."""
    state = tmp_path / "attach-state"
    env = dict(os.environ, GPULAB_STATE_DIR=str(state), GPULAB_LABS_DIR=str(tmp_path / "labs"))
    exe = str(Path(sys.executable).parent / "gpulab")

    def gpulab(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=120, env=env)

    assert gpulab("up", "--kubeconfig", str(local_cluster.kubeconfig)).returncode == 0
    before = _settled(local_cluster)
    assert names.CRD_NAME in before["/apis/apiextensions.k8s.io/v1/customresourcedefinitions"]
    assert names.NAMESPACE in before["/api/v1/namespaces"]
    for args in REFUSED_COMMANDS:
        proc = gpulab(*args)
        assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
        assert "refusing to" in proc.stderr and "attached" in proc.stderr, (args, proc.stderr)
        assert "Traceback" not in proc.stderr and proc.stderr.count("error:") == 1, proc.stderr
    assert gpulab("gpu-operator", "status", "--json").returncode == 0  # reading is allowed

    # The library: labs started with the attached backend current, and every lab's real steps run on it.
    import labs
    from labs import catalog, evidence, steps

    monkeypatch.setenv("GPULAB_STATE_DIR", str(state))
    owner = guard.owner()
    assert owner.name == "attach"
    ran = 0
    with Client.from_kubeconfig(AttachBackend().kubeconfig()) as client:
        for lab_id in catalog.ids():
            with pytest.raises(errors.CourseError, match=f"refusing to set up lab {lab_id}"):
                labs.start(lab_id, workdir=tmp_path / "lib" / lab_id)
            spec = catalog.get(lab_id)
            ctx = steps.StepContext(client, spec.directory, evidence.fleet_facts(spec.fleet), owner)
            for step in (*spec.setup, *spec.solve):
                if step.cluster_change():
                    with pytest.raises(errors.CourseError, match="refusing to"):
                        step.run(ctx)
                    ran += 1
    assert ran >= 20  # operator, label, fault, policy and NVIDIA-named apply steps of the nine labs
    assert not (tmp_path / "lib").exists()
    assert _cluster_view(local_cluster) == before
    assert gpulab("down", "--purge").returncode == 0


def test_attach_logs_in_through_an_exec_plugin_or_a_token_file(local_cluster: LocalCluster, tmp_path: Path) -> None:
    """Issue 16: managed clusters log in through exec credential plugins. A small plugin that prints an
    ExecCredential (client.authentication.k8s.io/v1) with a token the local API server accepts (a tenant's
    service-account token, which may read nodes) lets `gpulab up --kubeconfig` attach; so does a tokenFile."""
    namespace = "attach-exec"
    try:
        token = kubeconfig.load(local_cluster.backend.tenant_kubeconfig(namespace)).token
        assert token
        (tmp_path / "token").write_text(token + "\n")
        plugin = tmp_path / "bin" / "lab-get-token"
        plugin.parent.mkdir()
        plugin.write_text(f"#!{sys.executable}\nimport json, os, pathlib\n"
                          "assert json.loads(os.environ['KUBERNETES_EXEC_INFO'])['spec']['interactive'] is False\n"
                          "token = pathlib.Path(os.environ['LAB_TOKEN_FILE']).read_text().strip()\n"
                          "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential',"
                          " 'status': {'token': token}}))\n")
        plugin.chmod(0o700)
        users = {"exec": {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "./bin/lab-get-token",
                                   "env": [{"name": "LAB_TOKEN_FILE", "value": str(tmp_path / "token")}],
                                   "interactiveMode": "Never"}},
                 "token-file": {"tokenFile": "token"}}
        for kind, user in users.items():
            config = tmp_path / f"{kind}.kubeconfig"
            config.write_text(json.dumps({
                "apiVersion": "v1", "kind": "Config", "current-context": "lab",
                "clusters": [{"name": "lab", "cluster": {"server": local_cluster.backend.server(),
                                                         "certificate-authority": str(pki.Pki(local_cluster.backend.dir / "pki").ca_cert)}}],
                "users": [{"name": "learner", "user": user}],
                "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "learner"}}]}))
            env = dict(os.environ, GPULAB_STATE_DIR=str(tmp_path / f"{kind}-state"))
            exe = str(Path(sys.executable).parent / "gpulab")
            up = subprocess.run([exe, "up", "--kubeconfig", str(config)], capture_output=True, text=True,
                                timeout=120, env=env)
            assert up.returncode == 0, (kind, up.stdout, up.stderr)
            status = subprocess.run([exe, "status", "--json"], capture_output=True, text=True, timeout=120, env=env)
            data = json.loads(status.stdout)
            assert data["backend"] == "attach" and data["healthy"], (kind, data["problems"])
            assert sorted(n["name"] for n in data["nodes"]) == sorted(fleet.load("starter").node_names())
    finally:
        _drop_tenant(local_cluster, namespace)
