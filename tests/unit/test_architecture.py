"""The folders are the architecture: import-linter keeps the layers, mypy --strict keeps the types."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_import_layers_are_kept() -> None:
    out = subprocess.run([str(BIN / "lint-imports")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout


def test_library_code_is_strictly_typed() -> None:
    out = subprocess.run([str(BIN / "mypy")], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-2000:]


def test_optional_nvml_dependency_is_not_needed_to_import_everything() -> None:
    """pynvml is imported in one place only; the package and CLI work without it."""
    code = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'pynvml' or name.startswith('pynvml.'):\n"
        "            raise ImportError('blocked for the test')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import labs.cli.main, cluster.nvml, cluster.nvml.probe\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    hits = [p for p in (ROOT / "cluster").rglob("*.py") if "import pynvml" in p.read_text()]
    assert [p.name for p in hits] == ["_pynvml.py"], hits
