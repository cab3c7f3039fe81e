"""The folders are the architecture: import-linter keeps the layers, mypy --strict keeps the types.

Whole-tree analysis takes minutes, so it is its own tier (``static``, ``make test-static``), not part of ``unit``."""

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
