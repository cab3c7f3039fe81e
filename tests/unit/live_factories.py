"""Small factories for the live-check, bundle and explainer unit tests: Kubernetes objects as the API returns them."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from graders import bundle

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
TOLERATE_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def make_node(name: str, *, gpus: int = 0, resource: str = "nvidia.com/gpu", allocatable: int | None = None,
              pool: str | None = None, labels: dict[str, str] | None = None, tainted: bool | None = None,
              pods: int = 110, cpu: str = "16", unschedulable: bool = False) -> dict[str, Any]:
    tainted = gpus > 0 if tainted is None else tainted
    capacity = {"cpu": cpu, "memory": "64Gi", "pods": str(pods)}
    alloc = dict(capacity)
    if gpus:
        capacity[resource] = str(gpus)
        alloc[resource] = str(gpus if allocatable is None else allocatable)
    spec: dict[str, Any] = {"taints": [dict(GPU_TAINT)]} if tainted else {}
    if unschedulable:
        spec["unschedulable"] = True
        spec.setdefault("taints", []).append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "gpulab.dev/pool": pool or name.split("-")[0],
                                                  **(labels or {})}},
            "spec": spec, "status": {"capacity": capacity, "allocatable": alloc}}


def make_pod(name: str, namespace: str = "lab", *, gpus: int = 0, resource: str = "nvidia.com/gpu",
             tolerate: bool = True, node: str | None = None, phase: str = "Pending", selector: dict[str, str] | None = None,
             cpu: str | None = None, reason: str = "", message: str = "",
             claims: list[dict[str, str]] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if gpus:
        resources = {"limits": {resource: str(gpus)}, "requests": {resource: str(gpus)}}
    if cpu:
        resources.setdefault("requests", {})["cpu"] = cpu
    container: dict[str, Any] = {"name": "cuda", "image": "cuda", "resources": resources}
    spec: dict[str, Any] = {"containers": [container]}
    if tolerate:
        spec["tolerations"] = copy.deepcopy(TOLERATE_GPU)
    if node:
        spec["nodeName"] = node
    if selector:
        spec["nodeSelector"] = selector
    if claims:
        spec["resourceClaims"] = claims
    status: dict[str, Any] = {"phase": phase}
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec,
            "status": status}


def make_event(namespace: str, involved: str, reason: str, message: str, kind: str = "Pod") -> dict[str, Any]:
    return {"metadata": {"namespace": namespace}, "involvedObject": {"kind": kind, "name": involved, "namespace": namespace},
            "reason": reason, "message": message, "type": "Warning", "source": "default-scheduler"}


def bundle_data(*, nodes: Sequence[Any] = (), pods: Sequence[Any] = (), other_pods: Sequence[Any] = (), events: Sequence[Any] = (),
                claims: Sequence[Any] = (), slices: Sequence[Any] = (), classes: Sequence[Any] = (), quotas: Sequence[Any] = (),
                namespaces: tuple[str, ...] = ("lab",), manifests: dict[str, str] | None = None,
                policy: dict[str, Any] | None = None, actions: Sequence[Any] = ()) -> dict[str, Any]:
    return {"kind": bundle.KIND, "bundleVersion": bundle.BUNDLE_VERSION, "lab": "unit", "actions": list(actions),
            "scope": {"namespaces": list(namespaces)}, "manifests": manifests or {},
            "cluster": {"nodes": list(nodes), "pods": list(pods), "otherPods": list(other_pods), "events": list(events),
                        "resourceClaims": list(claims), "otherClaims": [], "resourceSlices": list(slices),
                        "deviceClasses": list(classes), "configMaps": [], "resourceQuotas": list(quotas),
                        "clusterPolicy": policy}}


def view_of(data: dict[str, Any]) -> Any:
    return bundle.loads(bundle.dumps(data)).view()


def starter_nodes() -> list[dict[str, Any]]:
    """A small fleet like ``starter``: a CPU node and tainted T4, A100 x4 and H100 x8 nodes."""
    return [make_node("cpu-0"), make_node("t4-0", gpus=1), make_node("a100-0", gpus=4), make_node("h100-0", gpus=8)]
