"""The NVML probe on recorded answers: MIG layouts, MIG disabled, NotSupported, no driver (gpu-semantics §5, §8).

The H100 answers are a real recording (tests/fixtures/nvml/h100-real-probe.json, `gpulab probe --json` on an
H100). The A100, T4 and no-driver fixtures are composed from the reference's facts in the same snapshot format.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cluster.gpu import advertise, catalog
from cluster.nvml import _pynvml, errors, fake, probe, snapshot

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvml"
ROOT = Path(__file__).resolve().parents[2]


def recorded(name: str) -> dict[str, Any]:
    """A snapshot: a bare one, or the one inside a saved `gpulab probe --json` document."""
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data["probe"]["snapshot"] if "probe" in data else data


def run(name: str) -> probe.ProbeResult:
    return probe.probe(fake.FakePynvml(recorded(name)))


def test_a100_mixed_layout() -> None:
    """gpu-semantics §5 MIG devices: profile names from GI profile info, placements from the GPU instance."""
    result = run("a100-80gb-mig-mixed.json")
    g0, g1 = result.inventory.gpus
    assert (g0.mig_capable, g0.mig_enabled, g0.mig_pending) == (True, True, True)
    assert (g1.mig_capable, g1.mig_enabled) == (True, False)
    assert [(m.profile, m.placement_start, m.placement_size, m.memory_mib, m.multiprocessors) for m in g0.mig_devices] == [
        ("3g.40gb", 4, 4, 40192, 42),
        ("2g.20gb", 0, 2, 19968, 28),
        ("1g.10gb", 2, 1, 9728, 14),
        ("1g.10gb", 3, 1, 9728, 14),
    ]
    assert g0.processes[0].gi_id == 2 and g0.processes[0].used_memory_mib == 600
    ad = advertise.advertise(result.inventory, None, "mixed")
    assert ad.capacity == {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-2g.20gb": 1, "nvidia.com/mig-3g.40gb": 1}


def test_a100_empty_mig_slots_are_skipped() -> None:
    """gpu-semantics §5: empty MIG slots answer NotFound and are skipped, as go-nvlib does."""
    fake_nv = fake.FakePynvml(recorded("a100-80gb-mig-mixed.json"))
    result = probe.probe(fake_nv)
    assert len(result.inventory.gpus[0].mig_devices) == 4
    assert fake_nv.calls.count("nvmlDeviceGetMigDeviceHandleByIndex") == 3  # slots 4..6 raised NotFound


def test_h100_mig_disabled_still_lists_profiles() -> None:
    """gpu-semantics §8 (recorded on a real H100): MIG disabled is [0, 0]; profile info answers anyway."""
    result = run("h100-real-probe.json")
    gpu = result.inventory.gpus[0]
    assert (gpu.mig_capable, gpu.mig_enabled, gpu.mig_pending, gpu.mig_devices) == (True, False, False, ())
    names = {p.name: (p.instances, p.placements) for p in result.gpus[0].profiles}
    assert names["1g.10gb"] == (7, tuple((s, 1) for s in range(7)))
    assert names["3g.40gb"] == (2, ((0, 4), (4, 4)))
    assert names["7g.80gb"] == (1, ((0, 8),))
    assert gpu.model == catalog.MODELS["H100-80GB-HBM3"]
    labels = advertise.advertise(result.inventory, None, "none").labels
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.memory"] == "81559"


def test_t4_not_supported_and_mps_server() -> None:
    """gpu-semantics §5: MIG mode on a T4 raises NotSupported -> not capable; an MPS server is flagged."""
    result = run("t4-not-supported.json")
    gpu = result.inventory.gpus[0]
    assert not gpu.mig_capable and not gpu.mig_enabled
    assert result.gpus[0].notes == ("MIG: NotSupported (not a MIG-capable GPU)",)
    assert gpu.compute_mode == "Exclusive_Process"
    assert gpu.mps_server_running and gpu.processes[0].gi_id is None
    assert result.inventory.cuda_driver_version == (12, 2)


def test_no_driver_is_one_clear_error() -> None:
    """gpu-semantics §5 init: NVML_ERROR_LIBRARY_NOT_FOUND -> NvmlUnavailable with exit code 3."""
    with pytest.raises(errors.NvmlUnavailable) as info:
        run("no-driver.json")
    assert "libnvidia-ml.so.1 was not found" in info.value.message
    assert info.value.exit_code == errors.EXIT_NO_GPU == 3


def test_zero_gpus() -> None:
    """A working NVML with no GPU is reported, not mapped to an empty node."""
    with pytest.raises(errors.NvmlUnavailable, match="reports no GPU"):
        probe.from_snapshot({"schema": snapshot.SCHEMA, "devices": []})


@pytest.mark.parametrize("name", ["a100-80gb-mig-mixed.json", "h100-real-probe.json", "t4-not-supported.json"])
def test_snapshot_walk_reproduces_the_recording(name: str, tmp_path: Path) -> None:
    """The NVML walk over a stand-in answers gives back the same snapshot (the stand-in is faithful)."""
    data = recorded(name)
    for d in data["devices"]:
        cls_file = tmp_path / "bus/pci/devices" / d["pci"]["busId"][-12:].lower() / "class"
        cls_file.parent.mkdir(parents=True, exist_ok=True)
        cls_file.write_text(d["pciClass"] + "\n")
    again = snapshot.take(fake.FakePynvml(data), sysfs=tmp_path)
    assert again["devices"] == data["devices"]


@pytest.mark.parametrize(
    ("total_bytes", "mib", "gb"),
    [(85_520_809_984, 9984, 10), (85_520_809_984, 40448, 40), (150_754_820_096, 16384, 18),
     (150_754_820_096, 71424, 71), (40960 * 2**20, 4864, 5), (24576 * 2**20, 5952, 6)],
)
def test_profile_memory_rounding(total_bytes: int, mib: int, gb: int) -> None:
    """gpu-semantics §2: go-nvlib getMigMemorySizeGB rounds the fraction up to eighths of whole GB."""
    assert probe.mig_memory_gb(total_bytes, mib) == gb


def test_works_without_pynvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """Optional dependency: without pynvml the probe says how to install it (exit code 3)."""
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.raises(errors.NvmlUnavailable, match="pynvml is not installed") as info:
        _pynvml.load()
    assert info.value.exit_code == 3


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "labs.cli.main", "probe", *args], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_cli_without_gpu_prints_one_line_and_exits_3() -> None:
    """`gpulab probe` on a machine without a driver: one line, exit code 3, no traceback."""
    done = _cli("--replay", str(FIXTURES / "no-driver.json"))
    assert done.returncode == 3
    assert done.stdout == ""
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr
    assert done.stderr.startswith("gpulab probe: no NVIDIA driver here")


def test_cli_json_document() -> None:
    """`gpulab probe --json` prints the inventory, the derived labels/resources and no drift without --node."""
    done = _cli("--json", "--mig-strategy", "mixed", "--replay", str(FIXTURES / "a100-80gb-mig-mixed.json"))
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["advertisement"]["capacity"]["nvidia.com/mig-1g.10gb"] == 2
    assert doc["advertisement"]["labels"]["feature.node.kubernetes.io/pci-10de.present"] == "true"
    assert doc["drift"] is None and doc["migStrategy"] == "mixed"
    assert doc["probe"]["inventory"]["gpus"][0]["migDevices"][0]["profile"] == "3g.40gb"


def test_cli_bad_config_is_a_clear_error(tmp_path: Path) -> None:
    """A broken --config is reported as the plugin's crash line (exit 1), not a traceback."""
    bad = tmp_path / "ts.yaml"
    bad.write_text("sharing: {timeSlicing: {resources: [{name: gpu, replicas: 1}]}}\n")
    done = _cli("--config", str(bad), "--replay", str(FIXTURES / "t4-not-supported.json"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "number of replicas must be >= 2" in done.stderr
