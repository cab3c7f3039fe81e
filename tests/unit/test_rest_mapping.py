"""REST paths come from the API server's discovery answers, cached per group version; CRDs resolve like any kind."""

from __future__ import annotations

from collections.abc import Mapping as MappingT
from typing import Any

import pytest

from cluster import errors
from cluster.kube import restmapper
from labs import kubeapply, steps

pytestmark = pytest.mark.unit

SERVED: dict[str, dict[str, Any]] = {
    "v1": {"resources": [{"name": "pods", "kind": "Pod", "namespaced": True},
                         {"name": "pods/status", "kind": "Pod", "namespaced": True},
                         {"name": "endpoints", "kind": "Endpoints", "namespaced": True},
                         {"name": "nodes", "kind": "Node", "namespaced": False}]},
    "resource.k8s.io/v1": {"resources": [{"name": "resourceslices", "kind": "ResourceSlice", "namespaced": False},
                                         {"name": "resourceclaims", "kind": "ResourceClaim", "namespaced": True}]},
    "monitoring.coreos.com/v1": {"resources": [{"name": "servicemonitors", "kind": "ServiceMonitor",
                                                "namespaced": True}]},
}


class Server:
    """Discovery answers of a server, counting the requests; ``install`` serves a new group version (a CRD)."""

    def __init__(self) -> None:
        self.served = dict(SERVED)
        self.asked: list[str] = []

    def get(self, path: str) -> MappingT[str, Any]:
        self.asked.append(path)
        gv = path.removeprefix("/api/").removeprefix("/apis/")
        if gv not in self.served:
            raise errors.NotFound(404, "NotFound", "the server could not find the requested resource")
        return self.served[gv]


def test_paths_of_core_grouped_and_custom_kinds() -> None:
    mapper = restmapper.live(Server().get)
    assert mapper.path("v1", "Pod", "p", "lab") == "/api/v1/namespaces/lab/pods/p"
    assert mapper.path("v1", "Pod") == "/api/v1/namespaces/default/pods"
    assert mapper.path("v1", "Endpoints", "e") == "/api/v1/namespaces/default/endpoints/e"  # no "endpointses"
    assert mapper.path("v1", "Node", "n", "ignored") == "/api/v1/nodes/n"
    assert mapper.path("resource.k8s.io/v1", "ResourceSlice", "s") == "/apis/resource.k8s.io/v1/resourceslices/s"
    assert (mapper.path("monitoring.coreos.com/v1", "ServiceMonitor", "m", "obs")
            == "/apis/monitoring.coreos.com/v1/namespaces/obs/servicemonitors/m")


def test_each_group_version_is_asked_once_and_again_only_for_a_missing_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    server = Server()
    mapper = restmapper.live(server.get)
    for _ in range(3):
        mapper.path("v1", "Pod", "p")
        mapper.path("v1", "Node", "n")
    assert server.asked == ["/api/v1"]
    assert mapper.lookup("nvidia.com/v1", "ClusterPolicy") is None
    assert mapper.lookup("nvidia.com/v1", "ClusterPolicy") is None  # asked a moment ago: not again at once
    assert server.asked == ["/api/v1", "/apis/nvidia.com/v1"]
    # The operator installs its CRD: a later miss asks again and the new kind resolves.
    server.served["nvidia.com/v1"] = {"resources": [{"name": "clusterpolicies", "kind": "ClusterPolicy",
                                                     "namespaced": False}]}
    later = restmapper.time.monotonic() + restmapper.REFRESH_S + 1
    monkeypatch.setattr(restmapper.time, "monotonic", lambda: later)
    assert mapper.path("nvidia.com/v1", "ClusterPolicy", "cluster-policy") == \
        "/apis/nvidia.com/v1/clusterpolicies/cluster-policy"


def test_a_kind_the_server_does_not_serve_is_a_clear_error() -> None:
    mapper = restmapper.live(Server().get)
    with pytest.raises(errors.ConfigError, match='serves no kind "Podd" in version "v1"'):
        mapper.path("v1", "Podd", "p")


def test_the_recorded_mapping_covers_the_shipped_server_and_our_crds() -> None:
    mapper = restmapper.recorded()
    assert mapper.path("nvidia.com/v1", "ClusterPolicy", "cluster-policy") == \
        "/apis/nvidia.com/v1/clusterpolicies/cluster-policy"
    assert mapper.path("scheduling.k8s.io/v1", "PriorityClass", "urgent") == \
        "/apis/scheduling.k8s.io/v1/priorityclasses/urgent"
    assert mapper.path("resource.k8s.io/v1", "DeviceClass", "gpu") == "/apis/resource.k8s.io/v1/deviceclasses/gpu"
    assert mapper.path("v1", "ResourceQuota", "q", "lab") == "/api/v1/namespaces/lab/resourcequotas/q"
    for gv, kind in [("v1", "Namespace"), ("resource.k8s.io/v1", "ResourceSlice"), ("nvidia.com/v1", "ClusterPolicy"),
                     ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("storage.k8s.io/v1", "StorageClass")]:
        assert kubeapply.cluster_scoped(gv, kind), kind
    assert not kubeapply.cluster_scoped("v1", "ConfigMap")
    assert mapper.lookup("v1", "Podd") is None and mapper.lookup("v1", "Pod") is not None  # a miss keeps the rest
    # A kind the shipped server does not serve counts as cluster-scoped: the attach guard errs on refusing.
    assert kubeapply.cluster_scoped("monitoring.coreos.com/v1", "ServiceMonitor")
    assert steps.object_change({"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
                                "metadata": {"name": "m", "namespace": "obs"}})
