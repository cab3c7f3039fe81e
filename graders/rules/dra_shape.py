"""Rule ``dra-api-shape``: ResourceClaims, templates and pods use the DRA shape of the API version they name.

In ``resource.k8s.io/v1`` a request wraps its device fields in ``exactly`` (or lists alternatives in
``firstAvailable``); ``deviceClassName``, ``selectors``, ``count`` written directly on the request are the
v1beta1 shape and are unknown fields in v1 (and the reverse in v1beta1). ``allocationMode`` is
``ExactCount`` or ``All``; ``All`` takes no ``count``. A container's ``resources.claims`` must name an
entry of the pod's ``spec.resourceClaims``, and device classes and claim templates should exist.
"""

from __future__ import annotations

from collections.abc import Iterator

from cluster.gpu import dra_attributes
from graders import dra, findings, manifests, source
from graders.rules import base

RULE_ID = "dra-api-shape"

_DEVICE_FIELDS = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations")


def check(doc: source.Document, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    for request in dra.requests(doc):
        yield from _request(doc, request, ctx)
    if dra.is_dra(doc) and manifests.kind(doc) == "ResourceSlice":
        yield from _slice(doc)
    for pod in manifests.pod_specs(doc):
        yield from _pod(doc, pod, ctx.index)


def _request(doc: source.Document, request: dra.Request, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    kind, name = manifests.kind(doc), manifests.name(doc)
    at = manifests.api_path(request.path)
    data = request.data
    if request.flat:
        if "exactly" in data:
            yield base.emit(doc, request.path + ("exactly",), "dra-api-shape/exactly-in-v1beta1", field=f"{at}.exactly",
                            version=request.version)
    else:
        flat = [f for f in _DEVICE_FIELDS if f in data]
        if flat:
            yield base.emit(doc, request.path + (flat[0],), "dra-api-shape/flat-in-v1", version=request.version,
                            field=f"{at}.{flat[0]}", fields=", ".join(flat))
            return
        if "exactly" not in data and "firstAvailable" not in data:
            error = f"{at}: Required value: exactly one of `exactly` or `firstAvailable` is required"
            yield base.emit(doc, request.path, "dra-api-shape/no-device-request", api=manifests.invalid(kind, name, [error]))
            return
        if "exactly" in data and "firstAvailable" in data:
            error = f"{at}: Invalid value: null: exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"
            yield base.emit(doc, request.path, "dra-api-shape/both-request-types", api=manifests.invalid(kind, name, [error]))
            return
    if "firstAvailable" in data and not request.device_fields.get("deviceClassName"):
        return
    yield from _device_fields(doc, request, ctx)


def _device_fields(doc: source.Document, request: dra.Request, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    kind, name = manifests.kind(doc), manifests.name(doc)
    fields = request.device_fields
    at = manifests.api_path(request.device_path)
    device_class = fields.get("deviceClassName")
    if not isinstance(device_class, str) or not device_class:
        error = f"{at}.deviceClassName: Required value"
        yield base.emit(doc, request.device_path, "dra-api-shape/no-device-class", api=manifests.invalid(kind, name, [error]))
    elif not _class_known(device_class, ctx):
        known = sorted(ctx.index.device_classes | dra_attributes.known_device_classes() | ctx.fleet.device_classes)
        yield base.emit(doc, request.device_path + ("deviceClassName",), "dra-api-shape/unknown-device-class",
                        name=device_class, known=", ".join(known))
    mode = fields.get("allocationMode", "ExactCount")
    count = fields.get("count")
    if mode not in ("ExactCount", "All"):
        error = f'{at}.allocationMode: Unsupported value: {manifests.go_quote(str(mode))}: supported values: "All", "ExactCount"'
        yield base.emit(doc, request.device_path + ("allocationMode",), "dra-api-shape/bad-allocation-mode",
                        value=str(mode), api=manifests.invalid(kind, name, [error]))
    elif mode == "All" and count not in (None, 0):
        error = f"{at}.count: Invalid value: {count}: must not be specified when allocationMode is 'All'"
        yield base.emit(doc, request.device_path + ("count",), "dra-api-shape/count-with-all",
                        api=manifests.invalid(kind, name, [error]))
    elif isinstance(count, int) and not isinstance(count, bool) and count <= 0:
        error = f"{at}.count: Invalid value: {count}: must be greater than zero"
        yield base.emit(doc, request.device_path + ("count",), "dra-api-shape/count-not-positive",
                        api=manifests.invalid(kind, name, [error]))


def _class_known(device_class: str, ctx: base.RuleContext) -> bool:
    return (device_class in ctx.index.device_classes or device_class in ctx.fleet.device_classes
            or device_class in dra_attributes.known_device_classes())


def _slice(doc: source.Document) -> Iterator[findings.Finding]:
    _, version = manifests.api_group_version(doc)
    if version == "v1beta1":
        return
    for i, device in enumerate(manifests.as_list(doc.get(("spec", "devices")))):
        if isinstance(device, dict) and "basic" in device:
            yield base.emit(doc, ("spec", "devices", i, "basic"), "dra-api-shape/basic-in-v1", version=version,
                            field=f"spec.devices[{i}].basic")


def _pod(doc: source.Document, pod: manifests.PodSpecAt, index: base.Index) -> Iterator[findings.Finding]:
    names: list[str] = []
    for i, claim in enumerate(manifests.as_list(pod.spec.get("resourceClaims"))):
        claim = manifests.as_map(claim)
        names.append(manifests.as_str(claim.get("name")))
        template = claim.get("resourceClaimTemplateName")
        if isinstance(template, str) and template and template not in index.claim_templates:
            yield base.emit(doc, pod.path + ("resourceClaims", i, "resourceClaimTemplateName"),
                            "dra-api-shape/unknown-template", name=template,
                            known=", ".join(sorted(index.claim_templates)) or "none")
        claim_name = claim.get("resourceClaimName")
        if isinstance(claim_name, str) and claim_name and claim_name not in index.claims:
            yield base.emit(doc, pod.path + ("resourceClaims", i, "resourceClaimName"), "dra-api-shape/unknown-claim",
                            name=claim_name, known=", ".join(sorted(index.claims)) or "none")
    declared = sorted({n for n in names if n})
    for container in manifests.containers(pod):
        claims = manifests.as_list(manifests.as_map(container.data.get("resources")).get("claims"))
        for j, ref in enumerate(claims):
            wanted = manifests.as_str(manifests.as_map(ref).get("name"))
            if not wanted or wanted in declared:
                continue
            detail = " which is empty" if not declared else ": " + ", ".join(declared)
            error = (f"{container.api('resources', 'claims', j)}: Not found: {manifests.go_quote(wanted)}: "
                     f"must be one of the names in pod.spec.resourceClaims{detail}")
            yield base.emit(doc, container.path + ("resources", "claims", j), "dra-api-shape/unknown-pod-claim",
                            container=container.label, name=wanted, api=manifests.invalid(pod.kind, pod.name, [error]))
