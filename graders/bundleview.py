"""``BundleView``: an evidence bundle served through the ``ClusterView`` protocol, for offline grading.

It answers exactly what a ``LiveView`` would have answered when the bundle was recorded, for the namespaces
in the bundle's scope; asking about another namespace raises ``view.OutOfScope`` (checks turn that into a
failed check). Across all namespaces (``namespace=None``) it also returns the sketches of pods and claims
outside the scope, which is what the explainer needs to count what each node already gives away.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cluster import gpustack
from graders import view
from graders.manifests import as_list, as_str
from graders.view import Obj, dig, name_of, namespace_of


class BundleView:
    def __init__(self, cluster: Mapping[str, Any], namespaces: Iterable[str]) -> None:
        """``cluster`` and ``namespaces`` of a validated bundle (``graders.bundle.Bundle.view``)."""
        self.cluster = cluster
        self._scope = frozenset(namespaces)

    @property
    def live(self) -> bool:
        return False

    def _list(self, key: str) -> list[Obj]:
        return [o for o in as_list(self.cluster.get(key)) if isinstance(o, dict)]

    def _in_scope(self, namespace: str, *, operator_too: bool = False) -> None:
        if namespace in self._scope or (operator_too and namespace == gpustack.names.NAMESPACE):
            return
        raise view.OutOfScope(namespace, sorted(self._scope))

    def _namespaced(self, key: str, other: str | None, namespace: str | None) -> list[Obj]:
        if namespace is None:
            items = self._list(key) + (self._list(other) if other else [])
            return sorted(items, key=lambda o: (namespace_of(o), name_of(o)))
        self._in_scope(namespace)
        return [o for o in self._list(key) if namespace_of(o) == namespace]

    def nodes(self) -> list[Obj]:
        return self._list("nodes")

    def node(self, name: str) -> Obj | None:
        return next((n for n in self._list("nodes") if name_of(n) == name), None)

    def pods(self, namespace: str | None) -> list[Obj]:
        return self._namespaced("pods", "otherPods", namespace)

    def pod(self, namespace: str, name: str) -> Obj | None:
        return next((p for p in self.pods(namespace) if name_of(p) == name), None)

    def events(self, namespace: str, involved: str | None = None) -> list[Obj]:
        self._in_scope(namespace)
        return [e for e in self._list("events") if namespace_of(e) == namespace
                and (involved is None or as_str(dig(e, "involvedObject", "name")) == involved)]

    def resource_claims(self, namespace: str | None) -> list[Obj]:
        return self._namespaced("resourceClaims", "otherClaims", namespace)

    def resource_slices(self) -> list[Obj]:
        return self._list("resourceSlices")

    def device_classes(self) -> list[Obj]:
        return self._list("deviceClasses")

    def configmaps(self, namespace: str) -> list[Obj]:
        self._in_scope(namespace, operator_too=True)
        return [c for c in self._list("configMaps") if namespace_of(c) == namespace]

    def cluster_policy(self) -> Obj | None:
        policy: Any = self.cluster.get("clusterPolicy")
        return policy if isinstance(policy, dict) else None

    def resource_quotas(self, namespace: str) -> list[Obj]:
        self._in_scope(namespace)
        return [q for q in self._list("resourceQuotas") if namespace_of(q) == namespace]
