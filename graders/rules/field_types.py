"""Rule ``field-types``: the fields GPU rules rely on have the JSON type Kubernetes expects.

A list where an object belongs (``resources: [limits]``), a string where a list belongs (``containers:
nginx``) or a number where a string belongs makes the whole object undecodable: the apiserver answers
``cannot unmarshal`` and nothing is created. This rule checks the shapes on the paths that matter for GPU
scheduling, so other rules can rely on them; it does not try to be a full schema.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from graders import findings, manifests, source
from graders.rules import base

RULE_ID = "field-types"

_OBJECT, _ARRAY, _STRING, _INTEGER, _BOOL = "object", "array", "string", "integer", "bool"

# Relative to a pod spec; "*" is every item of an array.
_POD_SPEC: Mapping[tuple[str, ...], str] = {
    ("containers",): _ARRAY,
    ("containers", "*"): _OBJECT,
    ("containers", "*", "name"): _STRING,
    ("containers", "*", "image"): _STRING,
    ("containers", "*", "resources"): _OBJECT,
    ("containers", "*", "resources", "limits"): _OBJECT,
    ("containers", "*", "resources", "requests"): _OBJECT,
    ("containers", "*", "resources", "claims"): _ARRAY,
    ("initContainers",): _ARRAY,
    ("initContainers", "*"): _OBJECT,
    ("initContainers", "*", "resources"): _OBJECT,
    ("initContainers", "*", "resources", "limits"): _OBJECT,
    ("initContainers", "*", "resources", "requests"): _OBJECT,
    ("tolerations",): _ARRAY,
    ("tolerations", "*"): _OBJECT,
    ("tolerations", "*", "key"): _STRING,
    ("tolerations", "*", "operator"): _STRING,
    ("tolerations", "*", "value"): _STRING,
    ("tolerations", "*", "effect"): _STRING,
    ("tolerations", "*", "tolerationSeconds"): _INTEGER,
    ("nodeSelector",): _OBJECT,
    ("affinity",): _OBJECT,
    ("affinity", "nodeAffinity"): _OBJECT,
    ("priorityClassName",): _STRING,
    ("runtimeClassName",): _STRING,
    ("resourceClaims",): _ARRAY,
    ("resourceClaims", "*"): _OBJECT,
}
_TOP: Mapping[tuple[str, ...], str] = {
    ("metadata",): _OBJECT,
    ("metadata", "name"): _STRING,
    ("metadata", "namespace"): _STRING,
    ("metadata", "labels"): _OBJECT,
    ("spec",): _OBJECT,
}
_BY_KIND: Mapping[str, Mapping[tuple[str, ...], str]] = {
    "Deployment": {("spec", "template"): _OBJECT, ("spec", "template", "spec"): _OBJECT, ("spec", "replicas"): _INTEGER},
    "StatefulSet": {("spec", "template"): _OBJECT, ("spec", "template", "spec"): _OBJECT},
    "DaemonSet": {("spec", "template"): _OBJECT, ("spec", "template", "spec"): _OBJECT},
    "Job": {("spec", "template"): _OBJECT, ("spec", "template", "spec"): _OBJECT},
    "CronJob": {("spec", "jobTemplate"): _OBJECT, ("spec", "jobTemplate", "spec"): _OBJECT},
    "ResourceQuota": {("spec", "hard"): _OBJECT},
    "ConfigMap": {("data",): _OBJECT},
    "PriorityClass": {("value",): _INTEGER, ("globalDefault",): _BOOL, ("preemptionPolicy",): _STRING},
    "DeviceClass": {("spec", "selectors"): _ARRAY, ("spec", "selectors", "*"): _OBJECT,
                    ("spec", "selectors", "*", "cel"): _OBJECT, ("spec", "selectors", "*", "cel", "expression"): _STRING},
}
# A ResourceClaim spec; a ResourceClaimTemplate has the same one level down, at spec.spec.
_CLAIM_SPEC: Mapping[tuple[str, ...], str] = {
    ("devices",): _OBJECT,
    ("devices", "requests"): _ARRAY,
    ("devices", "requests", "*"): _OBJECT,
    ("devices", "requests", "*", "exactly"): _OBJECT,
    ("devices", "requests", "*", "exactly", "selectors"): _ARRAY,
    ("devices", "requests", "*", "exactly", "selectors", "*"): _OBJECT,
    ("devices", "requests", "*", "exactly", "selectors", "*", "cel"): _OBJECT,
    ("devices", "requests", "*", "exactly", "selectors", "*", "cel", "expression"): _STRING,
    ("devices", "requests", "*", "selectors"): _ARRAY,
    ("devices", "requests", "*", "selectors", "*", "cel", "expression"): _STRING,
    ("devices", "requests", "*", "firstAvailable"): _ARRAY,
}
_CLAIM_SPEC_AT = {"ResourceClaim": ("spec",), "ResourceClaimTemplate": ("spec", "spec")}
# Documents that are not stored in the API (lists, component and kustomize configs): no name to require.
_NAMELESS = frozenset({"List", "KubeletConfiguration", "Kustomization", "Component", "Cluster"})
_CONFIG_GROUP_SUFFIXES = ("config.k8s.io", "x-k8s.io")


def check(doc: source.Document, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    if manifests.classify(doc) is not manifests.DocType.OBJECT:
        return
    kind = manifests.kind(doc)
    schema = dict(_TOP)
    if kind in ("ConfigMap", "PriorityClass", "KubeletConfiguration"):
        schema.pop(("spec",))
    schema.update(_BY_KIND.get(kind, {}))
    yield from _check_schema(doc, kind, (), schema)
    if kind in _CLAIM_SPEC_AT and isinstance(doc.get(_CLAIM_SPEC_AT[kind]), dict):
        yield from _check_schema(doc, kind, _CLAIM_SPEC_AT[kind], _CLAIM_SPEC)
    labels = manifests.as_map(manifests.as_map(doc.data).get("metadata")).get("labels")
    for key, value in manifests.as_map(labels).items():
        if not isinstance(value, str):
            yield _wrong(doc, kind, ("metadata", "labels", key), _STRING, value)
    yield from _required(doc, kind)


def _required(doc: source.Document, kind: str) -> Iterator[findings.Finding]:
    """The two required fields every GPU manifest has: a name, and containers in a pod spec."""
    meta = manifests.as_map(manifests.as_map(doc.data).get("metadata"))
    group, _ = manifests.api_group_version(doc)
    nameless = kind in _NAMELESS or group.endswith(_CONFIG_GROUP_SUFFIXES)
    if kind and not nameless and not meta.get("name") and not meta.get("generateName"):
        error = "metadata.name: Required value: name or generateName is required"
        yield base.emit(doc, ("metadata",), "field-types/required", kind=kind, field="metadata.name",
                        api=manifests.invalid(kind, "", [error]))
    spec_path = manifests.POD_SPEC_PATHS.get(kind)
    if spec_path is None:
        return
    pods = list(manifests.pod_specs(doc))
    for pod in pods:
        yield from _check_schema(doc, kind, pod.path, _POD_SPEC)
    containers = pods[0].spec.get("containers") if pods else None
    if not pods or containers is None or containers == []:
        api = manifests.api_path(spec_path + ("containers",))
        yield base.emit(doc, spec_path if pods else spec_path[:1], "field-types/required", kind=kind, field=api,
                        api=manifests.invalid(kind, manifests.name(doc), [f"{api}: Required value"]))


def _check_schema(
    doc: source.Document, kind: str, prefix: source.YPath, schema: Mapping[tuple[str, ...], str]
) -> Iterator[findings.Finding]:
    for pattern, expected in schema.items():
        for path, value in _expand(doc.data if not prefix else doc.get(prefix), pattern):
            if value is None or _matches(value, expected):
                continue
            yield _wrong(doc, kind, prefix + path, expected, value)


def _expand(data: object, pattern: tuple[str, ...]) -> Iterator[tuple[source.YPath, object]]:
    """Values at ``pattern`` below ``data``; ``*`` walks every item of a list."""
    frontier: list[tuple[source.YPath, object]] = [((), data)]
    for i, part in enumerate(pattern):
        nxt: list[tuple[source.YPath, object]] = []
        for path, node in frontier:
            if part == "*" and isinstance(node, list):
                nxt.extend((path + (j,), item) for j, item in enumerate(node))
            elif part != "*" and isinstance(node, dict) and part in node:
                nxt.append((path + (part,), node[part]))
        frontier = nxt
    return iter(frontier)


def _matches(value: object, expected: str) -> bool:
    if expected == _OBJECT:
        return isinstance(value, dict)
    if expected == _ARRAY:
        return isinstance(value, list)
    if expected == _STRING:
        return isinstance(value, str)
    if expected == _BOOL:
        return isinstance(value, bool)
    return isinstance(value, int) and not isinstance(value, bool)


def _found(value: object) -> str:
    if isinstance(value, bool):
        return _BOOL
    if isinstance(value, int):
        return "number"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return _STRING
    return _ARRAY if isinstance(value, list) else _OBJECT


def _wrong(doc: source.Document, kind: str, path: source.YPath, expected: str, value: object) -> findings.Finding:
    return base.emit(doc, path, "field-types/wrong-type", kind=kind, field=manifests.api_path(path),
                     expected=expected, found=_found(value))
