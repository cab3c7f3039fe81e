"""A lab names a ResourceSlice by its node: the DRA driver's slices get generated names, so the rule finds the
slice whose ``spec.nodeName`` is the node, and refuses a fixed name at load time."""

from __future__ import annotations

from typing import Any

import pytest

from labs import evidence
from labs.checks.live import ObjectRule
from labs.spec import Problems
from live_factories import bundle_data, make_node, view_of

pytestmark = pytest.mark.unit


def a_slice(node: str, suffix: str = "x7k2p") -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpu.nvidia.com-{suffix}", "generateName": f"{node}-gpu.nvidia.com-"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                             "resourceSliceCount": 1}, "devices": []}}


def parsed(raw: dict[str, Any]) -> tuple[ObjectRule, Problems]:
    p = Problems()
    return ObjectRule.parse(p, "check", raw, None), p


def judge(rule: ObjectRule, slices: list[dict[str, Any]]) -> Any:
    data = bundle_data(nodes=[make_node("a100-1", gpus=4)], slices=slices)
    return rule.evaluate(evidence.Evidence({}, (), None, view_of(data)))  # type: ignore[arg-type]


def test_a_slice_is_found_by_its_node_whatever_suffix_it_got() -> None:
    rule, p = parsed({"kind": "ResourceSlice", "node": "a100-1"})
    assert not p.items
    assert judge(rule, [a_slice("t4-0"), a_slice("a100-1", "q9zzt")]).passed
    missing = judge(rule, [a_slice("t4-0")])
    assert not missing.passed and missing.message == "ResourceSlice of node a100-1 does not exist"


def test_a_fixed_slice_name_is_refused_and_node_belongs_to_slices_only() -> None:
    _, p = parsed({"kind": "ResourceSlice", "name": "a100-1-gpu.nvidia.com"})
    assert any("check.node" in str(i) for i in p.items) and any("name is generated" in str(i) for i in p.items)
    _, p = parsed({"kind": "DeviceClass", "name": "gpu.nvidia.com", "node": "a100-1"})
    assert any("only a ResourceSlice is named by node" in str(i) for i in p.items)
