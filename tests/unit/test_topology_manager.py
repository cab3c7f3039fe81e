"""The simulated kubelet's Topology Manager follows upstream: device hints as ``generateDeviceTopologyHints``
makes them (kubernetes ``pkg/kubelet/cm/devicemanager/topology_hints.go``), each policy's admit rule
(``pkg/kubelet/cm/topologymanager/policy_*.go``), the ``TopologyAffinityError`` rejection and the container and
pod scopes; an admitted pod's GPUs come from the chosen NUMA node."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cluster.sim import admission as admission_mod, nodes
from cluster.sim.gpu import admission, names, topology

F, T = False, True


def _devices(numa_of_each: list[int], busy: tuple[int, ...] = ()) -> list[topology.Device]:
    return [topology.Device(str(i), n, i not in busy) for i, n in enumerate(numa_of_each)]


def _hints(devs: list[topology.Device], request: int) -> set[tuple[tuple[int, ...], bool]]:
    return {(tuple(sorted(h.numa)), h.preferred) for h in topology.device_hints(devs, request, 2)}


def test_device_hints_prefer_the_fewest_numa_nodes_that_could_hold_the_request() -> None:
    devs = _devices([0, 0, 1, 1])
    assert _hints(devs, 1) == {((0,), T), ((1,), T), ((0, 1), F)}
    assert _hints(devs, 2) == {((0,), T), ((1,), T), ((0, 1), F)}
    assert _hints(devs, 3) == {((0, 1), T)}
    assert _hints(devs, 5) == set()


def test_busy_devices_remove_hints_but_not_the_preferred_size() -> None:
    """Preference is judged on all registered devices, availability only decides which hints exist."""
    devs = _devices([0, 0, 1, 1], busy=(0,))
    assert _hints(devs, 2) == {((1,), T), ((0, 1), F)}
    devs = _devices([0, 0, 1, 1], busy=(0, 2))
    assert _hints(devs, 2) == {((0, 1), F)}


@pytest.mark.parametrize("policy,asked,busy,admit", [
    ("none", 4, (), T), ("best-effort", 4, (), T), ("best-effort", 2, (0, 2), T),
    ("restricted", 4, (), T),          # two NUMA nodes is the narrowest any 4 of 4 GPUs allow: preferred
    ("restricted", 2, (0, 2), F),      # 2 free GPUs only across NUMA nodes, although one node could hold 2
    ("single-numa-node", 2, (), T), ("single-numa-node", 3, (), F), ("single-numa-node", 2, (0,), T),
    ("single-numa-node", 2, (0, 2), F),
])
def test_policies_admit_as_upstream(policy: str, asked: int, busy: tuple[int, ...], admit: bool) -> None:
    verdict = topology.judge(policy, {"nvidia.com/gpu": asked}, {"nvidia.com/gpu": _devices([0, 0, 1, 1], busy)}, 2)
    assert verdict.admit is admit


def test_single_numa_node_on_an_eight_gpu_board_admits_four_and_rejects_six() -> None:
    devs = {"nvidia.com/gpu": _devices([0] * 4 + [1] * 4)}
    assert topology.judge("single-numa-node", {"nvidia.com/gpu": 4}, devs, 2) == topology.Verdict(T, frozenset({0}))
    assert not topology.judge("single-numa-node", {"nvidia.com/gpu": 6}, devs, 2).admit
    assert topology.judge("restricted", {"nvidia.com/gpu": 6}, devs, 2).admit


def test_labels_choose_the_policy_and_unknown_values_fall_back_to_the_defaults() -> None:
    assert topology.node_policy({}) == ("none", "container")
    assert topology.node_policy({topology.POLICY_LABEL: "restricted", topology.SCOPE_LABEL: "pod"}) == ("restricted", "pod")
    assert topology.node_policy({topology.POLICY_LABEL: "best_effort"}) == ("none", "container")


def _node(policy: str | None, scope: str | None = None) -> dict[str, Any]:
    labels = {k: v for k, v in ((topology.POLICY_LABEL, policy), (topology.SCOPE_LABEL, scope)) if v}
    devs = [[f"GPU-{i}", f"GPU-{i}", i, True] for i in range(4)]
    return {"metadata": {"name": "a100-1", "labels": labels, "annotations": {
                nodes.HARDWARE_ANNOTATION: json.dumps({"model": "A100-SXM4-80GB", "gpus": 4, "numaNodes": 2}),
                names.DEVICE_REGISTRY: json.dumps({"resources": {"nvidia.com/gpu": devs}})}},
            "status": {"allocatable": {"nvidia.com/gpu": "4"}}}


def _pod(*gpus: int) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "n", "uid": "u"}, "spec": {"containers": [
        {"name": f"c{i}", "resources": {"limits": {"nvidia.com/gpu": g}}} for i, g in enumerate(gpus)]}}


def test_the_kubelet_rejects_with_the_real_reason_and_message() -> None:
    result = admission.allocate(_pod(4), _node("single-numa-node"), set())
    assert isinstance(result, admission_mod.Decision) and result.rejected
    assert (result.reason, result.message) == ("TopologyAffinityError",
                                               "Resources cannot be allocated with Topology locality")


def test_an_admitted_pod_gets_gpus_of_one_numa_node() -> None:
    result = admission.allocate(_pod(2), _node("single-numa-node"), {"GPU-0"})
    assert isinstance(result, dict)
    assert sorted(d["id"] for d in result["c0"]) == ["GPU-2", "GPU-3"]  # NUMA 1: GPU 0 of NUMA 0 is taken


def test_the_pod_scope_judges_the_sum_of_the_containers() -> None:
    assert isinstance(admission.allocate(_pod(2, 2), _node("single-numa-node"), set()), dict)
    rejected = admission.allocate(_pod(2, 2), _node("single-numa-node", "pod"), set())
    assert isinstance(rejected, admission_mod.Decision) and rejected.reason == "TopologyAffinityError"


def test_without_a_policy_nothing_changes() -> None:
    result = admission.allocate(_pod(4), _node(None), set())
    assert isinstance(result, dict) and len(result["c0"]) == 4
