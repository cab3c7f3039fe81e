"""The explainer's reading of common DRA selector idioms against published devices; anything else is 'unknown'."""

from __future__ import annotations

from fractions import Fraction

import pytest

from graders import dra_fit

A100 = dra_fit.Device("gpu-0", "gpu.nvidia.com", "a100-0",
                      {"gpu.nvidia.com/type": "gpu", "gpu.nvidia.com/productName": "NVIDIA A100-SXM4-80GB",
                       "gpu.nvidia.com/cudaComputeCapability": "8.0.0", "resource.kubernetes.io/pciBusID": "0000:07:00.0"},
                      {"gpu.nvidia.com/memory": Fraction(80 * 1024**3)})
MIG = dra_fit.Device("gpu-0-mig-1g10gb-19-0", "gpu.nvidia.com", "a100-0",
                     {"gpu.nvidia.com/type": "mig", "gpu.nvidia.com/profile": "1g.10gb"},
                     {"gpu.nvidia.com/memory": Fraction(9856 * 1024**2)})


@pytest.mark.parametrize(("expression", "a100", "mig"), [
    ("device.driver == 'gpu.nvidia.com'", True, True),
    ('device.driver != "gpu.nvidia.com"', False, False),
    ("device.attributes['gpu.nvidia.com'].type == 'gpu'", True, False),
    ("device.attributes['gpu.nvidia.com'].profile == '1g.10gb'", None, True),
    ("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0", True, False),
    ("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('1Ti'))", False, False),
    ("device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*a100.*$')", True, None),
    ("device.attributes['gpu.nvidia.com'].cudaComputeCapability.isGreaterThan(semver('7.5.0'))", True, None),
    ("device.attributes['gpu.nvidia.com'].cudaComputeCapability.compareTo(semver('9.0.0')) >= 0", False, None),
    ("has(device.attributes['gpu.nvidia.com'].profile)", False, True),
    ("'profile' in device.attributes['gpu.nvidia.com']", False, True),
    ("(device.driver == 'gpu.nvidia.com') && device.attributes['gpu.nvidia.com'].type == 'mig'", False, True),
    ("device.attributes['gpu.nvidia.com'].type == 'gpu' || device.attributes['gpu.nvidia.com'].type == 'mig'", None, None),
    ("!(device.attributes['gpu.nvidia.com'].type == 'gpu')", None, None),
    ("device.attributes['gpu.nvidia.com'].index == 0", None, None),
    ("size(device.attributes) > 0", None, None),
    ("", None, None),
])
def test_idioms(expression: str, a100: bool | None, mig: bool | None) -> None:
    assert dra_fit.match(expression, A100) is a100
    assert dra_fit.match(expression, MIG) is mig


def test_a_false_clause_decides_even_next_to_an_unknown_one() -> None:
    assert dra_fit.match("size(device.attributes) > 0 && device.attributes['gpu.nvidia.com'].type == 'mig'", A100) is False


def test_devices_of_a_slice_qualify_attribute_names_with_the_driver() -> None:
    slice_obj = {"spec": {"driver": "gpu.nvidia.com", "pool": {"name": "t4-0"}, "nodeName": "t4-0", "devices": [
        {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}, "resource.kubernetes.io/pciBusID": {"string": "x"}},
         "capacity": {"memory": {"value": "15Gi"}, "bad": {"value": "lots"}}}, "not a device"]}}
    devices = dra_fit.devices_of(slice_obj)
    assert devices[0].attributes == {"gpu.nvidia.com/type": "gpu", "resource.kubernetes.io/pciBusID": "x"}
    assert devices[0].capacity == {"gpu.nvidia.com/memory": Fraction(15 * 1024**3)}
    assert dra_fit.offer(devices[:1]) == "1 x gpu-0 (15Gi)"
