"""DRA on the real control plane: per-node mode switch, gpu.nvidia.com ResourceSlices, a DeviceClass selecting
memory >= 40Gi places pods only on matching nodes, and an unsatisfiable claim stays Pending with the scheduler's
reason."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from cluster.kube.client import Client
from cluster.sim.gpu import dra, names
from gpu_e2e import (create_pod, delete, ext, gpu_operator, gpu_pod, label, pod, wait_event, wait_ext, wait_for,
                     wait_phase)

__all__ = ["gpu_operator"]
DRA_NODES = ("a100-0", "l40s-0", "t4-0")
RESOURCE = "/apis/resource.k8s.io/v1"


def slices(client: Client) -> dict[str, dict]:
    items = client.get(dra.SLICES_PATH, fieldSelector=f"spec.driver={names.DRA_DRIVER}")["items"]
    return {s["spec"]["nodeName"]: s for s in items}


def device_class(name: str, min_memory: str) -> dict:
    expr = (f"device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu' && "
            f"device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('{min_memory}')) >= 0")
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expr}}]}}


def claim_template(name: str, device_class_name: str) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class_name}}]}}}}


@pytest.fixture
def dra_nodes(gpu_operator: Client) -> Iterator[Client]:
    client = gpu_operator
    for node in DRA_NODES:
        label(client, node, names.DRA_ENABLED, "true")
    try:
        wait_for(lambda: set(DRA_NODES) <= set(slices(client)), 20, what="ResourceSlices on the DRA nodes")
        yield client
    finally:
        for node in DRA_NODES:
            label(client, node, names.DRA_ENABLED, None)
        wait_for(lambda: not set(DRA_NODES) & set(slices(client)), 20, what="slices withdrawn")
        wait_ext(client, "t4-0", {"nvidia.com/gpu": "1"}, "allocatable")


def test_dra_nodes_publish_slices_and_no_extended_resources(dra_nodes: Client) -> None:
    """docs mode rule + §7: DRA nodes have a slice (pool = node) and no nvidia.com/gpu; others keep theirs."""
    client = dra_nodes
    s = slices(client)
    a100 = s["a100-0"]["spec"]
    assert a100["pool"]["name"] == "a100-0" and [d["name"] for d in a100["devices"]] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert a100["devices"][0]["attributes"]["productName"] == {"string": "NVIDIA A100-SXM4-80GB"}
    for node in DRA_NODES:
        wait_ext(client, node, {})
    assert ext(client, "h100-0") == {"nvidia.com/gpu": "8"}
    classes = {c["metadata"]["name"] for c in client.get(dra.CLASSES_PATH)["items"]}
    assert {"gpu.nvidia.com", "mig.nvidia.com"} <= classes
    wait_for(lambda: "nvidia-device-plugin-daemonset" not in {
        p["metadata"]["labels"].get("app") for p in client.get(
            f"/api/v1/namespaces/{names.NAMESPACE}/pods", fieldSelector="spec.nodeName=a100-0")["items"]},
        30, what="no device-plugin pod on a DRA node")


def test_memory_class_places_pods_only_on_matching_nodes(dra_nodes: Client, namespace: str) -> None:
    """A DeviceClass with memory >= 40Gi: claims are allocated on the A100 or L40S, never the 15 GiB T4; the
    claim shows its allocation and the container gets the device's UUID."""
    client = dra_nodes
    client.create(f"{RESOURCE}/deviceclasses", device_class("gpu-40gi", "40Gi"))
    try:
        client.create(f"{RESOURCE}/namespaces/{namespace}/resourceclaimtemplates", claim_template("big", "gpu-40gi"))
        names_ = [f"big-{i}" for i in range(4)]
        for n in names_:
            create_pod(client, namespace, gpu_pod(n, {}, claims=[{"name": "gpu", "resourceClaimTemplateName": "big"}]))
        placed = {n: wait_phase(client, namespace, n, "Running", timeout=60)["spec"]["nodeName"] for n in names_}
        assert set(placed.values()) <= {"a100-0", "l40s-0"}, placed
        claims = client.get(f"{RESOURCE}/namespaces/{namespace}/resourceclaims")["items"]
        assert len(claims) == 4
        for c in claims:
            results = c["status"]["allocation"]["devices"]["results"]
            assert results[0]["driver"] == "gpu.nvidia.com" and results[0]["pool"] in ("a100-0", "l40s-0")
        p = pod(client, namespace, names_[0])
        devices = json.loads(p["metadata"]["annotations"][names.POD_DEVICES])["gpu-workload"]
        assert devices[0]["uuid"].startswith("GPU-") and devices[0]["id"].startswith("gpu-")
    finally:
        delete(client, f"{RESOURCE}/deviceclasses/gpu-40gi")


def test_unsatisfiable_claim_stays_pending_with_the_scheduler_reason(dra_nodes: Client, namespace: str) -> None:
    """No device has 1Ti: the pod stays Pending and FailedScheduling says the claims cannot be allocated."""
    client = dra_nodes
    client.create(f"{RESOURCE}/deviceclasses", device_class("gpu-1ti", "1Ti"))
    try:
        client.create(f"{RESOURCE}/namespaces/{namespace}/resourceclaimtemplates", claim_template("huge", "gpu-1ti"))
        create_pod(client, namespace, gpu_pod("huge", {}, claims=[{"name": "gpu", "resourceClaimTemplateName": "huge"}]))
        ev = wait_event(client, namespace, "huge", "FailedScheduling", "cannot allocate all claims", timeout=40)
        assert pod(client, namespace, "huge")["status"]["phase"] == "Pending", ev
    finally:
        delete(client, f"{RESOURCE}/deviceclasses/gpu-1ti")
