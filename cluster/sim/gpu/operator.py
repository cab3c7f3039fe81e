"""Installing and removing the simulated GPU Operator, reading its state, and injecting faults.

``install`` creates what ``helm install gpu-operator`` would: the ``gpu-operator`` namespace, the ClusterPolicy
CRD and the default ``cluster-policy``, the default mig-parted ConfigMap and the DRA DeviceClasses. The GPU
stack (a supervised process of the local backend) then labels nodes, creates the operand DaemonSets and
advertises GPUs; ``install`` waits until the policy reports ``ready``. Synchronous: the CLI's side.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cluster import errors
from cluster.gpu import helm_values
from cluster.kube.client import Client
from cluster.sim.gpu import dra, hoststate, manifests, names, nodeplan, plugin, policy as policy_mod

CRD_PATH = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{names.CRD_NAME}"
NS_PATH = f"/api/v1/namespaces/{names.NAMESPACE}"


def _wait(what: str, check: Callable[[], bool], timeout: float, hint: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise errors.ClusterError(f"timed out after {timeout:.0f} s waiting for {what}", hint=hint)


def _create(client: Client, path: str, body: dict[str, Any]) -> bool:
    try:
        client.create(path, body)
        return True
    except errors.Conflict:
        return False


def _established(client: Client) -> bool:
    try:
        crd = client.get(CRD_PATH)
    except errors.NotFound:
        return False
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (crd.get("status") or {}).get("conditions") or [])


def policy_state(client: Client) -> str | None:
    """``status.state`` of ``cluster-policy``; ``None`` when the operator is not installed."""
    try:
        return str(client.get(names.POLICY).get("status", {}).get("state") or "")
    except errors.NotFound:
        return None


def present(client: Client) -> bool:
    """Anything of the operator left to remove: its policy, its CRD, or a namespace not already being deleted."""
    if policy_state(client) is not None or client.exists(CRD_PATH):
        return True
    try:
        return not client.get(NS_PATH)["metadata"].get("deletionTimestamp")
    except errors.NotFound:
        return False


def install(client: Client, *, wait: bool = True, timeout: float = 90.0,
            values: helm_values.Rendered | None = None) -> str:
    """Install the operator (idempotent); returns the policy state. Waits for ``ready`` when ``wait``.

    ``values``: what the Helm chart renders from the user's values (``cluster.gpu.helm_values``): its
    ConfigMaps are created and its ClusterPolicy fields set over the default policy. Like ``helm install``,
    an install with values refuses a cluster where the operator is already installed."""
    if values is not None and policy_state(client) is not None:
        raise errors.ConfigError("gpu-operator install", ["the GPU Operator is already installed; gpulab takes "
                                 "values at install time only, as `helm install` refuses a release that exists "
                                 "(on a real cluster `helm upgrade -f values.yaml` re-renders the ClusterPolicy)"],
                                 hint="gpulab gpu-operator uninstall, then install again with the values "
                                      "(or edit the ClusterPolicy: kubectl edit clusterpolicy cluster-policy)")
    if client.exists(NS_PATH) and client.get(NS_PATH).get("status", {}).get("phase") == "Terminating":
        _wait("the previous gpu-operator namespace to go away", lambda: not client.exists(NS_PATH), 60,
              "gpulab gpu-operator status")
    if client.exists(CRD_PATH) and client.get(CRD_PATH)["metadata"].get("deletionTimestamp"):
        _wait("the previous ClusterPolicy CRD to be deleted", lambda: not client.exists(CRD_PATH), 60,
              "gpulab gpu-operator status")
    _create(client, "/api/v1/namespaces", manifests.namespace())
    _create(client, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", manifests.crd())
    _wait("the ClusterPolicy CRD to be established", lambda: _established(client), 30, "gpulab status")
    _create(client, f"{NS_PATH}/configmaps", manifests.mig_configmap())
    for dc in dra.device_classes():
        _create(client, dra.CLASSES_PATH, dc)
    for cm in values.configmaps if values is not None else ():
        _create(client, f"{NS_PATH}/configmaps", cm)
    policy = manifests.cluster_policy() if values is None else helm_values.apply(manifests.cluster_policy(), values)
    _create(client, names.POLICY_PATH, policy)
    if wait:
        _wait("ClusterPolicy cluster-policy to report ready", lambda: policy_state(client) == "ready", timeout,
              "is the gpu-stack component running? `gpulab status`; faults: `gpulab gpu-operator status`")
    return policy_state(client) or ""


def uninstall(client: Client, *, timeout: float = 90.0, wait_namespace: bool = True) -> None:
    """Remove the operator, its operands and everything it put on nodes (MIG layouts stay: they are hardware).

    The ``gpu-operator`` namespace goes last. Upstream's namespace controller acts on a deleted namespace only
    after 5 s (``namespaceDeletionGracePeriod``), so ``wait_namespace=False`` returns while it is still
    Terminating; ``install`` waits for it to be gone before creating it again."""
    for path in (names.POLICY, *(f"{dra.CLASSES_PATH}/{n}" for n in names.DEVICE_CLASSES)):
        try:
            client.delete(path)
        except errors.NotFound:
            pass
    _remove_workloads(client)
    try:
        client.delete(NS_PATH)
    except (errors.NotFound, errors.Conflict):  # Conflict: already being deleted
        pass
    try:
        client.delete(CRD_PATH)
    except errors.NotFound:
        pass
    _wait("the ClusterPolicy CRD to be deleted", lambda: not client.exists(CRD_PATH), timeout,
          "gpulab status (the API server removes the CRD once its objects are gone)")
    _strip_nodes(client)
    for s in client.get(dra.SLICES_PATH, fieldSelector=f"spec.driver={names.DRA_DRIVER}").get("items", []):
        try:
            client.delete(f"{dra.SLICES_PATH}/{s['metadata']['name']}")
        except errors.NotFound:
            pass
    if wait_namespace:
        _wait("the gpu-operator namespace to be deleted", lambda: not client.exists(NS_PATH), timeout,
              "gpulab status (the controller manager deletes namespaces)")


WORKLOADS = tuple(f"{names.APPS_PATH}/{kind}" for kind in ("deployments", "daemonsets", "replicasets"))


def _remove_workloads(client: Client, *, settle: float = 20.0) -> None:
    """What ``helm uninstall`` leaves behind it: the operator Deployment and the operand DaemonSets deleted and
    their pods gone, before the namespace itself is deleted.

    A namespace deleted while pods still run in it is looked at again only after half their grace period plus
    1 s (16 s for the default 30 s); deleted first, the pods are gone in about a second and the namespace goes in
    one pass.
    The GPU stack may re-create a DaemonSet until it sees the policy gone, so deletion repeats while pods remain.
    If pods still remain after ``settle`` seconds (no pod agent running), the namespace deletion takes over."""
    deadline = time.monotonic() + settle
    while client.get(f"{NS_PATH}/pods", limit=1).get("items") and time.monotonic() < deadline:
        for collection in WORKLOADS:
            if client.get(collection, limit=1).get("items"):
                client.delete(collection, propagationPolicy="Background")
        time.sleep(0.2)


def _strip_nodes(client: Client) -> None:
    for node in client.get("/api/v1/nodes").get("items", []):
        plan = nodeplan.plan(node, None, {}, validated=False, timestamp="0")
        name = node["metadata"]["name"]
        if plan.labels or plan.annotations:
            client.patch(f"/api/v1/nodes/{name}", {"metadata": {"labels": plan.labels, "annotations": plan.annotations}})
        if plan.capacity or plan.allocatable:
            client.patch(f"/api/v1/nodes/{name}/status",
                         {"status": {"capacity": plan.capacity, "allocatable": plan.allocatable}})


# --- status ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeGpuStatus:
    name: str
    model: str
    gpus: int
    mode: str  # device-plugin | dra | none
    plugin_config: str
    mig_config: str
    mig_state: str
    capacity: dict[str, str]
    allocatable: dict[str, str]
    faults: tuple[str, ...]
    operands: dict[str, str] = field(default_factory=dict)  # operand pod -> kubectl-style status


@dataclass(frozen=True)
class OperatorStatus:
    installed: bool
    state: str
    metrics_url: str
    nodes: tuple[NodeGpuStatus, ...]


def _pod_status(pod: dict[str, Any]) -> str:
    status = pod.get("status", {})
    for cs in status.get("initContainerStatuses", []):
        waiting = cs.get("state", {}).get("waiting", {}).get("reason")
        if waiting == "CrashLoopBackOff":
            return "Init:CrashLoopBackOff"
        if not cs.get("ready") and "terminated" not in cs.get("state", {}):
            return "Init"
    for cs in status.get("containerStatuses", []):
        waiting = cs.get("state", {}).get("waiting", {}).get("reason")
        if waiting:
            return str(waiting)
    return str(status.get("phase", "Pending"))


def status(client: Client) -> OperatorStatus:
    state = policy_state(client)
    url = ""
    pods: list[dict[str, Any]] = []
    if client.exists(NS_PATH):
        try:
            url = client.get(f"{NS_PATH}/configmaps/{names.DCGM_ENDPOINT_CONFIGMAP}").get("data", {}).get("url", "")
        except errors.NotFound:
            url = ""
        pods = client.get(f"{NS_PATH}/pods").get("items", [])
    edited = _edited_keys(client) if state is not None else {}
    out = []
    for node in client.get("/api/v1/nodes").get("items", []):
        hw = hoststate.hardware(node)
        if hw.model is None:
            continue
        labels = hoststate.node_labels(node)
        name = node["metadata"]["name"]
        st = node.get("status", {})
        mode = "dra" if labels.get(names.DRA_ENABLED) == "true" else (
            "device-plugin" if labels.get(names.DEPLOY_PREFIX + "device-plugin") == "true" else "none")
        f = hoststate.faults(node)
        fault_list = sorted(f.kinds - {"gpu-unhealthy"}) + [f"gpu-unhealthy:{i}" for i in sorted(f.unhealthy)]
        ops = {p["metadata"]["name"]: _pod_status(p) for p in pods if p["spec"].get("nodeName") == name}
        applied = hoststate.node_annotations(node).get(names.PLUGIN_CONFIG_APPLIED, "-") or "(empty)"
        loaded = plugin.Loaded.from_annotation(hoststate.node_annotations(node).get(names.PLUGIN_CONFIG_LOADED))
        if loaded is not None and loaded.key is not None and edited.get(loaded.key, loaded.text) != loaded.text:
            applied += " (ConfigMap edited since loaded; restart the plugin)"
        out.append(NodeGpuStatus(
            name, hw.model.key, hw.count, mode, applied,
            labels.get(names.MIG_CONFIG, "-"), labels.get(names.MIG_CONFIG_STATE, "-"),
            {k: v for k, v in st.get("capacity", {}).items() if plugin.is_extended(k)},
            {k: v for k, v in st.get("allocatable", {}).items() if plugin.is_extended(k)},
            tuple(fault_list), ops))
    return OperatorStatus(state is not None, state or "", url, tuple(out))


def _edited_keys(client: Client) -> dict[str, str]:
    """The device-plugin ConfigMap's keys as they are now (to tell a learner that a plugin runs an older text)."""
    try:
        pol = policy_mod.from_object(client.get(names.POLICY))
        if pol is None or not pol.device_plugin_config:
            return {}
        data = client.get(f"{NS_PATH}/configmaps/{pol.device_plugin_config}").get("data") or {}
    except errors.NotFound:
        return {}
    return {str(k): str(v) for k, v in data.items()}


