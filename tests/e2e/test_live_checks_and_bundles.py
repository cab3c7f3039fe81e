"""Outcome checks on the real control plane with the simulated GPU Operator; an evidence bundle recorded from it
describes the same state (the learner's claim, which ``gpulab why --bundle`` explains and grading shows but
never scores: grading replays, tests/e2e/test_replay_grading.py); ``gpulab why`` explains a pod that asks for
more GPUs than any node has."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from cluster.kube.client import Client
from cluster.sim.gpu import names
from graders import bundle, explain, live, schedmsg
from graders.view import LiveView
from gpu_e2e import create_pod, gpu_operator, gpu_pod, wait_event, wait_for, wait_phase

__all__ = ["gpu_operator"]


def _checks(view: Any, ns: str) -> list[Any]:
    return [
        live.node_resource(view, "a100-0", "nvidia.com/gpu", equals=4, wait=30),
        live.node_resource(view, "h100-0", "nvidia.com/gpu", at_least=8, field="capacity"),
        live.node_label(view, "h100-0", "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3", wait=30),
        live.pod_phase(view, ns, "on-h100", "Running", wait=60),
        live.pod_node(view, ns, "on-h100", pool="h100", id="on-h100-pool"),
        live.pod_node(view, ns, "on-h100", pool="a100", id="on-a100-pool"),
        live.pod_phase(view, ns, "too-big", "Running"),
        live.scheduling_failed(view, ns, "too-big", ["Insufficient nvidia.com/gpu"], wait=30),
        live.quota_usage(view, ns, "gpu-quota", used=10, hard=10, wait=30),
        live.pod_phase(view, ns, "ghost"),
    ]


def _setup(client: Client, ns: str) -> None:
    client.create(f"/api/v1/namespaces/{ns}/resourcequotas", {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu-quota"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "10"}}})
    # Pods created before the quota controller's first count can be recounted from a cache that has not seen
    # them yet (an upstream race that only the periodic recount repairs), so wait as a careful admin would.
    wait_for(lambda: "requests.nvidia.com/gpu" in client.get(f"/api/v1/namespaces/{ns}/resourcequotas/gpu-quota")
             .get("status", {}).get("used", {}), 30, what=f"quota {ns}/gpu-quota counted")
    pinned = gpu_pod("on-h100", {"nvidia.com/gpu": "1"})
    pinned["spec"]["nodeSelector"] = {"gpulab.dev/pool": "h100"}
    create_pod(client, ns, pinned)
    create_pod(client, ns, gpu_pod("too-big", {"nvidia.com/gpu": "9"}))


def test_live_checks_follow_the_cluster(gpu_operator: Client, namespace: str) -> None:
    """Checks pass and fail for the right reasons on a live view, waiting where the outcome takes time."""
    _setup(gpu_operator, namespace)
    results = {c.id: c for c in _checks(LiveView(gpu_operator), namespace)}
    passed = {k for k, c in results.items() if c.passed}
    assert passed == {"node-resource:a100-0:nvidia.com/gpu", "node-resource:h100-0:nvidia.com/gpu",
                      "node-label:h100-0:nvidia.com/gpu.product", f"pod-phase:{namespace}/on-h100",
                      f"scheduling-failed:{namespace}/too-big", f"quota:{namespace}/gpu-quota:requests.nvidia.com/gpu",
                      "on-h100-pool"}, results
    assert "pool `h100`" in results["on-a100-pool"].message
    too_big = results[f"pod-phase:{namespace}/too-big"]
    assert "is Pending (Unschedulable); expected Running" in too_big.message and "gpulab why too-big" in too_big.hint


def test_wait_on_a_live_view_ends_with_a_time_out(gpu_operator: Client, namespace: str) -> None:
    create_pod(gpu_operator, namespace, gpu_pod("stuck", {"nvidia.com/gpu": "16"}))
    started = time.monotonic()
    check = live.pod_phase(LiveView(gpu_operator), namespace, "stuck", "Running", wait=3)
    elapsed = time.monotonic() - started
    assert not check.passed and 3 <= elapsed < 8
    assert check.message.startswith(f"Timed out after 3 s waiting for pod {namespace}/stuck to be Running. Last seen:")


def test_bundle_records_the_state_as_the_learners_claim(gpu_operator: Client, namespace: str, tmp_path: Path) -> None:
    """Snapshot the cluster, write, read: the recorded claim reads as the live view did (every check's verdict
    and message the same, for explaining and for showing beside the replayed grade); the bundle is version 2
    with the actions given; two snapshots of the unchanged cluster are byte-for-byte identical (the producer, who
    wrote the file and when, is added by ``write``)."""
    client = gpu_operator
    _setup(client, namespace)
    wait_phase(client, namespace, "on-h100", "Running", timeout=60)
    wait_event(client, namespace, "too-big", "FailedScheduling", "Insufficient nvidia.com/gpu")
    live_results = [(c.id, c.passed, c.message) for c in _checks(LiveView(client), namespace)]
    manifests = {"pods.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: on-h100}\n"}
    acts = [{"action": "label", "node": "h100-0", "key": "nvidia.com/device-plugin.config", "value": None}]
    path = bundle.write(tmp_path / "bundle.json", bundle.snapshot(client, [namespace], manifests, "e2e", acts))
    offline = bundle.load(path)
    assert offline.manifests == manifests and offline.namespaces == (namespace,)
    assert offline.version == 2 and [dict(a) for a in offline.actions] == acts
    bundle_results = [(c.id, c.passed, c.message) for c in _checks(offline.view(), namespace)]
    assert bundle_results == live_results
    again = bundle.dumps(bundle.snapshot(client, [namespace], manifests, "e2e", acts))
    written = json.loads(path.read_bytes())
    assert offline.producer is not None and written.pop("producer") == offline.producer.to_dict()
    assert again == bundle.dumps(written)  # the state is the same bytes; who wrote it, and when, is added by write
    explained = explain.explain_pod(offline.view(), namespace, "too-big")
    assert explained.agrees is True


def test_why_explains_insufficient_gpus(local_cluster: Any, gpu_operator: Client, namespace: str) -> None:
    """`gpulab why` on a pod asking for 9 GPUs: every node lacks them, each says how many it has."""
    create_pod(gpu_operator, namespace, gpu_pod("nine", {"nvidia.com/gpu": "9"}))
    wait_event(gpu_operator, namespace, "nine", "FailedScheduling", "Insufficient nvidia.com/gpu")
    out = json.loads(local_cluster.gpulab("why", "nine", "-n", namespace, "--json").stdout)
    assert out["state"] == "unschedulable" and out["agrees"] is True
    assert out["schedulerCounts"] == {"Insufficient nvidia.com/gpu": 6}
    h100 = next(n for n in out["nodes"] if n["node"] == "h100-0")
    assert h100["scheduler"] == ["Insufficient nvidia.com/gpu"]
    assert "asks for 9 nvidia.com/gpu; the node has 8" in h100["reasons"][0]["text"]
    text = local_cluster.gpulab("why", "nine", "-n", namespace).stdout
    assert "Pod " in text and "h100-0" in text and "gpu-fundamentals" in text
    assert schedmsg.parse(out["evidence"]) is not None


def test_claim_allocation_on_a_dra_node(gpu_operator: Client, namespace: str, tmp_path: Path) -> None:
    """A pod with a claim from a template runs on the DRA node; the check finds the claim through the pod, on
    the pod's node, from the live view and from a bundle alike."""
    client = gpu_operator
    client.patch("/api/v1/nodes/l40s-0", {"metadata": {"labels": {names.DRA_ENABLED: "true"}}})
    try:
        wait_for(lambda: any(s["spec"].get("nodeName") == "l40s-0"
                             for s in client.get("/apis/resource.k8s.io/v1/resourceslices")["items"]), 30,
                 what="the l40s-0 ResourceSlice")
        client.create(f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaimtemplates", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "one"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}})
        create_pod(client, namespace, gpu_pod("dra", {}, claims=[{"name": "gpu", "resourceClaimTemplateName": "one"}]))
        view = LiveView(client)
        check = live.claim_allocated(view, namespace, pod="dra", pod_claim="gpu", node="l40s-0", pool="l40s",
                                     driver="gpu.nvidia.com", count=1, wait=60)
        assert check.passed, check.message
        wrong = live.claim_allocated(view, namespace, pod="dra", pod_claim="gpu", node="a100-0")
        assert not wrong.passed and "expected node `a100-0`" in wrong.message
        offline = bundle.load(bundle.write(tmp_path / "b.json", bundle.snapshot(client, [namespace], {}, "e2e"))).view()
        again = live.claim_allocated(offline, namespace, pod="dra", pod_claim="gpu", node="l40s-0", pool="l40s",
                                     driver="gpu.nvidia.com", count=1)
        assert (again.passed, again.message) == (check.passed, check.message)
    finally:
        client.patch("/api/v1/nodes/l40s-0", {"metadata": {"labels": {names.DRA_ENABLED: None}}})
        wait_for(lambda: client.get("/api/v1/nodes/l40s-0")["status"]["allocatable"].get("nvidia.com/gpu") == "2", 60,
                 what="l40s-0 back on the device plugin")
