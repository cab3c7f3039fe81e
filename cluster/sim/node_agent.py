"""The node agent: registers a fleet's simulated nodes and keeps them Ready, as their kubelets would.

It renews each node's Lease in ``kube-node-lease`` and re-posts ``Ready=True`` when the node lifecycle
controller marked a node Unknown while the heartbeat is on. Like a kubelet, which reports its addresses and port
in every status update, it corrects a registered node's addresses, kubelet port and declared features when they
differ from the fleet's plan (a node registered by an older gpulab, or a cluster whose kubelet port moved). A node
annotated ``gpulab.dev/heartbeat=stopped`` gets no renewals, so the real node lifecycle controller turns it NotReady
and taints it. Run as ``python -m cluster.sim.node_agent --kubeconfig K --fleet F``; it must not decide placement or
touch pods.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import random
from typing import Any

from cluster import errors, fleet as fleet_mod
from cluster.kube.client import AsyncClient, STRATEGIC_PATCH
from cluster.sim import informer, nodes

_REPORTED = ("addresses", "daemonEndpoints", "declaredFeatures")  # what a kubelet posts in each status update
log = logging.getLogger("gpulab.node-agent")

LEASE_NS = "kube-node-lease"


def _micro_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class NodeAgent:
    def __init__(self, client: AsyncClient, fl: fleet_mod.Fleet, lease_seconds: int, renew_every: float,
                 kubelet_port: int = nodes.DEFAULT_KUBELET_PORT) -> None:
        self.client = client
        self.fleet = fl
        self.kubelet_port = kubelet_port
        self.lease_seconds = lease_seconds
        self.renew_every = renew_every
        self.nodes = informer.Informer(client, "/api/v1/nodes", self.on_node)
        self._uids: dict[str, str] = {}
        self._sem = asyncio.Semaphore(24)

    def heartbeat_on(self, name: str) -> bool:
        node = self.nodes.cache.get(name)
        if node is None:
            return False
        return bool(node["metadata"].get("annotations", {}).get(nodes.HEARTBEAT_ANNOTATION) != "stopped")

    async def register_all(self) -> None:
        wanted = nodes.build_all(self.fleet, self.kubelet_port)
        listed = (await self.client.get("/api/v1/nodes"))["items"]
        existing = {n["metadata"]["name"] for n in listed}

        async def register(node: dict[str, Any]) -> None:
            name = node["metadata"]["name"]
            async with self._sem:
                try:
                    created = await self.client.create("/api/v1/nodes", node)
                    self._uids[name] = created["metadata"]["uid"]
                except errors.Conflict:
                    return
                # As a kubelet does right after registering: its Lease, owned by the Node.
                try:
                    await self.client.create(f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NS}/leases",
                                             self._lease(name))
                except errors.Conflict:
                    pass

        await asyncio.gather(*(register(n) for n in wanted if n["metadata"]["name"] not in existing))
        await self._correct_endpoints(wanted, listed)
        log.info("registered %d nodes (%d already present)", len(wanted) - len(existing & {n["metadata"]["name"] for n in wanted}), len(existing))

    async def _correct_endpoints(self, wanted: list[dict[str, Any]], listed: list[dict[str, Any]]) -> None:
        """Post the planned addresses and kubelet port of registered nodes that show others."""
        found = {n["metadata"]["name"]: n.get("status", {}) for n in listed}
        stale = [w for w in wanted if w["metadata"]["name"] in found and any(
            found[w["metadata"]["name"]].get(k) != w["status"][k] for k in _REPORTED)]

        async def correct(node: dict[str, Any]) -> None:
            body = {"status": {k: node["status"][k] for k in _REPORTED}}
            async with self._sem:
                try:
                    # A merge patch replaces the address list whole (a strategic one would keep a stale address
                    # of another type beside it).
                    await self.client.patch(f"/api/v1/nodes/{node['metadata']['name']}/status", body)
                except errors.NotFound:
                    pass

        await asyncio.gather(*(correct(n) for n in stale))
        if stale:
            log.info("corrected the addresses, kubelet port and declared features of %d nodes", len(stale))

    async def on_node(self, event: str, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        if event == "DELETED" or node["metadata"].get("annotations", {}).get(nodes.SIMULATED_ANNOTATION) != "true":
            return
        self._uids[name] = node["metadata"]["uid"]
        if not self.heartbeat_on(name):
            return
        ready = next((c for c in node.get("status", {}).get("conditions", []) if c.get("type") == "Ready"), None)
        if ready is None or ready.get("status") != "True":
            # A kubelet whose heartbeat resumes posts Ready again; the lifecycle controller then lifts its taints.
            await self.client.patch(f"/api/v1/nodes/{name}/status",
                                    {"status": {"conditions": nodes.ready_conditions()}}, STRATEGIC_PATCH)
            await self.renew(name)

    def _spec(self, name: str) -> dict[str, Any]:
        return {"holderIdentity": name, "leaseDurationSeconds": self.lease_seconds, "renewTime": _micro_now()}

    def _lease(self, name: str) -> dict[str, Any]:
        lease: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": LEASE_NS, "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": name, "uid": self._uids.get(name, "")}]},
            "spec": self._spec(name),
        }
        if not lease["metadata"]["ownerReferences"][0]["uid"]:
            del lease["metadata"]["ownerReferences"]
        return lease

    async def renew(self, name: str) -> None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NS}/leases/{name}"
        async with self._sem:
            try:
                await self.client.patch(path, {"spec": self._spec(name)})
            except errors.NotFound:
                try:
                    await self.client.create(f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NS}/leases",
                                             self._lease(name))
                except errors.Conflict:
                    pass

    async def heartbeat_loop(self) -> None:
        await self.nodes.synced.wait()
        while True:
            names = [k for k, n in self.nodes.cache.items()
                     if n["metadata"].get("annotations", {}).get(nodes.SIMULATED_ANNOTATION) == "true"
                     and self.heartbeat_on(k)]
            started = asyncio.get_running_loop().time()
            results = await asyncio.gather(*(self.renew(n) for n in names), return_exceptions=True)
            failed = [r for r in results if isinstance(r, BaseException)]
            if failed:
                log.warning("%d of %d lease renewals failed (first: %s)", len(failed), len(names), failed[0])
            spent = asyncio.get_running_loop().time() - started
            await asyncio.sleep(max(0.5, self.renew_every - spent + random.uniform(-0.5, 0.5)))

    async def run(self) -> None:
        await self.register_all()
        await self.keep_ready()

    async def keep_ready(self) -> None:
        """Watch the nodes and renew their leases (after ``register_all``), until cancelled."""
        await asyncio.gather(self.nodes.run(), self.heartbeat_loop())
