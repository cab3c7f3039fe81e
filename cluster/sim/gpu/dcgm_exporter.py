"""The simulated DCGM exporter: a Prometheus text endpoint on 127.0.0.1, and the GPU-memory referee.

Every ``INTERVAL`` seconds it samples each GPU (or MIG device) of the nodes where the exporter runs from the
loads the pods there declare and publishes the samples. Its URL is kept in the ``gpulab-dcgm-exporter`` ConfigMap
of the operator namespace. The referee is not the exporter's job on a real cluster but the GPU's: the container
whose allocation does not fit on a shared GPU (``dcgm.admitted``) ends as a CUDA process that ran out of memory
does: it prints CUDA's error to its log and exits 1 (container reason ``Error``); the kubelet then restarts it or
not, by the pod's ``restartPolicy``. No Event and no pod reason: nothing in a real cluster writes one.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from cluster import errors
from cluster.kube.client import AsyncClient
from cluster.sim import checkpoint, nodes as nodes_mod, pod_agent
from cluster.sim.gpu import dcgm, events, hoststate, names, operands, world as world_mod
from cluster.sim.kubelet import logstore

log = logging.getLogger("gpulab.gpu-stack.dcgm")
INTERVAL = 1.0
HELP = {
    "DCGM_FI_DEV_GPU_UTIL": "GPU utilization (in %).",
    "DCGM_FI_DEV_FB_USED": "Framebuffer memory used (in MiB).",
    "DCGM_FI_DEV_FB_FREE": "Framebuffer memory free (in MiB).",
    "DCGM_FI_DEV_GPU_TEMP": "GPU temperature (in C).",
    "DCGM_FI_DEV_POWER_USAGE": "Power draw (in W).",
}
LABELS = ("gpu", "UUID", "modelName", "Hostname", "GPU_I_PROFILE", "GPU_I_ID", "namespace", "pod", "container")


class _Snapshot(Collector):
    def __init__(self) -> None:
        self.rows: tuple[tuple[str, dict[str, str], float], ...] = ()
        self._lock = threading.Lock()

    def set(self, rows: list[tuple[str, dict[str, str], float]]) -> None:
        with self._lock:
            self.rows = tuple(rows)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            rows = self.rows
        for metric in dcgm.METRICS:
            fam = GaugeMetricFamily(metric, HELP[metric], labels=LABELS)
            for name, labels, value in rows:
                if name == metric:
                    fam.add_metric([labels.get(k, "") for k in LABELS], value)
            yield fam


class Exporter:
    def __init__(self, client: AsyncClient, world: world_mod.World, recorder: events.Recorder,
                 operand_states: dict[str, dict[str, operands.OperandState]],
                 device_checkpoint: Path | None = None, logs: logstore.LogStore | None = None) -> None:
        self.client = client
        self.logs = logs  # the kubelet's container logs, where the failed process's last line goes
        self.device_checkpoint = device_checkpoint  # the pod agent's record of who holds which device
        self.world = world
        self.recorder = recorder
        self.operand_states = operand_states
        self.snapshot = _Snapshot()
        self.url = ""
        self.order: dict[str, list[str]] = {}  # device uuid -> pod UIDs in claim order
        self.claimed: dict[tuple[str, str], int] = {}  # (device, pod uid) -> MiB last seen
        self.failed: set[str] = set()
        self._rows: dict[str, tuple[Any, list[tuple[str, dict[str, str], float]]]] = {}

    def serve(self) -> str:
        registry = CollectorRegistry(auto_describe=True)
        registry.register(self.snapshot)
        server, _ = start_http_server(0, addr="127.0.0.1", registry=registry)
        self.url = f"http://127.0.0.1:{server.server_port}/metrics"
        log.info("DCGM exporter metrics at %s", self.url)
        return self.url

    async def publish_endpoint(self) -> None:
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": names.DCGM_ENDPOINT_CONFIGMAP, "namespace": names.NAMESPACE},
                "data": {"url": self.url}}
        path = f"/api/v1/namespaces/{names.NAMESPACE}/configmaps"
        try:
            await self.client.create(path, body)
        except errors.Conflict:
            await self.client.patch(f"{path}/{names.DCGM_ENDPOINT_CONFIGMAP}", {"data": {"url": self.url}})

    def _exporting(self, name: str) -> bool:
        pol = self.world.policy
        node = self.world.nodes.get(name)
        if pol is None or not pol.dcgm_exporter or node is None:
            return False
        if hoststate.node_labels(node).get(names.DEPLOY_PREFIX + "dcgm-exporter") != "true":
            return False
        return self.operand_states.get(name, {}).get("dcgm-exporter", operands.OperandState()).phase == operands.OK

    def _claims(self, name: str, record: checkpoint.DeviceCheckpoint | None) -> dict[str, list[dcgm.Claim]]:
        """Device uuid -> running pods' claims in claim order (new or raised claims go to the end)."""
        per_device: dict[str, dict[str, dcgm.Claim]] = {}
        for pod in self.world.pods_on(name):
            meta = pod["metadata"]
            if record is None and names.POD_DEVICES not in (meta.get("annotations") or {}):
                continue
            if pod.get("status", {}).get("phase") != "Running" or meta["uid"] in self.failed or _crashing(pod):
                continue
            util, mem = dcgm.pod_load(pod)
            held = (dcgm.pod_devices(pod) if record is None
                    else dcgm.held_devices(record.entries(meta["uid"]), self.world.nodes[name]))
            for uuid, container in held.items():
                per_device.setdefault(uuid, {})[meta["uid"]] = dcgm.Claim(
                    meta["uid"], meta["namespace"], meta["name"], container, util, mem)
        out: dict[str, list[dcgm.Claim]] = {}
        for uuid, claims in per_device.items():
            order = [u for u in self.order.get(uuid, []) if u in claims]
            for uid, c in sorted(claims.items(), key=lambda kv: kv[1].pod):
                before = self.claimed.get((uuid, uid))
                if uid not in order or (before is not None and c.mem_mib > before):
                    if uid in order:
                        order.remove(uid)
                    order.append(uid)
                self.claimed[(uuid, uid)] = c.mem_mib
            self.order[uuid] = order
            out[uuid] = [claims[u] for u in order]
        return out

    async def tick(self) -> None:
        rows: list[tuple[str, dict[str, str], float]] = []
        record = None if self.device_checkpoint is None else checkpoint.DeviceCheckpoint(self.device_checkpoint)
        for name in sorted(self.world.nodes):
            if not self._exporting(name):
                continue
            inv = hoststate.inventory_of(self.world.nodes[name])
            if inv is None:
                continue
            claims = self._claims(name, record)
            key = (inv, tuple(sorted((u, tuple(c)) for u, c in claims.items())))
            cached = self._rows.get(name)
            if cached is not None and cached[0] == key:
                rows.extend(cached[1])  # same GPUs, same loads: same samples, nobody new to run out of memory
                continue
            node_rows: list[tuple[str, dict[str, str], float]] = []
            for device in dcgm.devices(name, inv):
                fits, over = dcgm.admitted(claims.get(device.device_uuid, []), device.total_mib)
                for victim in over:
                    await self._out_of_memory(device, victim, sum(c.mem_mib for c in fits))
                node_rows.extend(dcgm.series(dcgm.sample(device, fits)))
            self._rows[name] = (key, node_rows)
            rows.extend(node_rows)
        self.snapshot.set(rows)

    async def _out_of_memory(self, device: dcgm.Device, claim: dcgm.Claim, used: int) -> None:
        pod = next((p for p in self.world.pods.values() if p["metadata"]["uid"] == claim.uid), None)
        if pod is None:
            return
        self.failed.add(claim.uid)
        self._log_oom(pod, claim.container)
        try:
            await self.client.patch(f"/api/v1/namespaces/{claim.namespace}/pods/{claim.pod}/status",
                                    {"status": oom_status(pod, claim.container, self._last_lines(pod, claim.container))})
        except errors.NotFound:
            return
        log.info("%s/%s ran GPU %s out of memory (%d MiB asked, %d MiB used by others of %d)", claim.namespace,
                 claim.pod, device.device_uuid, claim.mem_mib, used, device.total_mib)

    def _ref(self, pod: dict[str, Any], container: str) -> logstore.ContainerRef:
        meta = pod["metadata"]
        statuses = pod.get("status", {}).get("containerStatuses") or []
        restart = next((int(cs.get("restartCount", 0)) for cs in statuses if cs.get("name") == container), 0)
        return logstore.ContainerRef(meta["namespace"], meta["name"], meta["uid"], container, restart)

    def _log_oom(self, pod: dict[str, Any], container: str) -> None:
        if self.logs is None:
            return
        try:
            self.logs.write(self._ref(pod, container), dcgm.OOM_LOG_LINE, stream="stderr")
        except (OSError, ValueError) as exc:
            log.warning("could not write the log of %s: %s", pod["metadata"]["name"], exc)

    def _last_lines(self, pod: dict[str, Any], container: str) -> str:
        """The termination message the kubelet reports for the container (``pod_agent.termination_message``)."""
        spec: dict[str, Any] = next((c for c in pod.get("spec", {}).get("containers", []) if c.get("name") == container),
                                    {})
        if self.logs is None:
            return ""
        return pod_agent.termination_message(spec, self.logs.read(self._ref(pod, container)))

    async def run(self) -> None:
        while True:
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:  # keep exporting after one bad sample
                log.exception("DCGM sample failed")
            await asyncio.sleep(INTERVAL)


