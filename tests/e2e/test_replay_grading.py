"""Replay grading on the real control plane: the grade is what the grader's cluster makes of the learner's work.

A bundle's ``cluster`` section is the learner's claim. These tests hand in claims without the work behind them
(forged, or the solved bundles that used to ship with the nbgrader demo) and real work (a lab solved and
submitted on the cluster, an untouched one), and check that only the replay counts. One cluster serves as the
learner's and as the grader's, one after the other, as ``gpulab grade --replay-on`` allows.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import labs
from cluster import errors
from cluster.kube.client import Client
from cluster.testing import LocalCluster
from labs import replay
from labs.runtime import Lab

pytestmark = pytest.mark.e2e

LAB = "04a-time-slicing"
BUNDLES = Path(__file__).resolve().parents[1] / "fixtures" / "labs" / "bundles"


def cluster_checks(report: labs.Report) -> dict[str, bool]:
    ids = {c.id for c in labs.get(report.lab).checks if c.cluster}
    return {c.id: c.passed for c in report.checks if c.id in ids}


@pytest.fixture(scope="module")
def grader(local_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    """The session cluster as the grader's; the lab is left (namespaces and knobs back) afterwards."""
    with local_cluster.client() as client:
        yield client
    Lab(labs.get(LAB), tmp_path_factory.mktemp("left"), local_cluster.kubeconfig).stop()


def test_a_forged_bundle_scores_nothing_on_the_cluster_checks(grader: Client, tmp_path: Path) -> None:
    """Claimed capacity, phases and events with no actions behind them: every cluster check fails on replay,
    and the report shows the claims as claims."""
    data = json.loads((BUNDLES / f"{LAB}.solved.json").read_text())
    spec = labs.get(LAB)
    data.update(bundleVersion=2, actions=[],
                manifests={n: spec.starter(n).read_text() for n in spec.files})
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(data))
    offline = labs.grade(LAB, forged)
    assert not cluster_checks(offline)  # never scored without a replay
    report = labs.grade(LAB, forged, replay=grader)
    got = cluster_checks(report)
    assert got and not any(got.values()), got
    assert any("your evidence bundle records it as passed" in n for n in report.notes), report.notes


def test_the_demo_solved_bundles_score_only_what_replay_produces(grader: Client, tmp_path: Path) -> None:
    """A solved bundle of version 1 (files, no actions; what the nbgrader demo used to ship) claims full marks;
    the replay applies its files but no node label or ClusterPolicy change, so the checks that need those fail.
    It is made from the recorded solved bundle by dropping its actions."""
    data = json.loads((BUNDLES / f"{LAB}.solved.json").read_text())
    assert data.pop("actions"), "the recorded solved bundle has the learner's actions"
    data["bundleVersion"] = 1
    old = tmp_path / "version-1.json"
    old.write_text(json.dumps(data))
    report = labs.grade(LAB, old, replay=grader)
    got = cluster_checks(report)
    assert got["t4-labelled"] is False and got["t4-advertises-shared"] is False and got["three-workers-run"] is False
    assert report.score < report.max_score == labs.get(LAB).max_score
    assert sum(1 for n in report.notes if "your evidence bundle records it as passed" in n) >= 3


def test_a_solved_lab_submitted_on_the_cluster_gets_full_marks_by_replay(local_cluster: LocalCluster,
                                                                          grader: Client, tmp_path: Path) -> None:
    lab = labs.start(LAB, workdir=tmp_path / "work", kubeconfig=local_cluster.kubeconfig, fresh=True)
    lab.solve()
    assert lab.check(wait=60).passed
    bundle = lab.submit(tmp_path / "evidence.json")
    recorded = json.loads(bundle.read_text())
    assert recorded["bundleVersion"] == 2
    assert {"action": "label", "node": "t4-0", "key": "nvidia.com/device-plugin.config",
            "value": "timeslice-4"} in recorded["actions"]
    lab.reset()  # the grader starts from the lab's start state whatever the cluster holds
    report = labs.grade(LAB, bundle, replay=grader)
    assert report.passed and report.score == report.max_score, [(c.id, c.message) for c in report.checks
                                                                if not c.passed]


def test_an_untouched_lab_fails_its_cluster_checks_by_replay(local_cluster: LocalCluster, grader: Client,
                                                             tmp_path: Path) -> None:
    lab = labs.start(LAB, workdir=tmp_path / "work", kubeconfig=local_cluster.kubeconfig, fresh=True)
    report = labs.grade(LAB, lab.submit(tmp_path / "evidence.json"), replay=grader)
    got = cluster_checks(report)
    assert got and not any(got.values()) and not report.passed


def test_replayed_manifests_cannot_escalate(grader: Client, tmp_path: Path) -> None:
    """A ClusterRoleBinding and a pod in kube-system inside a learner's file are not applied; the replay
    user may not read secrets even in the lab's namespace."""
    spec = labs.get(LAB)
    files = {n: (spec.directory / "solution" / n).read_text() for n in spec.files}
    files["worker-5.yaml"] += (
        "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: replay-escalation}\n"
        "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n"
        "subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: 'system:unauthenticated'}]\n"
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: replay-intruder, namespace: kube-system}\n"
        "spec: {containers: [{name: c, image: busybox}]}\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    for name, text in files.items():
        (sub / name).write_text(text)
    report = labs.grade(LAB, sub, replay=grader)
    assert any("ClusterRoleBinding" in n for n in report.notes) and any("kube-system" in n for n in report.notes)
    assert not grader.exists("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/replay-escalation")
    assert not grader.exists("/api/v1/namespaces/kube-system/pods/replay-intruder")
    learner = Client(grader.conn, impersonate=(replay.REPLAY_USER, (replay.REPLAY_GROUP,)))
    with learner, pytest.raises(errors.ApiError) as info:
        learner.get("/api/v1/namespaces/lab-04a/secrets")
    assert info.value.status == 403


