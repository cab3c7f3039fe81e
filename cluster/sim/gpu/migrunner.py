"""Runs the MIG manager's reconfiguration on a node the way ``MP pkg/mig/reconfigure/reconfigure.go`` does:
``pending``; the operator's GPU clients paused through their deploy labels and waited for; the layout applied
GPU by GPU after a short delay; then ``success`` (validator pod restarted, labels restored) or ``failed`` with
the reason (labels restored, node annotation). User pods are never evicted or deleted. What the real manager logs
on the way (``miglogs``) goes to its pod's container log; as upstream, no Event is recorded: a failure shows only
in that log and the ``nvidia.com/mig.config.state=failed`` label.

One task per node; a new ``nvidia.com/mig.config`` value cancels the running one and starts over, as the real
MIG manager restarts its reconcile loop on a label change.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cluster import errors
from cluster.gpu import mig
from cluster.kube.client import AsyncClient
from cluster.sim import checkpoint
from cluster.sim.gpu import dcgm, hoststate, miglogs, migmanager, names, operands, startlogs, world as world_mod
from cluster.sim.kubelet import logstore

log = logging.getLogger("gpulab.gpu-stack.mig-manager")
# The real wait is 5 minutes per operand; a timeout leaves the labels paused and the state pending (mig-parted#485).
OPERAND_WAIT_TIMEOUT = 60.0
# Operand pods the MIG manager waits to see gone (``waitForPodsToBeDeleted``); the sim has no separate dcgm pod.
WAITED_OPERANDS = ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm")


class MigRunner:
    def __init__(self, client: AsyncClient, world: world_mod.World, device_checkpoint: Path | None = None,
                 logs: logstore.LogStore | None = None) -> None:
        self.client = client
        self.world = world
        self.device_checkpoint = device_checkpoint  # the pod agent's record of which pod holds which device
        self.logs = logs  # the kubelet's container logs (on kind: the store the stand-in containers print from)
        self.tasks: dict[str, tuple[str, asyncio.Task[None]]] = {}
        self._last: dict[str, tuple[str, str, str, str]] = {}  # node -> the last outcome handled

    def cancel(self, name: str) -> None:
        running = self.tasks.pop(name, None)
        if running:
            running[1].cancel()

    async def handle(self, name: str, decision: migmanager.Decision) -> None:
        if decision.action == migmanager.NONE:
            return
        running = self.tasks.get(name)
        if running and running[0] == decision.config and not running[1].done():
            return
        self.cancel(name)
        node = self.world.nodes.get(name)
        labels = hoststate.node_labels(node) if node is not None else {}
        # A reconcile may see the same immediate outcome again before its label lands: the manager ran once.
        once = (decision.config, decision.action, decision.reason, self._manager_pod(name))
        logged, self._last[name] = self._last.get(name) == once, once
        if decision.action == migmanager.SUCCESS:
            if not logged:
                self._log(name, (*miglogs.start(decision.config, labels), *miglogs.already_applied(decision.config)))
            await self._finish(name, decision.config, None, decision)
        elif decision.action == migmanager.FAILED:
            if not logged and not decision.reason.startswith("configmap "):  # no config volume: no pod runs
                self._log(name, (*miglogs.start(decision.config, labels), *miglogs.invalid(decision.reason)))
            await self._finish(name, decision.config, decision.reason, decision)
        else:
            mode_applied = self._mode_applied(name, decision)
            self._log(name, (*miglogs.start(decision.config, labels), *miglogs.pending(mode_applied)))
            self.tasks[name] = (decision.config, asyncio.ensure_future(self._reconfigure(name, decision.config)))

    def _mode_applied(self, name: str, decision: migmanager.Decision) -> bool:
        """Whether every GPU already has the MIG mode the config asks for (``assert --mode-only``)."""
        inv = hoststate.inventory_of(self.world.nodes[name], with_faults=False) if name in self.world.nodes else None
        if inv is None or decision.result is None:
            return True
        now = {g.index: mig.current_layout(g).mig_enabled for g in inv.gpus}
        return all(now.get(l.index) == l.mig_enabled for l in decision.result.layouts)

    def _log(self, name: str, lines: tuple[startlogs.Line, ...]) -> None:
        """Append to the log of the node's mig-manager container, as the real program prints."""
        pod = self._manager(name)
        if self.logs is None or pod is None:
            return
        meta = pod["metadata"]
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        restart = next((int(cs.get("restartCount", 0)) for cs in statuses if cs.get("name") == miglogs.CONTAINER), 0)
        ref = logstore.ContainerRef(meta["namespace"], meta["name"], meta["uid"], miglogs.CONTAINER, restart)
        try:
            for line in lines:
                self.logs.write(ref, startlogs.render(line, time.time_ns()), stream=line.stream)
        except (OSError, ValueError) as exc:
            log.warning("could not write the mig-manager log on %s: %s", name, exc)

    async def _patch(self, name: str, labels: dict[str, str | None], annotations: dict[str, str | None]) -> None:
        meta: dict[str, Any] = {"labels": labels}
        if annotations:
            meta["annotations"] = annotations
        await self.client.patch(f"/api/v1/nodes/{name}", {"metadata": meta})

    async def _reconfigure(self, name: str, config: str) -> None:
        try:
            node = self.world.nodes[name]
            labels = hoststate.node_labels(node)
            await self._patch(name, {names.MIG_CONFIG_STATE: "pending", **migmanager.paused_labels(labels)}, {})
            log.info("%s: applying MIG config %s", name, config)
            started = time.monotonic()
            if not await self._wait_operands_gone(name):
                log.warning("%s: operand pods did not go; the MIG config stays pending", name)
                return
            self._log(name, miglogs.operands_gone())
            await asyncio.sleep(max(0.0, migmanager.APPLY_SECONDS - (time.monotonic() - started)))
            node = self.world.nodes[name]
            decision = migmanager.decide(node, self.world.policy, self.world.mig_file())
            if decision.config != config:
                return  # the label changed meanwhile; the reconcile that saw it starts over
            if decision.action == migmanager.APPLY and decision.result is not None and decision.result.ok:
                inv = hoststate.inventory_of(node, with_faults=False)
                assert inv is not None
                held = migmanager.held_instances(self.world.pods_on(name), inv.gpus, self._devices_of(node))
                outcome = migmanager.apply_per_gpu(decision.result.layouts, inv.gpus, held)
                refusal = None if outcome.gpu is None else miglogs.Refusal(outcome.gpu, outcome.busy, outcome.target)
                self._log(name, miglogs.applied(config, refusal))
                if outcome.reason is None:
                    await self._restart_validator(name)
                await self._finish(name, config, outcome.reason, decision, outcome.layouts)
                return
            reason = decision.reason if decision.action in (migmanager.APPLY, migmanager.FAILED) else None
            if decision.action == migmanager.APPLY:
                self._log(name, miglogs.applied(config, None, fits=False))
            elif decision.action == migmanager.FAILED and not decision.reason.startswith("configmap "):
                self._log(name, miglogs.invalid(decision.reason))
            await self._finish(name, config, reason or None, decision)
        except asyncio.CancelledError:
            raise
        except (errors.CourseError, KeyError) as exc:
            log.warning("%s: MIG reconfiguration interrupted: %s", name, exc)
        finally:
            current = self.tasks.get(name)
            if current and current[1] is asyncio.current_task():
                self.tasks.pop(name, None)

    def _devices_of(self, node: dict[str, Any]) -> Callable[[Mapping[str, Any]], list[str]] | None:
        """What a pod holds, from the kubelet's checkpoint (a tenant can rewrite the annotation on their pod)."""
        if self.device_checkpoint is None:
            return None
        record = checkpoint.DeviceCheckpoint(self.device_checkpoint)

        def devices_of(pod: Mapping[str, Any]) -> list[str]:
            entries = record.entries(str(pod.get("metadata", {}).get("uid", "")))
            # IDs through the plugin's registration, and also as written: while the plugin is paused for the
            # change its registration may be gone, and a device ID is the UUID itself or "<UUID>::<replica>".
            raw = [d.split("::", 1)[0] for e in entries for d in e.device_ids]
            return [*dcgm.held_devices(entries, node), *raw]

        return devices_of

    async def _wait_operands_gone(self, name: str) -> bool:
        """Wait (bounded) until the paused operands' pods have left the node; their DaemonSets remove them."""
        deadline = time.monotonic() + OPERAND_WAIT_TIMEOUT
        while time.monotonic() < deadline:
            if not any(operands.operand_of(p) in WAITED_OPERANDS for p in self.world.operator_pods_on(name)) and \
                    not any(migmanager.is_gpu_client(p) for p in self.world.pods_on(name)):
                return True
            await asyncio.sleep(0.1)
        return False

    async def _restart_validator(self, name: str) -> None:
        """``restartValidatorPod``: delete the node's validator pod so its DaemonSet runs every validation again."""
        for pod in self.world.operator_pods_on(name):
            if operands.operand_of(pod) == "operator-validator" and not pod["metadata"].get("deletionTimestamp"):
                try:
                    await self.client.delete(f"/api/v1/namespaces/{names.NAMESPACE}/pods/{pod['metadata']['name']}")
                except errors.NotFound:
                    pass

    def _manager(self, name: str) -> dict[str, Any] | None:
        return next((p for p in self.world.operator_pods_on(name)
                     if operands.operand_of(p) == "mig-manager" and not p["metadata"].get("deletionTimestamp")), None)

    def _manager_pod(self, name: str) -> str:
        pod = self._manager(name)
        return str(pod["metadata"].get("uid", "")) if pod is not None else ""

    async def _finish(self, name: str, config: str, reason: str | None, decision: migmanager.Decision,
                      layouts: tuple[mig.GpuLayout, ...] | None = None) -> None:
        node = self.world.nodes.get(name)
        if node is None:
            return
        restored = migmanager.restored_labels(hoststate.node_labels(node))
        if layouts is None and reason is None and decision.result is not None:
            layouts = decision.result.layouts
        if reason is None and layouts is not None:
            annotations: dict[str, str | None] = {
                names.MIG_LAYOUT: hoststate.layout_annotation(layouts),
                names.MIG_APPLIED: config, names.MIG_FAILURE: None}
            await self._patch(name, {names.MIG_CONFIG_STATE: "success", **restored}, annotations)
            log.info("%s: MIG config %s applied", name, config)
            return
        text = reason or "unknown error"
        failed: dict[str, str | None] = {
            names.MIG_FAILURE: migmanager.failure_annotation(config, text, self._manager_pod(name), decision.file)}
        if layouts is not None:  # what the driver did before it refused stays done
            failed.update({names.MIG_LAYOUT: hoststate.layout_annotation(layouts), names.MIG_APPLIED: None})
        await self._patch(name, {names.MIG_CONFIG_STATE: "failed", **restored}, failed)
        log.info("%s: MIG config %s failed: %s", name, config, text)
