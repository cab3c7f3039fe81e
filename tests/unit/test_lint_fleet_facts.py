"""FleetFacts: the starter fleet, Kubernetes Node objects, plain data and --fleet files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cluster import errors
from graders import context


def test_starter_fleet_matches_the_builtin_spec() -> None:
    fleet = context.FleetFacts.starter()
    assert {m.key for m in fleet.gpu_models} == {"T4", "L40S", "A100-SXM4-80GB", "H100-80GB-HBM3"}
    assert context.Taint("nvidia.com/gpu", "present", "NoSchedule") in fleet.taints
    assert fleet.resources["nvidia.com/gpu"] == 8
    assert "Tesla-T4" in fleet.labels["nvidia.com/gpu.product"]
    assert fleet.mig_strategies == frozenset({"single"})
    assert [n.name for n in fleet.nodes if not n.has_gpus] == ["cpu-0"]


def test_from_nodes_reads_labels_taints_and_extended_capacity() -> None:
    node = {
        "metadata": {"name": "n1", "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
                                              "nvidia.com/mig.strategy": "mixed"}},
        "spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"}]},
        "status": {"capacity": {"cpu": "8", "nvidia.com/mig-1g.5gb": "14", "hugepages-2Mi": "0"}},
    }
    fleet = context.FleetFacts.from_nodes([node, "garbage"])  # type: ignore[list-item]
    (n,) = fleet.nodes
    assert n.gpu_model == "A100-SXM4-40GB" and n.mig_strategy == "mixed"
    assert dict(n.resources) == {"nvidia.com/mig-1g.5gb": 14}
    assert n.taints == (context.Taint("gpu", "", "NoSchedule"),)


def test_from_data_plain_form_and_errors() -> None:
    fleet = context.FleetFacts.from_data({"name": "tiny", "nodes": [
        {"name": "a", "gpu": "H100-80GB", "taints": ["nvidia.com/gpu=present:NoSchedule"],
         "resources": {"nvidia.com/gpu": 8}, "labels": {"x": "y"}}]})
    assert fleet.name == "tiny" and fleet.gpu_models[0].key == "H100-80GB-HBM3"
    with pytest.raises(ValueError, match="unknown GPU model"):
        context.FleetFacts.from_data({"nodes": [{"gpu": "V100"}]})
    with pytest.raises(ValueError):
        context.FleetFacts.from_data({"nodes": [{"taints": ["no-effect"]}]})


def test_resolve_accepts_names_kubectl_output_and_rejects_the_rest(tmp_path: Path) -> None:
    assert context.resolve(None).name == "starter"
    listing = tmp_path / "nodes.json"
    listing.write_text(json.dumps({"kind": "List", "items": [{"metadata": {"name": "x"}}]}))
    assert [n.name for n in context.resolve(str(listing)).nodes] == ["x"]
    with pytest.raises(errors.ConfigError):
        context.resolve("no-such-fleet")
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes: [1, 2]\n")
    with pytest.raises(errors.ConfigError):
        context.resolve(str(bad))
