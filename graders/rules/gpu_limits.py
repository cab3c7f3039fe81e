"""Rule ``gpu-limits``: GPUs must be asked for under ``resources.limits``.

Extended resources such as ``nvidia.com/gpu`` cannot be overcommitted, so the apiserver requires a limit
for each one; a request alone is refused ("Limit must be set for non overcommitable resources"). Limits
alone are fine: the request defaults to the limit. A GPU count written straight under ``resources`` or
under the container is an unknown field and asks for nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

from graders import findings, manifests, placement, source
from graders.rules import base

RULE_ID = "gpu-limits"


def check(doc: source.Document, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    for pod in manifests.pod_specs(doc):
        for container in manifests.containers(pod):
            yield from _requests_without_limits(doc, pod, container)
            yield from _misplaced(doc, container)


def _requests_without_limits(
    doc: source.Document, pod: manifests.PodSpecAt, container: manifests.ContainerAt
) -> Iterator[findings.Finding]:
    resources = manifests.as_map(container.data.get("resources"))
    limits = manifests.as_map(resources.get("limits"))
    for entry in placement.accelerator_entries(container):
        if entry.field == "requests" and entry.name not in limits:
            error = f"{container.api('resources', 'limits')}: Required value: Limit must be set for non overcommitable resources"
            yield base.emit(doc, entry.path, "gpu-limits/requests-only", container=container.label,
                            resource=entry.name, api=manifests.invalid(pod.kind, pod.name, [error]))


def _misplaced(doc: source.Document, container: manifests.ContainerAt) -> Iterator[findings.Finding]:
    resources = container.data.get("resources")
    places: list[tuple[source.YPath, str, str]] = []
    if isinstance(resources, dict):
        places += [(container.path + ("resources", k), k, container.api("resources", k))
                   for k in resources if k not in ("limits", "requests", "claims") and placement.is_accelerator(k)]
    for key in ("limits", "requests"):
        if key in container.data:
            places.append((container.path + (key,), key, container.api(key)))
    for path, key, api in places:
        yield base.emit(doc, path, "gpu-limits/misplaced", container=container.label, key=key, field=api)
