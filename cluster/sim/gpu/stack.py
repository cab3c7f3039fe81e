"""The simulated NVIDIA GPU stack as one supervised process: ``python -m cluster.sim.gpu.stack --kubeconfig K``.

It watches nodes, pods, the operator namespace's ConfigMaps and the ClusterPolicy, and runs the controllers as
asyncio tasks: the operator (node labels, operand DaemonSets, policy status), the device plugin and GFD, the
validator gate, the MIG manager, the DRA driver and the DCGM exporter. Until a ClusterPolicy exists it only
watches. It must not schedule or bind pods: the real kube-scheduler does that.

On kind (``--device-dir``) it also serves each node's sockets: nvidia-smi (``smisocket``) and, with ``--pod-logs``,
the log lines its containers print (``logsocket``). There no pod agent plays the container runtime, so the stack
starts each container instance's log itself when the kubelet reports the container (the start-up lines the pod
agent writes on ``local``), and removes a pod's logs with the pod.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import Any

from cluster import errors
from cluster.kube import kubeconfig
from cluster.kube.client import AsyncClient
from cluster.sim import informer, runner
from cluster.sim.gpu import (dcgm_exporter, devicefile, events, faillogs, names, operands, operatorctl, reconcile,
                             startlogs, world as world_mod)
from cluster.sim.kubelet import logsocket, logstore, smisocket

log = logging.getLogger("gpulab.gpu-stack")
POLICY_POLL = 1.0
STATUS_EVERY = 0.5


class Stack:
    def __init__(self, client: AsyncClient, device_checkpoint: Path | None = None,
                 device_dir: Path | None = None, logs: logstore.LogStore | None = None) -> None:
        self.client = client
        self.world = world_mod.World()
        self.recorder = events.Recorder(client, "gpu-operator")
        self.nodes = reconcile.NodeReconciler(client, self.world, self.recorder, device_checkpoint,
                                              devicefile.Writer(device_dir) if device_dir is not None else None, logs)
        self.operator = operatorctl.OperatorController(client, self.world)
        self.exporter = dcgm_exporter.Exporter(client, self.world, events.Recorder(client, "kubelet"),
                                               self.nodes.operand_states, device_checkpoint, logs)
        self.node_informer = informer.Informer(client, "/api/v1/nodes", self.on_node)
        self.pod_informer = informer.Informer(client, "/api/v1/pods", self.on_pod, fieldSelector="spec.nodeName!=")
        self.cm_informer = informer.Informer(client, f"/api/v1/namespaces/{names.NAMESPACE}/configmaps", self.on_configmap)
        self._endpoint_published = False
        # On kind (a devices dir): each node's nvidia-smi socket, for the client the node plugin mounts into pods.
        self.smi = smisocket.SmiSockets(device_dir, self.world.nodes) if device_dir is not None else None
        # On kind with a log store: each node's log socket, for the stand-in containers to print the stack's lines.
        self.logs = logs
        self.log_sockets = logsocket.LogSockets(device_dir, logs, self.world.pods_on) \
            if device_dir is not None and logs is not None else None
        if self.log_sockets is not None and logs is not None:
            logs.on_write = self.log_sockets.wrote
        # Set once the ClusterPolicy (or its absence) is known. Nodes are reconciled only after that: a stack started
        # again after a crash would otherwise take "no policy read yet" for "operator uninstalled" and strip every
        # GPU node's resources and labels until the policy arrived.
        self.policy_known = asyncio.Event()

    # --- event handlers ---------------------------------------------------------------------------------------

    async def on_node(self, event: str, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        if event == "DELETED":
            self.world.nodes.pop(name, None)
        else:
            self.world.nodes[name] = node
        for sockets in (self.smi, self.log_sockets):
            if sockets is not None:
                await (sockets.close(name) if event == "DELETED" else sockets.ensure(name))
        if self.world.policy is not None or event == "DELETED" or _has_gpu_state(node):
            self.nodes.queue.add(name)

    async def on_pod(self, event: str, pod: dict[str, Any]) -> None:
        self.world.put_pod(event, pod)
        if self.log_sockets is not None and self.logs is not None:
            start_container_logs(self.logs, event, pod)
        if event == "DELETED" or pod["metadata"].get("namespace") != names.NAMESPACE:
            return
        operand = operands.operand_of(pod)
        node = pod["spec"].get("nodeName", "")
        if (pod["metadata"].get("labels") or {}).get("app") == faillogs.CUDA_WORKLOAD_APP and node:
            self.nodes.queue.add(node)  # the CUDA validation's workload pod started: its vectorAdd fails
            return
        if operand is None or pod["metadata"].get("deletionTimestamp"):
            return
        if operand in reconcile.RESTART_AWARE and event == "ADDED":
            self.nodes.queue.add(node)  # a new plugin or GFD pod loads the config as it is now
        st = self.nodes.operand_states.get(node, {}).get(operand, operands.OperandState())
        self.nodes.changes += 1
        await self.nodes.sync_operand_pod(pod, self.world.nodes.get(node), st)

    async def on_configmap(self, event: str, cm: dict[str, Any]) -> None:
        name = cm["metadata"]["name"]
        if name == names.DCGM_ENDPOINT_CONFIGMAP:
            return
        if event == "DELETED":
            self.world.configmaps.pop(name, None)
        else:
            self.world.configmaps[name] = dict(cm.get("data") or {})
        self._enqueue_gpu_nodes()

    def _enqueue_gpu_nodes(self) -> None:
        for name, node in self.world.nodes.items():
            if self.world.policy is not None or _has_gpu_state(node):
                self.nodes.queue.add(name)

    async def on_policy(self, obj: dict[str, Any] | None) -> None:
        changed = self.world.set_policy(obj)
        self.policy_known.set()
        if not changed:
            return
        log.info("ClusterPolicy %s", "removed" if obj is None else "changed")
        self._enqueue_gpu_nodes()  # nodes first: DaemonSet bookkeeping must not delay what learners watch
        await self.operator.sync_workloads()
        if self.world.policy is not None and not self._endpoint_published:
            try:
                await self.exporter.publish_endpoint()
                self._endpoint_published = True
            except errors.CourseError as exc:
                log.warning("could not record the DCGM exporter URL: %s", exc)
        if self.world.policy is None:
            self._endpoint_published = False

    # --- loops ----------------------------------------------------------------------------------------------------

    async def policy_loop(self) -> None:
        """List-and-watch the ClusterPolicy; while the CRD is missing, poll quietly."""
        path = f"{names.POLICY_PATH}"
        while True:
            try:
                listing = await self.client.get(path)
                items = [o for o in listing.get("items", []) if o["metadata"]["name"] == names.POLICY_NAME]
                await self.on_policy(items[0] if items else None)
                rv = listing.get("metadata", {}).get("resourceVersion", "")
                async for ev in self.client.watch(path, resource_version=rv, timeout_seconds=120):
                    obj = ev.get("object", {})
                    if ev.get("type") == "ERROR":
                        break
                    if ev.get("type") == "BOOKMARK" or obj.get("metadata", {}).get("name") != names.POLICY_NAME:
                        continue
                    if ev.get("type") == "DELETED":
                        await self.on_policy(None)
                    else:
                        self.world.policy_obj = obj
                        await self.on_policy(obj)
            except asyncio.CancelledError:
                raise
            except errors.NotFound:
                await self.on_policy(None)
                try:
                    await self.wait_for_crd()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # API restarting, watch dropped: as below
                    log.debug("CRD watch interrupted: %s", exc)
                    await asyncio.sleep(POLICY_POLL)
            except Exception as exc:  # API restarting, watch dropped
                log.debug("policy watch interrupted: %s", exc)
                await asyncio.sleep(POLICY_POLL)

    async def wait_for_crd(self) -> None:
        """Return once the ClusterPolicy CRD may exist: at once (after ``POLICY_POLL``) if it is there but not yet
        served, else when a watch on it reports it. An idle cluster without the operator then makes no request
        a second (issue 17: idle CPU), yet the stack sees the CRD the moment it is created."""
        path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        selector = f"metadata.name={names.CRD_NAME}"
        listing = await self.client.get(path, fieldSelector=selector)
        if listing.get("items"):
            await asyncio.sleep(POLICY_POLL)
            return
        rv = listing.get("metadata", {}).get("resourceVersion", "")
        async for ev in self.client.watch(path, resource_version=rv, timeout_seconds=240, fieldSelector=selector):
            if ev.get("type") in ("ADDED", "MODIFIED", "ERROR"):
                return

    async def status_loop(self) -> None:
        seen = -1
        while True:
            await asyncio.sleep(STATUS_EVERY)
            if self.nodes.changes == seen and self.operator.state:
                continue  # nothing reconciled since the last look: the state cannot have changed
            seen = self.nodes.changes
            now = time.monotonic()
            validated = {n for n, at in self.nodes.validated_at.items() if at <= now}
            try:
                await self.operator.update_status(self.nodes.operand_states, validated)
            except errors.CourseError as exc:
                log.debug("policy status update failed: %s", exc)

    async def run(self) -> None:
        self.exporter.serve()
        tasks = [asyncio.ensure_future(t) for t in (self.node_informer.run(), self.pod_informer.run(),
                                                     self.cm_informer.run())]
        await self.node_informer.synced.wait()
        await self.pod_informer.synced.wait()
        await self.cm_informer.synced.wait()
        if self.log_sockets is not None and self.logs is not None:  # pods deleted while the stack was down
            self.logs.prune(str(p["metadata"].get("uid", "")) for p in self.world.pods.values())
        try:
            await self.nodes.adopt_slices()
        except errors.CourseError as exc:
            log.warning("could not list ResourceSlices: %s", exc)
        tasks.append(asyncio.ensure_future(self.policy_loop()))
        await self.policy_known.wait()  # nodes queued meanwhile wait in the queue
        tasks += [asyncio.ensure_future(t) for t in (self.nodes.queue.run(), self.status_loop(), self.exporter.run())]
        await asyncio.gather(*tasks)


def start_container_logs(store: logstore.LogStore, event: str, pod: dict[str, Any]) -> None:
    """What the container runtime does on kind for the stack's log store: a container instance the kubelet reports
    (a container ID with its restart count) gets its log, which starts with its program's own start-up lines (the
    pod agent writes them on ``local``); a deleted pod's logs go."""
    meta = pod["metadata"]
    if event == "DELETED":
        with contextlib.suppress(ValueError):
            store.remove_pod(meta["namespace"], meta["name"], str(meta.get("uid", "")))
        return
    spec = pod.get("spec") or {}
    containers = {c["name"]: c for c in list(spec.get("initContainers") or []) + list(spec.get("containers") or [])}
    status = pod.get("status") or {}
    for cs in list(status.get("initContainerStatuses") or []) + list(status.get("containerStatuses") or []):
        container = containers.get(cs.get("name", ""))
        if not cs.get("containerID") or container is None:
            continue
        ref = logstore.ContainerRef(meta["namespace"], meta["name"], str(meta.get("uid", "")), container["name"],
                                    int(cs.get("restartCount", 0)))
        try:
            if store.path(ref).exists():
                continue
            store.start(ref)
            for stream, text in startlogs.lines(pod, container):
                store.write(ref, text, stream=stream)
        except (OSError, ValueError) as exc:
            log.warning("could not start the %s log of %s: %s", ref.container, ref.pod, exc)


