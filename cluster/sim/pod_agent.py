"""The pod agent: plays the kubelet for pods bound to simulated nodes.

A bound pod is first offered to the admission hooks (``cluster.sim.admission``); a rejection ends it ``Failed``
with the hook's reason and message, as a real kubelet does. Otherwise it goes Running with conditions, container
statuses and a pod IP. Pods owned by a Job, or annotated ``gpulab.dev/run-seconds``, complete after that time
(exit code from ``gpulab.dev/exit-code``, default 0). A pod being deleted is finished with grace period 0.
Like the kubelet's device manager, it keeps which devices each admitted pod holds in a checkpoint file
(``--device-checkpoint``, in the state dir), read back when it restarts and released when a pod ends.
It must not bind pods: placement is the real kube-scheduler's alone.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Any

from cluster import errors
from cluster.kube.client import AsyncClient
from cluster.sim import admission, checkpoint, informer, nodes
from cluster.sim.gpu import events

log = logging.getLogger("gpulab.pod-agent")

RUN_SECONDS = "gpulab.dev/run-seconds"
EXIT_CODE = "gpulab.dev/exit-code"
JOB_DEFAULT_SECONDS = 5.0


def pod_ip(pod: dict[str, Any]) -> str:
    digest = hashlib.sha256(pod["metadata"]["uid"].encode()).digest()
    return f"10.244.{digest[0]}.{digest[1] % 254 + 1}"


def _container_status(c: dict[str, Any], pod_uid: str, state: dict[str, Any], ready: bool) -> dict[str, Any]:
    cid = hashlib.sha256(f"{pod_uid}/{c['name']}".encode()).hexdigest()
    image = c.get("image", "")
    return {
        "name": c["name"], "image": image, "imageID": f"{image}@sha256:{cid}", "containerID": f"containerd://{cid}",
        "ready": ready, "started": "running" in state, "restartCount": 0, "state": state,
    }


def _conditions(ts: str, ready: bool) -> list[dict[str, Any]]:
    status = "True" if ready else "False"
    return [
        {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": ts},
        {"type": "Initialized", "status": "True", "lastTransitionTime": ts},
        {"type": "Ready", "status": status, "lastTransitionTime": ts,
         **({} if ready else {"reason": "PodCompleted"})},
        {"type": "ContainersReady", "status": status, "lastTransitionTime": ts,
         **({} if ready else {"reason": "PodCompleted"})},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts},
    ]


def running_status(pod: dict[str, Any], node: dict[str, Any] | None) -> dict[str, Any]:
    ts = nodes.now()
    uid = pod["metadata"]["uid"]
    host_ip = next((a["address"] for a in (node or {}).get("status", {}).get("addresses", [])
                    if a.get("type") == "InternalIP"), "198.51.100.1")
    ip = pod_ip(pod)
    running = {"running": {"startedAt": ts}}
    return {
        "phase": "Running", "conditions": _conditions(ts, True), "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}], "podIP": ip, "podIPs": [{"ip": ip}], "startTime": ts, "qosClass": _qos(pod),
        "initContainerStatuses": [
            _container_status(c, uid, {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": ts,
                                                      "finishedAt": ts}}, False)
            for c in pod["spec"].get("initContainers", [])
        ] or None,
        "containerStatuses": [_container_status(c, uid, running, True) for c in pod["spec"].get("containers", [])],
    }


def finished_status(pod: dict[str, Any], exit_code: int) -> dict[str, Any]:
    ts = nodes.now()
    uid = pod["metadata"]["uid"]
    started = pod.get("status", {}).get("startTime", ts)
    reason = "Completed" if exit_code == 0 else "Error"
    term = {"terminated": {"exitCode": exit_code, "reason": reason, "startedAt": started, "finishedAt": ts}}
    return {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "conditions": _conditions(ts, False),
        "containerStatuses": [_container_status(c, uid, term, False) for c in pod["spec"].get("containers", [])],
    }


def rejected_status(decision: admission.Decision) -> dict[str, Any]:
    return {"phase": "Failed", "reason": decision.reason, "message": decision.message, "startTime": nodes.now()}


def _qos(pod: dict[str, Any]) -> str:
    containers = pod["spec"].get("containers", [])
    reqs = [c.get("resources", {}) for c in containers]
    # Only cpu and memory count for QoS: a pod asking for nothing but nvidia.com/gpu is BestEffort.
    if not any(k in ("cpu", "memory") for r in reqs for k in {**(r.get("requests") or {}), **(r.get("limits") or {})}):
        return "BestEffort"
    guaranteed = all(
        r.get("limits", {}).get(k) and r.get("requests", r.get("limits", {})).get(k) == r["limits"][k]
        for r in reqs for k in ("cpu", "memory")
    )
    return "Guaranteed" if guaranteed else "Burstable"


def run_seconds(pod: dict[str, Any]) -> float | None:
    ann = pod["metadata"].get("annotations", {})
    if RUN_SECONDS in ann:
        try:
            return max(0.0, float(ann[RUN_SECONDS]))
        except ValueError:
            return JOB_DEFAULT_SECONDS
    owners = pod["metadata"].get("ownerReferences", [])
    return JOB_DEFAULT_SECONDS if any(o.get("kind") == "Job" for o in owners) else None


class PodAgent:
    def __init__(self, client: AsyncClient, hooks: list[admission.Hook],
                 devices: checkpoint.DeviceCheckpoint | None = None) -> None:
        self.client = client
        self.hooks = hooks
        self.devices = devices or checkpoint.DeviceCheckpoint()
        self.recorder = events.Recorder(client, "kubelet")
        self.node_informer = informer.Informer(client, "/api/v1/nodes", self.on_node)
        self.pod_informer = informer.Informer(client, "/api/v1/pods", self.on_pod, fieldSelector="spec.nodeName!=")
        self._timers: dict[str, asyncio.Task[None]] = {}
        self._inflight: set[str] = set()

    async def on_node(self, event: str, node: dict[str, Any]) -> None:
        """A node that appears late (a race with the pod watch) gets its waiting pods started."""
        if event != "ADDED" or not self.pod_informer.synced.is_set():
            return
        name = node["metadata"]["name"]
        for pod in list(self.pod_informer.cache.values()):
            if pod["spec"].get("nodeName") == name and pod.get("status", {}).get("phase", "Pending") == "Pending":
                await self.on_pod("MODIFIED", pod)

    def _simulated(self, node_name: str) -> dict[str, Any] | None:
        node = self.node_informer.cache.get(node_name)
        if node and node["metadata"].get("annotations", {}).get(nodes.SIMULATED_ANNOTATION) == "true":
            return node
        return None

    def _status_path(self, pod: dict[str, Any]) -> str:
        m = pod["metadata"]
        return f"/api/v1/namespaces/{m['namespace']}/pods/{m['name']}/status"

    async def on_pod(self, event: str, pod: dict[str, Any]) -> None:
        key = informer.key_of(pod)
        if event == "DELETED":
            timer = self._timers.pop(key, None)
            if timer:
                timer.cancel()
            return
        node = self._simulated(pod["spec"].get("nodeName", ""))
        if node is None or key in self._inflight:
            return
        self._inflight.add(key)
        try:
            await self._reconcile(key, pod, node)
        finally:
            self._inflight.discard(key)

    async def _reconcile(self, key: str, pod: dict[str, Any], node: dict[str, Any]) -> None:
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            try:
                await self.client.delete(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                                         gracePeriodSeconds=0)
            except errors.NotFound:
                pass
            return
        phase = pod.get("status", {}).get("phase", "Pending")
        if phase != "Pending" or pod.get("status", {}).get("containerStatuses"):
            self._maybe_schedule_finish(key, pod)
            return
        decision = await self._admit(pod, node)
        host = node["metadata"]["name"]
        if decision is not None and decision.rejected:
            log.info("kubelet admission rejected %s: %s", key, decision.reason)
            await self.client.patch(self._status_path(pod), {"status": rejected_status(decision)})
            await self.recorder.record(pod, "Warning", decision.reason, decision.message, host=host)
            return
        if decision is not None and decision.annotations:
            await self.client.patch(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                                    {"metadata": {"annotations": dict(decision.annotations)}})
        status = {k: v for k, v in running_status(pod, node).items() if v is not None}
        updated = await self.client.patch(self._status_path(pod), {"status": status})
        for c in pod["spec"].get("containers", []):
            # What `kubectl describe pod` shows from a real kubelet (images are never pulled here).
            await self.recorder.record(pod, "Normal", "Pulled",
                                       f'Container image "{c.get("image", "")}" already present on machine', host=host)
            await self.recorder.record(pod, "Normal", "Created", f"Created container: {c['name']}", host=host)
            await self.recorder.record(pod, "Normal", "Started", f"Started container {c['name']}", host=host)
        self._maybe_schedule_finish(key, updated)

    async def _admit(self, pod: dict[str, Any], node: dict[str, Any]) -> admission.Decision | None:
        name = node["metadata"]["name"]
        others = [p for k, p in self.pod_informer.cache.items()
                  if p["spec"].get("nodeName") == name and k != informer.key_of(pod)
                  and p.get("status", {}).get("phase") in ("Running", "Pending")]
        if self.pod_informer.synced.is_set():  # during the first list the cache is partial: release nothing yet
            self.devices.release(name, {str(p["metadata"]["uid"]) for p in [pod, *others]})
        ctx = admission.Context(node=node, pods_on_node=others, client=self.client, checkpoint=self.devices)
        merged: dict[str, str] = {}
        for hook in self.hooks:
            decision = await hook(pod, ctx)
            if decision is None:
                continue
            if decision.rejected:
                return decision
            merged.update(decision.annotations)
        return admission.Decision(annotations=merged)

    def _maybe_schedule_finish(self, key: str, pod: dict[str, Any]) -> None:
        if pod.get("status", {}).get("phase") != "Running" or key in self._timers:
            return
        seconds = run_seconds(pod)
        if seconds is None:
            return
        self._timers[key] = asyncio.ensure_future(self._finish_later(key, pod, seconds))

    async def _finish_later(self, key: str, pod: dict[str, Any], seconds: float) -> None:
        await asyncio.sleep(seconds)
        try:
            code = int(pod["metadata"].get("annotations", {}).get(EXIT_CODE, "0"))
        except ValueError:
            code = 1
        try:
            await self.client.patch(self._status_path(pod), {"status": finished_status(pod, code)})
        except errors.NotFound:
            pass
        finally:
            self._timers.pop(key, None)

    async def run(self) -> None:
        node_task = asyncio.ensure_future(self.node_informer.run())
        await self.node_informer.synced.wait()
        await asyncio.gather(node_task, self.pod_informer.run())
