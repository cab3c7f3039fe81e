"""The pod agent: plays the kubelet for pods bound to simulated nodes.

A bound pod is first offered to the admission hooks (``cluster.sim.admission``); a rejection ends it ``Failed``
with the hook's reason and message, as a real kubelet does. Otherwise it goes Running with conditions, container
statuses and a pod IP. Pods owned by a Job, or annotated ``gpulab.dev/run-seconds``, end their containers after
that time (exit code from ``gpulab.dev/exit-code``, default 0); they then start again or the pod completes, as
``restartPolicy`` says (``cluster.sim.restarts``: an immediate first restart, then the kubelet's back-off in
``CrashLoopBackOff``). A pod being deleted is finished with grace period 0.
Like the kubelet's device manager, it keeps which devices each admitted pod holds in a checkpoint file
(``--device-checkpoint``, in the state dir), read back when it restarts and released when a pod ends. Like the
container runtime, it gives each container instance a log (``cluster.sim.kubelet.logstore``) holding the lines its
program prints first (``cluster.sim.gpu.startlogs`` for the GPU stack's containers), and deletes a pod's logs with
the pod. It must not bind pods: placement is the real kube-scheduler's alone.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cluster import errors
from cluster.kube.client import AsyncClient
from cluster.sim import admission, checkpoint, informer, nodes, restarts
from cluster.sim.gpu import events, startlogs
from cluster.sim.kubelet import logstore

log = logging.getLogger("gpulab.pod-agent")

RUN_SECONDS = "gpulab.dev/run-seconds"
EXIT_CODE = "gpulab.dev/exit-code"
JOB_DEFAULT_SECONDS = 5.0
TERMINATION_LOG_LINES, TERMINATION_LOG_BYTES = 80, 2048  # the kubelet's fallback-to-logs tail
# What a container's program prints when it starts: (stream, line) pairs for a pod's container.
StartLines = Callable[[Mapping[str, Any], Mapping[str, Any]], Sequence[tuple[str, str]]]


def pod_ip(pod: dict[str, Any]) -> str:
    digest = hashlib.sha256(pod["metadata"]["uid"].encode()).digest()
    return f"10.244.{digest[0]}.{digest[1] % 254 + 1}"


def runtime_id(pod_uid: str, container: str, restart: int) -> str:
    """``containerd://<id>`` of a container instance (``logstore.container_id``, which names its log too)."""
    return f"containerd://{logstore.container_id(pod_uid, container, restart)}"


def container_status(c: Mapping[str, Any], pod_uid: str, state: dict[str, Any], ready: bool, restart: int = 0,
                      last: dict[str, Any] | None = None) -> dict[str, Any]:
    """A container's status. A waiting container shows the instance that last ran (none before its first start),
    as a kubelet's does."""
    image = c.get("image", "")
    digest = hashlib.sha256(f"{pod_uid}/{c['name']}".encode()).hexdigest()
    out = {
        "name": c["name"], "image": image, "imageID": f"{image}@sha256:{digest}",
        "containerID": runtime_id(pod_uid, c["name"], restart),
        "ready": ready, "started": "running" in state, "restartCount": restart, "state": state,
    }
    if "waiting" in state:
        if restart > 0:
            out["containerID"] = runtime_id(pod_uid, c["name"], restart - 1)
        else:
            del out["containerID"]
    if last:
        out["lastState"] = last
    return out


def termination_message(container: Mapping[str, Any], log_data: bytes) -> str:
    """What a kubelet reports as the termination message of a container that exited with an error and wrote no
    termination-log file: the tail of its log ``log_data`` (CRI lines) when its spec says
    ``terminationMessagePolicy: FallbackToLogsOnError``, at most 80 lines and 2,048 bytes
    (``pkg/kubelet/kuberuntime/kuberuntime_container.go``, ``kubecontainer.MaxContainerTerminationMessageLog*``);
    nothing under the default policy ``File``."""
    if container.get("terminationMessagePolicy") != "FallbackToLogsOnError":
        return ""
    lines = [line.split(b" ", 3)[-1] for line in log_data.splitlines()[-TERMINATION_LOG_LINES:]]
    return b"\n".join(lines).decode(errors="replace")[-TERMINATION_LOG_BYTES:]


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


