"""Rule ``gpu-capacity``: a pod cannot ask one node for more accelerators than any node has.

All containers of a pod run on one node, so the pod's count is the sum over its containers (at least the
largest init container). If no node in the fleet advertises that many, the scheduler reports
``Insufficient nvidia.com/gpu`` on every node and the pod stays Pending.
"""

from __future__ import annotations

from collections.abc import Iterator

from graders import findings, manifests, placement, source
from graders.rules import base

RULE_ID = "gpu-capacity"


def check(doc: source.Document, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    for pod in manifests.pod_specs(doc):
        needs = placement.needs_of(pod)
        for resource, count in needs.resources.items():
            most = ctx.fleet.resources.get(resource, 0)
            if most and count > most:
                nodes = [n.name for n in ctx.fleet.nodes if n.resources.get(resource, 0) == most]
                yield base.emit(doc, _where(pod, resource), "gpu-capacity/too-many", owner=pod.owner, resource=resource,
                                count=count, most=most, nodes=", ".join(nodes))


def _where(pod: manifests.PodSpecAt, resource: str) -> source.YPath:
    for container in manifests.containers(pod):
        for entry in placement.accelerator_entries(container):
            if entry.name == resource:
                return entry.path
    return pod.path
