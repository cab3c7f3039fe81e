"""On kind the stack hands each node's devices to gpulab's node plugin (a file per node) instead of writing the
node's GPU capacity and allocatable: the kubelet counts every device in capacity and the healthy ones in
allocatable (kubelet pkg/kubelet/cm/devicemanager GetCapacity), so the file must say exactly that."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cluster.sim.gpu import devicefile, names
from gpustack_factories import TS_RENAME_4, default_policy, ext, make_node, settle

pytestmark = pytest.mark.unit


def _counts(devs: devicefile.Devices) -> dict[str, tuple[int, int]]:
    return {name: (len(ds), sum(h for _, h in ds)) for name, ds in devs.items()}


def test_the_devices_say_what_capacity_and_allocatable_say() -> None:
    node, plan = settle(make_node(annotations={names.FAULTS: '{"kinds": [], "unhealthy": [2]}'}), default_policy())
    assert ext(node) == {"nvidia.com/gpu": "4"} and ext(node, "allocatable") == {"nvidia.com/gpu": "3"}
    assert _counts(plan.devices) == {"nvidia.com/gpu": (4, 3)}
    ids = [i for i, _ in plan.devices["nvidia.com/gpu"]]
    assert len(set(ids)) == 4 and all(i.startswith("GPU-") for i in ids)  # the plugin's IDs: GPU UUIDs


def test_not_validated_yet_every_device_is_unhealthy() -> None:
    _, plan = settle(make_node(), default_policy(), validated=False)
    assert _counts(plan.devices) == {"nvidia.com/gpu": (4, 0)}


def test_a_broken_driver_keeps_the_devices_unhealthy_and_no_policy_lists_none() -> None:
    node, _ = settle(make_node(), default_policy())
    node["metadata"]["annotations"][names.FAULTS] = '{"kinds": ["nouveau-bound"], "unhealthy": []}'
    _, plan = settle(node, default_policy())
    assert _counts(plan.devices) == {"nvidia.com/gpu": (4, 0)}
    _, gone = settle(node, None)
    assert gone.devices == {}


def test_shared_replicas_and_single_request_go_to_the_file(tmp_path: Path) -> None:
    pol = default_policy(device_plugin_config="cm", device_plugin_default="ts")
    _, plan = settle(make_node(), pol, {"cm": {"ts": TS_RENAME_4}})  # failRequestsGreaterThanOne: true
    assert _counts(plan.devices) == {"nvidia.com/gpu.shared": (16, 16)}
    assert plan.single_request == ("nvidia.com/gpu.shared",)
    data = json.loads(devicefile.render(plan.devices, plan.single_request))
    assert data["singleRequest"] == ["nvidia.com/gpu.shared"]
    assert [d["id"] for d in data["resources"]["nvidia.com/gpu.shared"]][:2] == \
        [i for i, _ in plan.devices["nvidia.com/gpu.shared"]][:2]
    writer = devicefile.Writer(tmp_path)
    text = devicefile.render(plan.devices, plan.single_request)
    assert writer.write("a100-0", text) and not writer.write("a100-0", text)  # unchanged: not written again
    assert json.loads((tmp_path / "a100-0" / "devices.json").read_text()) == data
    assert [p.name for p in (tmp_path / "a100-0").iterdir()] == ["devices.json"]  # no temporary file left
