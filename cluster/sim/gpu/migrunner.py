"""Runs the MIG manager's reconfiguration on a node: ``pending``, pause the GPU clients, evict GPU pods, apply
after a short delay, then ``success`` or ``failed`` with the reason (node annotation and a Warning event).

One task per node; a new ``nvidia.com/mig.config`` value cancels the running one and starts over, as the real
MIG manager restarts its reconcile loop on a label change.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from cluster import errors
from cluster.kube.client import AsyncClient
from cluster.sim.gpu import events, hoststate, migmanager, names, world as world_mod

log = logging.getLogger("gpulab.gpu-stack.mig-manager")
EVICTION_TIMEOUT = 10.0


class MigRunner:
    def __init__(self, client: AsyncClient, world: world_mod.World, recorder: events.Recorder) -> None:
        self.client = client
        self.world = world
        self.recorder = recorder
        self.tasks: dict[str, tuple[str, asyncio.Task[None]]] = {}

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
        if decision.action == migmanager.SUCCESS:
            await self._finish(name, decision.config, None, decision)
        elif decision.action == migmanager.FAILED:
            await self._finish(name, decision.config, decision.reason, decision)
        else:
            self.tasks[name] = (decision.config, asyncio.ensure_future(self._reconfigure(name, decision.config)))

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
            await self._evict(name)
            await asyncio.sleep(max(0.0, migmanager.APPLY_SECONDS - (time.monotonic() - started)))
            node = self.world.nodes[name]
            decision = migmanager.decide(node, self.world.policy, self.world.mig_file())
            reason = decision.reason if decision.action in (migmanager.APPLY, migmanager.FAILED) else None
            if decision.config != config:
                return  # the label changed meanwhile; the reconcile that saw it starts over
            await self._finish(name, config, reason or None, decision)
        except asyncio.CancelledError:
            raise
        except (errors.CourseError, KeyError) as exc:
            log.warning("%s: MIG reconfiguration interrupted: %s", name, exc)
        finally:
            current = self.tasks.get(name)
            if current and current[1] is asyncio.current_task():
                self.tasks.pop(name, None)

    async def _evict(self, name: str) -> None:
        """Delete the node's GPU pods and wait (bounded) until they are gone, as the MIG manager drains GPU clients."""
        victims = [p for p in self.world.pods_on(name) if migmanager.is_gpu_pod(p)
                   and p.get("status", {}).get("phase") in (None, "Pending", "Running")]
        for pod in victims:
            m = pod["metadata"]
            await self.recorder.record(pod, "Normal", "Killing",
                                       f"Stopping GPU workload for MIG reconfiguration of node {name}", host=name)
            try:
                await self.client.delete(f"/api/v1/namespaces/{m['namespace']}/pods/{m['name']}")
            except errors.NotFound:
                pass
        deadline = time.monotonic() + EVICTION_TIMEOUT
        keys = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in victims}
        while keys and time.monotonic() < deadline:
            alive = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in self.world.pods_on(name)}
            keys &= alive
            if keys:
                await asyncio.sleep(0.1)

    async def _finish(self, name: str, config: str, reason: str | None, decision: migmanager.Decision) -> None:
        node = self.world.nodes.get(name)
        if node is None:
            return
        restored = migmanager.restored_labels(hoststate.node_labels(node))
        if reason is None and decision.result is not None:
            annotations: dict[str, str | None] = {
                names.MIG_LAYOUT: hoststate.layout_annotation(decision.result.layouts),
                names.MIG_APPLIED: config, names.MIG_FAILURE: None}
            await self._patch(name, {names.MIG_CONFIG_STATE: "success", **restored}, annotations)
            log.info("%s: MIG config %s applied", name, config)
            return
        text = reason or "unknown error"
        await self._patch(name, {names.MIG_CONFIG_STATE: "failed", **restored},
                          {names.MIG_FAILURE: migmanager.failure_annotation(config, text)})
        await self.recorder.record({"kind": "Node", "apiVersion": "v1", "metadata": node["metadata"]}, "Warning",
                                   "MigConfigFailed", f"failed to apply MIG config {config}: {text}", host=name)
        log.info("%s: MIG config %s failed: %s", name, config, text)
