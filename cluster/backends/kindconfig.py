"""Turn a fleet into a kind cluster config, and a fleet node into the patch that makes a kind worker look like it.

Pure data in, pure data out: nothing here runs kind or talks to an API server. Each simulated node becomes one
kind worker (a Docker container running a real kubelet), so the fleet is capped at ``MAX_WORKERS``. Labels that a
kubelet may set on itself go into the kind config, so they are there from the moment the node registers; taints go
into kubeadm's JoinConfiguration for the same reason, so no pod can land on a GPU node before it is tainted. The
rest (labels in the ``kubernetes.io`` namespaces, the hardware annotation) is applied through the API by ``kind.py``
once the cluster is up. Extended resources (``nvidia.com/gpu`` ...) are the kubelet's: every worker runs gpulab's
node plugin (``cluster/gosrc/kindplugin``, mounted into it with a systemd unit, see ``NodePlugin``), which registers
the devices the simulated GPU stack on the host lists for that node.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from cluster import errors, fleet as fleet_mod, versions
from cluster.sim import nodes
from cluster.sim.gpu import devicefile
from cluster.sim.kubelet import logsocket

API_VERSION = "kind.x-k8s.io/v1alpha4"
MAX_WORKERS = 8
FLEET_NODE_LABEL = "gpulab.dev/fleet-node"

# Set by the real kubelet from the machine it runs on; copying the simulated values over them would be a lie.
KUBELET_OWNED_LABELS = frozenset({
    "kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch", "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
})


@dataclass(frozen=True)
class Worker:
    """One simulated node of the fleet and the kind worker that stands in for it."""

    fleet_node: str  # also the Node's name: kubeadm registers the worker under it
    kind_node: str  # the container kind runs it in
    pool: fleet_mod.NodePool
    node: dict[str, Any]  # the Node object the local backend would register (cluster.sim.nodes.build_node)


# Where the node plugin and its units sit inside a node (mounted read-only from the host).
PLUGIN_BINARY = "/usr/local/bin/gpulab-device-plugin"
PLUGIN_UNIT = "/etc/systemd/system/gpulab-device-plugin.service"
KUBELET_DROP_IN = "/etc/systemd/system/kubelet.service.d/20-gpulab-device-plugin.conf"
# The step that gives every container of a worker the GPU stack's log socket folder, before containerd starts.
BASE_SPEC_UNIT = "/etc/systemd/system/gpulab-base-spec.service"
CONTAINERD_DROP_IN = "/etc/systemd/system/containerd.service.d/20-gpulab-base-spec.conf"
CRI_BASE_SPEC = "/etc/containerd/cri-base.json"  # containerd's CRI base_runtime_spec in kind's config.toml


@dataclass(frozen=True)
class NodePlugin:
    """The host files every worker mounts to run gpulab's node plugin, and the folder of the devices files."""

    binary: Path  # the static kindplugin build
    unit: Path  # systemd unit running it (``unit_text``)
    drop_in: Path  # kubelet drop-in that starts it with the kubelet (``drop_in_text``)
    devices_root: Path  # <root>/<fleet node>/devices.json, written by the GPU stack (cluster.sim.gpu.devicefile)
    base_spec_unit: Path  # oneshot unit adding the log socket folder to containerd's base spec (base_spec_unit_text)
    containerd_drop_in: Path  # containerd drop-in that runs it first (``containerd_drop_in_text``)

    def mounts(self, fleet_node: str) -> list[dict[str, Any]]:
        return [
            {"hostPath": str(self.binary), "containerPath": PLUGIN_BINARY, "readOnly": True},
            {"hostPath": str(self.unit), "containerPath": PLUGIN_UNIT, "readOnly": True},
            {"hostPath": str(self.drop_in), "containerPath": KUBELET_DROP_IN, "readOnly": True},
            {"hostPath": str(self.base_spec_unit), "containerPath": BASE_SPEC_UNIT, "readOnly": True},
            {"hostPath": str(self.containerd_drop_in), "containerPath": CONTAINERD_DROP_IN, "readOnly": True},
            {"hostPath": str(self.devices_root / fleet_node), "containerPath": devicefile.NODE_DIR, "readOnly": True},
        ]