# --- faults ------------------------------------------------------------------------------------------------------


def set_fault(client: Client, node_name: str, kind: str, gpu: int | None, present: bool) -> hoststate.Faults:
    """Inject (``present``) or clear a fault on a GPU node; returns the node's faults afterwards."""
    try:
        node = client.get(f"/api/v1/nodes/{node_name}")
    except errors.NotFound as exc:
        raise errors.ConfigError("fault", [f"node {node_name!r} does not exist"], hint="kubectl get nodes") from exc
    hw = hoststate.hardware(node)
    problems = []
    if hw.model is None:
        problems.append(f"node {node_name!r} has no GPUs")
    if gpu is not None and kind != "gpu-unhealthy":
        problems.append("--gpu only applies to the gpu-unhealthy fault")
    if gpu is not None and hw.model is not None and not 0 <= gpu < hw.count:
        problems.append(f"--gpu {gpu}: node {node_name} has GPUs 0..{hw.count - 1}")
    if problems:
        raise errors.ConfigError("fault", problems)
    updated = hoststate.with_fault(hoststate.faults(node), kind, gpu, present)
    client.patch(f"/api/v1/nodes/{node_name}",
                 {"metadata": {"annotations": {names.FAULTS: hoststate.faults_annotation(updated)}}})
    return updated


# --- operand restarts ---------------------------------------------------------------------------------------------

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


def restart_daemonset(client: Client, name: str) -> str:
    """What ``kubectl -n gpu-operator rollout restart daemonset/NAME`` does: stamp the pod template's
    ``restartedAt`` annotation, so the DaemonSet controller replaces every pod (and a new device-plugin pod reads
    its config again). Returns the timestamp written."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    body = {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: stamp}}}}}
    try:
        client.patch(f"{names.APPS_PATH}/daemonsets/{name}", body)
    except errors.NotFound as exc:
        raise errors.ConfigError("restart", [f"daemonset {name!r} does not exist in {names.NAMESPACE}"],
                                 hint=f"kubectl -n {names.NAMESPACE} get daemonsets") from exc
    return stamp


def dumps(st: OperatorStatus) -> str:
    return json.dumps({"installed": st.installed, "state": st.state, "metricsUrl": st.metrics_url,
                       "nodes": [n.__dict__ for n in st.nodes]}, indent=2, sort_keys=True)
