"""The operator's own reconcile: operand DaemonSets and the operator Deployment follow the ClusterPolicy's enable
flags, and ``ClusterPolicy.status.state`` says ``ready`` once every GPU node's operands run and validated."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from cluster import errors
from cluster.kube.client import AsyncClient
from cluster.sim.gpu import hoststate, manifests, names, operands, policy as policy_mod, world as world_mod

log = logging.getLogger("gpulab.gpu-stack.operator")


def wanted_daemonsets(pol: policy_mod.Policy | None) -> dict[str, bool]:
    """Operand -> whether its DaemonSet should exist (the DRA kubelet plugin always, with the operator)."""
    return {op: pol is not None and (pol.enabled(op) if op in names.OPERANDS else True)
            for op in manifests.operand_daemonsets()}


def ds_name(operand: str) -> str:
    return names.DRA_PLUGIN_DS if operand == "dra-kubelet-plugin" else names.OPERANDS[operand][0]


def expected_operands(pol: policy_mod.Policy, node_labels: Mapping[str, str]) -> set[str]:
    """Operands whose DaemonSet should run a pod on a node with these labels."""
    dra_mode = node_labels.get(names.DRA_ENABLED) == "true"
    out = {op for op in names.OPERANDS if pol.enabled(op) and node_labels.get(names.DEPLOY_PREFIX + op) == "true"
           and not (op == "device-plugin" and dra_mode)}
    if dra_mode:
        out.add("dra-kubelet-plugin")
    return out


def _pod_ready(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status", {})
    return status.get("phase") == "Running" and all(cs.get("ready") for cs in status.get("containerStatuses", [{}]))


def cluster_state(pol: policy_mod.Policy, world: world_mod.World,
                  states: Mapping[str, Mapping[str, operands.OperandState]], validated: set[str]) -> str:
    """``ready`` when every GPU node validated and each operand it should run has a ready pod (the operator's
    DaemonSet readiness), else ``notReady``."""
    for name, node in world.nodes.items():
        if hoststate.hardware(node).model is None:
            continue
        if name not in validated or not states.get(name):
            return "notReady"
        running = {operands.operand_of(p) for p in world.operator_pods_on(name)
                   if _pod_ready(p) and not p["metadata"].get("deletionTimestamp")}
        if not expected_operands(pol, hoststate.node_labels(node)) <= running:
            return "notReady"
    return "ready"


class OperatorController:
    def __init__(self, client: AsyncClient, world: world_mod.World) -> None:
        self.client = client
        self.world = world
        self.state = ""

    async def sync_workloads(self) -> None:
        pol = self.world.policy
        for operand, wanted in wanted_daemonsets(pol).items():
            path = f"{names.APPS_PATH}/daemonsets/{ds_name(operand)}"
            collection = f"{names.APPS_PATH}/daemonsets"
            await (self._ensure(collection, manifests.daemonset(operand)) if wanted else self._delete(path))
        if pol is not None:
            await self._ensure(f"{names.APPS_PATH}/deployments", manifests.operator_deployment())

    async def _ensure(self, collection: str, body: dict[str, Any]) -> None:
        try:
            await self.client.create(collection, body)
            log.info("created %s %s", body["kind"], body["metadata"]["name"])
        except errors.Conflict:
            pass
        except errors.NotFound:
            log.warning("namespace %s is missing; cannot create %s", names.NAMESPACE, body["metadata"]["name"])

    async def _delete(self, path: str) -> None:
        try:
            await self.client.delete(path, propagationPolicy="Background")
        except errors.NotFound:
            pass

    async def update_status(self, states: Mapping[str, Mapping[str, operands.OperandState]], validated: set[str]) -> None:
        pol = self.world.policy
        if pol is None:
            self.state = ""
            return
        state = cluster_state(pol, self.world, states, validated)
        current = ((self.world.policy_obj or {}).get("status") or {}).get("state")
        if state == self.state and current == state:
            return
        try:
            await self.client.patch(f"{names.POLICY}/status",
                                    {"status": {"state": state, "namespace": names.NAMESPACE}})
            self.state = state
        except errors.NotFound:
            self.state = ""
