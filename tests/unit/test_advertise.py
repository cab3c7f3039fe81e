"""What a node advertises: resources, device IDs and GFD labels (gpu-semantics §1-3)."""

from __future__ import annotations

import dataclasses

import pytest

from cluster.gpu import advertise, catalog, inventory, mig
from cluster.gpu import device_plugin_config as dpc

pytestmark = pytest.mark.unit

A100 = catalog.MODELS["A100-SXM4-80GB"]
A100_40 = catalog.MODELS["A100-SXM4-40GB"]
H100 = catalog.MODELS["H100-80GB-HBM3"]
T4 = catalog.MODELS["T4"]
PREFIX = "error starting plugins: error getting plugins: failed to construct resource managers: error building device map: "


def node(model: catalog.GpuModel, count: int, layouts: dict[int, dict[str, int]] | None = None) -> inventory.NodeInventory:
    placed = {i: mig.fit(model, w).placements for i, w in (layouts or {}).items()}
    return inventory.simulated_inventory("gpu-node", model, count, layouts=placed)


def ts(replicas: int, name: str = "gpu", extra: str = "") -> dpc.DevicePluginConfig:
    return dpc.load(f"sharing:\n  timeSlicing:\n{extra}    resources:\n    - name: {name}\n      replicas: {replicas}\n")


def test_time_slicing_multiplies_capacity() -> None:
    """gpu-semantics §1 replica semantics: 8 GPUs x 10 gives nvidia.com/gpu: 80; labels keep count 8."""
    ad = advertise.advertise(node(A100, 8), ts(10), "none")
    assert ad.capacity == {"nvidia.com/gpu": 80} == ad.allocatable
    assert ad.labels["nvidia.com/gpu.count"] == "8"
    assert ad.labels["nvidia.com/gpu.replicas"] == "10"
    assert ad.labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert ad.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-SHARED"


def test_replica_ids_follow_the_plugin() -> None:
    """gpu-semantics §1 replica semantics: each device becomes `<uuid>::<i>`."""
    inv = node(T4, 1)
    ids = [d.id for d in advertise.advertise(inv, ts(3), "none").devices["nvidia.com/gpu"]]
    assert ids == [f"{inv.gpus[0].uuid}::{i}" for i in range(3)]


def test_rename_by_default_moves_the_resource() -> None:
    """gpu-semantics §1 renameByDefault: 4 GPUs x 4 -> nvidia.com/gpu.shared: 16, no plain nvidia.com/gpu, no -SHARED."""
    ad = advertise.advertise(node(A100, 4), ts(4, extra="    renameByDefault: true\n"), "none")
    assert ad.capacity == {"nvidia.com/gpu.shared": 16}
    assert ad.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"


def test_unhealthy_gpu_lowers_allocatable_only() -> None:
    """Issue 3 faults: an unhealthy GPU lowers allocatable by its replicas while capacity stays."""
    inv = advertise.with_health(node(T4, 4), {2})
    ad = advertise.advertise(inv, ts(4), "none")
    assert ad.capacity == {"nvidia.com/gpu": 16} and ad.allocatable == {"nvidia.com/gpu": 12}


def test_fail_requests_greater_than_one_names_the_advertised_resource() -> None:
    """gpu-semantics §1 failRequestsGreaterThanOne: the quoted name is the advertised one (gpu.shared)."""
    cfg = ts(2, extra="    renameByDefault: true\n    failRequestsGreaterThanOne: true\n")
    assert advertise.advertise(node(T4, 1), cfg, "none").single_request_resources == ("nvidia.com/gpu.shared",)
    assert advertise.advertise(node(T4, 1), ts(2), "none").single_request_resources == ()


def test_strategy_none_advertises_mig_enabled_gpus_whole() -> None:
    """gpu-semantics §2 none: a MIG-enabled GPU is still one whole GPU; no mig.strategy label."""
    ad = advertise.advertise(node(A100, 2, {0: {"1g.10gb": 7}}), None, "none")
    assert ad.capacity == {"nvidia.com/gpu": 2}
    assert "nvidia.com/mig.strategy" not in ad.labels


def test_strategy_single_counts_mig_devices() -> None:
    """gpu-semantics §2 single: nvidia.com/gpu = MIG devices; product -MIG-<profile>, memory of the MIG device."""
    ad = advertise.advertise(node(A100_40, 2, {0: {"1g.5gb": 7}, 1: {"1g.5gb": 7}}), None, "single")
    assert ad.capacity == {"nvidia.com/gpu": 14}
    assert ad.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
    assert ad.labels["nvidia.com/gpu.count"] == "14"
    assert ad.labels["nvidia.com/gpu.memory"] == "4864"
    assert ad.labels["nvidia.com/gpu.multiprocessors"] == "14"
    assert ad.labels["nvidia.com/gpu.slices.gi"] == ad.labels["nvidia.com/gpu.slices.ci"] == "1"
    assert ad.labels["nvidia.com/mig.strategy"] == "single"


