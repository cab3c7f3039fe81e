"""The explainer on pods recorded from the real control plane (``tests/fixtures/explain``) and on small factories.

Each recorded bundle holds a Pending or failed pod with the scheduler's, kubelet's or API server's own
message; the explainer must give the right per-node reason, agree with the scheduler's counts, and point to
the course section that teaches the fix.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.gpu import cel
from graders import bundle, explain, schedmsg
from graders.render import explain as render
from prerequisites import require
from live_factories import bundle_data, make_event, make_node, make_pod, starter_nodes, view_of

FIXTURES = Path(__file__).parent.parent / "fixtures" / "explain"


def recorded(name: str, pod: str) -> explain.Explanation:
    return explain.explain_pod(bundle.load(FIXTURES / f"{name}.bundle.json").view(), "lab", pod)


def reasons(result: explain.Explanation, node: str) -> list[str]:
    return [r.text for r in next(v for v in result.nodes if v.node == node).reasons]


def test_missing_toleration_is_named_on_every_gpu_node() -> None:
    result = recorded("no-toleration", "trainer")
    assert result.state == "unschedulable" and result.agrees is True
    assert dict(result.scheduler_counts) == {"Insufficient nvidia.com/gpu": 1, schedmsg.TAINTS: 5}
    for node in ("t4-0", "l40s-0", "a100-0", "a100-1", "h100-0"):
        first = next(v for v in result.nodes if v.node == node).reasons[0]
        assert "no toleration" in first.text and "nvidia.com/gpu=present:NoSchedule" in first.text
        assert first.section == "scheduling"
    cpu = next(v for v in result.nodes if v.node == "cpu-0").reasons[0]
    assert "advertises none at all" in cpu.text and cpu.section == "gpu-operator"


def test_near_miss_toleration_quotes_the_pods_toleration() -> None:
    result = recorded("near-miss-toleration", "trainer")
    text = reasons(result, "a100-0")[0]
    assert "comes close" in text and "value 'true'" in text and "Exists" in text and result.agrees


def test_before_the_operator_no_node_advertises_gpus() -> None:
    result = recorded("before-operator", "early")
    assert result.agrees and all("advertises none at all" in v.reasons[0].text for v in result.nodes)
    assert all(v.reasons[0].section == "gpu-operator" for v in result.nodes)


def test_too_many_gpus_shows_what_each_node_has() -> None:
    result = recorded("too-many-gpus", "big")
    assert result.agrees and dict(result.our_counts) == {"Insufficient nvidia.com/gpu": 6}
    assert "asks for 9 nvidia.com/gpu; the node has 8" in reasons(result, "h100-0")[0]


def test_gfd_label_value_that_no_node_carries() -> None:
    result = recorded("wrong-product", "picky")
    assert result.agrees
    a100 = next(v for v in result.nodes if v.node == "a100-0").reasons[0]
    assert "NVIDIA-A100-SXM4-40GB" in a100.text and "NVIDIA-A100-SXM4-80GB" in a100.text and a100.section == "gpu-operator"
    cpu = reasons(result, "cpu-0")
    assert "no nvidia.com/gpu.product label" in cpu[0] and len(cpu) == 2  # the scheduler's reason first, then more


def test_busy_node_counts_the_gpus_other_pods_hold() -> None:
    result = recorded("h100-full", "greedy")
    assert result.agrees
    assert "pods already there hold 3, leaving 5" in reasons(result, "h100-0")[0]
    assert any("No running pod has a lower priority" in n.text for n in result.notes)
    assert recorded("h100-full", "holder").state == "running"


def test_quota_refusal_is_found_through_the_owner() -> None:
    for name in ("trainer", "trainer-5b98f4646c-zzzzz"):
        result = recorded("quota-exceeded", name)
        assert result.state == "quota" and "exceeded quota: gpu-quota" in result.evidence
        assert "quota allows requests.nvidia.com/gpu=1" in result.notes[0].text and result.notes[0].section == "scheduling"
    assert recorded("quota-exceeded", "unrelated").state == "not-found"


def test_fail_requests_greater_than_one_at_the_kubelet() -> None:
    result = recorded("shared-limit", "greedy")
    assert result.state == "failed" and result.node == "a100-0"
    assert "at most 1 nvidia.com/gpu.shared; this one asked for 2" in result.notes[0].text
    assert result.notes[0].section == "sharing"


def test_unsatisfiable_dra_claim_per_node() -> None:
    require(cel.find_binary() is not None, "celcheck is not built (it evaluates the DRA selectors): run `gpulab binaries ensure`")
    result = recorded("dra-too-big", "huge")
    assert result.agrees and dict(result.scheduler_counts) == {schedmsg.DRA_CANNOT_ALLOCATE: 6}
    assert "none satisfies request gpu" in reasons(result, "t4-0")[0] and "Tesla T4 (15Gi)" in reasons(result, "t4-0")[0]
    assert "no devices for Dynamic Resource Allocation" in reasons(result, "h100-0")[0]
    assert all(r.section == "dra" and r.certain for v in result.nodes for r in v.reasons)


def test_json_and_terminal_renderings(capsys: pytest.CaptureFixture[str]) -> None:
    result = recorded("no-toleration", "trainer")
    text = render.to_json(result)
    assert text == render.to_json(recorded("no-toleration", "trainer"))  # deterministic
    assert '"agrees": true' in text and '"section": "scheduling"' in text
    from rich.console import Console

    render.print_explanation(result, Console(width=200, highlight=False))
    out = capsys.readouterr().out
    assert "t4-0 (pool t4)" in out and "read: Scheduling GPU workloads (scheduling)" in out


# -- factories: what the recordings do not cover ------------------------------------------------------------

def test_disagreement_with_an_old_scheduler_message_is_reported() -> None:
    """The scheduler saw a full node; since then the other pod ended, so the node would fit now."""
    event = make_event("lab", "p", "FailedScheduling", "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
    view = view_of(bundle_data(nodes=[make_node("a100-0", gpus=4)], pods=[make_pod("p", gpus=2)], events=[event]))
    result = explain.explain_pod(view, "lab", "p")
    assert result.agrees is False and any("changed since" in n.text for n in result.notes)
    assert any("a100-0 looks able" in n.text for n in result.notes)


def test_cordoned_node_and_unallocatable_gpus() -> None:
    nodes = [make_node("a100-0", gpus=4, unschedulable=True), make_node("a100-1", gpus=4, allocatable=0)]
    event = make_event("lab", "p", "FailedScheduling",
                       "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) were unschedulable.")
    result = explain.explain_pod(view_of(bundle_data(nodes=nodes, pods=[make_pod("p", gpus=1)], events=[event])), "lab", "p")
    assert result.agrees
    assert "cordoned" in reasons(result, "a100-0")[0]
    assert "4 in capacity but only 0 allocatable" in reasons(result, "a100-1")[0]


def test_failed_mig_config_is_named_with_the_drain_habit() -> None:
    """reference §9: a node whose MIG manager failed says so; the MIG manager never evicts, so drain first."""
    mig = "nvidia.com/mig-1g.10gb"
    labels = {"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.config.state": "failed"}
    nodes = [make_node("a100-1", gpus=4, labels=labels)]
    event = make_event("lab", "p", "FailedScheduling", f"0/1 nodes are available: 1 Insufficient {mig}.")
    result = explain.explain_pod(view_of(bundle_data(nodes=nodes, pods=[make_pod("p", gpus=1, resource=mig)],
                                                     events=[event])), "lab", "p")
    text = reasons(result, "a100-1")[0]
    assert "mig.config.state=failed" in text and "all-1g.10gb" in text and "never evicts" in text


def test_cpu_and_pod_count_and_other_namespaces() -> None:
    """Pods of other namespaces (bundle sketches) count against a node's cpu and pod slots."""
    nodes = [make_node("cpu-0", cpu="4", pods=2)]
    others = [bundle.pod_sketch(make_pod(f"o{i}", "team-b", node="cpu-0", cpu="1500m", phase="Running")) for i in (1, 2)]
    done = bundle.pod_sketch(make_pod("old", "team-b", node="cpu-0", cpu="4", phase="Succeeded"))
    view = view_of(bundle_data(nodes=nodes, pods=[make_pod("p", cpu="2", tolerate=False)], other_pods=[*others, done]))
    result = explain.explain_pod(view, "lab", "p")
    assert result.state == "waiting" and result.agrees is None
    texts = reasons(result, "cpu-0")
    assert "already runs 2 pods" in texts[0]
    assert "requests 2 cpu; the node has 4 allocatable and pods there request 3, leaving 1" in texts[1]