def running_status(pod: dict[str, Any], node: dict[str, Any] | None, restart: int = 0,
                   last: Mapping[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Running with every container's instance ``restart``; ``last``: container name -> its ``lastState``."""
    ts = nodes.now()
    uid = pod["metadata"]["uid"]
    host_ip = next((a["address"] for a in (node or {}).get("status", {}).get("addresses", [])
                    if a.get("type") == "InternalIP"), nodes.FIRST_NODE_IP)
    ip = pod_ip(pod)
    running = {"running": {"startedAt": ts}}
    return {
        "phase": "Running", "conditions": _conditions(ts, True), "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}], "podIP": ip, "podIPs": [{"ip": ip}], "startTime": ts, "qosClass": _qos(pod),
        "initContainerStatuses": [
            container_status(c, uid, {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": ts,
                                                      "finishedAt": ts}}, False)
            for c in pod["spec"].get("initContainers", [])
        ] or None,
        "containerStatuses": [container_status(c, uid, running, True, restart, (last or {}).get(c["name"]))
                              for c in pod["spec"].get("containers", [])],
    }


def _started_at(pod: Mapping[str, Any], container: str, default: str) -> str:
    for cs in pod.get("status", {}).get("containerStatuses") or []:
        if cs.get("name") == container:
            return str((cs.get("state") or {}).get("running", {}).get("startedAt", default))
    return default


def _last_states(pod: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {cs["name"]: cs["lastState"] for cs in pod.get("status", {}).get("containerStatuses") or []
            if cs.get("lastState")}


def ended(pod: dict[str, Any], exit_code: int, restart: int, ts: str) -> dict[str, dict[str, Any]]:
    """Each container's ``terminated`` state for instance ``restart`` ending now with ``exit_code``."""
    uid = pod["metadata"]["uid"]
    return {c["name"]: restarts.terminated(exit_code, _started_at(pod, c["name"], ts), ts,
                                           runtime_id(uid, c["name"], restart))
            for c in pod["spec"].get("containers", [])}


def finished_status(pod: dict[str, Any], exit_code: int, restart: int = 0) -> dict[str, Any]:
    """The pod has ended for good: every container's instance ``restart`` terminated with ``exit_code``."""
    ts = nodes.now()
    uid = pod["metadata"]["uid"]
    term = ended(pod, exit_code, restart, ts)
    last = _last_states(pod)
    return {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "conditions": _conditions(ts, False),
        "containerStatuses": [container_status(c, uid, {"terminated": term[c["name"]]}, False, restart,
                                                last.get(c["name"])) for c in pod["spec"].get("containers", [])],
    }


def backoff_status(pod: dict[str, Any], term: Mapping[str, dict[str, Any]], restart: int,
                   wait: int) -> dict[str, Any]:
    """Instance ``restart - 1`` has ended (``term``); the next starts after ``wait`` seconds (0: at once)."""
    uid = pod["metadata"]["uid"]
    statuses = []
    for c in pod["spec"].get("containers", []):
        if wait:
            state = {"waiting": {"reason": "CrashLoopBackOff",
                                 "message": restarts.crashloop_message(pod, c["name"], wait)}}
            statuses.append(container_status(c, uid, state, False, restart, {"terminated": term[c["name"]]}))
        else:
            statuses.append(container_status(c, uid, {"terminated": term[c["name"]]}, False, restart - 1,
                                              _last_states(pod).get(c["name"])))
    conds = [dict(cond, status="False", reason="ContainersNotReady") if cond["type"] in ("Ready", "ContainersReady")
             else cond for cond in _conditions(nodes.now(), True)]
    return {"conditions": conds, "containerStatuses": statuses}


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
                 devices: checkpoint.DeviceCheckpoint | None = None, logs: logstore.LogStore | None = None,
                 start_lines: StartLines = startlogs.lines) -> None:
        self.client = client
        self.hooks = hooks
        self.devices = devices or checkpoint.DeviceCheckpoint()
        self.logs = logs
        self.start_lines = start_lines
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
            if self.logs is not None:
                meta = pod["metadata"]
                self.logs.remove_pod(meta["namespace"], meta["name"], meta["uid"])
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
            pod = await self.client.patch(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                                          {"metadata": {"annotations": dict(decision.annotations)}})
        updated = await self._start(pod, node)
        if updated is None:
            return
        self._write_start_lines(updated, 0, init=True)
        await self._record_started(pod, host)
        self._maybe_schedule_finish(key, updated)

    async def _start(self, pod: dict[str, Any], node: dict[str, Any]) -> dict[str, Any] | None:
        """The running status, written only over the status the pod had when the agent looked (``resourceVersion``
        as a precondition): a component that gave the pod a status since (a container that failed at once) keeps
        it, as the kubelet that runs it would report. None when the pod is gone or already has a status."""
        for _ in range(3):
            status = {k: v for k, v in running_status(pod, node).items() if v is not None}
            body: dict[str, Any] = {"status": status}
            if pod["metadata"].get("resourceVersion"):
                body["metadata"] = {"resourceVersion": pod["metadata"]["resourceVersion"]}
            try:
                return await self.client.patch(self._status_path(pod), body)
            except errors.Conflict:
                try:
                    pod = await self.client.get(self._status_path(pod).removesuffix("/status"))
                except errors.NotFound:
                    return None
                if pod.get("status", {}).get("containerStatuses") or pod["metadata"].get("deletionTimestamp"):
                    return None
        return None

    async def _record_started(self, pod: dict[str, Any], host: str) -> None:
        for c in pod["spec"].get("containers", []):
            # What `kubectl describe pod` shows from a real kubelet (images are never pulled here).
            await self.recorder.record(pod, "Normal", "Pulled",
                                       f'Container image "{c.get("image", "")}" already present on machine', host=host)
            await self.recorder.record(pod, "Normal", "Created", f"Created container: {c['name']}", host=host)
            await self.recorder.record(pod, "Normal", "Started", f"Started container {c['name']}", host=host)

    def _write_start_lines(self, pod: dict[str, Any], restart: int, init: bool = False) -> None:
        """Each starting container instance gets its log, with what its program prints first."""
        if self.logs is None:
            return
        meta = pod["metadata"]
        started = [(c, 0) for c in pod["spec"].get("initContainers", [])] if init else []
        started += [(c, restart) for c in pod["spec"].get("containers", [])]
        for c, instance in started:
            ref = logstore.ContainerRef(meta["namespace"], meta["name"], meta["uid"], c["name"], instance)
            try:
                self.logs.start(ref)
                for stream, text in self.start_lines(pod, c):
                    self.logs.write(ref, text, stream=stream)
            except (OSError, ValueError) as exc:
                log.warning("could not write the log of %s/%s: %s", informer.key_of(pod), c["name"], exc)

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
        self._timers[key] = asyncio.ensure_future(self._run_containers(key, pod, seconds))

    async def _run_containers(self, key: str, pod: dict[str, Any], seconds: float) -> None:
        """Each instance runs ``seconds``, then the pod ends or its containers start again (``restarts``)."""
        try:
            code = int(pod["metadata"].get("annotations", {}).get(EXIT_CODE, "0"))
        except ValueError:
            code = 1
        try:
            while True:
                await asyncio.sleep(seconds)
                pod = self.pod_informer.cache.get(key, pod)
                statuses = pod.get("status", {}).get("containerStatuses") or []
                restart = max((int(cs.get("restartCount", 0)) for cs in statuses), default=0)
                if not restarts.will_restart(pod, code):
                    await self.client.patch(self._status_path(pod), {"status": finished_status(pod, code, restart)})
                    return
                await self._restart(pod, code, restart + 1)
        except errors.NotFound:
            pass
        finally:
            self._timers.pop(key, None)

    async def _restart(self, pod: dict[str, Any], code: int, restart: int) -> None:
        """Instance ``restart - 1`` ended with ``code``: after the kubelet's back-off, instance ``restart`` runs."""
        wait = restarts.backoff_seconds(restart)
        term = ended(pod, code, restart - 1, nodes.now())
        await self.client.patch(self._status_path(pod), {"status": backoff_status(pod, term, restart, wait)})
        host = pod["spec"].get("nodeName", "")
        if wait:
            for c in pod["spec"].get("containers", []):
                await self.recorder.record(pod, "Warning", "BackOff", restarts.backoff_event(pod, c["name"]), host=host)
            await asyncio.sleep(wait)
        node = self._simulated(host)
        last = {name: {"terminated": t} for name, t in term.items()}
        status = {k: v for k, v in running_status(pod, node, restart, last).items()
                  if v is not None and k not in ("startTime", "initContainerStatuses")}  # the pod's own, kept
        updated = await self.client.patch(self._status_path(pod), {"status": status})
        self._write_start_lines(updated, restart)
        await self._record_started(pod, host)

    async def run(self) -> None:
        node_task = asyncio.ensure_future(self.node_informer.run())
        await self.node_informer.synced.wait()
        await asyncio.gather(node_task, self.pod_informer.run(), self._prune_logs())

    async def _prune_logs(self) -> None:
        """Once the pods are listed: the logs of pods deleted while no agent ran go (later deletions are seen)."""
        await self.pod_informer.synced.wait()
        if self.logs is not None:
            self.logs.prune(str(p["metadata"]["uid"]) for p in self.pod_informer.cache.values())
