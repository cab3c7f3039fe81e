"""The per-node controller: applies a ``NodePlan`` (labels, annotations, capacity/allocatable), keeps the operand
pods' statuses in step with it, publishes or withdraws the node's ResourceSlice, and starts the MIG manager.

The validator gate lives here: once a node's driver and toolkit validations pass (the ``driver-ready`` and
``toolkit-ready`` files the device plugin waits for), the plugin starts and registers after ``VALIDATION_SECONDS``;
only then does the node get allocatable GPUs. The CUDA and plugin validations gate nothing
(``OP assets/state-device-plugin/0500_daemonset.yaml``): their failure shows on the validator pod and the
ClusterPolicy only. The config-manager sidecars' turns (a label change, the config chosen, the signal to the
plugin) go to their container logs as the real sidecar prints them (``cmlogs``), and a failing operand's
failure to the log of the instance that failed, once (``faillogs``, ``operandlogs``). A failing CUDA validation
creates its workload pod ``nvidia-cuda-validator-<suffix>`` on the node, as the validator does, which fails with
vectorAdd's error; gpulab removes it once the validation passes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

from cluster import errors
from cluster.gpu import config_manager
from cluster.kube.client import APPLY_PATCH, AsyncClient
from cluster.sim.gpu import (cmlogs, devicefile, dra, events, faillogs, hoststate, manifests, migmanager, migrunner,
                             names, nodeplan, operandlogs, operands, plugin, policy as policy_mod, startlogs,
                             world as world_mod)
from cluster.sim.gpu.workqueue import WorkQueue
from cluster.sim.kubelet import logstore

log = logging.getLogger("gpulab.gpu-stack")

VALIDATION_SECONDS = 0.5
# Operands whose replacement pod changes what the node shows: the plugin and GFD load their config at start, a
# new mig-manager applies the current label again.
RESTART_AWARE = ("device-plugin", "gpu-feature-discovery", "mig-manager")


class NodeReconciler:
    def __init__(self, client: AsyncClient, world: world_mod.World, recorder: events.Recorder,
                 device_checkpoint: Path | None = None, device_files: devicefile.Writer | None = None,
                 logs: logstore.LogStore | None = None) -> None:
        self.client = client
        # On kind: each node's devices go to its node plugin (devicefile), and the real kubelet writes capacity
        # and allocatable; without it (local), the stack patches them into the node's status itself.
        self.device_files = device_files
        self.world = world
        self.recorder = recorder
        self.kubelet = events.Recorder(client, "kubelet")
        self.queue = WorkQueue(self.reconcile)
        self.validated_at: dict[str, float] = {}
        self._looked_at: set[str] = set()  # nodes this process has judged at least once
        self.operand_states: dict[str, dict[str, operands.OperandState]] = {}
        self.slices: dict[str, str] = {}  # node -> JSON of the devices last published
        self.slice_names: dict[str, str] = {}  # node -> the name the API server generated for its slice
        self.mig = migrunner.MigRunner(client, world, device_checkpoint, logs)
        self.logs = logs  # the kubelet's container logs (on kind: the store the stand-in containers print from)
        self.failures = operandlogs.OperandLogs(logs)  # what each failing operand instance has logged
        self._validator_runs = asyncio.Lock()
        # node -> (operand -> (pod uid, label, default, ConfigMap)) the config-manager sidecars last acted on
        self._sidecars: dict[str, dict[str, tuple[str, str | None, str | None, str]]] = {}
        self._generation = int(time.time())
        self.changes = 0  # bumped by every reconcile and operand pod event (the policy status looks at it)
        self._burst: tuple[float, int, int] | None = None  # (start, reconciles, patches) of the current burst

    # --- validator gate -------------------------------------------------------------------------------------

    def _validated(self, name: str, node: dict[str, Any]) -> bool:
        f = hoststate.faults(node)
        if not (f.driver_ok and f.toolkit_ok) or self.world.policy is None:
            self.validated_at.pop(name, None)
            return False
        at = self.validated_at.get(name)
        first_look = name not in self._looked_at
        self._looked_at.add(name)
        if at is None and first_look and _advertised(node):
            # The validator's result lives on the host (its ready files under /run/nvidia/validations), so a stack
            # started again finds a node that already hands out GPUs validated and does not gate it a second time.
            self.validated_at[name] = time.monotonic()
            return True
        if at is None:
            self.validated_at[name] = time.monotonic() + VALIDATION_SECONDS
            self.queue.add_after(name, VALIDATION_SECONDS + 0.02)
            return False
        return time.monotonic() >= at

    # --- the reconcile ---------------------------------------------------------------------------------------

    async def reconcile(self, name: str) -> None:
        self.changes += 1
        start, count, patches = self._burst or (time.monotonic(), 0, 0)
        self._burst = (start, count + 1, patches)
        try:
            await self._reconcile(name)
        finally:
            if self.queue.idle_except(name) and self._burst is not None:
                start, count, patches = self._burst
                if count > 20:
                    log.info("reconciled %d nodes (%d patches) in %.2f s", count, patches, time.monotonic() - start)
                self._burst = None

    async def _reconcile(self, name: str) -> None:
        node = self.world.nodes.get(name)
        if node is None:
            await self._withdraw_slice(name)
            self.validated_at.pop(name, None)
            self.operand_states.pop(name, None)
            return
        pol = self.world.policy
        self._config_manager_turns(name, node, pol)
        plan = nodeplan.plan(node, pol, self.world.configmaps, validated=self._validated(name, node),
                             timestamp=str(int(time.time())), pod_uids=self._config_pods(name))
        await self._apply(name, plan)
        self.operand_states[name] = plan.operands if pol is not None and hoststate.hardware(node).model else {}
        await self.sync_operand_pods(name)
        await self._sync_slice(name, node, plan)
        if pol is None:
            self.mig.cancel(name)
            return
        decision = migmanager.decide(node, pol, self.world.mig_file(), self._config_pods(name).get("mig-manager"))
        await self.mig.handle(name, decision)

    def _config_manager_turns(self, name: str, node: dict[str, Any], pol: policy_mod.Policy | None) -> None:
        """Log a turn of each config-manager sidecar on the node whose label, default or ConfigMap it has not yet
        acted on (``cmlogs``): its first turn in a new pod ("Already configured", the init container chose the
        file), and each label change after that."""
        if self.logs is None or pol is None or not pol.device_plugin_config:
            self._sidecars.pop(name, None)
            return
        data = self.world.configmaps.get(pol.device_plugin_config)
        if data is None:
            return
        labels = dict(hoststate.node_labels(node))
        label, default = cmlogs.label_of(labels), pol.device_plugin_default or None
        seen = self._sidecars.setdefault(name, {})
        ann = hoststate.node_annotations(node)
        for pod in self.world.operator_pods_on(name):
            operand = operands.operand_of(pod)
            if operand not in cmlogs.SIGNALLED or pod["metadata"].get("deletionTimestamp"):
                continue
            uid = str(pod["metadata"].get("uid", ""))
            now = (uid, label, default, pol.device_plugin_config)
            before = seen.get(operand)
            if before == now or not _running(pod, cmlogs.CONTAINER):
                continue
            seen[operand] = now
            selection = config_manager.select_config(data, label, default, cmlogs.FALLBACKS)
            key = names.PLUGIN_CONFIG_LOADED if operand == "device-plugin" else names.GFD_CONFIG_LOADED
            loaded = plugin.Loaded.from_annotation(ann.get(key))
            # What this pod's plugin runs with: what it loaded, or (a new pod) what its init container just chose.
            previous = loaded.key if loaded is not None and loaded.pod == uid else selection.name
            self._write(pod, cmlogs.CONTAINER, cmlogs.label_change(operand, label, default, selection, previous))

    def _write(self, pod: dict[str, Any], container: str, lines: tuple[startlogs.Line, ...]) -> None:
        if self.logs is None:
            return
        meta = pod["metadata"]
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        restart = next((int(cs.get("restartCount", 0)) for cs in statuses if cs.get("name") == container), 0)
        ref = logstore.ContainerRef(meta["namespace"], meta["name"], meta["uid"], container, restart)
        try:
            for line in lines:
                self.logs.write(ref, startlogs.render(line, time.time_ns()), stream=line.stream)
        except (OSError, ValueError) as exc:
            log.warning("could not write the %s log of %s: %s", container, meta["name"], exc)

    def _config_pods(self, name: str) -> dict[str, str]:
        """The live device-plugin, GFD and mig-manager pods on the node (a replaced pod reloads its config)."""
        out: dict[str, str] = {}
        for pod in self.world.operator_pods_on(name):
            operand = operands.operand_of(pod)
            if operand in RESTART_AWARE and not pod["metadata"].get("deletionTimestamp"):
                out[operand] = str(pod["metadata"].get("uid", ""))
        return out

    async def _apply(self, name: str, plan: nodeplan.NodePlan) -> None:
        """One PATCH on the node's status subresource: a node's status PATCH may also carry labels and annotations,
        so the device registry, GFD labels and resources change together (and cost one write, one watch event).
        With a node plugin (kind), the devices go to its file instead, and the kubelet owns the resources."""
        body: dict[str, Any] = {}
        if self.device_files is not None:
            self.device_files.write(name, devicefile.render(plan.devices, plan.single_request))
        meta: dict[str, Any] = {}
        if plan.labels:
            meta["labels"] = plan.labels
        if plan.annotations:
            meta["annotations"] = plan.annotations
        if meta:
            body["metadata"] = meta
        if (plan.capacity or plan.allocatable) and self.device_files is None:
            body["status"] = {"capacity": plan.capacity, "allocatable": plan.allocatable}
        if not body:
            return
        if self._burst is not None:
            self._burst = (self._burst[0], self._burst[1], self._burst[2] + 1)
        try:
            await self.client.patch(f"/api/v1/nodes/{name}/status", body)
        except errors.NotFound:
            return

    # --- operand pods ----------------------------------------------------------------------------------------

    async def sync_operand_pods(self, name: str) -> None:
        states = self.operand_states.get(name, {})
        node = self.world.nodes.get(name)
        for pod in self.world.operator_pods_on(name):
            operand = operands.operand_of(pod)
            if operand is None or pod["metadata"].get("deletionTimestamp"):
                continue
            await self.sync_operand_pod(pod, node, states.get(operand, operands.OperandState()))
        await self._sync_cuda_workload(name, node, states.get("operator-validator", operands.OperandState()))
        self.failures.forget(str(p["metadata"].get("uid", "")) for p in self.world.pods.values())

    async def sync_operand_pod(self, pod: dict[str, Any], node: dict[str, Any] | None,
                               st: operands.OperandState) -> None:
        status = pod.get("status", {})
        if st.phase == operands.OK and (status.get("phase", "Pending") == "Pending" and not status.get("containerStatuses")):
            return  # a fresh pod: the pod agent starts it
        crash = st.phase in (operands.CRASH, operands.INIT_CRASH)
        if operands.matches(pod, st) and not (crash and self.failures.changed(pod, st)):
            return
        termination = ""
        if crash:
            # The instance that fails logs why, once; the lines of a CUDA validation name the pod it created.
            if st.message == operands.CUDA and self._plays_kubelet():
                async with self._validator_runs:  # one run creates its workload pod, however many passes see it
                    lines = None
                    if not self.failures.is_written(pod, st):
                        node_name = pod["spec"].get("nodeName", "")
                        lines = faillogs.cuda_validation(await self._new_cuda_workload(node_name))
                    termination = self.failures.write(pod, st, lines)
            else:
                termination = self.failures.write(pod, st)
        m = pod["metadata"]
        try:
            await self.client.patch(f"/api/v1/namespaces/{m['namespace']}/pods/{m['name']}/status",
                                    {"status": operands.pod_status(pod, node, st, termination)})
        except errors.NotFound:
            return
        host = pod["spec"].get("nodeName", "")
        if crash:
            await self.kubelet.record(pod, "Warning", "BackOff",
                                       f"Back-off restarting failed container {operands.failing_container(pod, st)} "
                                       f"in pod {m['name']}_{m['namespace']}({m['uid']})", host=host)
        elif st.phase == operands.CREATING:
            await self.kubelet.record(pod, "Warning", "FailedMount", st.message, host=host)

    # --- the CUDA validation's workload pod --------------------------------------------------------------------

    def _plays_kubelet(self) -> bool:
        """Whether gpulab plays the nodes' kubelet (local) and keeps their logs; on kind (a node plugin's device
        files) real kubelets run the pods, and the log store only feeds the stand-in containers."""
        return self.logs is not None and self.device_files is None

    def _cuda_workloads(self, name: str) -> list[dict[str, Any]]:
        return [p for p in self.world.operator_pods_on(name) if not p["metadata"].get("deletionTimestamp")
                and (p["metadata"].get("labels") or {}).get("app") == faillogs.CUDA_WORKLOAD_APP]

    async def _new_cuda_workload(self, name: str) -> str:
        """What the validator's ``cuda-validation`` step does on each run (``OP cmd/nvidia-validator/main.go``
        ``runWorkload``): delete the node's previous workload pod, create a new one; its generated name."""
        await self._delete_cuda_workloads(name)
        pod_name = faillogs.CUDA_WORKLOAD_PREFIX
        for _ in range(3):
            try:
                created = await self.client.create(f"/api/v1/namespaces/{names.NAMESPACE}/pods",
                                                   manifests.cuda_workload_pod(name))
            except errors.ApiError as exc:  # the validator's own "failed to create cuda validation pod" case
                log.warning("could not create the CUDA validation pod on %s: %s", name, exc)
                return pod_name
            pod_name = str(created["metadata"]["name"])
            # vectorAdd fails as soon as the kubelet starts it: its init container never completes, so its status
            # is written before the pod agent's (which yields to a status written since it looked). Where the
            # agent was quicker, the pod shows a completed init container, which cannot fail any more: another.
            if await self._fail_cuda_workload(created, self.world.nodes.get(name)):
                break
            await self._delete(pod_name)
        return pod_name

    async def _fail_cuda_workload(self, pod: dict[str, Any], node: dict[str, Any] | None) -> bool:
        st = operands.OperandState(operands.INIT_CRASH, faillogs.CUDA_WORKLOAD_CONTAINER, "vectorAdd",
                                   faillogs.vector_add())
        try:
            await self.sync_operand_pod(pod, node, st)
        except errors.ApiError as exc:  # the pod agent started it first: an init container cannot run again
            log.info("the CUDA validation pod %s started before it could fail: %s", pod["metadata"]["name"], exc)
            return False
        return True

    async def _delete(self, pod_name: str) -> None:
        try:
            await self.client.delete(f"/api/v1/namespaces/{names.NAMESPACE}/pods/{pod_name}", gracePeriodSeconds=0)
        except errors.NotFound:
            pass

    async def _delete_cuda_workloads(self, name: str) -> None:
        for p in self._cuda_workloads(name):
            await self._delete(str(p["metadata"]["name"]))

    async def _sync_cuda_workload(self, name: str, node: dict[str, Any] | None,
                                  validator: operands.OperandState) -> None:
        """The workload pod fails with vectorAdd's error while the CUDA validation fails. Once it passes, gpulab
        removes the pod (upstream a new one runs to ``Completed`` and stays; gpulab does not show that one)."""
        if not self._plays_kubelet():
            return  # where a real kubelet runs the operands (kind), gpulab creates no workload pod: its image is
            # not on the node, and the kubelet would try to pull it from a registry
        if validator.message != operands.CUDA:
            if self._cuda_workloads(name):
                await self._delete_cuda_workloads(name)
            return
        for pod in self._cuda_workloads(name):
            await self._fail_cuda_workload(pod, node)

    # --- DRA ----------------------------------------------------------------------------------------------------

    async def _sync_slice(self, name: str, node: dict[str, Any], plan: nodeplan.NodePlan) -> None:
        if plan.dra_inventory is None:
            await self._withdraw_slice(name)
            return
        devices = dra.devices(plan.dra_inventory)
        text = json.dumps(devices, sort_keys=True)
        if self.slices.get(name) == text:
            return
        self._generation += 1
        body = dra.resource_slice(name, node["metadata"]["uid"], plan.dra_inventory, self._generation)
        known = self.slice_names.get(name)
        if known is not None:
            meta = {k: v for k, v in body["metadata"].items() if k != "generateName"}
            try:
                await self.client.request("PATCH", f"{dra.SLICES_PATH}/{known}",
                                          body=json.dumps({**body, "metadata": {**meta, "name": known}}),
                                          params={"fieldManager": "gpu.nvidia.com", "force": "true"},
                                          content_type=APPLY_PATCH)
                self.slices[name] = text
                return
            except errors.NotFound:  # deleted by hand: publish a new one, as the slice controller does
                pass
        created = await self.client.create(dra.SLICES_PATH, body)
        self.slice_names[name] = str(created["metadata"]["name"])
        self.slices[name] = text

    async def _withdraw_slice(self, name: str) -> None:
        if name not in self.slices:
            return
        known = self.slice_names.pop(name, None)
        if known is not None:
            try:
                await self.client.delete(f"{dra.SLICES_PATH}/{known}")
            except errors.NotFound:
                pass
        self.slices.pop(name, None)

    async def adopt_slices(self) -> None:
        """Learn which slices a previous run published, so they are withdrawn or kept correctly."""
        listing = await self.client.get(dra.SLICES_PATH, fieldSelector=f"spec.driver={names.DRA_DRIVER}")
        for s in listing.get("items", []):
            node = s.get("spec", {}).get("nodeName")
            if node:
                self.slices[node] = json.dumps(s["spec"].get("devices", []), sort_keys=True)
                self.slice_names[node] = str(s["metadata"]["name"])


def _advertised(node: dict[str, Any]) -> bool:
    """Whether the node hands out some ``nvidia.com/`` resource now (only a validated node can)."""
    alloc = node.get("status", {}).get("allocatable") or {}
    return any(k.startswith("nvidia.com/") and str(v) not in ("0", "") for k, v in alloc.items())


def _running(pod: dict[str, Any], container: str) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return any(cs.get("name") == container and "running" in (cs.get("state") or {}) for cs in statuses)
