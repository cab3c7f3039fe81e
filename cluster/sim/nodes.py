"""Build Node objects for a fleet's simulated nodes.

A node gets what a real kubelet would register: labels, taints, capacity and allocatable (pods, cpu, memory,
ephemeral-storage), Ready and pressure conditions, addresses and nodeInfo. GPUs are *hardware* here, recorded in
the ``gpulab.dev/hardware`` annotation; no ``nvidia.com/gpu`` is advertised until the simulated device plugin runs,
as on a real node before the GPU Operator is installed.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import uuid
from typing import Any

from cluster import fleet as fleet_mod, versions

SIMULATED_ANNOTATION = "gpulab.dev/simulated"
HARDWARE_ANNOTATION = "gpulab.dev/hardware"
HEARTBEAT_ANNOTATION = "gpulab.dev/heartbeat"
POOL_LABEL = "gpulab.dev/pool"


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_ip(index: int) -> str:
    """A documentation-range address (TEST-NET-2); nothing is ever sent to it."""
    return f"198.51.{100 + (index // 250) % 10}.{index % 250 + 1}"


def hardware(pool: fleet_mod.NodePool) -> dict[str, Any]:
    if pool.gpu is None:
        return {"gpus": 0}
    return {
        "gpus": pool.gpu.count,
        "model": pool.gpu.model.key,
        "numaNodes": pool.gpu.topology.numa_nodes,
        "nvlink": pool.gpu.topology.nvlink,
    }


def ready_conditions(ready: bool = True, at: str | None = None) -> list[dict[str, str]]:
    ts = at or now()
    conds = [
        {"type": t, "status": "False", "reason": f"KubeletHas{r}", "message": m,
         "lastHeartbeatTime": ts, "lastTransitionTime": ts}
        for t, r, m in (
            ("MemoryPressure", "SufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "NoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "SufficientPID", "kubelet has sufficient PID available"),
        )
    ]
    conds.append({
        "type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady" if ready else "KubeletNotReady",
        "message": "kubelet is posting ready status" if ready else "simulated kubelet stopped",
        "lastHeartbeatTime": ts, "lastTransitionTime": ts,
    })
    return conds


def build_node(pool: fleet_mod.NodePool, name: str, index: int) -> dict[str, Any]:
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": f"gpulab-{pool.name}",
        POOL_LABEL: pool.name,
        **pool.labels,
    }
    resources = {"cpu": pool.cpu, "memory": pool.memory, "pods": str(pool.pods), "ephemeral-storage": "500Gi",
                 "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
    machine = hashlib.sha256(name.encode()).hexdigest()[:32]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                SIMULATED_ANNOTATION: "true",
                HARDWARE_ANNOTATION: json.dumps(hardware(pool), sort_keys=True),
                "node.alpha.kubernetes.io/ttl": "0",
            },
        },
        "spec": {"taints": [t.to_api() for t in pool.taints]} if pool.taints else {},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": ready_conditions(),
            "addresses": [{"type": "InternalIP", "address": node_ip(index)}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": machine,
                "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
                "bootID": str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
                "kernelVersion": "6.8.0-gpulab",
                "osImage": "gpulab simulated node (Ubuntu 24.04 LTS)",
                "containerRuntimeVersion": "containerd://2.1.4",
                "kubeletVersion": versions.KUBERNETES_VERSION,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def build_all(fl: fleet_mod.Fleet) -> list[dict[str, Any]]:
    out = []
    index = 0
    for pool in fl.pools:
        for name in pool.node_names():
            out.append(build_node(pool, name, index))
            index += 1
    return out