def test_gpulab_grade_batch_replays_each_submission(local_cluster: LocalCluster, grader: Client,
                                                    tmp_path: Path) -> None:
    """`gpulab grade --batch --replay-on`: the solved work gets full marks, the forged claim nothing on the
    cluster checks, a damaged bundle and one with a key twice are recorded as broken and the batch goes on; every
    row is in the CSV."""
    from labs.bench import grading_bench

    solved, untouched = grading_bench.replay_bundles(LAB, tmp_path / "bundles")
    batch = tmp_path / "batch"
    batch.mkdir()
    (batch / "solved.json").write_bytes(solved.read_bytes())
    forged = json.loads((BUNDLES / f"{LAB}.solved.json").read_text())
    forged.update(bundleVersion=2, actions=[], manifests=json.loads(untouched.read_text())["manifests"])
    (batch / "forged.json").write_text(json.dumps(forged))
    (batch / "damaged.json").write_text('{"kind": "gpulab.dev/EvidenceBundle", "bundleVersion": 2, "cut')
    (batch / "twice.json").write_bytes((BUNDLES.parent.parent / "bad-inputs" / "bundles" / "duplicate-key.json")
                                       .read_bytes())
    out = local_cluster.gpulab("grade", LAB, "--batch", str(batch), "--replay-on", str(local_cluster.kubeconfig),
                               "--json")
    summary = json.loads(out.stdout)
    assert summary["submissions"] == 4 and summary["broken"] == 2 and summary["passed"] == 1
    rows = {r["submission"]: r for r in csv.DictReader((batch / f"grades-{LAB}.csv").open())}
    assert rows["solved.json"]["passed"] == "true" and rows["damaged.json"]["error"]
    assert "appears twice" in rows["twice.json"]["error"], rows["twice.json"]
    assert all(rows["forged.json"][c.id] == "0" for c in labs.get(LAB).checks if c.cluster)


HOLD = "gpulab.test/hold"  # a finalizer nothing in the cluster removes


def test_a_hostile_submission_does_not_reach_the_next_one(grader: Client, tmp_path: Path) -> None:
    """A submission with finalizers on its objects and pod template, and a Deployment of 1,500 replicas, then
    leftovers held by finalizers on the grader's cluster: the honest submission graded after them gets exactly
    the checks it gets when graded alone, the flood is not applied, the lab namespace enforces Pod Security,
    and nothing of the earlier submission is left."""
    from labs.bench import grading_bench

    solved, _untouched = grading_bench.replay_bundles(LAB, tmp_path / "bundles")
    alone = labs.grade(LAB, solved, replay=grader)
    assert alone.passed, [(c.id, c.message) for c in alone.checks if not c.passed]

    data = json.loads(solved.read_text())
    workers = data["manifests"]["inference-workers.yaml"].replace(
        "  name: inference-worker-1\n", f"  name: inference-worker-1\n  finalizers: [{HOLD}]\n", 1).replace(
        "      labels: {app: inference-worker-1}\n",
        f"      labels: {{app: inference-worker-1}}\n      finalizers: [{HOLD}]\n", 1)
    assert workers.count(HOLD) == 2
    data["manifests"]["inference-workers.yaml"] = workers + (
        "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: flood, namespace: lab-04a}\n"
        "spec:\n  replicas: 1500\n  selector: {matchLabels: {app: flood}}\n  template:\n"
        "    metadata: {labels: {app: flood}}\n    spec: {containers: [{name: c, image: busybox}]}\n"
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: privileged, namespace: lab-04a}\n"
        "spec: {containers: [{name: c, image: busybox, securityContext: {privileged: true}}]}\n")
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps(data))
    report = labs.grade(LAB, hostile, replay=grader)
    assert any("asks for 1500 pods" in n for n in report.notes), report.notes
    assert any("finalizers are not replayed" in n for n in report.notes), report.notes
    assert any("privileged" in n and "refused" in n for n in report.notes), report.notes
    pods = grader.get("/api/v1/namespaces/lab-04a/pods")["items"]
    assert len(pods) <= replay.MAX_REPLAY_PODS and not any(p["metadata"].get("finalizers") for p in pods)
    ns = grader.get("/api/v1/namespaces/lab-04a")["metadata"]["labels"]
    assert ns["pod-security.kubernetes.io/enforce"] == "baseline"

    # What an earlier replay (or a forked process) might have left: objects held by finalizers.
    grader.create("/api/v1/namespaces/lab-04a/configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "device-plugin-config-left", "finalizers": [HOLD]}})
    grader.create("/api/v1/namespaces/lab-04a/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "inference-worker-left", "finalizers": [HOLD]}, "spec": {
        "containers": [{"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}})
    after = labs.grade(LAB, solved, replay=grader)
    assert [(c.id, c.passed) for c in after.checks] == [(c.id, c.passed) for c in alone.checks]
    assert after.score == alone.score
    for path in ("configmaps/device-plugin-config-left", "pods/inference-worker-left", "pods/privileged"):
        assert not grader.exists(f"/api/v1/namespaces/lab-04a/{path}"), path
    assert not grader.exists("/apis/apps/v1/namespaces/lab-04a/deployments/flood")
