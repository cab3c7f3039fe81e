"""Why a node cannot take a pod, computed from the pod and node objects themselves (for explanation only).

For each node this runs the default scheduler profile's filters that a GPU course meets, in the scheduler's
order: NodeUnschedulable, TaintToleration, NodeAffinity (nodeSelector and required node affinity),
NodeResourcesFit (pod count, cpu, memory, extended resources: allocatable minus what the node's unfinished
pods request) and DynamicResources (reasons from ``graders.dra_fit``). Every failing filter is reported, not only the
first, and each reason carries the scheduler's own phrase so the explainer can compare our view with the
scheduler's counts. This never decides placement and never raises on odd objects. Wording lives in
``graders.explain_messages``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType

from cluster import quantity
from graders import context, placement, schedmsg
from graders.manifests import as_list, as_map, as_str
from graders.view import Obj, dig, name_of

POOL_LABEL = "gpulab.dev/pool"
_UNSCHEDULABLE_TAINT = context.Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
_BINARY = frozenset({"memory", "ephemeral-storage"})


@dataclass(frozen=True)
class Reason:
    """One filter that rejects the node. ``facts`` feed the wording."""

    code: str  # unschedulable | taint | selector | affinity | too-many-pods | insufficient | dra-* (see dra_fit)
    scheduler: str  # the scheduler's phrase, as counted in FailedScheduling
    stage: int  # position of the filter in the scheduler's order (lower runs first)
    facts: Mapping[str, str] = field(default_factory=dict)
    certain: bool = True  # False where we could only infer the reason (CEL we cannot evaluate)


@dataclass(frozen=True)
class NodeFit:
    node: str
    pool: str
    reasons: tuple[Reason, ...]

    @property
    def fits(self) -> bool:
        return not self.reasons

    @property
    def primary(self) -> tuple[Reason, ...]:
        """The reasons the scheduler reports for this node: those of the first filter that failed."""
        if not self.reasons:
            return ()
        first = min(r.stage for r in self.reasons)
        return tuple(r for r in self.reasons if r.stage == first)


# -- pod requests ---------------------------------------------------------------------------------------

def _amount(raw: object) -> Fraction:
    try:
        return quantity.parse(raw).value
    except quantity.QuantityError:
        return Fraction(0)


def _container_requests(container: object) -> dict[str, Fraction]:
    resources = as_map(dig(container, "resources"))
    requests = as_map(resources.get("requests"))
    limits = as_map(resources.get("limits"))
    # The apiserver copies limits into missing requests on Pods; sketches and hand-written objects may lack it.
    merged = {**{k: v for k, v in limits.items()}, **requests}
    return {str(k): _amount(v) for k, v in merged.items()}


def pod_requests(pod: Obj) -> dict[str, Fraction]:
    """What the scheduler charges for a pod: app containers (and sidecars) summed, at least each init container."""
    total: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for container in as_list(dig(pod, "spec", "initContainers")):
        reqs = _container_requests(container)
        if as_str(dig(container, "restartPolicy")) == "Always":
            for k, v in reqs.items():
                total[k] = total.get(k, Fraction(0)) + v
        else:
            for k, v in reqs.items():
                init_peak[k] = max(init_peak.get(k, Fraction(0)), v + total.get(k, Fraction(0)))
    for container in as_list(dig(pod, "spec", "containers")):
        for k, v in _container_requests(container).items():
            total[k] = total.get(k, Fraction(0)) + v
    out = {k: max(total.get(k, Fraction(0)), init_peak.get(k, Fraction(0))) for k in set(total) | set(init_peak)}
    for k, v in as_map(dig(pod, "spec", "overhead")).items():
        out[str(k)] = out.get(str(k), Fraction(0)) + _amount(v)
    return {k: v for k, v in sorted(out.items()) if v > 0}


def is_active(pod: Obj) -> bool:
    return as_str(dig(pod, "status", "phase")) not in ("Succeeded", "Failed")


def show(resource: str, value: Fraction) -> str:
    fmt = "BinarySI" if resource in _BINARY or resource.startswith("hugepages-") else "DecimalSI"
    return quantity.canonical(quantity.Quantity(value, fmt))


# -- filters --------------------------------------------------------------------------------------------

def tolerations_of(pod: Obj) -> tuple[placement.Toleration, ...]:
    return tuple(placement.Toleration(i, as_str(dig(t, "key")), as_str(dig(t, "operator")), as_str(dig(t, "value")),
                                      as_str(dig(t, "effect")))
                 for i, t in enumerate(as_list(dig(pod, "spec", "tolerations"))))


def taints_of(node: Obj) -> tuple[context.Taint, ...]:
    return tuple(context.Taint(as_str(dig(t, "key")), as_str(dig(t, "value")), as_str(dig(t, "effect")))
                 for t in as_list(dig(node, "spec", "taints")) if isinstance(t, dict))


def _unschedulable(pod: Obj, node: Obj) -> Iterable[Reason]:
    if dig(node, "spec", "unschedulable") is True and not any(t.tolerates(_UNSCHEDULABLE_TAINT) for t in tolerations_of(pod)):
        yield Reason("unschedulable", schedmsg.UNSCHEDULABLE, 0)


def _taints(pod: Obj, node: Obj) -> Iterable[Reason]:
    tolerations = tolerations_of(pod)
    for taint in taints_of(node):
        if taint.effect not in ("NoSchedule", "NoExecute") or any(t.tolerates(taint) for t in tolerations):
            continue
        near = [t for t in tolerations if t.key == taint.key]
        facts = {"taint": str(taint), "key": taint.key, "value": taint.value, "effect": taint.effect,
                 "near": "; ".join(_toleration_text(t) for t in near)}
        yield Reason("taint-near-miss" if near else "taint", schedmsg.TAINTS, 1, MappingProxyType(facts))


def _toleration_text(t: placement.Toleration) -> str:
    op = t.operator or "Equal"
    value = f", value {t.value!r}" if op == "Equal" else ""
    return f"key {t.key!r}, operator {op}{value}, effect {t.effect or 'any'}"


def _terms(pod: Obj) -> list[list[placement.Requirement]] | None:
    required = dig(pod, "spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(required, dict):
        return None
    terms = []
    for term in as_list(required.get("nodeSelectorTerms")):
        reqs = []
        for group in ("matchExpressions", "matchFields"):
            for expr in as_list(dig(term, group)):
                values = tuple(str(v) for v in as_list(dig(expr, "values")))
                key = as_str(dig(expr, "key"))
                reqs.append(placement.Requirement(("field:" if group == "matchFields" else "") + key,
                                                  as_str(dig(expr, "operator")), values))
        terms.append(reqs)
    return terms


def _affinity(pod: Obj, node: Obj) -> Iterable[Reason]:
    labels = {str(k): as_str(v) for k, v in as_map(dig(node, "metadata", "labels")).items()}
    for key, want in sorted(as_map(dig(pod, "spec", "nodeSelector")).items()):
        if labels.get(str(key)) != as_str(want):
            found = labels.get(str(key))
            facts = {"key": str(key), "want": as_str(want), "found": found if found is not None else ""}
            yield Reason("selector-missing" if found is None else "selector", schedmsg.AFFINITY, 2,
                         MappingProxyType(facts))
    terms = _terms(pod)
    if terms is None:
        return
    subject = {**labels, "field:metadata.name": name_of(node)}
    if not any(term and all(r.matches(subject) for r in term) for term in terms):
        shown = " OR ".join(" AND ".join(f"{r.key.removeprefix('field:')} {r.operator} {list(r.values)}" for r in t)
                            for t in terms) or "(no terms)"
        yield Reason("affinity", schedmsg.AFFINITY, 2, MappingProxyType({"terms": shown}))


def _resources(pod: Obj, node: Obj, others: list[Obj]) -> Iterable[Reason]:
    allocatable = {str(k): _amount(v) for k, v in as_map(dig(node, "status", "allocatable")).items()}
    on_node = [p for p in others if as_str(dig(p, "spec", "nodeName")) == name_of(node) and is_active(p)]
    if len(on_node) + 1 > allocatable.get("pods", Fraction(0)):
        yield Reason("too-many-pods", schedmsg.TOO_MANY_PODS, 4,
                     MappingProxyType({"pods": str(len(on_node)), "max": show("pods", allocatable.get("pods", Fraction(0)))}))
    used: dict[str, Fraction] = {}
    for other in on_node:
        for k, v in pod_requests(other).items():
            used[k] = used.get(k, Fraction(0)) + v
    for resource, want in pod_requests(pod).items():
        if resource == "pods":
            continue
        have, taken = allocatable.get(resource, Fraction(0)), used.get(resource, Fraction(0))
        if want > have - taken:
            facts = {"resource": resource, "want": show(resource, want), "allocatable": show(resource, have),
                     "used": show(resource, taken), "free": show(resource, max(Fraction(0), have - taken)),
                     "capacity": as_str(dig(node, "status", "capacity", resource)) or "0",
                     "kind": "gpu" if resource.startswith("nvidia.com/") else
                             "extended" if "/" in resource else "native"}
            mig_state = as_str(dig(node, "metadata", "labels", "nvidia.com/mig.config.state"))
            if resource.startswith("nvidia.com/") and mig_state in ("failed", "pending"):
                facts.update(mig_state=mig_state,
                             mig_config=as_str(dig(node, "metadata", "labels", "nvidia.com/mig.config")) or "-")
            yield Reason("insufficient", schedmsg.INSUFFICIENT + resource, 4, MappingProxyType(facts))


def evaluate(pod: Obj, nodes: Iterable[Obj], pods: list[Obj],
             extra: Callable[[Obj], Iterable[Reason]] | None = None) -> tuple[NodeFit, ...]:
    """The verdict for every node. ``pods`` are all pods the view holds (the pod itself is skipped); ``extra``
    adds reasons from other filters (``graders.dra_fit.DraState.reasons``)."""
    me = (as_str(dig(pod, "metadata", "namespace")), name_of(pod))
    others = [p for p in pods if (as_str(dig(p, "metadata", "namespace")), name_of(p)) != me]
    out = []
    for node in nodes:
        reasons = [*_unschedulable(pod, node), *_taints(pod, node), *_affinity(pod, node),
                   *_resources(pod, node, others), *(extra(node) if extra else ())]
        out.append(NodeFit(name_of(node), as_str(dig(node, "metadata", "labels", POOL_LABEL)) or "-",
                           tuple(sorted(reasons, key=lambda r: r.stage))))
    return tuple(out)
