"""Could this pod land on some node of the fleet? The scheduler's filters that static rules can judge.

Only the filters that depend on the manifest and the fleet are modelled: extended-resource counts (per
node capacity, not current usage), nodeSelector, required node affinity, and taints with NoSchedule or
NoExecute effects. Matching follows the scheduler's own rules (``ToleratesTaint``, label selector
operators). Nothing here reports; rules decide what to say.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from cluster import quantity
from graders import context, manifests

# Extended resources these rules care about: accelerators from the vendors a course may meet.
ACCELERATOR_DOMAINS = ("nvidia.com", "amd.com", "habana.ai", "intel.com", "gpu.intel.com", "xilinx.com")


def is_accelerator(resource: str) -> bool:
    domain, slash, rest = resource.partition("/")
    if not slash:
        return "gpu" in resource.lower()
    return domain.lower() in ACCELERATOR_DOMAINS or "gpu" in rest.lower() or "nvidia" in domain.lower()


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key, "")
        if self.operator == "In":
            return present and value in self.values
        if self.operator == "NotIn":
            return not present or value not in self.values
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if self.operator in ("Gt", "Lt") and present and len(self.values) == 1:
            try:
                left, right = int(value), int(self.values[0])
            except ValueError:
                return False
            return left > right if self.operator == "Gt" else left < right
        return False


@dataclass(frozen=True)
class Toleration:
    index: int
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: context.Taint) -> bool:
        """The scheduler's ``Toleration.ToleratesTaint``."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return False


@dataclass(frozen=True)
class PodNeeds:
    """What a pod asks of the node it runs on."""

    resources: Mapping[str, int]
    node_selector: Mapping[str, str]
    affinity_terms: tuple[tuple[Requirement, ...], ...]  # ORed terms of ANDed requirements
    tolerations: tuple[Toleration, ...]

    def labels_match(self, node: context.NodeFacts) -> bool:
        if any(node.labels.get(k) != v for k, v in self.node_selector.items()):
            return False
        if not self.affinity_terms:
            return True
        return any(all(r.matches(node.labels) for r in term) for term in self.affinity_terms)

    def resources_fit(self, node: context.NodeFacts) -> bool:
        return all(node.resources.get(name, 0) >= count for name, count in self.resources.items() if count > 0)

    def untolerated(self, node: context.NodeFacts) -> tuple[context.Taint, ...]:
        return tuple(
            t for t in node.taints
            if t.effect in ("NoSchedule", "NoExecute") and not any(tol.tolerates(t) for tol in self.tolerations)
        )


def needs_of(pod: manifests.PodSpecAt) -> PodNeeds:
    return PodNeeds(
        resources=_resources(pod),
        node_selector={str(k): v for k, v in manifests.as_map(pod.spec.get("nodeSelector")).items() if isinstance(v, str)},
        affinity_terms=tuple(_terms(pod)),
        tolerations=tuple(_tolerations(pod)),
    )


def container_limits(container: manifests.ContainerAt) -> dict[str, int]:
    """Integer accelerator counts a container asks for (limits, else requests); bad values count as 0."""
    resources = manifests.as_map(container.data.get("resources"))
    out: dict[str, int] = {}
    for field in ("requests", "limits"):
        for name, raw in manifests.as_map(resources.get(field)).items():
            if not is_accelerator(str(name)):
                continue
            try:
                q = quantity.parse(raw)
            except quantity.QuantityError:
                continue
            if q.is_integer and q.value > 0:
                out[str(name)] = int(q.value)
    return out


def _resources(pod: manifests.PodSpecAt) -> dict[str, int]:
    """Sum over app containers, at least the largest init container (the scheduler's effective request)."""
    app: dict[str, int] = {}
    init: dict[str, int] = {}
    for container in manifests.containers(pod):
        target = init if container.group == "initContainers" else app
        for name, count in container_limits(container).items():
            target[name] = max(target.get(name, 0), count) if target is init else target.get(name, 0) + count
    return {k: max(app.get(k, 0), init.get(k, 0)) for k in sorted(set(app) | set(init))}


def _terms(pod: manifests.PodSpecAt) -> Iterator[tuple[Requirement, ...]]:
    affinity = manifests.as_map(manifests.as_map(pod.spec.get("affinity")).get("nodeAffinity"))
    required = manifests.as_map(affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
    for term in manifests.as_list(required.get("nodeSelectorTerms")):
        reqs = []
        for expr in manifests.as_list(manifests.as_map(term).get("matchExpressions")):
            expr = manifests.as_map(expr)
            values = tuple(str(v) for v in manifests.as_list(expr.get("values")) if isinstance(v, (str, int)))
            reqs.append(Requirement(manifests.as_str(expr.get("key")), manifests.as_str(expr.get("operator")), values))
        yield tuple(reqs)


def _tolerations(pod: manifests.PodSpecAt) -> Iterator[Toleration]:
    for index, raw in enumerate(manifests.as_list(pod.spec.get("tolerations"))):
        raw = manifests.as_map(raw)
        yield Toleration(
            index,
            manifests.as_str(raw.get("key")),
            manifests.as_str(raw.get("operator")),
            manifests.as_str(raw.get("value")),
            manifests.as_str(raw.get("effect")),
        )


@dataclass(frozen=True)
class ResourceEntry:
    """One accelerator key under ``resources.limits`` or ``resources.requests`` of a container."""

    container: manifests.ContainerAt
    field: str  # "limits" | "requests"
    name: str
    raw: object

    @property
    def path(self) -> tuple[str | int, ...]:
        return self.container.path + ("resources", self.field, self.name)

    @property
    def api(self) -> str:
        return self.container.api("resources", self.field, manifests.Key(self.name))


def accelerator_entries(container: manifests.ContainerAt) -> Iterator[ResourceEntry]:
    resources = manifests.as_map(container.data.get("resources"))
    for field in ("limits", "requests"):
        for name, raw in manifests.as_map(resources.get(field)).items():
            if is_accelerator(str(name)):
                yield ResourceEntry(container, field, str(name), raw)
