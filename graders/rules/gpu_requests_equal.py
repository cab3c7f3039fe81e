"""Rule ``gpu-requests-equal-limits``: a GPU request, when written, must equal the GPU limit.

For resources that cannot be overcommitted the apiserver insists that requests and limits match; the
error names the limit (``must be equal to nvidia.com/gpu limit of 2``). The simplest fix is to write only
the limit.
"""

from __future__ import annotations

from collections.abc import Iterator

from cluster import quantity
from graders import findings, manifests, placement, source
from graders.rules import base

RULE_ID = "gpu-requests-equal-limits"


def check(doc: source.Document, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    for pod in manifests.pod_specs(doc):
        for container in manifests.containers(pod):
            resources = manifests.as_map(container.data.get("resources"))
            limits = manifests.as_map(resources.get("limits"))
            for entry in placement.accelerator_entries(container):
                if entry.field != "requests" or entry.name not in limits:
                    continue
                try:
                    request, limit = quantity.parse(entry.raw), quantity.parse(limits[entry.name])
                except quantity.QuantityError:
                    continue  # gpu-integer-quantity reports unreadable values
                if request.value == limit.value:
                    continue
                error = (f"{container.api('resources', 'requests')}: Invalid value: \"{request}\": "
                         f"must be equal to {entry.name} limit of {limit}")
                yield base.emit(doc, entry.path, "gpu-requests-equal-limits/mismatch", container=container.label,
                                resource=entry.name, request=str(request), limit=str(limit),
                                api=manifests.invalid(pod.kind, pod.name, [error]))
