"""The kind backend's second half, against a real API server: workers become the fleet's nodes.

A real kind bring-up needs Docker, so here the workers are registered on the session's real control plane the way
a kind worker's kubelet registers (its name, the kubelet-settable labels from our kind config, the taints from our
kubeadm join patch). Then the backend's reconcile step must give each the fleet node's full label set, hardware
annotation and taints, keep what the kubelet set, and be idempotent.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster import errors, fleet
from cluster.backends import kindconfig
from cluster.backends.kind import KindBackend
from cluster.kube.client import Client
from cluster.sim import nodes

LocalCluster = Any  # tests/e2e/conftest.py's LocalCluster


def _as_kubelet_registers(w: kindconfig.Worker) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": w.fleet_node, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              **kindconfig.kubelet_labels(w)}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": w.fleet_node, "labels": labels},
            "spec": {"taints": [t.to_api() for t in w.pool.taints]} if w.pool.taints else {}}


# Kind workers register under their fleet node's names; the session's cluster already has the starter fleet's
# nodes, so these workers play a small fleet of their own (kcpu-0, kt4-0) beside it.
KIND_FLEET = """apiVersion: gpulab.dev/v1
kind: Fleet
metadata: {name: kindtest}
spec:
  pools:
  - {name: kcpu, count: 1, cpu: "8", memory: 32Gi}
  - name: kt4
    count: 1
    cpu: "16"
    memory: 64Gi
    gpu: {model: T4, count: 1}
    labels: {gpulab.dev/pool: kt4}
    taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
"""


@pytest.fixture
def workers(local_cluster: LocalCluster, tmp_path: Path) -> Iterator[list[kindconfig.Worker]]:
    (tmp_path / "kindtest.yaml").write_text(KIND_FLEET)
    plan = kindconfig.plan(fleet.load(str(tmp_path / "kindtest.yaml")), "kindtest")
    with local_cluster.client() as c:
        for w in plan:
            c.create("/api/v1/nodes", _as_kubelet_registers(w))
    try:
        yield plan
    finally:
        with local_cluster.client() as c:
            for w in plan:
                try:
                    c.delete(f"/api/v1/nodes/{w.fleet_node}")
                except errors.NotFound:
                    pass


def test_workers_get_the_fleet_nodes_labels_annotation_and_taints(
        local_cluster: LocalCluster, workers: list[kindconfig.Worker], tmp_path: Path) -> None:
    be = KindBackend("kindtest", root=tmp_path)
    with Client.from_kubeconfig(local_cluster.kubeconfig) as client:
        be.apply_fleet_nodes(client, workers)
        be.apply_fleet_nodes(client, workers)  # a second `up` changes nothing
        got = {w.fleet_node: client.get(f"/api/v1/nodes/{w.fleet_node}") for w in workers}
    for w in workers:
        node = got[w.fleet_node]
        labels = node["metadata"]["labels"]
        assert labels["kubernetes.io/hostname"] == w.fleet_node  # the kubelet's own (its --hostname-override)
        assert labels[kindconfig.FLEET_NODE_LABEL] == w.fleet_node
        assert labels["gpulab.dev/pool"] == w.pool.name
        assert labels["node.kubernetes.io/instance-type"] == f"gpulab-{w.pool.name}"
        annotations = node["metadata"]["annotations"]
        assert annotations[nodes.HARDWARE_ANNOTATION] == w.node["metadata"]["annotations"][nodes.HARDWARE_ANNOTATION]
        assert nodes.SIMULATED_ANNOTATION not in annotations
        fleet_taints = [(t["key"], t["effect"]) for t in node.get("spec", {}).get("taints", [])
                        if t["key"] == "nvidia.com/gpu"]
        assert fleet_taints == ([("nvidia.com/gpu", "NoSchedule")] if w.pool.taints else [])


def test_a_worker_that_is_not_the_fleet_node_expected_is_a_clear_error(
        local_cluster: LocalCluster, workers: list[kindconfig.Worker], tmp_path: Path) -> None:
    missing = [kindconfig.Worker("kt4-9", "kindtest-worker99", workers[1].pool, workers[1].node)]
    be = KindBackend("kindtest", root=tmp_path)
    with Client.from_kubeconfig(local_cluster.kubeconfig) as client:
        # a node registered under kcpu-0 that says it plays kt4-0: not the cluster our kind config made
        client.patch("/api/v1/nodes/kcpu-0", {"metadata": {"labels": {kindconfig.FLEET_NODE_LABEL: "kt4-0"}}})
        swapped = [workers[0]]
        with pytest.raises(errors.ClusterError, match="carries gpulab.dev/fleet-node='kt4-0', expected 'kcpu-0'"):
            be.apply_fleet_nodes(client, swapped)
        with pytest.raises(errors.ClusterError,
                           match=r"fleet node kt4-9 \(kind container kindtest-worker99\) has not registered"):
            be.apply_fleet_nodes(client, missing)
