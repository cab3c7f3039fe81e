"""Where DRA objects keep their requests and CEL selectors, across resource.k8s.io versions.

``resource.k8s.io/v1`` (and v1beta2) wrap each request's device fields in ``exactly``; v1beta1 puts them
directly on the request. ResourceClaimTemplates nest a claim spec one level deeper (``spec.spec``). This
module yields requests and selector expressions with their paths; it does not judge them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from graders import manifests, source

DRA_GROUP = "resource.k8s.io"


@dataclass(frozen=True)
class Request:
    doc: source.Document
    path: source.YPath  # the requests[i] item
    data: dict[str, object]
    version: str  # v1, v1beta1, ...

    @property
    def flat(self) -> bool:
        """Device fields sit directly on the request (the v1beta1 shape)."""
        return self.version == "v1beta1"

    @property
    def device_path(self) -> source.YPath:
        return self.path if self.flat else self.path + ("exactly",)

    @property
    def device_fields(self) -> dict[str, object]:
        return self.data if self.flat else manifests.as_map(self.data.get("exactly"))


@dataclass(frozen=True)
class Selector:
    doc: source.Document
    path: source.YPath  # ...cel.expression
    expression: str
    device_class: str  # "" for DeviceClass selectors and unknown

    @property
    def api(self) -> str:
        return manifests.api_path(self.path)


def is_dra(doc: source.Document) -> bool:
    group, _ = manifests.api_group_version(doc)
    return manifests.classify(doc) is manifests.DocType.OBJECT and group == DRA_GROUP


def claim_spec_path(doc: source.Document) -> source.YPath | None:
    kind = manifests.kind(doc)
    if kind == "ResourceClaim":
        return ("spec",)
    if kind == "ResourceClaimTemplate":
        return ("spec", "spec")
    return None


def requests(doc: source.Document) -> Iterator[Request]:
    spec_path = claim_spec_path(doc) if is_dra(doc) else None
    if spec_path is None:
        return
    _, version = manifests.api_group_version(doc)
    base = spec_path + ("devices", "requests")
    for i, item in enumerate(manifests.as_list(doc.get(base))):
        if isinstance(item, dict):
            yield Request(doc, base + (i,), item, version)


def selectors(doc: source.Document) -> Iterator[Selector]:
    if not is_dra(doc):
        return
    if manifests.kind(doc) == "DeviceClass":
        yield from _in_list(doc, ("spec", "selectors"), manifests.name(doc))
        return
    for request in requests(doc):
        fields = request.device_fields
        yield from _in_list(doc, request.device_path + ("selectors",), manifests.as_str(fields.get("deviceClassName")))
        for k, sub in enumerate(manifests.as_list(request.data.get("firstAvailable"))):
            sub_class = manifests.as_str(manifests.as_map(sub).get("deviceClassName"))
            yield from _in_list(doc, request.path + ("firstAvailable", k, "selectors"), sub_class)


def _in_list(doc: source.Document, path: source.YPath, device_class: str) -> Iterator[Selector]:
    for j, item in enumerate(manifests.as_list(doc.get(path))):
        expression = manifests.as_map(manifests.as_map(item).get("cel")).get("expression")
        if isinstance(expression, str):
            yield Selector(doc, path + (j, "cel", "expression"), expression, device_class)
