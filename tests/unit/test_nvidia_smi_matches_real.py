"""The simulated nvidia-smi prints what the real one printed on an H100 80GB HBM3, two H200s and four (driver 580).

Every command recorded in ``tests/fixtures/nvidia-smi/<machine>/commands.tsv`` runs against the machine rebuilt from
its ``device.json``: the exit code must be the recorded one and stdout must match byte for byte once
``nvidia_smi_factories.normalise`` has blanked dates, temperatures, power draw, current clocks, utilisation, memory
in use and per-board identifiers. The few commands the simulator does not render are listed here and must answer
``not simulated`` (exit 3) instead of guessing.
"""

from __future__ import annotations

import pytest

from cluster.gpu import catalog
from cluster.gpu.nvidia_smi import cli
import nvidia_smi_factories as f

pytestmark = pytest.mark.unit

# Recorded, but not rendered: help texts (also what topo, mig and nvlink print alone), XML, the supported-clocks list.
NOT_SIMULATED = {"help", "help-exit", "help-query-gpu", "help-query-apps", "topo", "topo-h", "mig", "mig-h",
                 "mig-i-only", "nvlink", "nvlink-h", "q-xml", "q-supported-clocks"}

CASES = [pytest.param(machine, name, code, args, id=f"{machine}:{name}")
         for machine in f.MACHINES for name, code, args in f.commands(machine)]  # fmt: skip


@pytest.mark.parametrize(("machine", "name", "code", "args"), CASES)
def test_recorded_command(machine: str, name: str, code: int, args: list[str]) -> None:
    """Same exit code, and the same stdout up to the figures that change between runs."""
    result = cli.run(f.recorded_view(machine), args, f.NOW)
    if name in NOT_SIMULATED:
        assert (result.exit_code, result.stdout[:7]) == (cli.NOT_SIMULATED, "gpulab:")
        return
    assert result.exit_code == code
    assert f.normalise(result.stdout) == f.normalise(f.stdout(machine, name))


def test_catalog_agrees_with_the_recorded_devices() -> None:
    """The catalog's name and memory for H100 80GB HBM3 and H200 are what the real devices report."""
    for machine in f.MACHINES:
        for gpu in f.device(machine)["gpus"]:
            model = catalog.by_nvml_name(gpu["name"])
            assert model is not None
            assert (model.nvml_name, model.memory_mib) == (gpu["name"], gpu["memoryTotalMiB"])
            assert "{}.{}".format(*model.compute_capability) == gpu["computeCap"]


def test_normalise_keeps_the_layout() -> None:
    """The normaliser blanks figures only: a wrong column width or border still fails."""
    real = f.stdout("h100-80gb-hbm3-x1", "default")
    shifted = real.replace("|   0  NVIDIA", "|  0   NVIDIA")
    assert f.normalise(shifted) != f.normalise(real)
    assert f.normalise(real.replace("Default |", "Default|")) != f.normalise(real)
