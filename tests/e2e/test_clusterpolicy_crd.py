"""NVIDIA's ClusterPolicy CRD on the real control plane: ``gpulab gpu-operator install`` installs the CRD that
controller-gen generates from the GPU Operator's ``api/nvidia/v1`` types, so the API server explains, defaults,
validates and prunes ClusterPolicy writes as a real cluster does, and the linter's words about a misspelt field
are what kubectl really prints."""

from __future__ import annotations

import re
from pathlib import Path

from cluster.gpu import clusterpolicy_crd
from cluster.kube.client import Client
from cluster.sim.gpu import names
from graders import lint
from gpu_e2e import gpu_operator

__all__ = ["gpu_operator"]

MISSPELT = """apiVersion: nvidia.com/v1
kind: ClusterPolicy
metadata:
  name: cluster-policy
spec:
  devicePlugin:
    confg:
      name: device-plugin-config
      default: timeslice-4
"""


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_explain_shows_nvidia_field_docs(gpu_operator: Client, local_cluster) -> None:
    """`kubectl explain clusterpolicy.spec.devicePlugin.config` prints NVIDIA's own descriptions of the fields."""
    out = _flat(local_cluster.kubectl("explain", "clusterpolicy.spec.devicePlugin.config").stdout)
    assert _flat(clusterpolicy_crd.describe("spec.devicePlugin.config") or "?") in out
    assert "ConfigMap name for NVIDIA Device Plugin config including shared config between plugin and GFD" in out
    assert "Default config name within the ConfigMap for the NVIDIA Device Plugin config" in out
    strategy = _flat(local_cluster.kubectl("explain", "clusterpolicy.spec.mig.strategy").stdout)
    assert "Optional: MIGStrategy to apply for GFD and NVIDIA Device Plugin" in strategy


def test_the_api_server_applies_the_crd_defaults(gpu_operator: Client) -> None:
    """The stored default policy carries the CRD's defaults (fields the chart's policy does not set)."""
    spec = gpu_operator.get(names.POLICY)["spec"]
    assert spec["operator"]["runtimeClass"] == "nvidia"
    # v26.7.0's CRD gives migManager.config.name no default (``cluster.gpu.clusterpolicy_crd._as_taught``)
    assert spec["migManager"]["config"] == {"default": "all-disabled"}
    assert spec["devicePlugin"]["mps"]["root"] == "/run/nvidia/mps"


def test_misspelt_field_behaves_as_the_linter_says(gpu_operator: Client, local_cluster, tmp_path: Path) -> None:
    """`kubectl patch` drops `confg` with a warning and changes nothing; `kubectl apply` is refused. The linter's
    finding quotes both kubectl outputs word for word."""
    patch = tmp_path / "clusterpolicy-patch.yaml"
    patch.write_text(MISSPELT)
    found = [f for f in lint.lint_paths([patch]).findings if f.rule == "cluster-policy-schema"]
    assert len(found) == 1 and "Did you mean `config`?" in found[0].message
    quoted = re.findall(r"`([A-Za-z ]+: unknown field [^`]*)`", found[0].message)
    assert len(quoted) == 2 and "`field not declared in schema`" in found[0].message, found[0].message
    warning, strict = quoted
    before = gpu_operator.get(names.POLICY)

    patched = local_cluster.kubectl("patch", "clusterpolicy", names.POLICY_NAME, "--type", "merge",
                                    "--patch-file", str(patch))
    assert warning in patched.stderr, patched.stderr
    assert "patched (no change)" in patched.stdout, patched.stdout
    after = gpu_operator.get(names.POLICY)
    assert after["spec"] == before["spec"] and "confg" not in after["spec"]["devicePlugin"]

    applied = local_cluster.kubectl("apply", "-f", str(patch), check=False)
    assert applied.returncode != 0 and strict in applied.stderr, applied.stderr
    server_side = local_cluster.kubectl("apply", "--server-side", "-f", str(patch), check=False)
    assert server_side.returncode != 0, server_side.stdout
    assert ".spec.devicePlugin.confg: field not declared in schema" in server_side.stderr, server_side.stderr
    assert gpu_operator.get(names.POLICY)["spec"] == before["spec"]


def test_bad_mig_strategy_is_refused_as_the_linter_says(gpu_operator: Client, local_cluster, tmp_path: Path) -> None:
    """The CRD's enum refuses `Mixed`; the device-plugin-config finding quotes the API server's words."""
    patch = tmp_path / "strategy.yaml"
    patch.write_text(MISSPELT.split("spec:")[0] + "spec:\n  mig:\n    strategy: Mixed\n")
    (found,) = [f for f in lint.lint_paths([patch]).findings if f.severity.value == "error"]
    (quoted,) = re.findall(r"`(spec\.mig\.strategy: [^`]*)`", found.message)
    refused = local_cluster.kubectl("patch", "clusterpolicy", names.POLICY_NAME, "--type", "merge",
                                    "--patch-file", str(patch), check=False)
    assert refused.returncode != 0 and quoted in refused.stderr, refused.stderr
    assert gpu_operator.get(names.POLICY)["spec"]["mig"]["strategy"] == "single"
