"""Server-side dry-run on the real API server (its own words, on the right line, nothing stored) and `gpulab why`
on a Pending pod that lacks the GPU nodes' toleration."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cluster.kube.client import Client
from graders import dryrun, explain, schedmsg
from graders.view import LiveView
from gpu_e2e import create_pod, wait_event

HALF = """apiVersion: v1
kind: Pod
metadata:
  name: half
spec:
  containers:
  - name: cuda
    image: nvcr.io/nvidia/cuda:12.5.0-base-ubuntu22.04
    resources:
      limits:
        nvidia.com/gpu: 0.5
"""

UNEQUAL = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: unequal
spec:
  selector: {matchLabels: {app: u}}
  template:
    metadata: {labels: {app: u}}
    spec:
      containers:
      - name: cuda
        image: cuda
        resources:
          requests: {nvidia.com/gpu: 1}
          limits: {nvidia.com/gpu: 2}
"""

GOOD = """apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: "on"}
---
apiVersion: v1
kind: Pod
metadata: {name: two}
spec:
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  containers:
  - name: cuda
    image: cuda
    resources: {limits: {nvidia.com/gpu: 2}}
"""


def _objects(client: Client, ns: str) -> set[str]:
    pods = client.get(f"/api/v1/namespaces/{ns}/pods")["items"]
    maps = client.get(f"/api/v1/namespaces/{ns}/configmaps")["items"]
    return {p["metadata"]["name"] for p in pods} | {m["metadata"]["name"] for m in maps} - {"kube-root-ca.crt"}


def test_dry_run_quotes_the_apiserver_on_the_field_line(local_cluster: Any, namespace: str) -> None:
    with local_cluster.client() as client:
        found = dryrun.dry_run_texts(client, {"half.yaml": HALF, "unequal.yaml": UNEQUAL, "good.yaml": GOOD},
                                     namespace=namespace)
        assert _objects(client, namespace) == set()  # dryRun=All stores nothing
    by_file = {f.file: f for f in found}
    assert set(by_file) == {"half.yaml", "unequal.yaml"}, found
    half = [f for f in found if f.file == "half.yaml"]
    assert {f.line for f in half} == {11} and all(f.rule == "apiserver" for f in half)
    assert any('spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "500m": must be an integer'
               in f.message for f in half)
    unequal = by_file["unequal.yaml"]
    assert "spec.template.spec.containers[0].resources.requests: Invalid value: \"1\": must be equal to nvidia.com/gpu limit" \
        in unequal.message and unequal.line == 14


def test_dry_run_of_existing_objects_and_quota(local_cluster: Any, namespace: str) -> None:
    """An existing ConfigMap is applied (no finding); a quota in the namespace refuses a 2-GPU pod."""
    with local_cluster.client() as client:
        client.create(f"/api/v1/namespaces/{namespace}/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"mode": "off"}})
        client.create(f"/api/v1/namespaces/{namespace}/resourcequotas", {
            "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu-quota"},
            "spec": {"hard": {"requests.nvidia.com/gpu": "1"}}})
        found = dryrun.dry_run_texts(client, {"good.yaml": GOOD}, namespace=namespace)
        assert client.get(f"/api/v1/namespaces/{namespace}/configmaps/settings")["data"] == {"mode": "off"}
    assert len(found) == 1 and found[0].line == 7, found
    assert "exceeded quota: gpu-quota" in found[0].message and found[0].section == "scheduling"


def test_lint_server_flag(local_cluster: Any, tmp_path: Path) -> None:
    (tmp_path / "half.yaml").write_text(HALF)
    out = json.loads(local_cluster.gpulab("lint", "--server", "--json", str(tmp_path)).stdout)
    server = [f for f in out["findings"] if f["rule"] == "apiserver"]
    assert server and all(f["line"] == 11 for f in server)
    assert any("must be an integer" in f["message"] for f in server)


def test_why_names_the_missing_toleration(local_cluster: Any, namespace: str) -> None:
    """A pod pinned to the T4 pool without the GPU toleration: the taint filter runs before node affinity, so
    every GPU node reports the taint and only the CPU node the selector; the T4 node also lists its taint first."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "no-tol"},
           "spec": {"nodeSelector": {"gpulab.dev/pool": "t4"}, "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "c", "image": "cuda", "command": ["sleep", "1"]}]}}
    with local_cluster.client() as client:
        create_pod(client, namespace, pod)
        wait_event(client, namespace, "no-tol", "FailedScheduling", "untolerated taint")
        result = explain.explain_pod(LiveView(client), namespace, "no-tol")
    assert result.agrees is True and dict(result.scheduler_counts) == {schedmsg.TAINTS: 5, schedmsg.AFFINITY: 1}
    t4 = next(v for v in result.nodes if v.node == "t4-0")
    assert "nvidia.com/gpu=present:NoSchedule" in t4.reasons[0].text and t4.reasons[0].section == "scheduling"
    out = json.loads(local_cluster.gpulab("why", "no-tol", "-n", namespace, "--json").stdout)
    assert out["nodes"] == result.to_dict()["nodes"] and out["agrees"] is True  # the CLI says the same
    missing = local_cluster.gpulab("why", "nobody", "-n", namespace)
    assert "There is no pod nobody" in missing.stdout
