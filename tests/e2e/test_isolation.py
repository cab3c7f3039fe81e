"""Tenants are isolated: a tenant kubeconfig reaches only its own namespace's workloads, never Secrets, never the
GPU stack's controls; two tenants grading at once see only their own objects; nothing listens beyond 127.0.0.1
but the simulated kubelets, each on its node's loopback address;
what one tenant writes on its own pods cannot take another tenant's GPUs.

Every denial is checked as the API server's own 403 (not a 404 or a connection error), so a test passes only
because RBAC refused the request.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psutil
import pytest

from cluster import errors, ops
from cluster.kube.client import Client
from cluster.sim.gpu import names
from cluster.testing import LocalCluster, wait_for
from gpu_e2e import delete, gpu_operator, gpu_pod, visible_devices, wait_phase
from graders import LiveView, live
from graders.view import name_of

__all__ = ["gpu_operator"]

PLUGIN_CM = "isolation-plugin-config"


@pytest.fixture
def tenants(local_cluster: LocalCluster) -> Iterator[Callable[[], tuple[str, Client]]]:
    """A factory of (namespace, tenant client) pairs; namespaces and cluster bindings are removed afterwards."""
    made: list[tuple[str, Client]] = []

    def make() -> tuple[str, Client]:
        ns = f"iso-{uuid.uuid4().hex[:6]}"
        client = Client.from_kubeconfig(local_cluster.backend.tenant_kubeconfig(ns))
        made.append((ns, client))
        return ns, client

    yield make
    for ns, client in made:
        client.close()
        local_cluster.remove_tenant(ns)


def forbidden(call: Callable[[], Any]) -> None:
    """The request must be refused by authorization (HTTP 403)."""
    try:
        call()
    except errors.ApiError as exc:
        assert exc.status == 403, f"expected 403 Forbidden, got {exc.status}: {exc.api_message}"
        return
    raise AssertionError("the tenant's request was allowed")


def restricted(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` made to pass Pod Security ``restricted`` (what a tenant namespace enforces)."""
    spec = pod["spec"]
    spec["securityContext"] = {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}
    for c in spec["containers"]:
        c["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    return pod


def _cm(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def _secret(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": {"token": "s3cret"}}


def test_tenant_cannot_read_secrets_even_in_its_own_namespace(local_cluster: LocalCluster, tenants: Any) -> None:
    ns, tenant = tenants()
    with local_cluster.client() as admin:
        admin.create(f"/api/v1/namespaces/{ns}/secrets", _secret("mine"))
    forbidden(lambda: tenant.get(f"/api/v1/namespaces/{ns}/secrets/mine"))
    forbidden(lambda: tenant.get(f"/api/v1/namespaces/{ns}/secrets"))
    forbidden(lambda: tenant.get("/api/v1/secrets"))
    forbidden(lambda: tenant.get("/api/v1/namespaces/kube-system/secrets"))
    forbidden(lambda: tenant.create(f"/api/v1/namespaces/{ns}/secrets", _secret("planted")))
    # A Secret cannot be reached sideways either: no token minting for service accounts.
    forbidden(lambda: tenant.create(f"/api/v1/namespaces/{ns}/serviceaccounts/{ops.TENANT_SA}/token",
                                    {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}))


def test_a_tenant_kubeconfig_drives_kubectl_in_its_own_namespace_only(local_cluster: LocalCluster,
                                                                      tenants: Any) -> None:
    """What a learner does with the kubeconfig: kubectl's own view of its rights, and a pod that passes Pod
    Security ``restricted`` (what a tenant namespace enforces) is created."""
    ns_a, _ = tenants()
    ns_b, _ = tenants()
    path = local_cluster.backend.tenant_kubeconfig(ns_a)

    def can(*args: str) -> str:
        return local_cluster.kubectl("auth", "can-i", *args, kubeconfig=path, check=False).stdout.strip()

    assert (can("create", "pods", "-n", ns_a), can("get", "nodes")) == ("yes", "yes")
    assert (can("create", "pods", "-n", ns_b), can("patch", "nodes"), can("get", "secrets", "-n", ns_a)) == \
        ("no", "no", "no")
    overrides = json.dumps(restricted({"spec": {"containers": [{"name": "hello", "image": "busybox:1.36"}]}}))
    created = local_cluster.kubectl("run", "hello", "--image=busybox:1.36", "-n", ns_a, f"--overrides={overrides}",
                                    kubeconfig=path)
    assert "created" in created.stdout


def test_tenant_cannot_read_other_namespaces(local_cluster: LocalCluster, tenants: Any) -> None:
    ns_a, a = tenants()
    ns_b, _ = tenants()
    with local_cluster.client() as admin:
        admin.create(f"/api/v1/namespaces/{ns_b}/configmaps", _cm("b-only", {"x": "1"}))
    assert a.get(f"/api/v1/namespaces/{ns_a}/configmaps")["kind"] == "ConfigMapList"  # its own: allowed
    for path in (f"/api/v1/namespaces/{ns_b}/configmaps", f"/api/v1/namespaces/{ns_b}/configmaps/b-only",
                 f"/api/v1/namespaces/{ns_b}/pods", f"/api/v1/namespaces/{ns_b}/events",
                 "/api/v1/namespaces/kube-system/pods", f"/api/v1/namespaces/{names.NAMESPACE}/configmaps",
                 "/api/v1/pods", "/api/v1/configmaps", "/api/v1/namespaces", f"/api/v1/namespaces/{ns_b}",
                 "/apis/resource.k8s.io/v1/resourceclaims"):
        forbidden(lambda path=path: a.get(path))  # type: ignore[misc]
    forbidden(lambda: a.create(f"/api/v1/namespaces/{ns_b}/configmaps", _cm("planted", {})))


def test_tenant_cannot_change_nodes_the_cluster_policy_or_the_plugin_config(
        local_cluster: LocalCluster, gpu_operator: Client, tenants: Any) -> None:
    _, tenant = tenants()
    path = f"/api/v1/namespaces/{names.NAMESPACE}/configmaps"
    try:
        gpu_operator.create(path, _cm(PLUGIN_CM, {"any": "version: v1\n"}))
    except errors.Conflict:
        pass
    try:
        assert tenant.get("/api/v1/nodes/a100-0")["metadata"]["name"] == "a100-0"  # reading nodes is allowed
        forbidden(lambda: tenant.patch("/api/v1/nodes/a100-0",
                                       {"metadata": {"labels": {names.DEVICE_PLUGIN_CONFIG: "any"}}}))
        forbidden(lambda: tenant.patch("/api/v1/nodes/a100-0/status",
                                       {"status": {"capacity": {"nvidia.com/gpu": "64"}}}))
        forbidden(lambda: tenant.delete("/api/v1/nodes/cpu-0"))
        policy = f"{names.POLICY_PATH}/{names.POLICY_NAME}"
        forbidden(lambda: tenant.patch(policy, {"spec": {"devicePlugin": {"config": {"name": PLUGIN_CM}}}}))
        forbidden(lambda: tenant.delete(policy))
        forbidden(lambda: tenant.patch(f"{path}/{PLUGIN_CM}", {"data": {"any": "version: v1\nsharing: {}\n"}}))
        forbidden(lambda: tenant.delete(f"{path}/{PLUGIN_CM}"))
        forbidden(lambda: tenant.create(path, _cm("time-slicing", {"any": "version: v1\n"})))
        assert gpu_operator.get(f"{path}/{PLUGIN_CM}")["data"] == {"any": "version: v1\n"}
        labels = gpu_operator.get("/api/v1/nodes/a100-0")["metadata"].get("labels", {})
        assert labels.get(names.DEVICE_PLUGIN_CONFIG) != "any"
    finally:
        gpu_operator.delete(f"{path}/{PLUGIN_CM}")


def test_tenant_cannot_grant_itself_more(local_cluster: LocalCluster, tenants: Any) -> None:
    ns, tenant = tenants()
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "escalate", "namespace": ns},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
               "subjects": [{"kind": "ServiceAccount", "name": ops.TENANT_SA, "namespace": ns}]}
    forbidden(lambda: tenant.create(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings", binding))
    forbidden(lambda: tenant.create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                                    {**binding, "kind": "ClusterRoleBinding", "metadata": {"name": f"esc-{ns}"}}))
    forbidden(lambda: tenant.patch(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{ops.TENANT_ROLE}",
                                   {"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}))
    forbidden(lambda: tenant.patch(f"/api/v1/namespaces/{ns}", {"metadata": {"labels": {"owner": "me"}}}))
    forbidden(lambda: tenant.create("/apis/scheduling.k8s.io/v1/priorityclasses",
                                    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                     "metadata": {"name": f"mine-{ns}"}, "value": 1_000_000_000}))
    forbidden(lambda: tenant.create(f"/api/v1/namespaces/{ns}/resourcequotas",
                                    {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
                                     "spec": {"hard": {"requests.nvidia.com/gpu": "100"}}}))


def _grade(client: Client, ns: str, rounds: int, seen: dict[str, set[str]], failures: list[str]) -> None:
    """A tenant's grading loop through the graders' live view: its answer in, then live checks, many times."""
    try:
        client.create(f"/api/v1/namespaces/{ns}/configmaps", _cm(f"answer-{ns}", {"owner": ns}))
        view = LiveView(client)
        pod = next(p for p in ("work", "other-work") if view.pod(ns, p) is not None)
        for _ in range(rounds):
            check = live.pod_phase(view, ns, pod, wait=30)
            if not check.passed:
                failures.append(f"{ns}: {check.message}")
                return
            seen[ns] |= {name_of(o) for o in view.configmaps(ns)} | {name_of(o) for o in view.pods(ns)}
    except Exception as exc:  # noqa: BLE001 - reported by the test thread below
        failures.append(f"{ns}: {type(exc).__name__}: {exc}")


def test_two_tenants_grading_at_once_see_only_their_own_objects(local_cluster: LocalCluster, tenants: Any) -> None:
    (ns_a, a), (ns_b, b) = tenants(), tenants()
    pod = restricted({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "work"},
                      "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}})
    a.create(f"/api/v1/namespaces/{ns_a}/pods", pod)
    b.create(f"/api/v1/namespaces/{ns_b}/pods", {**pod, "metadata": {"name": "other-work"}})
    seen: dict[str, set[str]] = {ns_a: set(), ns_b: set()}
    failures: list[str] = []
    threads = [threading.Thread(target=_grade, args=(c, ns, 20, seen, failures)) for c, ns in ((a, ns_a), (b, ns_b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    assert not failures, failures
    assert "work" in seen[ns_a] and "other-work" not in seen[ns_a] and f"answer-{ns_b}" not in seen[ns_a]
    assert "other-work" in seen[ns_b] and "work" not in seen[ns_b] and f"answer-{ns_a}" not in seen[ns_b]
    # A grader holding one tenant's credentials cannot look into the other's namespace at all.
    forbidden(lambda: LiveView(a).pods(ns_b))
    forbidden(lambda: LiveView(a).pod(ns_b, "other-work"))
    forbidden(lambda: LiveView(b).configmaps(ns_a))
    forbidden(lambda: LiveView(b).pods(None))


def _project_processes(local_cluster: LocalCluster) -> list[psutil.Process]:
    """Every process of the cluster: each component leads its own session, and its children stay in it."""
    sessions = {c.pid for c in local_cluster.backend.components() if c.pid}
    out = []
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) in sessions:
                out.append(proc)
        except (OSError, psutil.Error):
            continue
    return out


def test_every_listening_socket_is_on_loopback(local_cluster: LocalCluster, gpu_operator: Client) -> None:
    url = wait_for(lambda: gpu_operator.get(f"/api/v1/namespaces/{names.NAMESPACE}/configmaps/"
                                            f"{names.DCGM_ENDPOINT_CONFIGMAP}")["data"].get("url"),
                   timeout=60, what="the DCGM exporter's URL")
    assert url.startswith("http://127.0.0.1:"), url
    procs = _project_processes(local_cluster)
    names_seen = {p.name() for p in procs}
    # etcd and the API server, controller manager and scheduler: one kube-control-plane process where it is built
    # (cluster/backends/local.py), else three.
    assert "etcd" in names_seen, names_seen
    assert (any(n.startswith("kube-control-pl") for n in names_seen)
            or {"kube-apiserver", "kube-controller-manager", "kube-scheduler"} <= names_seen), names_seen
    listening: list[tuple[str, str, int]] = []
    for proc in procs:
        for conn in proc.net_connections(kind="inet"):
            if conn.status == psutil.CONN_LISTEN or (conn.type == 2 and not conn.raddr):  # TCP listen, bound UDP
                listening.append((proc.name(), conn.laddr.ip, conn.laddr.port))
    assert listening, "expected the control plane to listen somewhere"
    exporter_port = int(url.rsplit(":", 1)[1].split("/")[0])
    assert any(port == exporter_port for _, _, port in listening), "the DCGM exporter's socket was not found"
    # The simulated kubelets listen on their nodes' own loopback addresses (127.1.x.y), at the kubelet port.
    kubelet_port = json.loads((local_cluster.backend.dir / "state.json").read_text())["ports"]["kubelet"]
    with local_cluster.client() as c:
        node_ips = {a["address"] for n in c.get("/api/v1/nodes")["items"] for a in n["status"]["addresses"]
                    if a["type"] == "InternalIP"}
    kubelets = {ip for _, ip, port in listening if ip in node_ips and port == kubelet_port}
    assert kubelets == node_ips and all(ip.startswith("127.1.") for ip in node_ips), (kubelets, node_ips)
    outside = [entry for entry in listening if entry[1] != "127.0.0.1" and entry[1] not in kubelets]
    assert not outside, f"listening beyond loopback: {outside}"


def test_credentials_in_the_state_dir_are_private_to_their_owner(local_cluster: LocalCluster, tenants: Any) -> None:
    """Another local user must not read the admin kubeconfig, a tenant's token or the CA's private key."""
    tenants()
    state = local_cluster.backend.dir
    secret_files = [state / "admin.kubeconfig", *(state / "kubeconfigs").glob("*"), *(state / "tenants").glob("*"),
                    *(state / "pki").glob("*.key")]
    assert len(secret_files) > 5, secret_files
    readable = [f"{p} ({p.stat().st_mode & 0o777:o})" for p in secret_files if p.stat().st_mode & 0o077]
    assert not readable, f"readable by group or others: {readable}"
    assert (state / "pki").stat().st_mode & 0o077 == 0


def test_a_forged_devices_annotation_cannot_take_another_tenants_gpus_and_a_restart_keeps_them(
        local_cluster: LocalCluster, gpu_operator: Client, tenants: Any) -> None:
    """Issue 15: tenant A wrote ``gpulab.dev/devices`` on its own GPU-less pod naming every GPU of a node (the
    registry is readable on the node), and tenant B's GPU pod there failed admission. The simulated kubelet now
    decides from its own checkpoint; that checkpoint survives a SIGKILL of the pod agent, so GPU pods started
    after the restart get devices nobody holds."""
    (ns_a, a), (ns_b, b) = tenants(), tenants()
    node = "a100-0"
    registry = json.loads(a.get(f"/api/v1/nodes/{node}")["metadata"]["annotations"][names.DEVICE_REGISTRY])
    resource, devices = next(iter(registry["resources"].items()))
    assert len(devices) == 4, registry
    forged = {f"c{i}": [{"resource": resource, "id": d[0], "uuid": d[1]}] for i, d in enumerate(devices)}
    a.create(f"/api/v1/namespaces/{ns_a}/pods", restricted(gpu_pod(
        "squatter", {}, node=node, annotations={names.POD_DEVICES: json.dumps(forged)})))
    wait_phase(a, ns_a, "squatter", "Running")
    b.create(f"/api/v1/namespaces/{ns_b}/pods", restricted(gpu_pod("victim", {resource: "1"}, node=node)))
    victim = wait_phase(b, ns_b, "victim", "Running", timeout=60)
    held = {visible_devices(victim)}
    record = local_cluster.backend.dir / "kubelet" / "device-checkpoint.json"
    assert victim["metadata"]["uid"] in record.read_text()

    sup = local_cluster.backend.sup
    pid = sup.pid("sim-agents")
    assert pid
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: sup.pid("sim-agents") is None, timeout=10, what="sim-agents gone")
    local_cluster.gpulab("up")
    try:
        for i in range(3):
            b.create(f"/api/v1/namespaces/{ns_b}/pods", restricted(gpu_pod(f"after-{i}", {resource: "1"}, node=node)))
        for i in range(3):
            got = visible_devices(wait_phase(b, ns_b, f"after-{i}", "Running", timeout=60))
            assert got and got not in held, f"after-{i} got {got}, already held: {held}"
            held.add(got)
    finally:
        for i in range(3):
            delete(b, f"/api/v1/namespaces/{ns_b}/pods/after-{i}")
    assert len(held) == 4


# --- tenants as the Kubernetes multi-tenancy guidance sets them up ---------------------------------------------------

def _refused(call: Callable[[], Any], *fragments: str) -> str:
    """The request must be refused with 403 by admission (Pod Security, quota), the message naming why."""
    try:
        call()
    except errors.ApiError as exc:
        assert exc.status == 403, f"expected 403 Forbidden, got {exc.status}: {exc.api_message}"
        for fragment in fragments:
            assert fragment in exc.api_message, exc.api_message
        return exc.api_message
    raise AssertionError("the tenant's request was allowed")


def test_tenant_cannot_change_or_delete_its_quota_and_limit_range(local_cluster: LocalCluster, tenants: Any) -> None:
    ns, tenant = tenants()
    limits = f"/api/v1/namespaces/{ns}/limitranges/{ops.TENANT_LIMITS}"
    quota = f"/api/v1/namespaces/{ns}/resourcequotas/{ops.TENANT_QUOTA}"
    assert tenant.get(limits)["spec"]["limits"][0]["type"] == "Container"  # reading them is allowed
    forbidden(lambda: tenant.delete(limits))
    forbidden(lambda: tenant.patch(limits, {"spec": {"limits": [{"type": "Container", "max": {"cpu": "64"}}]}}))
    forbidden(lambda: tenant.create(f"/api/v1/namespaces/{ns}/limitranges",
                                    {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "mine"},
                                     "spec": {"limits": [{"type": "Container", "max": {"cpu": "64"}}]}}))
    forbidden(lambda: tenant.delete(quota))
    forbidden(lambda: tenant.patch(quota, {"spec": {"hard": {"pods": "5000"}}}))
    forbidden(lambda: tenant.delete(f"/api/v1/namespaces/{ns}/resourcequotas/{ops.CRITICAL_QUOTA}"))
    with local_cluster.client() as admin:
        assert admin.get(limits)["spec"]["limits"][0]["max"]["cpu"] == "8"
        assert admin.get(quota)["spec"]["hard"]["pods"] == "50"


def test_tenant_cannot_run_a_privileged_host_root_pod(local_cluster: LocalCluster, tenants: Any) -> None:
    ns, tenant = tenants()
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "escape"},
           "spec": {"hostPID": True, "containers": [{"name": "main", "image": "busybox:1.36",
                                                     "securityContext": {"privileged": True},
                                                     "volumeMounts": [{"name": "host", "mountPath": "/host"}]}],
                    "volumes": [{"name": "host", "hostPath": {"path": "/"}}]}}
    _refused(lambda: tenant.create(f"/api/v1/namespaces/{ns}/pods", pod),
             'violates PodSecurity "restricted:latest"', "privileged", "hostPath")
    # A pod that follows the restricted profile runs, and gets the LimitRange's defaults.
    ok = tenant.create(f"/api/v1/namespaces/{ns}/pods", restricted(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "fine"},
         "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}))
    assert ok["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "100m", "memory": "128Mi"}


def test_tenant_cannot_use_the_critical_priority_classes(local_cluster: LocalCluster, tenants: Any) -> None:
    ns, tenant = tenants()
    for klass in ops.CRITICAL_CLASSES:
        pod = restricted({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"urgent-{klass}"},
                          "spec": {"priorityClassName": klass,
                                   "containers": [{"name": "main", "image": "busybox:1.36"}]}})
        _refused(lambda pod=pod: tenant.create(f"/api/v1/namespaces/{ns}/pods", pod),  # type: ignore[misc]
                 "exceeded quota", ops.CRITICAL_QUOTA)


def test_tenant_on_an_existing_namespace_is_refused_and_leaves_it_alone(local_cluster: LocalCluster) -> None:
    ns = local_cluster.namespace("foreign")
    with local_cluster.client() as admin:
        admin.create(f"/api/v1/namespaces/{ns}/serviceaccounts",
                     {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": ops.TENANT_SA}})
        before = admin.get(f"/api/v1/namespaces/{ns}")["metadata"].get("labels")
        proc = local_cluster.gpulab("kubeconfig", "--tenant", ns, check=False)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert f"namespace '{ns}' already exists and is not a gpulab tenant namespace" in proc.stderr
        assert admin.get(f"/api/v1/namespaces/{ns}")["metadata"].get("labels") == before
        assert admin.get(f"/api/v1/namespaces/{ns}/resourcequotas")["items"] == []
        assert not admin.exists(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings/{ops.TENANT_ROLE}")
        admin.delete(f"/api/v1/namespaces/{ns}")
