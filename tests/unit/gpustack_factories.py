"""Small factories for the GPU stack's unit tests: simulated nodes, policies, device-plugin ConfigMaps, pods."""

from __future__ import annotations

import copy
from typing import Any

from cluster import fleet
from cluster.gpu import catalog
from cluster.sim import nodes
from cluster.sim.gpu import hoststate, manifests, names, nodeplan, policy

TS_RENAME_4 = """version: v1
sharing:
  timeSlicing:
    renameByDefault: true
    failRequestsGreaterThanOne: true
    resources:
    - name: nvidia.com/gpu
      replicas: 4
"""
TS_ANY_10 = """version: v1
flags:
  migStrategy: none
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 10
"""


def make_node(model: str = "A100-SXM4-80GB", gpus: int = 4, name: str | None = None,
              labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    gm = catalog.MODELS[model]
    pool = fleet.NodePool(name or "pool", 1, "64", "512Gi", 110, fleet.GpuSpec(gm, gpus) if gpus else None)
    node = nodes.build_node(pool, name or f"{model.lower()}-0", 0)
    node["metadata"]["uid"] = f"uid-{node['metadata']['name']}"
    node["metadata"]["labels"].update(labels or {})
    node["metadata"]["annotations"].update(annotations or {})
    return node


def default_policy(**changes: Any) -> policy.Policy:
    base = policy.from_object(manifests.cluster_policy())
    assert base is not None
    from dataclasses import replace

    return replace(base, **changes)


def apply(node: dict[str, Any], plan: nodeplan.NodePlan) -> dict[str, Any]:
    """The node after the stack applied ``plan`` (merge-patch semantics)."""
    out = copy.deepcopy(node)
    for section, patch in (("labels", plan.labels), ("annotations", plan.annotations)):
        target = out["metadata"].setdefault(section, {})
        for k, v in patch.items():
            if v is None:
                target.pop(k, None)
            else:
                target[k] = v
    for section, patch in (("capacity", plan.capacity), ("allocatable", plan.allocatable)):
        target = out["status"].setdefault(section, {})
        for k, v in patch.items():
            if v is None:
                target.pop(k, None)
            else:
                target[k] = v
    return out


def settle(node: dict[str, Any], pol: policy.Policy | None, cms: dict[str, dict[str, str]] | None = None,
           validated: bool = True) -> tuple[dict[str, Any], nodeplan.NodePlan]:
    """Apply plans until nothing changes (what the stack's reconcile loop converges to)."""
    plan = nodeplan.plan(node, pol, cms or {}, validated=validated, timestamp="1700000000")
    for _ in range(5):
        node = apply(node, plan)
        plan = nodeplan.plan(node, pol, cms or {}, validated=validated, timestamp="1700000000")
        if plan.empty:
            return node, plan
    raise AssertionError(f"plan does not converge: {plan}")


def ext(node: dict[str, Any], section: str = "capacity") -> dict[str, str]:
    return {k: v for k, v in node["status"].get(section, {}).items() if k.startswith("nvidia.com/")}


def with_layout(node: dict[str, Any], layouts: Any) -> dict[str, Any]:
    out = copy.deepcopy(node)
    out["metadata"]["annotations"][names.MIG_LAYOUT] = hoststate.layout_annotation(layouts)
    return out


def make_pod(name: str = "p", containers: dict[str, dict[str, str]] | None = None, uid: str | None = None,
             annotations: dict[str, str] | None = None, phase: str = "Running", node: str = "n") -> dict[str, Any]:
    cs = containers if containers is not None else {"main": {"nvidia.com/gpu": "1"}}
    return {
        "metadata": {"name": name, "namespace": "t", "uid": uid or f"uid-{name}", "annotations": annotations or {}},
        "spec": {"nodeName": node, "containers": [{"name": c, "image": "x", "resources": {"limits": lim}}
                                                  for c, lim in cs.items()]},
        "status": {"phase": phase},
    }
