"""``kubectl exec`` on the local backend, through the real API server and kubectl 1.36: the simulated nodes declare
``ExtendWebSocketsToKubelet`` as a 1.36 kubelet does, so the API server hands the WebSocket straight to the node's
kubelet endpoint (on its loopback InternalIP), and ``nvidia-smi`` in a pod prints what the real tool prints for
the GPUs the device plugin gave that pod. Exit codes, a program missing from the image, ``-it``, and RBAC on
``pods/exec`` (a tenant execs in its own namespace only) behave as on a real cluster."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from cluster.gpu.nvidia_smi import cli as smi_cli, view as smi_view
from cluster.kube.client import Client
from cluster.sim.gpu import hoststate
from cluster.testing import LocalCluster, wait_for
from gpu_e2e import gpu_operator

__all__ = ["gpu_operator"]

H100 = "h100-0"  # the starter fleet's 8 x H100 80GB HBM3 node: 96 CPUs, 2 NUMA nodes, NVLink


def _gpu_pod(name: str, gpus: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeSelector": {"gpulab.dev/pool": "h100"},
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": [{"name": "cuda", "image": "nvcr.io/nvidia/cuda:12.9.1-base-ubuntu24.04",
                                     "command": ["sleep", "infinity"],
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def _running(c: Client, ns: str, name: str) -> dict[str, Any]:
    def ready() -> dict[str, Any] | None:
        pod = c.get(f"/api/v1/namespaces/{ns}/pods/{name}")
        statuses = pod.get("status", {}).get("containerStatuses") or []
        return pod if statuses and all("running" in s["state"] for s in statuses) else None
    found: dict[str, Any] = wait_for(ready, 60, what=f"{ns}/{name} running")
    return found


def _expected(c: Client, pod: dict[str, Any], args: list[str]) -> str:
    """What the simulated nvidia-smi prints for the devices the pod was given (unit tests hold that against the
    recordings of the real tool)."""
    node = c.get(f"/api/v1/nodes/{H100}")
    inv = hoststate.inventory_of(node)
    assert inv is not None
    visible = ",".join(g.uuid for g in inv.gpus if g.uuid in str(pod["metadata"]["annotations"]))
    host = smi_view.simulated_host(inv, cpus=96, numa_nodes=2, nvlink=True)
    view = smi_view.container(host, visible)
    assert view is not None
    return smi_cli.run(view, args, datetime.now(timezone.utc)).stdout


@pytest.fixture(scope="module")
def trainer(local_cluster: LocalCluster, gpu_operator: Client) -> Iterator[tuple[str, dict[str, Any]]]:
    ns = local_cluster.namespace()
    gpu_operator.create(f"/api/v1/namespaces/{ns}/pods", _gpu_pod("trainer", 8))
    yield ns, _running(gpu_operator, ns, "trainer")
    local_cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def test_nvidia_smi_in_a_pod_holding_the_8_h100s(local_cluster: LocalCluster, gpu_operator: Client,
                                                 trainer: tuple[str, dict[str, Any]]) -> None:
    ns, pod = trainer
    exec_ = ("exec", "-n", ns, "trainer", "--", "nvidia-smi")
    listed = local_cluster.kubectl(*exec_, "-L").stdout
    assert listed.count("GPU ") == 8 and listed.startswith("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-")
    assert listed == _expected(gpu_operator, pod, ["-L"])
    query = ["--query-gpu=gpu_name,gpu_uuid,memory.total", "--format=csv,noheader"]
    csv = local_cluster.kubectl(*exec_, *query).stdout
    assert csv.splitlines()[0].startswith("NVIDIA H100 80GB HBM3, GPU-") and csv.splitlines()[0].endswith(
        ", 81559 MiB")
    assert csv == _expected(gpu_operator, pod, query)
    topo = local_cluster.kubectl(*exec_, "topo", "-m").stdout
    assert topo == _expected(gpu_operator, pod, ["topo", "-m"])
    assert topo.splitlines()[1].split()[:9] == ["GPU0", "X", "NV18", "NV18", "NV18", "NV18", "NV18", "NV18", "NV18"]


def test_exit_codes_and_a_program_missing_from_the_image(local_cluster: LocalCluster,
                                                         trainer: tuple[str, dict[str, Any]]) -> None:
    ns, _pod = trainer
    bad = local_cluster.kubectl("exec", "-n", ns, "trainer", "--", "nvidia-smi", "--bogus", check=False)
    assert bad.returncode == 255, (bad.returncode, bad.stderr)
    assert bad.stdout.startswith("ERROR: Option --bogus is not recognized.")
    assert bad.stderr == "command terminated with exit code 255\n"
    missing = local_cluster.kubectl("exec", "-n", ns, "trainer", "--", "ls", check=False)
    assert missing.returncode == 1
    assert missing.stderr.startswith("error: Internal error occurred: Internal error occurred: error executing "
                                     "command in container: failed to exec in container: failed to start exec")
    assert 'exec: "ls": executable file not found in $PATH: unknown' in missing.stderr
    shell = local_cluster.kubectl("exec", "-n", ns, "trainer", "--", "sh", "-c", "nvidia-smi -L >/dev/null",
                                  check=False)
    assert shell.returncode == 127 and shell.stderr.startswith("sh: 1: nvidia-smi: not found")
    tty = local_cluster.kubectl("exec", "-i", "-n", ns, "trainer", "--", "nvidia-smi", "-L", input="")
    assert tty.stdout.count("GPU ") == 8
    shell = local_cluster.kubectl("exec", "-i", "-n", ns, "trainer", "--", "bash", input="nvidia-smi -L\nexit 4\n",
                                  check=False)  # a shell reading its commands from kubectl's input
    assert shell.returncode == 4 and shell.stdout.count("GPU ") == 8, (shell.returncode, shell.stderr)


def test_a_cpu_pod_has_no_nvidia_smi(local_cluster: LocalCluster, namespace: str) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain"},
           "spec": {"nodeSelector": {"gpulab.dev/pool": "cpu"},
                    "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "3600"]}]}}
    with local_cluster.client() as c:
        c.create(f"/api/v1/namespaces/{namespace}/pods", pod)
        _running(c, namespace, "plain")
    out = local_cluster.kubectl("exec", "-n", namespace, "plain", "--", "nvidia-smi", check=False)
    assert out.returncode == 1 and 'exec: "nvidia-smi": executable file not found in $PATH' in out.stderr


@pytest.fixture
def tenant(local_cluster: LocalCluster) -> Iterator[tuple[str, Path]]:
    ns = f"exec-{uuid.uuid4().hex[:6]}"
    yield ns, local_cluster.backend.tenant_kubeconfig(ns)
    local_cluster.remove_tenant(ns)


def test_a_tenant_execs_in_its_own_namespace_only(local_cluster: LocalCluster, namespace: str,
                                                  tenant: tuple[str, Path]) -> None:
    own, kubeconfig = tenant
    restricted = {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}
    container = {"name": "main", "image": "busybox:1.36", "command": ["sleep", "3600"],
                 "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                 "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}}
    with local_cluster.client() as c:
        c.create(f"/api/v1/namespaces/{own}/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "mine"},
                                                   "spec": {"securityContext": restricted,
                                                            "containers": [container]}})
        c.create(f"/api/v1/namespaces/{namespace}/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "theirs"},
            "spec": {"containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "3600"]}]}})
        _running(c, own, "mine")
        _running(c, namespace, "theirs")
    mine = local_cluster.kubectl("exec", "-n", own, "mine", "--", "sh", "-c", "echo hello", kubeconfig=kubeconfig)
    assert mine.stdout == "hello\n"
    theirs = local_cluster.kubectl("exec", "-n", namespace, "theirs", "--", "sh", "-c", "echo hello",
                                   kubeconfig=kubeconfig, check=False)
    assert theirs.returncode != 0 and "(Forbidden)" in theirs.stderr, theirs.stderr


def test_nvidia_smi_in_the_gpu_stacks_own_pods(local_cluster: LocalCluster, gpu_operator: Client) -> None:
    """The device plugin's container has ``NVIDIA_VISIBLE_DEVICES=all`` (the operator's asset), the driver's has
    the driver itself: both see every GPU of the node. The toolkit's gets nothing injected."""
    def pod_of(prefix: str) -> str | None:
        pods = gpu_operator.get("/api/v1/namespaces/gpu-operator/pods", fieldSelector=f"spec.nodeName={H100}")["items"]
        return next((p["metadata"]["name"] for p in pods if p["metadata"]["name"].startswith(prefix)
                     and all("running" in s["state"] for s in p.get("status", {}).get("containerStatuses") or [{}])),
                    None)
    for prefix, container, gpus in (("nvidia-device-plugin-daemonset", "nvidia-device-plugin", 8),
                                    ("nvidia-driver-daemonset", "nvidia-driver-ctr", 8),
                                    ("nvidia-container-toolkit-daemonset", "nvidia-container-toolkit-ctr", 0)):
        name = wait_for(lambda: pod_of(prefix), 60, what=f"{prefix} running on {H100}")
        out = local_cluster.kubectl("exec", "-n", "gpu-operator", name, "-c", container, "--", "nvidia-smi", "-L",
                                    check=False)
        if gpus:
            assert out.returncode == 0 and out.stdout.count("GPU ") == gpus, (prefix, out.stdout, out.stderr)
        else:
            assert out.returncode == 1 and "executable file not found in $PATH" in out.stderr, (prefix, out.stderr)