def unit_text() -> str:
    """The node plugin as a systemd service: restarted if it ever exits, and there again after `docker start`."""
    return ("[Unit]\nDescription=gpulab device plugin (simulated NVIDIA GPUs, registered with the kubelet)\n"
            "After=kubelet.service\n\n[Service]\n"
            f"ExecStart={PLUGIN_BINARY} --devices={devicefile.NODE_DIR}/{devicefile.FILE_NAME}\n"
            "Restart=always\nRestartSec=1\n")


def drop_in_text() -> str:
    """A kubelet drop-in: whenever the kubelet starts, so does the node plugin (kind enables only its own units)."""
    return "[Unit]\nWants=gpulab-device-plugin.service\n"


def base_spec_unit_text() -> str:
    """A oneshot run of the node plugin's binary before containerd starts: it adds a read-only bind of the node's
    log socket folder (``logsocket.DIR_NAME`` under the devices folder) at ``logsocket.CONTAINER_DIR`` to the base
    runtime spec containerd's CRI plugin builds every container from, so each container's stand-in program can ask
    the GPU stack for its log lines. Done at every boot (the node's root file system keeps it; the step adds it once)."""
    source = f"{devicefile.NODE_DIR}/{logsocket.DIR_NAME}"
    return ("[Unit]\nDescription=gpulab: the GPU stack's log socket folder in every container (containerd base spec)\n"
            "Before=containerd.service\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\n"
            f"ExecStart={PLUGIN_BINARY} --base-spec={CRI_BASE_SPEC} "
            f"--base-spec-mount={source}:{logsocket.CONTAINER_DIR}\n")


def containerd_drop_in_text() -> str:
    """A containerd drop-in: the base spec step runs (and ends) before containerd reads the spec."""
    return "[Unit]\nWants=gpulab-base-spec.service\nAfter=gpulab-base-spec.service\n"


def worker_names(cluster_name: str, count: int) -> list[str]:
    """The container names kind gives workers: ``<name>-worker``, ``<name>-worker2``, ... (the Nodes are named
    after the fleet's nodes, through kubeadm's join configuration)."""
    return [f"{cluster_name}-worker{'' if i == 0 else i + 1}" for i in range(count)]


def check_size(fl: fleet_mod.Fleet) -> None:
    if fl.node_count > MAX_WORKERS:
        raise errors.ConfigError(
            f"fleet {fl.name!r}",
            [f"spec.pools: {fl.node_count} nodes, but the kind backend runs at most {MAX_WORKERS} workers "
             "(each one is a Docker container with a real kubelet, containerd and CNI)"],
            hint="use a smaller fleet (`gpulab up --backend kind --fleet starter` has 6 nodes), or the local backend, "
            "which simulates thousands of nodes without Docker",
        )
    if fl.node_count == 0:
        raise errors.ConfigError(f"fleet {fl.name!r}", ["spec.pools: the fleet has no nodes"])


def plan(fl: fleet_mod.Fleet, cluster_name: str) -> list[Worker]:
    """Pair every fleet node with the kind worker that will play it, in fleet order."""
    check_size(fl)
    built = nodes.build_all(fl)
    names = worker_names(cluster_name, len(built))
    return [Worker(node["metadata"]["name"], kind_name, _pool(fl, node["metadata"]["name"]), node)
            for node, kind_name in zip(built, names)]


def _pool(fl: fleet_mod.Fleet, node_name: str) -> fleet_mod.NodePool:
    pool = fl.pool_of(node_name)
    assert pool is not None, node_name  # build_all only makes nodes of the fleet's pools
    return pool


def _kubelet_may_set(key: str) -> bool:
    """Whether a kubelet may put this label on its own Node (NodeRestriction forbids most of kubernetes.io)."""
    domain = key.split("/", 1)[0] if "/" in key else ""
    return not any(domain == d or domain.endswith("." + d) for d in ("kubernetes.io", "k8s.io"))


