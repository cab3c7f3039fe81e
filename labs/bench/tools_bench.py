"""The troubleshooting tools' latency, as a learner types them: ``kubectl logs`` of the device plugin and
``kubectl exec POD -- nvidia-smi -L`` in a pod holding a GPU, each a whole ``kubectl`` run (its start, the API
server, the node's kubelet endpoint on loopback, the reply), on the starter fleet with the GPU Operator installed.
Targets (issue 27): logs at most 0.5 s, exec of nvidia-smi at most 1 s."""

from __future__ import annotations

import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from cluster import binaries, errors
from cluster.kube.client import Client
from labs.bench.figures import Figure

LOGS = "kubectl logs of the device plugin (one kubectl run)"
EXEC = "kubectl exec nvidia-smi -L in a GPU pod (one kubectl run)"
LOGS_TARGET_S, EXEC_TARGET_S = 0.5, 1.0
NAMESPACE = "bench-tools"
NODE = "h100-0"
WAIT_S = 90.0


def planned() -> list[Figure]:
    return [Figure(LOGS, None, "s", LOGS_TARGET_S), Figure(EXEC, None, "s", EXEC_TARGET_S)]


def _wait(what: str, probe: Any) -> Any:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.2)
    raise TimeoutError(f"{what}: not within {WAIT_S:.0f} s")


def _running(client: Client, namespace: str, prefix: str) -> str | None:
    pods = client.get(f"/api/v1/namespaces/{namespace}/pods", fieldSelector=f"spec.nodeName={NODE}")["items"]
    for p in pods:
        statuses = p.get("status", {}).get("containerStatuses") or []
        if p["metadata"]["name"].startswith(prefix) and statuses and all("running" in s["state"] for s in statuses):
            return str(p["metadata"]["name"])
    return None


def _timed(argv: list[str], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        times.append(time.monotonic() - started)
        if proc.returncode != 0:
            raise errors.ClusterError(f"{' '.join(argv[2:])} failed: {proc.stderr.strip()[-300:]}")
    return times


def _figure(name: str, times: list[float], target: float, what: str) -> Figure:
    ordered = sorted(times)
    return Figure(name, round(statistics.median(ordered), 3), "s", target,
                  note=f"median of {len(ordered)}, min {ordered[0]:.3f} s, max {ordered[-1]:.3f} s; {what}")


def figures(client: Client, kubeconfig: Path, repeat: int) -> list[Figure]:
    """Both figures on a cluster whose GPU Operator is installed; the bench pod is removed afterwards."""
    found = binaries.cached()
    if found is None:
        raise errors.ClusterError("kubectl is not in the binaries' cache")
    kubectl = [str(found.kubectl), f"--kubeconfig={kubeconfig}"]
    plugin = _wait("the device plugin's pod running on " + NODE,
                   lambda: _running(client, "gpu-operator", "nvidia-device-plugin-daemonset"))
    client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    try:
        client.create(f"/api/v1/namespaces/{NAMESPACE}/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "smi"},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": NODE},
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": [{"name": "cuda", "image": "nvcr.io/nvidia/cuda:12.9.1-base-ubuntu24.04",
                                     "command": ["sleep", "infinity"],
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
        _wait("the bench's GPU pod running", lambda: _running(client, NAMESPACE, "smi"))
        logs = _timed([*kubectl, "logs", "-n", "gpu-operator", plugin, "-c", "nvidia-device-plugin"], repeat)
        execs = _timed([*kubectl, "exec", "-n", NAMESPACE, "smi", "--", "nvidia-smi", "-L"], repeat)
    finally:
        try:
            client.delete(f"/api/v1/namespaces/{NAMESPACE}")
        except errors.NotFound:
            pass
    return [_figure(LOGS, logs, LOGS_TARGET_S, f"kubectl logs -n gpu-operator {plugin} -c nvidia-device-plugin"),
            _figure(EXEC, execs, EXEC_TARGET_S, "kubectl exec -n bench-tools smi -- nvidia-smi -L (1 of the 8 "
                                                "H100s of h100-0)")]
