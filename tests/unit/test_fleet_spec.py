"""Fleet specs are strict: every problem is reported at once with its path; built-ins load."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster import errors, fleet
from cluster.sim import nodes

FIXTURES = Path(__file__).parent.parent / "fixtures" / "fleets"


def test_builtin_fleets_load_with_expected_shape() -> None:
    starter = fleet.load("starter")
    assert starter.node_names() == ["cpu-0", "t4-0", "l40s-0", "a100-0", "a100-1", "h100-0"]
    platform = fleet.load("platform")
    assert platform.node_count == 8
    assert all(p.gpu and p.gpu.model.key == "A100-SXM4-80GB" and p.gpu.count == 4 for p in platform.pools)


def test_every_problem_is_listed_with_its_path() -> None:
    with pytest.raises(errors.ConfigError) as info:
        fleet.load(str(FIXTURES / "invalid-many-problems.yaml"))
    problems = "\n".join(info.value.problems)
    assert "spec.pools[0].count: must be an integer" in problems
    assert "spec.pools[0].gpu.model: unknown GPU model 'V100-SXM2-16GB'" in problems
    assert "spec.pools[0].colour: unknown field" in problems
    assert "spec.pools[1].memory: must be a Kubernetes quantity" in problems
    assert "spec.pools[1].taints[0].effect: must be one of" in problems
    assert len(info.value.problems) == 5


def test_wrong_api_version_and_non_mapping_are_reported() -> None:
    with pytest.raises(errors.ConfigError) as info:
        fleet.parse({"apiVersion": "v2", "kind": "Fleet", "metadata": {"name": "x"}, "spec": {"pools": [{"name": "a"}]}})
    assert any(p.startswith("apiVersion:") for p in info.value.problems)
    with pytest.raises(errors.ConfigError):
        fleet.parse(["not", "a", "mapping"])


def test_malformed_yaml_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: [unclosed\n")
    with pytest.raises(errors.ConfigError) as info:
        fleet.load(str(bad))
    assert "not valid YAML" in str(info.value)


def test_aliases_resolve_and_dump_round_trips() -> None:
    small = fleet.load(str(FIXTURES / "valid-small.yaml"))
    assert small.pools[0].gpu is not None and small.pools[0].gpu.model.key == "A30-24GB"
    again = fleet.parse(fleet.to_data(small))
    assert again == small


def test_node_objects_carry_capacity_taints_and_hardware_but_no_gpu_resource() -> None:
    built = nodes.build_all(fleet.load("starter"))
    a100 = next(n for n in built if n["metadata"]["name"] == "a100-0")
    assert a100["status"]["allocatable"]["pods"] == "110"
    assert "nvidia.com/gpu" not in a100["status"]["capacity"]
    assert a100["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert '"model": "A100-SXM4-80GB"' in a100["metadata"]["annotations"][nodes.HARDWARE_ANNOTATION]


def test_scaled_fleet_has_the_requested_size() -> None:
    assert fleet.scaled(1000).node_count == 1000


def test_a_misspelt_key_gets_its_line_and_the_name_it_meant(tmp_path: Path) -> None:
    """Fleet errors carry the YAML line and a did-you-mean (the strict reader quiz banks and labs use too)."""
    path = tmp_path / "fleet.yaml"
    path.write_text("apiVersion: gpulab.dev/v1\nkind: Fleet\nmetadata:\n  name: small\nspec:\n  pools:\n"
                    "  - name: gpu\n    count: 1\n    gpus: {model: T4, count: 1}\n    cpu: lots\n")
    with pytest.raises(errors.ConfigError) as info:
        fleet.load(str(path))
    assert info.value.problems == [
        "spec.pools[0].gpus: unknown field (did you mean 'gpu'?) (line 9)",
        "spec.pools[0].cpu: must be a Kubernetes quantity such as '8' or '32Gi', got 'lots' (line 10)",
    ]
