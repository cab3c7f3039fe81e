"""``kubectl logs`` works on the local backend: the API server reaches each simulated node's kubelet endpoint on the
node's loopback InternalIP (verified against the cluster CA), and the endpoint serves the containers' logs with the
kubelet's options (``--tail``, ``--since``, ``--timestamps``, ``-c``, ``--previous`` after a restart, ``-f``), to the
API server only; RBAC on ``pods/log`` decides who may ask (``kubectl exec``: test_kubectl_exec.py). The GPU
stack's containers start their logs with their programs' own lines."""

from __future__ import annotations

import ipaddress
import json
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import operand_logs
import pytest

from cluster import binaries, pki as pki_mod
from cluster.kube.client import Client
from cluster.sim.kubelet import logstore
from cluster.testing import LocalCluster, wait_for
from gpu_e2e import gpu_operator

__all__ = ["gpu_operator"]


def _pod(name: str, containers: tuple[str, ...] = ("main",), annotations: dict[str, str] | None = None
         ) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": annotations or {}},
            "spec": {"nodeSelector": {"gpulab.dev/pool": "cpu"},
                     "containers": [{"name": c, "image": "busybox:1.36", "command": ["sleep", "3600"]}
                                    for c in containers]}}


def _running(c: Client, ns: str, name: str, restarts: int = 0) -> dict[str, Any]:
    def ready() -> dict[str, Any] | None:
        pod = c.get(f"/api/v1/namespaces/{ns}/pods/{name}")
        statuses = pod.get("status", {}).get("containerStatuses") or []
        ok = statuses and all("running" in s["state"] and s["restartCount"] >= restarts for s in statuses)
        return pod if ok else None
    found: dict[str, Any] = wait_for(ready, 40, what=f"{ns}/{name} running (restarts >= {restarts})")
    return found


def _store(cluster: LocalCluster) -> logstore.LogStore:
    return logstore.LogStore(cluster.backend.dir / "kubelet" / "pod-logs")


def _ref(pod: dict[str, Any], container: str = "main", restart: int = 0) -> logstore.ContainerRef:
    m = pod["metadata"]
    return logstore.ContainerRef(m["namespace"], m["name"], m["uid"], container, restart)


