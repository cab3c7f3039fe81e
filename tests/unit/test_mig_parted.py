"""mig-parted configs: strict parsing with the real errors, device filters, placement fit, apply (gpu-semantics §4)."""

from __future__ import annotations

import dataclasses

import pytest

from cluster import errors
from cluster.gpu import catalog, inventory, mig

pytestmark = pytest.mark.unit

A100_80 = catalog.MODELS["A100-SXM4-80GB"]
A100_40 = catalog.MODELS["A100-SXM4-40GB"]
H100 = catalog.MODELS["H100-80GB-HBM3"]
A30 = catalog.MODELS["A30-24GB"]
T4 = catalog.MODELS["T4"]


def problems(text: str) -> list[str]:
    with pytest.raises(errors.ConfigError) as info:
        mig.parse(text)
    return info.value.problems


def entry(body: str) -> str:
    return "version: v1\nmig-configs:\n  c:\n  - " + body.replace("\n", "\n    ") + "\n"


def test_unknown_field_is_an_error() -> None:
    """gpu-semantics §4 strictness: `unexpected field: X` at the top and inside an entry."""
    assert problems("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: false}]}\nextra: 1\n") == ["unexpected field: extra"]
    assert problems(entry("devices: all\nmig-enabled: false\nmig-device: {}")) == ["mig-configs.c[0]: unexpected field: mig-device"]


def test_version_rules() -> None:
    """gpu-semantics §4: version is required; other values -> `unknown version`."""
    assert problems("mig-configs: {a: [{devices: all, mig-enabled: false}]}\n") == ["unable to parse with missing 'version' field"]
    assert problems("version: v2\n") == ["unknown version: v2"]


def test_required_fields() -> None:
    """gpu-semantics §4 missing fields: devices, mig-enabled, and mig-devices when enabled."""
    assert problems(entry("mig-enabled: true\nmig-devices: {}")) == ["mig-configs.c[0]: missing required field: devices"]
    assert problems(entry("devices: all")) == ["mig-configs.c[0]: missing required field: mig-enabled"]
    assert problems(entry("devices: all\nmig-enabled: true")) == [
        "mig-configs.c[0]: missing required field 'mig-devices' when 'mig-enabled' is true"
    ]


def test_devices_with_mig_disabled() -> None:
    """gpu-semantics §4: `MIG devices included when 'mig-enabled' is false`."""
    assert problems(entry('devices: all\nmig-enabled: false\nmig-devices: {"1g.10gb": 1}')) == [
        "mig-configs.c[0]: MIG devices included when 'mig-enabled' is false"
    ]


def test_all_counts_zero_and_bad_profile() -> None:
    """gpu-semantics §4 MP pkg/types/mig_config.go: `all counts for all MigProfiles are 0`, bad profile format."""
    assert problems(entry('devices: all\nmig-enabled: true\nmig-devices: {"1g.10gb": 0}')) == [
        "mig-configs.c[0]: error validating values in 'mig-devices' field: all counts for all MigProfiles are 0"
    ]
    assert problems(entry('devices: all\nmig-enabled: true\nmig-devices: {"1g.10g": 1}')) == [
        "mig-configs.c[0]: error validating values in 'mig-devices' field: invalid format for '1g.10g': "
        "cannot parse fields of '1g.10g': missing 'gb' from '%dgb'"
    ]


def test_empty_config_list_and_every_problem_reported() -> None:
    """gpu-semantics §4: `at least one entry in '<name>' is required`; all problems come back together."""
    text = "version: v1\nmig-configs:\n  a: []\n  b:\n  - devices: some\n    mig-enabled: false\n"
    assert problems(text) == [
        "mig-configs.a: at least one entry in 'a' is required",
        "mig-configs.b[0]: invalid string input for 'devices': some",
    ]


def test_device_filter_matches_pci_id() -> None:
    """gpu-semantics §4 device-filter: `0x20B210DE` = device id then vendor 10DE; string or list; devices list."""
    cfg = mig.parse(entry('device-filter: "0x20B210DE"\ndevices: [1]\nmig-enabled: false'))
    e = cfg.configs["c"][0]
    assert mig.device_filter_string(A100_80) == "0x20B210DE"
    assert e.matches(1, mig.pci_id(A100_80)) and not e.matches(0, mig.pci_id(A100_80))
    assert not e.matches(1, mig.pci_id(H100))
    many = mig.parse(entry('device-filter: ["0x233010DE", "0x20B210DE"]\ndevices: all\nmig-enabled: false'))
    assert many.configs["c"][0].matches(5, mig.pci_id(H100))