def kubelet_labels(w: Worker) -> dict[str, str]:
    labels = {k: v for k, v in w.node["metadata"]["labels"].items() if _kubelet_may_set(k)}
    labels[FLEET_NODE_LABEL] = w.fleet_node
    return dict(sorted(labels.items()))


def _join_patch(node_name: str, taints: tuple[fleet_mod.Taint, ...]) -> str:
    """A kubeadm JoinConfiguration patch (no apiVersion, so kind applies it to whichever kubeadm version it uses):
    the Node takes the fleet node's name (kubeadm then runs the kubelet with ``--hostname-override``), and the
    pool's taints from the moment it registers."""
    registration: dict[str, Any] = {"name": node_name}
    if taints:
        registration["taints"] = [t.to_api() for t in taints]
    return _yaml({"kind": "JoinConfiguration", "nodeRegistration": registration})


# The kubelet learns a device's health from its plugin at once, but publishes it in the node's status only at its
# next status computation (every nodeStatusUpdateFrequency, 10 s by default: kubelet pkg/kubelet/kubelet.go
# syncNodeStatus); meanwhile the scheduler may bind a pod that the kubelet then refuses (UnexpectedAdmissionError,
# "requested number of devices unavailable"). The labs change GPU health and sharing within seconds, so kind's
# kubelets look every second; they still write the status only when it changed (nodeStatusReportFrequency).
_KUBELET_PATCH = ("kind: KubeletConfiguration\nnodeStatusUpdateFrequency: 1s\nnodeStatusReportFrequency: 5m\n")


def config(fl: fleet_mod.Fleet, cluster_name: str, node_plugin: NodePlugin | None = None) -> dict[str, Any]:
    """The kind ``Cluster`` config for a fleet: one control plane and one worker per simulated node, each running
    the node plugin when ``node_plugin`` is given."""
    workers = plan(fl, cluster_name)
    node_list: list[dict[str, Any]] = [{"role": "control-plane", "image": versions.KIND_NODE_IMAGE}]
    for w in workers:
        entry: dict[str, Any] = {"role": "worker", "image": versions.KIND_NODE_IMAGE, "labels": kubelet_labels(w),
                                 "kubeadmConfigPatches": [_join_patch(w.fleet_node, w.pool.taints)]}
        if node_plugin is not None:
            entry["extraMounts"] = node_plugin.mounts(w.fleet_node)
        node_list.append(entry)
    return {
        "kind": "Cluster",
        "apiVersion": API_VERSION,
        "name": cluster_name,
        # The API server is published on loopback only: a lab cluster is nobody else's business.
        "networking": {"apiServerAddress": "127.0.0.1"},
        "kubeadmConfigPatches": [_KUBELET_PATCH],
        "nodes": node_list,
    }


def render(cfg: dict[str, Any]) -> str:
    return "# Generated by gpulab from a fleet spec; edit the fleet, not this file.\n" + _yaml(cfg)


def _yaml(doc: dict[str, Any]) -> str:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    buf = io.StringIO()
    yaml.dump(doc, buf)
    return buf.getvalue()


def metadata_patch(w: Worker, current: dict[str, Any]) -> dict[str, Any]:
    """A merge patch giving a kind worker the fleet node's labels, hardware annotation and taints.

    ``current`` is the Node as the API has it; its taints are kept (merge patches replace lists whole), and its
    resourceVersion makes the patch fail with a conflict rather than drop a taint added meanwhile.
    """
    labels = {k: v for k, v in w.node["metadata"]["labels"].items() if k not in KUBELET_OWNED_LABELS}
    labels[FLEET_NODE_LABEL] = w.fleet_node
    have = list(current.get("spec", {}).get("taints", []))
    keys = {(t.get("key"), t.get("effect")) for t in have}
    taints = have + [t.to_api() for t in w.pool.taints if (t.key, t.effect) not in keys]
    return {
        "metadata": {
            "resourceVersion": current["metadata"]["resourceVersion"],
            "labels": labels,
            "annotations": {nodes.HARDWARE_ANNOTATION: w.node["metadata"]["annotations"][nodes.HARDWARE_ANNOTATION]},
        },
        "spec": {"taints": taints},
    }
