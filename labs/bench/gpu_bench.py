"""GPU-stack figures on a running local cluster: a device-plugin config change across a fleet, a label change.

1. Config change: from the ClusterPolicy patch that points the device plugin at a 4x time-slicing config until
   every GPU node shows ``nvidia.com/gpu.shared: <4 x GPUs>`` allocatable (target <= 10 s on 1,000 nodes).
2. Label change: from ``nvidia.com/device-plugin.config`` being set on one node until its new resources are
   visible, and back (target <= 1 s).

Both watch nodes through one watch stream, so the time is when the API server shows the change, not when a
poll happens to look. These functions measure; they do not bring clusters up or down.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from cluster import errors, fleet as fleet_mod
from cluster.kube.client import Client
from cluster import gpustack
from cluster.gpustack import names

log = logging.getLogger(__name__)

CONFIGMAP = "bench-config"
CONFIG_KEY = "ts4"
REPLICAS = 4
TS4 = ("version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
       f"    - name: nvidia.com/gpu\n      replicas: {REPLICAS}\n")

NodePredicate = Callable[[dict[str, Any]], bool]


class NodeWatch:
    """Follows node changes through one watch stream, read in the caller's thread; ``close()`` ends it.

    No background thread: an open watch would hold up the API server's shutdown, so the stream lives only
    while ``wait`` reads it (and is closed by ``close``).
    """

    def __init__(self, client: Client) -> None:
        self.client = client
        self._events: Iterator[dict[str, Any]] | None = None
        self._relist()

    def _relist(self) -> None:
        listing = self.client.get("/api/v1/nodes")
        self.nodes: dict[str, dict[str, Any]] = {n["metadata"]["name"]: n for n in listing["items"]}
        self.rv = str(listing["metadata"]["resourceVersion"])

    def _next(self, left: float) -> None:
        if self._events is None:
            self._events = self.client.watch("/api/v1/nodes", resource_version=self.rv,
                                             timeout_seconds=max(1, int(left) + 1))
        try:
            ev = next(self._events)
        except StopIteration:
            self._events = None
            return
        except errors.ApiError as exc:  # 410 Gone: our resourceVersion is too old; start from a fresh list
            log.info("node watch restarts from a new list: %s", exc.message)
            self._events = None
            self._relist()
            return
        obj = ev.get("object", {})
        if ev.get("type") == "ERROR":
            self.close()
            self._relist()
            return
        self.rv = obj.get("metadata", {}).get("resourceVersion", self.rv)
        if ev.get("type") in ("ADDED", "MODIFIED"):
            self.nodes[obj["metadata"]["name"]] = obj

    def wait(self, preds: Mapping[str, NodePredicate], timeout: float) -> float:
        """Read changes until every named node satisfies its predicate; return the monotonic time it happened."""
        start = time.monotonic()
        while True:
            bad = [n for n, pred in preds.items() if n not in self.nodes or not pred(self.nodes[n])]
            if not bad:
                return time.monotonic()
            left = timeout - (time.monotonic() - start)
            if left <= 0:
                raise errors.ClusterError(f"{len(bad)} node(s) did not show the change within {timeout:.0f} s "
                                          f"(e.g. {', '.join(sorted(bad)[:3])})")
            self._next(left)

    def close(self) -> None:
        if self._events is not None:
            events, self._events = self._events, None
            events.close()  # type: ignore[attr-defined]

    def __enter__(self) -> NodeWatch:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def allocatable(key: str, value: str) -> NodePredicate:
    return lambda n: n.get("status", {}).get("allocatable", {}).get(key) == value


def gpu_nodes(fl: fleet_mod.Fleet) -> dict[str, int]:
    """GPU node name -> its GPU count, from the fleet the cluster runs."""
    return {name: p.gpu.count for p in fl.pools if p.gpu for name in p.node_names()}


def ensure_config(client: Client) -> None:
    """The ConfigMap of the benchmark's device-plugin config in the operator namespace."""
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CONFIGMAP, "namespace": names.NAMESPACE}, "data": {CONFIG_KEY: TS4}}
    try:
        client.create(f"/api/v1/namespaces/{names.NAMESPACE}/configmaps", body)
    except errors.Conflict:
        client.patch(f"/api/v1/namespaces/{names.NAMESPACE}/configmaps/{CONFIGMAP}", {"data": {CONFIG_KEY: TS4}})


def install_operator(client: Client, timeout: float) -> float:
    """Install the simulated GPU Operator and wait for its policy to be ready; returns the seconds it took."""
    t0 = time.monotonic()
    gpustack.install(client, wait=True, timeout=timeout)
    return time.monotonic() - t0


def config_change_seconds(client: Client, fl: fleet_mod.Fleet, timeout: float = 300.0) -> tuple[float, int]:
    """Seconds from the ClusterPolicy patch to every GPU node advertising the time-sliced resource.

    Returns (seconds, GPU nodes). The operator must be installed; the policy's device-plugin config is left
    pointing at the benchmark's config.
    """
    counts = gpu_nodes(fl)
    if not counts:
        raise errors.ClusterError("the fleet has no GPU nodes to reconfigure")
    with NodeWatch(client) as watch:
        watch.wait({name: allocatable("nvidia.com/gpu", str(n)) for name, n in counts.items()}, timeout)
        ensure_config(client)
        start = time.monotonic()
        client.patch(f"{names.POLICY_PATH}/{names.POLICY_NAME}",
                     {"spec": {"devicePlugin": {"config": {"name": CONFIGMAP, "default": CONFIG_KEY}}}})
        done = watch.wait({name: allocatable("nvidia.com/gpu.shared", str(n * REPLICAS))
                           for name, n in counts.items()}, timeout)
    return done - start, len(counts)


def restore_config(client: Client, fl: fleet_mod.Fleet, timeout: float = 300.0) -> None:
    """Point the device plugin back at its built-in config and wait until every GPU node shows whole GPUs."""
    client.patch(f"{names.POLICY_PATH}/{names.POLICY_NAME}", {"spec": {"devicePlugin": {"config": None}}})
    with NodeWatch(client) as watch:
        watch.wait({name: allocatable("nvidia.com/gpu", str(n)) for name, n in gpu_nodes(fl).items()}, timeout)


def label_change_seconds(client: Client, fl: fleet_mod.Fleet, node: str, repeat: int = 3,
                         timeout: float = 30.0) -> list[float]:
    """Seconds from setting (and clearing) a node's device-plugin config label to its resources changing.

    The policy's config points at the benchmark's ConfigMap without a default, so the label alone decides.
    """
    gpus = gpu_nodes(fl).get(node)
    if not gpus:
        raise errors.ClusterError(f"node {node!r} has no GPUs to relabel")
    ensure_config(client)
    client.patch(f"{names.POLICY_PATH}/{names.POLICY_NAME}",
                 {"spec": {"devicePlugin": {"config": {"name": CONFIGMAP, "default": None}}}})
    out: list[float] = []
    with NodeWatch(client) as watch:
        watch.wait({node: allocatable("nvidia.com/gpu", str(gpus))}, timeout)
        for _ in range(repeat):
            for value, want in ((CONFIG_KEY, ("nvidia.com/gpu.shared", str(gpus * REPLICAS))),
                                (None, ("nvidia.com/gpu", str(gpus)))):
                start = time.monotonic()
                client.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {names.DEVICE_PLUGIN_CONFIG: value}}})
                out.append(watch.wait({node: allocatable(*want)}, timeout) - start)
    return out
