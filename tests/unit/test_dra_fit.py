"""The explainer judges DRA selectors with the Kubernetes CEL library (celcheck) against published devices;
what CEL cannot decide (a runtime error, no helper) is 'unknown', never a guess."""

from __future__ import annotations

import time
from fractions import Fraction
from typing import Any

import pytest

from cluster.gpu import cel
from graders import dra_fit
from prerequisites import require

SLICE: dict[str, Any] = {"spec": {"driver": "gpu.nvidia.com", "pool": {"name": "a100-0"}, "nodeName": "a100-0",
                                  "devices": [
    {"name": "gpu-0", "attributes": {
        "type": {"string": "gpu"}, "productName": {"string": "NVIDIA A100-SXM4-80GB"},
        "cudaComputeCapability": {"version": "8.0.0"}, "index": {"int": 0},
        "resource.kubernetes.io/pciBusID": {"string": "0000:07:00.0"}},
     "capacity": {"memory": {"value": "80Gi"}}},
    {"name": "gpu-0-mig-1g10gb-19-0", "attributes": {"type": {"string": "mig"}, "profile": {"string": "1g.10gb"}},
     "capacity": {"memory": {"value": "9856Mi"}}},
]}}


@pytest.fixture
def devices() -> list[dra_fit.Device]:
    require(cel.find_binary() is not None, "celcheck is not built: run `gpulab binaries ensure`")
    return dra_fit.devices_of(SLICE)


@pytest.mark.parametrize(("expression", "a100", "mig"), [
    ("device.driver == 'gpu.nvidia.com'", True, True),
    ('device.driver != "gpu.nvidia.com"', False, False),
    ("device.attributes['gpu.nvidia.com'].type == 'gpu'", True, False),
    ("device.attributes['gpu.nvidia.com'].profile == '1g.10gb'", None, True),  # no such key on the full GPU
    ("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0", True, False),
    ("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('1Ti'))", False, False),
    ("device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*a100.*$')", True, None),
    ("device.attributes['gpu.nvidia.com'].cudaComputeCapability.isGreaterThan(semver('7.5.0'))", True, None),
    ("device.attributes['gpu.nvidia.com'].cudaComputeCapability.compareTo(semver('9.0.0')) >= 0", False, None),
    ("has(device.attributes['gpu.nvidia.com'].profile)", False, True),
    ("'profile' in device.attributes['gpu.nvidia.com']", False, True),
    ("(device.driver == 'gpu.nvidia.com') && device.attributes['gpu.nvidia.com'].type == 'mig'", False, True),
    # What the old regex subset could not read, real CEL decides:
    ("device.attributes['gpu.nvidia.com'].type == 'gpu' || device.attributes['gpu.nvidia.com'].type == 'mig'",
     True, True),
    ("!(device.attributes['gpu.nvidia.com'].type == 'gpu')", False, True),
    ("device.attributes['gpu.nvidia.com'].index == 0", True, None),
    ("size(device.attributes['gpu.nvidia.com']) > 3", True, False),
    ("", None, None),  # does not compile
])
def test_selectors_are_evaluated_by_kubernetes_cel(devices: list[dra_fit.Device], expression: str,
                                                    a100: bool | None, mig: bool | None) -> None:
    assert dra_fit.match_devices([expression], devices) == [a100, mig]


def test_selectors_run_in_order_and_the_first_false_or_failing_one_decides(devices: list[dra_fit.Device]) -> None:
    """As the allocator's selectorsMatch: a runtime error in an earlier selector is an error whatever follows."""
    both = ["device.attributes['gpu.nvidia.com'].profile == '1g.10gb'", "device.attributes['gpu.nvidia.com'].type == 'mig'"]
    assert dra_fit.match_devices(both, devices) == [None, True]
    assert dra_fit.match_devices([*both, "device.driver == 'other'"], devices) == [None, False]
    assert dra_fit.match_devices(["device.driver == 'other'", *both], devices) == [False, False]


def test_runtime_errors_and_cost_are_reported_in_the_allocators_words(devices: list[dra_fit.Device]) -> None:
    verdicts = cel.evaluate("device.attributes['gpu.nvidia.com'].profile == 'x'", [d.api for d in devices])
    assert verdicts[0] == cel.DeviceVerdict("gpu-0", None, "CEL runtime error: no such key: profile")
    assert verdicts[1].match is False and not verdicts[1].error
    # Worst-case cost past CELSelectorExpressionMaxCost is refused when compiled, before it can run.
    nested = "device.attributes['gpu.nvidia.com'].productName.split('').all(a, " \
             "device.attributes['gpu.nvidia.com'].productName.split('').all(b, a != b || a == b))"
    started = time.monotonic()
    costly = cel.evaluate(nested, [d.api for d in devices])
    assert time.monotonic() - started < 10
    assert all(v.match is None and v.error for v in costly), costly


def test_without_the_helper_every_verdict_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cel, "find_binary", lambda: None)
    assert dra_fit.match_devices(["device.driver == 'gpu.nvidia.com'"], dra_fit.devices_of(SLICE)) == [None, None]


def test_devices_of_a_slice_qualify_attribute_names_with_the_driver() -> None:
    slice_obj = {"spec": {"driver": "gpu.nvidia.com", "pool": {"name": "t4-0"}, "nodeName": "t4-0", "devices": [
        {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}, "resource.kubernetes.io/pciBusID": {"string": "x"}},
         "capacity": {"memory": {"value": "15Gi"}, "bad": {"value": "lots"}}}, "not a device"]}}
    devices = dra_fit.devices_of(slice_obj)
    assert devices[0].attributes == {"gpu.nvidia.com/type": "gpu", "resource.kubernetes.io/pciBusID": "x"}
    assert devices[0].capacity == {"gpu.nvidia.com/memory": Fraction(15 * 1024**3)}
    assert devices[0].api["attributes"]["type"] == {"string": "gpu"}
    assert dra_fit.offer(devices[:1]) == "1 x gpu-0 (15Gi)"
