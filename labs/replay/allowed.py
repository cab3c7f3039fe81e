"""What a lab lets a learner do besides handing in files, read from the lab's scope and solve steps: the node
labels, ClusterPolicy fields, operator and DaemonSet restarts a bundle may record (``record``) and a replay may
redo (``planner``), and the workload kinds a learner's manifest may create in the lab's namespaces. Plain data;
no cluster."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from labs import steps
from labs.spec import LabSpec

# Workload kinds a learner creates in the lab's namespaces, by apiVersion (the replay role's RBAC resources
# come from the server's discovery).
NAMESPACED_KINDS: dict[str, str] = {
    "Pod": "v1", "ConfigMap": "v1", "ResourceQuota": "v1", "LimitRange": "v1", "Service": "v1",
    "Deployment": "apps/v1", "ReplicaSet": "apps/v1", "Job": "batch/v1", "ResourceClaim": "resource.k8s.io/v1",
    "ResourceClaimTemplate": "resource.k8s.io/v1",
    "ServiceMonitor": "monitoring.coreos.com/v1", "PrometheusRule": "monitoring.coreos.com/v1",
}


def group(api_version: str) -> str:
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def allowed_labels(spec: LabSpec) -> set[tuple[str, str]]:
    out = {(node, key) for node, keys in spec.scope.node_labels.items() for key in keys}
    out |= {(s.node, s.key) for s in spec.solve if isinstance(s, steps.Label)}
    return out


def allowed_policy_fields(spec: LabSpec) -> tuple[str, ...]:
    found = list(spec.scope.policy)
    for s in spec.solve:
        if isinstance(s, steps.Policy):
            found.extend(f for f in leaf_fields(s.patch) if f not in found)
    return tuple(found)


def leaf_fields(patch: Mapping[str, Any]) -> list[str]:
    """``{devicePlugin: {config: {...}}}`` -> ``["devicePlugin.config"]`` (two levels: the scope's granularity)."""
    out: list[str] = []
    for top, value in patch.items():
        if isinstance(value, Mapping):
            out.extend(f"{top}.{sub}" for sub in value)
        else:
            out.append(str(top))
    return out


def operator_allowed(spec: LabSpec) -> bool:
    return any(isinstance(s, steps.Operator) for s in spec.solve)


def allowed_restarts(spec: LabSpec) -> set[str]:
    """The operator DaemonSets the lab's solution restarts (``kubectl rollout restart``): the learner may too."""
    return {s.daemonset for s in spec.solve if isinstance(s, steps.Restart)}