@pytest.mark.parametrize(
    ("wanted", "placements"),
    [
        ({"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}, [("3g.40gb", 4), ("2g.20gb", 0), ("1g.10gb", 2), ("1g.10gb", 3)]),
        ({"4g.40gb": 1, "3g.40gb": 1}, [("4g.40gb", 0), ("3g.40gb", 4)]),
        ({"2g.20gb": 3, "1g.10gb": 1}, [("2g.20gb", 0), ("2g.20gb", 2), ("2g.20gb", 4), ("1g.10gb", 6)]),
    ],
)
def test_layouts_that_fit(wanted: dict[str, int], placements: list[tuple[str, int]]) -> None:
    """gpu-semantics §4 fit check examples on 80GB cards (largest first, backtracking)."""
    got = mig.fit(A100_80, wanted)
    assert got.ok
    assert [(p.profile, p.start) for p in got.placements] == placements


@pytest.mark.parametrize("wanted", [{"3g.40gb": 2, "1g.10gb": 1}, {"2g.20gb": 3, "1g.10gb": 2}])
def test_layouts_that_do_not_fit(wanted: dict[str, int]) -> None:
    """gpu-semantics §4 fit check: `3g:2 + 1g:1` and `2g:3 + 1g:2` do not fit."""
    got = mig.fit(H100, wanted)
    assert not got.ok and got.reason is not None and "does not fit on NVIDIA H100 80GB HBM3" in got.reason


def test_media_extension_uses_base_starts_and_max_one() -> None:
    """gpu-semantics §4 placement table: `+me` at starts 0-6, at most one per GPU."""
    got = mig.fit(A100_80, {"1g.10gb+me": 1, "1g.10gb": 6})
    assert got.ok and len(got.placements) == 7
    too_many = mig.fit(A100_80, {"1g.10gb+me": 2})
    assert too_many.reason == "2 x 1g.10gb+me asked, but at most 1 fit on NVIDIA A100-SXM4-80GB"


def test_a30_four_slices() -> None:
    """gpu-semantics §4 A30-24GB has 4 memory slices: 2g.12gb x2 fits, plus a 1g does not."""
    assert mig.fit(A30, {"2g.12gb": 2}).ok
    assert not mig.fit(A30, {"2g.12gb": 2, "1g.6gb": 1}).ok
    assert mig.fit(A30, {"1g.6gb": 4}).ok


def test_profile_of_another_model_and_non_mig_gpu() -> None:
    """gpu-semantics §4: profiles are per model (1g.5gb is A100-40GB only); T4 is not MIG capable."""
    assert "not available on NVIDIA H100 80GB HBM3" in str(mig.fit(H100, {"1g.5gb": 1}).reason)
    assert mig.fit(T4, {"1g.5gb": 1}).reason == "Tesla T4 is not MIG capable"


def test_default_configs_parse_and_apply_per_model() -> None:
    """gpu-semantics §4 default named configs: all-1g.10gb is 7 on 80GB cards and 4 on A100-40GB."""
    text = mig.default_config_yaml(list(catalog.MODELS.values()))
    cfg = mig.parse(text, source="default-mig-parted-config")
    node = inventory.simulated_inventory("n", A100_80, 2).gpus + inventory.simulated_inventory("m", A100_40, 1).gpus
    gpus = (*node[:2], dataclasses.replace(node[2], index=2))
    result = mig.apply("all-1g.10gb", cfg, gpus)
    assert result.ok
    assert [len(layout.placements) for layout in result.layouts] == [7, 7, 4]
    balanced = mig.apply("all-balanced", cfg, gpus[:1])
    assert sorted(p.profile for p in balanced.layouts[0].placements) == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]


def test_apply_unknown_name_fails_and_disabled_resets() -> None:
    """gpu-semantics §3 mig.config.state: a name not in the file -> failed; all-disabled turns MIG off."""
    cfg = mig.parse(mig.default_config_yaml([H100]))
    gpus = inventory.simulated_inventory("h", H100, 1, layouts={0: mig.fit(H100, {"7g.80gb": 1}).placements}).gpus
    assert mig.apply("all-3g.20gb", cfg, gpus).reason == "selected mig-config not present: all-3g.20gb"
    off = mig.apply("all-disabled", cfg, gpus)
    assert off.ok and off.layouts[0] == mig.GpuLayout(0, False)
    assert mig.apply("all-enabled", cfg, gpus).layouts[0] == mig.GpuLayout(0, True)


def test_apply_impossible_layout_fails_with_reason() -> None:
    """gpu-semantics §4 + issue 3: an impossible layout ends in failed with a reason."""
    cfg = mig.parse(entry('devices: all\nmig-enabled: true\nmig-devices: {"3g.40gb": 2, "1g.10gb": 1}'))
    result = mig.apply("c", cfg, inventory.simulated_inventory("h", H100, 1).gpus)
    assert not result.ok and str(result.reason).startswith("GPU 0: 3g.40gb:2, 1g.10gb:1 does not fit")


def test_apply_skips_gpus_the_filter_does_not_select() -> None:
    """gpu-semantics §4 device-filter: GPUs of other models keep their layout."""
    cfg = mig.parse(entry('device-filter: "0x20B210DE"\ndevices: all\nmig-enabled: true\nmig-devices: {"7g.80gb": 1}'))
    result = mig.apply("c", cfg, inventory.simulated_inventory("h", H100, 1).gpus)
    assert result.layouts == (mig.GpuLayout(0, False),)


def test_simulated_devices_follow_the_layout() -> None:
    """gpu-semantics §4 placement table: MIG devices carry the profile's memory, SMs and placement."""
    fit = mig.fit(H100, {"3g.40gb": 2})
    inv = inventory.simulated_inventory("h", H100, 1, layouts={0: fit.placements})
    devs = inv.gpus[0].mig_devices
    assert [(d.profile, d.placement_start, d.placement_size, d.memory_mib, d.multiprocessors) for d in devs] == [
        ("3g.40gb", 0, 4, 40448, 60),
        ("3g.40gb", 4, 4, 40448, 60),
    ]
    assert devs[0].uuid.startswith("MIG-") and devs[0].uuid != devs[1].uuid
