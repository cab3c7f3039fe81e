"""Rule ``gpu-integer-quantity``: GPU counts are whole, non-negative numbers.

Every extended resource is an integer resource to the apiserver: ``0.5`` is read as the quantity
``500m`` and refused with ``must be an integer``; a negative count is refused too. A bare Pod that sets
only a fractional limit gets the same error twice, because the request is defaulted from the limit.
Values that are not quantities at all (``one``, ``1 GPU``) fail to decode.
"""

from __future__ import annotations

from collections.abc import Iterator

from cluster import quantity
from graders import findings, manifests, placement, source
from graders.rules import base

RULE_ID = "gpu-integer-quantity"


def check(doc: source.Document, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    for pod in manifests.pod_specs(doc):
        for container in manifests.containers(pod):
            requests = manifests.as_map(manifests.as_map(container.data.get("resources")).get("requests"))
            for entry in placement.accelerator_entries(container):
                yield from _check_entry(doc, pod, entry, defaulted=entry.field == "limits" and not pod.is_template
                                        and entry.name not in requests)


def _check_entry(
    doc: source.Document, pod: manifests.PodSpecAt, entry: placement.ResourceEntry, *, defaulted: bool
) -> Iterator[findings.Finding]:
    try:
        value = quantity.parse(entry.raw)
    except quantity.QuantityError as exc:
        yield base.emit(doc, entry.path, "gpu-integer-quantity/not-a-quantity", resource=entry.name,
                        container=entry.container.label, value=_shown(entry.raw), api=str(exc))
        return
    errors: list[str] = []
    paths = [entry.api]
    if defaulted:
        paths.append(entry.container.api("resources", "requests", manifests.Key(entry.name)))
    for api in paths:
        if value.value < 0:
            errors.append(f'{api}: Invalid value: "{value}": must be greater than or equal to 0')
        if not value.is_integer:
            errors.append(f'{api}: Invalid value: "{value}": must be an integer')
    if not errors:
        return
    key = "gpu-integer-quantity/negative" if value.value < 0 and value.is_integer else "gpu-integer-quantity/fraction"
    yield base.emit(doc, entry.path, key, resource=entry.name, container=entry.container.label,
                    value=_shown(entry.raw), canonical=str(value), api=manifests.invalid(pod.kind, pod.name, errors))


def _shown(raw: object) -> str:
    if isinstance(raw, bool):
        return "true" if raw else "false"
    return str(raw) if raw is not None else "null"
