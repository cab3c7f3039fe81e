"""Cluster operations every backend shares: node summaries, waiting for readiness, tenant access.

Tenant kubeconfigs use a service account per tenant namespace with a Role that can manage workloads there
(never Secrets) and read-only access to nodes and the cluster-scoped objects GPU labs need to look at. The
namespace is set up as the Kubernetes multi-tenancy guidance asks (kubernetes.io/docs/concepts/security/
multi-tenancy/, "Quotas" and "Pod Security"): Pod Security ``restricted`` enforced through the namespace's
labels (kubernetes.io/docs/concepts/security/pod-security-admission/), a ResourceQuota and a LimitRange owned
by the admin (the tenant may read them, never change them), and the critical priority classes rationed to
nothing by a quota scoped to them (kubernetes.io/docs/concepts/policy/resource-quotas/, "Limit Priority Class
consumption by default"). An existing namespace is never taken over: only one carrying gpulab's tenant label.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster import errors
from cluster.kube import kubeconfig
from cluster.kube.client import Client

log = logging.getLogger(__name__)

TENANT_SA = "tenant"
TENANT_ROLE = "gpulab:tenant"
NODE_READER = "gpulab:tenant-cluster-reader"
TENANT_LABEL = "gpulab.dev/tenant"  # gpulab's marker: only namespaces carrying it are ever reused as tenants
TENANT_QUOTA = "gpulab-tenant"
TENANT_LIMITS = "gpulab-tenant"
CRITICAL_QUOTA = "gpulab-tenant-critical-priority"
CRITICAL_CLASSES = ("system-node-critical", "system-cluster-critical")
POD_SECURITY = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "audit", "warn")} | {
    f"pod-security.kubernetes.io/{mode}-version": "latest" for mode in ("enforce", "audit", "warn")}
# What one tenant may use at most: enough for every lab's pods, never the whole cluster.
TENANT_HARD = {"pods": "50", "requests.cpu": "16", "requests.memory": "64Gi", "limits.cpu": "32",
               "limits.memory": "128Gi", "requests.nvidia.com/gpu": "8"}
TENANT_CONTAINER_LIMITS = {"default": {"cpu": "500m", "memory": "512Mi"},
                           "defaultRequest": {"cpu": "100m", "memory": "128Mi"},
                           "max": {"cpu": "8", "memory": "32Gi"}}

_TENANT_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["pods", "pods/log", "configmaps", "services", "persistentvolumeclaims",
                                      "serviceaccounts"],
     "verbs": ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]},
    # ``kubectl exec`` into the tenant's own pods (a WebSocket exec is authorized as get, and as create too).
    {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["get", "create"]},
    # The quota and the limits are the admin's: a tenant reads them and cannot change or delete them.
    {"apiGroups": [""], "resources": ["events", "resourcequotas", "limitranges", "pods/status"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["apps"], "resources": ["deployments", "replicasets", "statefulsets", "daemonsets"],
     "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
    {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"],
     "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims", "resourceclaimtemplates"],
     "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["get", "list", "watch"]},
]
_READER_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices", "deviceclasses"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": ["get", "list", "watch"]},
]


@dataclass(frozen=True)
class NodeStatus:
    """One node as `gpulab status` shows it (the backends' ``ClusterStatus.nodes``)."""

    name: str
    ready: bool
    capacity: dict[str, str]
    allocatable: dict[str, str]
    taints: list[str]
    labels: dict[str, str]
    heartbeat: bool = True


def node_summary(node: dict[str, Any]) -> NodeStatus:
    meta, status = node.get("metadata", {}), node.get("status", {})
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions", []))
    taints = [f"{t['key']}{'=' + t['value'] if t.get('value') else ''}:{t['effect']}"
              for t in node.get("spec", {}).get("taints", [])]
    labels = meta.get("labels", {})
    heartbeat = meta.get("annotations", {}).get("gpulab.dev/heartbeat") != "stopped"
    return NodeStatus(meta.get("name", "?"), ready, dict(status.get("capacity", {})),
                      dict(status.get("allocatable", {})), taints, dict(labels), heartbeat)


def list_nodes(client: Client) -> list[NodeStatus]:
    return [node_summary(n) for n in client.get("/api/v1/nodes").get("items", [])]


def _ready_untainted(node: dict[str, Any]) -> bool:
    s = node_summary(node)
    return s.ready and not any(t.startswith("node.kubernetes.io/not-ready") for t in s.taints)


def wait_nodes_ready(client: Client, names: set[str], timeout: float) -> list[NodeStatus]:
    """Wait until every named node is Ready and carries no not-ready taint; raise with the stragglers.

    One list, then a watch from its resourceVersion: polling a list of a 1,000-node fleet several times a second
    would cost the API server and this process more CPU than the nodes themselves.
    """
    deadline = time.monotonic() + timeout
    good: set[str] = set()
    rv: str | None = None
    while True:
        if rv is None:
            listing = client.get("/api/v1/nodes")
            good = {n["metadata"]["name"] for n in listing.get("items", []) if _ready_untainted(n)}
            rv = listing.get("metadata", {}).get("resourceVersion")
        pending = names - good
        remaining = deadline - time.monotonic()
        if not pending:
            return list_nodes(client)
        if remaining <= 0:
            sample = ", ".join(sorted(pending)[:5])
            raise errors.ClusterError(
                f"{len(pending)} node(s) not Ready after {timeout:.0f} s (e.g. {sample})",
                hint="gpulab status; the node agent's log is in the state dir's logs/node-agent.log",
            )
        try:
            for event in client.watch("/api/v1/nodes", resource_version=rv, timeout_seconds=max(1, int(remaining))):
                obj = event.get("object", {})
                if event.get("type") == "ERROR":  # e.g. 410 Gone: the resourceVersion is too old; list again
                    rv = None
                    break
                rv = obj.get("metadata", {}).get("resourceVersion", rv)
                name = obj.get("metadata", {}).get("name", "")
                if event.get("type") in ("ADDED", "MODIFIED") and _ready_untainted(obj):
                    good.add(name)
                else:
                    good.discard(name)
                if not names - good or time.monotonic() > deadline:
                    break
        except errors.ApiError:
            rv = None  # the watch was refused (an expired resourceVersion): list again
            time.sleep(0.2)
        except errors.ClusterError as exc:
            # The stream broke part-way (the server closed the connection mid-response): a watch may end at any
            # time, so list again. A server that is really gone fails that list, with its own message.
            log.debug("watch of nodes broke (%s); listing again", exc)
            rv = None
            time.sleep(0.5)


def _ensure(client: Client, path: str, body: dict[str, Any]) -> None:
    name = body["metadata"]["name"]
    try:
        client.create(path, body)
    except errors.Conflict:
        client.replace(f"{path}/{name}", {**client.get(f"{path}/{name}"), **{k: v for k, v in body.items()
                                                                             if k != "metadata"}})


def ensure_tenant_rbac(client: Client) -> None:
    _ensure(client, "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": TENANT_ROLE}, "rules": _TENANT_RULES})
    _ensure(client, "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": NODE_READER}, "rules": _READER_RULES})


