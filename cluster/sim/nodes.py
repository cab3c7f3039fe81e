"""Build Node objects for a fleet's simulated nodes.

A node gets what a real kubelet would register: labels, taints, capacity and allocatable (pods, cpu, memory,
ephemeral-storage), Ready and pressure conditions, addresses, its kubelet's port and nodeInfo. GPUs are *hardware*
here, recorded in the ``gpulab.dev/hardware`` annotation; no ``nvidia.com/gpu`` is advertised until the simulated
device plugin runs, as on a real node before the GPU Operator is installed.

Addresses are loopback ones: a node's InternalIP is its own 127.1.x.y, where its simulated kubelet listens
(``cluster.sim.kubelet.server``), and the API server, started with ``--kubelet-preferred-address-types=InternalIP``,
dials that address and never looks the node's name up in DNS (docs/local-backend.md, "Node addresses").
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


DEFAULT_KUBELET_PORT = 10250  # a kubelet's; the local backend gives each cluster its own (several share a host)
FIRST_NODE_IP = "127.1.0.1"
KERNEL_VERSION = "6.8.0-gpulab"  # every simulated node's (nodeInfo.kernelVersion; the driver container loads for it)


def node_ip(index: int) -> str:
    """The ``index``-th node's InternalIP in 127.1.0.0/16 (loopback, so nothing sent to it leaves the machine):
    127.1.0.1 to 127.1.0.250, then 127.1.1.1, ... (up to 64,000 nodes)."""
    if not 0 <= index < 256 * 250:
        raise ValueError(f"no loopback address for node number {index}")
    return f"127.1.{index // 250}.{index % 250 + 1}"


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


def addresses(ip: str, name: str) -> list[dict[str, str]]:
    return [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}]


# What a 1.36 kubelet with its default feature gates declares in ``Node.status.declaredFeatures`` (the
# ``component-helpers/nodedeclaredfeatures`` registry: each feature whose gate is on, beta and on by default in
# 1.36; ``UserNamespacesHostNetworkSupport`` is alpha). ``ExtendWebSocketsToKubelet`` is what makes the API server
# hand a WebSocket ``kubectl exec`` straight to the node's kubelet endpoint (``cluster.sim.kubelet``).
DECLARED_FEATURES = ("ExtendWebSocketsToKubelet", "InPlacePodLevelResourcesVerticalScaling",
                     "InPlacePodVerticalScalingInitContainers", "RestartAllContainersOnContainerExits")


def daemon_endpoints(kubelet_port: int) -> dict[str, Any]:
    return {"kubeletEndpoint": {"Port": kubelet_port}}


def build_node(pool: fleet_mod.NodePool, name: str, index: int,
               kubelet_port: int = DEFAULT_KUBELET_PORT) -> dict[str, Any]:
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
            "addresses": addresses(node_ip(index), name),
            "daemonEndpoints": daemon_endpoints(kubelet_port),
            "declaredFeatures": list(DECLARED_FEATURES),
            "nodeInfo": {
                "machineID": machine,
                "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
                "bootID": str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
                "kernelVersion": KERNEL_VERSION,
                "osImage": "gpulab simulated node (Ubuntu 24.04 LTS)",
                "containerRuntimeVersion": "containerd://2.1.4",
                "kubeletVersion": versions.KUBERNETES_VERSION,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def build_all(fl: fleet_mod.Fleet, kubelet_port: int = DEFAULT_KUBELET_PORT) -> list[dict[str, Any]]:
    out = []
    index = 0
    for pool in fl.pools:
        for name in pool.node_names():
            out.append(build_node(pool, name, index, kubelet_port))
            index += 1
    return out


def plan_addresses(fl: fleet_mod.Fleet) -> list[tuple[str, str]]:
    """(node name, InternalIP) of every node of the fleet, in the order ``build_all`` numbers them."""
    names = [name for pool in fl.pools for name in pool.node_names()]
    return [(name, node_ip(i)) for i, name in enumerate(names)]
