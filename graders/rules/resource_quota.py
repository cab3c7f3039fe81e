"""Rule ``resource-quota-gpu``: a ResourceQuota limits GPUs only through ``requests.<resource>``.

The quota system charges extended resources only as ``requests.nvidia.com/gpu``. A quota on
``limits.nvidia.com/gpu`` or on a bare ``nvidia.com/gpu`` passes validation (names with a ``/`` skip the
standard-name check) but is never enforced: pods keep being admitted past the number you wrote.
"""

from __future__ import annotations

from collections.abc import Iterator

from cluster import quantity
from graders import findings, manifests, placement, source
from graders.rules import base

RULE_ID = "resource-quota-gpu"


def check(doc: source.Document, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    if manifests.classify(doc) is not manifests.DocType.OBJECT or manifests.kind(doc) != "ResourceQuota":
        return
    hard = manifests.as_map(manifests.as_map(manifests.as_map(doc.data).get("spec")).get("hard"))
    for key, raw in hard.items():
        path = ("spec", "hard", key)
        prefix, dot, rest = key.partition(".")
        if prefix == "limits" and dot and placement.is_accelerator(rest):
            yield base.emit(doc, path, "resource-quota-gpu/limits-key", key=key, resource=rest)
        elif prefix == "requests" and dot and placement.is_accelerator(rest):
            yield from _value(doc, path, key, raw)
        elif "/" in key and placement.is_accelerator(key):
            yield base.emit(doc, path, "resource-quota-gpu/bare-key", key=key, resource=key)


def _value(doc: source.Document, path: source.YPath, key: str, raw: object) -> Iterator[findings.Finding]:
    try:
        value = quantity.parse(raw)
    except quantity.QuantityError as exc:
        yield base.emit(doc, path, "resource-quota-gpu/not-a-quantity", key=key, value=str(raw), api=str(exc))
        return
    if value.value < 0 or not value.is_integer:
        yield base.emit(doc, path, "resource-quota-gpu/not-whole", key=key, value=str(value))
