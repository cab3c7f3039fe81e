"""NVIDIA's own gpu-feature-discovery is the referee for the simulator's GFD labels, label for label.

``tests/fixtures/gfd/h100-80gb-hbm3`` holds what GFD (k8s-device-plugin, the version pinned in
``cluster.versions``, built by ``cluster.nvidiabuild.build_gfd``) wrote on a real NVIDIA H100 80GB HBM3 (driver
580.159.04, MIG disabled, compute mode Default) with ``--oneshot --use-node-feature-api=false --no-timestamp
--driver-root-ctr-path=/ -o FILE``, for the device-plugin configs the course's labs use (``configs/``) and each
``--mig-strategy``. ``record.sh`` is the recording (one read-only device call); ``probe.json`` is the same host
read through gpulab's NVML probe in the same call. File names are ``<config>--<strategy>.labels``: config
``noconfig`` means no ``--config-file``, strategy ``default`` no ``--mig-strategy`` flag (the file decides).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cluster.gpu import device_plugin_config as dpc
from cluster.gpu import gfd_labels
from cluster.nvml import probe
from cluster.sim.gpu import policy

pytestmark = pytest.mark.unit

GFD = Path(__file__).resolve().parents[1] / "fixtures" / "gfd"
HOST = GFD / "h100-80gb-hbm3"
CASES = sorted(HOST.glob("*.labels"))


def _gfd_labels(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line)


def _simulated(case: Path) -> dict[str, str]:
    config_name, strategy = case.stem.split("--")
    text = None if config_name == "noconfig" else (GFD / "configs" / f"{config_name}.yaml").read_text()
    # The labels come from the config the plugin loaded, with the operator's MPS_ROOT (GFD itself does not
    # insist on an MPS root).
    config = dpc.load(text, source=config_name, env_mps_root=policy.DEFAULT_MPS_ROOT)
    result = probe.from_snapshot(json.loads((HOST / "probe.json").read_text())["probe"]["snapshot"])
    chosen = config.flags.mig_strategy if strategy == "default" else strategy
    return gfd_labels.labels(result.inventory, config, chosen, result.machine)


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_simulated_labels_equal_nvidia_gfd(case: Path) -> None:
    """Same host, same config, same strategy: the simulator publishes exactly GFD's labels and values."""
    real, sim = _gfd_labels(case), _simulated(case)
    differ = {k: (real.get(k), sim.get(k)) for k in sorted(real.keys() | sim.keys()) if real.get(k) != sim.get(k)}
    assert differ == {}, f"label: (NVIDIA GFD, simulator) for {case.stem}"


def test_the_recording_covers_the_course_configs() -> None:
    """Every recorded run exited 0, every course config was run, and every strategy without a config."""
    exits = (HOST / "exits.txt").read_text().split("\n")
    assert all(line.endswith(" exit 0") for line in exits if line), exits
    configs = {p.stem for p in (GFD / "configs").glob("*.yaml")}
    recorded = {c.stem.split("--")[0] for c in CASES}
    assert configs | {"noconfig"} == recorded
    assert {c.stem for c in CASES} >= {"noconfig--none", "noconfig--single", "noconfig--mixed", "mig-ts--mixed"}
    assert "NVIDIA H100 80GB HBM3" in (HOST / "host.txt").read_text()
    assert f"version {_pinned()}" in (HOST / "host.txt").read_text()


def _pinned() -> str:
    from cluster import versions

    return versions.DEVICE_PLUGIN_VERSION
