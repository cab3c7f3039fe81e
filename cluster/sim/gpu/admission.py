"""The kubelet's device manager and the NVIDIA device plugin's ``Allocate``, as a pod-agent admission hook.

For extended resources, devices come from the list the plugin registered (the node's ``gpulab.dev/device-registry``
annotation, written by the stack); devices held by the node's other live pods are taken, as the kubelet's own
device-manager checkpoint (``cluster.sim.checkpoint``, kept by the pod agent) records them. Pod annotations are
never read back for this: a tenant can write them, and could otherwise make another tenant's pod fail. Shared replicas are
picked by the plugin's ``sharedDevicesAllocationPolicy`` (``distributed``: the GPU with the fewest replicas in
use; ``packed``: the busiest GPU that still has one). A container asking for more than one replica of a
resource with ``failRequestsGreaterThanOne`` is refused with the kubelet's wrapping of the plugin's error
(reference section 1). Before allocating, the node's Topology Manager policy judges the request
(``cluster.sim.gpu.topology``): a pod it refuses ends ``Failed`` with ``TopologyAffinityError``, and an admitted
one gets its devices from the NUMA nodes of the best hint first. For DRA, allocated claims count as prepared: the container gets the allocated devices.
The allocation is recorded in the checkpoint, and shown on the pod (``gpulab.dev/devices`` and ``gpulab.dev/env``
with ``NVIDIA_VISIBLE_DEVICES``) for people and the DCGM exporter to read. This hook must not bind or schedule
anything.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cluster import errors, quantity
from cluster.sim import admission
from cluster.sim import nodes as nodes_mod
from cluster.sim.gpu import dra, hoststate, names, topology

log = logging.getLogger(__name__)

UNEXPECTED = "UnexpectedAdmissionError"
CLAIM_PREFIX = "claim/"  # checkpoint entries of DRA devices: resource "claim/<pod's claim name>", device name as id


@dataclass(frozen=True)
class Registered:
    id: str
    uuid: str
    gpu: int
    healthy: bool


def registry(node: Mapping[str, Any]) -> tuple[dict[str, list[Registered]], str, frozenset[str]]:
    """(resource -> devices, allocation policy, resources with failRequestsGreaterThanOne) from the node."""
    try:
        raw = json.loads(hoststate.node_annotations(node).get(names.DEVICE_REGISTRY, "") or "{}")
    except ValueError:
        raw = {}
    resources = {name: [Registered(str(i), str(u), int(g), bool(h)) for i, u, g, h in devs]
                 for name, devs in (raw.get("resources") or {}).items()}
    return resources, str(raw.get("policy") or "distributed"), frozenset(raw.get("singleRequest") or ())


def container_requests(pod: Mapping[str, Any]) -> list[tuple[str, str, int]]:
    """(container, resource, count) for every ``nvidia.com/*`` resource a container asks for (limits win)."""
    out = []
    for c in pod.get("spec", {}).get("containers", []):
        res = c.get("resources") or {}
        merged = {**(res.get("requests") or {}), **(res.get("limits") or {})}
        for name, qty in sorted(merged.items()):
            if name.startswith("nvidia.com/"):
                try:
                    parsed = quantity.parse(qty)
                except quantity.QuantityError:
                    continue
                if not parsed.is_integer:
                    continue
                count = int(parsed.value)
                if count > 0:
                    out.append((c["name"], name, count))
    return out


def pick(devices: Sequence[Registered], taken: set[str], count: int, policy: str) -> list[Registered] | None:
    """Choose ``count`` free healthy devices, or ``None`` when there are not enough."""
    free = [d for d in devices if d.healthy and d.id not in taken]
    if len(free) < count:
        return None
    if not any("::" in d.id for d in free):
        return free[:count]
    in_use: dict[str, int] = {}
    for d in devices:
        if d.id in taken:
            in_use[d.uuid] = in_use.get(d.uuid, 0) + 1
    chosen: list[Registered] = []
    for _ in range(count):
        sign = 1 if policy == "distributed" else -1
        best = min(free, key=lambda d: (sign * in_use.get(d.uuid, 0), d.gpu, free.index(d)))
        chosen.append(best)
        free.remove(best)
        in_use[best.uuid] = in_use.get(best.uuid, 0) + 1
    return chosen


def _unexpected(err: str) -> admission.Decision:
    return admission.Decision.reject(UNEXPECTED, f"Allocate failed due to {err}, which is unexpected")


def numa_nodes(node: Mapping[str, Any]) -> int:
    """The node's NUMA node count, from the hardware the fleet gave it (1 when unknown)."""
    try:
        raw = json.loads(hoststate.node_annotations(node).get(nodes_mod.HARDWARE_ANNOTATION, "") or "{}")
        return max(1, int(raw.get("numaNodes", 1) or 1)) if isinstance(raw, dict) else 1
    except (ValueError, TypeError):
        return 1


def topology_verdicts(pod: Mapping[str, Any], node: Mapping[str, Any],
                      taken: set[str]) -> admission.Decision | dict[str, frozenset[int]]:
    """The Topology Manager's verdict per container (its NUMA affinity), or the kubelet's rejection."""
    policy, scope = topology.node_policy(hoststate.node_labels(node))
    numa = numa_nodes(node)
    if policy == "none" or numa < 2:
        return {}
    resources, _, _ = registry(node)
    gpus = hoststate.hardware(node).count
    devices = {res: [topology.Device(d.id, topology.numa_of(d.gpu, gpus, numa), d.healthy and d.id not in taken)
                     for d in devs] for res, devs in resources.items()}
    wanted: dict[str, dict[str, int]] = {}
    for container, resource, count in container_requests(pod):
        key = "" if scope == "pod" else container
        wanted.setdefault(key, {})[resource] = wanted.get(key, {}).get(resource, 0) + count
    out: dict[str, frozenset[int]] = {}
    for key, requests in wanted.items():
        verdict = topology.judge(policy, requests, devices, numa)
        if not verdict.admit:
            return admission.Decision.reject(topology.REASON, topology.MESSAGE)
        out[key] = verdict.affinity
    return out


def _near_first(devices: Sequence[Registered], node: Mapping[str, Any], affinity: frozenset[int]) -> list[Registered]:
    if not affinity:
        return list(devices)
    gpus, numa = hoststate.hardware(node).count, numa_nodes(node)
    return sorted(devices, key=lambda d: topology.numa_of(d.gpu, gpus, numa) not in affinity)


def allocate(pod: Mapping[str, Any], node: Mapping[str, Any], taken: set[str]) -> admission.Decision | dict[str, list[dict[str, str]]]:
    """The device manager's allocation for every container, or the kubelet's rejection."""
    resources, policy, single = registry(node)
    allocatable = node.get("status", {}).get("allocatable", {})
    verdicts = topology_verdicts(pod, node, taken)
    if isinstance(verdicts, admission.Decision):
        return verdicts
    taken = set(taken)
    out: dict[str, list[dict[str, str]]] = {}
    for container, resource, count in container_requests(pod):
        devices = resources.get(resource)
        if devices is not None:
            devices = _near_first(devices, node, verdicts.get(container, verdicts.get("", frozenset())))
        if devices is None:
            capacity = allocatable.get(resource, "0")
            return admission.Decision.reject(
                f"OutOf{resource}",
                f"Node didn't have enough resource: {resource}, requested: {count}, used: 0, capacity: {capacity}")
        chosen = pick(devices, taken, count, policy)
        if chosen is None:
            free = sum(1 for d in devices if d.healthy and d.id not in taken)
            return _unexpected(f"requested number of devices unavailable for {resource}. Requested: {count}, "
                               f"Available: {free}")
        if resource in single and count > 1:
            return _unexpected(f'invalid allocation request for "{resource}": invalid request: maximum request size '
                               f"for shared resources is 1; found {count}")
        taken.update(d.id for d in chosen)
        out.setdefault(container, []).extend({"resource": resource, "id": d.id, "uuid": d.uuid} for d in chosen)
    return out


async def _claims(pod: Mapping[str, Any], node: Mapping[str, Any], client: Any) -> dict[str, list[dict[str, str]]]:
    """Devices of the pod's allocated ResourceClaims, per container (``claim`` items, device name as ``id``)."""
    spec = pod.get("spec", {})
    refs = spec.get("resourceClaims") or []
    if not refs or client is None:
        return {}
    generated = {s.get("name"): s.get("resourceClaimName") for s in pod.get("status", {}).get("resourceClaimStatuses") or []}
    inv = hoststate.inventory_of(node)
    uuids = dra.uuids_by_device(inv) if inv else {}
    ns = pod["metadata"]["namespace"]
    by_ref: dict[str, list[tuple[str, str]]] = {}
    for ref in refs:
        claim_name = ref.get("resourceClaimName") or generated.get(ref["name"])
        if not claim_name:
            continue
        try:
            claim = await client.get(f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{claim_name}")
        except errors.NotFound:
            continue
        results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
        by_ref[ref["name"]] = [(r.get("request", ""), r["device"]) for r in results if r.get("driver") == names.DRA_DRIVER]
    out: dict[str, list[dict[str, str]]] = {}
    for c in spec.get("containers", []):
        for use in (c.get("resources") or {}).get("claims") or []:
            for request, device in by_ref.get(use["name"], []):
                if use.get("request") and request.split("/")[0] != use["request"]:
                    continue
                out.setdefault(c["name"], []).append({"claim": use["name"], "id": device, "uuid": uuids.get(device, "")})
    return out


def _record(allocation: Mapping[str, list[dict[str, str]]]) -> dict[str, str]:
    env = {c: {"NVIDIA_VISIBLE_DEVICES": ",".join(dict.fromkeys(i["uuid"] for i in items if i["uuid"]))}
           for c, items in allocation.items()}
    return {names.POD_DEVICES: json.dumps(allocation, sort_keys=True), names.POD_ENV: json.dumps(env, sort_keys=True)}


async def admit(pod: Mapping[str, Any], ctx: admission.Context) -> admission.Decision | None:
    """Pod-agent hook: allocate GPUs to a bound pod, or refuse it as the kubelet would."""
    if not container_requests(pod) and not pod.get("spec", {}).get("resourceClaims"):
        return None
    node_name = str(ctx.node.get("metadata", {}).get("name", ""))
    uid = str(pod["metadata"]["uid"])
    # A pod admitted again (the agent restarted before it started the pod) does not compete with itself.
    result = allocate(pod, ctx.node, ctx.checkpoint.taken(node_name, except_pod=uid))
    if isinstance(result, admission.Decision):
        return result
    for container, items in (await _claims(pod, ctx.node, ctx.client)).items():
        result.setdefault(container, []).extend(items)
    ctx.checkpoint.record(node_name, uid, {c: [(i["resource"], i["id"]) if "resource" in i else
                                               (CLAIM_PREFIX + i["claim"], i["id"]) for i in items]
                                           for c, items in result.items()})
    record = _record(result)
    env = {k: v for c in json.loads(record[names.POD_ENV]).values() for k, v in c.items()}
    return admission.Decision(annotations=record, env=env)


def visible_devices(pod: Mapping[str, Any], container: str, node: Mapping[str, Any],
                    entries: Sequence[Any]) -> str | None:
    """The ``NVIDIA_VISIBLE_DEVICES`` a container runs with: the devices the kubelet's checkpoint gave it (as the
    plugin's ``Allocate`` named them: UUIDs, a replica by its GPU's), else a literal value in the container's own
    spec (``all`` there shows every GPU of the node, a known hole when the NVIDIA runtime is the default), else
    None (nothing injected). ``entries``: the pod's ``checkpoint.Entry`` records; pod annotations are never read."""
    resources, _, _ = registry(node)
    uuids: list[str] = []
    dra_uuids: dict[str, str] | None = None
    for entry in entries:
        if entry.container != container:
            continue
        if entry.resource.startswith(CLAIM_PREFIX):
            if dra_uuids is None:
                inv = hoststate.inventory_of(node)
                dra_uuids = dra.uuids_by_device(inv) if inv else {}
            uuids += [dra_uuids.get(d, "") for d in entry.device_ids]
            continue
        by_id = {d.id: d.uuid for d in resources.get(entry.resource, [])}
        uuids += [by_id.get(d) or d.split("::")[0] for d in entry.device_ids]
    if any(uuids):
        return ",".join(dict.fromkeys(u for u in uuids if u))
    for c in (pod.get("spec") or {}).get("containers") or []:
        if c.get("name") == container:
            for var in c.get("env") or []:
                if var.get("name") == "NVIDIA_VISIBLE_DEVICES" and isinstance(var.get("value"), str):
                    return str(var["value"])
    return None
