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
APPS = f"/apis/apps/v1/namespaces/{names.NAMESPACE}"


def wanted_daemonsets(pol: policy_mod.Policy | None) -> dict[str, bool]:
    """Operand -> whether its DaemonSet should exist (the DRA kubelet plugin always, with the operator)."""
    return {op: pol is not None and (pol.enabled(op) if op in names.OPERANDS else True)
            for op in manifests.operand_daemonsets()}


def ds_name(operand: str) -> str:
    return names.DRA_PLUGIN_DS if operand == "dra-kubelet-plugin" else names.OPERANDS[operand][0]


def cluster_state(pol: policy_mod.Policy, world: world_mod.World,
                  states: Mapping[str, Mapping[str, operands.OperandState]], validated: set[str]) -> str:
    for name, node in world.nodes.items():
        if hoststate.hardware(node).model is None:
            continue
        if name not in validated:
            return "notReady"
        for operand, st in states.get(name, {}).items():
            if (operand in names.OPERANDS and not pol.enabled(operand)) or st.phase == operands.OK:
                continue
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
            path = f"{APPS}/daemonsets/{ds_name(operand)}"
            await (self._ensure(f"{APPS}/daemonsets", manifests.daemonset(operand)) if wanted else self._delete(path))
        if pol is not None:
            await self._ensure(f"{APPS}/deployments", manifests.operator_deployment())

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
            await self.client.patch(f"{names.POLICY_PATH}/{names.POLICY_NAME}/status",
                                    {"status": {"state": state, "namespace": names.NAMESPACE}})
            self.state = state
        except errors.NotFound:
            self.state = ""