def _has_gpu_state(node: dict[str, Any]) -> bool:
    """Whether a node still carries something the stack put there (so an uninstall can clean it)."""
    labels = node.get("metadata", {}).get("labels") or {}
    cap = node.get("status", {}).get("capacity") or {}
    return names.GPU_PRESENT in labels or names.NFD_PCI in labels or any(k.startswith("nvidia.com/") for k in cap)


async def _main(args: argparse.Namespace) -> None:
    client = AsyncClient(kubeconfig.load(Path(args.kubeconfig)), max_connections=48)
    await runner.retry_until_api(client)
    await Stack(client, Path(args.device_checkpoint) if args.device_checkpoint else None,
                Path(args.device_dir) if args.device_dir else None,
                logstore.LogStore(Path(args.pod_logs)) if args.pod_logs else None).run()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--device-checkpoint", default="",
                        help="the pod agent's device checkpoint: which pod holds which GPU, for DCGM (default: the "
                        "pods' gpulab.dev/devices annotations, on clusters whose kubelets gpulab does not play)")
    parser.add_argument("--device-dir", default="",
                        help="write each node's devices to <dir>/<node>/devices.json for the node plugin on kind "
                        "(cluster/gosrc/kindplugin) instead of patching the node's capacity and allocatable")
    parser.add_argument("--pod-logs", default="",
                        help="keep the log lines the stack's containers print in this folder (the kubelet's "
                        "/var/log/pods layout); with --device-dir, serve them to each node's containers over "
                        "<device dir>/<node>/pod-logs/logs.sock")
    runner.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
