"""Rule ``gpu-tolerations``: tolerations are well formed, and a GPU pod tolerates the taints of the GPU nodes.

GPU nodes are usually tainted (here ``nvidia.com/gpu=present:NoSchedule``) so that only pods that ask for
GPUs land there. A toleration matches a taint when the keys are equal (or the key is empty with
``Exists``), the values are equal for ``Equal`` (the default operator) or ignored for ``Exists``, and the
effect is equal or empty. A near miss (wrong value, wrong effect, ``Equal`` without a value) tolerates
nothing, and the pod stays Pending. Malformed tolerations are refused by the apiserver with the errors
quoted here.
"""

from __future__ import annotations

from collections.abc import Iterator

from cluster import strict
from graders import context, findings, manifests, placement, source
from graders.rules import base

RULE_ID = "gpu-tolerations"

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def check(doc: source.Document, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    for pod in manifests.pod_specs(doc):
        yield from _syntax(doc, pod)
        yield from _fleet(doc, pod, ctx.fleet)


def _syntax(doc: source.Document, pod: manifests.PodSpecAt) -> Iterator[findings.Finding]:
    for index, raw in enumerate(manifests.as_list(pod.spec.get("tolerations"))):
        tol = manifests.as_map(raw)
        path = pod.path + ("tolerations", index)
        at = pod.api("tolerations", index)
        key, op = manifests.as_str(tol.get("key")), manifests.as_str(tol.get("operator"))
        value, effect = manifests.as_str(tol.get("value")), manifests.as_str(tol.get("effect"))
        errors: list[str] = []
        if not key and op != "Exists":
            errors.append(f'{at}.operator: Invalid value: {manifests.go_quote(op)}: operator must be Exists when '
                          '`key` is empty, which means "match all values and all keys"')
        if "tolerationSeconds" in tol and effect != "NoExecute":
            errors.append(f"{at}.effect: Invalid value: {manifests.go_quote(effect)}: effect must be 'NoExecute' "
                          "when `tolerationSeconds` is set")
        if op == "Exists" and value:
            errors.append(f"{at}.operator: Invalid value: {manifests.go_quote(value)}: value must be empty when "
                          "`operator` is 'Exists'")
        elif op not in ("", "Equal", "Exists", "Lt", "Gt"):
            errors.append(f'{at}.operator: Unsupported value: {manifests.go_quote(op)}: supported values: "Equal", "Exists"')
        if effect and effect not in _EFFECTS:
            errors.append(f'{at}.effect: Unsupported value: {manifests.go_quote(effect)}: supported values: '
                          '"NoSchedule", "PreferNoSchedule", "NoExecute"')
        if errors:
            yield base.emit(doc, path, "gpu-tolerations/invalid", index=index, owner=pod.owner,
                            api=manifests.invalid(pod.kind, pod.name, errors))


def _fleet(doc: source.Document, pod: manifests.PodSpecAt, fleet: context.FleetFacts) -> Iterator[findings.Finding]:
    needs = placement.needs_of(pod)
    wanted = {k: v for k, v in needs.resources.items() if v > 0}
    if not wanted:
        return
    candidates = [n for n in fleet.nodes if needs.resources_fit(n)]
    if not candidates:
        return  # gpu-resource-name / gpu-capacity explain this
    selected = [n for n in candidates if needs.labels_match(n)] or candidates
    if any(not needs.untolerated(n) for n in selected):
        return
    blocking = sorted({t for n in selected for t in needs.untolerated(n)})
    taint = blocking[0]
    variant = _variant(needs, taint)
    closest = _closest(needs, taint)
    yield base.emit(doc, _where(pod, variant, closest), variant, owner=pod.owner, taint=str(taint),
                    taint_key=taint.key, taint_value=taint.value, taint_effect=taint.effect,
                    nodes=", ".join(n.name for n in selected), resources=", ".join(sorted(wanted)),
                    **_fields(closest))


# The field of the closest toleration that a learner has to change, per variant.
_FIELD = {"gpu-tolerations/wrong-key": "key", "gpu-tolerations/wrong-effect": "effect",
          "gpu-tolerations/wrong-value": "value"}


def _where(pod: manifests.PodSpecAt, variant: str, closest: placement.Toleration | None) -> source.YPath:
    if closest is None:
        return pod.path + ("tolerations",) if "tolerations" in pod.spec else pod.path
    item = pod.path + ("tolerations", closest.index)
    field = _FIELD.get(variant)
    return item + (field,) if field else item


def _variant(needs: placement.PodNeeds, taint: context.Taint) -> str:
    same_key = [t for t in needs.tolerations if t.key == taint.key]
    if not needs.tolerations:
        return "gpu-tolerations/missing"
    if not same_key:
        return "gpu-tolerations/wrong-key"
    tol = same_key[0]
    if tol.effect and tol.effect != taint.effect:
        return "gpu-tolerations/wrong-effect"
    if tol.operator in ("", "Equal") and not tol.value:
        return "gpu-tolerations/equal-without-value"
    return "gpu-tolerations/wrong-value"


def _closest(needs: placement.PodNeeds, taint: context.Taint) -> placement.Toleration | None:
    """The toleration the learner most likely meant for this taint: same key, else the most similar key."""
    same_key = [t for t in needs.tolerations if t.key == taint.key]
    if same_key:
        return same_key[0]
    close = strict.closest(taint.key, [t.key for t in needs.tolerations], cutoff=0.0)
    return next((t for t in needs.tolerations if close and t.key == close), None)


def _fields(tol: placement.Toleration | None) -> dict[str, object]:
    if tol is None:
        return {"index": "", "tol_key": "", "tol_value": "", "tol_effect": "", "tol_operator": ""}
    return {"index": tol.index, "tol_key": tol.key or "(empty)", "tol_value": tol.value or "(empty)",
            "tol_effect": tol.effect or "(any)", "tol_operator": tol.operator or "Equal"}
