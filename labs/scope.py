"""What a lab may change, put back to its start values (``normalize``) and described for comparison
(``snapshot``).

``normalize`` touches only what the scope names, and writes only where the cluster differs from the start
value, so a lab that was never touched costs a few reads. Namespaces are emptied rather than deleted: a
namespace deletion waits for the namespace controller, emptying takes one request per kind.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from cluster import errors
from cluster.kube.client import Client
from cluster import gpustack
from cluster.gpustack import names
from labs import kubeapply, steps
from labs.spec import Scope

# Namespaced kinds a lab may create, emptied in this order (owners before what they own); their REST paths
# come from the server's discovery (Client.mapper).
NAMESPACED: tuple[tuple[str, str], ...] = (
    ("apps/v1", "Deployment"), ("apps/v1", "ReplicaSet"), ("batch/v1", "Job"), ("v1", "Pod"),
    ("resource.k8s.io/v1", "ResourceClaim"), ("resource.k8s.io/v1", "ResourceClaimTemplate"),
    ("v1", "ResourceQuota"), ("v1", "LimitRange"), ("v1", "Service"), ("v1", "ConfigMap"), ("v1", "Event"),
)
log = logging.getLogger(__name__)
KEEP_CONFIGMAPS = frozenset({"kube-root-ca.crt"})
# How long a reset or stop waits for the MIG manager to apply the baseline layout (it takes a few seconds).
MIG_WAIT_SECONDS = 60.0


# The GPU stack's knobs a lab may turn on any GPU node, and the value each has when nothing turned it.
BASELINE_LABELS: dict[str, str | None] = {
    names.DEVICE_PLUGIN_CONFIG: None, names.DRA_ENABLED: None, names.MIG_CONFIG: "all-disabled"}
BASELINE_POLICY = ("devicePlugin.config", "mig.strategy")


def cluster_changes(scope: Scope, *, leaving: bool = False) -> list[str]:
    """What ``normalize`` (or ``leave``) may change outside the lab's namespaces: refused on attached clusters.

    The lab's namespaces count too: a Namespace is cluster-scoped, and on someone else's cluster one of that
    name may hold someone else's work."""
    out = []
    if scope.operator and not leaving:
        out.append(steps.operator_change(scope.operator == "installed"))
    if scope.baseline:
        out.append("reset every GPU node's device-plugin, DRA and MIG labels, clear their simulated faults and "
                   "restore the ClusterPolicy's defaults")
    out += [f"{'delete' if leaving else 'create or empty'} namespace {ns}" for ns in scope.namespaces]
    for ref in scope.objects:  # asked before the cluster is: what the API server we ship serves
        if kubeapply.cluster_scoped(ref.api_version, ref.kind) or steps.nvidia_named(ref.api_version, ref.namespace):
            out.append(f"delete {ref}")
    out += [f"remove label {key} from node {node}" for node, keys in sorted(scope.node_labels.items())
            for key in keys]
    out += [f"clear the simulated faults of node {node}" for node in scope.faults]
    if scope.policy:
        out.append(f"restore the ClusterPolicy fields {', '.join(scope.policy)}")
    return out


def normalize(client: Client, scope: Scope) -> None:
    """Put every object of ``scope`` back to its start value (see ``Scope``)."""
    if scope.operator:
        steps.ensure_operator(client, scope.operator == "installed")
    if scope.baseline:
        _baseline(client, mig=False)
    for ns in scope.namespaces:
        _empty_namespace(client, ns)
    if scope.baseline:
        # The MIG manager never evicts: a lab pod still holding a GPU would make the reset's MIG change fail.
        _wait_pods_gone(client, scope.namespaces)
        _baseline(client, mig=True)
    _knobs(client, scope)


def leave(client: Client, scope: Scope) -> None:
    """Undo the lab: its namespaces deleted, its objects removed, the knobs it turned back to their defaults.

    The operator's presence is left as it is (installing or removing it is for the next lab to decide)."""
    if scope.baseline:
        _baseline(client, mig=False)
    for ns in scope.namespaces:
        _delete_pods(client, ns)
        kubeapply.delete(client, f"/api/v1/namespaces/{ns}")
    if scope.baseline:
        _wait_pods_gone(client, scope.namespaces)
        _baseline(client, mig=True)
    _knobs(client, scope)


def _delete_pods(client: Client, ns: str) -> None:
    try:
        client.delete(f"/api/v1/namespaces/{ns}/pods", gracePeriodSeconds=0)
    except errors.NotFound:
        pass


