"""NVIDIA's ClusterPolicy CRD as gpulab reads it: what pruning would drop, the field docs, and the default policy
``gpulab gpu-operator install`` creates against it."""

from __future__ import annotations

import pytest

from cluster import versions
from cluster.gpu import clusterpolicy_crd
from cluster.sim.gpu import manifests

pytestmark = pytest.mark.unit


def _unknown(spec: dict[str, object]) -> list[str]:
    obj = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "p", "labels": {"a": "b"}},
           "spec": spec}
    return [u.dotted for u in clusterpolicy_crd.unknown_fields(obj)]


def test_the_installed_crd_is_nvidias_generated_one() -> None:
    """The CRD object carries controller-gen's version annotation, the status subresource and NVIDIA's names."""
    crd = manifests.crd()
    assert crd["metadata"]["annotations"]["controller-gen.kubebuilder.io/version"] == versions.CONTROLLER_TOOLS_VERSION
    assert crd["metadata"]["name"] == "clusterpolicies.nvidia.com" and crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["versions"][0]["subresources"] == {"status": {}}
    assert manifests.crd() is not manifests.crd()  # a fresh copy: callers may change theirs


def test_default_policy_has_every_required_field_and_nothing_unknown() -> None:
    policy = manifests.cluster_policy()
    spec_schema = clusterpolicy_crd.schema()["properties"]["spec"]
    assert set(spec_schema["required"]) <= set(policy["spec"])
    assert set(spec_schema["properties"]["operator"]["required"]) <= set(policy["spec"]["operator"])
    assert clusterpolicy_crd.unknown_fields(policy) == []


def test_unknown_fields_at_every_level() -> None:
    """Misspelt keys in objects, in list items and at the top of spec are found; map values (labels,
    nodeSelector-like maps) and the object's own metadata are not fields of the schema and pass."""
    assert _unknown({"devicePlugin": {"confg": {}}}) == ["spec.devicePlugin.confg"]
    assert _unknown({"devicePlugin": {"config": {"Name": "x", "name": "y"}}}) == ["spec.devicePlugin.config.Name"]
    assert _unknown({"devicePlugin": {"env": [{"name": "A"}, {"name": "B", "val": "1"}]}}) == \
        ["spec.devicePlugin.env[1].val"]
    assert _unknown({"devicePlugins": {}, "mig": {"strategy": "mixed"}}) == ["spec.devicePlugins"]
    assert _unknown({"daemonsets": {"labels": {"any-key": "v"}, "annotations": {"k": "v"}}}) == []
    assert [u.dotted for u in clusterpolicy_crd.unknown_fields({"kind": "ClusterPolicy", "extra": 1})] == ["extra"]


def test_known_fields_are_offered_for_suggestions() -> None:
    (found,) = clusterpolicy_crd.unknown_fields({"spec": {"mig": {"Strategy": "mixed"}}})
    assert found.known == ("strategy",)


def test_describe_gives_kubectl_explain_text() -> None:
    assert clusterpolicy_crd.describe("spec.devicePlugin.config.name") == \
        "ConfigMap name for NVIDIA Device Plugin config including shared config between plugin and GFD"
    assert clusterpolicy_crd.describe("spec.devicePlugin.env.name") is not None  # through the list's items
    assert clusterpolicy_crd.describe("spec.devicePlugin.confg") is None


def test_the_mig_manager_config_name_has_no_default_as_in_the_taught_operator() -> None:
    """GPU Operator v26.7.0's ``MIGPartedConfigSpec.Name`` has no kubebuilder default (the pinned v25.3.4 file
    defaults it to default-mig-parted-config), so a ClusterPolicy without a name keeps none and the MIG manager
    generates its config; ``default`` keeps its all-disabled default."""
    config = manifests.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]["migManager"]["properties"]["config"]["properties"]
    assert "default" not in config["name"]
    assert config["default"]["default"] == "all-disabled"
    assert "default: default-mig-parted-config" in clusterpolicy_crd.CRD_PATH.read_text()  # the file is unchanged