def tenant_objects(namespace: str) -> list[tuple[str, dict[str, Any]]]:
    """(collection path, object) for everything a tenant namespace holds besides its service account."""
    ns_path = f"/api/v1/namespaces/{namespace}"
    return [
        (f"{ns_path}/resourcequotas",
         {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": TENANT_QUOTA, "namespace": namespace},
          "spec": {"hard": dict(TENANT_HARD)}}),
        (f"{ns_path}/resourcequotas",
         {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": CRITICAL_QUOTA, "namespace": namespace},
          "spec": {"hard": {"pods": "0"}, "scopeSelector": {"matchExpressions": [
              {"scopeName": "PriorityClass", "operator": "In", "values": list(CRITICAL_CLASSES)}]}}}),
        (f"{ns_path}/limitranges",
         {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": TENANT_LIMITS, "namespace": namespace},
          "spec": {"limits": [{"type": "Container", **TENANT_CONTAINER_LIMITS}]}}),
    ]


def _tenant_namespace(client: Client, namespace: str) -> None:
    """Create the tenant namespace, or bring ours up to date; refuse one gpulab did not make as a tenant's."""
    path = f"/api/v1/namespaces/{namespace}"
    labels = {TENANT_LABEL: "true", **POD_SECURITY}
    try:
        found = client.get(path)
    except errors.NotFound:
        client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": namespace, "labels": labels}})
        return
    if (found.get("metadata", {}).get("labels") or {}).get(TENANT_LABEL) != "true":
        raise errors.ConfigError("tenant", [
            f"namespace {namespace!r} already exists and is not a gpulab tenant namespace (it has no "
            f"{TENANT_LABEL}=true label): gpulab does not take over a namespace, its service accounts or its "
            "workloads"],
            hint=f"pick a new name: gpulab kubeconfig --tenant <new-namespace> (or, if you own {namespace} and mean "
            f"to hand it over: kubectl label namespace {namespace} {TENANT_LABEL}=true)")
    if found.get("status", {}).get("phase") == "Terminating":
        raise errors.ClusterError(f"tenant namespace {namespace} is being deleted", hint="wait a few seconds, then retry")
    client.patch(path, {"metadata": {"labels": labels}})


def tenant_kubeconfig(client: Client, namespace: str, dest: Path, *, server: str, ca_file: Path) -> Path:
    """Create (idempotently) a tenant namespace, its guard rails, service account and bindings; write its
    kubeconfig. An existing namespace without gpulab's tenant label is refused, never adopted."""
    if not namespace or len(namespace) > 63 or not namespace.replace("-", "").isalnum() or namespace != namespace.lower():
        raise errors.ConfigError("tenant", [f"namespace {namespace!r} is not a valid DNS label"])
    if namespace.startswith("kube-") or namespace in ("default", "gpu-operator"):
        raise errors.ConfigError("tenant", [f"namespace {namespace!r} is reserved; pick a tenant namespace"])
    _tenant_namespace(client, namespace)
    ensure_tenant_rbac(client)
    for path, body in tenant_objects(namespace):
        _ensure(client, path, body)
    for path, body in (
        (f"/api/v1/namespaces/{namespace}/serviceaccounts",
         {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": TENANT_SA, "namespace": namespace}}),
        (f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
         {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
          "metadata": {"name": TENANT_ROLE, "namespace": namespace},
          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": TENANT_ROLE},
          "subjects": [{"kind": "ServiceAccount", "name": TENANT_SA, "namespace": namespace}]}),
        ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
         {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
          "metadata": {"name": f"{NODE_READER}:{namespace}"},
          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NODE_READER},
          "subjects": [{"kind": "ServiceAccount", "name": TENANT_SA, "namespace": namespace}]}),
    ):
        try:
            client.create(path, body)
        except errors.Conflict:
            pass
    token = client.create(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{TENANT_SA}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
         "spec": {"expirationSeconds": 30 * 24 * 3600}},
    )["status"]["token"]
    return kubeconfig.write(dest, server=server, ca_file=ca_file, user=f"tenant-{namespace}", token=token,
                            namespace=namespace)