def _wait_pods_gone(client: Client, namespaces: tuple[str, ...], timeout: float = 60.0) -> None:
    """Wait (bounded) until the lab's pods are gone, so no GPU is still held when the baseline repartitions."""
    deadline = time.monotonic() + timeout
    for ns in namespaces:
        while client.get(f"/api/v1/namespaces/{ns}/pods").get("items") and time.monotonic() < deadline:
            time.sleep(0.2)


def _knobs(client: Client, scope: Scope) -> None:
    for ref in scope.objects:
        kubeapply.delete(client, kubeapply.object_path(client.mapper, ref.api_version, ref.kind, ref.name,
                                                       ref.namespace))
    nodes = {n: client.get(f"/api/v1/nodes/{n}") for n in sorted({*scope.node_labels, *scope.faults})}
    for name, keys in sorted(scope.node_labels.items()):
        present = {k: None for k in keys if k in (nodes[name]["metadata"].get("labels") or {})}
        if present:
            client.patch(f"/api/v1/nodes/{name}", {"metadata": {"labels": present}})
    for name in scope.faults:
        if names.FAULTS in (nodes[name]["metadata"].get("annotations") or {}):
            client.patch(f"/api/v1/nodes/{name}", {"metadata": {"annotations": {names.FAULTS: None}}})
    if scope.policy and gpustack.policy_state(client) is not None:
        _restore_policy(client, scope.policy)


def _baseline(client: Client, *, mig: bool) -> None:
    """Faults, labels and policy back to the stack's defaults; the MIG layout only with ``mig`` (called once the
    lab's pods are gone), everything else first so the nodes recover while the lab's pods are removed."""
    remade: dict[str, str] = {}
    for node in client.get("/api/v1/nodes").get("items", []):
        meta = node["metadata"]
        labels, notes = meta.get("labels") or {}, meta.get("annotations") or {}
        # Only keys a node carries are reset: mig.config exists where the operator manages MIG.
        change = {k: v for k, v in BASELINE_LABELS.items() if k in labels and labels[k] != v
                  and (k == names.MIG_CONFIG) == mig}
        patch: dict[str, Any] = {"labels": change} if change else {}
        if names.FAULTS in notes:
            patch["annotations"] = {names.FAULTS: None}
        if patch:
            client.patch(f"/api/v1/nodes/{meta['name']}", {"metadata": patch})
        if names.MIG_CONFIG in change:
            remade[meta["name"]] = str(change[names.MIG_CONFIG])
    if gpustack.policy_state(client) is not None:
        _restore_policy(client, BASELINE_POLICY)
    if remade:
        _wait_mig_applied(client, remade)


def _wait_mig_applied(client: Client, wanted: dict[str, str], timeout: float = MIG_WAIT_SECONDS) -> None:
    """Wait (bounded) until the MIG manager has finished the layouts the baseline asked for: the node's
    ``nvidia.com/mig.config.state`` says success with that config applied, or failed for it. Until then the device
    plugin is paused and the node offers no GPUs, so the next lab would start (and take its start state) in the
    middle of the change. A slow manager is not an error here: the lab's checks say what the node offers."""
    deadline = time.monotonic() + timeout
    todo = dict(wanted)
    while todo:
        for name, config in list(todo.items()):
            try:
                node = client.get(f"/api/v1/nodes/{name}")
            except errors.NotFound:
                todo.pop(name)
                continue
            if gpustack.mig_finished(node, config):
                todo.pop(name)
        if not todo:
            return
        if time.monotonic() >= deadline:
            log.warning("the MIG manager has not finished %s within %.0f s", ", ".join(
                f"{n} ({c})" for n, c in sorted(todo.items())), timeout)
            return
        time.sleep(0.5)


def _empty_namespace(client: Client, ns: str) -> None:
    try:
        found = client.get(f"/api/v1/namespaces/{ns}")
    except errors.NotFound:
        client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        return
    if found.get("status", {}).get("phase") == "Terminating":
        raise errors.ClusterError(f"namespace {ns} is being deleted", hint="wait a few seconds, then retry")
    for api_version, kind in NAMESPACED:
        path = client.mapper.path(api_version, kind, namespace=ns)
        listed = client.get(path).get("items", [])
        doomed = [o["metadata"]["name"] for o in listed
                  if not (kind == "ConfigMap" and o["metadata"]["name"] in KEEP_CONFIGMAPS)]
        if not doomed:
            continue
        if kind == "ConfigMap":
            for name in doomed:
                kubeapply.delete(client, f"{path}/{name}")
            continue
        try:
            client.delete(path, gracePeriodSeconds=0, propagationPolicy="Background")
        except errors.ApiError as exc:
            if exc.status != 405:  # a kind without delete-collection: one by one
                raise
            for name in doomed:
                kubeapply.delete(client, f"{path}/{name}")