def test_node_affinity_terms_and_match_fields() -> None:
    pod = make_pod("p", gpus=1)
    pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["t4-0"]}]}]}}}
    nodes = [make_node("a100-0", gpus=4, labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}),
             make_node("t4-0", gpus=1)]
    result = explain.explain_pod(view_of(bundle_data(nodes=nodes, pods=[pod])), "lab", "p")
    assert "none of the pod's required node-affinity terms" in reasons(result, "a100-0")[0]
    assert next(v for v in result.nodes if v.node == "t4-0").fits


def test_states_other_than_pending() -> None:
    pods = [make_pod("run", node="t4-0", phase="Running"), make_pod("done", node="t4-0", phase="Succeeded"),
            make_pod("gated"), make_pod("starting", node="t4-0"),
            make_pod("oom", node="t4-0", phase="Failed"),
            make_pod("out", node="t4-0", phase="Failed", reason="OutOfnvidia.com/gpu", message="Node didn't have enough resource"),
            make_pod("busy", node="t4-0", phase="Failed", reason="UnexpectedAdmissionError",
                     message="Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
                             "Requested: 2, Available: 1, which is unexpected")]
    pods[2]["spec"]["schedulingGates"] = [{"name": "example.com/quota-check"}]
    pods[3]["status"]["containerStatuses"] = [{"name": "cuda", "state": {"waiting": {"reason": "ContainerCreating"}}}]
    pods[4]["status"]["containerStatuses"] = [{"name": "cuda", "state": {"terminated": {"exitCode": 1,
                                                                                      "reason": "Error"}}}]
    view = view_of(bundle_data(nodes=starter_nodes(), pods=pods))
    states = {p["metadata"]["name"]: explain.explain_pod(view, "lab", p["metadata"]["name"]) for p in pods}
    assert states["run"].state == "running" and "pool t4" in states["run"].summary.text
    assert states["done"].state == "succeeded"
    assert states["gated"].state == "gated" and "example.com/quota-check" in states["gated"].summary.text
    assert states["starting"].state == "starting" and "ContainerCreating" in states["starting"].summary.text
    oom = states["oom"].notes[0]
    assert oom.section == "operations" and "Container cuda ended with exit code 1 (Error)" in oom.text
    assert "kubectl logs -n lab oom -c cuda" in oom.text and "time-slicing isolates no memory" in oom.text
    assert states["out"].notes[0].section == "gpu-operator"
    assert "for 2 nvidia.com/gpu, only 1 were free" in states["busy"].notes[0].text