@pytest.mark.parametrize(
    ("layouts", "error"),
    [
        ({0: {"1g.10gb": 2, "2g.20gb": 1}, 1: {"1g.10gb": 7}}, "invalid MIG configuration: more than one MIG device type present on node"),
        ({0: {"1g.10gb": 7}}, "all devices on the node must be configured with the same migEnabled value"),
        ({0: {}, 1: {"1g.10gb": 7}}, "invalid MIG configuration: at least one device with migEnabled=true was not configured correctly: device 0 has no MIG devices configured"),
    ],
)
def test_strategy_single_errors_and_invalid_labels(layouts: dict[int, dict[str, int]], error: str) -> None:
    """gpu-semantics §2 single: the plugin fails; GFD labels <model>-MIG-INVALID with count/replicas/memory 0."""
    ad = advertise.advertise(node(A100, 2, layouts), None, "single")
    assert ad.error == PREFIX + error
    assert ad.capacity == {}
    assert ad.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-MIG-INVALID"
    assert [ad.labels[f"nvidia.com/gpu.{k}"] for k in ("count", "replicas", "memory")] == ["0", "0", "0"]


def test_strategy_mixed_resources_and_labels() -> None:
    """gpu-semantics §2 mixed: nvidia.com/gpu only for non-MIG GPUs, mig-<profile> per profile, parents replicas 0."""
    inv = node(A100, 2, {0: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}})
    ad = advertise.advertise(inv, None, "mixed")
    assert ad.capacity == {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-2g.20gb": 1, "nvidia.com/mig-3g.40gb": 1}
    assert ad.labels["nvidia.com/mig-1g.10gb.count"] == "2"
    assert ad.labels["nvidia.com/mig-1g.10gb.product"] == "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"
    assert ad.labels["nvidia.com/mig-3g.40gb.slices.gi"] == "3"
    assert ad.labels["nvidia.com/mig.strategy"] == "mixed"
    all_mig = advertise.advertise(node(A100, 1, {0: {"1g.10gb": 7}}), None, "mixed")
    assert "nvidia.com/gpu" not in all_mig.capacity
    assert all_mig.labels["nvidia.com/gpu.replicas"] == "0"  # the MIG-enabled parent, labelled without sharing


def test_mixed_media_extension_resource_name() -> None:
    """gpu-semantics §2 mixed: `+` becomes `.` in resource names (nvidia.com/mig-1g.10gb.me)."""
    ad = advertise.advertise(node(H100, 1, {0: {"1g.10gb+me": 1}}), None, "mixed")
    assert ad.capacity == {"nvidia.com/mig-1g.10gb.me": 1}
    assert ad.labels["nvidia.com/mig-1g.10gb.me.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gbme"


def test_mixed_sub_ci_profile_is_rejected() -> None:
    """gpu-semantics §2 mixed: a 1c.3g device fails with `does not match any resource patterns`."""
    inv = node(A100, 1, {0: {"3g.40gb": 1}})
    sub = dataclasses.replace(inv.gpus[0].mig_devices[0], profile="1c.3g.40gb")
    inv = dataclasses.replace(inv, gpus=(dataclasses.replace(inv.gpus[0], mig_devices=(sub,)),))
    ad = advertise.advertise(inv, None, "mixed")
    assert ad.error == PREFIX + "error building MIG device map: MIG profile '1c.3g.40gb' does not match any resource patterns"


def test_mixed_empty_mig_gpu_only_warns() -> None:
    """gpu-semantics §2 mixed: empty MIG-enabled GPUs only warn."""
    ad = advertise.advertise(node(A100, 2, {0: {}, 1: {"7g.80gb": 1}}), None, "mixed")
    assert ad.error is None and ad.capacity == {"nvidia.com/mig-7g.80gb": 1}
    assert ad.warnings == ("device 0 has no MIG devices configured",)


def test_time_slicing_mig_resources() -> None:
    """gpu-semantics §1: mig-1g.10gb with 4 replicas gives 28 allocations per GPU (issue 3 done-means)."""
    ad = advertise.advertise(node(A100, 1, {0: {"1g.10gb": 7}}), ts(4, "nvidia.com/mig-1g.10gb"), "mixed")
    assert ad.capacity == {"nvidia.com/mig-1g.10gb": 28}
    assert ad.labels["nvidia.com/mig-1g.10gb.product"] == "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb-SHARED"
    assert ad.labels["nvidia.com/mig-1g.10gb.sharing-strategy"] == "time-slicing"


def test_mps_with_mig_is_rejected() -> None:
    """gpu-semantics §1 MPS with MIG: `sharing using MPS is not supported for MIG devices`; GFD fails too."""
    cfg = dpc.load("flags: {mpsRoot: /run/nvidia/mps}\nsharing: {mps: {resources: [{name: gpu, replicas: 2}]}}\n")
    ad = advertise.advertise(node(A100, 1, {0: {"1g.10gb": 7}}), cfg, "single")
    assert ad.error is not None and ad.error.endswith("failed to create plugin: sharing using MPS is not supported for MIG devices")
    assert ad.gfd_error is not None and ad.gfd_error.endswith("MPS sharing is not supported for mig devices")


def test_mps_replica_cap() -> None:
    """gpu-semantics §1 MPS limits: at most 48 replicas per GPU with CC >= 7.5."""
    cfg = dpc.load("flags: {mpsRoot: /m}\nsharing: {mps: {resources: [{name: gpu, replicas: 49}]}}\n")
    ad = advertise.advertise(node(T4, 1), cfg, "none")
    assert ad.error == "invalid MPS configuration: invalid device maximum allowed replicas exceeded: 49 > 48"
    ok = advertise.advertise(node(T4, 1), dpc.load("flags: {mpsRoot: /m}\nsharing: {mps: {resources: [{name: gpu, replicas: 48}]}}\n"), "none")
    assert ok.capacity == {"nvidia.com/gpu": 48} and ok.labels["nvidia.com/mps.capable"] == "true"
    assert ok.labels["nvidia.com/gpu.sharing-strategy"] == "mps"


def test_strategy_argument_beats_the_file() -> None:
    """gpu-semantics §1 precedence: the ClusterPolicy strategy overrides flags.migStrategy."""
    cfg = dpc.load("flags: {migStrategy: none}\n")
    ad = advertise.advertise(node(A100, 1, {0: {"7g.80gb": 1}}), cfg, "mixed")
    assert ad.capacity == {"nvidia.com/mig-7g.80gb": 1}


def test_full_label_set_for_a_plain_h100() -> None:
    """gpu-semantics §3 label table: product, memory, family, compute, CUDA labels incl. deprecated, mode, machine,
    and ``vgpu.present`` (``DP internal/lm/vgpu.go``; NVIDIA's GFD labels a real H100 so: tests/fixtures/gfd)."""
    ad = advertise.advertise(node(H100, 1), None, "none", machine="PowerEdge XE9680")
    want = {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "1",
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.family": "hopper",
        "nvidia.com/gpu.compute.major": "9",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/gpu.machine": "PowerEdge-XE9680",
        "nvidia.com/gpu.mode": "compute",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mps.capable": "false",
        "nvidia.com/cuda.driver-version.full": "580.95.05",
        "nvidia.com/cuda.driver-version.major": "580",
        "nvidia.com/cuda.driver-version.minor": "95",
        "nvidia.com/cuda.driver-version.revision": "05",
        "nvidia.com/cuda.driver.major": "580",
        "nvidia.com/cuda.driver.minor": "95",
        "nvidia.com/cuda.driver.rev": "05",
        "nvidia.com/cuda.runtime-version.full": "13.0",
        "nvidia.com/cuda.runtime-version.major": "13",
        "nvidia.com/cuda.runtime-version.minor": "0",
        "nvidia.com/cuda.runtime.major": "13",
        "nvidia.com/cuda.runtime.minor": "0",
        "nvidia.com/vgpu.present": "false",
    }
    assert ad.labels == want


def test_t4_is_not_mig_capable() -> None:
    """gpu-semantics §3 mig.capable: false when no GPU is MIG capable; T4 product is Tesla-T4."""
    ad = advertise.advertise(node(T4, 2), None, "none")
    assert ad.labels["nvidia.com/mig.capable"] == "false"
    assert ad.labels["nvidia.com/gpu.product"] == "Tesla-T4"
    assert ad.labels["nvidia.com/gpu.family"] == "turing"


def test_nfd_label() -> None:
    """gpu-semantics §3 other components: NFD's pci-10de.present on GPU nodes only."""
    assert advertise.nfd_labels(node(T4, 1)) == {"feature.node.kubernetes.io/pci-10de.present": "true"}
    assert advertise.nfd_labels(inventory.NodeInventory("cpu", (), "580.1", (13, 0))) == {}


def test_flag_problems_surface_as_plugin_error() -> None:
    """gpu-semantics §1 flag validation: a bad effective strategy crashes the plugin, nothing advertised."""
    ad = advertise.advertise(node(T4, 1), None, "bogus")
    assert ad.error == "error starting plugins: unable to validate flags: unknown MIG strategy: bogus"
    assert ad.capacity == {}
    assert ad.gfd_error is not None and ad.gfd_error.endswith("unknown strategy: bogus")
