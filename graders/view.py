"""The seam between outcome checks and where cluster state comes from: a live API server or an evidence bundle.

``ClusterView`` is the one protocol; ``LiveView`` reads through ``cluster.kube.client.Client`` and
``graders.bundle.BundleView`` reads a recorded bundle. Checks and the explainer take a view and never know
which one they got, except that only a live view is worth polling (``view.live``).

Objects come back as the API's own JSON (``Obj``). A view returns lists in a stable order (by namespace and
name; events oldest first) so that the same state gives the same results from either kind of view. A
namespace the view cannot show (outside a bundle's scope) raises ``OutOfScope``; a kind the cluster does not
serve (no DRA API, no GPU Operator CRD) reads as empty. This module holds no wording for learners.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from cluster import errors, gpustack
from cluster.kube import client as kube
from graders.manifests import as_list, as_str

log = logging.getLogger(__name__)

Obj = dict[str, Any]

RESOURCE_API = "/apis/resource.k8s.io/v1"


class OutOfScope(errors.CourseError):
    """A check asked a view about a namespace it does not hold (a bundle recorded without it)."""

    def __init__(self, namespace: str, scope: Sequence[str]) -> None:
        listed = ", ".join(scope) or "none"
        super().__init__(f"the evidence bundle does not include namespace {namespace!r} (it holds: {listed})",
                         hint="record the bundle again with this namespace in scope")
        self.namespace = namespace


class ClusterView(Protocol):
    """Read-only cluster state for checks. ``namespace=None`` means every namespace the view holds."""

    @property
    def live(self) -> bool:
        """True when state can change between two reads (worth polling)."""
        ...

    def nodes(self) -> list[Obj]: ...
    def node(self, name: str) -> Obj | None: ...
    def pods(self, namespace: str | None) -> list[Obj]: ...
    def pod(self, namespace: str, name: str) -> Obj | None: ...
    def events(self, namespace: str, involved: str | None = None) -> list[Obj]: ...
    def resource_claims(self, namespace: str | None) -> list[Obj]: ...
    def resource_slices(self) -> list[Obj]: ...
    def device_classes(self) -> list[Obj]: ...
    def configmaps(self, namespace: str) -> list[Obj]: ...
    def cluster_policy(self) -> Obj | None: ...
    def resource_quotas(self, namespace: str) -> list[Obj]: ...


def dig(obj: object, *keys: str) -> Any:
    """``obj[k1][k2]...`` or None where a level is missing or not a mapping (hostile data never raises)."""
    node: Any = obj
    for key in keys:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def name_of(obj: object) -> str:
    return as_str(dig(obj, "metadata", "name"))


def namespace_of(obj: object) -> str:
    return as_str(dig(obj, "metadata", "namespace"))


def by_name(items: list[Any]) -> list[Obj]:
    """Mappings only, sorted by (namespace, name)."""
    return sorted((i for i in items if isinstance(i, dict)), key=lambda o: (namespace_of(o), name_of(o)))


def event_time(event: Obj) -> str:
    """The most recent time an event was seen (RFC 3339 strings sort in time order)."""
    series = as_str(dig(event, "series", "lastObservedTime"))
    return series or as_str(event.get("lastTimestamp")) or as_str(event.get("eventTime")) or \
        as_str(dig(event, "metadata", "creationTimestamp"))


def chronological(events: list[Any]) -> list[Obj]:
    """Events oldest first; ties broken by content so the order is stable."""
    return sorted((e for e in events if isinstance(e, dict)),
                  key=lambda e: (event_time(e), as_str(e.get("reason")), as_str(e.get("message")), name_of(e)))


class LiveView:
    """A view over a running API server. Cheap: every call is one GET."""

    def __init__(self, client: kube.Client) -> None:
        self.client = client

    @property
    def live(self) -> bool:
        return True

    def _items(self, path: str, **params: Any) -> list[Any]:
        try:
            return as_list(self.client.get(path, **params).get("items"))
        except errors.NotFound:  # the API group is not served (no DRA, no operator CRD)
            return []

    def _one(self, path: str) -> Obj | None:
        try:
            return self.client.get(path)
        except errors.NotFound:
            return None

    def nodes(self) -> list[Obj]:
        return by_name(self._items("/api/v1/nodes"))

    def node(self, name: str) -> Obj | None:
        return self._one(f"/api/v1/nodes/{name}") if name else None

    def pods(self, namespace: str | None) -> list[Obj]:
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        return by_name(self._items(path))

    def pod(self, namespace: str, name: str) -> Obj | None:
        return self._one(f"/api/v1/namespaces/{namespace}/pods/{name}") if name else None

    def events(self, namespace: str, involved: str | None = None) -> list[Obj]:
        params = {"fieldSelector": f"involvedObject.name={involved}"} if involved else {}
        return chronological(self._items(f"/api/v1/namespaces/{namespace}/events", **params))

    def resource_claims(self, namespace: str | None) -> list[Obj]:
        path = f"{RESOURCE_API}/namespaces/{namespace}/resourceclaims" if namespace else f"{RESOURCE_API}/resourceclaims"
        return by_name(self._items(path))

    def resource_slices(self) -> list[Obj]:
        return by_name(self._items(f"{RESOURCE_API}/resourceslices"))

    def device_classes(self) -> list[Obj]:
        return by_name(self._items(f"{RESOURCE_API}/deviceclasses"))

    def configmaps(self, namespace: str) -> list[Obj]:
        return by_name(self._items(f"/api/v1/namespaces/{namespace}/configmaps"))

    def cluster_policy(self) -> Obj | None:
        items = by_name(self._items(gpustack.names.POLICY_PATH))
        return items[0] if items else None

    def resource_quotas(self, namespace: str) -> list[Obj]:
        return by_name(self._items(f"/api/v1/namespaces/{namespace}/resourcequotas"))
