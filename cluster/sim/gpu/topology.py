"""The kubelet's Topology Manager for GPUs, as the pod agent's device allocation consults it. Plain data.

Semantics from kubernetes/kubernetes ``pkg/kubelet/cm/topologymanager`` and ``cm/devicemanager/topology_hints.go``:

* The device manager is the hint provider for a device plugin's resources (``generateDeviceTopologyHints``):
  every combination of NUMA nodes holding at least ``request`` *available* devices is a hint; a hint is
  *preferred* when it has as few NUMA nodes as the smallest combination whose devices (available or not, all
  registered ones) could hold the request. Not enough available devices anywhere: no hint at all.
* The policies (``policy_none.go``, ``policy_best_effort.go``, ``policy_restricted.go``,
  ``policy_single_numa_node.go``): ``none`` and ``best-effort`` admit every pod; ``restricted`` admits only when
  the merged best hint is preferred; ``single-numa-node`` first drops every hint that spans more than one NUMA
  node, then admits only a preferred one. A rejection is the kubelet's ``TopologyAffinityError`` (reason) with
  ``Resources cannot be allocated with Topology locality`` (message) (``topology_manager.go``), and the pod ends
  ``Failed`` on the node it was bound to; the scheduler never saw the topology.
* The best hint among one resource's hints is the preferred one with the fewest NUMA nodes, then the lowest
  (``TopologyHint.IsNarrowerThan``); devices are then allocated from its NUMA nodes first.
* ``topologyManagerScope: container`` (the default) judges each container on its own; ``pod`` judges the sum of
  the pod's containers per resource (``scope_container.go``, ``scope_pod.go``).

Only GPUs are modelled as hint providers here: the CPU and memory managers of the simulated kubelet run their
``none`` policies, which give no hints (``cpumanager/policy_none.go``). A node's policy comes from the
``gpulab.dev/topology-manager-policy`` and ``gpulab.dev/topology-manager-scope`` labels (a real kubelet reads
its ``KubeletConfiguration``; absent means ``none`` and ``container``, the kubelet's defaults).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

POLICY_LABEL = "gpulab.dev/topology-manager-policy"
SCOPE_LABEL = "gpulab.dev/topology-manager-scope"
POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
SCOPES = ("container", "pod")
REASON = "TopologyAffinityError"
MESSAGE = "Resources cannot be allocated with Topology locality"


@dataclass(frozen=True)
class Device:
    id: str
    numa: int
    available: bool


@dataclass(frozen=True)
class Hint:
    numa: frozenset[int]
    preferred: bool

    def narrower_than(self, other: Hint) -> bool:
        """``TopologyHint.IsNarrowerThan``: fewer NUMA nodes, or as many and a lower mask."""
        if len(self.numa) != len(other.numa):
            return len(self.numa) < len(other.numa)
        return sorted(self.numa) < sorted(other.numa)


def numa_of(gpu: int, gpus: int, numa_nodes: int) -> int:
    """GPUs fill the NUMA nodes in index order (GPUs 0-3 on NUMA 0 and 4-7 on NUMA 1 of an 8-GPU board)."""
    return gpu * max(1, numa_nodes) // max(1, gpus)


def _masks(numa_nodes: int) -> Iterable[frozenset[int]]:
    for size in range(1, numa_nodes + 1):
        for combo in itertools.combinations(range(numa_nodes), size):
            yield frozenset(combo)


def device_hints(devices: Sequence[Device], request: int, numa_nodes: int) -> list[Hint]:
    """``generateDeviceTopologyHints`` for one resource and request size."""
    min_size = numa_nodes
    found: list[frozenset[int]] = []
    for mask in _masks(numa_nodes):
        if sum(1 for d in devices if d.numa in mask) >= request and len(mask) < min_size:
            min_size = len(mask)
        if sum(1 for d in devices if d.available and d.numa in mask) >= request:
            found.append(mask)
    return [Hint(m, len(m) == min_size) for m in found]


def best(hints: Sequence[Hint]) -> Hint | None:
    """The merged best hint of one resource's hints (preferred first, then the narrowest); None without hints."""
    out: Hint | None = None
    for h in hints:
        if out is None or (h.preferred and not out.preferred) or (
                h.preferred == out.preferred and h.narrower_than(out)):
            out = h
    return out


@dataclass(frozen=True)
class Verdict:
    admit: bool
    affinity: frozenset[int]  # the NUMA nodes to allocate from (empty: any)


def judge(policy: str, requests: Mapping[str, int], devices: Mapping[str, Sequence[Device]],
          numa_nodes: int) -> Verdict:
    """Whether a container (or, with the pod scope, a pod) asking for ``requests`` is admitted under ``policy``,
    and the NUMA nodes its devices come from. Resources without devices that carry topology give no hints."""
    if policy not in POLICIES or policy == "none" or numa_nodes < 2:
        return Verdict(True, frozenset())
    affinity: frozenset[int] | None = None
    preferred = True
    for resource, count in sorted(requests.items()):
        devs = devices.get(resource)
        if not devs or count <= 0:
            continue
        hints = device_hints(devs, count, numa_nodes)
        if policy == "single-numa-node":
            hints = [h for h in hints if len(h.numa) == 1 and h.preferred]
        chosen = best(hints)
        if chosen is None:
            preferred = False
            continue
        preferred = preferred and chosen.preferred
        # several resources: the merge keeps the NUMA nodes all of them share (their masks' intersection)
        affinity = chosen.numa if affinity is None else affinity & chosen.numa
        if not affinity:
            preferred = False
    admit = policy == "best-effort" or preferred
    return Verdict(admit, affinity or frozenset())


def node_policy(labels: Mapping[str, str]) -> tuple[str, str]:
    """(policy, scope) of a node; unknown values fall back to the kubelet's defaults (the lint rule
    ``topology-manager-policy`` is where a misspelt value is reported)."""
    policy = labels.get(POLICY_LABEL, "none")
    scope = labels.get(SCOPE_LABEL, "container")
    return (policy if policy in POLICIES else "none", scope if scope in SCOPES else "container")
