"""The NVML package is read-only: no setter, reset, create or destroy call anywhere in it (issue 4)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[2] / "cluster" / "nvml"
WRITES = re.compile(r"\bnvml\w*?(Set|Reset|Create|Destroy|Clear|Register|Stop|Start)\w*\s*\(")
SHELL = re.compile(r"nvidia-smi\s+(-c|-r|--gpu-reset|-mig|-lgc|-ac|-pl|mig\s+-(cgi|dgi|cci|dci))")


def test_pattern_catches_setters() -> None:
    """The scan itself works: it flags setters and leaves getters alone."""
    assert WRITES.search("nv.nvmlDeviceSetMigMode(h, 1)")
    assert WRITES.search("pynvml.nvmlDeviceResetGpuLockedClocks(h)")
    assert WRITES.search("nv.nvmlDeviceCreateGpuInstance(h, 9)")
    assert not WRITES.search("nv.nvmlDeviceGetMigMode(h)")
    assert SHELL.search("nvidia-smi -c EXCLUSIVE_PROCESS")


def test_no_nvml_writes_in_the_package() -> None:
    """Never call an NVML setter: no MIG mode change, compute mode, reset or clocks."""
    files = sorted(PACKAGE.glob("*.py"))
    assert files, "cluster/nvml has no modules?"
    hits = [f"{f.name}: {m.group(0)}" for f in files for m in WRITES.finditer(f.read_text())]
    hits += [f"{f.name}: {m.group(0)}" for f in files for m in SHELL.finditer(f.read_text())]
    assert hits == []


def test_pynvml_imported_in_one_module() -> None:
    """pynvml is imported only in cluster/nvml/_pynvml.py."""
    root = PACKAGE.parents[1]
    importers = sorted(
        str(f.relative_to(root))
        for f in root.rglob("*.py")
        if ".venv" not in f.parts and "tests" not in f.parts and re.search(r"^\s*(import pynvml|from pynvml)", f.read_text(), re.M)
    )
    assert importers == ["cluster/nvml/_pynvml.py"]
