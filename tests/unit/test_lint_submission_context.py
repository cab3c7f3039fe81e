"""Rules read the whole submission: what it sets up (MIG strategy, shared resources, classes) changes verdicts."""

from __future__ import annotations

from graders import lint

MIG_POD = """apiVersion: v1
kind: Pod
metadata: {name: mig}
spec:
  tolerations: [{key: nvidia.com/gpu, operator: Exists}]
  containers:
  - name: a
    image: cuda
    resources:
      limits: {nvidia.com/mig-3g.40gb: 1}
"""
MIXED = "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: cluster-policy}\nspec:\n  mig: {strategy: mixed}\n"


def _variants(texts: dict[str, str]) -> list[str]:
    return [f.message for f in lint.lint_texts(texts).findings if f.rule == "gpu-resource-name"]


def test_mig_resource_on_a_single_strategy_fleet_is_flagged() -> None:
    (message,) = _variants({"pod.yaml": MIG_POD})
    assert "only advertised under the mixed MIG strategy" in message


def test_a_clusterpolicy_switching_to_mixed_leaves_only_the_partitioning_warning() -> None:
    (message,) = _variants({"pod.yaml": MIG_POD, "policy.yaml": MIXED})
    assert "no node is partitioned that way right now" in message


def test_renamed_shared_resources_from_the_submission_are_known() -> None:
    pod = MIG_POD.replace("nvidia.com/mig-3g.40gb", "nvidia.com/gpu.shared")
    assert len(_variants({"pod.yaml": pod})) == 1
    config = ("version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    failRequestsGreaterThanOne: true\n"
              "    resources:\n    - {name: gpu, replicas: 4}\n")
    assert _variants({"pod.yaml": pod, "plugin.yaml": config}) == []


def test_device_classes_and_templates_defined_in_the_submission_resolve() -> None:
    claim = ("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: t}\nspec:\n  spec:\n"
             "    devices:\n      requests:\n      - name: gpu\n        exactly: {deviceClassName: big-gpus}\n")
    device_class = ("apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: big-gpus}\nspec:\n"
                    "  selectors:\n  - cel: {expression: \"device.driver == 'gpu.nvidia.com'\"}\n")
    alone = [f for f in lint.lint_texts({"claim.yaml": claim}).findings if f.rule == "dra-api-shape"]
    assert [f.severity.value for f in alone] == ["warning"]
    both = lint.lint_texts({"claim.yaml": claim, "class.yaml": device_class})
    assert [f for f in both.findings if f.rule == "dra-api-shape"] == []
