"""Cluster operations every backend shares: node summaries, waiting for readiness, tenant access.

Tenant kubeconfigs use a service account per tenant namespace with a Role that can manage workloads there
(never Secrets) and read-only access to nodes and the cluster-scoped objects GPU labs need to look at.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from cluster import errors
from cluster.backends.base import NodeStatus
from cluster.kube import kubeconfig
from cluster.kube.client import Client

TENANT_SA = "tenant"
TENANT_ROLE = "gpulab:tenant"
NODE_READER = "gpulab:tenant-cluster-reader"

_TENANT_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["pods", "pods/log", "configmaps", "services", "persistentvolumeclaims",
                                      "serviceaccounts", "limitranges"],
     "verbs": ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]},
    {"apiGroups": [""], "resources": ["events", "resourcequotas", "pods/status"], "verbs": ["get", "list", "watch"]},
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


def tenant_kubeconfig(client: Client, namespace: str, dest: Path, *, server: str, ca_file: Path) -> Path:
    """Create (idempotently) a tenant namespace, its service account and bindings; write its kubeconfig."""
    if not namespace or len(namespace) > 63 or not namespace.replace("-", "").isalnum() or namespace != namespace.lower():
        raise errors.ConfigError("tenant", [f"namespace {namespace!r} is not a valid DNS label"])
    if namespace.startswith("kube-") or namespace in ("default", "gpu-operator"):
        raise errors.ConfigError("tenant", [f"namespace {namespace!r} is reserved; pick a tenant namespace"])
    ensure_tenant_rbac(client)
    for path, body in (
        ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": namespace, "labels": {"gpulab.dev/tenant": "true"}}}),
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