def _restore_policy(client: Client, fields: tuple[str, ...]) -> None:
    default = gpustack.cluster_policy()["spec"]
    current = client.get(names.POLICY).get("spec", {})
    ops: list[dict[str, Any]] = []
    for dotted in fields:
        keys = dotted.split(".")
        want, have = at_keys(default, keys), at_keys(current, keys)
        if want == have:
            continue
        pointer = "/spec/" + "/".join(keys)
        ops.append({"op": "remove", "path": pointer} if want is None else {"op": "add", "path": pointer, "value": want})
    if ops:
        client.patch(names.POLICY, ops, "application/json-patch+json")


def at_keys(data: Any, keys: list[str]) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def snapshot(client: Client, scope: Scope) -> dict[str, Any]:
    """The state of everything in scope, without volatile fields: equal snapshots mean the same state."""
    out: dict[str, Any] = {"operator": gpustack.policy_state(client) is not None}
    for ns in scope.namespaces:
        out[f"namespace {ns}"] = _namespace_contents(client, ns)
    for ref in scope.objects:
        try:
            obj = client.get(kubeapply.object_path(client.mapper, ref.api_version, ref.kind, ref.name,
                                                   ref.namespace))
            out[str(ref)] = {k: v for k, v in obj.items() if k in ("spec", "data", "value", "preemptionPolicy")}
        except errors.NotFound:
            out[str(ref)] = None
    if scope.baseline:
        out["gpu nodes"] = _gpu_nodes(client)
    for node in sorted({*scope.node_labels, *scope.faults}):
        got = client.get(f"/api/v1/nodes/{node}")
        labels = got["metadata"].get("labels") or {}
        status = got.get("status", {})
        out[f"node {node}"] = {
            "labels": {k: labels.get(k) for k in scope.node_labels.get(node, ())},
            "faults": (got["metadata"].get("annotations") or {}).get(names.FAULTS),
            "capacity": _extended(status.get("capacity", {})),
            "allocatable": _extended(status.get("allocatable", {})),
        }
    if scope.policy and out["operator"]:
        spec = client.get(names.POLICY).get("spec", {})
        out["policy"] = {f: at_keys(spec, f.split(".")) for f in scope.policy}
    normalised: dict[str, Any] = json.loads(json.dumps(out, sort_keys=True))
    return normalised


def _extended(resources: dict[str, str]) -> dict[str, str]:
    """A node's extended resources, but none at 0: a real kubelet keeps a device plugin's resource at 0 once the
    plugin stops offering it (kubelet ``pkg/kubelet/nodestatus/setters.go``: "Set the capacity of the removed
    resource to 0"), where the local backend drops it; for the scheduler both mean none."""
    return {k: v for k, v in resources.items() if "/" in k and str(v) != "0"}


def _gpu_nodes(client: Client) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for node in client.get("/api/v1/nodes").get("items", []):
        labels = node["metadata"].get("labels") or {}
        allocatable = _extended(node.get("status", {}).get("allocatable", {}))
        if not allocatable and names.GPU_PRESENT not in labels:
            continue
        out[node["metadata"]["name"]] = {
            "labels": {k: labels.get(k) for k in BASELINE_LABELS},
            "faults": (node["metadata"].get("annotations") or {}).get(names.FAULTS),
            "allocatable": allocatable,
        }
    return out


def _namespace_contents(client: Client, ns: str) -> list[str] | None:
    if not client.exists(f"/api/v1/namespaces/{ns}"):
        return None
    found = []
    for api_version, kind in NAMESPACED:
        if kind == "Event":
            continue
        mapping = client.mapper.mapping(api_version, kind)
        plural = mapping.resource
        for obj in client.get(mapping.path(namespace=ns)).get("items", []):
            meta = obj["metadata"]
            if kind == "ConfigMap" and meta["name"] in KEEP_CONFIGMAPS:
                continue
            owners = meta.get("ownerReferences") or []
            # Pods and ReplicaSets made by controllers get random names: count them by owner instead.
            name = f"owned by {owners[0]['kind']} {owners[0]['name'].rsplit('-', 1)[0]}" if owners else meta["name"]
            found.append(f"{plural}: {name}")
    return sorted(found)
