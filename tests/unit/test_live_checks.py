"""Outcome checks judge a view (bundle or live) and return one Check; waits end in a clear time-out message."""

from __future__ import annotations

import time
from typing import Any

import pytest

from graders import bundle, bundleview, live
from live_factories import bundle_data, make_event, make_node, make_pod, starter_nodes, view_of


def test_node_resource_equal_and_at_least() -> None:
    view = view_of(bundle_data(nodes=[make_node("a100-0", gpus=4, allocatable=3)]))
    assert live.node_resource(view, "a100-0", "nvidia.com/gpu", equals=3).passed
    assert live.node_resource(view, "a100-0", "nvidia.com/gpu", equals="4", field="capacity").passed
    assert live.node_resource(view, "a100-0", "memory", at_least="32Gi").passed
    wrong = live.node_resource(view, "a100-0", "nvidia.com/gpu", equals=4, points=2)
    assert not wrong.passed and wrong.points == 2 and "= 3; expected 4" in wrong.message
    assert "gpulab gpu-operator status" in wrong.hint and "(gpu-operator)" in wrong.hint
    none = live.node_resource(view, "a100-0", "nvidia.com/gpu.shared", at_least=1)
    assert not none.passed and "shows allocatable `nvidia.com/gpu.shared` = nothing" in none.message
    missing = live.node_resource(view, "b200-0", "nvidia.com/gpu", equals=1, id="b200")
    assert missing.id == "b200" and not missing.passed and "no node called `b200-0`" in missing.message


def test_node_label_present_value_and_missing() -> None:
    view = view_of(bundle_data(nodes=[make_node("t4-0", gpus=1, labels={"nvidia.com/gpu.product": "Tesla-T4"})]))
    assert live.node_label(view, "t4-0", "nvidia.com/gpu.product").passed
    assert live.node_label(view, "t4-0", "nvidia.com/gpu.product", "Tesla-T4").passed
    wrong = live.node_label(view, "t4-0", "nvidia.com/gpu.product", "NVIDIA-L40S")
    assert not wrong.passed and "expected `NVIDIA-L40S`" in wrong.message
    assert "has no label" in live.node_label(view, "t4-0", "nvidia.com/mig.config").message