def _crashing(pod: dict[str, Any]) -> bool:
    return any("waiting" in cs.get("state", {}) for cs in pod.get("status", {}).get("containerStatuses", []))


def oom_status(pod: dict[str, Any], container: str, message: str) -> dict[str, Any]:
    """A pod whose CUDA process died of GPU OOM: Failed when it will not restart, else crash-looping. ``message``:
    the container's termination message (empty unless its policy falls back to the log)."""
    ts = nodes_mod.now()
    restart = pod["spec"].get("restartPolicy", "Always")
    statuses = []
    for cs in pod.get("status", {}).get("containerStatuses", []):
        cs = dict(cs)
        if cs.get("name") == container:
            term = {"exitCode": 1, "reason": "Error", "startedAt": ts, "finishedAt": ts,
                    "containerID": cs.get("containerID", "")}  # the instance that died: what --previous reads
            if message:
                term["message"] = message
            if restart == "Always":
                cs.update(ready=False, started=False, restartCount=int(cs.get("restartCount", 0)) + 1,
                          lastState={"terminated": term},
                          state={"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s restarting failed "
                                             f"container={container} pod={pod['metadata']['name']}"}})
            else:
                cs.update(ready=False, started=False, state={"terminated": term})
        statuses.append(cs)
    out: dict[str, Any] = {"containerStatuses": statuses}
    if restart != "Always":
        out["phase"] = "Failed"
    return out
