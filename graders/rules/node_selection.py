"""Rule ``gpu-node-selection``: nodeSelector and node affinity name labels and values that exist in the fleet.

GPU Feature Discovery labels nodes with what their GPUs are (``nvidia.com/gpu.product=Tesla-T4``,
``nvidia.com/gpu.memory``, ``nvidia.com/mig.capable``...). A selector on a label no node carries, or on a
value no node has (``Tesla-V100`` in a fleet without V100s), matches no node and the pod stays Pending.
Label values are strings: an unquoted ``true`` is a YAML bool and the object cannot be decoded. When each
selector is fine on its own, the rule still checks that some node matches all of them *and* advertises
the GPUs the pod asks for.
"""

from __future__ import annotations

from collections.abc import Iterator

from cluster import strict
from graders import context, findings, manifests, placement, source
from graders.rules import base

RULE_ID = "gpu-node-selection"

_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
# Label domains set by software (GFD, NFD, the kubelet): a key missing from every node is a mistake.
_MANAGED = ("nvidia.com/", "feature.node.kubernetes.io/", "kubernetes.io/", "node.kubernetes.io/")


def check(doc: source.Document, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    for pod in manifests.pod_specs(doc):
        found = list(_node_selector(doc, pod, ctx.fleet))
        found += list(_affinity(doc, pod, ctx.fleet))
        yield from found
        if not found:
            yield from _combined(doc, pod, ctx.fleet)


def _node_selector(doc: source.Document, pod: manifests.PodSpecAt, fleet: context.FleetFacts) -> Iterator[findings.Finding]:
    for key, value in manifests.as_map(pod.spec.get("nodeSelector")).items():
        path = pod.path + ("nodeSelector", key)
        if not isinstance(value, str):
            yield base.emit(doc, path, "gpu-node-selection/not-a-string", key=key, value=_yaml_text(value),
                            type=_go_type(value), quoted=f'"{_yaml_text(value)}"')
            continue
        yield from _label(doc, path, key, (value,), fleet, required=True)


def _affinity(doc: source.Document, pod: manifests.PodSpecAt, fleet: context.FleetFacts) -> Iterator[findings.Finding]:
    node_affinity = manifests.as_map(manifests.as_map(pod.spec.get("affinity")).get("nodeAffinity"))
    required = manifests.as_map(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
    base_path = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
    for t, term in enumerate(manifests.as_list(required.get("nodeSelectorTerms"))):
        for e, expr in enumerate(manifests.as_list(manifests.as_map(term).get("matchExpressions"))):
            yield from _expression(doc, pod, base_path + (t, "matchExpressions", e), expr, fleet, required=True)
    preferred_path = ("affinity", "nodeAffinity", "preferredDuringSchedulingIgnoredDuringExecution")
    for p, pref in enumerate(manifests.as_list(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"))):
        term = manifests.as_map(manifests.as_map(pref).get("preference"))
        for e, expr in enumerate(manifests.as_list(term.get("matchExpressions"))):
            yield from _expression(doc, pod, preferred_path + (p, "preference", "matchExpressions", e), expr, fleet,
                                   required=False)


def _expression(
    doc: source.Document, pod: manifests.PodSpecAt, rel: source.YPath, raw: object, fleet: context.FleetFacts,
    *, required: bool,
) -> Iterator[findings.Finding]:
    expr = manifests.as_map(raw)
    key, op = manifests.as_str(expr.get("key")), manifests.as_str(expr.get("operator"))
    values = tuple(v if isinstance(v, str) else _yaml_text(v) for v in manifests.as_list(expr.get("values")))
    path = pod.path + rel
    api = pod.api(*rel)
    error = ""
    if op not in _OPERATORS:
        error = f"{api}.operator: Invalid value: {manifests.go_quote(op)}: not a valid selector operator"
    elif op in ("In", "NotIn") and not values:
        error = f"{api}.values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
    elif op in ("Exists", "DoesNotExist") and values:
        error = f"{api}.values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
    if error:
        yield base.emit(doc, path, "gpu-node-selection/bad-expression", api=manifests.invalid(pod.kind, pod.name, [error]))
        return
    if key and op in ("In", "Exists"):
        yield from _label(doc, path, key, values if op == "In" else (), fleet, required=required)


def _label(
    doc: source.Document, path: source.YPath, key: str, values: tuple[str, ...], fleet: context.FleetFacts,
    *, required: bool,
) -> Iterator[findings.Finding]:
    known = fleet.labels.get(key)
    if known is None:
        close = strict.closest(key, fleet.labels, cutoff=0.6)
        variant = "unknown-key" if required and key.startswith(_MANAGED) else "unknown-key-warning"
        yield base.emit(doc, path, f"gpu-node-selection/{variant}", key=key, fleet=fleet.name,
                        suggestion=close or "")
        return
    missing = [v for v in values if v not in known]
    if values and len(missing) == len(values):
        close = strict.closest(values[0], known, cutoff=0.4)
        variant = "unknown-value" if required else "unknown-value-warning"
        yield base.emit(doc, path, f"gpu-node-selection/{variant}", key=key, value=", ".join(values),
                        known=", ".join(sorted(known)[:12]), suggestion=close or sorted(known)[0])


def _combined(doc: source.Document, pod: manifests.PodSpecAt, fleet: context.FleetFacts) -> Iterator[findings.Finding]:
    needs = placement.needs_of(pod)
    if not needs.node_selector and not needs.affinity_terms:
        return
    matching = [n for n in fleet.nodes if needs.labels_match(n)]
    where = pod.path + ("nodeSelector",) if "nodeSelector" in pod.spec else pod.path + ("affinity",)
    if not matching:
        yield base.emit(doc, where, "gpu-node-selection/no-node", owner=pod.owner, fleet=fleet.name)
        return
    wanted = {k: v for k, v in needs.resources.items() if v > 0}
    if wanted and not any(needs.resources_fit(n) for n in matching) and any(needs.resources_fit(n) for n in fleet.nodes):
        have = sorted({r for n in matching for r in n.resources if placement.is_accelerator(r)})
        yield base.emit(doc, where, "gpu-node-selection/no-gpu-there", owner=pod.owner,
                        resources=", ".join(sorted(wanted)), nodes=", ".join(n.name for n in matching),
                        have=", ".join(have) or "no accelerators")


def _yaml_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def _go_type(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return "null"