def test_pod_phase_and_placement_with_pool() -> None:
    pods = [make_pod("runner", gpus=1, node="h100-0", phase="Running"), make_pod("waiter", gpus=1)]
    pods[1]["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    view = view_of(bundle_data(nodes=starter_nodes(), pods=pods))
    assert live.pod_phase(view, "lab", "runner").passed
    waiting = live.pod_phase(view, "lab", "waiter")
    assert not waiting.passed and "is Pending (Unschedulable); expected Running" in waiting.message
    assert "gpulab why waiter -n lab" in waiting.hint
    assert live.pod_node(view, "lab", "runner", pool="h100").passed
    assert live.pod_node(view, "lab", "runner", node="h100-0", pool="h100").passed
    wrong = live.pod_node(view, "lab", "runner", pool="a100")
    assert not wrong.passed and "pool `h100`" in wrong.message and "a node of pool `a100`" in wrong.message
    assert "not been placed" in live.pod_node(view, "lab", "waiter").message
    assert "no pod `ghost`" in live.pod_phase(view, "lab", "ghost").message


def test_scheduler_event_fragments() -> None:
    text = "0/4 nodes are available: 1 Insufficient nvidia.com/gpu, 3 node(s) had untolerated taint(s)."
    events = [make_event("lab", "p", "FailedScheduling", "0/4 nodes are available: 4 Insufficient cpu."),
              make_event("lab", "p", "FailedScheduling", text)]
    view = view_of(bundle_data(nodes=starter_nodes(), pods=[make_pod("p", gpus=1, tolerate=False), make_pod("q")],
                               events=events))
    ok = live.scheduling_failed(view, "lab", "p", ["untolerated taint", "Insufficient nvidia.com/gpu"])
    assert ok.passed and text in ok.message
    other = live.scheduling_failed(view, "lab", "p", ["Insufficient nvidia.com/gpu.shared"])
    assert not other.passed and "“Insufficient nvidia.com/gpu.shared”" in other.message
    assert "no scheduling failure" in live.scheduling_failed(view, "lab", "q").message


def test_admission_failure_reason_and_message() -> None:
    msg = ('Allocate failed due to invalid allocation request for "nvidia.com/gpu.shared": invalid request: maximum '
           "request size for shared resources is 1; found 2, which is unexpected")
    pods = [make_pod("greedy", gpus=2, resource="nvidia.com/gpu.shared", node="a100-0", phase="Failed",
                     reason="UnexpectedAdmissionError", message=msg), make_pod("fine", node="a100-0", phase="Running")]
    view = view_of(bundle_data(nodes=starter_nodes(), pods=pods))
    assert live.admission_failed(view, "lab", "greedy", contains=["maximum request size"]).passed
    assert not live.admission_failed(view, "lab", "greedy", reason="OutOfnvidia.com/gpu").passed
    running = live.admission_failed(view, "lab", "fine")
    assert not running.passed and "is Running" in running.message


def _claim(name: str, node: str | None, device: str = "gpu-0") -> dict[str, Any]:
    claim: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                             "metadata": {"name": name, "namespace": "lab"},
                             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}
    if node:
        claim["status"] = {"allocation": {
            "devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": device}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    return claim


def test_claim_allocation_by_name_and_through_the_pod() -> None:
    pod = make_pod("worker", node="a100-0", phase="Running",
                   claims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}])
    pod["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "worker-gpu-x7k2"}]
    view = view_of(bundle_data(nodes=starter_nodes(), pods=[pod],
                               claims=[_claim("worker-gpu-x7k2", "a100-0", "gpu-2"), _claim("idle", None)]))
    ok = live.claim_allocated(view, "lab", pod="worker", pod_claim="gpu", node="a100-0", device="gpu-2",
                              driver="gpu.nvidia.com", count=1)
    assert ok.passed and "`gpu-2`" in ok.message
    assert live.claim_allocated(view, "lab", claim="worker-gpu-x7k2", pool="a100").passed
    wrong = live.claim_allocated(view, "lab", claim="worker-gpu-x7k2", node="l40s-0", count=2)
    assert not wrong.passed and "node `l40s-0` and 2 device(s)" in wrong.message
    assert "not allocated" in live.claim_allocated(view, "lab", claim="idle").message
    assert "no ResourceClaim" in live.claim_allocated(view, "lab", pod="worker", pod_claim="other").message


def test_quota_usage_and_the_never_enforced_spelling() -> None:
    quotas = [{"metadata": {"name": "gpu", "namespace": "lab"}, "spec": {"hard": {"requests.nvidia.com/gpu": "4"}},
               "status": {"hard": {"requests.nvidia.com/gpu": "4"}, "used": {"requests.nvidia.com/gpu": "2"}}},
              {"metadata": {"name": "bare", "namespace": "lab"}, "spec": {"hard": {"limits.nvidia.com/gpu": "4"}}}]
    view = view_of(bundle_data(quotas=quotas))
    assert live.quota_usage(view, "lab", "gpu", used=2, hard="4").passed
    wrong = live.quota_usage(view, "lab", "gpu", used=3)
    assert not wrong.passed and "used 2 of 4; expected used 3" in wrong.message
    bare = live.quota_usage(view, "lab", "bare")
    assert not bare.passed and "`limits.nvidia.com/gpu`" in bare.message and "never enforced" in bare.hint
    assert "no ResourceQuota" in live.quota_usage(view, "lab", "missing").message


def test_a_raised_quota_counts_once_the_quota_controller_enforces_it() -> None:
    raised = {"metadata": {"name": "gpu", "namespace": "lab"}, "spec": {"hard": {"requests.nvidia.com/gpu": "2"}},
              "status": {"hard": {"requests.nvidia.com/gpu": "1"}, "used": {"requests.nvidia.com/gpu": "1"}}}
    pending = live.quota_usage(view_of(bundle_data(quotas=[raised])), "lab", "gpu", hard=2)
    assert not pending.passed and "hard limit 2 is written but not yet in force" in pending.message
    assert "still 1" in pending.message
    fresh = {**raised, "status": {}}
    assert "still none" in live.quota_usage(view_of(bundle_data(quotas=[fresh])), "lab", "gpu", hard=2).message
    enforced = {**raised, "status": {"hard": {"requests.nvidia.com/gpu": "2"},
                                     "used": {"requests.nvidia.com/gpu": "1"}}}
    assert live.quota_usage(view_of(bundle_data(quotas=[enforced])), "lab", "gpu", used=1, hard=2).passed
    assert live.quota_usage(view_of(bundle_data(quotas=[raised])), "lab", "gpu", used=1).passed  # no hard asked


def test_namespace_outside_the_bundle_is_a_failed_check() -> None:
    view = view_of(bundle_data(pods=[make_pod("p")]))
    check = live.pod_phase(view, "other-team", "p", wait=5)
    assert not check.passed and "does not hold namespace `other-team`" in check.message


class Changing(bundleview.BundleView):
    """A 'live' view whose pod turns Running after ``flip`` reads (a stand-in for a cluster that changes)."""

    def __init__(self, flip: int | None) -> None:
        loaded = bundle.loads(bundle.dumps(bundle_data(nodes=starter_nodes(), pods=[make_pod("p", gpus=1)])))
        super().__init__(loaded.cluster, loaded.namespaces)
        self.reads, self.flip = 0, flip

    @property
    def live(self) -> bool:
        return True

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.reads += 1
        found = super().pod(namespace, name)
        if found is not None and self.flip is not None and self.reads > self.flip:
            found = {**found, "status": {"phase": "Running"}}
        return found


def test_wait_polls_a_live_view_until_it_passes() -> None:
    view = Changing(flip=3)
    check = live.pod_phase(view, "lab", "p", wait=5)
    assert check.passed and view.reads == 4


def test_wait_ends_with_a_timed_out_check_not_a_hang() -> None:
    view = Changing(flip=None)
    started = time.monotonic()
    check = live.pod_phase(view, "lab", "p", wait=0.6)
    elapsed = time.monotonic() - started
    assert 0.5 <= elapsed < 1.5 and not check.passed
    assert check.message.startswith("Timed out after 0.6 s waiting for pod lab/p to be Running. Last seen: Pod `lab/p` is Pending")
    assert "gpulab why p -n lab" in check.hint


def test_a_bundle_is_looked_at_once_even_with_a_wait() -> None:
    started = time.monotonic()
    check = live.pod_phase(view_of(bundle_data(pods=[make_pod("p")])), "lab", "p", wait=30)
    assert time.monotonic() - started < 0.5 and not check.passed and not check.message.startswith("Timed out")


@pytest.mark.parametrize("bad", [{"status": "x"}, {"status": {"phase": 3}}, {"spec": [], "status": {"conditions": "x"}}])
def test_odd_object_shapes_do_not_raise(bad: dict[str, Any]) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "odd", "namespace": "lab"}, **bad}
    view = view_of(bundle_data(pods=[pod], nodes=[{"metadata": {"name": "n", "labels": "x"}, "status": []}]))
    for check in (live.pod_phase(view, "lab", "odd"), live.pod_node(view, "lab", "odd"),
                  live.scheduling_failed(view, "lab", "odd"), live.admission_failed(view, "lab", "odd"),
                  live.node_label(view, "n", "k"), live.node_resource(view, "n", "nvidia.com/gpu", equals=1)):
        assert check.passed is False and check.message