def test_nodes_are_reached_on_their_loopback_internal_ip_at_the_clusters_kubelet_port(
        local_cluster: LocalCluster) -> None:
    port = json.loads((local_cluster.backend.dir / "state.json").read_text())["ports"]["kubelet"]
    with local_cluster.client() as c:
        nodes = c.get("/api/v1/nodes")["items"]
    ips = {n["metadata"]["name"]: next(a["address"] for a in n["status"]["addresses"] if a["type"] == "InternalIP")
           for n in nodes}
    assert all(ipaddress.ip_address(ip) in ipaddress.ip_network("127.1.0.0/16") for ip in ips.values()), ips
    assert len(set(ips.values())) == len(ips)
    assert {n["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] for n in nodes} == {port}
    wide = local_cluster.kubectl("get", "nodes", "-o", "wide").stdout
    assert "cpu-0    Ready" in wide and ips["cpu-0"] in wide


def test_logs_with_tail_since_timestamps_and_a_container(local_cluster: LocalCluster, namespace: str) -> None:
    with local_cluster.client() as c:
        c.create(f"/api/v1/namespaces/{namespace}/pods", _pod("talker", ("main", "side")))
        pod = _running(c, namespace, "talker")
    store, now = _store(local_cluster), time.time_ns()
    for seconds_ago, text in ((600, "ten minutes ago"), (120, "two minutes ago"), (1, "just now")):
        store.write(_ref(pod), text, at_ns=now - seconds_ago * 1_000_000_000)
    store.write(_ref(pod, "side"), "from the sidecar", stream="stderr")
    logs = ("logs", "-n", namespace, "talker")
    assert local_cluster.kubectl(*logs, "-c", "main").stdout == "ten minutes ago\ntwo minutes ago\njust now\n"
    assert local_cluster.kubectl(*logs, "-c", "main", "--tail=1").stdout == "just now\n"
    assert local_cluster.kubectl(*logs, "-c", "main", "--since=5m").stdout == "two minutes ago\njust now\n"
    stamped = local_cluster.kubectl(*logs, "-c", "main", "--tail=1", "--timestamps").stdout
    assert stamped == f"{logstore.format_stamp(now - 1_000_000_000)} just now\n"
    assert local_cluster.kubectl(*logs, "-c", "side").stdout == "from the sidecar\n"
    assert local_cluster.kubectl(*logs, "-c", "main", "--limit-bytes=9").stdout == "ten minut"
    wrong = local_cluster.kubectl(*logs, "-c", "nope", check=False)
    assert wrong.returncode != 0 and "container nope is not valid for pod talker" in wrong.stderr


def test_previous_reads_the_instance_before_a_restart(local_cluster: LocalCluster, namespace: str) -> None:
    with local_cluster.client() as c:
        c.create(f"/api/v1/namespaces/{namespace}/pods",
                 _pod("flaky", annotations={"gpulab.dev/run-seconds": "6", "gpulab.dev/exit-code": "1"}))
        first = _running(c, namespace, "flaky")
        no_previous = local_cluster.kubectl("logs", "-n", namespace, "flaky", "--previous", check=False)
        _store(local_cluster).write(_ref(first), "first run: about to fail")
        second = _running(c, namespace, "flaky", restarts=1)
    _store(local_cluster).write(_ref(second, restart=1), "second run")
    assert no_previous.returncode != 0
    assert 'previous terminated container "main" in pod "flaky" not found' in no_previous.stderr
    assert local_cluster.kubectl("logs", "-n", namespace, "flaky", "--previous").stdout == "first run: about to fail\n"
    assert local_cluster.kubectl("logs", "-n", namespace, "flaky").stdout == "second run\n"


def test_follow_streams_a_new_line(local_cluster: LocalCluster, namespace: str) -> None:
    with local_cluster.client() as c:
        c.create(f"/api/v1/namespaces/{namespace}/pods", _pod("follow-me"))
        pod = _running(c, namespace, "follow-me")
    store = _store(local_cluster)
    store.write(_ref(pod), "already there")
    found = binaries.cached()
    assert found is not None
    proc = subprocess.Popen([str(found.kubectl), f"--kubeconfig={local_cluster.kubeconfig}", "logs", "-f",
                             "-n", namespace, "follow-me"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "already there\n"
        store.write(_ref(pod), "written while following")
        started = time.monotonic()
        assert proc.stdout.readline() == "written while following\n"
        assert time.monotonic() - started < 5
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def tenant(local_cluster: LocalCluster) -> Iterator[tuple[str, Path]]:
    ns = f"logs-{uuid.uuid4().hex[:6]}"
    yield ns, local_cluster.backend.tenant_kubeconfig(ns)
    local_cluster.remove_tenant(ns)


def test_a_tenant_reads_logs_in_its_namespace_and_is_forbidden_elsewhere(
        local_cluster: LocalCluster, namespace: str, tenant: tuple[str, Path]) -> None:
    own, kubeconfig = tenant
    pod = _pod("mine")
    pod["spec"]["securityContext"] = {"runAsNonRoot": True, "runAsUser": 1000,
                                      "seccompProfile": {"type": "RuntimeDefault"}}
    pod["spec"]["containers"][0]["securityContext"] = {"allowPrivilegeEscalation": False,
                                                       "capabilities": {"drop": ["ALL"]}}
    pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "100m", "memory": "64Mi"}}
    with local_cluster.client() as c:
        c.create(f"/api/v1/namespaces/{own}/pods", pod)
        c.create(f"/api/v1/namespaces/{namespace}/pods", _pod("theirs"))
        mine = _running(c, own, "mine")
        _running(c, namespace, "theirs")
    _store(local_cluster).write(_ref(mine), "tenant's own line")
    assert local_cluster.kubectl("logs", "-n", own, "mine", kubeconfig=kubeconfig).stdout == "tenant's own line\n"
    denied = local_cluster.kubectl("logs", "-n", namespace, "theirs", kubeconfig=kubeconfig, check=False)
    assert denied.returncode != 0 and "(Forbidden)" in denied.stderr, denied.stderr  # kubectl reads the pod first
    raw = local_cluster.kubectl("get", "--raw", f"/api/v1/namespaces/{namespace}/pods/theirs/log",
                                kubeconfig=kubeconfig, check=False)
    assert raw.returncode != 0 and 'cannot get resource "pods/log"' in raw.stderr, raw.stderr
    own_raw = local_cluster.kubectl("get", "--raw", f"/api/v1/namespaces/{own}/pods/mine/log", kubeconfig=kubeconfig)
    assert own_raw.stdout == "tenant's own line\n"


def _kubelet_get(url: str, ca: Path, cert: tuple[Path, Path] | None) -> tuple[int, str]:
    ctx = ssl.create_default_context(cafile=str(ca))  # checks the node's IP against the serving certificate
    if cert:
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_kubelet_endpoint_refuses_every_client_but_the_api_server(local_cluster: LocalCluster) -> None:
    pki = pki_mod.Pki(local_cluster.backend.dir / "pki")
    port = json.loads((local_cluster.backend.dir / "state.json").read_text())["ports"]["kubelet"]
    with local_cluster.client() as c:
        node = c.get("/api/v1/nodes/h100-0")
    ip = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    url = f"https://{ip}:{port}/healthz"
    assert _kubelet_get(url, pki.ca_cert, None) == (401, "Unauthorized")
    admin = (pki.client_cert("admin"), pki.client_key("admin"))
    assert _kubelet_get(url, pki.ca_cert, admin) == (
        403, "Forbidden (user=gpulab-admin, verb=get, resource=nodes, subresource(s)=[healthz proxy])\n")
    apiserver = (pki.client_cert("apiserver-kubelet-client"), pki.client_key("apiserver-kubelet-client"))
    assert _kubelet_get(url, pki.ca_cert, apiserver) == (200, "ok")


def test_the_device_plugins_log_starts_with_the_plugins_own_lines(local_cluster: LocalCluster,
                                                                   gpu_operator: Client) -> None:
    def plugin_pod() -> str | None:
        pods = gpu_operator.get("/api/v1/namespaces/gpu-operator/pods",
                                fieldSelector="spec.nodeName=t4-0")["items"]
        return next((p["metadata"]["name"] for p in pods
                     if p["metadata"]["name"].startswith("nvidia-device-plugin-daemonset")
                     and p.get("status", {}).get("phase") == "Running"), None)
    name = wait_for(plugin_pod, 60, what="the device plugin's pod on t4-0 running")
    out = local_cluster.kubectl("logs", "-n", "gpu-operator", name, "-c", "nvidia-device-plugin").stdout
    lines = out.splitlines()
    assert lines[0] == "Starting nvidia-device-plugin"
    assert lines[1].endswith("main.go:253] Starting FS watcher for /var/lib/kubelet/device-plugins"), lines


def test_the_config_manager_logs_each_label_change_as_the_real_sidecar(local_cluster: LocalCluster,
                                                                      gpu_operator: Client) -> None:
    """``DP cmd/config-manager/main.go`` v0.19.1 (``operand_logs``, shared with the kind tier)."""
    def logs(pod: str, container: str) -> str:
        return str(local_cluster.kubectl("logs", "-n", "gpu-operator", pod, "-c", container, check=False).stdout)
    operand_logs.assert_config_manager_said(operand_logs.config_manager_turn(gpu_operator, "l40s-0", logs))