def test_an_interactive_shell_through_a_terminal(local_cluster: LocalCluster,
                                                 trainer: tuple[str, dict[str, Any]]) -> None:
    """``kubectl exec -it trainer -- bash`` from a terminal (a pseudo-terminal here): the prompt, the echo of what
    is typed, ``nvidia-smi -L``'s output, and ``exit``."""
    import os
    import pty
    import select
    import subprocess
    import time

    from cluster import binaries

    ns, _pod = trainer
    found = binaries.cached()
    assert found is not None
    main, child = pty.openpty()
    proc = subprocess.Popen([str(found.kubectl), f"--kubeconfig={local_cluster.kubeconfig}", "exec", "-it", "-n", ns,
                             "trainer", "--", "bash"], stdin=child, stdout=child, stderr=child, close_fds=True)
    os.close(child)
    seen = b""

    def read_until(marker: bytes, timeout: float = 20) -> None:
        nonlocal seen
        deadline = time.monotonic() + timeout
        while marker not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.2)
            if ready:
                try:
                    seen += os.read(main, 65536)
                except OSError:
                    break
        assert marker in seen, seen[-2000:]

    try:
        read_until(b"root@trainer:/# ")
        os.write(main, b"nvidia-smi -L\r")
        read_until(b"GPU 7: NVIDIA H100 80GB HBM3")
        os.write(main, b"exit\r")
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)
    assert b"root@trainer:/# nvidia-smi -L\r\n" in seen
